"""Kernels against GPy's RBF / Matern52 (variance 1) and their length-scale derivative factor."""

import GPy
import numpy as np
import pytest

from gptask.model.numerics.kernels import KERNELS, check_kernel, from_sqdist, kernel, scaled_sqdist

GPY = {"rbf": GPy.kern.RBF, "matern52": GPy.kern.Matern52}


@pytest.mark.parametrize("name", KERNELS)
def test_kernel_matches_gpy(name):
    rng = np.random.default_rng(0)
    X1, X2 = rng.random((7, 3)), rng.random((5, 3))
    ls = rng.uniform(0.1, 2.0, 3)
    g = GPY[name](3, variance=1.0, lengthscale=ls, ARD=True)
    np.testing.assert_allclose(kernel(name, X1, X2, ls), g.K(X1, X2), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(kernel(name, X1, X1, ls), g.K(X1), rtol=1e-12, atol=1e-14)
    assert np.allclose(np.diagonal(kernel(name, X1, X1, ls)), 1.0)


@pytest.mark.parametrize("name", KERNELS)
def test_derivative_factor_against_finite_differences(name):
    rng = np.random.default_rng(1)
    X1, X2 = rng.random((6, 2)), rng.random((4, 2))
    X2[0] = X1[0]  # r = 0 included: the factor must stay finite there
    ls = np.array([0.3, 0.8])
    _, F = from_sqdist(name, scaled_sqdist(X1, X2, ls), want_factor=True)
    for dim in range(2):
        h = 1e-6
        lp, lm = ls.copy(), ls.copy()
        lp[dim] += h
        lm[dim] -= h
        fd = (kernel(name, X1, X2, lp) - kernel(name, X1, X2, lm)) / (2 * h)
        delta2 = (X1[:, None, dim] - X2[None, :, dim]) ** 2
        np.testing.assert_allclose(F * delta2 / ls[dim] ** 3, fd, rtol=1e-6, atol=1e-9)
    assert np.all(np.isfinite(F))


def test_paper_convention_mapping():
    # paper eq. (5): exp(-sum (x - x')^2 / l'), ours exp(-sum (x - x')^2 / (2 l^2)): l' = 2 l^2
    rng = np.random.default_rng(2)
    X1, X2 = rng.random((4, 2)), rng.random((3, 2))
    ls = np.array([0.4, 1.3])
    lp = 2 * ls**2
    paper = np.exp(-(((X1[:, None, :] - X2[None, :, :]) ** 2) / lp).sum(-1))
    np.testing.assert_allclose(kernel("rbf", X1, X2, ls), paper, rtol=1e-12)


def test_unknown_kernel():
    with pytest.raises(ValueError, match="kernel must be one of"):
        check_kernel("cubic")


@pytest.mark.parametrize("name", KERNELS)
def test_gram_fast_path_equals_general_kernel(name):
    from gptask.model.numerics.kernels import gram

    rng = np.random.default_rng(3)
    X = rng.random((9, 4))
    ls = rng.uniform(0.05, 3.0, 4)
    K, F = gram(name, X, ls, want_factor=True)
    np.testing.assert_allclose(K, kernel(name, X, X, ls), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(K, K.T, rtol=0, atol=1e-15)
    assert np.all(np.diagonal(K) == 1.0)
    _, F_ref = from_sqdist(name, scaled_sqdist(X, X, ls), want_factor=True)
    np.testing.assert_allclose(F, F_ref, rtol=1e-12, atol=1e-15)
