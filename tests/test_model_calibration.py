"""Calibrated intervals and no collapsed fits (issue 45, the model half).

Coverage: smooth multitask families drawn at random (random Fourier features of an RBF kernel, a shared
draw and a task-specific one mixed per task, per-task shift and scale, Gaussian noise; tuning seeds of
bench/model_calibration.py), fitted as the tuner fits them (per-task standardised outputs, Matern-5/2,
one latent, MAP under the tuner's prior), scored on 100 held-out points per task against the noise-free
value (latent interval) and a fresh measurement (interval with noise). Before the widening of
defaults.CALIBRATE_VARIANCE these three families were covered at 77 %, 80 % and 81 % (latent); with it
at 82 %, 83 % and 85 %.

Collapse: a length scale shorter than the gap between its input's values, checked against the gaps
counted by hand, and a collapsed fit is refitted bounded (tests/test_collapse.py: against a brute-force profile).
"""

import math
import sys

import numpy as np
import pytest
from scipy.stats import chi2

from conftest import ROOT
from gptask.model.numerics import LCM
from gptask.model.numerics import defaults
from gptask.model.numerics.priors import LCMPrior

sys.path.insert(0, str(ROOT / "bench"))
from model_calibration import draw_family  # noqa: E402

Z95 = 1.959963984540054


def ref_shape(r, w, prior, power_min=None):
    """gptask.model.numerics.calibration.fit_shape by brute force: the likelihood of r^2 / prior ~ a u^p chi^2_1
    (u = w / prior) profiled over a (its maximiser mean(z^2 / u^p)) on a grid of p over [power_min, 1] (step
    1e-4; power_min defaults.CALIBRATION_POWER_MIN), p = 1 unless that gains more than CALIBRATION_POWER_NATS,
    then the one-sided CALIBRATION_CONFIDENCE bound sum(z^2 / u^p) / chi2 quantile. Returns (scale, p, lower)."""
    r, w, prior = (np.asarray(a, float) for a in (r, w, prior))
    lo = defaults.CALIBRATION_POWER_MIN if power_min is None else power_min
    z2, u = r ** 2 / prior, w / prior
    ps = np.linspace(lo, 1.0, int(round((1.0 - lo) * 1e4)) + 1)
    nll = np.array([r.size * np.log(np.mean(z2 / u ** p)) + p * np.sum(np.log(u)) for p in ps])
    p = float(ps[int(np.argmin(nll))])
    if nll[-1] - nll.min() <= defaults.CALIBRATION_POWER_NATS:  # a power under 1 the folds do not bear out
        p = 1.0
    scale = float(np.sum(z2 / u ** p) / chi2.ppf(1 - defaults.CALIBRATION_CONFIDENCE, r.size))
    lower = defaults.CALIBRATION_MIN if r.size >= defaults.CALIBRATION_SHRINK_MIN_POINTS else 1.0
    return scale, p, lower


def ref_factor(shape, u):
    """The factor of a ref_shape at relative variances u: scale u^(p - 1) clipped to [lower, CALIBRATION_MAX]."""
    scale, p, lower = shape
    return np.clip(scale * np.asarray(u, float) ** (p - 1.0), lower, defaults.CALIBRATION_MAX)


def family(seed, n):
    """(X (T lists of (n, d)), y, latent(i, X), noisy(i, X, rng), d, T): bench/model_calibration.py's
    generator, so that these tests and the bench draw the same families."""
    f = draw_family(seed, n)
    return f["X"], f["y"], f["latent"], f["noisy"], f["d"], f["T"]


def coverage(seed, n, calibrate=None):
    X, y, latent, noisy, d, T = family(seed, n)
    mu = np.array([v.mean() for v in y])
    sd = np.array([v.std() for v in y])
    z = [(v - m) / s for v, m, s in zip(y, mu, sd)]
    model = LCM(defaults.SURROGATE_N_LATENT, defaults.SURROGATE_KERNEL).fit(
        X, z, restarts=3, seed=seed, prior=LCMPrior(dimension=float(d)), calibrate=calibrate)
    rng = np.random.default_rng(12345)
    hits_latent, hits_noisy = [], []
    for i in range(T):
        Xt = rng.random((100, d))
        f = (latent(i, Xt) - mu[i]) / sd[i]
        yt = (noisy(i, Xt, rng) - mu[i]) / sd[i]
        m, v = model.predict(i, Xt)
        _, vn = model.predict(i, Xt, include_noise=True)
        hits_latent.append(np.abs(f - m) <= Z95 * np.sqrt(v))
        hits_noisy.append(np.abs(yt - m) <= Z95 * np.sqrt(vn))
    return np.concatenate(hits_latent), np.concatenate(hits_noisy), model


