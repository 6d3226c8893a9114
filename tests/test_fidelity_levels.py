"""The fidelity levels a run lays out when ``run_cost`` prices them (issue 44): levels spaced in cost,
not only in fidelity value (gptask.problem.fidelity.cost_spaced, gptask.tuning.fidelity.run_levels)."""

import logging

import numpy as np
import pytest

import gptask as gt
from gptask.data.storage import open_history
from gptask.problem.fidelity import cost_spaced, fidelity_levels
from gptask.results.rebuild import result_from_history
from gptask.tuning.fidelity import LEVEL_COST_RATIO as R, run_levels

TASKS = gt.Space([gt.Integer("n", 1, 4)])
PARAMS = gt.Space([gt.Real("x", 0.0, 1.0), gt.Real("y", 0.0, 1.0)])
FRACTION = gt.Space([gt.Real("s", 0.0, 1.0)])
FAST = dict(restarts=1, refit_restarts=1, pso_particles=12, pso_iters=8, progress=False)


def objective(task, p):
    """Optimum 0 at (0.3, 0.7) at the target s = 1; a bias shrinking as s grows."""
    return (p["x"] - 0.3) ** 2 + (p["y"] - 0.7) ** 2 + 0.2 * (1 - p["s"]) * p["x"]


def floor_cost(point):
    """The MF-GP literature's cost, 0.1 + 0.9 s^2 seconds: a floor the ladder's lowest levels all pay."""
    return 0.1 + 0.9 * point["s"] ** 2


def linear_cost(point):
    return point["s"]


def problem(run_cost):
    return gt.Problem(TASKS, PARAMS, objective, fidelity=FRACTION, target_fidelity={"s": 1.0}, run_cost=run_cost)


def test_a_level_within_the_cost_factor_of_the_cheaper_level_kept_is_left_out():
    ladder = [1.0, 1 / 3, 1 / 9, 1 / 27]
    floor = [0.1 + 0.9 * s ** 2 for s in ladder]  # 1, 0.2, 0.111, 0.101
    assert cost_spaced(floor, R) == [0, 1, 3]  # 1/9 costs 1.1x 1/27: left out; 1/3 costs 2x: kept
    assert cost_spaced(ladder, R) == [0, 1, 2, 3]  # a cost proportional to the fidelity: ETA apart, all kept
    assert cost_spaced([1.0, 0.7, 0.5, 0.3], R) == [0, 1, 3]  # 0.5 is 1.67x 0.3: left out; 0.7 is 2.3x: kept
    assert cost_spaced([1.0, 0.2, float("nan"), 0.1], R) == [0, 1, 2, 3]  # a price it cannot read keeps them all
    assert cost_spaced([1.0, 0.0, 0.0], R) == [0, 1, 2]
    assert cost_spaced([1.0, 0.9, 0.8], R) == [0, 2]  # the target and the cheapest are always kept
    # prices that do not fall level by level (a Categorical ladder in its listed order): nothing left out
    assert cost_spaced([1.0, 0.25 ** 3, 0.5 ** 3], R) == [0, 1, 2]
    assert cost_spaced(floor, 1.0) == [0, 1, 2, 3]  # a ratio of 1: the whole ladder (the rule before)
    assert cost_spaced(floor, 3.0) == [0, 3]  # ETA: the target and the cheapest level
    rng = np.random.default_rng(0)
    for _ in range(300):  # the two properties that define the rule, on random ladders
        p = np.sort(rng.uniform(0.01, 1.0, size=rng.integers(3, 7)))[::-1]
        kept = cost_spaced(p, R)
        assert kept[0] == 0 and kept[-1] == len(p) - 1 and kept == sorted(set(kept))
        below = kept[1:]  # the kept levels under the target, dearest first: each R times the next cheaper one
        assert all(p[a] >= R * p[b] for a, b in zip(below, below[1:]))
        for k in set(range(len(p))) - set(kept):  # a level left out costs less than R times the cheaper one kept
            assert p[k] < R * p[min(j for j in kept if j > k)]


