"""Proposals while trials are pending (kriging-believer fantasies) and cheap model updates between
full fits (block appends under a frozen transform, a refit when due)."""

import numpy as np
import pytest

import gptask as gt
from gptask.model.acquisition import log_ei
from gptask.model.numerics import LCM
from gptask.data.trials import Status
from gptask.tuning import Tuner
from gptask.model.surrogate.fantasy import with_fantasies

GRID = np.linspace(0.0, 1.0, 2001)[:, None]


def bowl_problem() -> gt.Problem:
    """One real parameter; the minimum moves with the task (x* = 0.3 + 0.4 t)."""
    return gt.Problem(gt.Space([gt.Real("t", 0.0, 1.0)]), gt.Space([gt.Real("x", 0.0, 1.0)]),
                      lambda task, p: 1.0 + (p["x"] - 0.3 - 0.4 * task["t"]) ** 2, name="bowl")


def run_design(tu):
    ev = gt.Evaluator(tu.problem.objective)
    asked = tu.ask(tu.n_tasks * tu.n_initial)
    assert {t.source for t in asked} == {"initial"}
    for t in asked:
        tu.tell(t, ev(t.task, t.params))


def test_with_k_pending_per_task_the_next_proposal_keeps_away_from_them():
    tu = Tuner(bowl_problem(), tasks=[{"t": 0.2}, {"t": 0.7}], budget=12, n_initial=4, seed=0)
    run_design(tu)
    model = tu.fit_model()
    batch = tu.ask(6)  # three rounds: one search per task, then two more with the earlier ones in flight
    assert [t.source for t in batch] == ["search"] * 6 and all(t.status is Status.PENDING for t in batch)
    assert sorted(t.task_index for t in batch) == [0, 0, 0, 1, 1, 1]
    nxt = tu.ask(2)  # the 4th proposal of each task, with 3 of its trials pending
    for i in range(2):
        pend = np.array([t.params["x"] for t in batch if t.task_index == i])
        assert np.min(np.abs(pend[:, None] - pend[None, :]) + np.eye(3)) > 0.02, pend  # spread out
        x = [t.params["x"] for t in nxt if t.task_index == i]
        assert len(x) == 1 and np.min(np.abs(pend - x[0])) > 0.02, (x, pend)
        # brute force on the model without fantasies: its EI maximiser sits on a pending trial,
        # i.e. a search that ignored what is in flight would propose that trial again
        mean, var = model.predict(i, GRID)
        z = tu.transform.forward(i, np.array([r.value for r in tu.records if r.task_index == i]))
        x_plain = GRID[np.argmax(log_ei(mean, np.sqrt(var), float(np.min(z)))), 0]
        assert np.min(np.abs(pend - x_plain)) < 0.002, (x_plain, pend)


def test_fantasies_change_no_mean_and_shrink_the_variance_where_trials_run():
    rng = np.random.default_rng(1)
    X = [rng.random((6, 2)), rng.random((5, 2))]
    y = [np.sin(3 * x[:, 0]) + x[:, 1] for x in X]
    model = LCM(n_latent=2).fit(X, y, restarts=1, seed=0)
    pending = [np.array([[0.5, 0.5], [0.9, 0.1]]), np.empty((0, 2))]
    fmodel, believed = with_fantasies(model, pending)
    assert fmodel is not model and list(fmodel.n_points) == [8, 5] and list(model.n_points) == [6, 5]
    probe = rng.random((50, 2))
    for i in range(2):
        m0, v0 = model.predict(i, probe)
        m1, v1 = fmodel.predict(i, probe)
        np.testing.assert_allclose(m1, m0, atol=1e-8)  # the believer invents no trend, in any task
        assert np.all(v1 <= v0 + 1e-12)
    np.testing.assert_allclose(believed[0], model.predict(0, pending[0])[0])
    _, v_at = fmodel.predict(0, pending[0])
    assert np.all(v_at < 0.05 * model.predict(0, pending[0])[1])  # about the noise where a trial runs
    assert with_fantasies(model, [np.empty((0, 2))] * 2)[0] is model


