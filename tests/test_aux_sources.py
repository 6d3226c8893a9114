"""Auxiliary tasks with sources (issue 44, item 4: fidelity and auxiliary tasks work with what exists):
``gt.tune(problem, tasks, sources=..., aux_tasks=...)``, with and without fidelity. The auxiliary tasks
are this campaign's (they run, their cost counts), the sources' tasks data only (no run, no cost), the
results speak of the tuned tasks at the target."""

from collections import Counter

import numpy as np
import pytest

import gptask as gt
from gptask.data.trials import SOURCE_BROUGHT, params_key

from test_fidelity import FAST, PARAMS, TASKS, _source_rows, informative, problem, true_value

#: the layout of a run of tuned task n=2 and auxiliary task n=1 with fidelity: per level (1000,
#: 333, 111, 37) the tuned task then the auxiliary one
ROLES = ["target", "auxiliary"] + ["low fidelity", "auxiliary"] * 3


def _plain(**kw):
    """The problem without fidelity: the target's objective, each run priced 0.5 s."""
    return gt.Problem(TASKS, PARAMS, lambda t, p: true_value(p["x"], p["y"]), run_cost=lambda point: 0.5, **kw)


def _plain_rows(label="other", tasks=(2, 3)):
    """Another machine's (``label``) measurements of the problem without fidelity: 8 of each task."""
    return [{k: v for k, v in r.items() if k != "iterations"} | {"machine.label": label}
            for r in _source_rows() if r["n"] in tasks]


def test_aux_tasks_with_sources_and_fidelity_run_here_and_the_sources_tasks_never_run(tmp_path):
    """Tuned task n=2 and auxiliary task n=1 with a source of tasks n=2, 3 at two levels (used to be
    refused: 'does not take aux_tasks yet'): the auxiliary task runs its design at each level and
    nothing after it, marked "auxiliary"; the sources' 4 tasks take no run (32 measurements, all
    brought); every objective call is a run of this campaign's, and its cost, the auxiliary task's
    included, is what cost_budget counts; result.best(0) is the best target run made here,
    measured at the target (brute force); the auxiliary task has no best; the history read back
    alone has the same layout."""
    from gptask.results.rebuild import result_from_history
    from gptask.data.storage import SQLiteStorage

    calls = []

    def objective(task, p):
        calls.append((task["n"], p["iterations"]))
        return informative(task, p)

    rows = _source_rows(1000) + _source_rows(111)
    r = gt.tune(problem(objective), [{"n": 2}], sources=[rows], aux_tasks=[{"n": 1}], cost_budget=6.0, n_initial=4,
                seed=0, provenance="here", history=tmp_path / "h.sqlite", **FAST)
    levels = [1000, 333, 111, 37]
    assert r.tasks[:8] == [{"n": n, "iterations": it, "machine": "here"} for it in levels for n in (2, 1)]
    assert {(t["n"], t["iterations"], t["machine"]) for t in r.tasks[8:]} == {
        (n, it, "other") for n in (2, 3) for it in (1000, 111)}
    assert {k: r.fidelity[k] for k in ("n_tuned", "n_aux", "n_own")} == {"n_tuned": 1, "n_aux": 1, "n_own": 8}
    mine = sorted((t for t in r.history if t.source != SOURCE_BROUGHT), key=lambda t: t.id)
    theirs = [t for t in r.history if t.source == SOURCE_BROUGHT]
    # the sources' tasks: data only
    assert len(theirs) == 32 and {t.task_index for t in theirs} == set(range(8, 12))
    assert {t.task_index for t in mine} <= set(range(8)) and len(calls) == len(mine)
    assert Counter(calls) == Counter((t.task["n"], t.task["iterations"]) for t in mine)
    # the auxiliary task: its design at every level (at least one run each), nothing searched
    aux = [t for t in mine if t.task_index % 2 == 1]
    assert {t.task_index for t in aux} == {1, 3, 5, 7}
    assert all(t.source != "search" and t.extra["fidelity"] == "auxiliary" and t.task["n"] == 1 for t in aux)
    assert [t.extra["fidelity"] for t in mine if t.task_index % 2 == 0] == [
        ROLES[t.task_index] for t in mine if t.task_index % 2 == 0]
    # the cost: this campaign's runs, the auxiliary task's included; the sources' nothing
    costs = [t.extra["cost"] for t in mine]
    assert costs == pytest.approx([t.task["iterations"] / 1000 for t in mine])
    assert r.cost_spent == pytest.approx(sum(costs)) and r.cost_spent >= 6.0
    assert sum(t.extra["cost"] for t in aux) > 0 and all("cost" not in t.extra for t in theirs)
    # results: the tuned task at the target, measured here
    params, value = r.best(0)
    assert value == pytest.approx(min(t.value for t in mine if t.task_index == 0))
    assert value == pytest.approx(true_value(params["x"], params["y"]))
    with pytest.raises(ValueError, match="auxiliary task"):
        r.best(1)
    roles = ROLES + ["source"] * 4
    assert [row["role"] for row in r.table()] == roles
    with SQLiteStorage(tmp_path / "h.sqlite", read_only=True) as h:
        again = result_from_history(h)
    assert {k: again.fidelity[k] for k in ("n_tuned", "n_aux", "n_own")} == {"n_tuned": 1, "n_aux": 1, "n_own": 8}
    assert [row["role"] for row in again.table()] == roles and again.best(0)[1] == pytest.approx(value)