def test_the_widening_brings_95_percent_intervals_closer_to_95_percent_on_generated_families():
    # 6-7 tasks, 2-5 inputs, 12 points per task: 2,000 held-out points. Without the widening the latent
    # intervals cover 79 % of them (brute-force count below); defaults.VARIANCE_SCALE_POWER = 0.75 brings
    # that to 83-84 %, short of the 85 % target (power 2 reached 91 % but over-covered the noise-free mixed
    # family of tests/test_calibration.py: bench/results/model_calibration.md)
    latent, noisy, plain = [], [], []
    for seed in (1004, 1007, 1010):
        hl, hn, model = coverage(seed, 12, calibrate=True)
        assert model.fit_report.variance_scale > 1.0
        latent.append(hl)
        noisy.append(hn)
        plain.append(coverage(seed, 12, calibrate=False)[0])
    latent, noisy, plain = np.concatenate(latent), np.concatenate(noisy), np.concatenate(plain)
    assert latent.size == 2000
    assert plain.mean() < 0.80
    assert latent.mean() >= plain.mean() + 0.03
    assert 0.82 <= latent.mean() <= 0.99
    assert 0.82 <= noisy.mean() <= 0.99


def test_the_widening_scales_every_variance_and_keeps_the_mean():
    X, y, *_ = family(1007, 12)
    z = [(v - v.mean()) / v.std() for v in y]
    plain = LCM(1, "matern52").fit(X, z, restarts=2, seed=0, calibrate=False)
    wide = LCM(1, "matern52").fit(X, z, restarts=2, seed=0, calibrate=True)
    N = sum(len(v) for v in z)
    p = plain.get_params()
    n_hyper = sum(np.size(v) for v in p.values())
    expected = min(defaults.VARIANCE_SCALE_MAX, (N / (N - n_hyper)) ** defaults.VARIANCE_SCALE_POWER)
    assert wide.fit_report.variance_scale == pytest.approx(expected)
    assert plain.fit_report.variance_scale == 1.0
    Xt = np.random.default_rng(0).random((20, X[0].shape[1]))
    for noise in (False, True):
        m0, v0 = plain.predict(2, Xt, include_noise=noise)
        m1, v1 = wide.predict(2, Xt, include_noise=noise)
        assert np.allclose(m1, m0, rtol=1e-6, atol=1e-9)
        assert np.allclose(v1, expected * v0, rtol=1e-6)
    # off by default (defaults.CALIBRATE_VARIANCE: it made the convolution family's search worse), and
    # maximum likelihood fits are left as they are unless asked
    assert LCM(1, "matern52").fit(X, z, restarts=1, seed=0).fit_report.variance_scale == 1.0
    assert LCM(1, "matern52").fit(X, z, restarts=1, prior=None).fit_report.variance_scale == 1.0


def grid_model(ls):
    """Two tasks on 2 inputs: input 0 on a grid of 11 values (gap 0.1), input 1 binary (not checked)."""
    x0 = np.linspace(0, 1, 11)
    X = [np.column_stack([x0, np.arange(11) % 2]), np.column_stack([x0[::2], np.arange(6) % 2])]
    y = [np.sin(3 * X[0][:, 0]), np.cos(3 * X[1][:, 0])]
    params = {"lengthscale": np.array([[ls, 0.01]]), "W": np.ones((1, 2, 1)), "kappa": np.full((1, 2), 0.1),
              "noise": np.full(2, 1e-3)}
    return LCM(1, "matern52").condition(X, y, params)


def test_input_gaps_are_the_range_over_distinct_values_median_over_tasks():
    model = grid_model(0.5)
    Xs, _ = model.data()
    by_hand = np.median([(np.ptp(X[:, 0])) / (len(np.unique(X[:, 0])) - 1) for X in Xs])  # 0.1 and 0.2
    gaps = model.input_gaps()
    assert gaps[0] == pytest.approx(by_hand) == pytest.approx(0.15)
    assert gaps[1] == 0.0  # two distinct values: not checked
    assert model.collapsed_lengthscales() == []


def test_a_length_scale_shorter_than_the_gap_is_flagged_collapsed():
    model = grid_model(0.02)
    flags = model.collapsed_lengthscales()
    assert len(flags) == 1 and "input 0" in flags[0] and "collapsed" in flags[0]
    diag = model.diagnostics()
    assert diag["collapsed"] == flags
    assert diag["variance_scale"] is None  # conditioned, not fitted


