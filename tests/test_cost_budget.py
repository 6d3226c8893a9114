"""The cost budget kept run by run (issue 44): no run starts once the summed cost has reached
``cost_budget``, in every loop (serial, MPI rank 0, MPI parallel_evaluations by rounds, the
asynchronous executor loop, the CLI); the runs of a batch not started stay PENDING, released, and a
resume with a larger budget runs them first, nothing twice. The expected counts are worked out by
hand from each run's cost (``run_cost``) and the order the designs are claimed in."""

import concurrent.futures as cf
import sys
from pathlib import Path

import pytest

import gptask as gt
from gptask.data.trials import Status

TASKS = gt.Space([gt.Integer("n", 1, 4)])
PARAMS = gt.Space([gt.Real("x", 0.0, 1.0)])
FAST = dict(restarts=1, refit_restarts=1, pso_particles=8, pso_iters=4, progress=False)
FOUR = [{"n": k} for k in (1, 2, 3, 4)]


def cost_n(point):
    """A run of task n costs n seconds."""
    return float(point["n"])


class Calls:
    """The objective, logging every call (task n, x)."""

    def __init__(self):
        self.calls = []

    def __call__(self, task, p):
        self.calls.append((task["n"], p["x"]))
        return (p["x"] - 0.2 * task["n"]) ** 2


def by_start(history):
    """The finished runs in the order they started (serially: their ids' order; a resumed trial
    started when it was re-proposed, after the runs finished before)."""
    return sorted([t for t in history if t.status is not Status.PENDING], key=lambda t: t.finished)


def check_kept(history, budget, in_flight=1):
    """Brute force: a run starts only while the summed cost of the runs finished before is below
    ``budget``, so at most ``in_flight`` runs finish once the sum has reached it (serially 1)."""
    costs = [t.extra["cost"] for t in by_start(history)]
    reached = next((k for k in range(len(costs)) if sum(costs[: k + 1]) >= budget), None)
    assert reached is not None, f"the budget {budget} was not reached: costs {costs}"
    assert len(costs) - 1 - reached <= in_flight - 1, f"runs started past the budget {budget}: costs {costs}"


def test_a_serial_batch_stops_at_the_budget_and_the_rest_stays_pending(tmp_path):
    """4 tasks costing 1, 2, 3, 4 s; their first design points are one batch (task order). With
    cost_budget=5: runs of 1 (0 < 5), 2 (1 < 5), 3 (3 < 5); then 6 >= 5: task 4's run does not start.
    3 runs, 6 s (the batch as a whole: 4 runs, 10 s). The resume with cost_budget=12 runs task 4's
    released trial first (6 < 12 -> 10), then the next batch, the second design points of tasks
    1, 2, 3: 1 (10 < 12 -> 11), 2 (11 < 12 -> 13), and 3 does not start: 5 runs, 13 s."""
    path = tmp_path / "h.sqlite"
    f = Calls()
    prob = gt.Problem(TASKS, PARAMS, f, run_cost=cost_n)
    r = gt.tune(prob, FOUR, budget=6, n_initial=3, cost_budget=5.0, seed=0, history=path, **FAST)
    assert [t.task["n"] for t in r.history] == [1, 2, 3]
    assert r.cost_spent == 6.0 and len(f.calls) == 3
    assert [(t.task["n"], t.owner) for t in r.pending] == [(4, None)]  # released: any process takes it
    check_kept(r.history, 5.0)

    # the same budget again: nothing runs, the pending trial stays (the run is done, it does not wait)
    same = gt.tune(prob, FOUR, budget=6, n_initial=3, cost_budget=5.0, seed=0, history=path, **FAST)
    assert len(f.calls) == 3 and same.cost_spent == 6.0 and [t.id for t in same.pending] == [r.pending[0].id]

    more = gt.tune(prob, FOUR, budget=6, n_initial=3, cost_budget=12.0, seed=0, history=path, **FAST)
    ran = by_start(more.history)
    assert [t.task["n"] for t in ran] == [1, 2, 3, 4, 1, 2]
    assert ran[3].id == r.pending[0].id and ran[3].attempts == 2  # the pending trial, re-proposed as it was
    assert more.cost_spent == 13.0 and [t.task["n"] for t in more.pending] == [3]
    assert len(f.calls) == 6 and len(set(f.calls)) == 6  # nothing ran twice
    check_kept(more.history, 12.0)


