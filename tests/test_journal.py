"""The step-result journal (gptask/evaluation/journal.py): a campaign killed (SIGKILL) after a run's
end and before its commit loses nothing and runs nothing twice; the journal's own rules (atomic,
JSON, checked against the history, failures not journalled, stale files removed)."""

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

import gptask as gt
from gptask.data.storage import Owner, open_history
from gptask.data.trials import Status
from gptask.evaluation import journal
from gptask.evaluation.evaluate import Evaluator, Outcome, run_job
from gptask.tuning.cluster import Allocation, SlurmSteps, current_step
from gptask.tuning.tuner import Tuner

TESTS = Path(__file__).parent
ROOT = TESTS.parent
sys.path.insert(0, str(TESTS))
from problems_for_tests import SleepyObjective, counting_problem  # noqa: E402

FAST = dict(pso_particles=10, pso_iters=5, restarts=1)

# A campaign of 6 design points, one run at a time; with "kill", the process kills itself (SIGKILL)
# at the third complete result, after the run ended and before the loop commits it (tell_once).
# argv: kind (serial: no executor), mode, and optionally the history and journal= as JSON.
_CAMPAIGN = """
import concurrent.futures as cf, contextlib, json, os, signal, sys
sys.path.insert(0, {tests!r})
import gptask as gt
import gptask.tuning.asynchronous as loop
import gptask.tuning.steps as steps
from gptask.tuning.cluster import Allocation, SlurmSteps, current_step
from problems_for_tests import SleepyObjective, sleepy_problem

kind, mode = sys.argv[1], sys.argv[2]
history, journal = (sys.argv[3], json.loads(sys.argv[4])) if len(sys.argv) > 3 else ({hist!r}, None)
problem = sleepy_problem({log!r}, median=0.0)
executor, in_flight = None, 1
if kind == "serial":
    loop, in_flight = steps, None  # the serial loop tells through steps.tell_journalled -> steps.tell_once
elif kind == "slurm-steps":
    inner = SleepyObjective({log!r}, median=0.0)

    def on_a_step(task, params):
        current_step().run(["true"])
        return inner(task, params)
    problem = gt.Problem(problem.task_space, problem.param_space, on_a_step, name="counting")
    executor = SlurmSteps(allocation=Allocation("7", ("n1",)))
elif kind == "threads":
    executor = cf.ThreadPoolExecutor(1)
else:
    executor = cf.ProcessPoolExecutor(1)
if mode == "kill":
    real, complete = loop.tell_once, []

    def tell_once(tuner, trial, outcome, **kw):
        if outcome.status.value == "complete":
            complete.append(trial.id)
            if len(complete) == 3:
                with open({mark!r}, "w") as f:
                    json.dump({{"trial": trial.id, "params": trial.params, "task": trial.task}}, f)
                os.kill(os.getpid(), signal.SIGKILL)
        return real(tuner, trial, outcome, **kw)
    loop.tell_once = tell_once
with executor or contextlib.nullcontext():
    gt.tune(problem, tasks=[{{"t": 0.4}}], budget=6, n_initial=6, seed=3, history=history, progress=False,
            executor=executor, max_in_flight=in_flight, pso_particles=10, pso_iters=5, restarts=1, journal=journal)
"""


def _fake_slurm(tmp_path: Path) -> dict:
    """The environment of a campaign with stand-ins for srun (runs its command), sinfo (one idle
    node n1) and squeue (nothing listed) first on PATH."""
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    for name, text in (("srun", 'while [ "${1#-}" != "$1" ]; do shift; done\nexec "$@"\n'),
                       ("sinfo", "echo 'n1 idle'\n"), ("squeue", "exit 0\n")):
        (bin_ / name).write_text("#!/bin/bash\n" + text)
        (bin_ / name).chmod((bin_ / name).stat().st_mode | stat.S_IEXEC)
    return {"PATH": f"{bin_}:{os.environ['PATH']}"}