def test_a_collapsed_fit_is_refitted_bounded():
    # a smooth function of input 0 alone; the fit starts (one start, 3 iterations) from a length scale of
    # input 1 fifty times shorter than the gap between its values: the winner is collapsed, the fit
    # bounded at the gap explains these smooth data better and is kept, and the final model is not collapsed
    rng = np.random.default_rng(3)
    X = [rng.random((10, 2)) for _ in range(3)]
    y = [np.sin(4 * x[:, 0]) + 0.05 * i + 0.01 * rng.standard_normal(10) for i, x in enumerate(X)]
    init = {"lengthscale": np.array([[0.5, 0.002]]), "W": np.full((1, 3, 1), 0.7), "kappa": np.full((1, 3), 0.05),
            "noise": np.full(3, 1e-3)}
    collapsed = LCM(1, "matern52").condition(X, y, init)
    assert collapsed.collapsed_lengthscales()
    model = LCM(1, "matern52").fit(X, y, restarts=1, seed=0, init=init, maxiter=3, prior=None)
    rep = model.fit_report
    assert rep.collapsed and "input 1" in rep.collapsed[0]
    assert rep.collapse_refit
    assert rep.collapsed_after == () and model.collapsed_lengthscales() == []
    assert model.lengthscales[0, 1] >= model.input_gaps()[1] * (1 - 1e-9)
    assert rep.lengthscale_floor[1] == pytest.approx(model.input_gaps()[1])  # kept whatever its objective
    # without exploring (explore=False) nothing is checked or refitted
    plain = LCM(1, "matern52").fit(X, y, restarts=1, seed=0, init=init, maxiter=3, prior=None, explore=False)
    assert plain.fit_report.collapsed == () and not plain.fit_report.collapse_refit
    assert plain.collapsed_lengthscales()


# ---- the calibrated predictive of the intervals users see (LCM.calibration_factor) ----------------------


def test_the_calibrated_intervals_cover_85_to_99_percent_on_generated_families():
    # the same three families (2,000 held-out points) whose raw intervals cover under 80 %: the K-fold
    # refitted factor brings both the latent and the noisy intervals into the target band
    latent, noisy, plain = [], [], []
    for seed in (1004, 1007, 1010):
        hl, _, model = coverage(seed, 12, calibrate=False)
        s = model.calibration_factor()
        assert 1.0 < s <= defaults.CALIBRATION_MAX
        X, y, lat, noi, d, T = family(seed, 12)
        mu, sd = np.array([v.mean() for v in y]), np.array([v.std() for v in y])
        rng = np.random.default_rng(12345)
        for i in range(T):  # the same held-out points as coverage()
            Xt = rng.random((100, d))
            f = (lat(i, Xt) - mu[i]) / sd[i]
            yt = (noi(i, Xt, rng) - mu[i]) / sd[i]
            m, v = model.predict_calibrated(i, Xt)
            _, vn = model.predict_calibrated(i, Xt, include_noise=True)
            latent.append(np.abs(f - m) <= Z95 * np.sqrt(v))
            noisy.append(np.abs(yt - m) <= Z95 * np.sqrt(vn))
        plain.append(hl)
    latent, noisy, plain = np.concatenate(latent), np.concatenate(noisy), np.concatenate(plain)
    assert latent.size == 2000
    assert plain.mean() < 0.80
    assert 0.85 <= latent.mean() <= 0.99
    assert 0.85 <= noisy.mean() <= 0.99


