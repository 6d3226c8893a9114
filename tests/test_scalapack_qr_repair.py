"""apps.scalapack_qr.problem.repair: the map of a peer tuner's infeasible proposal to a feasible one."""

from __future__ import annotations

import itertools

import pytest

from apps.scalapack_qr.problem import problem, repair

BLOCKS = (1, 3, 64, 129, 200, 256)


def _brute_force_cases(pb, tasks):
    space = pb.param_space
    rng = {d: range(space[d].lo, space[d].hi + 1) for d in ("nproc", "p", "nth")}
    for task, mb, nb, nproc, p, nth in itertools.product(tasks, BLOCKS, BLOCKS, rng["nproc"], rng["p"], rng["nth"]):
        yield task, {"mb": mb, "nb": nb, "nproc": nproc, "p": p, "nth": nth}


@pytest.mark.parametrize("nodes,cores", [(1, 2), (1, 4), (2, 3)])
def test_repair_gives_feasible_points_and_keeps_feasible_ones(nodes, cores):
    pb = problem(backend="model", nodes=nodes, cores=cores, m_max=2000)
    tasks = [{"m": 128, "n": 128}, {"m": 300, "n": 2000}, {"m": 2000, "n": 150}]
    changed = 0
    for task, params in _brute_force_cases(pb, tasks):
        fixed = repair(pb, task, params)
        assert pb.is_feasible(task, fixed), (task, params, fixed)
        if pb.is_feasible(task, params):
            assert fixed == params
            continue
        changed += 1
        # only moves down, never touches nproc, and p still divides nproc
        assert fixed["nproc"] == params["nproc"]
        assert all(fixed[k] <= params[k] for k in ("mb", "nb", "p", "nth"))
        q = fixed["nproc"] // fixed["p"]
        # the block sizes are the largest that fit when they had to change
        if fixed["mb"] != params["mb"]:
            assert fixed["mb"] * fixed["p"] <= task["m"] < (fixed["mb"] + 1) * fixed["p"]
        if fixed["nb"] != params["nb"]:
            assert fixed["nb"] * q <= task["n"] < (fixed["nb"] + 1) * q
        if fixed["nth"] != params["nth"]:
            assert fixed["nproc"] * fixed["nth"] <= nodes * cores < fixed["nproc"] * (fixed["nth"] + 1)
    assert changed > 0


def test_repair_leaves_threads_alone_when_oversubscribing():
    pb = problem(backend="model", cores=4, oversubscribe=True)
    params = {"mb": 8, "nb": 8, "nproc": 4, "p": 2, "nth": 4}
    assert repair(pb, {"m": 500, "n": 500}, params) == params
    fixed = repair(pb, {"m": 500, "n": 500}, {"mb": 8, "nb": 256, "nproc": 3, "p": 2, "nth": 4})
    assert fixed == {"mb": 8, "nb": 500 // 3, "nproc": 3, "p": 1, "nth": 4}


def test_repair_rejects_values_outside_the_box():
    pb = problem(backend="model", cores=2)
    with pytest.raises(ValueError, match="mb"):
        repair(pb, {"m": 500, "n": 500}, {"mb": 0, "nb": 8, "nproc": 1, "p": 1, "nth": 1})
