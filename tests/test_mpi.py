"""MLA under ``mpiexec -n 2`` (the pip ``mpich`` wheel): same results as serial, errors end the job."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.mpi

SCRIPTS = Path(__file__).parent / "mpi_scripts"


def mpiexec() -> str:
    exe = Path(sys.executable).with_name("mpiexec")
    if exe.exists():
        return str(exe)
    found = shutil.which("mpiexec")
    if not found:
        pytest.skip("no mpiexec next to the interpreter or on PATH")
    return found


def run(args, timeout=300):
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout, env=env)


@pytest.fixture(scope="module")
def serial(tmp_path_factory):
    out = tmp_path_factory.mktemp("serial") / "serial.json"
    r = run([sys.executable, str(SCRIPTS / "tune_run.py"), str(out), "serial"])
    assert r.returncode == 0, r.stderr
    return json.loads(out.read_text())


@pytest.mark.parametrize("evals", ["root", "parallel"])
def test_two_ranks_give_the_serial_model_and_proposals(serial, tmp_path, evals):
    out = tmp_path / "mpi.json"
    r = run([mpiexec(), "-n", "2", sys.executable, str(SCRIPTS / "tune_run.py"), str(out), "mpi", evals])
    assert r.returncode == 0, r.stderr
    got = json.loads(out.read_text())
    assert got["proposals"] == serial["proposals"]
    assert got["model"] == serial["model"]
    rank1 = json.loads(out.with_suffix(".rank1.json").read_text())
    assert rank1 == serial["proposals"]  # statuses included: nothing told on rank 0 alone is missed


def test_every_rank_reads_what_rank_0_told_alone(tmp_path):
    """Ranks read the history incrementally; results rank 0 told alone inside a collective step
    (parallel evaluations) reach every rank at the next read, as a full read of the history has them."""
    prefix = str(tmp_path / "mirror")
    r = run([mpiexec(), "-n", "2", sys.executable, str(SCRIPTS / "mirror_run.py"), prefix])
    assert r.returncode == 0, r.stderr
    rank0, rank1 = (json.loads(Path(f"{prefix}.rank{k}.json").read_text()) for k in (0, 1))
    assert len(rank0) >= 3 and rank1 == rank0
    assert rank0[-1] == json.loads(Path(prefix + ".stored.json").read_text())
    assert len(rank0[-1]) == 12 and all(status == "complete" for _, status, _ in rank0[-1])


def test_failing_objective_on_one_rank_is_recorded_not_hung(tmp_path):
    out = tmp_path / "fail.json"
    r = run([mpiexec(), "-n", "2", sys.executable, str(SCRIPTS / "tune_run.py"), str(out), "mpi", "parallel", "1"])
    assert r.returncode == 0, r.stderr
    got = json.loads(out.read_text())
    failed = [p for p in got["proposals"] if p[2] == "failed"]
    assert failed and all("node failure on rank 1" in p[3] for p in failed)
    assert len(got["proposals"]) == 21


@pytest.mark.parametrize("how", ["raise", "exit"])
def test_a_rank_that_dies_or_raises_ends_the_job(how):
    r = run([mpiexec(), "-n", "2", sys.executable, str(SCRIPTS / "crash_run.py"), how], timeout=240)
    assert r.returncode != 0
    if how == "raise":
        assert "operator interrupt on rank 1" in r.stderr


def test_a_dying_rank_loses_none_of_rank_0s_finished_evaluations(tmp_path):
    from gptask.data.storage import SQLiteStorage
    from gptask.data.trials import Status

    sys.path.insert(0, str(Path(__file__).parent))
    import gptask as gt
    from problems_for_tests import counting_problem

    hist = tmp_path / "h.sqlite"
    r = run([mpiexec(), "-n", "2", sys.executable, str(SCRIPTS / "crash_run.py"), "exit", str(hist)], timeout=240)
    assert r.returncode != 0
    trials = SQLiteStorage(hist).trials()
    # the first batch: one trial per task, task 0's on rank 0 (told at once), task 1's on rank 1 (died once rank 0's
    # was committed: crash_run.py waits for it, so that the death does not race rank 0's own run)
    assert [(t.task_index, t.status) for t in trials] == [(0, Status.COMPLETE), (1, Status.PENDING)]
    res = gt.tune(counting_problem(), tasks=2, budget=5, n_initial=3, seed=0, history=hist, progress=False)
    assert len(res.history) == 10 and res.history[0] == trials[0]  # kept, not run again
    assert res.history[1].id == trials[1].id and res.history[1].attempts == 2


def test_a_cautious_run_on_two_ranks_steers_and_proposes_what_a_serial_one_does(tmp_path):
    runs = {}
    for mode in ("serial", "mpi"):
        out = tmp_path / f"{mode}.json"
        args = [sys.executable, str(SCRIPTS / "cautious_run.py"), str(out), mode]
        r = run([mpiexec(), "-n", "2", *args] if mode == "mpi" else args)
        assert r.returncode == 0, r.stderr
        runs[mode] = json.loads(out.read_text())
    assert runs["mpi"] == runs["serial"]
    assert any(status == "failed" for _, _, status, _ in runs["serial"])


def test_a_result_finished_on_rank_1_and_killed_before_rank_0s_commit_is_committed_on_the_resume(tmp_path, caplog):
    """parallel_evaluations under MPI: rank 1 finished its run and the job was killed (SIGKILL of
    rank 0, once rank 1's result file is in the journal: journal_run.py) before rank 0 committed it.
    Rank 1 journalled it before handing it over, so the resume commits it from the history's journal
    folder and does not run it again: each configuration ran once (the objective's own log), the
    committed value is the objective's. Before, ranks other than 0 journalled nothing and the run
    was lost and ran again on the resume."""
    from gptask.data.storage import SQLiteStorage
    from gptask.data.trials import Status
    from gptask.evaluation import journal

    sys.path.insert(0, str(Path(__file__).parent))
    import gptask as gt
    from problems_for_tests import counting_problem

    hist, calls, mark = tmp_path / "h.sqlite", tmp_path / "calls.txt", tmp_path / "killed.json"
    r = run([mpiexec(), "-n", "2", sys.executable, str(SCRIPTS / "journal_run.py"), str(hist), str(calls), str(mark)],
            timeout=240)
    assert r.returncode != 0
    before = SQLiteStorage(hist).trials()
    assert [(t.task_index, t.status) for t in before] == [(0, Status.PENDING), (1, Status.PENDING)]
    ran = before[1]  # rank 1's; rank 0 died before running its own (no line in the log)
    assert calls.read_text().splitlines() == [f"{ran.task['t']!r} {ran.params['x']!r} {ran.params['k']!r}"]

    with caplog.at_level("WARNING"):
        res = gt.tune(counting_problem(str(calls)), tasks=2, budget=3, n_initial=3, seed=0, history=hist,
                      progress=False)
    trials = SQLiteStorage(hist).trials()
    assert len(res.history) == 6 and all(t.status is Status.COMPLETE for t in trials)
    lines = calls.read_text().splitlines()
    assert sorted(lines) == sorted(f"{t.task['t']!r} {t.params['x']!r} {t.params['k']!r}" for t in trials)
    assert len(set(lines)) == 6  # each configuration ran exactly once, rank 1's too
    got = next(t for t in trials if t.id == ran.id)
    assert got.value == counting_problem().objective(ran.task, ran.params)
    assert f"trial {ran.id} " in caplog.text and "committed from" in caplog.text
    assert journal.journals(hist) == {} and not journal.journal_dir(hist).exists()
    assert json.loads(mark.read_text()) == [ran.id]  # rank 1's file was there when the job was killed


def test_two_ranks_probe_stalled_tasks_as_one_does(tmp_path):
    # a listed campaign whose tasks stall: the local probe's round (the offers other tasks made, "never two
    # probes in a row") must not depend on which rank searched which task
    got = {}
    for mode in ("serial", "mpi"):
        out = tmp_path / f"{mode}.json"
        cmd = [sys.executable, str(SCRIPTS / "probe_run.py"), str(out), mode]
        r = run(cmd if mode == "serial" else [mpiexec(), "-n", "2", *cmd])
        assert r.returncode == 0, r.stderr
        got[mode] = json.loads(out.read_text())
    assert len(got["serial"]) == 4 * 14
    assert got["mpi"] == got["serial"]