def test_the_calibration_factors_are_upper_bounds_from_a_naive_fold_loop_and_leave_the_raw_model_alone():
    rng = np.random.default_rng(7)
    X = [rng.random((9, 2)), rng.random((7, 2)), rng.random((1, 2))]  # a task of one point is never held out
    y = [np.sin(5 * x[:, 0]) + 0.3 * x[:, 1] + 0.05 * rng.standard_normal(len(x)) for x in X]
    model = LCM(1, "matern52").fit(X, y, restarts=2, seed=0, prior=LCMPrior(dimension=2.0))
    Xp = rng.random((5, 2))
    before = model.predict(0, Xp, include_noise=True)
    latent, noisy = model.calibration_factors(folds=3, seed=4)
    # by hand: the same per-task split, a fresh model per fold refitted from CALIBRATION_FRESH_STARTS random
    # starts (the median task has 7 < CALIBRATION_FRESH_BELOW points), one point at a time; the outputs are
    # not standardised per task, so they are used as given
    assert not model.standardized_tasks().any()
    split = np.random.default_rng(4)
    part = [split.permutation(len(v)) % 3 if len(v) >= 2 else np.full(len(v), -1) for v in y]
    r, vl, vn, pr = [], [], [], []
    for k in range(3):
        sub = LCM(1, "matern52").fit([x[p != k] for x, p in zip(X, part)], [v[p != k] for v, p in zip(y, part)],
                                     restarts=defaults.CALIBRATION_FRESH_STARTS, seed=4 + 1 + k, prior=model.prior,
                                     explore=False, calibrate=False)
        for i in range(3):
            for j in np.flatnonzero(part[i] == k):
                m, v = sub.predict(i, X[i][j:j + 1])
                _, w = sub.predict(i, X[i][j:j + 1], include_noise=True)
                r.append(float(y[i][j] - m[0]))
                vl.append(float(v[0]))
                vn.append(float(w[0]))
                pr.append(float(sub.task_covariance()[i, i]))
    r, vl, vn, pr = np.array(r), np.array(vl), np.array(vn), np.array(pr)
    assert r.size == 16 < defaults.CALIBRATION_SHRINK_MIN_POINTS  # too few held-out points to narrow
    # the factors where the model knows nothing of a point (u = 1): the brute-force shapes' (ref_shape)
    assert noisy == pytest.approx(float(ref_factor(ref_shape(r, vn, pr), 1.0)), rel=1e-3)
    assert latent == pytest.approx(float(ref_factor(ref_shape(r, vl, pr), 1.0)), rel=1e-3)
    # with the power held at 1 (CALIBRATION_POWER_MIN = 1, one factor everywhere) they are the one-sided
    # CALIBRATION_CONFIDENCE upper bound on the variance of z ~ N(0, s): sum z^2 / chi2 quantile
    bound = chi2.ppf(1 - defaults.CALIBRATION_CONFIDENCE, 16)
    assert ref_shape(r, vn, pr, 1.0)[0] == pytest.approx(np.sum(r ** 2 / vn) / bound, rel=1e-9)
    assert np.sort(model.held_out(folds=3, seed=4).prior) == pytest.approx(np.sort(pr), rel=1e-6)
    assert model.calibration_factor(folds=3, seed=4) == noisy
    got = model.crossval_residuals(3, 4)
    order = lambda a: np.sort(np.abs(a))
    assert order(got[0]) == pytest.approx(order(r), rel=1e-6)
    assert np.sort(got[1] + got[2]) == pytest.approx(np.sort(vn), rel=1e-6)
    assert order(model.crossval_zscores(3, 4)) == pytest.approx(order(r / np.sqrt(vn)), rel=1e-6)
    # the raw model (what EI uses) is bit for bit what it was; the calibrated one scales the variance only
    after = model.predict(0, Xp, include_noise=True)
    assert np.array_equal(before[0], after[0]) and np.array_equal(before[1], after[1])
    m, v = model.predict_calibrated(0, Xp, include_noise=True)
    assert np.array_equal(m, before[0])
    # tasks of 9, 7 and 1 points are of unequal size: task 0 (9 held-out points) has its own factors where
    # they are the smaller (test_tasks_of_unequal_size_keep_the_smaller_of_the_pooled_and_their_own_factors)
    assert model.unequal_tasks()
    latent, noisy = model.task_calibration_factors()[0]  # the defaults' folds
    assert noisy <= model.calibration_factor() and latent <= model.calibration_factors()[0]
    # at each point the smaller of the pooled factor and task 0's own, at the point's variance relative to
    # the task's prior variance (by hand from the defaults' held-out points and ref_shape)
    held, P = model.held_out(), model.task_covariance()[0, 0]
    mine = held.task == 0

    def by_hand(w, x):
        return np.minimum(ref_factor(ref_shape(held.r, w, held.prior), x / P),
                          ref_factor(ref_shape(held.r[mine], w[mine], held.prior[mine]), x / P))

    assert v == pytest.approx(before[1] * by_hand(held.v + held.noise, before[1]), rel=1e-3)
    # the latent variance x the latent factor, never wider than a new measurement's
    m, v = model.predict_calibrated(0, Xp)
    raw = model.predict(0, Xp)[1]
    assert v == pytest.approx(np.minimum(raw * by_hand(held.v, raw), before[1] * by_hand(held.v + held.noise, before[1])),
                              rel=1e-3)


