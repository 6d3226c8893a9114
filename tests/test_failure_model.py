"""The failure model (gptask/model/surrogate/failure_model.py) against a known failure region, its Laplace
mode against a direct optimisation of the same posterior, its evidence, gradient and predictions
against GPy's Laplace classifier, and its per-column length scales against inputs that do and do
not decide a failure."""

import math
import warnings

import numpy as np
import pytest
from scipy.optimize import minimize
from scipy.special import log_ndtr

import gptask as gt
from gptask.model.surrogate.failure_model import FailureModel, _evidence_gradient, _fit_laplace
from gptask.data.trials import Status, Trial

PARAMS = gt.Space([gt.Real("a", 0.0, 1.0), gt.Real("b", 0.0, 1.0)])
TASKS = gt.Space([gt.Real("t", 0.0, 1.0)])


def fails(task, p):
    """The known failure region: a + b above a threshold that falls with the task (a bigger task
    runs out of memory with smaller blocks)."""
    return p["a"] + p["b"] > 1.3 - 0.5 * task["t"]


def trials_on(tasks, n, rng):
    out = []
    for i, task in enumerate(tasks):
        for _ in range(n):
            p = {"a": float(rng.random()), "b": float(rng.random())}
            bad = fails(task, p)
            out.append(Trial(len(out) + 1, i, task, p, Status.FAILED if bad else Status.COMPLETE,
                             None if bad else 1.0, reason="out of memory" if bad else ""))
    return out


def test_the_learnt_region_is_the_known_one_on_seen_and_unseen_tasks():
    rng = np.random.default_rng(0)
    tasks = [{"t": 0.0}, {"t": 0.5}, {"t": 1.0}]
    trials = trials_on(tasks, 30, rng)
    assert 0.2 < np.mean([t.status is Status.FAILED for t in trials]) < 0.6
    fm = FailureModel(PARAMS, TASKS)
    fm.update(trials)
    assert fm.active
    g = np.linspace(0.02, 0.98, 25)
    A, B = np.meshgrid(g, g)
    grid = [{"a": float(a), "b": float(b)} for a, b in zip(A.ravel(), B.ravel())]
    X = PARAMS.encode(grid)
    for task in tasks + [{"t": 0.25}, {"t": 0.75}]:  # the last two were never run
        truth = np.array([fails(task, p) for p in grid])
        p_ok = fm.prob_success(task, X)
        accuracy = np.mean((p_ok < 0.5) == truth)
        assert accuracy > 0.9, (task, accuracy)
        margin = np.array([p["a"] + p["b"] - (1.3 - 0.5 * task["t"]) for p in grid])
        deep_fail, deep_ok = p_ok[margin > 0.3], p_ok[margin < -0.3]
        assert np.all(deep_fail < 0.3) and np.all(deep_ok > 0.6)  # the corners have few runs near them
        assert deep_fail.mean() < 0.15 and deep_ok.mean() > 0.85


def test_failures_inside_the_region_are_explained_and_an_isolated_one_is_not():
    rng = np.random.default_rng(1)
    tasks = [{"t": 0.0}, {"t": 1.0}]
    trials = trials_on(tasks, 30, rng)
    # among successes: four runs of its task lie within 0.2 of it, none failed (in the corner at
    # (0.1, 0.1), with two runs near it, the fitted classifier puts P(success) at 0.48: too few
    # neighbours to call a failure there isolated)
    lone = Trial(999, 0, tasks[0], {"a": 0.3, "b": 0.3}, Status.FAILED, reason="node crashed")
    fm = FailureModel(PARAMS, TASKS)
    fm.update(trials + [lone])
    deep = [t for t in trials if t.status is Status.FAILED and t.params["a"] + t.params["b"] > 1.6 - 0.5 * t.task["t"]]
    assert deep and all(fm.explains(t) for t in deep)
    assert not fm.explains(lone)


def test_without_failures_there_is_no_model_and_the_factor_is_one():
    rng = np.random.default_rng(2)
    ok = [t for t in trials_on([{"t": 0.0}], 20, rng) if t.status is Status.COMPLETE]
    fm = FailureModel(PARAMS, TASKS)
    fm.update(ok)
    assert not fm.active
    X = rng.random((7, 2))
    assert np.array_equal(fm.log_prob_success({"t": 0.0}, X), np.zeros(7))
    assert np.array_equal(fm.prob_success({"t": 0.0}, X), np.ones(7))


def test_the_laplace_mode_maximises_the_posterior():
    rng = np.random.default_rng(3)
    X = rng.random((25, 3))
    y = np.where(X[:, 0] + 0.3 * rng.standard_normal(25) > 0.5, 1.0, -1.0)
    inv_ls, scale, mean = np.full(3, 1 / 0.3), 1.5, 0.2
    fit = _fit_laplace(X, y, inv_ls, scale, mean)
    K = fit.kernel(X, X) + 1e-8 * scale ** 2 * np.eye(25)
    Kinv = np.linalg.inv(K)

    def neg_log_post(f):
        r = f - mean
        return 0.5 * r @ Kinv @ r - np.sum(log_ndtr(y * f))

    direct = minimize(neg_log_post, np.full(25, mean), method="BFGS", options={"gtol": 1e-10})
    mode = mean + K @ fit.grad  # the latent mean at the training inputs
    np.testing.assert_allclose(mode, direct.x, atol=1e-4)
    mu, _ = fit.latent(X)
    np.testing.assert_allclose(mu, mode, atol=1e-6)


