"""No collapsed fits (issue 45, item 2): a fit whose winner has a length scale shorter than the gap between
its input's values is refitted with every length scale bounded below by that gap; the floored fit replaces the
collapsed one unless the data overrule the floor (the leave-one-out check, defaults.COLLAPSE_LOO_NATS: the tests at
the end, against brute-force leave-one-out grids; the tests before run the floor kept whatever); the collapse, the
length scales held at the floor and the check are recorded (fit_record: the history, the report).

The data set: one task, nine points on a regular grid of one input (gap 0.125) whose values alternate
(a cosine of period two gaps, plus a slow term). Under the tuner's prior the best explanation is a
length scale a third of the gap (the noise prior makes "noise" dearer than "wiggles between the points"),
1.25 nats above the best length scale of at least the gap. On main the fit kept the collapsed winner: its
one bounded refit, a single start from the collapsed point, missed the floored optimum. Checked against a
brute-force profile of the log posterior over a grid of length scales (the other hyperparameters
maximised by Nelder-Mead from several starts at each grid point, through LCM.condition and
LCM.log_posterior, not the fitting code).
"""

import numpy as np
import pytest
from scipy.optimize import minimize

from gptask.model.numerics import LCM
from gptask.model.numerics import defaults
from gptask.model.numerics import lcm
from gptask.model.numerics.lcm import input_gaps
from gptask.model.numerics.priors import LCMPrior

GAP = 0.125



@pytest.fixture(autouse=True)
def floor_on(monkeypatch):
    """The floored refit from every start, floor at the gap, kept whatever its log posterior and without the
    leave-one-out check (the default adds that check: defaults.COLLAPSE_LOO_NATS; tests at the end)."""
    monkeypatch.setattr(lcm, "LENGTHSCALE_GAP_FLOOR", 1.0)
    monkeypatch.setattr(lcm, "COLLAPSE_KEEP_NATS", None)
    monkeypatch.setattr(lcm, "COLLAPSE_REFIT_EVERY_START", True)
    monkeypatch.setattr(lcm, "COLLAPSE_LOO_NATS", None)

def alternating():
    x = np.linspace(0.0, 1.0, 9)[:, None]
    y = np.cos(8 * np.pi * x[:, 0]) + 0.3 * np.sin(5 * x[:, 0])
    return [x], [(y - y.mean()) / y.std()]


def profile(X, y, lengthscales):
    """The log posterior maximised over W, kappa and the noise at each fixed length scale (brute force)."""
    model = LCM(1, "matern52").fit(X, y, restarts=1, seed=0, explore=False)  # sets the prior and the output scale
    out = []
    for ls in lengthscales:
        def neg(u):
            params = {"lengthscale": np.array([[ls]]), "W": np.array([[[u[0]]]]), "kappa": np.array([[np.exp(u[1])]]),
                      "noise": np.array([np.exp(u[2])])}
            try:
                return -model.condition(X, y, params).log_posterior()
            except (np.linalg.LinAlgError, ValueError):
                return np.inf
        starts = [(1.0, np.log(0.1), np.log(1e-2)), (0.3, np.log(0.01), np.log(0.5)), (1.0, np.log(1.0), np.log(1e-4))]
        out.append(-min(minimize(neg, s, method="Nelder-Mead", options={"xatol": 1e-4, "fatol": 1e-6,
                                                                          "maxiter": 2000}).fun for s in starts))
    return np.array(out)


def test_the_alternating_data_set_prefers_a_length_scale_shorter_than_the_gap():
    X, y = alternating()
    assert input_gaps(X)[0] == pytest.approx(GAP)
    grid = np.exp(np.linspace(np.log(0.02), np.log(20.0), 15))
    lp = profile(X, y, grid)
    assert grid[np.argmax(lp)] < GAP / 2  # the data's own preference: a collapse, whatever the starts
    best_supported = lp[grid >= GAP].max()
    assert 0.5 < lp.max() - best_supported < 2.0  # within defaults.COLLAPSE_NATS (2): main should have refitted
    # the fit: its winner collapsed, it was refitted with the floor and kept that fit, which is the best
    # supported fit of the brute-force profile (to its grid's resolution)
    model = LCM(1, "matern52").fit(X, y, seed=0)
    rep = model.fit_report
    assert rep.collapsed and "input 0" in rep.collapsed[0]
    assert rep.collapse_refit and rep.collapsed_after == () and model.collapsed_lengthscales() == []
    assert model.lengthscales[0, 0] >= GAP * (1 - 1e-9)
    assert rep.lengthscale_floor == pytest.approx((GAP,))
    assert model.log_posterior() >= best_supported - 0.02
    assert model.log_posterior() <= lp.max() + 0.02


