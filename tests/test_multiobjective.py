"""Tuning several objectives, output limits and the failure model end to end, against known fronts,
known constrained optima, brute-force fronts and exact hypervolumes."""

import numpy as np
import pytest

import gptask as gt
from gptask.sources.rows import DataError
from gptask.results.fronts import PickRule
from gptask.model.pareto import hypervolume, non_dominated
from gptask.data.storage import SQLiteStorage
from gptask.data.trials import Status

TASKS = gt.Space([gt.Real("t", 0.0, 1.0)])
PARAMS = gt.Space([gt.Real("x1", 0.0, 1.0), gt.Real("x2", 0.0, 1.0)])
REF = np.array([1.1, 1.1])


def zdt1(task, p):
    """ZDT1 in two variables with the Pareto set moved to x2 = t: front f2 = 1 - sqrt(f1)."""
    g = 1 + 9 * (p["x2"] - task["t"]) ** 2
    return {"f1": p["x1"], "f2": g * (1 - np.sqrt(p["x1"] / g))}


def zdt_problem():
    return gt.Problem(TASKS, PARAMS, zdt1, objectives=["f1", "f2"], name="zdt1_moved")


def true_hv():
    f1 = np.linspace(0, 1, 20001)
    return hypervolume(np.column_stack([f1, 1 - np.sqrt(f1)]), REF)


def observed(res, i):
    return np.array([[r["values"]["f1"], r["values"]["f2"]] for r in res.records(i)])


def test_two_objectives_approach_the_known_front_of_every_task():
    res = gt.tune(zdt_problem(), tasks=[{"t": 0.2}, {"t": 0.7}], budget=16, n_initial=6, seed=0, progress=False)
    best = true_hv()
    for i in range(2):
        Y = observed(res, i)
        assert len(Y) == 16
        initial, final = hypervolume(Y[:6], REF) / best, hypervolume(Y, REF) / best
        assert final > 0.85 and final > initial + 0.15, (i, initial, final)
        front = res.pareto(i)
        want = {tuple(y) for y in Y[non_dominated(Y)]}
        assert {(p.values["f1"], p.values["f2"]) for p in front} == want
        assert [p.values["f1"] for p in front] == sorted(p.values["f1"] for p in front)
        params = [tuple(r["params"].values()) for r in res.records(i, status=None)]
        assert len(set(params)) == len(params)


def test_a_batch_of_proposals_spreads_along_the_front():
    with gt.Tuner(zdt_problem(), tasks=[{"t": 0.5}], budget=14, n_initial=6, seed=1) as tu:
        ev = gt.Evaluator(zdt1, outputs=tu.problem.outputs)
        for t in tu.ask():
            tu.tell(t, ev(t.task, t.params))
        batch = tu.ask(6)
        assert len(batch) == 6 and all(t.source == "search" for t in batch)
        X = np.array([[t.params["x1"], t.params["x2"]] for t in batch])
        d = np.sqrt(((X[:, None] - X[None]) ** 2).sum(-1))
        assert d[np.triu_indices(6, 1)].min() > 0.02  # pending trials are fantasies: no pile-up
        assert np.ptp(X[:, 0]) > 0.3  # several parts of the front, not one point


def limited(task, p):
    """Time falls as x grows, memory grows with x: the fastest run within memory <= 0.5 is x1 = 0.5."""
    return {"time": 1.0 + (p["x1"] - 1.0) ** 2 + 0.1 * (p["x2"] - task["t"]) ** 2, "memory": p["x1"]}


def limited_problem(**kw):
    return gt.Problem(TASKS, PARAMS, limited, objectives={"time": "min"}, outputs=["memory"],
                      constraints_out={"memory": ("<=", 0.5)}, name="limited", **kw)


