"""The summary of large sources (gptask/model/source_summary.py): what it keeps, against a direct count
of the best values and the inclusion rates of a uniform draw; and its use by
gt.tune(..., sources=..., source_points=...)."""

import itertools

import numpy as np
import pytest

import gptask as gt
from gptask.model.source_summary import BEST_SHARE, summary_indices
from gptask.sources.multisource import MACHINE_DIM, SOURCE_POINTS_AUTO, SourceError


def test_the_best_quarter_is_kept_and_the_rest_is_a_uniform_draw():
    rng = np.random.default_rng(0)
    values = [None if rng.random() < 0.15 else float(v) for v in rng.random(120)]
    keep = 40
    best = {i for _, i in sorted((v, i) for i, v in enumerate(values) if v is not None)[: int(keep * BEST_SHARE)]}
    counts = np.zeros(120)
    for seed in range(2000):
        got = summary_indices(values, keep, seed=seed)
        assert len(got) == keep and len(set(got.tolist())) == keep and best <= set(got.tolist())
        counts[got] += 1
    others = np.array([i not in best for i in range(120)])
    rate = (keep - len(best)) / others.sum()  # every other measurement, failed ones too, equally likely
    assert np.all(np.abs(counts[others] / 2000 - rate) < 5 * np.sqrt(rate * (1 - rate) / 2000))
    assert summary_indices(values, keep).tolist() == summary_indices(values, keep).tolist()  # deterministic


def test_summary_edge_cases():
    assert summary_indices([1.0] * 10, 10).tolist() == list(range(10))
    assert len(summary_indices([None] * 10, 4)) == 4  # no complete measurement: a uniform draw
    with pytest.raises(ValueError, match="keep must be a positive"):
        summary_indices([1.0] * 10, 0)


def _campaign(label, t, xs):
    return [{"t": t, "x": x, "k": k, "value": 1.0 + (x / 100 - t) ** 2 + 0.05 * (k - 4) ** 2, "machine.label": label}
            for x, k in itertools.product(xs, (2, 4, 6))]


def test_large_sources_are_summarised_and_the_model_still_finds_the_optimum():
    problem = gt.Problem(gt.Space([gt.Real("t", 0.0, 1.0)]), gt.Space([gt.Integer("x", 0, 100), gt.Integer("k", 1, 8)]),
                         lambda task, p: 1.0 + (p["x"] / 100 - task["t"]) ** 2 + 0.05 * (p["k"] - 4) ** 2,
                         name="large")
    big = _campaign("old", 0.3, range(101)) + _campaign("old", 0.7, range(101))  # 606 measurements
    r = gt.tune(problem, [{"t": 0.5}], 10, sources=[big], source_points=40, provenance="new", n_initial=3, seed=0,
                progress=False)
    per_task = [sum(t.task_index == i for t in r.history) for i in range(3)]
    assert per_task == [40, 40, 10]
    kept = [t for t in r.history if t.task_index == 0]
    assert min(t.value for t in kept) == min(row["value"] for row in big if row["t"] == 0.3)  # the best is kept
    assert r.best(2)[1] < 1.01  # x near 50, k = 4
    # "auto": 606 measurements are under the automatic limit, so all of them come in
    assert len(big) < SOURCE_POINTS_AUTO
    r = gt.predict_optimum(None, {"t": 0.5}, sources=[big], problem=problem, machine="new", restarts=1)
    assert r.task[MACHINE_DIM] == "new"
    with pytest.raises(SourceError, match="source_points must be 'auto', a positive number"):
        gt.tune(problem, [{"t": 0.5}], 3, sources=[big], source_points=0, provenance="new", progress=False)
    with pytest.raises(SourceError, match="it needs sources="):
        gt.tune(problem, [{"t": 0.5}], 3, source_points=40, progress=False)
