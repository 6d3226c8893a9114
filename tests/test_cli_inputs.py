"""Bad numbers and paths on the command line: one clear line naming the argument and the rule, exit 2,
never a traceback; nothing written."""

import json
import sys
from pathlib import Path

import pytest

from gptask.cli.main import main
from gptask.data.storage import SQLiteStorage

TESTS = Path(__file__).parent
sys.path.insert(0, str(TESTS))
from problems_for_tests import counting_problem  # noqa: E402

PROBLEM = ["--problem", "problems_for_tests:counting_problem"]
HUGE = "99999999999999999999"


@pytest.fixture
def history(tmp_path) -> Path:
    path = tmp_path / "h.sqlite"
    assert main(["ask", str(path), *PROBLEM, "--tasks", "2", "--budget", "4", "-n", "2"]) == 0
    return path


def run(args, capsys) -> tuple[int, str]:
    code = main([str(a) for a in args])
    return code, capsys.readouterr().err


@pytest.mark.parametrize("args, argument", [
    (["tell", "{h}", HUGE, "0.25"], "trial id"),
    (["release", "{h}", "1", HUGE], "trial id"),
    (["tell", "{h}", "-3", "0.25"], "trial id"),
    (["ask", "{h}", *PROBLEM, "-n", HUGE], "-n"),
    (["ask", "{h}", *PROBLEM, "--budget", HUGE], "--budget"),
    (["ask", "{h}", *PROBLEM, "--seed", HUGE], "--seed"),
    (["tune", *PROBLEM, "--tasks", HUGE], "--tasks"),
    (["tune", *PROBLEM, "--workers", HUGE], "--workers"),
    (["tune", *PROBLEM, "--repeats", HUGE], "--repeats"),
    (["tune", *PROBLEM, "--n-latent", HUGE], "--n-latent"),
    (["tune", *PROBLEM, "--timeout", "nan"], "--timeout"),
    (["tune", *PROBLEM, "--max-time", "inf"], "--max-time"),
    (["tune", *PROBLEM, "--target", "nan"], "--target"),
    (["ask", "{h}", *PROBLEM, "--lease", "inf"], "--lease"),
    (["tell", "{h}", "1", "0.25", "--duration", "inf"], "--duration"),
    (["fit", "d.csv", *PROBLEM, "--restarts", HUGE], "--restarts"),
    (["tune", *PROBLEM, "--failure-model", "1.5"], "--failure-model"),
    (["ask", "{h}", *PROBLEM, "--failure-model", "yes"], "--failure-model"),
])
def test_out_of_range_numbers_are_one_clear_line(history, capsys, args, argument):
    before = [(t.id, t.status, t.owner) for t in SQLiteStorage(history, read_only=True).trials()]
    code, err = run([a.format(h=history) for a in args], capsys)
    assert code == 2 and err.startswith("gptask: error: ") and argument in err and len(err.splitlines()) == 1, err
    assert "Traceback" not in err and "OverflowError" not in err
    assert [(t.id, t.status, t.owner) for t in SQLiteStorage(history, read_only=True).trials()] == before


def test_numbers_in_range_still_work(history, capsys):
    assert run(["tell", history, "1", "0.25", "--duration", "3"], capsys)[0] == 0
    assert run(["release", history, "2"], capsys)[0] == 0
    assert run(["ask", history, *PROBLEM, "-n", "1", "--failure-model", "0.7"], capsys)[0] == 0


# ---- outputs never overwrite inputs (issue 27, audit item 7) ---------------------------------------------


def is_history(path: Path) -> bool:
    return len(SQLiteStorage(path, read_only=True).trials()) >= 1


@pytest.fixture
def data_csv(tmp_path) -> Path:
    path = tmp_path / "d.csv"
    path.write_text("t,x,k,value\n" + "".join(f"{t},{x},{k},{1 + x + t}\n" for t in (0.1, 0.6)
                                              for x, k in ((0.1, 2), (0.4, 3), (0.7, 5), (0.9, 7))))
    return path