def test_a_limit_excludes_the_unconstrained_optimum_and_the_recommendation_meets_it():
    res = gt.tune(limited_problem(), tasks=[{"t": 0.3}, {"t": 0.8}], budget=14, n_initial=5, seed=2, progress=False)
    for i in range(2):
        params, value = res.best(i)
        assert params["x1"] <= 0.5
        rec = res.recommend(i)
        assert rec.pick.outputs["memory"] <= 0.5 and rec.params["x1"] <= 0.5
        assert abs(rec.params["x1"] - 0.5) < 0.08, rec.params  # the constrained optimum
        searched = [r for r in res.records(i) if r["source"] == "search"]
        inside = np.mean([r["values"]["memory"] <= 0.5 for r in searched])
        assert inside >= 0.6, inside
        # the unconstrained best violates the limit, and is never recommended
        every = min(res.records(i), key=lambda r: r["value"])
        assert every["values"]["memory"] > 0.5 or every["params"] == params


def test_a_maximised_objective_is_maximised():
    prob = gt.Problem(TASKS, PARAMS, lambda t, p: {"gain": 5.0 - (p["x1"] - 0.3) ** 2 - (p["x2"] - t["t"]) ** 2},
                      objectives={"gain": "max"}, name="maxed")
    res = gt.tune(prob, tasks=[{"t": 0.6}], budget=14, n_initial=5, seed=0, progress=False)
    params, value = res.best(0)
    assert value == max(r["value"] for r in res.records(0))
    assert value > 4.99 and abs(params["x1"] - 0.3) < 0.1
    rec = res.recommend(0)
    assert rec.pick.outputs["gain"] > 4.98


def test_pick_rules_choose_on_the_front():
    res = gt.tune(zdt_problem(), tasks=[{"t": 0.4}], budget=12, n_initial=6, seed=3, progress=False)
    front = res.pareto(0)
    f1 = [p.values["f1"] for p in front]
    first = res.recommend(0, rule={"weights": {"f1": 1.0, "f2": 0.0}})
    last = res.recommend(0, rule={"weights": {"f1": 0.0, "f2": 1.0}})
    assert first.pick.observed and first.params == front[int(np.argmin(f1))].params or \
        first.pick.outputs["f1"] <= min(p.values["f1"] for p in front) + 0.05
    assert last.pick.outputs["f2"] <= min(p.values["f2"] for p in front) + 0.05
    within = res.recommend(0, rule={"limit": {"f2": ("<=", 0.6)}})
    assert within.pick.outputs["f2"] <= 0.6
    assert {tuple(c.params.items()) for c in within.candidates} <= {tuple(p.params.items()) for p in front}
    near = res.recommend(0, rule={"reference": {"f1": 0.25, "f2": 0.5}})
    assert near.params in [p.params for p in front]
    for bad, match in (({"weights": {"f3": 1.0}}, "not objectives"), ({"weights": {"f1": -1.0}}, ">= 0"),
                       ({"reference": {"f1": 1.0}}, "value for every objective"), ({"best": {}}, "kind must be")):
        with pytest.raises(ValueError, match=match):
            PickRule.parse(bad, res.problem.outputs)


def test_the_run_resumes_with_every_output_model_stored(tmp_path):
    path = tmp_path / "mo.sqlite"
    gt.tune(zdt_problem(), tasks=[{"t": 0.3}], budget=9, n_initial=6, seed=4, history=path, progress=False)
    with SQLiteStorage(path, read_only=True) as s:
        stored = s.get_meta("model:f2")
        assert stored is not None and stored["params"] and s.models()
        assert all(set(t.values) == {"f1", "f2"} for t in s.trials() if t.status is Status.COMPLETE)
    res = gt.tune(zdt_problem(), tasks=[{"t": 0.3}], budget=12, n_initial=6, seed=4, history=path, progress=False)
    assert len(res.history) == 12 and set(res.outputs) == {"f1", "f2"}


def failing(task, p):
    """A third of the square fails (x1 + x2 > 1.2 + 0.2 t, out of memory); the best runs lie next to
    the failure boundary."""
    if p["x1"] + p["x2"] > 1.2 + 0.2 * task["t"]:
        raise MemoryError("out of memory")
    return 1.0 + (p["x1"] - 0.75) ** 2 + (p["x2"] - 0.55) ** 2


