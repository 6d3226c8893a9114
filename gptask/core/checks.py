"""Argument checks at the API boundary shared by the engine, TLA2 and recommendations: a clear
error naming the argument, raised before anything runs."""

from __future__ import annotations

import numbers
from typing import Any

__all__ = ["check_int", "check_seconds"]


def check_int(name: str, value: Any, lo: int) -> int:
    """``value`` as an int >= ``lo``; TypeError/ValueError naming ``name`` otherwise."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, got {value!r}")
    if value < lo:
        raise ValueError(f"{name} must be >= {lo}, got {value}")
    return int(value)


def check_seconds(name: str, value: Any) -> float | None:
    """``value`` as a positive float of seconds, or None; ValueError naming ``name`` otherwise."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not value > 0:
        raise ValueError(f"{name} must be a positive number of seconds or None, got {value!r}")
    return float(value)
