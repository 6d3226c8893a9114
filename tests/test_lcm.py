"""LCM core: gradients vs finite differences, an explicit dense reference, fitting, edge cases,
bad input, save/load and the restart distribution over a (fake, in-process) communicator."""

import threading

import numpy as np
import pytest
from scipy.stats import multivariate_normal

import gptask.model.numerics.lcm as lcm_mod
from gptask.model.numerics import LCM, lml_and_grad
from gptask.model.numerics.kernels import kernel

from lcm_helpers import make_data, random_params

KEYS = ("lengthscale", "W", "kappa", "noise")


def dense_reference(Xs, ys, p, kern):
    """Covariance built entry by entry from the model definition (no vectorised tricks)."""
    X = np.vstack(Xs)
    t = np.concatenate([np.full(len(x), i) for i, x in enumerate(Xs)])
    B = np.einsum("qtr,qsr->qts", p["W"], p["W"]) + np.stack([np.diag(k) for k in p["kappa"]])
    N = len(X)
    K = np.zeros((N, N))
    for n in range(N):
        for m in range(N):
            for q in range(len(B)):
                K[n, m] += B[q, t[n], t[m]] * kernel(kern, X[n : n + 1], X[m : m + 1],
                                                      p["lengthscale"][q])[0, 0]
    return K + np.diag(p["noise"][t]), X, t, B


@pytest.mark.parametrize("kern", ["rbf", "matern52"])
@pytest.mark.parametrize("rank,seed", [(1, 0), (2, 1), (1, 2)])
def test_gradient_matches_finite_differences(kern, rank, seed):
    Xs, ys = make_data([5, 7, 3], d=2, seed=seed)
    p = random_params(Q=2, T=3, d=2, rank=rank, seed=seed)
    _, grads = lml_and_grad(Xs, ys, p, kern)
    for key in KEYS:
        def f(v, key=key):
            q = dict(p)
            q[key] = v.reshape(p[key].shape)
            return lml_and_grad(Xs, ys, q, kern)[0]

        fd = np.array([(f(p[key].ravel() + e) - f(p[key].ravel() - e)) / 2e-6
                       for e in np.eye(p[key].size) * 1e-6])
        np.testing.assert_allclose(grads[key].ravel(), fd, rtol=1e-5, atol=1e-6,
                                   err_msg=f"{kern} {key}")


@pytest.mark.parametrize("kern", ["rbf", "matern52"])
def test_likelihood_and_prediction_match_dense_reference(kern):
    Xs, ys = make_data([4, 6, 2], d=3, seed=4)
    p = random_params(Q=3, T=3, d=3, rank=2, seed=4)
    K, X, t, B = dense_reference(Xs, ys, p, kern)
    y = np.concatenate(ys)
    m = LCM(3, kern, rank=2).condition(Xs, ys, p)
    ref = multivariate_normal(np.zeros(len(y)), K).logpdf(y)
    assert m.log_likelihood() == pytest.approx(ref, rel=1e-10)
    Xt = np.random.default_rng(5).random((5, 3))
    for i in range(3):
        Ks = sum(B[q][t, i][:, None] * kernel(kern, X, Xt, p["lengthscale"][q]) for q in range(3))
        Kss = sum(B[q, i, i] * kernel(kern, Xt, Xt, p["lengthscale"][q]) for q in range(3))
        mean_ref = Ks.T @ np.linalg.solve(K, y)
        cov_ref = Kss - Ks.T @ np.linalg.solve(K, Ks)
        mean, var = m.predict(i, Xt)
        np.testing.assert_allclose(mean, mean_ref, rtol=1e-9, atol=1e-10)
        np.testing.assert_allclose(var, np.diagonal(cov_ref), rtol=1e-8, atol=1e-10)
        _, var_n = m.predict(i, Xt, include_noise=True)
        np.testing.assert_allclose(var_n, var + p["noise"][i], rtol=1e-12)
        mean_c, cov = m.predict_cov(i, Xt)
        np.testing.assert_allclose(cov, cov_ref, rtol=1e-8, atol=1e-10)
        np.testing.assert_allclose(mean_c, mean, rtol=1e-12)