def test_aux_tasks_with_sources_without_fidelity_count_in_the_cost_budget():
    """The problem without fidelity: tuned task n=4, auxiliary task n=1, a source of tasks n=2, 3.
    The auxiliary task's design is cut to what LOW_DESIGN_SHARE of the cost budget buys (0.2 x 5 s:
    2 of its 3 points at 0.5 s), nothing searched; the tuned task runs until the cost budget is
    spent: 10 runs, 5.0 s; the 16 source measurements cost nothing and run nowhere."""
    from gptask.tuning.fidelity import LOW_DESIGN_SHARE

    calls = []
    prob = _plain()
    objective = prob.objective
    prob.objective = lambda t, p: calls.append(t["n"]) or objective(t, p)
    r = gt.tune(prob, [{"n": 4}], sources=[_plain_rows()], aux_tasks=[{"n": 1}], cost_budget=5.0, budget=10,
                n_initial=3, seed=0, provenance="here", **FAST)
    assert r.tasks[:2] == [{"n": 4, "machine": "here"}, {"n": 1, "machine": "here"}]
    assert r.fidelity["n_own"] == 2
    assert [row["role"] for row in r.table()] == ["target", "auxiliary", "source", "source"]
    mine = [t for t in r.history if t.source != SOURCE_BROUGHT]
    n_aux = int(LOW_DESIGN_SHARE * 5.0 / 0.5)
    assert n_aux == 2 and Counter(t.task_index for t in mine) == {0: 8, 1: 2} and Counter(calls) == {4: 8, 1: 2}
    assert all(t.source != "search" for t in mine if t.task_index == 1)
    assert sum(t.source == SOURCE_BROUGHT for t in r.history) == 16
    assert r.cost_spent == pytest.approx(5.0)
    assert r.best(0)[1] == pytest.approx(min(t.value for t in mine if t.task_index == 0))


def test_a_resumed_run_with_aux_tasks_and_sources_runs_nothing_twice(tmp_path):
    """Killed mid-run (Ctrl-C on the objective's 6th call), the same call on the same history imports
    no source twice and runs no configuration of a task and level twice; a larger cost budget then goes
    on from there."""
    calls = []
    stopped: list = []

    def objective(task, p):
        if len(calls) == 5 and not stopped:
            stopped.append(True)
            raise KeyboardInterrupt
        calls.append((task["n"], p["iterations"], p["x"], p["y"]))
        return informative(task, p)

    rows = _source_rows(1000) + _source_rows(111)
    kw = dict(aux_tasks=[{"n": 1}], n_initial=4, seed=1, provenance="here", history=tmp_path / "h.sqlite", **FAST)
    with pytest.raises(KeyboardInterrupt):
        gt.tune(problem(objective), [{"n": 2}], sources=[rows], cost_budget=3.0, **kw)
    assert len(calls) == 5
    first = gt.tune(problem(objective), [{"n": 2}], sources=[rows], cost_budget=3.0, **kw)
    again = gt.tune(problem(objective), [{"n": 2}], sources=[rows], cost_budget=5.0, **kw)
    assert len(calls) == len(set(calls)) > 5
    mine = [t for t in again.history if t.source != SOURCE_BROUGHT]
    assert len(mine) == len(calls) and sum(t.source == SOURCE_BROUGHT for t in again.history) == 32
    assert [t.id for t in again.history][:len(first.history)] == [t.id for t in first.history]
    assert any(t.extra["fidelity"] == "auxiliary" for t in mine)
    assert again.cost_spent == pytest.approx(sum(t.extra["cost"] for t in mine)) and again.cost_spent >= 5.0