def test_a_cost_output_is_kept_run_by_run_too():
    """The cost as the objective's "cost" output (no run_cost): 4 tasks whose runs report 2 s each,
    cost_budget=3: runs of 2 (0 < 3) and 2 (2 < 3), then 4 >= 3: 2 runs, 4 s."""
    def f(task, p):
        return {"time": (p["x"] - 0.2 * task["n"]) ** 2, "cost": 2.0}

    prob = gt.Problem(TASKS, PARAMS, f, objectives=["time"], outputs=["cost"])
    r = gt.tune(prob, FOUR, budget=6, n_initial=3, cost_budget=3.0, seed=0, **FAST)
    assert [t.task["n"] for t in r.history] == [1, 2] and r.cost_spent == 4.0
    assert len(r.pending) == 2


def fidelity_problem():
    from test_fidelity import problem

    return problem()


@pytest.mark.parametrize("budget", [2.0, 5.0])
def test_with_fidelity_no_run_starts_past_the_budget(budget):
    """Two tuned tasks with fidelity (8 tasks of the LCM: 2 x 4 levels, runs costing 0.037 to 1 s):
    the designs and search rounds ask several runs at once; none starts once the budget is spent."""
    r = gt.tune(fidelity_problem(), [{"n": 2}, {"n": 3}], cost_budget=budget, n_initial=6, seed=1, **FAST)
    check_kept(r.history, budget)
    assert r.cost_spent == pytest.approx(sum(t.extra["cost"] for t in r.history))


def test_the_asynchronous_loop_keeps_at_most_one_run_per_worker_past_the_budget():
    """An executor with 2 workers: once the summed cost reaches the budget, at most the other
    worker's run finishes after it."""
    f = Calls()
    prob = gt.Problem(TASKS, PARAMS, f, run_cost=cost_n)
    with cf.ThreadPoolExecutor(2) as pool:
        r = gt.tune(prob, FOUR, budget=6, n_initial=3, cost_budget=9.0, seed=0, executor=pool, max_in_flight=2,
                    **FAST)
    check_kept(r.history, 9.0, in_flight=2)
    assert 9.0 <= r.cost_spent < 9.0 + 4 + 4


def test_cli_cost_budget_with_several_tasks(tmp_path, capsys):
    """gptask tune --cost-budget with 4 tasks (wall-time cost, each run >= 0.05 s): the first
    batch of 4 runs costs more than the budget, and no run starts once it is spent."""
    from gptask.cli.main import main
    from gptask.data.storage import SQLiteStorage

    sys.path.insert(0, str(Path(__file__).parent))
    path = tmp_path / "h.sqlite"
    assert main(["tune", "--problem", "problems_for_tests:counting_problem", "--problem-options", "sleep=0.05",
                 "--tasks", "4", "--n-initial", "3", "--cost-budget", "0.12", "--history", str(path), "--quiet"]) == 0
    trials = SQLiteStorage(path).trials()
    done = [t for t in trials if t.status is not Status.PENDING]
    check_kept(done, 0.12)
    # 3 runs cost at least 0.15 >= 0.12: at most 3 start (2 on a machine slow enough that 2 cost 0.12);
    # the batch's other trials stay pending
    assert len(done) in (2, 3) and len(trials) == 4
    out = capsys.readouterr().out
    assert "cost spent: " in out and " of a cost budget of 0.12 s" in out


@pytest.mark.mpi
@pytest.mark.parametrize("evals,budget,ran,pending", [
    # rank 0 runs the batch of costs 1, 2, 3, 4 one by one: 1 (0 < 3.5), 2 (1 < 3.5), 3 (3 < 3.5), then 6
    ("root", 3.5, [1, 2, 3], [4]),
    # parallel_evaluations on 2 ranks: rounds of one run per rank: (1, 2) as 0 < 3.5, (3, 4) as 3 < 3.5
    ("parallel", 3.5, [1, 2, 3, 4], []),
    # ... and with 2.5: (1, 2), then 3 >= 2.5: the second round does not start
    ("parallel", 2.5, [1, 2], [3, 4]),
])
def test_under_mpi_runs_stop_at_the_budget(tmp_path, evals, budget, ran, pending):
    """The whole batch ran before (4 runs, 10 s, with either budget). In flight with
    parallel_evaluations: one run per rank, the budget checked before each round."""
    import json

    from test_mpi import SCRIPTS, mpiexec, run

    out = tmp_path / "cost.json"
    r = run([mpiexec(), "-n", "2", sys.executable, str(SCRIPTS / "cost_budget_run.py"), str(out), evals, str(budget)])
    assert r.returncode == 0, r.stderr
    for rank in (0, 1):
        got = json.loads(out.with_suffix(f".rank{rank}.json").read_text())
        assert got == {"ran": ran, "cost": float(sum(ran)), "pending": pending}, rank