@pytest.mark.parametrize("args, said", [
    (["export", "{h}", "--out", "{h}"], "is the history"),
    (["export", "{h}", "--format", "json", "--out", "{link}"], "is the history"),
    (["export", "{h}", "--out", "{other}"], "is a gptask history"),
    (["tune", *PROBLEM, "--tasks", "2", "--budget", "4", "--history", "{h}", "--save-model", "{h}"], "is the history"),
    (["tune", *PROBLEM, "--tasks", "2", "--budget", "4", "--history", "{new}", "--save-model", "{new}"],
     "is the history"),
    (["tune", *PROBLEM, "--tasks", "2", "--budget", "4", "--save-model", "{other}"], "is a gptask history"),
    (["fit", "{d}", *PROBLEM, "--save-model", "{d}"], "is the data"),
    (["fit", "{d}", *PROBLEM, "--history", "{h}", "--save-model", "{h}"], "is the history"),
    (["fit", "{d}", *PROBLEM, "--save-model", "{other}"], "is a gptask history"),
    (["fit", "{d}", *PROBLEM, "--history", "{d}"], "is the data"),
])
def test_an_output_that_is_an_input_or_a_history_is_refused(history, data_csv, tmp_path, capsys, args, said):
    other = tmp_path / "other.sqlite"
    assert main(["ask", str(other), *PROBLEM, "--tasks", "2", "--budget", "4", "-n", "1"]) == 0
    link = tmp_path / "link.json"
    link.symlink_to(history)
    paths = dict(h=history, link=link, other=other, new=tmp_path / "new.sqlite", d=data_csv)
    before = {p: p.read_bytes() for p in (history, other, data_csv)}
    code, err = run([a.format(**paths) for a in args], capsys)
    assert code == 2 and said in err and len(err.splitlines()) == 1, err
    assert {p: p.read_bytes() for p in before} == before
    assert is_history(history) and is_history(other) and not (tmp_path / "new.sqlite").exists()


ROOT = TESTS.parent
MODEL = ROOT / "models" / "pdgeqrf_2core.json"


@pytest.mark.parametrize("args, said", [
    # the newer commands of issue 40 item 3: each wrote over its input or a history with exit 0
    (["export-table", "{m}", "--grid", "m=300,n=500", "--out", "{m}"], "is the model file"),
    (["export-table", "{m}", "--grid", "m=300,n=500", "--out", "{h}"], "is a gptask history"),
    (["export-table", "{m}", "--grid", "m=300,n=500", "--out", "{m2}"], "is a gptask model file"),
    (["replay", "{r}", "--json", "{r}"], "is recording 1"),
    (["replay", "{r}", "--json", "{h}"], "is a gptask history"),
    (["replay", "{r}", "--restrictions-file", "{rf}", "--json", "{rf}"], "is the restrictions file"),
    (["replay", "{r}", "--plot", "{dir}/"], "names a directory"),
    (["replay", "{r}", "--plot", "{tmp}/p.png", "--json", "{tmp}/p.png"], "is also the file of --plot"),
    (["machine", "--out", "{h}"], "is a gptask history"),
    (["machine", "--out", "{m}"], "is a gptask model file"),
    (["report", "{h}", "--out", "{hlink}"], "is the history"),
    (["export", "{h}", "--out", "{m}"], "is a gptask model file"),
    (["tune", *PROBLEM, "--tasks", "2", "--budget", "4", "--plot", "{tmp}/x.png", "--save-model", "{tmp}/x.png"],
     "is also the file of --plot"),
    (["tune", *PROBLEM, "--tasks", "2", "--budget", "4", "--plot", "{m}"], "is a gptask model file"),
])
def test_every_command_checks_its_outputs_before_it_reads_or_runs(history, tmp_path, capsys, args, said):
    model, other_model = tmp_path / "M.json", tmp_path / "M2.json"
    model.write_bytes(MODEL.read_bytes())
    other_model.write_bytes(MODEL.read_bytes())
    rec = tmp_path / "R.csv"
    rec.write_text("bs,time\n32,1.0\n64,2.0\n")
    rf = tmp_path / "restrict.txt"
    rf.write_text("bs <= 64\n")
    (tmp_path / "somedir").mkdir(exist_ok=True)
    (tmp_path / "link.html").symlink_to(history)
    paths = dict(m=model, m2=other_model, h=history, r=rec, rf=rf, dir=tmp_path / "plotdir", tmp=tmp_path,
                 hlink=tmp_path / "link.html")
    before = {p: p.read_bytes() for p in (model, other_model, history, rec, rf)}
    listing = sorted(tmp_path.iterdir())
    code, err = run([a.format(**paths) for a in args], capsys)
    assert code == 2 and said in err and len(err.splitlines()) == 1, err
    assert {p: p.read_bytes() for p in before} == before
    assert sorted(tmp_path.iterdir()) == listing  # nothing written (no plotdir.png, no x.png)