def test_tasks_of_unequal_size_keep_the_smaller_of_the_pooled_and_their_own_factors():
    """Refitted folds: a task of many points (a source) beside one of few no longer widens the other's
    intervals with its own exploding fold: each task of at least CALIBRATION_MIN_POINTS held-out points has
    min(pooled, own) (the same upper bound on its own residuals, by hand); tasks of equal size keep the pooled."""
    rng = np.random.default_rng(3)
    X = [rng.random((30, 2)), rng.random((12, 2))]
    y = [np.sin(6 * X[0][:, 0]) + 0.05 * rng.standard_normal(30),  # a task the folds predict well
         np.where(X[1][:, 1] > 0.5, 1.0, -1.0) + 0.05 * rng.standard_normal(12)]  # a step: the folds miss it
    model = LCM(1, "matern52").fit(X, y, restarts=2, seed=0, prior=LCMPrior(dimension=2.0))
    assert model.unequal_tasks() and model.refits_folds()
    h = model.held_out()
    r, v, n, t, P = h.r, h.v, h.noise, h.task, h.prior
    bound = lambda m, vv: float(ref_factor(ref_shape(r[m], vv[m], P[m]), 1.0))  # at u = 1, by brute force
    pooled = np.array(model.calibration_factors())
    assert pooled == pytest.approx([bound(t >= 0, v), bound(t >= 0, v + n)], rel=1e-3)
    own = np.array([[bound(t == i, v), bound(t == i, v + n)] for i in range(2)])
    got = model.task_calibration_factors()
    assert got == pytest.approx(np.minimum(pooled, own), rel=1e-3)
    assert (got[0] < pooled).all() and (got[1] == pooled).all()  # the smooth task narrower, the step as pooled
    _, var = model.predict_calibrated(0, X[0][:3], include_noise=True)
    raw = model.predict(0, X[0][:3])[1] + model.get_params()["noise"][0]
    u = raw / model.task_covariance()[0, 0]
    mine = t == 0
    assert var == pytest.approx(raw * np.minimum(ref_factor(ref_shape(r, v + n, P), u),
                                                 ref_factor(ref_shape(r[mine], v[mine] + n[mine], P[mine]), u)), rel=1e-3)
    from gptask.insight.sections import _fit_note  # the report's fit note names the narrowest task factor

    assert f"down to x{got[0, 1]:.3g} for a task whose own held-out points bear out narrower intervals" in _fit_note(model)
    # tasks of equal size: every task the pooled factors
    equal = LCM(1, "matern52").fit([X[0][:12], X[1]], [y[0][:12], y[1]], restarts=2, seed=0,
                                   prior=LCMPrior(dimension=2.0))
    assert not equal.unequal_tasks()
    assert (equal.task_calibration_factors() == np.array(equal.calibration_factors())).all()


def test_too_few_held_out_points_give_factor_one():
    X = [np.array([[0.1], [0.5], [0.9]]), np.array([[0.3]])]
    y = [np.array([0.0, 1.0, 0.2]), np.array([0.4])]
    model = LCM(1, "rbf").fit(X, y, restarts=1, seed=0)
    assert model.crossval_zscores(3, 0).size == 3
    assert model.calibration_factors(3, 0) == (1.0, 1.0)


def test_a_standardised_task_is_restandardised_on_each_fold_and_warm_folds_start_at_the_full_fit():
    # by hand: each fold puts every per-task standardised task in the units of its remaining points, fits
    # from one start at the full fit (fresh=False), and scores the held-out point in those units
    rng = np.random.default_rng(3)
    X = [rng.random((6, 2)) for _ in range(3)]
    raw = [np.cos(4 * x[:, 0]) + x[:, 1] * (1 + i) + 0.05 * rng.standard_normal(6) for i, x in enumerate(X)]
    y = [(v - v.mean()) / v.std() for v in raw]
    model = LCM(1, "matern52").fit(X, y, restarts=2, seed=0, prior=LCMPrior(dimension=2.0))
    assert model.standardized_tasks().all()
    split = np.random.default_rng(2)
    part = [split.permutation(6) % 3 for _ in y]
    z = []
    for k in range(3):
        keep = [v[p != k] for v, p in zip(y, part)]
        sub = LCM(1, "matern52").fit([x[p != k] for x, p in zip(X, part)], [(v - v.mean()) / v.std() for v in keep],
                                     restarts=1, seed=2, init=model.get_params(), prior=model.prior, explore=False,
                                     calibrate=False)
        for i in range(3):
            for j in np.flatnonzero(part[i] == k):
                m, v = sub.predict(i, X[i][j:j + 1], include_noise=True)
                z.append(float(((y[i][j] - keep[i].mean()) / keep[i].std() - m[0]) / np.sqrt(v[0])))
    got = model.crossval_zscores(3, 2, fresh=False)
    assert np.sort(np.abs(got)) == pytest.approx(np.sort(np.abs(z)), rel=1e-6)
    # the units that included the held-out point bound it: |y| <= (n-1)/sqrt(n) within its own task
    assert np.max(np.abs(np.concatenate(y))) <= 5 / np.sqrt(6) + 1e-9
    assert not np.allclose(np.abs(got), np.abs(model.crossval_zscores(3, 2, restandardize=False, fresh=False)))


def test_fold_units_are_the_remaining_points_mean_and_sd_of_standardised_tasks_only():
    kept = [np.array([1.0, 2.0, 4.0]), np.array([1.0, 2.0, 4.0]), np.array([3.0]), np.array([2.0, 2.0])]
    units = LCM.fold_units(kept, [True, False, True, True])
    assert units[0] == pytest.approx((7 / 3, math.sqrt(((1 - 7 / 3) ** 2 + (2 - 7 / 3) ** 2 + (4 - 7 / 3) ** 2) / 3)))
    assert units[1:] == [(0.0, 1.0)] * 3  # not standardised, a single point, no spread: used as given