def _classified(seed, n=40):
    rng = np.random.default_rng(seed)
    X = rng.random((n, 3))
    return X, np.where(X[:, 0] + 0.2 * rng.standard_normal(n) > 0.5, 1.0, -1.0)


def test_evidence_gradient_and_predictions_match_gpy_laplace():
    GPy = pytest.importorskip("GPy")
    X, y = _classified(4)
    ls, s = np.array([0.3, 0.7, 2.0]), 1.5
    fit = _fit_laplace(X, y, 1.0 / ls, s, 0.0)  # GPy's Laplace inference has no mean function
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = GPy.core.GP(X, (y[:, None] > 0).astype(float), kernel=GPy.kern.RBF(3, variance=s * s, lengthscale=ls, ARD=True),
                        likelihood=GPy.likelihoods.Bernoulli(),
                        inference_method=GPy.inference.latent_function_inference.Laplace())
        np.testing.assert_allclose(fit.log_evidence, m.log_likelihood(), rtol=1e-6)
        # GPy's gradient is in the variance and the length scales; ours in their logs
        g_var, g_ls = m.gradient[0], m.gradient[1:]
        np.testing.assert_allclose(_evidence_gradient(fit, y), np.append(ls * g_ls, 2 * s * s * g_var), rtol=1e-4, atol=1e-6)
        Xs = np.random.default_rng(5).random((20, 3))
        np.testing.assert_allclose(np.exp(fit.log_prob_success(Xs)), m.predict(Xs)[0].ravel(), rtol=1e-5)


def test_evidence_gradient_with_a_prior_mean_matches_finite_differences():
    X, y = _classified(6)
    theta = np.log([0.3, 0.7, 2.0, 1.5])

    def evidence(t):
        return _fit_laplace(X, y, np.exp(-t[:-1]), math.exp(t[-1]), 0.4).log_evidence

    fit = _fit_laplace(X, y, np.exp(-theta[:-1]), math.exp(theta[-1]), 0.4)
    fd = [(evidence(theta + 1e-5 * e) - evidence(theta - 1e-5 * e)) / 2e-5 for e in np.eye(4)]
    np.testing.assert_allclose(_evidence_gradient(fit, y), fd, rtol=1e-4, atol=1e-6)


def test_length_scales_are_short_along_the_deciding_input_and_long_along_the_others():
    """Runs fail below a process count (column 1, a thin strip of the unit cube) whatever the
    block size or the thread count: the fitted length scale of that column is the shortest, the
    failed runs are explained, and P(success) in the strip is low everywhere, not only near runs."""
    space = gt.Space([gt.Real("nb", 0.0, 1.0), gt.Real("nproc", 0.0, 1.0), gt.Real("nth", 0.0, 1.0)])
    rng = np.random.default_rng(7)
    trials = []
    for k in range(60):
        p = {"nb": float(rng.random()), "nproc": float(rng.random()), "nth": float(rng.random())}
        bad = p["nproc"] < 0.15
        trials.append(Trial(k + 1, 0, {"t": 0.0}, p, Status.FAILED if bad else Status.COMPLETE,
                            None if bad else 1.0, reason="out of memory" if bad else ""))
    fm = FailureModel(space, TASKS)
    fm.update(trials)
    ls = 1.0 / fm.fitted.inv_ls[:3]
    assert ls[1] < 0.5 * min(ls[0], ls[2]), ls
    assert all(fm.explains(t) for t in trials if t.status is Status.FAILED)
    probe = np.random.default_rng(8).random((400, 3))
    p_ok = fm.prob_success({"t": 0.0}, probe)
    assert np.all(p_ok[probe[:, 1] < 0.08] < 0.3) and np.all(p_ok[probe[:, 1] > 0.3] > 0.7)


def test_above_the_fit_limit_the_failures_and_their_nearest_successes_place_the_same_boundary(monkeypatch):
    import gptask.model.surrogate.failure_model as failure

    rng = np.random.default_rng(5)
    tasks = [{"t": 0.0}, {"t": 0.5}, {"t": 1.0}]
    trials = trials_on(tasks, 100, rng)
    full = FailureModel(PARAMS, TASKS)
    full.update(trials)
    monkeypatch.setattr(failure, "FIT_MAX_POINTS", 120)
    capped = FailureModel(PARAMS, TASKS)
    capped.update(trials)
    assert capped.fitted.X.shape[0] == 120 < len(trials) == full.fitted.X.shape[0]
    g = np.linspace(0.02, 0.98, 25)
    A, B = np.meshgrid(g, g)
    grid = [{"a": float(a), "b": float(b)} for a, b in zip(A.ravel(), B.ravel())]
    X = PARAMS.encode(grid)
    for task in tasks + [{"t": 0.25}]:
        truth = np.array([fails(task, p) for p in grid])
        p_ok = capped.prob_success(task, X)
        assert np.mean((p_ok < 0.5) == truth) > 0.9, task
        assert np.mean((p_ok < 0.5) == (full.prob_success(task, X) < 0.5)) > 0.9, task
    # every failure is judged, also those the capped fit did not see
    failed = [t for t in trials if t.status is Status.FAILED]
    deep = [t for t in failed if t.params["a"] + t.params["b"] > 1.6 - 0.5 * t.task["t"]]
    assert len(failed) > 60 and deep and all(capped.explains(t) for t in deep)


