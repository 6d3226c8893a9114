"""The GIL-free dpotrf/dpotri (gptask.model.numerics.lapack_nogil) against scipy.linalg.lapack's wrappers:
the same routines of the same library, so the same bits; the scipy fallback; input checks."""

import threading

import numpy as np
import pytest
from scipy.linalg import lapack

import gptask.model.numerics.lapack_nogil as nogil
from gptask.model.numerics.linalg import outer_minus_inverse, robust_cholesky


def _spd(n: int, seed: int) -> np.ndarray:
    A = np.random.default_rng(seed).standard_normal((n, n))
    return A @ A.T / n + 0.1 * np.eye(n)


@pytest.fixture(params=["ctypes", "scipy fallback"])
def route(request, monkeypatch):
    if request.param == "ctypes":
        assert nogil._DPOTRF is not None and nogil._DPOTRI is not None, "scipy's Cython LAPACK not found"
    else:
        monkeypatch.setattr(nogil, "_DPOTRF", None)
        monkeypatch.setattr(nogil, "_DPOTRI", None)
    return request.param


@pytest.mark.parametrize("n", [1, 7, 300])
def test_factor_and_inverse_equal_scipy_bit_for_bit(route, n):
    K = _spd(n, n)
    ref_L, info = lapack.dpotrf(K, lower=1, clean=1)
    assert info == 0
    ref_inv, info = lapack.dpotri(ref_L, lower=1)
    assert info == 0
    L = np.array(K, order="F")
    assert nogil.potrf_lower(L) == 0
    nogil.zero_strict_upper(L, block=64)
    np.testing.assert_array_equal(L, ref_L)
    assert nogil.potri_lower(L) == 0
    np.testing.assert_array_equal(np.tril(L), np.tril(ref_inv))
    np.testing.assert_allclose(np.tril(L) + np.tril(L, -1).T, np.linalg.inv(K), rtol=1e-8, atol=1e-10)


def test_not_positive_definite_gives_lapack_info(route):
    K = _spd(5, 1)
    K[3, 3] = -1.0
    L = np.array(K, order="F")
    assert nogil.potrf_lower(L) == 4  # the leading minor of order 4 fails


def test_robust_cholesky_and_gradient_matrix_unchanged():
    """The library's factor and alpha alpha^T - K^-1 are those of scipy's wrappers, bit for bit."""
    K = _spd(120, 3)
    L, jitter = robust_cholesky(K)
    assert jitter == 0.0
    np.testing.assert_array_equal(L, lapack.dpotrf(K, lower=1, clean=1)[0])
    alpha = np.random.default_rng(4).standard_normal(120)
    inv = lapack.dpotri(lapack.dpotrf(K, lower=1, clean=1)[0], lower=1)[0]
    full = np.tril(inv) + np.tril(inv, -1).T
    np.testing.assert_array_equal(outer_minus_inverse(alpha, L.copy(order="F"), overwrite=True),
                                  outer_minus_inverse(alpha, L))
    np.testing.assert_allclose(outer_minus_inverse(alpha, L), np.outer(alpha, alpha) - full, rtol=1e-12, atol=1e-12)


def test_threads_factor_concurrently_with_the_same_results():
    K = [_spd(200, s) for s in range(4)]
    want = [lapack.dpotrf(k, lower=1, clean=1)[0] for k in K]
    got = [None] * 4

    def work(i):
        L = np.array(K[i], order="F")
        assert nogil.potrf_lower(L) == 0
        nogil.zero_strict_upper(L)
        got[i] = L

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("bad", [np.eye(3), np.eye(3, dtype=np.float32, order="F"), np.ones((2, 3), order="F")])
def test_arrays_the_routines_cannot_take_in_place_are_refused(bad):
    with pytest.raises(ValueError, match="Fortran-ordered, square float64"):
        nogil.potrf_lower(bad)
    with pytest.raises(ValueError, match="Fortran-ordered, square float64"):
        nogil.potri_lower(bad)


def test_zero_strict_upper_against_triu():
    A = np.random.default_rng(0).standard_normal((70, 70))
    for block in (1, 16, 64, 256):
        B = A.copy()
        nogil.zero_strict_upper(B, block=block)
        np.testing.assert_array_equal(B, np.tril(A))