def test_an_aux_task_a_source_measured_on_another_machine_runs_here_too(caplog):
    """An auxiliary task with the task values of a source's task measured on another machine is a
    task of its own (the machine differs): it runs its design here, the source's task stays data,
    and the log says the two machines share it."""
    with caplog.at_level("INFO", logger="gptask"):
        r = gt.tune(_plain(), [{"n": 4}], sources=[_plain_rows()], aux_tasks=[{"n": 3}], budget=5, n_initial=3,
                    seed=0, provenance="here", **FAST)
    assert r.tasks == [{"n": 4, "machine": "here"}, {"n": 3, "machine": "here"}, {"n": 2, "machine": "other"},
                       {"n": 3, "machine": "other"}]
    by_task = Counter((t.task_index, t.source == SOURCE_BROUGHT) for t in r.history)
    assert by_task == {(0, False): 5, (1, False): 3, (2, True): 8, (3, True): 8}
    assert "auxiliary task {'n': 3} was measured by source #0 on other" in caplog.text


def test_an_aux_task_a_source_measured_on_this_machine_starts_from_its_measurements():
    """An auxiliary task that a source measured on this machine (an earlier history of it): those
    measurements are the auxiliary task's data, its design runs only the points they lack (10 - 8 =
    2), none of their configurations again; they cost nothing."""
    rows = _plain_rows("here", tasks=(3,))
    r = gt.tune(_plain(), [{"n": 4}], sources=[rows], aux_tasks=[{"n": 3}], budget=10, n_initial=10, seed=0,
                provenance="here", **FAST)
    assert r.tasks == [{"n": 4, "machine": "here"}, {"n": 3, "machine": "here"}]
    aux = [t for t in r.history if t.task_index == 1]
    brought = [t for t in aux if t.source == SOURCE_BROUGHT]
    ran = [t for t in aux if t.source != SOURCE_BROUGHT]
    assert len(brought) == 8 and len(ran) == 2 and all(t.extra["fidelity"] == "auxiliary" for t in ran)
    assert not {params_key(t.params) for t in ran} & {params_key(t.params) for t in brought}
    assert r.cost_spent == pytest.approx(0.5 * (10 + 2))
    assert [row["role"] for row in r.table()] == ["target", "auxiliary"]


def test_an_aux_task_whose_design_a_source_of_this_machine_holds_runs_nothing_and_stays_auxiliary(tmp_path, capsys):
    """The source of this machine holds 8 runs of the auxiliary task, its design 4: it runs nothing.
    The history keeps the layout, so read back alone (result_from_history, gptask show) the task is
    still the auxiliary task, not a source's (the layout used to be read from the runs' roles only,
    and this task has no run of this campaign)."""
    from gptask.cli import main
    from gptask.data.storage import SQLiteStorage
    from gptask.results.rebuild import result_from_history

    path = tmp_path / "h.sqlite"
    r = gt.tune(_plain(), [{"n": 4}], sources=[_plain_rows("here", tasks=(3,))], aux_tasks=[{"n": 3}], budget=5,
                n_initial=4, seed=0, provenance="here", history=path, **FAST)
    assert all(t.source == SOURCE_BROUGHT for t in r.history if t.task_index == 1)
    assert Counter(t.task_index for t in r.history) == {0: 5, 1: 8}
    with SQLiteStorage(path, read_only=True) as h:
        again = result_from_history(h)
    assert {k: again.fidelity[k] for k in ("n_tuned", "n_aux", "n_own")} == {"n_tuned": 1, "n_aux": 1, "n_own": 2}
    assert [row["role"] for row in again.table()] == ["target", "auxiliary"]
    with pytest.raises(ValueError, match="auxiliary task"):
        again.best(1)
    assert main(["show", str(path)]) == 0
    out = capsys.readouterr().out
    assert " auxiliary " in out and " source " not in out