class _SpyFit:
    """Counts the runs of _fit_ard (the grid's best start and the L-BFGS-B search) and their starts."""

    def __init__(self, monkeypatch):
        import gptask.model.surrogate.failure_model as fm
        self.real, self.starts = fm._fit_ard, []
        monkeypatch.setattr(fm, "_fit_ard", self)

    def __call__(self, X, y, mean, starts):
        self.starts.append([np.asarray(s, float) for s in starts])
        return self.real(X, y, mean, starts)


def test_kept_settings_on_the_same_runs_refit_nothing_and_a_changed_run_refits(monkeypatch):
    # issue 46: the classifier's fitted settings, kept as JSON, make a resumed run's fit free
    import json

    spy = _SpyFit(monkeypatch)
    rng = np.random.default_rng(3)
    tasks = [{"t": 0.0}, {"t": 1.0}]
    trials = trials_on(tasks, 25, rng)
    first = FailureModel(PARAMS, TASKS)
    first.update(trials)
    assert len(spy.starts) == 1 and first.last_fit == "fitted"
    kept = json.loads(json.dumps(first.settings()))  # as a history stores it
    g = np.linspace(0.0, 1.0, 15)
    X = PARAMS.encode([{"a": float(a), "b": float(b)} for a in g for b in g])
    again = FailureModel(PARAMS, TASKS)
    assert again.restore(kept)
    again.update(trials)
    assert len(spy.starts) == 1 and again.last_fit == "reused"  # no search ran
    for task in tasks + [{"t": 0.5}]:
        assert np.max(np.abs(again.prob_success(task, X) - first.prob_success(task, X))) < 1e-9
    assert {t.id for t in trials if again.explains(t)} == {t.id for t in trials if first.explains(t)}
    assert again.settings() == kept
    # a changed run (one more failure) is other data: fitted again, from the kept point among the starts
    changed = trials + [Trial(len(trials) + 1, 0, tasks[0], {"a": 0.1, "b": 0.1}, Status.FAILED, None, reason="x")]
    third = FailureModel(PARAMS, TASKS)
    third.restore(kept)
    third.update(changed)
    assert len(spy.starts) == 2 and third.last_fit == "fitted"
    theta = np.array([*kept["log_length_scales"], kept["log_scale"]])
    assert any(np.array_equal(s, theta) for s in spy.starts[1])
    assert third.settings()["data_key"] != kept["data_key"]


def test_settings_that_do_not_read_are_ignored_with_a_warning(caplog):
    fm = FailureModel(PARAMS, TASKS)
    with caplog.at_level("WARNING"):
        assert not fm.restore({"data_key": "x", "log_length_scales": ["a"], "log_scale": 0.0})
        assert not fm.restore({"log_scale": 0.0})
    assert "stored settings do not read" in caplog.text
    assert not fm.restore(None)


def test_a_resumed_tune_reuses_the_classifier_its_history_kept(tmp_path, monkeypatch):
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    from problems_for_tests import failing_problem
    from gptask.data.storage import SQLiteStorage
    from gptask.data.run_header import read_failure_fit

    spy = _SpyFit(monkeypatch)
    fits = []  # (how, probabilities on a grid of x at task t=0.5) of every update that fitted something
    real_update = FailureModel.update

    def update(self, trials):
        before = self.fitted
        real_update(self, trials)
        if self.fitted is not None and self.fitted is not before:
            fits.append((self.last_fit, self.prob_success({"t": 0.5}, np.linspace(0.0, 1.0, 41)[:, None])))

    monkeypatch.setattr(FailureModel, "update", update)
    path = tmp_path / "h.sqlite"
    first = gt.tune(failing_problem(), tasks=2, budget=8, history=path, seed=1, progress=False)
    assert any(r["status"] == Status.FAILED for r in first.history)
    fitted = len(spy.starts)
    assert fitted >= 1 and fits[-1][0] == "fitted"
    with SQLiteStorage(path) as s:
        kept = read_failure_fit(s)
    assert kept is not None and set(kept) == {"data_key", "log_length_scales", "log_scale"}
    n = len(fits)
    gt.tune(failing_problem(), tasks=2, budget=9, history=path, seed=1, progress=False)  # resumed: one more run each
    assert fits[n][0] == "reused"  # the resumed run's first fit: the kept one, no search
    assert np.max(np.abs(fits[n][1] - fits[n - 1][1])) < 1e-9
    assert len(spy.starts) > fitted  # the new runs are new data: fitted again
    with SQLiteStorage(path) as s:
        assert read_failure_fit(s) != kept
