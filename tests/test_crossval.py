"""Held-out accuracy of a fitted model (gptask.transfer.crossval): the folds re-condition exactly what they say, a
held-out task leaks nothing into its own predictions, the intervals are the right ones, and on data
with a known noise level the figures come out where the noise puts them."""

import math

import numpy as np
import pytest

import gptask as gt
from gptask.transfer.crossval import CVReport, HeldOut, Z95, interval95, leave_one_task_out, within_task_cv
from gptask.model.numerics import LCM
from gptask.model.numerics.defaults import CALIBRATION_MIN
from gptask.results.result import TuningResult
from gptask.model.transforms import OutputTransform

NOISE = 0.1  # log-normal noise of the synthetic measurements


def problem(default=None):
    tasks = gt.Space([gt.Integer("m", 100, 1000)])
    params = gt.Space([gt.Real("x", 0.0, 1.0), gt.Integer("k", 1, 8)])
    return gt.Problem(tasks, params, lambda t, p: truth(t, p), name="cv", default=default)


def truth(task, p):
    return task["m"] / 100 * (1.0 + 2.0 * (p["x"] - task["m"] / 2000) ** 2 + 0.05 * (p["k"] - 3) ** 2)


@pytest.fixture(scope="module")
def fitted():
    rng = np.random.default_rng(1)
    rows = []
    for m in (100, 400, 700, 1000):
        for _ in range(40):
            p = {"x": float(rng.random()), "k": int(rng.integers(1, 9))}
            rows.append({"m": m, **p, "value": truth({"m": m}, p) * math.exp(NOISE * rng.standard_normal())})
    rows.append({"m": 100, "x": 0.5, "k": 4, "value": truth({"m": 100}, {"x": 0.5, "k": 4})})
    return gt.fit(problem(default={"x": 0.5, "k": 4}), rows, restarts=1, output_transform="log")


def test_subset_is_the_model_of_those_tasks_alone(fitted):
    model = fitted.model
    Xs, ys = model.data()
    p = model.get_params()
    keep = [3, 1]
    ref = LCM(model.n_latent, model.kernel, model.rank).condition(
        [Xs[j] for j in keep], [ys[j] for j in keep],
        {"lengthscale": p["lengthscale"], "W": p["W"][:, keep], "kappa": p["kappa"][:, keep], "noise": p["noise"][keep]})
    sub = model.subset(keep)
    X = np.random.default_rng(0).random((5, Xs[0].shape[1]))
    for k in range(2):
        assert np.allclose(sub.predict(k, X)[0], ref.predict(k, X)[0])
        assert np.allclose(sub.predict(k, X)[1], ref.predict(k, X)[1])
    half = model.subset([0], [Xs[0][::2]], [ys[0][::2]])
    assert half.n_points.tolist() == [len(Xs[0][::2])]
    with pytest.raises(ValueError, match="one entry per kept task"):
        model.subset([0, 1], [Xs[0]], [ys[0]])


def _without_fold(fitted, rep, pt):
    """The fitted model re-conditioned by hand without the points of ``pt``'s fold (same
    hyperparameters and prior), each task (all per-task standardised here) standardised on its
    remaining points: the reference of a held-out point's interval, and the units (mean, sd) of
    ``pt``'s task that map the reference's predictions back to the model's units of all data."""
    space = fitted.problem.param_space
    Xs, ys = fitted.model.data()
    assert all(abs(np.mean(y)) < 1e-9 and abs(np.std(y) - 1.0) < 1e-9 for y in ys)
    out = [space.encode([q.params for q in rep.points if q.fold == pt.fold and q.task_index == j])
           for j in range(len(Xs))]
    mask = [~np.any(np.all(np.isclose(X[:, None, :], o[None, :, :]), axis=2), axis=1) if len(o) else
            np.ones(len(X), bool) for X, o in zip(Xs, out)]
    kept = [y[m] for y, m in zip(ys, mask)]
    ref = LCM(fitted.model.n_latent, fitted.model.kernel, fitted.model.rank).condition(
        [X[m] for X, m in zip(Xs, mask)], [(y - y.mean()) / y.std() for y in kept], fitted.model.get_params())
    ref.prior = fitted.model.prior
    return ref, (kept[pt.task_index].mean(), kept[pt.task_index].std())