def test_bad_aux_tasks_with_sources_are_refused_naming_them():
    kw = dict(budget=4, n_initial=2, seed=0, provenance="here", **FAST)
    with pytest.raises(ValueError, match=r"aux_tasks must differ from the tuned tasks, got \{'n': 4\} in both"):
        gt.tune(_plain(), [{"n": 4}], sources=[_plain_rows()], aux_tasks=[{"n": 4}], **kw)
    with pytest.raises(ValueError, match=r"aux_tasks #1: n=9 is outside \[1, 4\]"):
        gt.tune(_plain(), [{"n": 4}], sources=[_plain_rows()], aux_tasks=[{"n": 1}, {"n": 9}], **kw)
    with pytest.raises(ValueError, match=r"aux_tasks #0 .* has unknown keys \['machine'\]"):
        gt.tune(_plain(), [{"n": 4}], sources=[_plain_rows()], aux_tasks=[{"n": 1, "machine": "other"}], **kw)
    with pytest.raises(TypeError, match=r"aux_tasks must be a list of task dicts, got \{'n': 1\}"):
        gt.tune(_plain(), [{"n": 4}], sources=[_plain_rows()], aux_tasks={"n": 1}, **kw)
    with pytest.raises(ValueError, match=r"aux_tasks must be distinct"):
        gt.tune(_plain(), [{"n": 4}], aux_tasks=[{"n": 1}, {"n": 1}], **kw)


# ---- select_sources with fidelity or auxiliary tasks ------------------------------------------------
def _random_source(rows, seed=0):
    """A source that does not relate: ``rows``' configurations with random values, machine "bad"."""
    rng = np.random.default_rng(seed)
    return [{**r, "value": float(rng.random() * 0.5), "machine.label": "bad"} for r in rows]


def test_select_sources_with_fidelity_runs_the_schedule_s_designs_then_judges(tmp_path):
    """select_sources=True with fidelity (used to be refused: 'does not go with a problem with
    fidelity or aux_tasks yet'): this machine's designs run first as the fidelity schedule lays them
    out (the cheapest level's 10 runs, the target's 5, 2 at each level between; the first target
    run picked from this campaign's cheap runs, no source being judged yet), then the sources are
    judged by every run of those designs; the unrelated source is left out of the model and the
    history, the other one's tasks follow this campaign's. The same call on the same history runs
    nothing again and keeps the selection."""
    calls = []

    def objective(task, p):
        calls.append((p["iterations"], p["x"], p["y"]))
        return informative(task, p)

    good = _source_rows(1000) + _source_rows(111)
    kw = dict(sources=[good, _random_source(good)], select_sources=True, cost_budget=6.3, n_initial=10, seed=0,
              provenance="here", history=tmp_path / "h.sqlite", **FAST)
    r = gt.tune(problem(objective), [{"n": 2}], **kw)
    sel = r.source_selection
    assert sel.kept == [0] and sel.dropped == [1] and sel.target_runs == 19
    assert "source #1 (bad, 32 measurements): dropped, held-out log density of this machine's 19 runs" in \
        "\n".join(sel.lines())
    assert [t["iterations"] for t in r.tasks[:4]] == [1000, 333, 111, 37] and r.fidelity["n_own"] == 4
    assert {t["machine"] for t in r.tasks[4:]} == {"other"} and "bad" not in {t.task["machine"] for t in r.history}
    mine = sorted((t for t in r.history if t.source != SOURCE_BROUGHT), key=lambda t: t.id)
    design = [t for t in mine if t.source != "search"]
    assert Counter(t.task["iterations"] for t in design) == {1000: 5, 333: 2, 111: 2, 37: 10}
    first = next(t for t in mine if t.task_index == 0)
    assert params_key(first.params) in {params_key(t.params) for t in mine if t.task_index == 3 and t.id < first.id}
    assert r.cost_spent == pytest.approx(sum(t.extra["cost"] for t in mine)) and r.cost_spent >= 6.3
    n = len(calls)
    again = gt.tune(problem(objective), [{"n": 2}], **kw)
    assert len(calls) == n == len(set(calls)) and again.source_selection.kept == [0]


