"""EI averaged over Laplace draws of the LCM's hyperparameters (issue 45, ``ei_draws``): the draws'
spread against the inverse Hessian of the log posterior taken by second differences of its values
(an independent path: no gradient), the averaged log-EI against the mean of plain EI, and a tuner
whose searches maximise that average while ``ei_draws=0`` leaves the search as it was."""

import numpy as np
import pytest

import gptask as gt
from gptask.model.acquisition import expected_improvement, log_ei, log_ei_averaged
from gptask.model.numerics import LCM
from gptask.model.numerics.defaults import LAPLACE_MAX_SD
from gptask.tuning import Tuner
from gptask.tuning.config import TunerSettings


def one_task_fit(seed: int = 0) -> LCM:
    rng = np.random.default_rng(seed)
    X = rng.random((25, 1))
    y = np.sin(6 * X[:, 0]) + 0.1 * rng.standard_normal(25)
    return LCM().fit([X], [y], restarts=2, seed=seed, calibrate=False)


def theta_of(p) -> np.ndarray:
    return np.concatenate([np.log(p["lengthscale"]).ravel(), p["W"].ravel(), np.log(p["kappa"]).ravel(),
                           np.log(p["noise"]).ravel()])


def params_of(theta: np.ndarray, like) -> dict:
    return {"lengthscale": np.exp(theta[:1]).reshape(1, 1), "W": theta[1:2].reshape(like["W"].shape),
            "kappa": np.exp(theta[2:3]).reshape(1, 1), "noise": np.exp(theta[3:4])}


def test_laplace_draws_spread_as_the_inverse_hessian_of_the_log_posterior():
    model = one_task_fit()
    p0 = model.get_params()
    t0 = theta_of(p0)
    probe = LCM()
    X, y = model.data()
    probe.fit(X, y, restarts=1, seed=0, init=p0, maxiter=1, explore=False, calibrate=False)  # the same prior, s2

    def logpost(theta):
        probe.set_params(params_of(theta, p0))
        return probe.log_posterior()

    h, P = 1e-3, t0.size
    H = np.empty((P, P))
    for a in range(P):
        for b in range(P):
            ea, eb = np.eye(P)[a] * h, np.eye(P)[b] * h
            H[a, b] = -(logpost(t0 + ea + eb) - logpost(t0 + ea - eb) - logpost(t0 - ea + eb)
                        + logpost(t0 - ea - eb)) / (4 * h * h)
    # one task: only W^2 + kappa is identified, a flat direction floored at 1 / LAPLACE_MAX_SD^2 (documented)
    evals, evecs = np.linalg.eigh(H)
    assert evals[0] < 1.0 / LAPLACE_MAX_SD ** 2 < evals[1]
    cov = evecs @ np.diag(1.0 / np.maximum(evals, 1.0 / LAPLACE_MAX_SD ** 2)) @ evecs.T
    draws = np.array([theta_of(d) for d in model.laplace_draws(4000, seed=1)])
    emp = np.cov(draws.T)
    sd = np.sqrt(np.diag(cov))
    np.testing.assert_allclose(np.sqrt(np.diag(emp)), sd, rtol=0.08)
    np.testing.assert_allclose(emp / np.outer(sd, sd), cov / np.outer(sd, sd), atol=0.06)
    np.testing.assert_allclose(draws.mean(axis=0), t0, atol=0.1 * sd.max())


def test_laplace_draws_of_a_widened_fit_are_widened_alike():
    rng = np.random.default_rng(3)
    X = rng.random((12, 2))
    y = X[:, 0] ** 2 + 0.05 * rng.standard_normal(12)
    model = LCM().fit([X], [y], restarts=1, seed=0, calibrate=True)
    scale = model.fit_report.variance_scale
    assert scale > 1.0
    raw = LCM().fit([X], [y], restarts=1, seed=0, calibrate=False)
    for a, b in zip(model.laplace_draws(3, seed=5), raw.laplace_draws(3, seed=5)):
        np.testing.assert_allclose(a["lengthscale"], b["lengthscale"], rtol=1e-6)
        np.testing.assert_allclose(a["noise"], b["noise"] * scale, rtol=1e-6)
        np.testing.assert_allclose(a["kappa"], b["kappa"] * scale, rtol=1e-6)
    assert model.laplace_draws(0) == []
    with pytest.raises(ValueError, match="n must be an integer >= 0, got -1"):
        model.laplace_draws(-1)