def test_without_the_floor_the_collapse_is_only_reported(monkeypatch):
    import gptask.model.numerics.lcm as lcm

    X, y = alternating()
    monkeypatch.setattr(lcm, "LENGTHSCALE_GAP_FLOOR", None)
    model = LCM(1, "matern52").fit(X, y, seed=0)
    assert model.lengthscales[0, 0] < GAP / 2
    assert model.fit_report.collapsed and not model.fit_report.collapse_refit
    record = model.fit_record()
    assert record["collapsed"] and record["collapse_refit"] is False and record["at_floor"] == []


def test_a_length_scale_held_at_its_floor_is_recorded():
    # the same grid with a stronger slow term: the floored fit keeps the wiggles (length scale on its floor,
    # the gap; small noise) and the fit's record says so
    x = np.linspace(0.0, 1.0, 9)[:, None]
    y = 0.5 * np.cos(8 * np.pi * x[:, 0]) + np.sin(5 * x[:, 0])
    model = LCM(1, "matern52").fit([x], [(y - y.mean()) / y.std()], seed=0)
    rep = model.fit_report
    assert rep.collapsed and rep.collapse_refit
    assert model.lengthscales[0, 0] == pytest.approx(GAP, rel=defaults.BOUND_TOL_LOG)
    assert len(rep.at_floor) == 1 and "input 0" in rep.at_floor[0] and "floor" in rep.at_floor[0]
    record = model.fit_record()
    assert record["at_floor"] == list(rep.at_floor) and record["collapsed"] == []


def test_every_fits_diagnostics_reach_the_history_and_the_report(history_location):
    # the first fits after the initial design are the ones that steer the search (gen:1016 seed 4): the history
    # keeps each fit's record and the report names the fits that collapsed, were refitted, or were left so
    from gptask.data.storage import open_storage
    from gptask.insight.sections import _fits_note

    X, y = alternating()
    refitted = LCM(1, "matern52").fit(X, y, seed=0).fit_record()
    plain = LCM(1, "matern52").fit(X, y, seed=0, explore=False)
    left = {**plain.fit_record(), "collapsed": plain.collapsed_lengthscales()}
    assert left["collapsed"] and not left["collapse_refit"]
    sound = {**refitted, "collapse_refit": False, "at_floor": []}
    with open_storage(str(history_location), signature={"name": "collapse"}) as h:
        for k, rec in enumerate([refitted, left, sound]):
            h.add_model(k + 1, {"lengthscale": rec["lengthscales"], "diagnostics": rec}, -1.0)
        h.add_model(4, {"lengthscale": [[1.0]]}, -1.0)  # a model stored before fits were recorded
    with open_storage(str(history_location), signature={"name": "collapse"}) as h:  # each backend reads them back
        fits = h.fit_diagnostics()
    assert fits == [refitted, left, sound, {}]
    note = _fits_note(fits)
    assert "fits 1, 2 of 4" in note and "refitted with every length scale at least that gap: fit 1" in note
    assert "left collapsed: fit 2" in note
    assert _fits_note([sound, {}]) == ""


# ---- the leave-one-out check (defaults.COLLAPSE_LOO_NATS): the data can overrule the floor ---------------------


@pytest.fixture
def default_rule(monkeypatch):
    """The default collapse rule, whatever floor_on set for the tests above."""
    for name in ("LENGTHSCALE_GAP_FLOOR", "COLLAPSE_KEEP_NATS", "COLLAPSE_REFIT_EVERY_START", "COLLAPSE_LOO_NATS"):
        monkeypatch.setattr(lcm, name, getattr(defaults, name))


def brute_loo(X, y, lengthscales):
    """(len(lengthscales),) the leave-one-out log predictive density per point (nats) of one task's data at each
    fixed length scale, W, kappa and the noise maximising the log posterior there (Nelder-Mead from two starts),
    each point predicted by a model conditioned on the others (LCM.condition and LCM.predict: no closed form)."""
    model = LCM(1, "matern52").fit([X], [y], restarts=1, seed=0, explore=False)  # sets the prior and the output scale
    n, out = len(y), []
    for ls in lengthscales:
        def params(u):
            return {"lengthscale": np.array([[ls]]), "W": np.array([[[u[0]]]]), "kappa": np.array([[np.exp(u[1])]]),
                    "noise": np.array([np.exp(u[2])])}

        def neg(u):
            try:
                return -model.condition([X], [y], params(u)).log_posterior()
            except (np.linalg.LinAlgError, ValueError):
                return np.inf
        best = min((minimize(neg, s, method="Nelder-Mead", options={"xatol": 1e-4, "fatol": 1e-6, "maxiter": 1000})
                    for s in [(1.0, np.log(0.1), np.log(1e-2)), (0.3, np.log(0.01), np.log(0.5))]), key=lambda r: r.fun)
        lpd = []
        for k in range(n):
            rest = np.arange(n) != k
            mean, var = LCM(1, "matern52").condition([X[rest]], [y[rest]], params(best.x)).predict(
                0, X[k:k + 1], include_noise=True)
            lpd.append(-0.5 * np.log(2 * np.pi * var[0]) - 0.5 * (y[k] - mean[0]) ** 2 / var[0])
        out.append(np.mean(lpd))
    return np.array(out)


