"""A callable constraint judged on whole columns of configurations at once.

A problem's callable constraint (``def fits(c): return c["mb"] * c["p"] <= c["m"]``) takes one
configuration: a dict of plain Python values. Listing a discrete space calls it on every point of
the grid (PDGEQRF on 2 cores: 524,288 points per task, four rules: about 12 s of Python per task
at load 4 before this module, 0.1 s with it; ``python bench/domain_listing.py``). Most such
rules are arithmetic and comparisons that numpy evaluates on whole columns unchanged, so
:func:`callable_mask` first calls the rule once with the columns as arrays and keeps the answer
when it is trustworthy, and calls it per point otherwise:

- the call raises (``if``, ``and``, ``min``, ``math.log``, string methods on an array ...), or
  hits a floating-point error (a division by zero, which per point would raise), or returns
  anything but a bool array of one verdict per point: per point;
- an integer column, a constant or a task value is beyond :data:`COLUMN_INT_MAX` (products could
  overflow int64, which Python's integers never do): per point;
- the array verdicts disagree with per-point calls at up to :data:`COLUMN_CHECK_POINTS` points
  spread over the columns: per point (and logged at debug level).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

__all__ = ["COLUMN_INT_MAX", "COLUMN_CHECK_POINTS", "callable_mask"]

log = logging.getLogger(__name__)

#: the largest integer magnitude of a column judged on whole arrays: a product of three such values
#: stays inside int64 (2**60 < 2**63)
COLUMN_INT_MAX = 2 ** 20
#: the configurations at which the array verdicts are checked against per-point calls
COLUMN_CHECK_POINTS = 64

#: what a rule's failure on one configuration is passed to: (the exception, that configuration)
OnError = Callable[[Exception, dict], None]


def callable_mask(rule: Callable[[dict], Any], base: Mapping[str, Any], columns: Mapping[str, np.ndarray], n: int,
                  on_error: OnError) -> np.ndarray:
    """Which configurations satisfy ``rule``: ``columns`` maps each parameter name to its (n,)
    values, ``base`` holds the values every configuration shares (the problem's constants and the
    task). Returns an (n,) bool array, the verdicts ``bool(rule(point))`` per configuration would
    give (a point whose call raises is False and is passed to ``on_error``)."""
    arrays = {name: np.asarray(col) for name, col in columns.items()}
    whole = _on_columns(rule, base, arrays, n)
    if whole is not None:
        picks = np.unique(np.linspace(0, n - 1, min(n, COLUMN_CHECK_POINTS)).astype(int))
        if np.array_equal(_per_point(rule, base, {k: v[picks] for k, v in arrays.items()}, len(picks), _ignore),
                          whole[picks]):
            return whole
        log.debug("constraint %s gives other verdicts on whole columns than per point: judged per point",
                  getattr(rule, "__name__", rule))
    return _per_point(rule, base, arrays, n, on_error)


def _on_columns(rule: Callable[[dict], Any], base: Mapping[str, Any], arrays: Mapping[str, np.ndarray],
                n: int) -> np.ndarray | None:
    """``rule`` called once on the whole columns: its (n,) bool verdicts, or None when it cannot be."""
    for col in arrays.values():
        if col.dtype.kind not in "biufU" or col.dtype.kind in "iu" and col.size and np.abs(col).max() > COLUMN_INT_MAX:
            return None
    if any(isinstance(v, (int, np.integer)) and not isinstance(v, bool) and abs(v) > COLUMN_INT_MAX
           for v in base.values()):
        return None
    try:
        with np.errstate(all="raise"):
            out = np.asarray(rule({**base, **arrays}))
    except Exception:  # noqa: BLE001 - a rule written for one point: judged per point
        return None
    return out if out.dtype == bool and out.shape == (n,) else None


def _per_point(rule: Callable[[dict], Any], base: Mapping[str, Any], arrays: Mapping[str, np.ndarray], n: int,
               on_error: OnError) -> np.ndarray:
    """``bool(rule(point))`` per configuration, the point's values the plain Python ones a user's
    rule expects (no numpy scalars)."""
    names = list(arrays)
    rows = zip(*(_plain_values(arrays[name]) for name in names)) if names else iter([()] * n)
    out = np.zeros(n, dtype=bool)
    for r, values in enumerate(rows):
        point = {**base, **dict(zip(names, values))}
        try:
            out[r] = bool(rule(point))
        except Exception as exc:  # noqa: BLE001 - any failure of a user rule means "not allowed"
            on_error(exc, point)
    return out


def _plain_values(col: np.ndarray) -> list:
    """A column's values as Python ones: ``tolist`` converts numbers and texts; an object column's
    numpy scalars one by one."""
    values = col.tolist()
    if col.dtype == object:
        values = [v.item() if isinstance(v, np.generic) else v for v in values]
    return values


def _ignore(exc: Exception, point: dict) -> None:
    """The check's per-point calls: a failure is recorded when the rule is judged for real."""