def test_log_ei_averaged_is_the_log_of_the_mean_ei():
    rng = np.random.default_rng(0)
    means, stds = rng.normal(size=(5, 40)), rng.uniform(0.05, 2.0, size=(5, 40))
    expect = np.log(np.mean([expected_improvement(m, s, -0.3) for m, s in zip(means, stds)], axis=0))
    np.testing.assert_allclose(log_ei_averaged(means, stds, -0.3), expect, rtol=1e-10)
    far = log_ei_averaged(means + 40.0, stds, -0.3)  # every EI underflows: the log stays finite
    assert np.all(np.isfinite(far)) and np.all(far < -100)


VALUES = list(range(0, 40, 4))


def bowl(t, p):
    return 1.0 + ((p["x"] - (8 if t["gpu"] == "a" else 24)) / 40) ** 2 + (p["y"] / 40) ** 2


def listed_problem() -> gt.Problem:
    return gt.Problem(gt.Space([gt.Categorical("gpu", ["a", "b"])]),
                      gt.Space([gt.Ordinal("x", VALUES), gt.Ordinal("y", VALUES)]), bowl, name="draws")


def run(tuner: Tuner, rounds: int) -> None:
    for _ in range(rounds):
        for t in tuner.ask():
            tuner.tell(t, bowl(tuner.tasks[t.task_index], t.params))


def test_a_tuner_with_draws_maximises_the_averaged_ei():
    prob = listed_problem()
    tuner = Tuner(prob, [{"gpu": "a"}, {"gpu": "b"}], budget=10, seed=0, ei_draws=3)
    run(tuner, 6)
    assert len(tuner.surrogate.draws) == 3 and tuner.surrogate.draw_seconds
    tuner.fit_model()
    tuner._believe_pending()
    view = tuner._search_view
    assert len(view.draws) == 3
    dom = prob.domain({"gpu": "a"})
    X = dom.encode(np.arange(len(dom)))
    acq = view.log_ei(0, view.best[0])
    preds = [m.predict(0, X) for m in (view.model, *view.draws)]
    with np.errstate(divide="ignore"):
        expect = np.log(np.mean([expected_improvement(m, np.sqrt(v), view.best[0]) for m, v in preds], axis=0))
    ok = np.isfinite(expect)  # plain EI underflows at the measured configurations, where log-EI does not
    assert ok.sum() > len(X) // 2
    np.testing.assert_allclose(acq(X)[ok], expect[ok], rtol=1e-8)
    # the draws differ from the fit: the average is not the fit's own EI
    assert not np.allclose(acq(X)[ok], log_ei(preds[0][0], np.sqrt(preds[0][1]), view.best[0])[ok], rtol=1e-3)
    row = tuner._search(0)
    claimed = prob.param_space.encode([t.params for t in tuner.trials_of(0)])
    free = [k for k in range(len(X)) if not any(np.array_equal(X[k], c) for c in claimed)]
    assert np.array_equal(row, X[free][np.argmax(acq(X[free]))]) or tuner.search_among(0) is not None


def test_no_draws_by_default_and_bad_values_refused():
    tuner = Tuner(listed_problem(), [{"gpu": "a"}, {"gpu": "b"}], budget=6, seed=0)
    run(tuner, 4)
    tuner.fit_model()
    tuner._believe_pending()
    assert tuner.surrogate.draws == [] and tuner._search_view.draws == []
    assert tuner._search_view.log_ei(0, 0.0) is None
    with pytest.raises(ValueError, match="ei_draws must be >= 0, got -2"):
        TunerSettings(ei_draws=-2)