def test_scarce_sizes_the_calibrated_intervals_cover_on_the_seeds_that_were_worst():
    # 5 points per task, tuning seeds whose calibrated latent intervals covered 72 % (seed 2), 78 % (10) and
    # 68 % (18) of held-out points before the folds were re-standardised and refitted from fresh starts
    # (bench/results/calibrated.md); coverage counted on 100 held-out points per task of the known function
    for seed in (2, 10, 18):
        X, y, lat, noi, d, T = family(seed, 5)
        hl, _, model = coverage(seed, 5, calibrate=False)
        assert hl.mean() < 0.80  # the raw intervals
        mu, sd = np.array([v.mean() for v in y]), np.array([v.std() for v in y])
        rng = np.random.default_rng(12345)
        inside = []
        for i in range(T):
            Xt = rng.random((100, d))
            f = (lat(i, Xt) - mu[i]) / sd[i]
            m, v = model.predict_calibrated(i, Xt)  # the latent intervals users see
            inside.append(np.abs(f - m) <= Z95 * np.sqrt(v))
        assert np.mean(inside) >= 0.85, (seed, np.mean(inside))


def _known(kind, seed, n=30, T=2):
    """A known function of T tasks sampled at n random points per task (noise-free), per-task standardised
    as the tuner gives it, the default model fitted; and the held-out truth at 300 points per task in those
    units. kind "rough": a smooth wave plus one of period ~1/15 of the range, finer than the data resolve
    (the fit explains it as noise, as pdgeqrf16's landscape); "bowl": a quadratic in 2 inputs."""
    rng = np.random.default_rng(seed)
    d = 1 if kind == "rough" else 2
    if kind == "rough":
        f = lambda t, X: np.sin(6 * X[:, 0] + t) + 0.35 * np.sin(97 * X[:, 0] + 2 * t)
    else:
        f = lambda t, X: np.sum((X - 0.3 - 0.1 * t) ** 2, axis=1)
    X = [rng.random((n, d)) for _ in range(T)]
    y = [f(t, x) for t, x in enumerate(X)]
    mu, sd = [v.mean() for v in y], [v.std() for v in y]
    model = LCM(1, "matern52").fit(X, [(v - a) / b for v, a, b in zip(y, mu, sd)], restarts=2, seed=seed,
                                   prior=LCMPrior(dimension=float(d)))
    Xt = np.random.default_rng(99).random((300, d))
    truth = [(f(t, Xt) - mu[t]) / sd[t] for t in range(T)]
    return model, Xt, truth


def _covered(model, Xt, truth, factor=None):
    """Fraction of the held-out truth inside the 95 % latent intervals: the calibrated predictive's, or the
    raw variance times ``factor``."""
    inside = []
    for t, f in enumerate(truth):
        m, v = model.predict_calibrated(t, Xt) if factor is None else model.predict(t, Xt)
        inside.append(np.abs(f - m) <= Z95 * np.sqrt(v if factor is None else v * factor))
    return float(np.mean(np.concatenate(inside)))


def test_roughness_fitted_as_noise_gets_latent_intervals_that_cover_the_function():
    # issue 45, pdgeqrf16 at 30 points per task: latent 0.76 against noisy 0.95 when one factor, fitted on
    # measurements, scaled both. Here the function is known and noise-free: the fit puts its fine wave into
    # the noise, the raw latent intervals cover 36-46 % of it, and the single factor of the time (the folds'
    # 95 % quantile of |z| with noise, warm folds at 30 points) stays about 1
    for seed in (0, 2, 3):
        model, Xt, truth = _known("rough", seed)
        assert min(model.get_params()["noise"]) > 0.05  # relative to the standardised outputs' variance 1
        z = model.crossval_zscores(fresh=False)
        single = min(max((np.quantile(np.abs(z), 0.95) / Z95) ** 2, 1.0), defaults.CALIBRATION_MAX)
        assert _covered(model, Xt, truth, single) < 0.50
        # the latent intervals are widened far more than a new measurement's, at the held-out points' variances
        cal, P = model.task_calibrations()[0], model.task_covariance()[0, 0]
        v, n = model.predict(0, Xt)[1], model.get_params()["noise"][0]
        assert np.median(cal.factor(v / P)) > 3 * np.median(cal.factor((v + n) / P, noisy=True))
        assert 0.85 <= _covered(model, Xt, truth) <= 1.0, seed