def test_fit_improves_likelihood_and_is_deterministic():
    Xs, ys = make_data([8, 6, 7], d=2, seed=6)
    # the optimiser's winner as it is (calibrate=False: no widening of the variances afterwards, which moves
    # the hyperparameters off the optimum on purpose; tests/test_model_calibration.py checks it)
    m = LCM(2).fit(Xs, ys, restarts=2, seed=3, maxiter=200, calibrate=False)
    start = LCM(2).condition(Xs, ys, random_params(2, 3, 2, seed=0))
    assert m.log_likelihood() > start.log_likelihood()
    assert m.n_tasks == 3 and m.n_latent == 2 and m.input_dim == 2
    assert m.lengthscales.shape == (2, 2)
    m2 = LCM(2).fit(Xs, ys, restarts=2, seed=3, maxiter=200, calibrate=False)
    for key in KEYS:
        np.testing.assert_array_equal(m.get_params()[key], m2.get_params()[key])
    # the fitted state is the model conditioned on the best hyperparameters
    ref = LCM(2).condition(Xs, ys, m.get_params())
    assert m.log_likelihood() == pytest.approx(ref.log_likelihood(), rel=1e-12)
    # the winner is the start with the highest objective: the log posterior (MAP by default)
    assert m.fit_report.map
    assert m.log_posterior() == pytest.approx(np.max(m.fit_report.objective), rel=1e-9)
    # warm start from the fitted model cannot end below it
    m3 = LCM(2).fit(Xs, ys, restarts=1, seed=9, init=m, maxiter=50, calibrate=False)
    assert m3.log_posterior() >= m.log_posterior() - 1e-6 * abs(m.log_posterior())
    # without a prior the same holds for the plain likelihood
    ml = LCM(2).fit(Xs, ys, restarts=2, seed=3, maxiter=200, prior=None)
    assert not ml.fit_report.map and ml.log_prior() == 0.0
    assert ml.log_likelihood() == pytest.approx(np.max(ml.fit_report.objective), rel=1e-9)
    assert ml.log_likelihood() >= m.log_likelihood() - 1e-6 * abs(m.log_likelihood())


def test_fit_respects_bounds():
    Xs, ys = make_data([6, 6], d=2, seed=7)
    m = LCM(1).fit(Xs, ys, restarts=1, maxiter=100)
    p = m.get_params()
    s2 = np.mean(np.concatenate(ys) ** 2)
    assert np.all(p["lengthscale"] >= lcm_mod.LENGTHSCALE_BOUNDS[0] * (1 - 1e-9))
    assert np.all(p["lengthscale"] <= lcm_mod.LENGTHSCALE_BOUNDS[1] * (1 + 1e-9))
    assert np.all(p["noise"] >= lcm_mod.NOISE_BOUNDS_REL[0] * s2 * (1 - 1e-9))


def test_single_task_is_a_plain_gp():
    rng = np.random.default_rng(8)
    X = rng.random((9, 2))
    y = np.sin(5 * X[:, 0]) + 0.05 * rng.standard_normal(9)
    m = LCM(1).fit([X], [y], restarts=2, maxiter=200)
    p = m.get_params()
    var = p["W"][0, 0, 0] ** 2 + p["kappa"][0, 0]
    K = var * kernel("rbf", X, X, p["lengthscale"][0]) + p["noise"][0] * np.eye(9)
    assert m.log_likelihood() == pytest.approx(
        multivariate_normal(np.zeros(9), K).logpdf(y), rel=1e-10)
    Xt = rng.random((4, 2))
    ks = var * kernel("rbf", X, Xt, p["lengthscale"][0])
    np.testing.assert_allclose(m.predict(0, Xt)[0], ks.T @ np.linalg.solve(K, y), rtol=1e-8)


