"""How results are written for people: task labels, values with their unit, gains in percent.

One place, so that the progress lines, ``gptask show``, the apps' tables, ``result.table()`` and
model files all write a task, a value and a gain the same way::

    task_label({"m": 1200, "n": 800})   -> "m=1200,n=800"
    format_value(0.01167, "s")          -> "0.01167 s"
    format_gain(0.4854)                 -> "48.5 %"

This module imports nothing from gptask.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["task_label", "format_value", "format_gain", "format_param", "GAIN_COLUMNS", "check_unit"]

#: columns of a table that hold a gain (a fraction) and are written in percent
GAIN_COLUMNS = frozenset({"gain"})


def _short(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def task_label(task: Mapping[str, Any]) -> str:
    """``{"m": 1200, "n": 800}`` -> ``"m=1200,n=800"`` (reals to 4 significant digits)."""
    return ",".join(f"{k}={_short(v)}" for k, v in task.items())


def format_value(value: float | None, unit: str = "") -> str:
    """A value of the objective to 4 significant digits, followed by its unit ("-" for None)."""
    if value is None:
        return "-"
    return f"{value:.4g}" + (f" {unit}" if unit else "")


def format_gain(gain: float | None) -> str:
    """A gain (a fraction: 0.4854 means 48.5 % less than the default) in percent ("-" for None)."""
    if gain is None:
        return "-"
    return f"{100.0 * gain:.1f} %"


def format_param(value: Any) -> str:
    """A parameter's value for people: a float to 3 significant digits, positional between 1e-3
    and 1e6 (``0.40072399723`` -> ``"0.401"``, ``1234.5`` -> ``"1230"``, ``2.5e-07`` -> ``"2.5e-07"``);
    anything else as ``str``."""
    import math

    if isinstance(value, float) and math.isfinite(value):
        if value == 0.0 or 1e-3 <= abs(value) < 1e6:
            text = f"{float(f'{value:.3g}'):f}".rstrip("0")
            return text[:-1] if text.endswith(".") else text
        return f"{value:.3g}"
    return str(value)


def check_unit(unit: Any) -> str:
    """The unit of a problem's objective ("s", "GB/s", "" for none); a TypeError for a non-string
    and a ValueError for one with a line break or longer than 20 characters."""
    if unit is None:
        return ""
    if not isinstance(unit, str):
        raise TypeError(f"Problem: unit must be a string such as 's', got {unit!r}")
    if len(unit) > 20 or any(c in unit for c in "\r\n\t"):
        raise ValueError(f"Problem: unit must be a short label on one line (at most 20 characters), got {unit!r}")
    return unit.strip()

