"""Noise-reduction policies and pruning (gptask.evaluation.noise) on synthetic noisy objectives."""

import math

import numpy as np
import pytest

from gptask.evaluation.noise import (
    SEDR,
    Adaptive,
    NoisyResult,
    Pruner,
    RunCensored,
    Session,
    StaticResampling,
    accepts_deadline,
    aggregate,
    ci_width,
)

MEANS = [1.0, 1.08, 1.16, 1.24, 1.32, 1.40]  # configuration 0 is the best on average


def gaussian(mu, rng, sd=0.3):
    """One run with true mean ~``mu``: multiplicative Gaussian noise (30 %)."""
    return lambda: float(max(0.01, mu * (1.0 + sd * rng.standard_normal())))


def heavy_tailed(mu, rng, scale=1.0):
    """One run never faster than ``mu``, with an exponential right tail (the Active Harmony case)."""
    return lambda: float(mu * (1.0 + scale * rng.exponential()))


def pick_rate(make_policy, noise, trials=150, seed=0):
    """Fraction of trials in which the policy's estimates rank the true best configuration first,
    and the mean number of runs spent per trial. Configurations are visited in a random order."""
    rng = np.random.default_rng(seed)
    hits = 0
    spent = 0
    for _ in range(trials):
        session = Session(make_policy())
        values = {}
        for i in rng.permutation(len(MEANS)):
            values[i] = session.evaluate(noise(MEANS[i], rng)).value
        hits += int(min(values, key=values.get) == 0)
        spent += session.total_samples
    return hits / trials, spent / trials


def test_policies_pick_the_best_configuration_more_often_than_single_samples():
    single, n1 = pick_rate(lambda: StaticResampling(1), gaussian)
    static, n5 = pick_rate(lambda: StaticResampling(5, "mean"), gaussian)
    sedr, _ = pick_rate(lambda: SEDR(rel_width=0.1, max_samples=12), gaussian)
    adaptive, na = pick_rate(lambda: Adaptive(max_samples=10), gaussian)
    assert n1 == len(MEANS) and n5 == 5 * len(MEANS)
    # seeded, hence deterministic; measured when written: single 0.27, static 0.56, SEDR 0.57,
    # adaptive 0.39 (with ~2.3 runs per configuration instead of 5)
    assert single < 0.4
    assert static >= single + 0.2
    assert sedr >= single + 0.2
    assert adaptive >= single + 0.08
    assert na < 0.6 * n5


def test_min_of_k_wins_on_heavy_tailed_noise():
    single, _ = pick_rate(lambda: StaticResampling(1), heavy_tailed)
    best_of_5, _ = pick_rate(lambda: StaticResampling(5, "min"), heavy_tailed)
    mean_of_5, _ = pick_rate(lambda: StaticResampling(5, "mean"), heavy_tailed)
    # measured when written: 0.32, 0.65, 0.43
    assert best_of_5 >= single + 0.2
    assert best_of_5 >= mean_of_5 + 0.1


def test_static_resampling_aggregates_as_asked():
    vals = [3.0, 1.0, 2.0, 10.0]
    for how, expected in (("min", 1.0), ("median", 2.5), ("mean", 4.0)):
        it = iter(vals)
        r = StaticResampling(4, how).evaluate(lambda: next(it))
        assert r.value == expected
        assert r.samples == tuple(vals) and r.n_samples == 4 and not r.censored
    assert aggregate([5.0], "min") == 5.0


def test_sedr_stops_at_its_bound_on_very_noisy_runs():
    it = iter([1.0, 100.0] * 50)
    r = SEDR(rel_width=0.05, max_samples=7).evaluate(lambda: next(it))
    assert r.n_samples == 7
    assert r.reason == "max_samples"
    assert r.value == pytest.approx(np.mean([1.0, 100.0, 1.0, 100.0, 1.0, 100.0, 1.0]))


def test_sedr_stops_early_when_the_interval_is_narrow():
    r = SEDR(rel_width=0.1, max_samples=10).evaluate(lambda: 2.0)
    assert r.n_samples == 2 and r.reason == "ci narrow enough"
    # an interval narrow relative to the mean, computed independently
    vals = [10.0, 10.4, 10.2]
    it = iter(vals + [50.0] * 10)
    r = SEDR(rel_width=0.05, max_samples=10).evaluate(lambda: next(it))
    w2 = 2 * 1.96 * np.std(vals[:2], ddof=1) / math.sqrt(2)
    assert w2 > 0.05 * np.mean(vals[:2])  # two samples are not enough ...
    assert r.n_samples == 3  # ... three are
    assert ci_width(vals) == pytest.approx(2 * 1.96 * np.std(vals, ddof=1) / math.sqrt(3))