def test_within_task_folds_hold_every_complete_trial_out_once_and_predict_from_the_rest(fitted):
    rep = within_task_cv(fitted, folds=4, seed=3)
    assert rep.method == "within-task 4-fold"
    held = sorted((p.task_index, tuple(sorted(p.params.items()))) for p in rep.points)
    every = sorted((r["task_index"], tuple(sorted(r["params"].items()))) for r in fitted.history)
    assert held == every
    # reference for one point: the model re-conditioned by hand without that point's fold
    pt = rep.points[-1]
    i, space = pt.task_index, fitted.problem.param_space
    ref, (a, b) = _without_fold(fitted, rep, pt)
    # the intervals are the calibrated predictive's, its factor from the fold's own points
    mean, var = ref.predict_calibrated(i, space.encode([pt.params]), include_noise=True)
    assert ref.calibration_factor() >= CALIBRATION_MIN
    mean, s = a + b * mean, b * math.sqrt(var[0])
    tr = fitted.transform
    assert pt.predicted == pytest.approx(float(tr.backward(i, mean)[0]), rel=1e-9)
    assert pt.lower == pytest.approx(float(tr.backward(i, mean - Z95 * s)[0]), rel=1e-9)
    assert pt.upper == pytest.approx(float(tr.backward(i, mean + Z95 * s)[0]), rel=1e-9)
    s = rep.summary()
    meas = np.array([p.measured for p in rep.points])
    pred = np.array([p.predicted for p in rep.points])
    assert s["mape"] == pytest.approx(np.mean(np.abs(pred - meas) / meas))
    assert s["spearman"] == pytest.approx(np.mean([r["spearman"] for r in rep.by_task()]))


def test_a_measured_zero_leaves_the_relative_error_undefined_not_infinite():
    # an objective crossing zero (a difference, a log-ratio): |pred - 0| / 0 is no figure
    pts = [HeldOut(0, {"x": 0.1}, 0.0, 0.2, -1.0, 1.0, 0), HeldOut(0, {"x": 0.2}, 2.0, 1.0, 0.0, 3.0, 0)]
    assert CVReport("within-task", pts).summary()["mape"] is None
    pts[0] = HeldOut(0, {"x": 0.1}, 4.0, 3.0, 2.0, 5.0, 0)
    assert CVReport("within-task", pts).summary()["mape"] == pytest.approx((0.25 + 0.5) / 2)


def test_figures_match_the_known_noise(fitted):
    s = within_task_cv(fitted).summary()
    # E|exp(0.1 Z) - 1| = 0.080: a model that learnt the function is a little above that
    assert 0.07 < s["mape"] < 0.16
    assert 0.85 <= s["coverage"] <= 1.0
    assert s["spearman"] > 0.8
    with pytest.raises(ValueError, match="folds must be an integer >= 2"):
        within_task_cv(fitted, folds=1)


def test_a_held_out_task_leaks_nothing_into_its_own_predictions(fitted):
    base = leave_one_task_out(fitted)
    # change every value of task 2, in the history and in the model's data, keeping the hyperparameters
    Xs, ys = fitted.model.data()
    ys = [y + (5.0 if j == 2 else 0.0) for j, y in enumerate(ys)]
    model = LCM(fitted.model.n_latent, fitted.model.kernel, fitted.model.rank).condition(
        Xs, ys, fitted.model.get_params())
    history = [t.replace(value=t.value * 7.0) if t.task_index == 2 else t for t in fitted.history]
    changed = leave_one_task_out(TuningResult(fitted.problem, fitted.tasks, history, model, fitted.transform))
    mine = [(p.predicted, p.lower, p.upper) for p in base.points if p.task_index == 2]
    assert mine == [(p.predicted, p.lower, p.upper) for p in changed.points if p.task_index == 2]
    other = [p.predicted for p in base.points if p.task_index == 1]
    assert other != [p.predicted for p in changed.points if p.task_index == 1]
    # the held-out task is predicted as a new one: through gt.predict of a model without it
    assert base.summary()["n_tasks"] == 4 and base.summary()["mape"] < 1.0


def test_ranking_reports_the_top_ranked_and_the_default_against_the_best(fitted):
    rep = leave_one_task_out(fitted)
    rows = rep.ranking()
    pts = [p for p in rep.points if p.task_index == 0]
    best = min(p.measured for p in pts)
    top = min(pts, key=lambda p: p.predicted)
    d = fitted.default(0)[1]
    assert rows[0]["top_over_best"] == pytest.approx(top.measured / best)
    assert rows[0]["default_over_best"] == pytest.approx(d / best)
    assert rows[0]["top_gain"] == pytest.approx((d - top.measured) / d)
    assert rows[1]["default_over_best"] is None  # the default was not measured on task 1


def test_interval95_inverts_the_log_normal_std_exactly():
    mu, s = np.array([-1.0, 0.0, 2.0]), np.array([0.05, 0.3, 1.0])
    tr = OutputTransform(True, np.zeros(1), np.ones(1))
    lo, hi = interval95(True, tr.backward(0, mu), tr.backward_std(0, mu, s))
    assert np.allclose(lo, np.exp(mu - Z95 * s)) and np.allclose(hi, np.exp(mu + Z95 * s))
    lo, hi = interval95(False, np.array([1.0]), np.array([0.5]))
    assert lo[0] == pytest.approx(1.0 - Z95 * 0.5) and hi[0] == pytest.approx(1.0 + Z95 * 0.5)