def test_search_proposals_stay_where_the_failure_model_expects_success():
    prob = gt.Problem(TASKS, PARAMS, failing, name="failing_corner")
    seen = []
    with gt.Tuner(prob, tasks=[{"t": 0.0}, {"t": 1.0}], budget=16, n_initial=8, seed=0, max_failures=None) as tu:
        ev = gt.Evaluator(failing)
        while not tu.done:
            for t in tu.ask():
                if t.source == "search":
                    assert tu.outputs.failure_active
                    seen.append(float(tu.outputs.failure.prob_success(t.task, PARAMS.encode([t.params]))[0]))
                tu.tell(t, ev(t.task, t.params))
        failed = [t for t in tu.records if t.status is Status.FAILED]
        assert failed and any(tu.outputs.failure.explains(t) for t in failed)
        kept = {t.id for t in tu.outputs.records}
        assert all(t.id not in kept for t in failed if tu.outputs.failure.explains(t))
    assert len(seen) == 16 and min(seen) >= 0.5, seen


def test_without_failures_the_failure_model_changes_no_proposal():
    def bowl(task, p):
        return 1.0 + (p["x1"] - task["t"]) ** 2 + (p["x2"] - 0.3) ** 2

    prob = gt.Problem(TASKS, PARAMS, bowl, name="bowl")
    runs = [gt.tune(prob, tasks=[{"t": 0.2}, {"t": 0.8}], budget=10, n_initial=4, seed=3, progress=False,
                    failure_model=on).history for on in (True, False)]
    assert [(t.task_index, dict(t.params)) for t in runs[0]] == [(t.task_index, dict(t.params)) for t in runs[1]]


@pytest.fixture(scope="module")
def zdt_history(tmp_path_factory):
    path = tmp_path_factory.mktemp("zdt") / "zdt.sqlite"
    res = gt.tune(zdt_problem(), tasks=[{"t": 0.2}, {"t": 0.6}], budget=10, n_initial=6, seed=5, history=path,
                  progress=False)
    return path, res


def test_show_lists_each_front_and_plot_draws_it(zdt_history, capsys):
    from gptask.cli.main import main
    from gptask.results.plots_front import front_data

    path, res = zdt_history
    assert main(["show", str(path)]) == 0
    out = capsys.readouterr().out
    assert "outputs: f1 (min), f2 (min)" in out
    for i in range(2):
        front = res.pareto(i)
        assert f"front of task {i} (t={res.tasks[i]['t']:.4g}): {len(front)} configuration(s)" in out
        for p in front:
            assert f"{p.values['f1']:.4g}" in out
    d = front_data(res, 0)
    assert d["front"] == [(p.values["f1"], p.values["f2"]) for p in res.pareto(0)]
    assert d["recommended"] in d["front"] and len(d["all"]) == 10
    png = path.with_suffix(".front.png")
    assert main(["plot", str(path), "--front"]) == 0
    assert png.stat().st_size > 10_000


def test_export_import_and_model_files_keep_every_output(zdt_history, tmp_path):
    from gptask.data.storage.export import to_csv

    path, res = zdt_history
    with SQLiteStorage(path, read_only=True) as h:
        text = to_csv(h)
    header = text.splitlines()[0].split(",")
    outs = [c for c in header if c.startswith("out.")]
    assert outs == ["out.f1", "out.f2"] and header.index("out.f2") == header.index("out.f1") + 1
    csv_path = tmp_path / "runs.csv"
    csv_path.write_text(text)
    report = gt.import_runs(zdt_problem(), csv_path, tmp_path / "imported.sqlite")
    assert report.runs == 20 and len(report.trials) == 20
    got = {(tuple(t.params.values()), t.task_index): dict(t.values) for t in report.trials}
    want = {(tuple(r["params"].values()), r["task_index"]): dict(r["values"]) for r in res.history}
    assert got == want
    bad = tmp_path / "bad.csv"
    bad.write_text("t,x1,x2,f1\n0.2,0.5,0.5,0.5\n")
    with pytest.raises(DataError, match=r"a column per output \['f1', 'f2'\]"):
        gt.import_runs(zdt_problem(), bad, None)
    fitted = gt.fit(zdt_problem(), csv_path, progress=False)
    assert set(fitted.outputs) == {"f1", "f2"} and fitted.pareto(0) == res.pareto(0)
    model_file = tmp_path / "zdt.model.json"
    res.save_model(model_file, accuracy=False)
    loaded = gt.load_model(model_file, problem=zdt_problem())
    assert set(loaded.outputs) == {"f2"}
    X = zdt_problem().param_space.encode([{"x1": 0.3, "x2": 0.4}])
    np.testing.assert_allclose(loaded.outputs["f2"][0].predict(1, X)[0], res.outputs["f2"][0].predict(1, X)[0])
    assert loaded.stored_fronts[1] == [{"params": p.params, "values": p.values, "evaluations": p.evaluations}
                                       for p in res.pareto(1)]


