"""The asynchronous loop on real executors: a process pool, MPI (MPIPoolExecutor under mpiexec), a
Dask cluster; a run killed with its workers and resumed; failures, timeouts and pruning as in the
serial loop."""

import concurrent.futures as cf
import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import gptask as gt
from gptask.evaluation.noise import Pruner, StaticResampling
from gptask.data.storage import NotAHistory, SQLiteStorage
from gptask.data.trials import Status
from gptask.evaluation.journal import journals

TESTS = Path(__file__).parent
ROOT = TESTS.parent
sys.path.insert(0, str(TESTS))
from problems_for_tests import (SleepyObjective, counting_problem, dying_problem, sleepy_problem,  # noqa: E402
                                worker_killing_problem)

FAST = dict(pso_particles=10, pso_iters=5, restarts=1)


def calls(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def _group_members(pgid: int) -> list[int]:
    """Live (not zombie) processes of process group ``pgid``, from /proc."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            out.append(int(stat.parent.name))
    return out


def group_gone(pgid: int, seconds: float = 60.0) -> None:
    """Wait until no live process of process group ``pgid`` is left."""
    end = time.monotonic() + seconds
    while _group_members(pgid) and time.monotonic() < end:
        time.sleep(0.05)
    assert not _group_members(pgid), f"process group {pgid} is still alive {seconds} s after SIGKILL"


def key(d) -> str:
    return json.dumps(dict(d), sort_keys=True)


def check_run(res, n_tasks: int, budget: int, log: Path) -> list[dict]:
    """Every trial told once, the budget exact, no configuration twice, every run logged once
    (except those killed at their timeout, which never log)."""
    assert not res.pending and len(res.history) == n_tasks * budget
    for i in range(n_tasks):
        mine = res.records(i, status=None)
        assert len(mine) == budget and len({key(r["params"]) for r in mine}) == budget
    ran = calls(log)
    assert sorted((key(c["task"]), key(c["params"])) for c in ran) == sorted(
        (key(r["task"]), key(r["params"])) for r in res.history if not r.reason.startswith("timeout"))
    return ran


def overlapped(ran: list[dict]) -> int:
    """The largest number of runs in progress at one instant."""
    events = sorted([(c["start"], 1) for c in ran] + [(c["end"], -1) for c in ran])
    now = most = 0
    for _, step in events:
        now += step
        most = max(most, now)
    return most


def test_a_process_pool_keeps_three_trials_running(tmp_path):
    log = tmp_path / "calls.jsonl"
    prob = sleepy_problem(str(log), slow=5.0)
    with cf.ProcessPoolExecutor(3) as ex:
        res = gt.tune(prob, tasks=2, budget=9, n_initial=4, seed=0, history=tmp_path / "h.sqlite", progress=False,
                      executor=ex, max_in_flight=3, timeout=1.0, **FAST)
    ran = check_run(res, 2, 9, log)
    assert len({c["pid"] for c in ran}) >= 2 and overlapped(ran) >= 2
    assert os.getpid() not in {c["pid"] for c in ran}
    # failures as in the serial loop: the objective's exception, the timeout
    serial = gt.Evaluator(SleepyObjective(str(tmp_path / "ref.jsonl"), median=0.0))
    for r in res.history:
        if r["params"]["x"] > 0.92 and r["params"]["k"] != 8:
            assert r.status is Status.FAILED and r.reason == "RuntimeError: solver diverged"
        elif r["params"]["k"] == 8:
            assert r.status is Status.FAILED and r.reason == "timeout after 1 s"
        else:
            assert r.status is Status.COMPLETE and r.value == serial(r.task, r.params).value
    # the model holds every complete run, and of the failed ones those the failure model does not
    # explain (issue 25; which ones it explains: tests/test_failure_model.py)
    complete = [len(res.records(i)) for i in range(2)]
    assert res.model is not None and all(c <= n <= 9 for c, n in zip(complete, res.model.n_points))


def test_noise_policy_and_pruner_on_workers_decide_as_the_serial_evaluator(tmp_path):
    log = tmp_path / "calls.jsonl"
    noise, pruner = StaticResampling(k=3), Pruner(fixed=1.2)
    with cf.ProcessPoolExecutor(2) as ex:
        res = gt.tune(sleepy_problem(str(log), median=0.01), tasks=2, budget=6, n_initial=4, seed=1,
                      progress=False, executor=ex, max_in_flight=2, noise=noise, pruner=pruner, **FAST)
    assert len(res.history) == 12
    reference = gt.Evaluator(SleepyObjective(str(tmp_path / "ref.jsonl"), median=0.01), noise=StaticResampling(k=3),
                             pruner=Pruner(fixed=1.2))
    for r in res.history:
        ref = reference(r.task, r.params)
        assert (r.status, r.value, r.samples, r.reason) == (ref.status, ref.value, ref.samples, ref.reason)
    assert any(r.status is Status.CENSORED and r.reason.startswith("pruned") for r in res.history)


_KILLED_RUN = """
import sys, concurrent.futures as cf
sys.path.insert(0, {tests!r})
import gptask as gt
from problems_for_tests import sleepy_problem
with cf.ProcessPoolExecutor(3) as ex:
    gt.tune(sleepy_problem({log!r}, median=0.1), tasks=2, budget=8, n_initial=4, seed=0, history={hist!r},
            progress=False, executor=ex, max_in_flight=3, pso_particles=10, pso_iters=5, restarts=1)
"""


def test_a_run_killed_with_its_workers_resumes_to_the_same_records(tmp_path):
    log, hist = tmp_path / "calls.jsonl", tmp_path / "h.sqlite"
    code = _KILLED_RUN.format(tests=str(TESTS), log=str(log), hist=str(hist))
    proc = subprocess.Popen([sys.executable, "-c", code], start_new_session=True, stderr=subprocess.PIPE,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    deadline = time.monotonic() + 180
    finished: list = []
    running: list = []
    # kill with runs in flight: at least 7 finished and one pending (on a loaded machine the tuner
    # may be between a result and its next proposal, fitting, when the 7th finishes)
    while time.monotonic() < deadline and (len(finished) < 7 or not running):
        time.sleep(0.1)
        assert proc.poll() is None, proc.stderr.read().decode()
        try:  # the file appears before its schema is written: an empty file is "not yet a history"
            trials = SQLiteStorage(hist, read_only=True).trials()
        except (FileNotFoundError, NotAHistory):
            continue
        finished = [t for t in trials if t.status.finished]
        running = [t for t in trials if not t.status.finished]
    os.killpg(proc.pid, signal.SIGKILL)  # the tuner and its pool's workers: a node failure
    proc.wait()
    group_gone(proc.pid)  # a worker may finish a write between the kill and its death: count after
    before = SQLiteStorage(hist, read_only=True).trials()
    done_before = [t for t in before if t.status.finished]
    pending_before = [t for t in before if not t.status.finished]
    assert len(done_before) >= 7 and len(done_before) < 16 and pending_before
    # runs that had ended and were waiting for the tuner's commit are journalled beside the history
    # (gptask/evaluation/journal.py): the resume commits them instead of running them again
    journalled = set(journals(hist))
    assert journalled <= {t.id for t in pending_before}
    n_calls = len(calls(log))
    with cf.ProcessPoolExecutor(3) as ex:
        res = gt.tune(sleepy_problem(str(log), median=0.1), tasks=2, budget=8, n_initial=4, seed=0, history=hist,
                      progress=False, executor=ex, max_in_flight=3, **FAST)
    assert not res.pending and len(res.history) == 16
    after = {t.id: t for t in res.history}
    assert all(after[t.id] == t for t in done_before)  # kept as they were, none run again
    for t in pending_before:  # re-proposed as they were, run once more
        assert after[t.id].params == t.params and after[t.id].attempts == t.attempts + 1
    for i in range(2):
        assert len({key(r["params"]) for r in res.records(i, status=None)}) == 8
    # the resumed run evaluated exactly the trials that were neither finished nor journalled
    assert len(calls(log)) - n_calls == 16 - len(done_before) - len(journalled)
    assert journals(hist) == {}


def test_max_time_on_an_executor_stops_forked_runs_and_leaves_them_pending(tmp_path):
    log, hist = tmp_path / "calls.jsonl", tmp_path / "h.sqlite"
    kw = dict(tasks=2, budget=5, n_initial=3, seed=0, history=hist, progress=False, timeout=60, **FAST)
    t0 = time.monotonic()
    with cf.ProcessPoolExecutor(2) as ex:  # every run takes 5 s: none can finish within max_time
        res = gt.tune(sleepy_problem(str(log), median=5.0, sigma=0.0), executor=ex, max_in_flight=2, max_time=1.0, **kw)
    assert time.monotonic() - t0 < 30  # the forked runs were stopped at max_time, not waited for
    assert res.history == [] and len(res.pending) == 2 and all(t.owner is None for t in res.pending)
    with cf.ProcessPoolExecutor(2) as ex:
        rest = gt.tune(sleepy_problem(str(log), median=0.01), executor=ex, max_in_flight=2, **kw)
    assert len(rest.history) == 10 and not rest.pending
    assert {t.id for t in res.pending} <= {t.id for t in rest.history}


def test_a_worker_that_dies_stops_the_run_and_a_crashing_objective_is_a_failed_trial(tmp_path):
    from gptask.tuning.asynchronous import ExecutorFailed

    hist = tmp_path / "h.sqlite"
    kw = dict(tasks=2, budget=6, n_initial=4, seed=0, history=hist, progress=False, max_in_flight=2, **FAST)
    with cf.ProcessPoolExecutor(2) as ex:
        with pytest.raises(ExecutorFailed, match=r"could not run trial \d+ .*BrokenProcessPool"):
            gt.tune(worker_killing_problem(), executor=ex, **kw)
    left = [t for t in SQLiteStorage(hist, read_only=True).trials() if not t.status.finished]
    assert left and all(t.owner is None for t in left)  # released: the next run takes them at once
    for timeout in (None, 60):  # a pool's worker runs each run in a child process: a crash is the trial's failure
        hist = tmp_path / f"h{timeout}.sqlite"
        with cf.ProcessPoolExecutor(2) as ex:
            res = gt.tune(dying_problem(), executor=ex, timeout=timeout, **{**kw, "history": hist})
        assert len(res.history) == 12 and not res.pending
        for r in res.history:
            died = r.params["x"] > 0.8
            assert (r.status is Status.FAILED) == died and (not died or "objective process died" in r.reason)


def test_executor_arguments_are_checked():
    prob = counting_problem()  # its objective is a closure: it does not pickle
    with cf.ProcessPoolExecutor(1) as ex:
        with pytest.raises(TypeError, match="define it at module level"):
            gt.tune(prob, tasks=1, budget=2, progress=False, executor=ex, max_in_flight=1)
        with pytest.raises(ValueError, match="max_in_flight must be an integer"):
            gt.tune(prob, tasks=1, budget=2, progress=False, executor=ex)
    with pytest.raises(ValueError, match="max_in_flight needs an executor"):
        gt.tune(prob, tasks=1, budget=2, progress=False, max_in_flight=2)
    with pytest.raises(TypeError, match="concurrent.futures.Executor"):
        gt.tune(prob, tasks=1, budget=2, progress=False, executor="pool", max_in_flight=2)


@pytest.mark.mpi
def test_mpi_pool_executor_under_mpiexec(tmp_path):
    from test_mpi import mpiexec

    out = tmp_path / "out.json"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "GPTASK_TEST_LOG": str(tmp_path / "calls.jsonl")}
    r = subprocess.run([mpiexec(), "-n", "3", sys.executable, "-m", "mpi4py.futures",
                        str(TESTS / "mpi_scripts" / "async_run.py"), str(out)],
                       capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    got = json.loads(out.read_text())
    ran = calls(tmp_path / "calls.jsonl")
    assert got["n_trials"] == 12 and got["statuses"] == ["complete"] * 12 and got["distinct"] == [6, 6]
    assert len(ran) == 12 and got["pid"] not in {c["pid"] for c in ran}  # rank 0 tunes, the others evaluate
    assert len({c["pid"] for c in ran}) == 2


def test_dask_local_cluster(tmp_path, monkeypatch):
    distributed = pytest.importorskip("distributed")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), str(TESTS)]))  # the workers import the objective
    log = tmp_path / "calls.jsonl"
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
    with cluster, distributed.Client(cluster) as client:
        res = gt.tune(sleepy_problem(str(log)), tasks=2, budget=6, n_initial=3, seed=0, progress=False,
                      executor=client.get_executor(), max_in_flight=2, **FAST)
    ran = check_run(res, 2, 6, log)
    assert os.getpid() not in {c["pid"] for c in ran}


# ---- TLA2 on the same engine ------------------------------------------------------------------------


def test_tla2_on_a_process_pool_with_a_noise_policy(tmp_path):
    from transfer_helpers import make_result

    log = tmp_path / "calls.jsonl"
    res = make_result(counting_problem(), [{"t": 0.1}, {"t": 0.5}, {"t": 0.9}], 5, seed=3)
    res = dataclasses.replace(res, problem=sleepy_problem(str(log), median=0.02))  # the same problem, picklable
    with cf.ProcessPoolExecutor(2) as ex:
        new = gt.tune_new_task(res, {"t": 0.3}, budget=7, n_initial=2, seed=0, history=tmp_path / "h.sqlite",
                               executor=ex, max_in_flight=2, noise=StaticResampling(k=2), pso_particles=10,
                               pso_iters=5)
    mine = new.records(new.task_index, status=None)
    assert len(mine) == 7 and not new.pending and len({key(r["params"]) for r in mine}) == 7
    assert all(len(r.samples) == 2 or r.status is Status.FAILED for r in mine)
    runs = sum(1 if r.status is Status.FAILED else 2 for r in mine)  # a failing sample ends its evaluation
    assert len(calls(log)) == runs and os.getpid() not in {c["pid"] for c in calls(log)}
    assert new.updates[0]["kind"] == "extend" and {u["kind"] for u in new.updates[1:]} <= {"append"}
    assert new.model.n_tasks == 4 and list(new.model.n_points) == [5, 5, 5, 7]


def test_tla2_adds_its_task_to_the_mla_history_and_leaves_the_run_alone(tmp_path):
    hist = tmp_path / "h.sqlite"
    prob = counting_problem()
    res = gt.tune(prob, tasks=[{"t": 0.1}, {"t": 0.5}, {"t": 0.9}], budget=5, n_initial=4, seed=4, history=hist,
                  progress=False, **FAST)
    with SQLiteStorage(hist, read_only=True) as h:
        meta = (h.get_meta("seed"), h.get_meta("settings"), h.get_meta("use_log"), len(h.models()))
    new = gt.tune_new_task(res, {"t": 0.3}, budget=4, n_initial=2, seed=9, history=hist, pso_particles=10, pso_iters=5)
    with SQLiteStorage(hist, read_only=True) as h:
        assert (h.get_meta("seed"), h.get_meta("settings"), h.get_meta("use_log"), len(h.models())) == meta
        assert len(h.tasks()) == 4 and len(h.trials(task_index=3)) == 4
        assert [t for t in h.trials() if t.task_index < 3] == list(res.history)  # untouched
    assert [r.id for r in new.records(3, status=None)] == [t.id for t in SQLiteStorage(hist).trials(task_index=3)]
    again = gt.tune_new_task(res, {"t": 0.3}, budget=6, n_initial=2, seed=9, history=hist, pso_particles=10,
                             pso_iters=5)  # resumes: two more runs
    assert [r.id for r in again.records(3, status=None)][:4] == [r.id for r in new.records(3, status=None)]
    assert len(again.records(3, status=None)) == 6


@pytest.mark.mpi
def test_tla2_under_mpiexec_writes_from_rank_0_and_matches_the_serial_run(tmp_path):
    from test_mpi import mpiexec

    script = str(TESTS / "mpi_scripts" / "tla2_run.py")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    r = subprocess.run([sys.executable, script, str(tmp_path / "serial.json"), "serial"], capture_output=True,
                       text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    r = subprocess.run([mpiexec(), "-n", "2", sys.executable, script, str(tmp_path / "mpi.json"), "mpi"],
                       capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    serial = json.loads((tmp_path / "serial.rank0.json").read_text())
    ranks = [json.loads((tmp_path / f"mpi.rank{k}.json").read_text()) for k in (0, 1)]
    assert ranks[0] == ranks[1] == serial and serial["kinds"] == ["extend", "append", "append", "refit", "append"]
    assert len(SQLiteStorage(tmp_path / "mpi.sqlite", read_only=True).trials(task_index=3)) == 6


@pytest.mark.mpi
def test_the_docs_mpi_pool_example_runs_under_mpiexec(tmp_path):
    from test_mpi import mpiexec

    text = (ROOT / "docs" / "executors.md").read_text()
    block = text.split("<!-- mpi-pool-example -->", 1)[1].split("<!-- /mpi-pool-example -->", 1)[0]
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "tune_pool.py").write_text(block.split("```python", 1)[1].split("```", 1)[0])
    r = subprocess.run([mpiexec(), "-n", "3", sys.executable, "-m", "mpi4py.futures", "out/tune_pool.py"], cwd=tmp_path,
                       capture_output=True, text=True, timeout=300,
                       env={**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stderr[-3000:]
    trials = SQLiteStorage(tmp_path / "out" / "mpi_pool.sqlite", read_only=True).trials()
    assert len(trials) == 24 and all(t.status is Status.COMPLETE for t in trials)