def test_tasks_of_different_sizes_and_one_point_task():
    Xs, ys = make_data([10, 1, 4], d=2, seed=9)
    m = LCM(2).fit(Xs, ys, restarts=2, maxiter=150)
    assert np.isfinite(m.log_likelihood())
    mean, var = m.predict(1, Xs[1])
    assert mean.shape == (1,) and var.shape == (1,) and np.all(var > 0)
    np.testing.assert_array_equal(m.n_points, [10, 1, 4])


def test_duplicated_points_use_jitter():
    Xs, ys = make_data([6, 6], d=2, seed=10)
    Xs = [np.vstack([x, x]) for x in Xs]
    ys = [np.concatenate([y, y]) for y in ys]
    p = random_params(1, 2, 2, seed=10)
    p["noise"] = np.full(2, 1e-300)  # effectively no noise: K is singular
    m = LCM(1).condition(Xs, ys, p)
    assert m.jitter > 0
    assert np.isfinite(m.log_likelihood())
    mean, var = m.predict(0, Xs[0])
    assert np.all(np.isfinite(mean)) and np.all(var > 0)
    np.testing.assert_allclose(mean, ys[0], atol=1e-3)
    # fitting on duplicated data works too (noise floor keeps K positive definite)
    assert np.isfinite(LCM(1).fit(Xs, ys, restarts=1, maxiter=50).log_likelihood())


@pytest.mark.parametrize(
    "X_list,y_list,match",
    [
        ([np.zeros((3, 2)), np.zeros((3, 3))], [np.zeros(3), np.zeros(3)],
         r"X_list\[1\] must have 2"),
        ([np.zeros((3, 2))], [np.zeros(4)], r"y_list\[0\] has 4 values"),
        ([np.zeros((3, 2))], [np.zeros(3), np.zeros(3)], "one entry per task"),
        ([np.full((3, 2), np.nan)], [np.zeros(3)], r"X_list\[0\] contains NaN"),
        ([np.zeros((3, 2))], [np.array([0.0, np.inf, 1.0])], r"y_list\[0\] contains NaN or inf"),
        ([np.full((3, 2), 1.5)], [np.zeros(3)], r"unit cube"),
        ([np.zeros(3)], [np.zeros(3)], r"2-D"),
        ([np.zeros((0, 2))], [np.zeros(0)], r"at least one point"),
        ([], [], "at least one task"),
        (np.zeros((2, 3, 2)), np.zeros((2, 3)), "lists"),
    ],
)
def test_bad_data_raises_value_error(X_list, y_list, match):
    with pytest.raises(ValueError, match=match):
        LCM(1).fit(X_list, y_list, restarts=1)


@pytest.mark.parametrize(
    "kwargs,match",
    [({"n_latent": 0}, "n_latent"), ({"n_latent": 1.5}, "n_latent"), ({"kernel": "exp"}, "kernel"),
     ({"rank": 0}, "rank")],
)
def test_bad_constructor_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        LCM(**kwargs)


def test_bad_calls():
    Xs, ys = make_data([4, 4], seed=11)
    with pytest.raises(ValueError, match="restarts"):
        LCM(1).fit(Xs, ys, restarts=0)
    with pytest.raises(RuntimeError, match="fit"):
        LCM(1).predict(0, Xs[0])
    m = LCM(1).condition(Xs, ys, random_params(1, 2, 2))
    with pytest.raises(ValueError, match="task index"):
        m.predict(2, Xs[0])
    with pytest.raises(ValueError, match="columns"):
        m.predict(0, np.zeros((2, 3)))
    bad = random_params(1, 2, 2)
    bad["noise"] = np.array([0.1, -1.0])
    with pytest.raises(ValueError, match="noise"):
        m.set_params(bad)
    bad = random_params(2, 2, 2)
    with pytest.raises(ValueError, match="shape"):
        m.set_params(bad)
    with pytest.raises(ValueError, match="shape"):
        LCM(1).fit(Xs, ys, restarts=1, init=random_params(1, 3, 2))