def test_select_sources_with_fidelity_resumes_a_run_killed_in_its_designs(tmp_path):
    """Killed in the designs (Ctrl-C on the 6th run), the same call runs no configuration of a level
    twice, finishes the designs and judges the sources as an uninterrupted run does."""
    calls, stopped = [], []

    def objective(task, p):
        if len(calls) == 5 and not stopped:
            stopped.append(True)
            raise KeyboardInterrupt
        calls.append((p["iterations"], p["x"], p["y"]))
        return informative(task, p)

    good = _source_rows(1000) + _source_rows(111)
    kw = dict(sources=[good, _random_source(good)], select_sources=True, cost_budget=6.3, n_initial=10, seed=0,
              provenance="here", **FAST)
    with pytest.raises(KeyboardInterrupt):
        gt.tune(problem(objective), [{"n": 2}], history=tmp_path / "h.sqlite", **kw)
    r = gt.tune(problem(objective), [{"n": 2}], history=tmp_path / "h.sqlite", **kw)
    assert len(calls) == len(set(calls)) == len([t for t in r.history if t.source != SOURCE_BROUGHT])
    whole = gt.tune(problem(), [{"n": 2}], **kw)
    assert r.source_selection.kept == whole.source_selection.kept == [0]
    assert [t.params for t in r.history if t.source == "initial"] == \
        [t.params for t in whole.history if t.source == "initial"]


def test_select_sources_with_aux_tasks_judges_by_the_aux_runs_too():
    """select_sources=True with an auxiliary task and no fidelity: the designs of the tuned task and
    of the auxiliary task run first (4 each), the sources are judged by those 8 runs, then the tuned
    task alone searches; the auxiliary task's runs stay design runs."""
    r = gt.tune(_plain(), [{"n": 4}], sources=[_plain_rows(), _random_source(_plain_rows())], aux_tasks=[{"n": 1}],
                select_sources=True, budget=6, n_initial=4, seed=0, provenance="here", **FAST)
    assert r.source_selection.target_runs == 8 and len(r.source_selection.scores) == 2
    assert r.tasks[:2] == [{"n": 4, "machine": "here"}, {"n": 1, "machine": "here"}] and r.fidelity["n_own"] == 2
    mine = [t for t in r.history if t.source != SOURCE_BROUGHT]
    assert Counter((t.task_index, t.source) for t in mine) == {(0, "initial"): 4, (0, "search"): 2, (1, "initial"): 4}
    kept = {t.task["machine"] for t in r.history if t.source == SOURCE_BROUGHT}
    assert kept == {["other", "bad"][k] for k in r.source_selection.kept}


def test_select_sources_scored_on_the_target_runs_only(monkeypatch):
    """SELECT_TARGET_RUNS_ONLY (off by default): the same designs, the sources judged by the held-out
    fit of the tuned task's 5 target runs only (the 14 cheaper runs fitted on, not scored)."""
    from gptask.sources import multisource
    from gptask.sources.selection import SourceSelection

    monkeypatch.setattr(multisource, "SELECT_TARGET_RUNS_ONLY", True)
    good = _source_rows(1000) + _source_rows(111)
    r = gt.tune(problem(), [{"n": 2}], sources=[good, _random_source(good)], select_sources=True, cost_budget=6.3,
                n_initial=10, seed=0, provenance="here", **FAST)
    sel = r.source_selection
    assert sel.target_runs == 5 and sel.what == "target runs" and len(sel.scores) == 2
    assert "held-out log density of this machine's 5 target runs" in sel.lines()[0]
    assert SourceSelection.from_json(sel.to_json()) == sel