def test_a_cost_floor_leaves_out_a_level_as_cheap_as_the_one_below_in_history_and_rebuilt_result(tmp_path, caplog):
    path = tmp_path / "h.sqlite"
    with caplog.at_level(logging.INFO, logger="gptask.tuning.fidelity"):
        r = gt.tune(problem(floor_cost), [{"n": 1}], cost_budget=4.0, n_initial=6, seed=1, history=path, **FAST)
    kept = [1.0, 1 / 3, 1 / 27]
    assert len(fidelity_levels(FRACTION, {"s": 1.0})) == 4
    assert [lv["s"] for lv in r.fidelity["levels"]] == pytest.approx(kept)
    assert sorted({t.task["s"] for t in r.history}) == pytest.approx(sorted(kept))
    assert "costing less than 1.7 times the cheaper level kept are left out" in caplog.text
    with open_history(path, read_only=True) as h:
        assert [t["s"] for t in h.tasks()] == pytest.approx(kept)
        assert [lv["s"] for lv in result_from_history(h).fidelity["levels"]] == pytest.approx(kept)
    again = gt.tune(problem(floor_cost), [{"n": 1}], cost_budget=6.0, n_initial=6, seed=1, history=path, **FAST)
    assert [t.id for t in again.history][: len(r.history)] == [t.id for t in r.history]
    keys = [(t.task_index, tuple(sorted(t.params.items()))) for t in again.history]
    assert len(keys) == len(set(keys))  # resumed on the same levels: nothing ran twice


@pytest.mark.parametrize("run_cost", [linear_cost, None])
def test_a_cost_spaced_ladder_or_an_unpriced_one_keeps_every_level(run_cost):
    r = gt.tune(problem(run_cost), [{"n": 2}], budget=6, n_initial=4, seed=0, **FAST)
    ladder = [1.0, 1 / 3, 1 / 9, 1 / 27]
    assert [lv["s"] for lv in r.fidelity["levels"]] == pytest.approx(ladder)
    assert sorted({t.task["s"] for t in r.history}, reverse=True) == pytest.approx(ladder)


def test_a_run_cost_that_cannot_price_the_levels_leaves_the_whole_ladder_and_says_why(caplog):
    def broken(point):
        return 1.0 / (point["s"] - point["s"])  # ZeroDivisionError: a user's cost model gone wrong

    with caplog.at_level(logging.INFO, logger="gptask.tuning.fidelity"):
        levels = run_levels(problem(broken), [{"n": 1}, {"n": 2}], seed=0)
    assert levels == fidelity_levels(FRACTION, {"s": 1.0})
    assert "their run_cost was not had (ZeroDivisionError" in caplog.text
    assert run_levels(problem(floor_cost), [{"n": 1}, {"n": 2}], seed=0) == [levels[0], levels[1], levels[3]]


def test_an_ordinal_ladder_runs_its_cheap_design_at_the_value_farthest_from_the_target():
    """``Ordinal([0.25, 0.5, 1.0])``, target 1: the ladder is 1, 0.5, 0.25, so the cheap design (the
    last level's) runs at 0.25; it ran at 0.5 when the ladder kept the listed order (1, 0.25, 0.5): seed 0
    ran its first 4 runs at 0.5, and its first run at 0.25 was its 9th."""
    sizes = gt.Space([gt.Ordinal("s", [0.25, 0.5, 1.0])])
    assert fidelity_levels(sizes, {"s": 1.0}) == [{"s": 1.0}, {"s": 0.5}, {"s": 0.25}]
    pr = gt.Problem(TASKS, PARAMS, objective, fidelity=sizes, target_fidelity={"s": 1.0},
                    run_cost=lambda point: point["s"] ** 3)
    r = gt.tune(pr, [{"n": 1}], budget=8, n_initial=6, seed=0, **FAST)
    assert [t.task["s"] for t in r.history][:6] == [0.25] * 6  # the cheap design at the cheapest size
    assert {t.task["s"] for t in r.history} == {1.0, 0.5, 0.25}