def test_latent_coverage_is_the_count_of_measurements_inside_the_noise_free_interval(fitted):
    rep = within_task_cv(fitted, folds=4, seed=3)
    # the latent interval of one point, by hand: the model re-conditioned without its fold, no noise
    pt = rep.points[0]
    i, space = pt.task_index, fitted.problem.param_space
    ref, (a, b) = _without_fold(fitted, rep, pt)
    mean, var = ref.predict_calibrated(i, space.encode([pt.params]))
    mean, s, tr = a + b * mean, b * math.sqrt(var[0]), fitted.transform
    assert pt.lower_latent == pytest.approx(float(tr.backward(i, mean - Z95 * s)[0]), rel=1e-9)
    assert pt.upper_latent == pytest.approx(float(tr.backward(i, mean + Z95 * s)[0]), rel=1e-9)
    assert pt.lower <= pt.lower_latent <= pt.predicted <= pt.upper_latent <= pt.upper
    # the pooled and per-task fields: a plain count
    inside = [p.lower_latent <= p.measured <= p.upper_latent for p in rep.points]
    assert rep.summary()["coverage_latent"] == sum(inside) / len(inside)
    for row in rep.by_task():
        mine = [p for p in rep.points if p.task_index == row["task_index"]]
        assert row["coverage_latent"] == sum(p.lower_latent <= p.measured <= p.upper_latent for p in mine) / len(mine)
    # with noise 0.1 on the log scale the latent interval is narrower and covers fewer measurements
    assert rep.summary()["coverage_latent"] < rep.summary()["coverage"]
    assert leave_one_task_out(fitted, tasks=[0], max_points=5).summary()["coverage_latent"] is None


def _scarce_rows(seed, n=5, ms=(100, 400, 700, 1000)):
    """n points per task of ``truth`` at k = 3 with log-normal noise NOISE."""
    rng = np.random.default_rng(seed)
    rows = []
    for m in ms:
        for _ in range(n):
            p = {"x": float(rng.random()), "k": 3}
            rows.append({"m": m, **p, "value": truth({"m": m}, p) * math.exp(NOISE * rng.standard_normal())})
    return rows


def test_within_task_units_come_from_the_folds_remaining_points_at_5_points_per_task():
    """Issue 45: with 5 points per task a held-out point standardised together with its task's other
    points is bounded (|y| <= (n-1)/sqrt(n) = 1.79 sd) and the prior mean was set with it, so the coverage
    came out optimistic (1.00 on these data, against 0.90 by the loop below). Reference: the fold loop by
    hand, from the measured values, each task put in the mean and sd of its fold's remaining points."""
    folds, seed = 5, 0
    fitted = gt.fit(problem(), _scarce_rows(2), restarts=1, output_transform="log", progress=False)
    rep = within_task_cv(fitted, folds=folds, seed=seed)
    model, space = fitted.model, fitted.problem.param_space
    T = len(fitted.tasks)
    trials = [[t for t in fitted.history if t["task_index"] == i] for i in range(T)]
    rng = np.random.default_rng(seed)
    fold = [rng.permutation(len(mine)) % folds for mine in trials]
    X = [space.encode([t["params"] for t in mine]) for mine in trials]
    w = [np.log([t["value"] for t in mine]) for mine in trials]
    inside, intervals = [], {}
    for k in range(folds):
        units = [(w[i][fold[i] != k].mean(), w[i][fold[i] != k].std()) for i in range(T)]
        ref = LCM(model.n_latent, model.kernel, model.rank).condition(
            [X[i][fold[i] != k] for i in range(T)],
            [(w[i][fold[i] != k] - a) / b for i, (a, b) in enumerate(units)], model.get_params())
        ref.prior = model.prior
        for i in range(T):
            h = np.flatnonzero(fold[i] == k)
            if not h.size:
                continue
            m, v = ref.predict_calibrated(i, X[i][h], include_noise=True)
            a, b = units[i]
            centre, half = a + b * m, Z95 * b * np.sqrt(v)
            inside += list(np.abs(w[i][h] - centre) <= half)
            for j, c, r in zip(h, centre, half):
                intervals[(i, trials[i][j]["params"]["x"])] = (math.exp(c - r), math.exp(c), math.exp(c + r))
    assert len(rep.points) == len(inside) == 20
    for p in rep.points:
        lo, mid, hi = intervals[(p.task_index, p.params["x"])]
        assert p.predicted == pytest.approx(mid, rel=1e-9)
        # the widths carry the calibration factor, from fresh fits on each fold's points: the same data up
        # to rounding (standardised twice against once), which the optimiser turns into ~1e-6
        assert (p.lower, p.upper) == pytest.approx((lo, hi), rel=1e-4)
    # 0.90 with the empirical-quantile factor of the time; the upper-bound factor (issue 45, the worst seed)
    # widens these 16-point folds' intervals: what is checked is that the report's intervals are the loop's
    assert rep.summary()["coverage"] == pytest.approx(np.mean(inside))
