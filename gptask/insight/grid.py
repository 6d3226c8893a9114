"""Task grids for selection tables, from text: ``m=1000:8000:8,n=1000:8000:8``.

One item per task dimension, separated by commas; each item ``name=SPEC`` where SPEC is

* ``lo:hi:count``: ``count`` evenly spaced values from ``lo`` to ``hi`` (both included);
* ``lo:hi:count:log``: the same on a log scale (``lo > 0``): 128:4096:6:log is 128, 256, ..., 4096;
* ``v1|v2|...``: the listed values (numbers, or the names of a categorical task dimension);
* ``v``: one value.

Values of an integer dimension are rounded to integers (repeats after rounding are dropped). The
grid must name every task dimension, and only those. Values are *not* checked against the task
space here: a point outside the model's range is what the selection table marks as a fallback.
Nothing is evaluated: numbers are read with ``float``.
"""

from __future__ import annotations

import itertools
import math
import re
from typing import Any

import numpy as np

from ..space.dimensions import Categorical, Dimension, Integer, Space

__all__ = ["parse_grid", "grid_points", "GridError", "MAX_POINTS"]

#: the largest grid a table is made for unless asked for more (--max-grid-points): each point not
#: tuned takes a prediction of the model
MAX_POINTS = 100_000
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")


class GridError(ValueError):
    """A grid text that cannot be read; the message names the item and the rule."""


def _number(text: str, item: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise GridError(f"--grid item {item!r}: {text!r} is not a number") from None
    if not math.isfinite(v):
        raise GridError(f"--grid item {item!r}: {text!r} is not a finite number")
    return v


def _too_many(size: int, max_points: int, what: str) -> GridError:
    return GridError(f"--grid {what} {size:,} points, more than the limit of {max_points:,} (each point not tuned "
                     f"takes a prediction of the model): give fewer values or pass --max-grid-points {size} to make "
                     "it anyway")


def _range(spec: str, item: str, max_points: int = MAX_POINTS) -> list[float]:
    parts = spec.split(":")
    if len(parts) not in (3, 4) or (len(parts) == 4 and parts[3] != "log"):
        raise GridError(f"--grid item {item!r}: expected lo:hi:count or lo:hi:count:log, got {spec!r}")
    lo, hi = _number(parts[0], item), _number(parts[1], item)
    try:
        count = int(parts[2])
    except ValueError:
        raise GridError(f"--grid item {item!r}: count must be an integer >= 1, got {parts[2]!r}") from None
    if count < 1:
        raise GridError(f"--grid item {item!r}: count must be an integer >= 1, got {count}")
    if count > max_points:  # refused before the values are made (1e8 of them take minutes)
        raise _too_many(count, max_points, f"item {item!r} alone asks for")
    if not lo <= hi:
        raise GridError(f"--grid item {item!r}: `lo <= hi` must hold, got lo={parts[0]}, hi={parts[1]}")
    if count == 1 and lo != hi:
        raise GridError(f"--grid item {item!r}: one point cannot span {parts[0]}..{parts[1]}; give count >= 2")
    if len(parts) == 4:
        if lo <= 0:
            raise GridError(f"--grid item {item!r}: a log scale needs lo > 0, got lo={parts[0]}")
        return [float(v) for v in np.geomspace(lo, hi, count)]
    return [float(v) for v in np.linspace(lo, hi, count)]


def _values(dim: Dimension, spec: str, item: str, max_points: int = MAX_POINTS) -> list[Any]:
    if isinstance(dim, Categorical):
        if ":" in spec:
            raise GridError(f"--grid item {item!r}: {dim.name} is categorical; list its values as a|b|c")
        out = []
        for text in spec.split("|"):
            try:
                out.append(dim.from_text(text.strip()))
            except ValueError as exc:
                raise GridError(f"--grid item {item!r}: {exc}") from None
        return out
    raw = _range(spec, item, max_points) if ":" in spec else [_number(t.strip(), item) for t in spec.split("|")]
    if isinstance(dim, Integer):
        return list(dict.fromkeys(int(round(v)) for v in raw))
    return list(dict.fromkeys(raw))


def parse_grid(text: str, task_space: Space, max_points: int = MAX_POINTS) -> dict[str, list[Any]]:
    """``{name: [values]}`` in the task space's order, from ``text`` (module docstring). Raises
    :class:`GridError` (a ValueError) naming what is wrong: syntax, an unknown or missing task
    dimension, a repeated one, a bad range, a grid of more than ``max_points`` points (checked
    before the values are made; the message gives the count)."""
    if isinstance(max_points, bool) or not isinstance(max_points, int) or max_points < 1:
        raise GridError(f"--max-grid-points must be an integer >= 1, got {max_points!r}")
    if not isinstance(text, str) or not text.strip():
        raise GridError(f"--grid is empty; give every task dimension, e.g. "
                        f"{','.join(f'{n}=lo:hi:count' for n in task_space.names)}")
    given: dict[str, list[Any]] = {}
    for item in text.split(","):
        name, sep, spec = item.partition("=")
        name, spec = name.strip(), spec.strip()
        if not sep or not _NAME.fullmatch(name) or not spec:
            raise GridError(f"--grid: expected name=lo:hi:count (or name=v1|v2), got {item!r} in {text!r}")
        if name in given:
            raise GridError(f"--grid: task dimension {name!r} given twice in {text!r}")
        if name not in task_space.names:
            raise GridError(f"--grid: {name!r} is not a task dimension of this model; its task dimensions are "
                            f"{task_space.names}")
        given[name] = _values(task_space[name], spec, item, max_points)
    missing = [n for n in task_space.names if n not in given]
    if missing:
        raise GridError(f"--grid must give every task dimension; missing {missing} (task dimensions: "
                        f"{task_space.names})")
    size = math.prod(len(v) for v in given.values())
    if size > max_points:
        raise _too_many(size, max_points, "holds")
    return {n: given[n] for n in task_space.names}


def grid_points(axes: dict[str, list[Any]]) -> list[dict[str, Any]]:
    """Every point of the grid, the last dimension varying fastest."""
    names = list(axes)
    return [dict(zip(names, combo)) for combo in itertools.product(*(axes[n] for n in names))]
