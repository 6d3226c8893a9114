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
from gptask.data.storage import SQLiteStorage
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
_CAMPAIGN = """
import concurrent.futures as cf, json, os, signal, sys
sys.path.insert(0, {tests!r})
import gptask as gt
import gptask.tuning.asynchronous as loop
from gptask.tuning.cluster import Allocation, SlurmSteps, current_step
from problems_for_tests import SleepyObjective, sleepy_problem

kind, mode = sys.argv[1], sys.argv[2]
problem = sleepy_problem({log!r}, median=0.0)
if kind == "slurm-steps":
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
with executor:
    gt.tune(problem, tasks=[{{"t": 0.4}}], budget=6, n_initial=6, seed=3, history={hist!r}, progress=False,
            executor=executor, max_in_flight=1, pso_particles=10, pso_iters=5, restarts=1)
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


@pytest.mark.parametrize("kind", ["threads", "processes", "slurm-steps"])
def test_a_campaign_killed_between_a_runs_end_and_its_commit_loses_nothing_and_runs_nothing_twice(tmp_path, kind):
    """kill -9 of the campaign after its third complete run ended (its result back in the loop) and
    before the commit: the run is journalled beside the history, and the campaign started again
    commits it from there: every configuration ran exactly once (the objective's own log), every
    trial is finished, the killed one with the objective's value. Before the journal that run was
    lost and ran again on the resume (7 runs for 6 trials)."""
    log, hist, mark = tmp_path / "calls.jsonl", tmp_path / "h.sqlite", tmp_path / "killed.json"
    code = _CAMPAIGN.format(tests=str(TESTS), log=str(log), hist=str(hist), mark=str(mark))
    env = {**os.environ, "PYTHONPATH": str(ROOT), **(_fake_slurm(tmp_path) if kind == "slurm-steps" else {})}
    killed = subprocess.run([sys.executable, "-c", code, kind, "kill"], capture_output=True, text=True, env=env,
                            timeout=300, start_new_session=True)
    assert killed.returncode == -9, killed.stderr
    victim = json.loads(mark.read_text())
    before = {t.id: t for t in SQLiteStorage(hist, read_only=True).trials()}
    assert before[victim["trial"]].status is Status.PENDING  # killed before its commit
    assert len([line for line in log.read_text().splitlines()]) == len([t for t in before.values()
                                                                        if t.status.finished]) + 1
    resumed = subprocess.run([sys.executable, "-c", code, kind, "resume"], capture_output=True, text=True, env=env,
                             timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    trials = SQLiteStorage(hist, read_only=True).trials()
    assert len(trials) == 6 and all(t.status.finished for t in trials)
    runs = [json.loads(line) for line in log.read_text().splitlines()]
    keys = sorted(json.dumps(r["params"], sort_keys=True) for r in runs)
    assert keys == sorted(json.dumps(t.params, sort_keys=True) for t in trials)  # each ran once, none lost
    t = next(t for t in trials if t.id == victim["trial"])
    reference = SleepyObjective(str(tmp_path / "ref.jsonl"), median=0.0)(victim["task"], victim["params"])
    assert t.status is Status.COMPLETE and t.value == reference
    assert "committed from" in resumed.stderr and f"trial {t.id} " in resumed.stderr
    assert journal.journals(hist) == {}


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