def test_appends_between_refits_equal_conditioning_under_the_frozen_transform():
    prob = bowl_problem()
    tu = Tuner(prob, tasks=[{"t": 0.2}, {"t": 0.7}], budget=12, n_initial=4, seed=0, refit_every=5)
    run_design(tu)
    tu.fit_model()
    fitted = tu.model
    ev = gt.Evaluator(prob.objective)
    batch = tu.ask(4)
    for t in batch[:3]:
        tu.tell(t, ev(t.task, t.params))
    tu.tell(batch[3], None, "crashed")  # a failed run: imputed, never a number
    model = tu.fit_model()
    assert [u["kind"] for u in tu.updates] == ["fit", "append"]
    assert model.get_params()["lengthscale"].tolist() == fitted.get_params()["lengthscale"].tolist()
    # reference: one factorisation of all data with the same hyperparameters and the frozen map
    X, Y = [], []
    for i in range(2):
        mine = [r for r in tu.records if r.task_index == i]
        z = [float(tu.transform.forward(i, np.array([r.value]))[0]) if r.status is Status.COMPLETE else None
             for r in mine]
        worst = max(v for v in z if v is not None)
        X.append(prob.param_space.encode([r.params for r in mine]))
        Y.append(np.array([worst if v is None else v for v in z]))
    ref = LCM(fitted.n_latent, fitted.kernel).condition(X, Y, params=fitted.get_params())
    for i in range(2):
        np.testing.assert_allclose(model.predict(i, GRID[::50])[0], ref.predict(i, GRID[::50])[0], atol=1e-8)
        np.testing.assert_allclose(model.predict(i, GRID[::50])[1], ref.predict(i, GRID[::50])[1], atol=1e-8)
    # the 5th result since the fit makes a full refit due
    t = tu.ask(1)[0]
    tu.tell(t, ev(t.task, t.params))
    tu.fit_model()
    assert tu.updates[-1]["kind"] == "fit" and "refit every 5" in tu.updates[-1]["reason"]


def test_a_model_that_stops_predicting_is_refitted():
    prob = bowl_problem()
    tu = Tuner(prob, tasks=[{"t": 0.2}, {"t": 0.7}], budget=14, n_initial=4, seed=0, refit_every=None,
               refit_on_drift=True)
    run_design(tu)
    tu.fit_model()
    for k, t in enumerate(tu.ask(4)):  # results nothing like the bowl the model learnt
        tu.tell(t, 50.0 + 40.0 * k)
        tu.fit_model()
    kinds = [u["kind"] for u in tu.updates]
    assert kinds[:3] == ["fit", "append", "append"] and "fit" in kinds[3:], tu.updates
    assert any("stopped predicting" in u["reason"] for u in tu.updates)
    with pytest.raises(ValueError, match="refit_every"):
        Tuner(prob, tasks=2, budget=4, refit_every=0)


@pytest.mark.parametrize("seed", [0, 1])
def test_a_cold_fit_on_many_points_starts_from_a_subset_and_reaches_a_full_fit(seed, monkeypatch, caplog):
    """A cold fit on more than SUBSET_FIT_ABOVE points runs its starts on a subset of each task and
    refines on all the points: its log-likelihood is that of fitting every start on all the points
    (the independent reference: LCM.fit on the model's own data, the same prior and kernel)."""
    import logging

    import gptask.model.numerics.defaults as model_defaults
    from gptask.model.numerics.priors import LCMPrior

    monkeypatch.setattr(model_defaults, "SUBSET_FIT_ABOVE", 100)
    monkeypatch.setattr(model_defaults, "SUBSET_POINTS", 60)
    prob = gt.Problem(gt.Space([gt.Real("t", 0, 1)]), gt.Space([gt.Real("x", 0, 1), gt.Real("y", 0, 1)]),
                      lambda t, p: np.sin(5 * p["x"] + 2 * t["t"]) + (p["y"] - 0.3) ** 2 + 2)
    with caplog.at_level(logging.INFO, logger="gptask.model.surrogate.core"):
        res = gt.tune(prob, [{"t": 0.1}, {"t": 0.5}, {"t": 0.9}], 40, n_initial=40, seed=seed, progress=False,
                      output_transform="none")
    assert any("started from a subset of 60" in r.getMessage() for r in caplog.records)
    Xs, ys = res.model.data()
    full = LCM(res.model.n_latent, res.model.kernel).fit(Xs, ys, restarts=3, seed=seed, prior=LCMPrior(dimension=2.0))
    assert res.model.log_likelihood() >= full.log_likelihood() - 0.5