def over_on_big_tasks(task, p):
    """Like ``limited``, but every run of a task with t > 0.5 needs memory 1.0, over the limit 0.5."""
    return {"time": 1.0 + (p["x1"] - 1.0) ** 2, "memory": 1.0 if task["t"] > 0.5 else p["x1"]}


def test_a_task_without_a_run_meeting_the_limits_has_no_recommendation_and_the_rest_do(tmp_path, capsys):
    from gptask.cli.main import main
    from gptask.transfer.model_io import read_recommendations

    prob = gt.Problem(TASKS, PARAMS, over_on_big_tasks, objectives={"time": "min"}, outputs=["memory"],
                      constraints_out={"memory": ("<=", 0.5)}, name="over")
    path = tmp_path / "over.sqlite"
    res = gt.tune(prob, tasks=[{"t": 0.2}, {"t": 0.9}], budget=6, n_initial=4, seed=0, progress=False,
                  history=path)
    assert all(r["values"]["memory"] == 1.0 for r in res.records(1))  # nothing of task 1 fits
    with pytest.raises(ValueError, match="meets the limits"):
        res.recommend(1)
    assert main(["show", str(path)]) == 0  # was: exit 2 on task 1, nothing shown for task 0
    out = capsys.readouterr().out
    assert "task 1 (t=0.9): no complete evaluation meets the limits memory <= 0.5: nothing to recommend" in out
    rec0 = res.recommend(0)
    assert rec0.pick.outputs["memory"] <= 0.5 and f"{rec0.params['x1']:.4g}" in out
    res.save_model(tmp_path / "over.json", accuracy=False)
    stored = read_recommendations(tmp_path / "over.json")
    assert stored[0]["params"] == rec0.params and stored[1] is None
    assert main(["report", str(path), "--out", str(tmp_path / "over.html"), "-q"]) == 0
    page = (tmp_path / "over.html").read_text()
    assert "no complete evaluation meets the limits memory &lt;= 0.5, so no recommendation" in page


def test_a_selection_table_falls_back_where_no_run_of_a_tuned_task_meets_the_limits(tmp_path):
    """export-table raised on such a task (a KeyError on a model file, a ValueError on a result);
    its entry is now a fallback that says why, and the tasks with a recommendation keep theirs."""
    from gptask.insight.selection import LOOKUP_FALLBACK, selection_table
    from gptask.transfer.model_io import read_recommendations

    prob = gt.Problem(TASKS, PARAMS, over_on_big_tasks, objectives={"time": "min"}, outputs=["memory"],
                      constraints_out={"memory": ("<=", 0.5)}, name="over")
    res = gt.tune(prob, tasks=[{"t": 0.2}, {"t": 0.4}, {"t": 0.9}], budget=5, n_initial=4, seed=0, progress=False)
    res.save_model(tmp_path / "over.json", accuracy=False)
    model = gt.load_model(tmp_path / "over.json", problem=prob)
    for source, stored in ((res, None), (model, read_recommendations(tmp_path / "over.json"))):
        table = selection_table(source, "t=0.2|0.4|0.9", recommendations=stored)
        by_t = {e.task["t"]: e for e in table.entries}
        for t in (0.2, 0.4):
            i = [0.2, 0.4].index(t)
            assert by_t[t].source == "tuned" and by_t[t].params == res.recommend(i).params
        over = by_t[0.9]
        assert over.source == "fallback" and over.params == res.recommend(1).params and over.value is None
        assert "no run of this tuned task meets the limits" in over.note and "memory <= 0.5" in over.note
        assert "nearest tuned task t=0.4" in over.note
        assert table.lookup({"t": 0.9})[1] == LOOKUP_FALLBACK
        assert table.objective == "time"  # the objective the value columns predict (issue 40)