def test_set_params_reconditions():
    Xs, ys = make_data([5, 5], seed=12)
    p1, p2 = random_params(1, 2, 2, seed=1), random_params(1, 2, 2, seed=2)
    m = LCM(1).condition(Xs, ys, p1).set_params(p2)
    ref = LCM(1).condition(Xs, ys, p2)
    assert m.log_likelihood() == pytest.approx(ref.log_likelihood(), rel=1e-12)


def test_save_load_round_trip(tmp_path):
    Xs, ys = make_data([5, 3], d=2, seed=13)
    m = LCM(2, "matern52", rank=2).condition(Xs, ys, random_params(2, 2, 2, rank=2, seed=13))
    m = m.extend(np.random.default_rng(0).random((3, 2)), np.zeros(3), restarts=1)
    m.save(tmp_path / "m.npz")
    m2 = LCM.load(tmp_path / "m.npz")
    Xt = np.random.default_rng(1).random((6, 2))
    for i in range(m.n_tasks):
        for a, b in zip(m.predict(i, Xt), m2.predict(i, Xt)):
            np.testing.assert_array_equal(a, b)
    assert m2.log_likelihood() == m.log_likelihood()
    assert (m2.kernel, m2.rank, m2.n_latent, m2.n_tasks) == ("matern52", 2, 2, 3)
    assert m2.prior is None  # conditioned, never fitted: no prior
    fitted = LCM(1).fit(Xs, ys, restarts=1, seed=0)
    fitted.save(tmp_path / "f.npz")
    back = LCM.load(tmp_path / "f.npz")
    assert back.prior == fitted.prior and back.log_posterior() == fitted.log_posterior()
    raw = (tmp_path / "m.npz").read_bytes()
    assert b"pickle" not in raw
    np.savez(tmp_path / "other.npz", meta=np.array('{"format": "x"}'))
    with pytest.raises(ValueError, match="not a gptask LCM"):
        LCM.load(tmp_path / "other.npz")


class ThreadComm:
    """In-process communicator: one instance per 'rank', each used from its own thread."""

    def __init__(self, rank, shared):
        self.rank, self.shared = rank, shared

    def Get_rank(self):
        return self.rank

    def Get_size(self):
        return self.shared["size"]

    def Allgather(self, sendbuf, recvbuf):
        assert isinstance(sendbuf, np.ndarray) and isinstance(recvbuf, np.ndarray)
        self.shared["bufs"][self.rank] = sendbuf.copy()
        self.shared["barrier"].wait()
        for r in range(self.shared["size"]):
            recvbuf[r] = self.shared["bufs"][r]
        self.shared["barrier"].wait()