def test_save_model_may_replace_a_model_file_and_outputs_may_replace_their_own_kind(tmp_path, capsys):
    model = tmp_path / "M.json"
    model.write_bytes(MODEL.read_bytes())
    out = tmp_path / "t.csv"
    out.write_text("an older table\n")
    assert main(["export-table", str(model), "--grid", "m=300,n=500", "--format", "csv", "--out", str(out), "-q"]) == 0
    assert out.read_text().startswith("m,n,")
    me = tmp_path / "me.json"
    assert main(["machine", "--out", str(me)]) == 0 and main(["machine", "--out", str(me)]) == 0
    assert main(["tune", *PROBLEM, "--tasks", "2", "--budget", "4", "--save-model", str(model), "-q"]) == 0
    assert json.loads(model.read_text())["problem"]["name"] == "counting"  # the tuned model replaced the QR one


def test_replay_label_names_recordings_that_share_one(tmp_path, capsys):
    files = []
    for k, d in enumerate(("gpu_a", "gpu_b")):
        (tmp_path / d).mkdir()
        files.append(tmp_path / d / "runs.csv")  # one name: both recordings are labelled "runs"
        files[-1].write_text("bs,alg,time\n" + "".join(f"{b},{a},{(1 + k) * (b / 32 + i)}\n" for b in (32, 64, 128)
                                                       for i, a in enumerate("xy")))
    code, err = run(["replay", *files, "--budget", "3", "--seeds", "0", "--n-initial", "2"], capsys)
    assert code == 2 and "share the machine label 'runs'" in err and "--label" in err and len(err.splitlines()) == 1
    code, err = run(["replay", *files, "--label", "A", "--budget", "3"], capsys)
    assert code == 2 and "--label must be given once per recording" in err and "2 file(s), got 1" in err
    out = tmp_path / "r.json"
    assert main(["replay", *map(str, files), "--label", "A", "--label", "B", "--budget", "3", "--seeds", "0",
                 "--n-initial", "2", "--json", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["labels"] == ["A", "B"] and doc["optima"] == [1.0, 2.0]  # in the order of the files


def test_save_model_through_the_api_does_not_overwrite_a_history(history, tmp_path):
    import gptask as gt

    res = gt.tune(counting_problem(), tasks=2, budget=4, n_initial=3, progress=False, pso_particles=8, pso_iters=3,
                  restarts=1)
    before = history.read_bytes()
    with pytest.raises(ValueError, match="is a gptask history"):
        res.save_model(history)
    assert history.read_bytes() == before
    assert res.save_model(tmp_path / "m.json").exists()


# ---- k=v text round trips every value (issue 27, weak item) ----------------------------------------------


def test_assignments_round_trip_awkward_text():
    from gptask.cli.main import format_assignments, parse_assignments
    from problems_for_tests import AWKWARD_CHOICES

    for choice in AWKWARD_CHOICES:
        values = {"alg": choice, "n": 3, "x": 0.25, "flag": True}
        text = format_assignments(values)
        assert "\t" not in text and "\n" not in text
        assert parse_assignments(text) == values and type(parse_assignments(text)["alg"]) is str
    assert parse_assignments('a="x,y" , b=2') == {"a": "x,y", "b": 2}
    for bad in ['a="x', 'a="x"y', 'a="x",,b=1']:
        with pytest.raises(ValueError, match="key=value"):
            parse_assignments(bad)


def test_names_with_a_tab_a_comma_an_equals_sign_or_a_space_round_trip(tmp_path, capsys):
    # issue 40: `gptask ask` output broke on names containing TAB, `,` or `=`
    from gptask.cli.main import format_assignments, parse_assignments

    values = {"a,b": 1, "x=y": "z", "t\tab": "q,r", "sp ace": '"', "plain": 2.5}
    text = format_assignments(values)
    assert "\t" not in text and parse_assignments(text) == values
    assert parse_assignments(' "a b" = 1 , c=2') == {"a b": 1, "c": 2}
    with pytest.raises(ValueError, match="goes in double quotes"):
        parse_assignments("a b=1")
    h = tmp_path / "names.sqlite"
    problem = ["--problem", "problems_for_tests:awkward_names_problem"]
    assert main(["ask", str(h), *problem, "--task", '"node,rack"=a', "--budget", "4", "--n-initial", "4", "-n", "4"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 4
    for line in lines:
        trial_id, task, params = line.split("\t")  # still three columns
        assert parse_assignments(task) == {"node,rack": "a"}
        p = parse_assignments(params)
        assert set(p) == {"blocks\tper=row", "alg name"} and 1 <= p["blocks\tper=row"] <= 4
        assert main(["tell", str(h), trial_id, str(1.0 + p["blocks\tper=row"])]) == 0
    assert sum(t.status.finished for t in SQLiteStorage(h, read_only=True).trials()) == 4


def test_ask_prints_what_tell_and_the_job_read_back(tmp_path, capsys):
    from gptask.cli.main import parse_assignments
    from problems_for_tests import AWKWARD_CHOICES

    h = tmp_path / "a.sqlite"
    problem = ["--problem", "problems_for_tests:awkward_choices_problem"]
    seen, told = set(), 0
    for _ in range(6):  # the initial design, then search rounds, each asked and told through the text
        assert main(["ask", str(h), *problem, "--task", 'machine="node,07"', "--budget", "12", "-n", "12"]) == 0
        lines = capsys.readouterr().out.splitlines()
        for line in lines:
            trial_id, task, params = line.split("\t")
            assert parse_assignments(task) == {"machine": "node,07"}
            p = parse_assignments(params)
            assert p["alg"] in AWKWARD_CHOICES and 1 <= p["n"] <= 4
            seen.add(p["alg"])
            assert main(["tell", str(h), trial_id, str(1.0 + AWKWARD_CHOICES.index(p["alg"]) + p["n"])]) == 0
            told += 1
        capsys.readouterr()  # the tells' lines
        if told >= 12:
            break
    stored = {(t.params["alg"], t.params["n"]) for t in SQLiteStorage(h, read_only=True).trials()}
    assert told == 12 and {a for a, _ in stored} == seen and len(stored) == 12 and len(seen) >= 4


@pytest.mark.parametrize("reason", ['=HYPERLINK("http://evil.example","click")', "+cmd|' /C calc'!A0", "-2+3",
                                    "@SUM(1+1)", "\t=1+1", "\r=1+1"])
def test_exported_failure_reasons_cannot_be_spreadsheet_formulas(tmp_path, capsys, reason):
    import csv
    import io

    from gptask.data.storage import Owner
    from gptask.data.trials import Proposal, Status

    h = tmp_path / "h.sqlite"
    with SQLiteStorage(h, counting_problem().signature()) as s:
        s.set_tasks([{"t": 0.5}])
        t, = s.add_trials([Proposal(0, {"t": 0.5}, {"x": 0.5, "k": 3})], Owner.detached("test"))
        s.finish(t.id, Status.FAILED, reason=reason)
    assert main(["export", str(h)]) == 0
    row = next(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert row["reason"] == "'" + reason  # shown as text by a spreadsheet, never evaluated
    assert row["param.x"] == "0.5" and row["status"] == "failed"


def test_asking_with_another_budget_says_that_it_changes_the_historys(history, capsys, caplog):
    # the audit's case: ask --budget 100 rewrote a budget-4 history without a word
    with caplog.at_level("WARNING", logger="gptask"):
        assert main(["ask", str(history), *PROBLEM, "-n", "1"]) == 0
        assert not [r for r in caplog.records if "budget" in r.getMessage()]
        assert main(["ask", str(history), *PROBLEM, "--budget", "100", "-n", "1"]) == 0
    said = [r.getMessage() for r in caplog.records if "budget" in r.getMessage()]
    assert len(said) == 1 and "budget of 4 runs per task" in said[0] and "changes it to 100" in said[0], said
    with SQLiteStorage(history, read_only=True) as h:
        assert h.get_meta("settings")["budget"] == 100


def test_a_later_ask_keeps_the_target_and_failure_model_of_the_first(tmp_path, capsys, caplog):
    # a batch job's later asks are typed without the options of its first: they must not fall
    # back to the defaults (the failure model to 'on', no target) without a word
    h = tmp_path / "h.sqlite"
    assert main(["ask", str(h), *PROBLEM, "--tasks", "2", "--budget", "6", "-n", "2",
                 "--target", "1.5", "--failure-model", "0.7"]) == 0
    asked = [line.split("\t")[0] for line in capsys.readouterr().out.splitlines()]
    with SQLiteStorage(h, read_only=True) as s:
        assert s.get_meta("settings")["failure_model"] == 0.7 and s.get_meta("settings")["target"] == [1.5, 1.5]
        first = {t.id: t.task_index for t in s.trials()}
    # task 0 reaches the target, task 1 does not
    for trial_id in asked:
        assert main(["tell", str(h), trial_id, "1.2" if first[int(trial_id)] == 0 else "3.0"]) == 0
    capsys.readouterr()
    with caplog.at_level("WARNING", logger="gptask"):
        assert main(["ask", str(h), *PROBLEM, "-n", "4"]) == 0
    later = [line.split("\t") for line in capsys.readouterr().out.splitlines()]
    with SQLiteStorage(h, read_only=True) as s:
        tasks_of = {t.id: t.task_index for t in s.trials()}
        assert s.get_meta("settings")["failure_model"] == 0.7 and s.get_meta("settings")["target"] == [1.5, 1.5]
    assert later and {tasks_of[int(row[0])] for row in later} == {1}  # task 0 stopped at its target
    assert not [r for r in caplog.records if "changes it" in r.getMessage()]
    # naming another value says so, and the history then holds it
    with caplog.at_level("WARNING", logger="gptask"):
        assert main(["ask", str(h), *PROBLEM, "-n", "1", "--failure-model", "on"]) == 0
    said = [r.getMessage() for r in caplog.records if "changes it" in r.getMessage()]
    assert len(said) == 1 and "failure_model=0.7" in said[0] and "changes it to True" in said[0], said
    with SQLiteStorage(h, read_only=True) as s:
        assert s.get_meta("settings")["failure_model"] is True


def test_ask_keeps_to_the_cost_budget_the_history_records(tmp_path, capsys):
    """A history tuned with a cost budget (each run costing 1 here) records it; `gptask ask` on it takes it, as it
    takes the history's budget of runs: once the summed cost reaches it, nothing is asked (without it the
    history's budget of 20 runs per task would have let it ask on)."""
    import gptask as gt
    from problems_for_tests import costed_problem

    path = tmp_path / "h.sqlite"
    r = gt.tune(costed_problem(), [{"t": 0.3}], budget=20, cost_budget=5.0, n_initial=3, seed=0, history=path,
                progress=False, restarts=1, pso_particles=8, pso_iters=4)
    assert len(r.history) == 5 and r.cost_budget == 5.0
    with SQLiteStorage(path, read_only=True) as s:
        assert s.get_meta("settings")["cost_budget"] == 5.0 and s.get_meta("settings")["budget"] == 20
    code, err = run(["ask", path, "--problem", "problems_for_tests:costed_problem", "-n", "1"], capsys)
    assert code == 0 and "nothing to ask" in err
    with SQLiteStorage(path, read_only=True) as s:
        assert len(s.trials()) == 5


def test_tune_says_a_spent_cost_budget_left_trials_pending(tmp_path, capsys):
    """`gptask tune --cost-budget` that stops with trials asked but not started (runs costing 1 each): the same
    command would run nothing, so the message says a larger cost budget runs them (it said to run the same
    command again); the larger one runs the pending trial first, nothing twice."""
    path = tmp_path / "c.sqlite"
    args = ["tune", "--problem", "problems_for_tests:costed_problem", "--tasks", "2", "--budget", "10",
            "--history", path, "-q", "--cost-budget"]
    assert main([str(a) for a in [*args, 5]]) == 0
    out = capsys.readouterr().out
    with SQLiteStorage(path, read_only=True) as s:
        pending = [t.id for t in s.trials() if t.status.value == "pending"]
        assert len([t for t in s.trials() if t.status.finished]) == 5
    assert pending and (f"{len(pending)} trial(s) pending (ids {pending}): the cost budget is spent; the same command "
                        "with a larger --cost-budget runs them") in out
    assert main([str(a) for a in [*args, 6]]) == 0
    with SQLiteStorage(path, read_only=True) as s:
        done = [t for t in s.trials() if t.status.finished]
        assert len(done) == 6 and done[-1].id == pending[0] and len({t.id for t in done}) == 6


def test_more_tasks_in_a_history_are_not_a_change_of_target(caplog):
    from gptask.tuning.tuner import warn_if_changed

    with caplog.at_level("WARNING", logger="gptask"):
        warn_if_changed("h", {"target": [None, None]}, {"target": [None, None, None]})  # a source's tasks added
        warn_if_changed("h", {"target": [1.5, None]}, {"target": [1.5, None, None]})
        assert not caplog.records
        warn_if_changed("h", {"target": [1.5, None]}, {"target": [2.0, None, None]})
    assert len(caplog.records) == 1 and "target=[1.5, None]" in caplog.records[0].getMessage()


def test_problem_refuses_the_standard_library_and_anything_but_a_function_before_calling_it(tmp_path, capsys,
                                                                                           monkeypatch):
    # issue 40: `--problem os:system --problem-options command=...` ran the command before the check
    marker = tmp_path / "ran"
    (tmp_path / "userprobs.py").write_text(
        "import os\nimport problems_for_tests\nfrom os import system\nfrom shutil import rmtree\n"
        "ready = problems_for_tests.counting_problem()\n"
        "class Runner:\n    def __call__(self, **kw):\n        os.system('touch ran')\n"
        "runner = Runner()\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    for spec, what in [("os:system", "'os' is a module of Python's standard library"),
                       ("subprocess:run", "'subprocess' is a module of Python's standard library"),
                       ("builtins:exec", "'builtins' is a module of Python's standard library"),
                       ("userprobs:system", "'system' is a builtin_function_or_method, not a function defined"),
                       ("userprobs:rmtree", "'rmtree' comes from 'shutil', a module of Python's standard library"),
                       ("userprobs:runner", "'runner' is a Runner, not a function defined in Python")]:
        code, err = run(["tune", "--problem", spec, "--problem-options", f"command=touch {marker}",
                         "--tasks", "1", "--budget", "2"], capsys)
        assert code == 2 and what in err and "--problem takes" in err and "Traceback" not in err, (spec, err)
        assert not marker.exists() and not (tmp_path / "ran").exists()
    code, err = run(["tune", "--problem", "userprobs:ready", "--tasks", "1", "--budget", "2", "--quiet"], capsys)
    assert code == 0, err


# ---- work asked from the command line is capped (issue 40, item 9) ----------------------------------------


def test_a_grid_beyond_the_cap_is_refused_before_its_values_are_made(tmp_path, capsys):
    # the case: 100,000,000 values of one dimension ran for minutes before the count was checked
    code, err = run(["export-table", MODEL, "--grid", "m=300:1000:100000000,n=500", "-q"], capsys)
    assert code == 2 and "100,000,000 points" in err and "--max-grid-points 100000000" in err, err
    code, err = run(["export-table", MODEL, "--grid", "m=300:1000:400,n=500:1000:400", "-q"], capsys)
    assert code == 2 and "holds 160,000 points, more than the limit of 100,000" in err, err
    out = tmp_path / "t.csv"
    code, err = run(["export-table", MODEL, "--grid", "m=300:1000:3,n=500:1000:2", "--max-grid-points", "5",
                     "--format", "csv", "--out", out, "-q"], capsys)
    assert code == 2 and "holds 6 points, more than the limit of 5" in err and not out.exists()
    assert main(["export-table", str(MODEL), "--grid", "m=300:1000:3,n=500:1000:2", "--max-grid-points", "6",
                 "--format", "csv", "--out", str(out), "-q"]) == 0
    assert len(out.read_text().splitlines()) == 1 + 6


def test_a_sensitivity_beyond_the_cap_is_refused_with_its_count(tmp_path, capsys):
    import gptask as gt
    from gptask.insight.sensitivity import sensitivity

    small = sensitivity(gt.load_model(MODEL), base=16)  # 16 x (d + 2) evaluations on each of its tasks
    asked = 16777216 // 16 * small.evaluations * len(small.task_indices)
    code, err = run(["sensitivity", MODEL, "--base", "16777216"], capsys)
    assert code == 2 and f"asks for {asked:,} model evaluations" in err and f"--max-evaluations {asked}" in err, err
    assert len(err.splitlines()) == 1
    code, err = run(["sensitivity", MODEL, "--base", "64", "--max-evaluations", str(asked // 16777216 * 64 - 1)],
                    capsys)
    assert code == 2 and "more than the limit" in err
    assert main(["sensitivity", str(MODEL), "--base", "64", "--max-evaluations", str(asked // 16777216 * 64),
                 "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["base"] == 64


@pytest.fixture
def tuned(tmp_path) -> Path:
    path = tmp_path / "tuned.sqlite"
    assert main(["tune", *PROBLEM, "--tasks", "3", "--budget", "5", "--history", str(path), "-q"]) == 0
    return path


@pytest.mark.parametrize("args, said", [
    (["--grid", "t=0:1:100000000"], "100,000,000 points"),
    (["--grid", "t=0:1:5", "--max-grid-points", "4"], "5 points, more than the limit of 4"),
    (["--grid", "s=0:1:3"], "'s' is not a task dimension"),
    (["--grid", "t=1:0:3"], "`lo <= hi` must hold"),
    (["--base", "1000"], "base must be a power of 2"),
    (["--base", "16777216"], "--max-evaluations"),
    (["--base", "64", "--max-evaluations", "100"], "more than the limit of 100"),
])
def test_report_refuses_a_bad_grid_or_base_before_writing(tuned, tmp_path, capsys, args, said):
    # the case: a traceback in the log, a page with an error box, and exit 0
    out = tmp_path / "r.html"
    code, err = run(["report", tuned, "--out", out, "-q", *args], capsys)
    assert code == 2 and said in err and len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert not out.exists()


def test_tune_learns_from_source_files_as_the_api_does(tmp_path, capsys):
    """gptask tune --source (repeatable) and --select-sources are gt.tune(..., sources=..., select_sources=...):
    the same runs as the API call with the same seed (reference), the source's runs in the model and none run
    again. Refused, naming it: a source that is the --history, --save-model over a source, --select-sources
    without a source, a missing source file."""
    import gptask as gt

    src = tmp_path / "src.sqlite"
    gt.tune(counting_problem(), [{"t": 0.2}, {"t": 0.8}], budget=4, seed=0, history=src, progress=False)
    h = tmp_path / "h.sqlite"
    assert main(["tune", *PROBLEM, "--task", "t=0.5", "--budget", "4", "--source", str(src), "--history", str(h),
                 "--select-sources", "-q"]) == 0
    capsys.readouterr()
    api = gt.tune(counting_problem(), [{"t": 0.5}], budget=4, seed=0, sources=[str(src)], select_sources=True,
                  progress=False)
    with SQLiteStorage(h, read_only=True) as s:
        cli_trials = s.trials()

    def runs(trials):
        return sorted((t.task["t"], t.params["x"], t.params["k"], t.value) for t in trials if t.source != "source")

    assert runs(cli_trials) == runs(api.history) and len(runs(cli_trials)) == 4
    assert all(t.task["t"] == 0.5 for t in cli_trials if t.source != "source")
    assert sum(t.source == "source" for t in cli_trials) == 8  # the source's runs, in the history once

    def error(*args):
        assert main(["tune", *PROBLEM, "--task", "t=0.5", "--budget", "4", "-q", *map(str, args)]) == 2
        return capsys.readouterr().err

    assert f"--source {src} is the --history" in error("--source", src, "--history", src)
    assert "writing it would destroy it" in error("--source", src, "--save-model", src)
    assert "--select-sources judges the --source files" in error("--select-sources")
    assert "no such file" in error("--source", tmp_path / "none.sqlite")


@pytest.mark.parametrize("n_tasks, said", [(1, False), (3, True)])
def test_save_model_announces_the_accuracy_report_only_when_one_is_computed(tmp_path, capsys, n_tasks, said):
    """The leave-one-task-out report needs 3 tuned tasks (gptask.transfer.accuracy): with fewer the line says
    only that the model is saved (it announced a refit per task for 1 task); the file records whether a report
    was computed (reference)."""
    model = tmp_path / "m.json"
    assert main(["tune", *PROBLEM, "--tasks", str(n_tasks), "--budget", "4", "--save-model", str(model)]) == 0
    err = capsys.readouterr().err
    assert f"saving the model to {model}" in err
    assert ("leave-one-task-out accuracy (a refit per task, 3 tasks)" in err) is said
    assert (json.loads(model.read_text())["accuracy"] is not None) is said