def _killed_and_resumed(tmp_path: Path, kind: str, history: str | None = None, journal: str | None = None) -> tuple:
    """Run _CAMPAIGN of ``kind`` on ``history`` (default: tmp_path/h.sqlite) with ``journal=``, killed
    at its third complete result before the commit, then again to its end; check that every
    configuration ran exactly once (the objective's own log) and every trial is finished, the killed
    one with the objective's value. Returns (the killed trial, the resumed run's stderr)."""
    log, hist, mark = tmp_path / "calls.jsonl", str(history or tmp_path / "h.sqlite"), tmp_path / "killed.json"
    code = _CAMPAIGN.format(tests=str(TESTS), log=str(log), hist=hist, mark=str(mark))
    env = {**os.environ, "PYTHONPATH": str(ROOT), **(_fake_slurm(tmp_path) if kind == "slurm-steps" else {})}
    argv = [sys.executable, "-c", code, kind]
    where = [hist, json.dumps(journal)]
    killed = subprocess.run(argv + ["kill"] + where, capture_output=True, text=True, env=env, timeout=300,
                            start_new_session=True)
    assert killed.returncode == -9, killed.stderr
    victim = json.loads(mark.read_text())
    with open_history(hist, read_only=True) as h:
        before = {t.id: t for t in h.trials()}
    assert before[victim["trial"]].status is Status.PENDING  # killed before its commit
    assert len([line for line in log.read_text().splitlines()]) == len([t for t in before.values()
                                                                        if t.status.finished]) + 1
    resumed = subprocess.run(argv + ["resume"] + where, capture_output=True, text=True, env=env, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    with open_history(hist, read_only=True) as h:
        trials = h.trials()
    assert len(trials) == 6 and all(t.status.finished for t in trials)
    runs = [json.loads(line) for line in log.read_text().splitlines()]
    keys = sorted(json.dumps(r["params"], sort_keys=True) for r in runs)
    assert keys == sorted(json.dumps(t.params, sort_keys=True) for t in trials)  # each ran once, none lost
    t = next(t for t in trials if t.id == victim["trial"])
    reference = SleepyObjective(str(tmp_path / "ref.jsonl"), median=0.0)(victim["task"], victim["params"])
    assert t.status is Status.COMPLETE and t.value == reference
    assert "committed from" in resumed.stderr and f"trial {t.id} " in resumed.stderr
    return t, resumed.stderr


@pytest.mark.parametrize("kind", ["threads", "processes", "slurm-steps", "serial"])
def test_a_campaign_killed_between_a_runs_end_and_its_commit_loses_nothing_and_runs_nothing_twice(tmp_path, kind):
    """kill -9 of the campaign after its third complete run ended (its result back in the loop) and
    before the commit: the run is journalled beside the history, and the campaign started again
    commits it from there: every configuration ran exactly once (the objective's own log), every
    trial is finished, the killed one with the objective's value. Before the journal that run was
    lost and ran again on the resume (7 runs for 6 trials); in the serial loop (no executor) until
    it journalled too, killed in its tell."""
    _killed_and_resumed(tmp_path, kind)
    assert journal.journals(tmp_path / "h.sqlite") == {}


@pytest.mark.parametrize("kind", ["processes", "serial"])
def test_a_postgres_campaign_with_a_journal_folder_killed_before_a_commit_loses_nothing(tmp_path, pg_server, kind):
    """The same kill and resume on a PostgreSQL history with journal= a folder (a history that is no
    file has no journal by default): the killed run's result waits in the history's subfolder of the
    journal and is committed on the resume, not run again; the subfolder is empty at the end."""
    root = tmp_path / "shared" / "journal"  # made by the tuner
    url = pg_server.new_url()
    _, said = _killed_and_resumed(tmp_path, kind, url, str(root))
    with open_history(url, read_only=True) as h:
        folder = journal.history_folder(root, h.uid())
    assert f"committed from {folder}{os.sep}trial-" in said
    assert list(root.iterdir()) == []  # the history's subfolder, empty, removed at the end


def test_a_journalled_result_of_a_released_trial_is_committed_not_run_again(tmp_path):
    """A trial released (its holder stopped) whose run had journalled a result: the next ask
    commits that result and does not hand the trial out again; the journal file is removed."""
    hist = tmp_path / "h.sqlite"
    prob = counting_problem()
    with Tuner(prob, [{"t": 0.4}], budget=4, n_initial=4, history=hist, **FAST) as tuner:
        asked = tuner.ask(2)
    # closed: both released, still PENDING; the first one's run had ended and journalled its result
    first, second = asked
    value = prob.objective(first.task, first.params)
    assert journal.write(journal.entry_path(hist, first.id), first.id, first.task, first.params,
                         Outcome.of(value).to_json())
    with Tuner(prob, [{"t": 0.4}], budget=4, n_initial=4, history=hist, **FAST) as tuner:
        again = tuner.ask(4)
        done = {t.id: t for t in tuner.records}
    assert first.id not in {t.id for t in again} and second.id in {t.id for t in again}
    assert done[first.id].status is Status.COMPLETE and done[first.id].value == value
    assert done[first.id].params == first.params
    assert journal.journals(hist) == {}


def test_a_journal_file_that_is_not_the_trials_result_is_removed_and_the_trial_runs(tmp_path, caplog):
    """A journal file left from another history of the same name (another configuration under the
    trial's id), and one that is not JSON: neither is committed; the trials are handed out again
    and the files removed (the bad one ignored with a warning)."""
    hist = tmp_path / "h.sqlite"
    prob = counting_problem()
    with Tuner(prob, [{"t": 0.4}], budget=4, n_initial=4, history=hist, **FAST) as tuner:
        first, second = tuner.ask(2)
    other = dict(first.params, x=0.123456)
    journal.write(journal.entry_path(hist, first.id), first.id, first.task, other, Outcome.of(1.5).to_json())
    Path(journal.entry_path(hist, second.id)).write_text("{not json")
    with caplog.at_level("WARNING"):
        with Tuner(prob, [{"t": 0.4}], budget=4, n_initial=4, history=hist, **FAST) as tuner:
            again = {t.id for t in tuner.ask(4)}
            assert not tuner.records
    assert {first.id, second.id} <= again
    assert "is not trial %d's result" % first.id in caplog.text and "cannot be read" in caplog.text
    assert journal.entry_path(hist, first.id) not in journal.journals(hist).values()


def test_a_journal_file_of_a_committed_trial_is_removed(tmp_path):
    """Killed after the commit and before the file's removal: the next campaign removes it and
    leaves the committed result as it is; so is the temporary file of a write killed in the middle,
    once it is older than STALE_TEMP_S (a recent one may be a write going on)."""
    hist = tmp_path / "h.sqlite"
    prob = counting_problem()
    with Tuner(prob, [{"t": 0.4}], budget=4, n_initial=4, history=hist, **FAST) as tuner:
        (t,) = tuner.ask(1)
        tuner.tell(t, 2.0)
    journal.write(journal.entry_path(hist, t.id), t.id, t.task, t.params, Outcome.of(9.0).to_json())
    old, new = journal.journal_dir(hist) / ".trial-a1.tmp", journal.journal_dir(hist) / ".trial-b2.tmp"
    old.write_text('{"format": 1, "tri')
    new.write_text('{"format": 1, "tri')
    os.utime(old, (old.stat().st_atime, old.stat().st_mtime - journal.STALE_TEMP_S - 60))
    with Tuner(prob, [{"t": 0.4}], budget=4, n_initial=4, history=hist, **FAST) as tuner:
        tuner.ask(1)
        assert [r.value for r in tuner.records] == [2.0]
    assert journal.journals(hist) == {}
    assert sorted(os.listdir(journal.journal_dir(hist))) == [".trial-b2.tmp"]


def test_the_journal_file_is_written_atomically_and_only_for_a_verdict(tmp_path):
    """run_job journals a complete result (JSON: the trial, task, configuration and outcome; no
    temporary file left) and never a failed one (a failure may be the campaign's own death)."""
    path = journal.entry_path(tmp_path / "h.sqlite", 5)

    def ok(task, params):
        return 3.5

    def broken(task, params):
        raise RuntimeError("solver diverged")

    res = run_job(Evaluator(ok).job({"t": 0.4}, {"x": 0.5}, trial=5, journal=path))
    assert res.outcome.value == 3.5
    entry = journal.read(path)
    assert entry.matches(5, {"t": 0.4}, {"x": 0.5}) and Outcome.from_json(entry.outcome) == res.outcome
    assert os.listdir(os.path.dirname(path)) == ["trial-5.json"]
    assert json.loads(Path(path).read_text())["format"] == journal.FORMAT
    os.unlink(path)
    res = run_job(Evaluator(broken).job({"t": 0.4}, {"x": 0.5}, trial=5, journal=path))
    assert res.outcome.status is Status.FAILED and not os.path.exists(path)


def test_a_history_that_is_no_file_has_no_journal():
    with Tuner(counting_problem(), [{"t": 0.4}], budget=2, n_initial=2, **FAST) as tuner:
        (t,) = tuner.ask(1)
        assert tuner.journal_path(t.id) is None


def test_slurm_steps_journals_a_steps_result_with_its_resources(tmp_path, monkeypatch):
    """SlurmSteps journals a step's result itself, once final: with the resources its step had
    (what the trial records), not run_job's result without them."""
    monkeypatch.setenv("PATH", _fake_slurm(tmp_path)["PATH"])
    path = journal.entry_path(tmp_path / "h.sqlite", 1)

    def on_step(task, params):
        current_step().run(["true"])
        return 1.0

    with SlurmSteps(allocation=Allocation("7", ("n1",))) as ex:
        res = ex.submit(run_job, Evaluator(on_step).job({}, {"x": 1}, trial=1, journal=path)).result(timeout=60)
    assert res.outcome.status is Status.COMPLETE
    assert journal.read(path).outcome["extra"]["resources"] == res.outcome.extra["resources"]
    assert res.outcome.extra["resources"]["nodes"] == 1


def test_two_tuner_hosts_of_one_postgres_history_share_a_journal_folder_without_taking_each_others_files(
        tmp_path, pg_server):
    """Two tuners (two holders, as two hosts) of one PostgreSQL campaign with one journal folder: the
    same subfolder, disjoint files (the trial ids are the database's); when A goes (its trials
    released) with one run journalled, B's next ask commits that one from A's file, hands A's other
    trial out again, and leaves its own journalled, not yet committed, run's file alone."""
    url, root = pg_server.new_url(), tmp_path / "journal"
    prob = counting_problem()
    a = Tuner(prob, [{"t": 0.4}], budget=6, n_initial=6, history=url, journal=root, owner=Owner.detached("host-a"),
              **FAST)
    b = Tuner(prob, [{"t": 0.4}], budget=6, n_initial=6, history=url, journal=root, owner=Owner.detached("host-b"),
              **FAST)
    try:
        a1, a2 = a.ask(2)
        b1, b2 = b.ask(2)
        assert a.journal_dir == b.journal_dir and a.journal_dir.parent == root
        paths = [a.journal_path(a1.id), a.journal_path(a2.id), b.journal_path(b1.id), b.journal_path(b2.id)]
        assert len(set(paths)) == 4 and len({a1.id, a2.id, b1.id, b2.id}) == 4
        va, vb = prob.objective(a1.task, a1.params), prob.objective(b1.task, b1.params)
        assert journal.write(a.journal_path(a1.id), a1.id, a1.task, a1.params, Outcome.of(va).to_json())
        assert journal.write(b.journal_path(b1.id), b1.id, b1.task, b1.params, Outcome.of(vb).to_json())
        a.close()  # host A gone: its trials released, a1's result only in the journal
        again = b.ask(6)
        assert a2.id in {t.id for t in again} and a1.id not in {t.id for t in again}
        assert {t.id: t.value for t in b.records} == {a1.id: va}
        assert set(journal.entries(b.journal_dir)) == {b1.id}  # B's own file, its trial still running
        b.tell(b1, vb)
    finally:
        a.close()
        b.close()
    with open_history(url, read_only=True) as h:
        done = {t.id: t.value for t in h.trials() if t.status.finished}
    assert done == {a1.id: va, b1.id: vb}


def test_two_histories_sharing_a_journal_folder_never_take_each_others_results(tmp_path, history_location):
    """Two histories (same problem, seed and tasks: the same trial ids and configurations) with one
    journal folder: each has its own subfolder (named by its uid), so a result journalled by the
    first is never committed to the second, whose trial runs; the first commits it on its resume.
    Files named by the trial id alone would have made the second take the first's result."""
    root, prob = tmp_path / "journal", counting_problem()
    other = (tmp_path / "other.sqlite" if isinstance(history_location, Path)
             else history_location.rsplit("=", 1)[0] + "=other_" + history_location.rsplit("_", 1)[1])

    def tuner(where):
        return Tuner(prob, [{"t": 0.4}], budget=4, n_initial=4, history=where, journal=root, **FAST)

    with tuner(history_location) as first, tuner(other) as second:
        (t1,), (t2,) = first.ask(1), second.ask(1)
        assert (t1.id, t1.params) == (t2.id, t2.params) and first.journal_dir != second.journal_dir
        value = prob.objective(t1.task, t1.params)
        journal.write(first.journal_path(t1.id), t1.id, t1.task, t1.params, Outcome.of(value).to_json())
    with tuner(other) as second:
        assert t2.id in {t.id for t in second.ask(4)} and not second.records
    with tuner(history_location) as first:
        assert t1.id not in {t.id for t in first.ask(4)}
        assert [(r.id, r.value) for r in first.records] == [(t1.id, value)]
    with open_history(history_location, read_only=True) as h:
        assert journal.entries(journal.history_folder(root, h.uid())) == {}


def test_a_history_keeps_its_uid_and_a_copy_has_another(tmp_path, history_location):
    from gptask.data.storage.copy import copy_history

    prob = counting_problem()
    with Tuner(prob, [{"t": 0.4}], budget=2, n_initial=2, history=history_location, **FAST) as tuner:
        (t,) = tuner.ask(1)
        tuner.tell(t, 1.0)
        uid = tuner.mirror.storage.uid()
    with open_history(history_location) as h:
        assert h.uid() == uid and len(uid) == 32
    copy_history(history_location, tmp_path / "copy.sqlite")
    with open_history(tmp_path / "copy.sqlite") as c:
        assert c.uid() != uid and [x.value for x in c.trials()] == [1.0]


def test_an_explicit_journal_folder_of_a_sqlite_history_holds_its_subfolder(tmp_path):
    """journal= a folder for a SQLite history: the runs' files go to its history-<uid> subfolder,
    not beside the history; journal=False: none at all."""
    hist, root = tmp_path / "h.sqlite", tmp_path / "j"
    with Tuner(counting_problem(), [{"t": 0.4}], budget=2, n_initial=2, history=hist, journal=root, **FAST) as tuner:
        (t,) = tuner.ask(1)
        assert Path(tuner.journal_path(t.id)).parent == journal.history_folder(root, tuner.mirror.storage.uid())
    with Tuner(counting_problem(), [{"t": 0.4}], budget=2, n_initial=2, history=hist, journal=False, **FAST) as tuner:
        assert tuner.journal_path(t.id) is None and tuner.journal_note is None
    gt.tune(counting_problem(), [{"t": 0.4}], budget=2, n_initial=2, history=hist, progress=False, journal=root, **FAST)
    assert not journal.journal_dir(hist).exists() and list(root.iterdir()) == []


def test_the_journal_path_a_worker_gets_is_absolute(tmp_path, monkeypatch):
    """A history given by a relative path: the journal file a worker is told to write is absolute,
    so a worker in another working directory (a process pool's, an MPIPoolExecutor's) writes where
    the tuner reads, not into a folder of its own (it was relative: h.sqlite.results/trial-1.json)."""
    monkeypatch.chdir(tmp_path)
    for given in ({}, {"journal": "j"}):
        with Tuner(counting_problem(), [{"t": 0.4}], budget=2, n_initial=2, history="h.sqlite", **given,
                   **FAST) as tuner:
            (t,) = tuner.ask(1)
            path = tuner.journal_path(t.id)
            assert os.path.isabs(path) and Path(path).is_relative_to(tmp_path), path
            monkeypatch.chdir("/")  # the worker's working directory
            journal.write(path, t.id, t.task, t.params, Outcome.of(1.0).to_json())
            monkeypatch.chdir(tmp_path)
            assert [p.name for p in Path(path).parent.iterdir()] == [Path(path).name]


def test_a_finished_campaign_leaves_no_empty_journal_folder(tmp_path):
    """The serial loop journals every complete run beside a SQLite history (its folder made at the
    first); at the end, every file removed, the empty folder is removed too; one that still holds
    an entry (a run not committed) stays."""
    hist = tmp_path / "h.sqlite"
    res = gt.tune(counting_problem(), [{"t": 0.4}], budget=3, n_initial=2, history=hist, progress=False, **FAST)
    assert len(res.history) == 3 and sorted(os.listdir(tmp_path)) == ["h.sqlite"]
    with Tuner(counting_problem(), [{"t": 0.4}], budget=4, n_initial=2, history=hist, **FAST) as tuner:
        (t,) = tuner.ask(1)
        journal.write(tuner.journal_path(t.id), t.id, t.task, t.params, Outcome.of(1.0).to_json())
    assert list(journal.journals(hist)) == [t.id]


def test_a_bad_journal_folder_is_refused_before_any_run(tmp_path):
    """A journal that is a file, a folder that cannot be written, journal= for a history in memory,
    True or no path: a clear error naming it, before any trial is asked."""
    prob, hist = counting_problem(), tmp_path / "h.sqlite"
    afile = tmp_path / "notes.txt"
    afile.write_text("x")
    with pytest.raises(ValueError, match="notes.txt.*which is a file"):
        gt.tune(prob, [{"t": 0.4}], budget=2, n_initial=2, history=hist, journal=afile, progress=False, **FAST)
    with pytest.raises(ValueError, match="outlives this process.*in memory"):
        Tuner(prob, [{"t": 0.4}], budget=2, n_initial=2, journal=tmp_path / "j", **FAST)
    with pytest.raises(ValueError, match="journal=True"):
        Tuner(prob, [{"t": 0.4}], budget=2, n_initial=2, history=hist, journal=True, **FAST)
    with pytest.raises(TypeError, match="journal must be a folder.*got 3"):
        Tuner(prob, [{"t": 0.4}], budget=2, n_initial=2, history=hist, journal=3, **FAST)
    if os.geteuid() != 0:  # root writes anywhere
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        with pytest.raises(ValueError, match="locked.*cannot be written"):
            Tuner(prob, [{"t": 0.4}], budget=2, n_initial=2, history=hist, journal=locked, **FAST)
    assert not hist.exists()


def test_gptask_tune_journal_that_is_a_file_is_one_line_and_exit_2(tmp_path):
    afile = tmp_path / "notes.txt"
    afile.write_text("x")
    got = subprocess.run([sys.executable, "-m", "gptask", "tune", "--problem", "demo", "--tasks", "1", "--budget", "2",
                          "--history", str(tmp_path / "h.sqlite"), "--journal", str(afile), "-q"],
                         capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120)
    assert got.returncode == 2 and "Traceback" not in got.stderr
    assert len(got.stderr.strip().splitlines()) == 1 and "--journal must be a folder" in got.stderr
    assert "notes.txt" in got.stderr and "is a file" in got.stderr and not (tmp_path / "h.sqlite").exists()


def test_a_postgres_history_without_a_journal_warns_once(pg_server, caplog):
    """No journal by default for PostgreSQL: the campaign says so once per history and process (its
    runs are not journalled), and not at all with journal=False."""
    url = pg_server.new_url()
    with caplog.at_level("WARNING", logger="gptask.tuning.loop"):
        for _ in range(2):
            gt.tune(counting_problem(), [{"t": 0.4}], budget=2, n_initial=1, history=url, progress=False, **FAST)
        assert caplog.text.count("has no result journal") == 1 and "journal=FOLDER" in caplog.text
        caplog.clear()
        gt.tune(counting_problem(), [{"t": 0.4}], budget=3, n_initial=1, history=pg_server.new_url(), journal=False,
                progress=False, **FAST)
        assert "journal" not in caplog.text


def test_a_rank_journals_only_into_a_folder_whose_parent_it_reaches(tmp_path, caplog):
    """journal_on_rank (a rank other than 0 under parallel_evaluations): the history's journal folder
    is made when missing if its parent is there (the history's folder, shared with rank 0), and the
    result written as rank 0's serial loop writes it; a parent this host does not have (a node-local
    tree rank 0 never sees) is not made: nothing written, False, one warning for any number of runs.
    No folder (no journal) or a failed run: nothing, False."""
    from gptask.tuning.steps import journal_on_rank

    (t,) = _asked(tmp_path / "h.sqlite")
    folder = journal.journal_dir(tmp_path / "h.sqlite")
    assert not folder.exists()
    outcome = Outcome.of(2.5)
    assert journal_on_rank(str(folder), t, outcome)
    entry = journal.read(journal.entry_in(folder, t.id))
    assert entry.matches(t.id, t.task, t.params) and Outcome.from_json(entry.outcome) == outcome
    assert os.listdir(folder) == [f"trial-{t.id}.json"]
    elsewhere = tmp_path / "not-mounted" / "run" / "h.sqlite.results"
    with caplog.at_level("WARNING"):
        assert not journal_on_rank(str(elsewhere), t, outcome)
        assert not journal_on_rank(str(elsewhere), t, outcome)
    assert not (tmp_path / "not-mounted").exists()
    assert caplog.text.count("is not reachable from this rank") == 1 and str(elsewhere) in caplog.text
    os.unlink(journal.entry_in(folder, t.id))
    assert not journal_on_rank(None, t, outcome)
    assert not journal_on_rank(str(folder), t, Outcome.of(None, "node lost"))
    assert os.listdir(folder) == []


def _asked(hist: Path) -> list:
    with Tuner(counting_problem(), [{"t": 0.4}], budget=2, n_initial=2, history=hist, **FAST) as tuner:
        return tuner.ask(1)


@pytest.mark.parametrize("there", [True, False])
def test_rank_0_commits_a_result_another_rank_journalled_and_removes_its_file(tmp_path, monkeypatch, there):
    """tell_journalled(written=True), rank 0's tell of a result another rank ran and journalled: the
    file is there during the commit and gone after it. When the rank's file is not there (its host
    did not reach the folder) rank 0 writes it before the commit; when it is, rank 0 does not
    write it again."""
    import gptask.tuning.steps as steps

    hist = tmp_path / "h.sqlite"
    prob = counting_problem()
    with Tuner(prob, [{"t": 0.4}], budget=2, n_initial=2, history=hist, **FAST) as tuner:
        (t,) = tuner.ask(1)
        outcome = Outcome.of(prob.objective(t.task, t.params))
        path = tuner.journal_path(t.id)
        if there:
            assert steps.journal_on_rank(os.path.abspath(journal.journal_dir(hist)), t, outcome)
        writes, seen = [], []
        real_write, real_tell = journal.write, steps.tell_once
        monkeypatch.setattr(journal, "write", lambda *a, **k: writes.append(a[0]) or real_write(*a, **k))

        def tell_once(tuner, trial, got, **kw):
            entry = journal.read(path)
            seen.append(entry is not None and Outcome.from_json(entry.outcome) == got)
            return real_tell(tuner, trial, got, **kw)
        monkeypatch.setattr(steps, "tell_once", tell_once)
        done = steps.tell_journalled(tuner, t, outcome, written=there)
        assert done.status is Status.COMPLETE and done.value == outcome.value
    assert seen == [True] and writes == ([] if there else [path])
    assert journal.journals(hist) == {}


def test_a_writer_killed_before_its_rename_leaves_no_result_file(tmp_path, monkeypatch):
    """A rank (or worker) killed while it writes: until the rename, the data is in a temporary
    file that entries() never lists, so a resume sees either the whole result or none. Stopped at
    its fsync (the process dying there), the write leaves no trial file and returns False."""
    folder = tmp_path / "h.sqlite.results"
    seen = []

    def dies(fd):
        seen.append((sorted(os.listdir(folder)), journal.entries(folder)))
        raise OSError(5, "killed here")
    monkeypatch.setattr(journal.os, "fsync", dies)
    assert not journal.write(journal.entry_in(folder, 3), 3, {"t": 0.4}, {"x": 0.5}, Outcome.of(1.0).to_json(),
                             parents=False)
    (names, listed), = seen
    assert len(names) == 1 and names[0].startswith(".trial-") and names[0].endswith(".tmp") and listed == {}
    assert journal.entries(folder) == {} and os.listdir(folder) == []
