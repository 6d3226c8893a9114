"""Single-output GP wrapper against the textbook formulas."""

import numpy as np
import pytest
from scipy.stats import multivariate_normal

from gptask.model.numerics.gp import GP
from gptask.model.numerics.kernels import kernel


def test_gp_matches_textbook_formulas():
    rng = np.random.default_rng(0)
    X = rng.random((12, 2))
    y = np.cos(4 * X[:, 0]) * X[:, 1] + 0.02 * rng.standard_normal(12)
    gp = GP("matern52").fit(X, y, restarts=2, maxiter=200)
    K = gp.variance * kernel("matern52", X, X, gp.lengthscales) + gp.noise * np.eye(12)
    assert gp.log_likelihood() == pytest.approx(
        multivariate_normal(np.zeros(12), K).logpdf(y), rel=1e-10)
    Xt = rng.random((5, 2))
    ks = gp.variance * kernel("matern52", X, Xt, gp.lengthscales)
    mean, var = gp.predict(Xt)
    np.testing.assert_allclose(mean, ks.T @ np.linalg.solve(K, y), rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(var, gp.variance - np.einsum("nm,nm->m", ks, np.linalg.solve(K, ks)),
                               rtol=1e-7, atol=1e-10)


def test_gp_bad_input():
    with pytest.raises(ValueError, match="y has 2 values"):
        GP().fit(np.zeros((3, 1)), np.zeros(2))