@pytest.mark.parametrize("size", [2, 3])
def test_restarts_over_fake_communicator_give_the_serial_model(size, monkeypatch):
    Xs, ys = make_data([6, 5], d=2, seed=14)
    serial = LCM(1).fit(Xs, ys, restarts=4, seed=5, maxiter=60)
    calls = {}
    real_minimize = lcm_mod.minimize

    def counting_minimize(*args, **kwargs):
        name = threading.current_thread().name
        calls[name] = calls.get(name, 0) + 1
        return real_minimize(*args, **kwargs)

    monkeypatch.setattr(lcm_mod, "minimize", counting_minimize)
    shared = {"size": size, "bufs": [None] * size, "barrier": threading.Barrier(size)}
    models = [None] * size

    def run(rank):
        models[rank] = LCM(1).fit(Xs, ys, restarts=4, seed=5, maxiter=60,
                                  comm=ThreadComm(rank, shared))

    threads = [threading.Thread(target=run, args=(r,), name=f"rank{r}") for r in range(size)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    # the first round's 4 starts, then (when the post-fit check fired) the exploration round's
    extra = serial.fit_report.n_starts - 4
    assert {k: v for k, v in calls.items()} == {
        f"rank{r}": len(range(r, 4, size)) + len(range(r, extra, size)) for r in range(size)}
    # the "ranks" are threads of one process here: threadpoolctl's BLAS cap is process-wide, so one
    # thread leaving its cap can switch the other to 2 BLAS threads (a different summation order):
    # equal up to rounding, not bit for bit (the mpiexec test checks separate processes)
    for m in models:
        for key in KEYS:
            np.testing.assert_allclose(m.get_params()[key], serial.get_params()[key], rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(m.fit_report.objective, serial.fit_report.objective, rtol=1e-12)


def test_one_tasks_leave_one_out_is_conditioning_on_the_other_points():
    """LCM.loo_task against its definition: the fitted model conditioned on every point but one
    (same hyperparameters), predicting the held-out one with its noise; and against loo()."""
    rng = np.random.default_rng(5)
    X = [rng.random((9, 2)), rng.random((7, 2)), rng.random((8, 2))]
    y = [np.sin(4 * x[:, 0]) + 0.3 * x[:, 1] * (1 + i) + 0.05 * rng.standard_normal(len(x)) for i, x in enumerate(X)]
    model = LCM(n_latent=2).fit(X, y, restarts=1, seed=0)
    observed, mean, var = model.loo_task(1)
    full = model.loo()
    np.testing.assert_allclose(observed, y[1])
    np.testing.assert_allclose(mean, full[1][1], rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(var, full[2][1], rtol=1e-8, atol=1e-12)
    for k in range(len(X[1])):
        keep = np.arange(len(X[1])) != k
        held = LCM(n_latent=2).condition([X[0], X[1][keep], X[2]], [y[0], y[1][keep], y[2]], model.get_params())
        m, v = held.predict(1, X[1][k:k + 1], include_noise=True)
        assert mean[k] == pytest.approx(m[0], rel=1e-6, abs=1e-8) and var[k] == pytest.approx(v[0], rel=1e-6)
    some = model.loo_task(0, at_most=4)  # points 0, 3, 5, 8 of task 0's nine
    np.testing.assert_allclose(some[1], full[1][0][[0, 3, 5, 8]], rtol=1e-8, atol=1e-10)
    with pytest.raises(ValueError, match="task"):
        model.loo_task(3)
    with pytest.raises(ValueError, match="at_most"):
        model.loo_task(0, at_most=0)


def test_a_deterministic_objective_s_noise_on_the_floor_is_no_warning(caplog):
    # issue 40: every fit of a deterministic objective logged a WARNING ("noise ... on the floor;
    # 4 fresh starts"), 256 lines over 20 small runs, even with progress=False
    import logging

    rng = np.random.default_rng(0)
    X = rng.random((20, 3))
    y = 1.0 + X[:, 0] + 0.3 * X[:, 1]
    with caplog.at_level(logging.INFO, logger="gptask.model.numerics.lcm"):
        m = LCM(1).fit([X], [y], restarts=2, seed=0)
    assert any("on the floor" in f for f in m.fit_report.flags_after)  # the case the issue saw
    floor = [r for r in caplog.records if "on the floor" in r.getMessage()]
    assert floor and all(r.levelno == logging.INFO for r in floor)


def test_the_fresh_starts_after_a_noise_on_its_floor_can_be_switched_off(monkeypatch):
    # issue 40: a bench switch (bench/proposers/no_floor_restarts.py) to measure what those starts buy
    import gptask.model.numerics.lcm as lcm

    rng = np.random.default_rng(0)
    X = rng.random((20, 3))
    y = 1.0 + X[:, 0] + 0.3 * X[:, 1]  # deterministic: the noise ends on its floor
    on = LCM(1).fit([X], [y], restarts=2, seed=0)
    assert on.fit_report.explored and on.fit_report.n_starts == 2 + lcm.EXPLORE_RESTARTS
    assert all(f.endswith(lcm.NOISE_FLOOR_FLAG) for f in on.fit_report.flags)
    monkeypatch.setattr(lcm, "EXPLORE_ON_NOISE_FLOOR", False)
    off = LCM(1).fit([X], [y], restarts=2, seed=0)
    assert not off.fit_report.explored and off.fit_report.n_starts == 2
    assert off.fit_report.flags == on.fit_report.flags  # still diagnosed, not explored
    np.testing.assert_array_equal(off.fit_report.objective, on.fit_report.objective[:2])