def test_adaptive_thresholds_tighten_with_the_iteration():
    a = Adaptive()
    assert a.ci_ratio(0) == 1.0 and a.filter_ratio(0) == 1.0
    assert a.ci_ratio(50) == pytest.approx(0.99**50)
    assert a.ci_ratio(10_000) == 0.1 and a.filter_ratio(10_000) == 0.5
    ratios = [a.ci_ratio(n) for n in range(0, 400, 10)]
    assert all(x >= y for x, y in zip(ratios, ratios[1:]))


def test_adaptive_filter_stops_resampling_clearly_worse_points():
    calls = []

    def slow():
        calls.append(1)
        return 3.0 + 0.5 * (len(calls) % 2)  # noisy, so the interval alone would ask for more

    r = Adaptive(max_samples=8).evaluate(slow, iteration=5, history=[1.0, 1.2, 0.9])
    assert r.n_samples == 2
    assert r.reason.startswith("filtered")
    calls.clear()
    # the same noisy point, promising against the history: resampled up to the bound
    r = Adaptive(max_samples=8).evaluate(lambda: slow() - 2.9, iteration=5, history=[1.0, 1.2, 0.9])
    assert r.n_samples == 8 and r.reason == "max_samples"
    # against the incumbent instead of the median
    calls.clear()
    r = Adaptive(max_samples=8, filter_reference="incumbent").evaluate(slow, iteration=0, incumbent=1.0)
    assert r.reason.startswith("filtered") and r.n_samples == 2


def test_pruning_marks_a_slow_run_censored():
    seen = {}

    def run(deadline=None):
        seen["deadline"] = deadline
        true_time = 5.0
        if deadline is not None and true_time > deadline:
            raise RunCensored(deadline)
        return true_time

    assert accepts_deadline(run) and not accepts_deadline(lambda: 1.0)
    session = Session(StaticResampling(3), pruner=Pruner(factor=2.0))
    first = session.evaluate(lambda: 1.0)  # no incumbent yet: no deadline
    assert not first.censored and session.incumbent == 1.0
    r = session.evaluate(run)
    assert seen["deadline"] == 2.0
    assert r.censored and r.n_samples == 1 and r.value == 2.0
    assert r.reason.startswith("censored")
    assert session.incumbent == 1.0  # a censored result never becomes the incumbent
    # a callable that cannot be stopped: its exact value is kept, resampling stops
    r = session.evaluate(lambda: 7.0)
    assert not r.censored and r.n_samples == 1 and r.value == 7.0 and r.reason.startswith("pruned")


def test_pruner_rules():
    assert Pruner(fixed=3.0).deadline(None, []) == 3.0
    assert Pruner(estimator="median", factor=None).deadline(1.0, [1.0, 2.0, 9.0]) == 2.0
    assert Pruner(factor=1.5, min_history=3).deadline(1.0, [1.0]) is None
    with pytest.raises(ValueError, match="estimator"):
        Pruner(estimator="max")
    with pytest.raises(ValueError, match="factor"):
        Pruner(factor=-1.0)


def test_session_tracks_history_and_incumbent():
    s = Session(StaticResampling(2, "mean"))
    it = iter([2.0, 4.0, 1.0, 1.0])
    s.evaluate(lambda: next(it))
    s.evaluate(lambda: next(it))
    assert s.iteration == 2 and s.history == [2.0, 4.0, 1.0, 1.0] and s.incumbent == 1.0
    assert isinstance(s.results[0], NoisyResult)
    with pytest.raises(Exception):
        s.results[0].value = 0.0  # frozen


def test_bad_input_is_rejected():
    with pytest.raises(ValueError, match="k must be >= 1"):
        StaticResampling(0)
    with pytest.raises(ValueError, match="aggregate"):
        StaticResampling(2, "max")
    with pytest.raises(ValueError, match="finite"):
        StaticResampling(1).evaluate(lambda: float("nan"))
    with pytest.raises(ValueError, match="number"):
        StaticResampling(1).evaluate(lambda: "fast")
    with pytest.raises(ValueError, match="max_samples"):
        SEDR(min_samples=5, max_samples=3)
    with pytest.raises(TypeError, match="callable"):
        StaticResampling(1).evaluate(3.0)