@pytest.mark.parametrize("sources,cheapest_waits", [(False, False), (True, False), (False, True), (True, True)])
def test_the_tuned_tasks_first_target_runs_come_before_the_aux_task_s_target_level_run(monkeypatch, sources,
                                                                                        cheapest_waits):
    """Tuned tasks n=2, 3 and auxiliary task n=1 with fidelity (with and without a source): the
    auxiliary task's levels above its cheapest wait for the first target run of every tuned task
    (AUX_AFTER_TARGET; its target-level point used to run in the very first round, delaying them);
    its cheapest level runs in the first round (the default) or waits too (AUX_WAIT_CHEAPEST on).
    The model gets a point of every task."""
    from gptask.tuning import fidelity

    monkeypatch.setattr(fidelity, "AUX_WAIT_CHEAPEST", cheapest_waits)
    kw = dict(sources=[_source_rows(1000) + _source_rows(111)]) if sources else {}
    r = gt.tune(problem(), [{"n": 2}, {"n": 3}], aux_tasks=[{"n": 1}], cost_budget=8.0, n_initial=4, seed=0,
                provenance="here", **kw, **FAST)
    mine = sorted((t for t in r.history if t.source != SOURCE_BROUGHT), key=lambda t: t.id)
    first = {}
    for k, t in enumerate(mine):
        first.setdefault(t.task_index, k)
    # tasks by level (1000, 333, 111, 37) x (n=2, n=3, aux n=1): 0, 1 the targets; the aux's 2, 5, 8, 11
    assert max(first[0], first[1]) < min(first[2], first[5], first[8])
    if cheapest_waits:
        assert max(first[0], first[1]) < first[11]
    else:
        assert first[11] < first[0]  # from the first round
    assert all(j in first for j in range(12))  # every task ran (the LCM needs each)


def test_aux_tasks_without_fidelity_keep_the_tuned_tasks_consensus_designs():
    """The problem without fidelity, tuned tasks n=2, 3 that a source measured on another machine,
    auxiliary task n=1 (used to lose what sources give the plain run: the tuned tasks' designs were
    Latin hypercubes of half the budget). As without the auxiliary task: n_initial is 30 % of the
    budget (3 of 10), each tuned task's design is the source's configurations of its task best first
    (brute force: one machine, its 8 runs sorted by value), its first searches choose among the
    rest of them; the auxiliary task runs a design of the same size and nothing else."""
    from gptask.tuning.settings import new_task_initial

    rows = _plain_rows()
    kw = dict(sources=[rows], budget=10, seed=0, provenance="here", **FAST)
    r = gt.tune(_plain(), [{"n": 2}, {"n": 3}], aux_tasks=[{"n": 1}], **kw)
    plain = gt.tune(_plain(), [{"n": 2}, {"n": 3}], **kw)
    assert new_task_initial(10) == 3
    mine = sorted((t for t in r.history if t.source != SOURCE_BROUGHT), key=lambda t: t.id)
    design = {i: [t.params for t in mine if t.task_index == i and t.source != "search"] for i in (0, 1, 2)}
    assert [len(design[i]) for i in (0, 1, 2)] == [3, 3, 3]
    assert Counter(t.task_index for t in mine) == {0: 10, 1: 10, 2: 3}
    for i, n in ((0, 2), (1, 3)):
        theirs = [(q["x"], q["y"]) for q in sorted((q for q in rows if q["n"] == n), key=lambda q: q["value"])]
        assert [(p["x"], p["y"]) for p in design[i]] == theirs[:3]
        searched = [(round(t.params["x"], 9), round(t.params["y"], 9)) for t in mine
                    if t.task_index == i and t.source == "search"]
        assert set(searched[:5]) == {(round(x, 9), round(y, 9)) for x, y in theirs[3:]}  # the consensus window first
        # the same design as the run without the auxiliary task (its tasks: the sources' first)
        alone = [t for t in plain.history if t.source != SOURCE_BROUGHT and t.task["n"] == n and t.source != "search"]
        assert [(t.params["x"], t.params["y"]) for t in alone] == theirs[:3]
