"""Checks of the models' input and output arrays at their API boundary (shared by LCM and GP)."""

from __future__ import annotations

from typing import Any

import numpy as np


def as_inputs(X: Any, name: str, d: int | None = None) -> np.ndarray:
    """X as a float (n, d) array of n >= 1 finite points in the unit cube [0, 1]^d (d columns when
    given); ValueError naming ``name`` otherwise."""
    try:
        A = np.array(X, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be a numeric (n, d) array: {exc}") from None
    if A.ndim != 2:
        raise ValueError(f"{name} must be a 2-D (n, d) array, got shape {A.shape}")
    if A.shape[0] < 1:
        raise ValueError(f"{name} must contain at least one point, got shape {A.shape}")
    if A.shape[1] < 1:
        raise ValueError(f"{name} must have at least one column, got shape {A.shape}")
    if d is not None and A.shape[1] != d:
        raise ValueError(f"{name} must have {d} columns (the input dimension), got {A.shape[1]}")
    if not np.all(np.isfinite(A)):
        raise ValueError(f"{name} contains NaN or inf")
    lo, hi = float(A.min()), float(A.max())
    if lo < 0.0 or hi > 1.0:
        raise ValueError(f"{name} must lie in the unit cube [0, 1], got values in [{lo:g}, {hi:g}]")
    return A


def as_outputs(y: Any, name: str, n: int) -> np.ndarray:
    """y as a float (n,) array of finite values (an (n, 1) column is flattened); ValueError naming
    ``name`` otherwise."""
    try:
        a = np.array(y, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be a numeric (n,) array: {exc}") from None
    if a.ndim == 2 and a.shape[1] == 1:
        a = a[:, 0]
    if a.ndim != 1:
        raise ValueError(f"{name} must be a 1-D (n,) array, got shape {a.shape}")
    if a.shape[0] != n:
        raise ValueError(f"{name} has {a.shape[0]} values but its X has {n} rows")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name} contains NaN or inf")
    return a