def clustered_short():
    """A function of length scale far below the mean gap, sampled as a tuner does: 8 clusters of 3 points 0.012 apart
    (mean gap 0.040); the pairs inside a cluster resolve the short scale."""
    x = np.sort(np.concatenate([c + np.array([-0.012, 0.0, 0.012]) for c in np.linspace(0.05, 0.95, 8)]))[:, None]
    y = np.sin(2 * np.pi * x[:, 0] / 0.06)
    return x, (y - y.mean()) / y.std()


def smooth_noisy():
    """A smooth function (period 1.4) with noise on a grid of 16 points (gap 0.067): under the prior the best fit
    explains the noise as wiggles shorter than the gap."""
    x = np.linspace(0.0, 1.0, 16)[:, None]
    y = np.sin(2 * np.pi * 0.7 * x[:, 0]) + 0.4 * np.random.default_rng(3).standard_normal(16)
    return x, (y - y.mean()) / y.std()


GRID = np.exp(np.linspace(np.log(0.006), np.log(1.5), 9))


def test_loo_log_density_is_the_leave_one_out_of_refitting_free_models():
    # closed form (R&W eq. 5.10-5.12) against conditioning on the others and predicting the one left out, 2 tasks
    rng = np.random.default_rng(0)
    X = [rng.random((7, 2)), rng.random((5, 2))]
    y = [np.sin(4 * x[:, 0]) + x[:, 1] for x in X]
    model = LCM(1, "matern52").fit(X, y, seed=0, explore=False)
    p = model.get_params()
    got = model.loo_log_density()
    want = []
    for i in range(2):
        for k in range(len(y[i])):
            Xr = [x if j != i else np.delete(x, k, axis=0) for j, x in enumerate(X)]
            yr = [v if j != i else np.delete(v, k) for j, v in enumerate(y)]
            mean, var = LCM(1, "matern52").condition(Xr, yr, p).predict(i, X[i][k:k + 1], include_noise=True)
            want.append(-0.5 * np.log(2 * np.pi * var[0]) - 0.5 * (y[i][k] - mean[0]) ** 2 / var[0])
    assert got.shape == (12,)
    assert got == pytest.approx(np.array(want), abs=1e-6)


def test_the_default_keeps_a_real_short_length_scale(default_rule):
    X, y = clustered_short()
    gap = input_gaps([X])[0]
    loo = brute_loo(X, y, GRID)
    best = GRID[np.argmax(loo)]
    assert best < gap / 2  # held-out points support a length scale well below the mean gap
    model = LCM(1, "matern52").fit([X], [y], seed=0)
    rep = model.fit_report
    assert rep.collapsed and not rep.collapse_refit  # the collapse was checked, and the data overruled the floor
    assert rep.collapse_loo[0] > rep.collapse_loo[1]  # the collapsed fit predicts the held-out points better
    assert best / 2 < model.lengthscales[0, 0] < best * 2  # the length scale the grid supports (its spacing: 2x)
    assert model.loo_log_density().mean() == pytest.approx(rep.collapse_loo[0])
    assert model.loo_log_density().mean() >= loo.max() - 0.05


def test_the_default_floors_a_spurious_short_length_scale(default_rule):
    X, y = smooth_noisy()
    gap = input_gaps([X])[0]
    loo = brute_loo(X, y, GRID)
    assert GRID[np.argmax(loo)] > gap  # held-out points support no length scale below the gap
    assert loo[GRID < gap].max() < loo.max() - 0.1
    model = LCM(1, "matern52").fit([X], [y], seed=0)
    rep = model.fit_report
    assert rep.collapsed and rep.collapse_refit and model.collapsed_lengthscales() == []
    assert rep.collapse_loo[1] - rep.collapse_loo[0] > defaults.COLLAPSE_LOO_NATS
    assert model.lengthscales[0, 0] > gap
    assert model.loo_log_density().mean() >= loo.max() - 0.05  # as well as the best length scale of the grid


def test_a_collapse_the_held_out_points_support_is_reported_as_kept(default_rule):
    from gptask.insight.sections import _fit_note, _fits_note

    X, y = clustered_short()
    kept = LCM(1, "matern52").fit([X], [y], seed=0)
    record = kept.fit_record()
    assert record["collapsed"] and not record["collapse_refit"] and len(record["collapse_loo"]) == 3
    note = _fits_note([record])
    assert "kept collapsed" in note and "left collapsed" not in note and "missing" not in note
    assert "kept, the floored fit predicting the held-out points no better" in _fit_note(kept)
    floored = LCM(1, "matern52").fit(*map(lambda a: [a], smooth_noisy()), seed=0).fit_record()
    assert floored["collapse_refit"] and len(floored["collapse_loo"]) == 3
    note = _fits_note([floored, record])
    assert "refitted with every length scale at least that gap: fit 1;" in note
    assert "(leave-one-out) no better: fit 2." in note and "left collapsed" not in note