def test_intervals_the_folds_find_too_wide_are_narrowed_and_still_cover():
    # a noise-free bowl, 30 points per task (60 held-out points >= CALIBRATION_SHRINK_MIN_POINTS): the raw
    # intervals cover 99.5-100 % of it (the sphere of the suite: 0.99-1.00 with a factor floored at 1); the
    # folds' factor goes under 1 and the intervals cover 85-99 %, counted against the function
    raw, cal = [], []
    for seed in (0, 1, 2, 3):
        model, Xt, truth = _known("bowl", seed)
        latent, noisy = model.calibration_factors()
        assert defaults.CALIBRATION_MIN <= latent < 1.0 and defaults.CALIBRATION_MIN <= noisy < 1.0
        raw.append(_covered(model, Xt, truth, 1.0))
        cal.append(_covered(model, Xt, truth))
    assert min(raw) >= 0.99
    assert 0.85 <= min(cal) and np.mean(cal) <= 0.99 and max(cal) < min(raw)


def test_folds_start_afresh_below_twenty_points_per_task():
    # issue 45: convolution_unlike at 12 points per task covered 0.80 (lowest seed 0.46) with folds started at
    # the full fit; below CALIBRATION_FRESH_BELOW (20) points per task they are refitted from random starts
    assert defaults.CALIBRATION_FRESH_BELOW == 20
    rng = np.random.default_rng(5)
    X = [rng.random((12, 2)) for _ in range(2)]
    y = [np.sin(4 * x[:, 0]) + x[:, 1] * (1 + i) for i, x in enumerate(X)]
    model = LCM(1, "matern52").fit(X, y, restarts=2, seed=0, prior=LCMPrior(dimension=2.0))
    got = model.crossval_residuals(3, 1)[0]
    assert got == pytest.approx(model.crossval_residuals(3, 1, fresh=True)[0], rel=1e-9)
    assert not np.allclose(got, model.crossval_residuals(3, 1, fresh=False)[0])


