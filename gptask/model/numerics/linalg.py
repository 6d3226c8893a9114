"""Robust Cholesky factorisation, block extension of a factor, and triangular solves.

Every full factorisation of a covariance matrix in gptask.model.numerics goes through
:func:`robust_cholesky`, so tests can count (or intercept) them.
"""

from __future__ import annotations

import logging
from typing import Any, Callable

import numpy as np
from scipy.linalg import solve_triangular

from .defaults import JITTER_LEVELS
from .lapack_nogil import potrf_lower, potri_lower, zero_strict_upper

logger = logging.getLogger(__name__)


class CholeskyError(np.linalg.LinAlgError):
    """The covariance matrix is not positive definite even after adding jitter."""


def nonfinite_error(what: str) -> CholeskyError:
    """The error for a covariance matrix holding NaN or inf (shared by every array backend)."""
    return CholeskyError(
        f"{what} contains NaN or inf: the hyperparameters are degenerate (overflowing "
        "variances or length scales)"
    )


def factor_with_jitter(
    try_factor: Callable[[float], Any], n: int, diag_scale: float, what: str = "covariance matrix"
) -> tuple[Any, float]:
    """Jitter escalation shared by every array backend.

    try_factor(jitter) returns the lower Cholesky factor of K + jitter I, or None when that matrix
    is not positive definite; n is K's size and diag_scale the mean absolute diagonal of K. Tries
    jitter 0, then JITTER_LEVELS times diag_scale. Returns (L, jitter); raises CholeskyError naming
    the likely cause when every level fails.
    """
    L = try_factor(0.0)
    if L is not None:
        return L, 0.0
    scale = diag_scale if diag_scale > 0.0 else 1.0
    for level in JITTER_LEVELS:
        jitter = level * scale
        L = try_factor(jitter)
        if L is not None:
            logger.debug("%s needed jitter %.3g (%.0e of its mean diagonal)", what, jitter, level)
            return L, jitter
    raise CholeskyError(
        f"{what} of size {n} is not positive definite even with jitter "
        f"{JITTER_LEVELS[-1]:.0e} x mean diagonal ({scale:.3g}): likely duplicated input points "
        "with (near) zero noise, or degenerate hyperparameters (noise ~ 0, huge length scales, "
        "negative or NaN entries)"
    )


def robust_cholesky(K: np.ndarray, what: str = "covariance matrix") -> tuple[np.ndarray, float]:
    """Lower Cholesky factor of a symmetric matrix, adding diagonal jitter if needed.

    K: (n, n) symmetric; only its lower triangle is read and K is not modified.
    Returns (L, jitter): L (n, n) lower triangular with L L^T = K + jitter I (jitter >= 0 absolute).
    Raises CholeskyError (a numpy LinAlgError) naming the likely cause when all jitter levels fail.
    """
    K = np.asarray(K, dtype=float)
    if K.ndim != 2 or K.shape[0] != K.shape[1]:
        raise ValueError(f"{what} must be square, got shape {K.shape}")
    n = K.shape[0]
    if n == 0:
        return np.zeros((0, 0)), 0.0
    diag = np.diagonal(K)
    # a finite sum means finite entries (one pass, no n x n mask); an overflowing sum is checked
    if not np.isfinite(np.sum(K)) and not np.all(np.isfinite(K)):
        raise nonfinite_error(what)

    def try_factor(jitter: float) -> np.ndarray | None:
        L = np.array(K, order="F")  # a copy: K is not modified
        if jitter != 0.0:
            L[np.diag_indices(n)] += jitter
        if potrf_lower(L) != 0:
            return None
        zero_strict_upper(L)
        return L

    return factor_with_jitter(try_factor, n, float(np.mean(np.abs(diag))), what)


def solve_lower(L: np.ndarray, B: np.ndarray) -> np.ndarray:
    """Solve L X = B for lower-triangular L (n, n); B (n,) or (n, m)."""
    return solve_triangular(L, B, lower=True, check_finite=False)


def solve_upper_t(L: np.ndarray, B: np.ndarray) -> np.ndarray:
    """Solve L^T X = B for lower-triangular L (n, n); B (n,) or (n, m)."""
    return solve_triangular(L, B, lower=True, trans="T", check_finite=False)


def inverse_lower(L: np.ndarray, overwrite: bool = False) -> np.ndarray:
    """(L L^T)^-1 (n, n) from the lower factor L, with only its lower triangle valid (the upper one
    is L's, zero for a factor from robust_cholesky); with overwrite the result may take L's memory
    (L is then destroyed)."""
    inv = L if overwrite and L.dtype == np.float64 and L.flags.f_contiguous and L.flags.writeable \
        else np.array(L, dtype=float, order="F")
    info = potri_lower(inv)
    if info != 0:
        raise CholeskyError(f"inverting the factor failed (LAPACK info={info})")
    return inv


def outer_minus_inverse(alpha: np.ndarray, L: np.ndarray, overwrite: bool = False) -> np.ndarray:
    """``alpha alpha^T - (L L^T)^-1`` (n, n), the matrix every likelihood gradient contracts with.

    alpha: (n,); L: (n, n) lower factor with a zero strict upper triangle. Builds the result in
    one output array (no separate full inverse, negation and outer product passes). With
    overwrite, L's memory is reused for the inverse (L is destroyed): the peak is two n x n arrays.
    """
    inv = inverse_lower(L, overwrite)
    A = np.outer(alpha, alpha)
    A -= inv
    A -= inv.T
    A[np.diag_indices(A.shape[0])] += np.diagonal(inv)
    return A


def chol_extend(
    L11: np.ndarray, K12: np.ndarray, K22: np.ndarray, what: str = "new block"
) -> tuple[np.ndarray, np.ndarray, float]:
    """Extend the factor of K11 = L11 L11^T to [[K11, K12], [K12^T, K22]] without refactoring K11.

    L11: (n, n) lower, K12: (n, m), K22: (m, m). Returns (L21 (m, n), L22 (m, m), jitter) with
    L21 = (L11^-1 K12)^T and L22 L22^T = K22 - L21 L21^T + jitter I. Cost O(n^2 m + n m^2 + m^3).
    """
    L21 = solve_lower(L11, K12).T
    S = K22 - L21 @ L21.T
    L22, jitter = robust_cholesky(S, what=what)
    return L21, L22, jitter
