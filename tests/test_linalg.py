"""Robust Cholesky, its error, the block extension and the inverse."""

import numpy as np
import pytest

from gptask.model.numerics.linalg import CholeskyError, chol_extend, outer_minus_inverse, robust_cholesky


def _spd(n, seed=0):
    A = np.random.default_rng(seed).standard_normal((n, n))
    return A @ A.T / n + 0.1 * np.eye(n)


def test_plain_factor_has_no_jitter():
    K = _spd(8)
    L, jitter = robust_cholesky(K)
    assert jitter == 0.0
    np.testing.assert_allclose(L, np.linalg.cholesky(K), rtol=1e-12, atol=1e-14)


def test_singular_matrix_gets_jitter():
    x = np.linspace(0, 1, 5)
    x = np.concatenate([x, x])  # duplicated points, no noise: rank-deficient
    K = np.exp(-0.5 * (x[:, None] - x[None, :]) ** 2 / 0.3**2)
    with pytest.raises(np.linalg.LinAlgError):
        np.linalg.cholesky(K)
    L, jitter = robust_cholesky(K)
    assert jitter > 0
    np.testing.assert_allclose(L @ L.T, K + jitter * np.eye(10), atol=1e-10)


def test_indefinite_matrix_names_the_cause():
    K = np.array([[1.0, 2.0], [2.0, 1.0]])
    with pytest.raises(CholeskyError, match="duplicated input points"):
        robust_cholesky(K)
    assert issubclass(CholeskyError, np.linalg.LinAlgError)


def test_nan_matrix_names_the_cause():
    with pytest.raises(CholeskyError, match="NaN or inf"):
        robust_cholesky(np.array([[1.0, np.nan], [np.nan, 1.0]]))


def test_block_extension_equals_full_factor():
    K = _spd(12, seed=3)
    L11, _ = robust_cholesky(K[:9, :9])
    L21, L22, jitter = chol_extend(L11, K[:9, 9:], K[9:, 9:])
    L = np.zeros((12, 12))
    L[:9, :9], L[9:, :9], L[9:, 9:] = L11, L21, L22
    assert jitter == 0.0
    np.testing.assert_allclose(L, np.linalg.cholesky(K), rtol=1e-10, atol=1e-12)


def test_outer_minus_inverse():
    K = _spd(10, seed=4)
    L, _ = robust_cholesky(K)
    a = np.random.default_rng(5).standard_normal(10)
    np.testing.assert_allclose(outer_minus_inverse(a, L), np.outer(a, a) - np.linalg.inv(K),
                               rtol=1e-9, atol=1e-10)
