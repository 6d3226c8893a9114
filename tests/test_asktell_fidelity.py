"""``gptask ask`` and ``tell`` on a problem with fidelity: the shell drives the same campaign as
``gt.tune`` (its levels, designs and cost budget), and a told run's cost is said when missing."""

import contextlib
import io
import json
import sys
from pathlib import Path

import pytest

import gptask as gt
from gptask.cli.main import main
from gptask.data.storage import SQLiteStorage, open_history
from gptask.data.trials import Status
from gptask.results.rebuild import result_from_history

sys.path.insert(0, str(Path(__file__).parent))
from problems_for_tests import fidelity_problem, fidelity_value  # noqa: E402

PROBLEM = "problems_for_tests:fidelity_problem"
FIRST = ["--task", "n=1", "--task", "n=2", "--budget", "12", "--seed", "0"]
TASKS = [{"n": 1}, {"n": 2}]


def cli(*args) -> tuple[int, str, str]:
    """``gptask ARGS`` in this process: (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main([str(a) for a in args])
    return rc, out.getvalue(), err.getvalue()


def run(trial: dict) -> float:
    """What the user's job does with an asked trial: the fidelity values are in its task row."""
    fid = {"iterations": trial["task"]["iterations"]}
    return fidelity_value(trial["task"], {**trial["params"], **fid})


def shell_campaign(history: Path, first: list[str], problem: str = PROBLEM, duration: bool = False):
    """Ask and tell until nothing is left to ask: (the batches asked, the last ask's stderr, the
    stderr of every tell)."""
    asked, tells = [], []
    while True:
        rc, out, err = cli("ask", history, "--problem", problem, "--json", *first)
        assert rc == 0, err
        first = []
        batch = json.loads(out)
        if not batch:
            return asked, err, tells
        asked.append(batch)
        for t in batch:
            extra = ["--duration", t["task"]["iterations"] / 1000.0] if duration else []
            rc, _, told = cli("tell", history, t["id"], repr(run(t)), *extra)
            assert rc == 0, told
            tells.append(told)


@pytest.mark.slow
def test_a_shell_campaign_with_fidelity_runs_its_levels_to_the_cost_budget(tmp_path):
    budget = 10.0
    h = tmp_path / "h.sqlite"
    batches, last, tells = shell_campaign(h, FIRST + ["--cost-budget", budget])
    levels = {t["task"]["iterations"] for b in batches for t in b}
    assert 1000 in levels and min(levels) < 100, levels  # the target and cheaper levels, in the task rows
    assert not any(tells)  # a priced problem: every told run has its cost (run_cost, where it is read)
    # the cost budget: nothing asked once spent (the batch asked last may end past it)
    trials = sorted(SQLiteStorage(h).trials(), key=lambda t: t.id)
    assert all(t.status is Status.COMPLETE for t in trials)
    assert [t.id for t in trials] == [t["id"] for b in batches for t in b]
    cost = [sum(t["task"]["iterations"] / 1000.0 for t in b) for b in batches]
    assert sum(cost[:-1]) < budget <= sum(cost)
    assert f"the cost budget is spent ({sum(cost):.4g} s of 10 s" in last
    # the same campaign as gt.tune: the same designs, run for run, and the searches at the same levels (each
    # ask refits the model in a new process: the searched configurations differ in their last digits)
    ref = sorted(gt.tune(fidelity_problem(), TASKS, budget=12, seed=0, cost_budget=budget, progress=False).history,
                 key=lambda t: t.id)
    assert [(t.task, t.params) for t in trials if t.source == "initial"] == \
        [(t.task, t.params) for t in ref if t.source == "initial"]
    mine, theirs = ([t.task for t in runs if t.source == "search"] for runs in (trials, ref))
    n = min(len(mine), len(theirs))  # the shell's last batch may end past the budget, gt.tune stops at it
    assert n >= 10 and mine[:n] == theirs[:n]
    # each task's best target run at its known optimum, x = 0.3 n (the cheap levels share it)
    with SQLiteStorage(h) as store:
        rebuilt = result_from_history(store)
    for i, n in enumerate((1, 2)):
        params, value = rebuilt.best(i)
        assert abs(params["x"] - 0.3 * n) < 0.02 and value == pytest.approx(fidelity_value({"n": n}, {
            **params, "iterations": 1000})), (i, params, value)
    _, shown, _ = cli("show", h)
    assert "low fidelity" in shown and "target" in shown


