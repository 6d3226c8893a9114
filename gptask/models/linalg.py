"""Robust Cholesky factorisation, block extension of a factor, and triangular solves.

Every full factorisation of a covariance matrix in gptask.models goes through
:func:`robust_cholesky`, so tests can count (or intercept) them.
"""

from __future__ import annotations

import logging

import numpy as np
from scipy.linalg import lapack, solve_triangular

from .defaults import JITTER_LEVELS

logger = logging.getLogger(__name__)


class CholeskyError(np.linalg.LinAlgError):
    """The covariance matrix is not positive definite even after adding jitter."""


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
    if not np.all(np.isfinite(diag)) or not np.all(np.isfinite(K)):
        raise CholeskyError(
            f"{what} contains NaN or inf: the hyperparameters are degenerate (overflowing "
            "variances or length scales)"
        )
    L, info = lapack.dpotrf(K, lower=1, clean=1, overwrite_a=0)
    if info == 0:
        return L, 0.0
    scale = float(np.mean(np.abs(diag)))
    if scale <= 0.0:
        scale = 1.0
    for level in JITTER_LEVELS:
        jitter = level * scale
        Kj = K.copy()
        Kj[np.diag_indices(n)] += jitter
        L, info = lapack.dpotrf(Kj, lower=1, clean=1, overwrite_a=1)
        if info == 0:
            logger.debug("%s needed jitter %.3g (%.0e of its mean diagonal)", what, jitter, level)
            return L, jitter
    raise CholeskyError(
        f"{what} of size {n} is not positive definite even with jitter "
        f"{JITTER_LEVELS[-1]:.0e} x mean diagonal ({scale:.3g}): likely duplicated input points "
        "with (near) zero noise, or degenerate hyperparameters (noise ~ 0, huge length scales, "
        "negative or NaN entries)"
    )


def solve_lower(L: np.ndarray, B: np.ndarray) -> np.ndarray:
    """Solve L X = B for lower-triangular L (n, n); B (n,) or (n, m)."""
    return solve_triangular(L, B, lower=True, check_finite=False)


def solve_upper_t(L: np.ndarray, B: np.ndarray) -> np.ndarray:
    """Solve L^T X = B for lower-triangular L (n, n); B (n,) or (n, m)."""
    return solve_triangular(L, B, lower=True, trans="T", check_finite=False)


def _potri_lower(L: np.ndarray) -> np.ndarray:
    """(L L^T)^-1 with only its lower triangle valid (the upper one is L's zero upper part)."""
    inv, info = lapack.dpotri(L, lower=1)
    if info != 0:
        raise CholeskyError(f"inverting the factor failed (LAPACK info={info})")
    return inv


def outer_minus_inverse(alpha: np.ndarray, L: np.ndarray) -> np.ndarray:
    """``alpha alpha^T - (L L^T)^-1`` (n, n), the matrix every likelihood gradient contracts with.

    alpha: (n,); L: (n, n) lower factor with a zero strict upper triangle. Builds the result in
    one output array (no separate full inverse, negation and outer product passes).
    """
    inv = _potri_lower(L)
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
