"""The consensus of several machines (gptask.results.consensus): the configurations best on average over the
machines seen lead a new machine's design and its run-free pick; checked against brute force."""

import itertools

import numpy as np
import pytest

import gptask as gt
from gptask.results.consensus import consensus_order, consensus_scores, measured_values
from gptask.sources.multisource import MACHINE_DIM, target_tasks
from gptask.data.trials import Status, Trial

CONFIGS = [{"x": x, "k": k} for x, k in itertools.product(range(10), (2, 4, 6))]
TASK = {"t": 0.5}


def _tables(seed=0):
    """Two machines' recorded times of every configuration (random, no structure a model could
    interpolate), machine b failing on the configuration best on a."""
    rng = np.random.default_rng(seed)
    a, b = np.exp(rng.normal(0, 0.5, len(CONFIGS))), np.exp(rng.normal(0, 0.5, len(CONFIGS)))
    b_fails = int(np.argmin(a))
    return a, b, b_fails


def _listed(a):
    return gt.Problem(gt.Space([gt.Real("t", 0.0, 1.0)]), gt.Space([gt.Integer("x", 0, 9), gt.Integer("k", 2, 6)]),
                      lambda task, p: float(a[CONFIGS.index(dict(p))]), name="recorded",
                      candidates=lambda task: CONFIGS)


def _rows(a, b, b_fails):
    on_a = [{**TASK, **c, "value": float(a[k]), "status": "complete", "machine.label": "a"}
            for k, c in enumerate(CONFIGS)]
    on_b = [{**TASK, **c, "value": None if k == b_fails else float(b[k]),
              "status": "failed" if k == b_fails else "complete", "machine.label": "b"} for k, c in enumerate(CONFIGS)]
    return [gt.Source(on_a, status="status"), gt.Source(on_b, status="status")]


def _brute_force_order(a, b, b_fails):
    score = [np.inf if k == b_fails else np.log(a[k] * b[k]) / 2 for k in range(len(CONFIGS))]
    return [CONFIGS[k] for k in np.argsort(score, kind="stable") if np.isfinite(score[k])]


def test_scores_are_the_mean_log_value_and_a_failure_anywhere_rules_a_candidate_out():
    V = np.array([[1.0, 2.0, 4.0, 1.0], [4.0, 2.0, 1.0, np.inf]])
    s = consensus_scores(V)
    assert np.allclose(s[:3], np.log([2.0, 2.0, 2.0])) and s[3] == np.inf  # geometric means 2, 2, 2
    # not all positive: each task's values standardised over the candidates that never failed
    W = np.array([[-1.0, 0.0, 1.0, 5.0], [1.0, 0.0, -1.0, np.inf]])
    z = (W[:, :3] - W[:, :3].mean(1, keepdims=True)) / W[:, :3].std(1, keepdims=True)
    assert np.allclose(consensus_scores(W)[:3], z.mean(0)) and consensus_scores(W)[3] == np.inf
    with pytest.raises(ValueError, match="NaN"):
        consensus_scores(np.array([[1.0, np.nan]]))


def test_measured_values_take_the_median_and_mark_failures_and_gaps():
    t1, t2 = {"m": "a"}, {"m": "b"}
    c1, c2, c3 = {"x": 1}, {"x": 2}, {"x": 3}
    trials = [Trial(id=k, task_index=0, task=task, params=c, status=st, value=v)
              for k, (task, c, st, v) in enumerate([(t1, c1, Status.COMPLETE, 3.0), (t1, c1, Status.COMPLETE, 1.0),
                                                   (t1, c1, Status.COMPLETE, 2.0), (t1, c2, Status.FAILED, None),
                                                   (t2, c2, Status.COMPLETE, 5.0), (t2, c3, Status.PENDING, None)])]
    M = measured_values(trials, [t1, t2], [c1, c2, c3])
    assert M[0, 0] == 2.0 and M[0, 1] == np.inf and np.isnan(M[0, 2])
    assert np.isnan(M[1, 0]) and M[1, 1] == 5.0 and np.isnan(M[1, 2])  # a pending trial is no measurement
    # the order covers what both measured, none failed: only c2 is measured by both, and it failed on a
    assert consensus_order(trials, [t1, t2]) == []
    assert consensus_order(trials, [t1]) == [c1]


def test_a_new_machine_starts_with_the_configurations_best_on_every_machine_seen():
    """gt.tune with two other machines' complete campaigns of the same task: the new machine's
    initial design is the brute-force consensus order (a configuration failed on one machine left
    out), its searched runs choose among the next ones, and the run-free pick is its first
    configuration even when the summary of large sources left that configuration's measurements out
    of the model."""
    a, b, b_fails = _tables()
    order = _brute_force_order(a, b, b_fails)
    assert CONFIGS[b_fails] not in order
    sources = _rows(a, b, b_fails)
    # the default initial design: TLA2's, 30 % of the budget (3 runs of 10)
    r = gt.tune(_listed(a), [TASK], 10, seed=0, sources=sources, provenance="new", progress=False)
    (i,) = target_tasks(r)
    assert r.tasks[i] == {**TASK, MACHINE_DIM: "new"}
    runs = sorted((t for t in r.history if t.task_index == i), key=lambda t: t.id)
    assert [t.params for t in runs[:3]] == order[:3] and [t.source for t in runs[2:4]] == ["initial", "search"]
    # the searched runs chose among the next configurations of that order (10 at a time)
    assert len(runs) == 10 and all(t.params in order[: 3 + 10 + k] for k, t in enumerate(runs[3:]))
    # judged sources (select_sources=True): the design that runs before the judgement is the same
    r = gt.tune(_listed(a), [TASK], 6, seed=0, sources=sources, provenance="new", select_sources=True,
                n_initial=4, progress=False)
    mine = sorted((t for t in r.history if t.task_index in target_tasks(r)), key=lambda t: t.id)
    assert [t.params for t in mine[:4]] == order[:4] and len(mine) == 6
    # run-free, the sources summarised to 8 measurements per machine (their 2 best and 6 drawn)
    pick = gt.predict_optimum(None, TASK, sources=sources, machine="new", problem=_listed(a), source_points=8,
                              restarts=1)
    assert pick.route == "consensus" and pick.params == order[0]