# ---- telling several outputs (issue 40 item 4) ---------------------------------------------------

def _cli_history(tmp_path, n=2):
    import sys
    from pathlib import Path

    from gptask.cli.main import main

    sys.path.insert(0, str(Path(__file__).parent))
    path = tmp_path / "tm.sqlite"
    assert main(["ask", str(path), "--problem", "problems_for_tests:time_memory_problem", "--tasks", "1",
                 "--budget", "6", "--n-initial", "2", "-n", str(n)]) == 0
    return path


def test_tell_on_the_command_line_takes_every_output_and_refuses_a_bare_number(tmp_path, capsys):
    from gptask.cli.main import main

    path = _cli_history(tmp_path)
    capsys.readouterr()
    for bad, names in (("0.5", "time, memory"), ("time=0.5", "'memory'"), ('{"time": 0.5}', "'memory'"),
                       ("time=0.5,memory=2e8,disk=1", "'disk'"), ("time=0.5,memory=fast", "'fast'"),
                       ("[0.5, 2e8]", "time, memory")):
        assert main(["tell", str(path), "1", bad]) == 2, bad
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and names in err and "Traceback" not in err, (bad, err)
    with SQLiteStorage(path, read_only=True) as h:
        assert [t.status for t in h.trials()] == [Status.PENDING, Status.PENDING]  # nothing was stored
    assert main(["tell", str(path), "1", "time=0.5,memory=2e8"]) == 0
    assert main(["tell", str(path), "2", '{"memory": 3e8, "time": 0.75}']) == 0
    with SQLiteStorage(path, read_only=True) as h:
        told = {t.id: t for t in h.trials()}
    assert dict(told[1].values) == {"time": 0.5, "memory": 2e8} and told[1].value == 0.5
    assert dict(told[2].values) == {"time": 0.75, "memory": 3e8} and told[2].value == 0.75
    capsys.readouterr()
    assert main(["ask", str(path), "--problem", "problems_for_tests:time_memory_problem", "-n", "1"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 1  # a search proposal on the told front


def test_library_tell_refuses_a_result_missing_a_declared_output(tmp_path):
    from gptask.evaluation.evaluate import Outcome

    with gt.Tuner(zdt_problem(), tasks=[{"t": 0.5}], budget=4, n_initial=2, seed=0,
                  history=tmp_path / "h.sqlite") as tu:
        a, b = tu.ask()
        for result in (Outcome(0.5), Outcome(0.5, values={"f1": 0.5})):
            with pytest.raises(ValueError, match=rf"trial {a.id}.*'f2'"):
                tu.tell(a, result)
        assert [t.id for t in tu.pending] == [a.id, b.id]  # nothing stored
        told = tu.tell(a, Outcome(0.5, values={"f1": 0.5, "f2": 0.25}))
        assert told.ok and dict(told.values) == {"f1": 0.5, "f2": 0.25}
        assert tu.tell(b, 2.0).status is Status.FAILED  # a number is what an objective could return: failed


def test_ask_on_a_history_poisoned_by_an_old_tell_names_the_trial(tmp_path, capsys):
    from gptask.cli.main import main

    path = _cli_history(tmp_path)
    with SQLiteStorage(path, create=False) as h:  # what `gptask tell H 1 0.5` stored before it was checked
        h.finish(1, Status.COMPLETE, 0.5)
        h.finish(2, Status.COMPLETE, 0.7, values={"time": 0.7, "memory": 2e8})
    capsys.readouterr()
    assert main(["ask", str(path), "--problem", "problems_for_tests:time_memory_problem", "-n", "1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "trial 1" in err and "time, memory" in err and "KeyError" not in err, err


# ---- a limit rule keeps its limit (issue 40 item 5) ----------------------------------------------

def test_a_limit_rule_never_recommends_a_configuration_that_breaks_it():
    res = gt.tune(zdt_problem(), tasks=[{"t": 0.4}], budget=10, n_initial=6, seed=3, progress=False)
    with pytest.raises(ValueError, match=r"no complete evaluation that meets.*f2 <= -1.*nothing to recommend"):
        res.recommend(0, rule={"limit": {"f2": ("<=", -1.0)}})  # f2 >= 0 everywhere: was a pick with f2 > 0
    f2 = sorted(r["values"]["f2"] for r in res.records(0))
    bound = f2[len(f2) // 2]
    rec = res.recommend(0, rule={"limit": {"f2": ("<=", bound)}})
    meeting = [r for r in res.records(0) if r["values"]["f2"] <= bound]
    assert rec.params in [r["params"] for r in meeting]
    assert all(c.params in [r["params"] for r in meeting] for c in rec.candidates)


def test_a_limit_rule_applies_with_one_objective_too():
    res = gt.tune(limited_problem(), tasks=[{"t": 0.3}], budget=8, n_initial=5, seed=2, progress=False)
    memory = sorted(r["values"]["memory"] for r in res.records(0) if r["values"]["memory"] <= 0.5)
    bound = memory[0]  # only the configuration using the least memory meets it
    rec = res.recommend(0, rule={"limit": {"memory": ("<=", bound)}})
    assert all(r["values"]["memory"] <= bound for r in res.records(0) if r["params"] == rec.params)
    with pytest.raises(ValueError, match=r"memory <= -1.*nothing to recommend"):
        res.recommend(0, rule={"limit": {"memory": ("<=", -1.0)}})


# ---- a history of several objectives reloads with its models (issue 40 item 6) -------------------

def test_a_history_of_several_objectives_reloads_with_its_models_and_reports_its_front(tmp_path, capsys):
    import shutil
    import sqlite3

    from gptask.cli.main import main
    from gptask.results.plots_front import front_data
    from gptask.results.rebuild import result_from_history

    path = tmp_path / "mo.sqlite"
    res = gt.tune(zdt_problem(), tasks=[{"t": 0.3}, {"t": 0.7}], budget=8, n_initial=5, seed=4, history=path,
                  progress=False)
    X = zdt_problem().param_space.encode([{"x1": 0.3, "x2": 0.4}, {"x1": 0.8, "x2": 0.6}])
    old = tmp_path / "old.sqlite"  # a history written before the transform was recorded
    shutil.copy(path, old)
    with sqlite3.connect(old) as db:
        db.execute("DELETE FROM meta WHERE key LIKE 'user:use_log%'")
    for where in (path, old):
        with SQLiteStorage(where, read_only=True) as h:
            if where == path:
                assert h.get_meta("use_log") is False and h.get_meta("use_log:f2") is False  # recorded when tuning
            else:
                assert h.get_meta("use_log") is None
            again = result_from_history(h)
        assert again.model is not None and again.transform.use_log is False and set(again.outputs) == {"f1", "f2"}
        for name in ("f1", "f2"):
            np.testing.assert_allclose(again.outputs[name][0].predict(1, X)[0], res.outputs[name][0].predict(1, X)[0])
    capsys.readouterr()
    assert main(["show", str(old)]) == 0
    out = capsys.readouterr().out
    assert "no model was fitted" not in out and "recommended (" in out
    page_path = tmp_path / "old.html"
    assert main(["report", str(old), "--out", str(page_path), "-q"]) == 0
    page = page_path.read_text()
    assert "No model was fitted" not in page
    assert "f1 (minimised)" in page and "f2 (minimised)" in page
    for i in range(2):  # every measured non-dominated run of each task is listed with both objectives
        assert len(res.pareto(i)) >= 1
        for p in res.pareto(i):
            assert f"{p.values['f1']:.4g}" in page and f"{p.values['f2']:.4g}" in page
    assert front_data(again, 0)["labels"] == ("f1 (minimised)", "f2 (minimised)")
