"""``failure_model=p``: design points the failure model expects to fail are replaced by the
farthest pool point it expects to succeed (gptask/propose/steering.py, checked against a brute-force
maximin choice), every search proposal is at least p likely to succeed, and a bad p is refused
before any run."""

import logging

import numpy as np
import pytest

import gptask as gt
from gptask.propose.steering import steer_design
from gptask.data.trials import Status, params_key

PARAMS = gt.Space([gt.Real("x1", 0.0, 1.0), gt.Real("x2", 0.0, 1.0)])
TASKS = gt.Space([gt.Real("t", 0.0, 1.0)])


class LeftHalfSucceeds:
    """A stand-in failure model: runs with x1 < 0.5 succeed (P 0.9), the others fail (P 0.1)."""

    def prob_success(self, task, X):
        return np.where(np.asarray(X)[:, 0] < 0.5, 0.9, 0.1)


def _p(x1, x2):
    return {"x1": float(x1), "x2": float(x2)}


def test_points_expected_to_fail_are_swapped_for_the_farthest_likely_pool_points():
    rng = np.random.default_rng(0)
    points = [_p(0.8, 0.1), _p(0.2, 0.2), _p(0.9, 0.9), _p(0.7, 0.5)]
    default = points[3]  # fails too, but the user's default is never replaced
    pool = [_p(*xy) for xy in rng.random((40, 2))]
    runs = [_p(0.1, 0.9), _p(0.6, 0.6)]
    got = steer_design(points, {params_key(default)}, {"t": 0.0}, PARAMS, LeftHalfSucceeds(), 0.5, pool,
                       runs)
    assert sorted(got) == [0, 2]
    # brute force: in order, the left-half pool point farthest from the runs and the kept points
    kept = [np.array([p["x1"], p["x2"]]) for p in runs + [points[1], points[3]]]
    free = [c for c in pool if c["x1"] < 0.5]
    for k in (0, 2):
        far = max(free, key=lambda c: min(np.hypot(c["x1"] - q[0], c["x2"] - q[1]) for q in kept))
        assert got[k] == far
        free.remove(far)
        kept.append(np.array([far["x1"], far["x2"]]))


def test_nothing_is_swapped_when_every_point_is_likely_or_no_pool_point_is_better():
    likely = [_p(0.1, 0.5), _p(0.3, 0.3)]
    assert steer_design(likely, set(), {"t": 0.0}, PARAMS, LeftHalfSucceeds(), 0.5, [_p(0.2, 0.2)], []) == {}
    unlikely_pool = [_p(0.6, 0.1), _p(0.95, 0.95)]
    assert steer_design([_p(0.9, 0.1)], set(), {"t": 0.0}, PARAMS, LeftHalfSucceeds(), 0.5, unlikely_pool, []) == {}


def failing(task, p):
    """Two fifths of the square fail (x1 + x2 > 1.1 + 0.2 t); the optimum lies inside."""
    if p["x1"] + p["x2"] > 1.1 + 0.2 * task["t"]:
        raise MemoryError("out of memory")
    return 1.0 + (p["x1"] - 0.5) ** 2 + (p["x2"] - 0.3) ** 2


def _run(failure_model, seed):
    prob = gt.Problem(TASKS, PARAMS, failing, name="failing_cautious")
    ask_p = []
    with gt.Tuner(prob, tasks=[{"t": 0.0}, {"t": 1.0}], budget=14, n_initial=8, seed=seed, max_failures=None,
                  failure_model=failure_model) as tu:
        ev = gt.Evaluator(failing)
        while not tu.done:
            for t in tu.ask(2):
                if t.source == "search":
                    ask_p.append(float(tu.outputs.failure.prob_success(t.task, PARAMS.encode([t.params]))[0]))
                tu.tell(t, ev(t.task, t.params))
        design_failed = sum(t.status is Status.FAILED and t.source == "initial" for t in tu.records)
    return design_failed, ask_p


def test_a_cautious_run_fails_less_in_its_designs_and_searches_only_where_success_is_likely():
    plain = [_run(True, s)[0] for s in range(3)]
    cautious = [_run(0.8, s) for s in range(3)]
    # the same Latin hypercubes, the failing points swapped once a failure has been seen
    assert sum(c[0] for c in cautious) < sum(plain), (plain, cautious)
    seen = [p for _, ps in cautious for p in ps]
    assert seen and min(seen) >= 0.8, seen


@pytest.mark.parametrize("bad", [0.3, 1.0, 1.5, "yes", None])
def test_a_bad_failure_model_option_is_refused_before_any_run(bad):
    calls = []

    def objective(task, p):
        calls.append(p)
        return 1.0

    prob = gt.Problem(TASKS, PARAMS, objective, name="refused")
    with pytest.raises(ValueError, match="failure_model"):
        gt.tune(prob, tasks=[{"t": 0.0}], budget=4, n_initial=2, progress=False, failure_model=bad)
    assert calls == []


def test_a_cautious_run_stopped_in_its_designs_resumes_without_repeating_or_losing_a_run(tmp_path, caplog):
    prob = gt.Problem(TASKS, PARAMS, failing, name="failing_cautious")
    path = tmp_path / "cautious.sqlite"
    ev = gt.Evaluator(failing)
    tasks = [{"t": 0.0}, {"t": 1.0}]
    told = 0
    with gt.Tuner(prob, tasks=tasks, budget=12, n_initial=8, seed=1, history=path, max_failures=None,
                  failure_model=0.7) as tu:
        while told < 9:  # stopped in the middle of the designs, after some runs have failed
            for t in tu.ask(2):
                tu.tell(t, ev(t.task, t.params))
                told += 1
        assert any(t.status is Status.FAILED for t in tu.records)
    with caplog.at_level(logging.INFO, logger="gptask.tuning.tuner"):
        res = gt.tune(prob, tasks=tasks, budget=12, n_initial=8, seed=1, history=path, progress=False,
                      max_failures=None, failure_model=0.7)
    assert "expects to fail replaced" in caplog.text  # the resumed designs were steered
    for i in range(2):
        runs = [t for t in res.history if t.task_index == i]
        assert len(runs) == 12 and all(t.status.finished for t in runs)
        assert len({params_key(t.params) for t in runs}) == 12  # nothing ran twice
        assert sum(t.source == "initial" for t in runs) == 8