def test_folds_conditioned_on_the_models_hyperparameters_equal_the_closed_form_and_fit_nothing(monkeypatch):
    """Above CALIBRATION_REFIT_MAX_POINTS points the folds are conditioned, not refitted: each held-out
    block's residuals and predictive variances (with noise) against the closed form of a GP with fixed
    hyperparameters, y_h - mean_h = C (K^-1 y)_h and cov_h = C = ((K^-1)_hh)^-1 (K: the full covariance,
    noise included, built here from the kernel and the coregionalization matrices)."""
    from gptask.model.numerics import kernels, lcm as lcm_mod

    rng = np.random.default_rng(3)
    X = [rng.random((24, 2)), rng.random((22, 2)), rng.random((21, 2))]
    y = [np.sin(4 * x[:, 0] + i) + 0.5 * x[:, 1] + 0.05 * rng.standard_normal(len(x)) for i, x in enumerate(X)]
    model = LCM(2, "matern52").fit(X, y, restarts=1, seed=0, prior=LCMPrior(dimension=2.0))
    refitted = model.calibration_factors(folds=3, seed=5)  # 67 points: refitted by default
    assert refitted == model.calibration_factors(folds=3, seed=5, refit=True)
    # above CALIBRATION_REFIT_MAX_POINTS (monkeypatched to 30) the default conditions the folds ...
    monkeypatch.setattr(lcm_mod, "CALIBRATION_REFIT_MAX_POINTS", 30)
    conditioned = model.calibration_factors(folds=3, seed=5)
    assert conditioned == model.calibration_factors(folds=3, seed=5, refit=False) != refitted
    # ... unless the median task is scarce (22 points, under a CALIBRATION_FRESH_BELOW of 23): refitted afresh
    monkeypatch.setattr(lcm_mod, "CALIBRATION_FRESH_BELOW", 23)
    model._calibration = None
    scarce = model.calibration_factors(folds=3, seed=5)
    assert scarce == model.calibration_factors(folds=3, seed=5, refit=True) != conditioned

    def no_fit(*args, **kwargs):
        raise AssertionError("a conditioned fold must not be fitted")

    monkeypatch.setattr(LCM, "fit", no_fit)
    r, v, n = model.crossval_residuals(folds=3, seed=5, restandardize=False, refit=False)
    p, B = model.get_params(), model.coregionalization()
    Xa, ya = np.vstack(X), np.concatenate(y)
    t = np.concatenate([np.full(len(x), i) for i, x in enumerate(X)])
    K = sum(B[q][np.ix_(t, t)] * kernels.kernel("matern52", Xa, Xa, p["lengthscale"][q]) for q in range(2))
    K = K + np.diag(p["noise"][t])
    split = np.random.default_rng(5)
    part = np.concatenate([split.permutation(len(v_)) % 3 for v_ in y])
    want_r, want_var, want_noise, want_task = [], [], [], []
    for k in range(3):
        keep = np.flatnonzero(part != k)
        for i in range(3):  # in the order crossval_residuals scores them: fold, then task
            rows = np.flatnonzero((part == k) & (t == i))
            both = np.concatenate([keep, rows])  # the fold's data, then task i's held-out rows
            inv = np.linalg.inv(K[np.ix_(both, both)])
            hh = np.arange(len(keep), len(both))
            C = np.linalg.inv(inv[np.ix_(hh, hh)])
            want_r.append(C @ (inv @ ya[both])[hh])
            want_var.append(np.diag(C))
            want_noise.append(p["noise"][t[rows]])
            want_task.append(t[rows])
    assert r == pytest.approx(np.concatenate(want_r), rel=1e-6, abs=1e-9)
    assert v + n == pytest.approx(np.concatenate(want_var), rel=1e-6)
    assert n == pytest.approx(np.concatenate(want_noise), rel=1e-12)
    r, v, n, task = model.fold_residuals(folds=3, seed=5, restandardize=False, refit=False)
    assert np.array_equal(task, np.concatenate(want_task))
    # per task, where the folds are conditioned: the larger of the pooled bound and the task's own (every
    # point is held out once: 24, 22 and 21 z-scores, under CALIBRATION_SHRINK_MIN_POINTS, so clipped at 1)
    h = model.held_out(folds=3, seed=5, refit=False)
    r, v, n, task = h.r, h.v, h.noise, h.task
    prior = np.diag(B.sum(axis=0))  # conditioned folds keep the model's task covariance (k(x, x) = 1)
    assert h.prior == pytest.approx(prior[task], rel=1e-9)
    pooled = model.calibration_factors(folds=3, seed=5, refit=False)
    assert pooled[1] == pytest.approx(float(ref_factor(ref_shape(r, v + n, h.prior), 1.0)), rel=1e-3)
    per = model.task_calibration_factors(folds=3, seed=5, refit=False)
    own_shape = lambda i, w: ref_shape(r[task == i], w[task == i], h.prior[task == i])
    for i in range(3):
        own = [float(ref_factor(own_shape(i, w), 1.0)) for w in (v, v + n)]
        assert per[i] == pytest.approx(np.maximum(pooled, own), rel=1e-3)
    assert (per[:, 1] > pooled[1]).any()  # some task's own folds ask for more than the pool
    # the intervals users see use their task's calibration, the larger of the pooled and its own factor at
    # each point (the default conditions: 67 points > 30, median 22 points per task >= 20); refitted folds
    # give every task the pooled ones
    monkeypatch.setattr(lcm_mod, "CALIBRATION_FRESH_BELOW", defaults.CALIBRATION_FRESH_BELOW)
    Xp = rng.random((4, 2))
    d = model.held_out()  # the defaults' folds, conditioned
    for i in range(3):
        raw = model.predict(i, Xp, include_noise=True)[1]
        u, mine = raw / prior[i], d.task == i
        want = np.maximum(ref_factor(ref_shape(d.r, d.v + d.noise, d.prior), u),
                          ref_factor(ref_shape(d.r[mine], d.v[mine] + d.noise[mine], d.prior[mine]), u))
        assert model.predict_calibrated(i, Xp, include_noise=True)[1] == pytest.approx(raw * want, rel=1e-3)
    assert np.array_equal(model.task_calibration_factors(), model.task_calibration_factors(refit=False))
    # the report's fit note names the largest task factor where it exceeds the pooled one
    from gptask.insight.sections import _fit_note

    diag = model.diagnostics()
    assert diag["calibration_factor_tasks"] == model.task_calibration_factors()[:, 1].tolist()
    widest = max(diag["calibration_factor_tasks"])
    assert widest > diag["calibration_factor"]
    assert f"up to x{widest:.3g} for a task whose own held-out points need it" in _fit_note(model)
    monkeypatch.undo()
    model._calibration = None
    refit_pooled = model.calibration_factors(folds=3, seed=5, refit=True)
    assert np.array_equal(model.task_calibration_factors(folds=3, seed=5, refit=True), np.tile(refit_pooled, (3, 1)))
    assert "for a task whose own held-out points need it" not in _fit_note(model)  # refitted: one factor


def test_the_folds_refits_are_checked_only_when_asked(monkeypatch):
    """crossval_residuals(explore=True) gives each fold's refit the main fit's diagnosis and collapse check
    (bench/calibration_variants.py's lib_x); by default the refits are unchecked, as measured."""
    rng = np.random.default_rng(2)
    X = [rng.random((8, 2)), rng.random((7, 2))]
    y = [np.cos(3 * x[:, 0]) + 0.1 * rng.standard_normal(len(x)) for x in X]
    model = LCM(1, "matern52").fit(X, y, restarts=1, seed=0, prior=LCMPrior(dimension=2.0))
    seen = []
    fit = LCM.fit

    def spy(self, *args, **kwargs):
        seen.append(kwargs["explore"])
        return fit(self, *args, **kwargs)

    monkeypatch.setattr(LCM, "fit", spy)
    model.crossval_residuals(folds=3)
    assert seen == [False] * 3
    seen.clear()
    model.crossval_residuals(folds=3, explore=True)
    assert seen == [True] * 3
