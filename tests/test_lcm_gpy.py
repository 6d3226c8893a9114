"""LCM against GPy's LCM (GPy.util.multioutput.LCM + GPCoregionalizedRegression): the same model.

Mapping: GPy's kernel variances are fixed to 1; GPy's B.W / B.kappa / lengthscale / per-output
Gaussian noise take our W[q] / kappa[q] / lengthscale[q] / noise. GPy's exact inference adds 1e-8 to
the diagonal, so GPy's noise is set to ours minus 1e-8 to compare the very same covariance.
Note: GPy's kernel cache is not invalidated when sub-kernel parameters are assigned after the model
is built, so the kernel is configured before the GPy model is constructed.
"""

import warnings

import GPy
import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from gptask.model.numerics import LCM

from lcm_helpers import make_data, random_params

GPY_JITTER = 1e-8
GPY_KERN = {"rbf": GPy.kern.RBF, "matern52": GPy.kern.Matern52}


def gpy_model(Xs, ys, Q, kern, rank, params=None):
    d, T = Xs[0].shape[1], len(Xs)
    kl = [GPY_KERN[kern](d, ARD=True) for _ in range(Q)]
    K = GPy.util.multioutput.LCM(d, T, kl, W_rank=rank)
    parts = [K] if Q == 1 else K.parts
    for q, part in enumerate(parts):
        base = part.parts[0]
        base.variance[:] = 1.0
        base.variance.fix()
        if params is not None:
            base.lengthscale[:] = params["lengthscale"][q]
            part.B.W[:] = params["W"][q]
            part.B.kappa[:] = params["kappa"][q]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # GPy's own overflow chatter only
        g = GPy.models.GPCoregionalizedRegression(Xs, [y[:, None] for y in ys], kernel=K)
    if params is not None:
        for i in range(T):
            noise = getattr(g.mixed_noise, f"Gaussian_noise_{i}").variance
            noise[:] = params["noise"][i] - GPY_JITTER
    return g


@pytest.mark.parametrize("kern,rank,sizes", [("rbf", 1, [5, 7, 4]), ("matern52", 1, [6, 1, 3]),
                                              ("rbf", 2, [4, 4, 8]), ("matern52", 2, [3, 5, 2])])
def test_likelihood_and_predictions_equal_gpy(kern, rank, sizes):
    Q, d = 2, 3
    Xs, ys = make_data(sizes, d=d, seed=len(sizes) + rank)
    p = random_params(Q, len(sizes), d, rank=rank, seed=rank)
    m = LCM(Q, kern, rank=rank).condition(Xs, ys, p)
    g = gpy_model(Xs, ys, Q, kern, rank, p)
    assert m.log_likelihood() == pytest.approx(g.log_likelihood(), rel=1e-6)
    Xt = np.random.default_rng(0).random((7, d))
    for i in range(len(sizes)):
        Xa = np.hstack([Xt, np.full((7, 1), i)])
        meta = {"output_index": np.full((7, 1), i, dtype=int)}
        gm, gv = g.predict_noiseless(Xa, Y_metadata=meta)
        mean, var = m.predict(i, Xt)
        np.testing.assert_allclose(mean, gm[:, 0], rtol=1e-6, atol=1e-8)
        np.testing.assert_allclose(var, gv[:, 0], rtol=1e-6, atol=1e-8)


def test_gpy_gradient_agrees_at_same_point():
    """GPy's own analytic gradient (an independent implementation) equals ours."""
    from gptask.model.numerics import lml_and_grad

    Q, d = 2, 2
    Xs, ys = make_data([5, 6], d=d, seed=3)
    p = random_params(Q, 2, d, seed=3)
    _, ours = lml_and_grad(Xs, ys, p, "rbf")
    g = gpy_model(Xs, ys, Q, "rbf", 1, p)
    for q, part in enumerate(g.kern.parts):
        np.testing.assert_allclose(part.parts[0].lengthscale.gradient, ours["lengthscale"][q],
                                   rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(part.B.W.gradient, ours["W"][q], rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(part.B.kappa.gradient, ours["kappa"][q], rtol=1e-5, atol=1e-7)
    for i in range(2):
        gn = getattr(g.mixed_noise, f"Gaussian_noise_{i}").variance.gradient
        np.testing.assert_allclose(gn, ours["noise"][i], rtol=1e-5, atol=1e-7)


@pytest.fixture(autouse=True)
def one_blas_thread():
    # GPy under a loaded 2-core machine is many times slower with 2 spinning OpenBLAS threads
    with threadpool_limits(limits=1, user_api="blas"):
        yield


@pytest.mark.parametrize("Q,seed", [(1, 0), (1, 2), (2, 2)])
def test_fitted_likelihood_at_least_gpy(Q, seed):
    """Same data, same number of restarts. Our bounds (noise floor 1e-6 s2, length scales
    <= 100) cost at most ~1e-4 nats where GPy drives a noise to 0 or a length scale to infinity."""
    d, restarts = 2, 3
    Xs, ys = make_data([10, 8], d=d, seed=30 + seed, noise=0.1)
    m = LCM(Q).fit(Xs, ys, restarts=restarts, seed=seed, prior=None, explore=False)  # GPy: plain ML
    g = gpy_model(Xs, ys, Q, "rbf", 1)
    np.random.seed(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        g.optimize_restarts(num_restarts=restarts, verbose=False, robust=True)
    assert m.log_likelihood() >= g.log_likelihood() - 1e-3 * max(1.0, abs(g.log_likelihood()))