@pytest.mark.slow
def test_a_told_run_without_its_cost_is_said_where_the_cost_is_its_wall_time(history_location):
    """Without run_cost a run's cost is the --duration told: a tell without it says so; with a
    --duration the cost budget counts it. SQLite and PostgreSQL (several hosts tell one history)."""
    h = history_location
    first = FIRST + ["--cost-budget", "3"]
    rc, out, err = cli("ask", h, "--problem", "problems_for_tests:unpriced_fidelity_problem", "--json", "-n", "2",
                       *first)
    assert rc == 0, err
    one, two = json.loads(out)
    rc, _, note = cli("tell", h, one["id"], repr(run(one)))
    assert rc == 0 and f"trial {one['id']} is recorded without a cost" in note and "--duration" in note
    rc, _, quiet = cli("tell", h, two["id"], repr(run(two)), "--duration", "0.5")
    assert rc == 0 and quiet == ""
    _, last, tells = shell_campaign(h, [], "problems_for_tests:unpriced_fidelity_problem", duration=True)
    assert not any(tells) and "the cost budget is spent" in last
    with open_history(h, read_only=True) as store:
        trials, rebuilt = store.trials(), result_from_history(store)
    # each run's record as gt.tune's tuner writes it: its cost (the --duration told) and its role
    assert "cost" not in trials[0].extra and all(t.extra["cost"] == t.duration for t in trials[1:])
    assert [t.extra["fidelity"] for t in trials] == [rebuilt.table()[t.task_index]["role"] for t in trials]
    # the cost the report shows: every told duration, as the tuner counted it against the budget
    assert rebuilt.cost_spent == pytest.approx(sum(t.duration for t in trials[1:])) and rebuilt.cost_spent >= 3.0


@pytest.mark.slow
def test_ask_continues_a_gt_tune_campaign_with_an_auxiliary_task(tmp_path):
    """A history gt.tune wrote with fidelity levels and an auxiliary task holds its tasks at every
    level: a later ask reads its tuned and auxiliary tasks back and asks more under a larger cost budget."""
    h = tmp_path / "h.sqlite"
    gt.tune(fidelity_problem(), TASKS, aux_tasks=[{"n": 3}], budget=12, seed=0, cost_budget=3.0, history=h,
            progress=False)
    with SQLiteStorage(h) as store:
        rows, before = store.tasks(), {t.id for t in store.trials()}
    rc, out, err = cli("ask", h, "--problem", PROBLEM, "--json", "-n", "4")
    assert rc == 0 and json.loads(out) == [] and "the cost budget is spent" in err
    rc, out, err = cli("ask", h, "--problem", PROBLEM, "--json", "--cost-budget", "6")
    assert rc == 0, err
    batch = json.loads(out)
    assert batch and all(t["task"] == rows[t["task_index"]] for t in batch)
    with SQLiteStorage(h) as store:
        assert store.tasks() == rows and {t.id for t in store.trials()} == before | {t["id"] for t in batch}


def test_aux_tasks_on_the_command_line_are_gt_tunes(tmp_path):
    """gptask tune --aux-task runs the campaign gt.tune(aux_tasks=) runs (reference: the API's history, run for
    run), and a first gptask ask --aux-task lays the auxiliary task out as gt.tune does."""
    from gptask.data.run_header import read_fidelity_layout

    cli_h, api_h, ask_h = tmp_path / "cli.sqlite", tmp_path / "api.sqlite", tmp_path / "ask.sqlite"
    rc, _, err = cli("tune", "--problem", PROBLEM, *FIRST, "--aux-task", "n=3", "--cost-budget", "3",
                     "--history", cli_h, "--quiet")
    assert rc == 0, err
    gt.tune(fidelity_problem(), TASKS, aux_tasks=[{"n": 3}], budget=12, seed=0, cost_budget=3.0, history=api_h,
            progress=False)
    with SQLiteStorage(cli_h) as a, SQLiteStorage(api_h) as b:
        assert a.tasks() == b.tasks() and {"n": 3, "iterations": 1000} in a.tasks()
        assert [(t.task, t.params, t.status) for t in a.trials()] == [(t.task, t.params, t.status) for t in b.trials()]
        assert read_fidelity_layout(a) == read_fidelity_layout(b) == {"n_tuned": 2, "n_aux": 1, "n_levels": 4}
    rc, out, err = cli("ask", ask_h, "--problem", PROBLEM, *FIRST, "--aux-task", "n=3", "--json")
    assert rc == 0, err
    with SQLiteStorage(ask_h) as c, SQLiteStorage(api_h) as b:
        rows = b.tasks()
        assert c.tasks() == rows and read_fidelity_layout(c) == read_fidelity_layout(b)
    assert json.loads(out) and all(t["task"] in rows for t in json.loads(out))
