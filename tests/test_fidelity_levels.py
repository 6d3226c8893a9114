"""The fidelity levels a run lays out when ``run_cost`` prices them (issue 44): levels spaced in cost,
not only in fidelity value (gptask.problem.fidelity.cost_spaced, gptask.tuning.fidelity.run_levels)."""

import logging

import numpy as np
import pytest

import gptask as gt
from gptask.data.storage import open_history
from gptask.problem.fidelity import LEVEL_COST_RATIO, cost_spaced, fidelity_levels
from gptask.results.rebuild import result_from_history

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


def test_levels_within_the_cost_factor_are_one_rung_that_keeps_its_dearest_level():
    ladder = [1.0, 1 / 3, 1 / 9, 1 / 27]
    floor = [0.1 + 0.9 * s ** 2 for s in ladder]  # 1, 0.2, 0.111, 0.101
    assert cost_spaced(floor) == [0, 1, 2]  # 1/9 and 1/27 cost 1.1x apart: one rung, 1/9 kept
    assert cost_spaced(ladder) == [0, 1, 2, 3]  # a cost proportional to the fidelity: ETA apart, all kept
    assert cost_spaced([1.0, 0.7, 0.5, 0.3]) == [0, 2]  # 0.7 and 0.3 within 1.73x of the level kept above
    assert cost_spaced([1.0, 0.2, float("nan"), 0.1]) == [0, 1, 2, 3]  # a price it cannot read keeps them all
    assert cost_spaced([1.0, 0.0, 0.0]) == [0, 1, 2]
    assert cost_spaced([1.0, 0.9, 0.8]) == [0, 2]  # every level near the target's price: the cheapest still kept
    rng = np.random.default_rng(0)
    for _ in range(300):  # the two properties that define the rule, on random ladders
        p = np.sort(rng.uniform(0.01, 1.0, size=rng.integers(3, 7)))[::-1]
        kept = cost_spaced(p)
        assert kept[0] == 0 and kept == sorted(set(kept)) and len(kept) >= 2
        rungs = kept if p[kept[-1]] * LEVEL_COST_RATIO <= p[kept[-2]] else kept[:-1]  # the cheapest kept as a floor
        assert all(p[b] * LEVEL_COST_RATIO <= p[a] for a, b in zip(rungs, rungs[1:]))  # kept rungs a factor apart
        for k in set(range(len(p))) - set(kept):  # a dropped level costs more than 1/factor of the rung above it
            assert p[k] * LEVEL_COST_RATIO > p[max(j for j in rungs if j < k)]


def test_a_cost_floor_merges_the_ladder_s_lowest_levels_in_the_run_history_and_rebuilt_result(tmp_path, caplog):
    path = tmp_path / "h.sqlite"
    with caplog.at_level(logging.INFO, logger="gptask.tuning.fidelity"):
        r = gt.tune(problem(floor_cost), [{"n": 1}], cost_budget=4.0, n_initial=6, seed=1, history=path, **FAST)
    kept = [1.0, 1 / 3, 1 / 9]
    assert len(fidelity_levels(FRACTION, {"s": 1.0})) == 4
    assert [lv["s"] for lv in r.fidelity["levels"]] == pytest.approx(kept)
    assert sorted({t.task["s"] for t in r.history}) == pytest.approx(sorted(kept))
    assert "within a factor 1.7 of a dearer level's price are one rung" in caplog.text
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
