"""A tuner that is killed (``kill -9``) or interrupted (SIGTERM, SIGINT) leaves no process of its runs
behind: not the executor's pool workers, not the objectives running in them, not what the objectives
started (a ``sleep``, ``mpiexec`` with its proxy and ranks), and nothing keeps the caller's stdout pipe
open. Checked on real processes: every descendant of the tuner is listed from /proc before the
signal and must be gone afterwards (polled with generous deadlines: the machine may be loaded).

The trials a killed or stopped tuner held are left as the resume needs them, on both backends
(a SQLite file, a PostgreSQL history: the ``backend`` cases); on PostgreSQL the killed tuner's
heartbeat, which other hosts judge it by, stops."""

import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gptask.data.storage import Owner, open_storage
from gptask.data.trials import Status
from processes import like_a_terminal

TESTS = Path(__file__).parent
ROOT = TESTS.parent
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(TESTS)])}
MPIEXEC = Path(sys.executable).with_name("mpiexec")

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")


def _stat(pid: int) -> list[str] | None:
    try:
        data = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return data[data.rindex(")") + 2:].split()


def alive(pid: int) -> bool:
    st = _stat(pid)
    return st is not None and st[0] not in "ZX"


def descendants(pid: int) -> set[int]:
    """Every live process below ``pid`` (children, their children, ...), from /proc."""
    parent: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            st = _stat(int(entry.name))
            if st is not None and st[0] not in "ZX":
                parent[int(entry.name)] = int(st[1])
    found, frontier = set(), {pid}
    while frontier:
        frontier = {p for p, pp in parent.items() if pp in frontier and p not in found}
        found |= frontier
    return found


def wait_gone(pids, seconds: float = 90.0) -> list[int]:
    end = time.monotonic() + seconds
    while time.monotonic() < end and any(alive(p) for p in pids):
        time.sleep(0.1)
    return sorted(p for p in pids if alive(p))


def wait_for(predicate, seconds: float = 120.0, proc: subprocess.Popen | None = None):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        got = predicate()
        if got:
            return got
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"the tuner exited early ({proc.returncode}): {proc.stderr.read().decode()[-2000:]}")
        time.sleep(0.1)
    raise AssertionError("timed out waiting")


def pipe_closes(fd: int, seconds: float = 90.0) -> bool:
    """True once every writer of the pipe ``fd`` has closed it (end of file within ``seconds``)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready and not os.read(fd, 1 << 16):
            return True
    return False


def records(folder: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in folder.glob("*.json")]


def start(cmd: list[str]) -> subprocess.Popen:
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV, start_new_session=True,
                            preexec_fn=like_a_terminal)


def kill_all(proc: subprocess.Popen, pids) -> None:
    """Clean up after a failed check: nothing of this test may outlive it."""
    for p in list(pids) + [proc.pid]:
        try:
            os.kill(p, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.wait()


API_RUN = """
import concurrent.futures as cf, sys
import gptask as gt
from problems_for_tests import spawning_pool_problem
with cf.ProcessPoolExecutor(2) as ex:
    gt.tune(spawning_pool_problem({record!r}), tasks=2, budget=4, n_initial=2, seed=0, history={hist!r},
            progress=False, executor=ex, max_in_flight=2, timeout={timeout}, pso_particles=10, pso_iters=5,
            restarts=1)
"""


def cli_run(record: Path, hist: "Path | str") -> list[str]:
    return [sys.executable, "-m", "gptask", "tune", "--problem", "problems_for_tests:spawning_pool_problem",
            "--problem-options", f"record={record}", "--tasks", "2", "--budget", "4", "--n-initial", "2",
            "--workers", "2", "--history", str(hist), "-q"]


def location(backend: str, tmp_path: Path, request) -> str:
    """Where a fresh history of ``backend`` lives: a file, or a new schema of the tests' PostgreSQL server."""
    if backend == "sqlite":
        return str(tmp_path / "h.sqlite")
    return request.getfixturevalue("pg_server").new_url("orphans")


def heartbeats(url: str) -> dict[int, float]:
    """{pid: last heartbeat (server time, s)} of the holders of the PostgreSQL history ``url``."""
    import psycopg

    from gptask.data.storage.postgres import split_url

    conninfo, schema, _ = split_url(url)
    with psycopg.connect(conninfo, autocommit=True) as conn:
        try:
            return {int(p): float(s) for p, s in conn.execute(f"SELECT pid, seen FROM {schema}.holders")}
        except psycopg.errors.UndefinedTable:
            return {}


def _run_then_kill(tmp_path, cmd: list[str], hist: str) -> None:
    from gptask.data.storage.postgres import HEARTBEAT_S, is_url

    record = tmp_path / "runs"
    record.mkdir()
    proc = start([c.format(record=record, hist=hist) for c in cmd])
    below: set[int] = set()
    try:
        got = wait_for(lambda: len(records(record)) >= 2 and records(record), proc=proc)
        below = descendants(proc.pid)
        ours = {r["pid"] for r in got} | {r["child"] for r in got}
        assert ours <= below and all(alive(p) for p in ours)
        if is_url(hist):  # the tuner's heartbeat goes on while it runs ...
            first = heartbeats(hist)[proc.pid]
            wait_for(lambda: heartbeats(hist)[proc.pid] > first, seconds=10 * HEARTBEAT_S, proc=proc)
        proc.send_signal(signal.SIGKILL)  # the tuner alone, as a node's OOM killer or `kill -9 PID` does
        proc.wait()
        if is_url(hist):  # ... and stops with it: other hosts see it dead once the beat is stale
            last = heartbeats(hist)[proc.pid]
            time.sleep(2.5 * HEARTBEAT_S)
            assert heartbeats(hist)[proc.pid] == last
        assert wait_gone(below) == [], "processes of the killed tuner's runs are still running"
        assert pipe_closes(proc.stdout.fileno()), "something still holds the tuner's stdout pipe"
    finally:
        kill_all(proc, below)
    with open_storage(hist, read_only=True) as s:
        left = s.trials()
    assert len(left) >= 2 and all(t.status is Status.PENDING for t in left)  # the resume takes them over
    assert {Owner.read(t.owner).pid for t in left} == {proc.pid}  # still the dead tuner's


@pytest.mark.parametrize("timeout, backend", [(None, "sqlite"), (600, "sqlite"), (600, "postgres")])
def test_kill_9_of_a_tuner_with_a_process_pool_leaves_nothing_running(tmp_path, request, timeout, backend):
    hist = location(backend, tmp_path, request)
    code = API_RUN.format(record="{record}", hist=hist, timeout=timeout)
    _run_then_kill(tmp_path, [sys.executable, "-c", code], hist)


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_kill_9_of_gptask_tune_workers_leaves_nothing_running(tmp_path, request, backend):
    hist = location(backend, tmp_path, request)
    _run_then_kill(tmp_path, cli_run(Path("{record}"), hist), hist)


@pytest.mark.parametrize("sig, code, workers, backend", [
    (signal.SIGTERM, 143, True, "sqlite"), (signal.SIGINT, 130, True, "sqlite"), (signal.SIGINT, 130, False, "sqlite"),
    (signal.SIGTERM, 143, True, "postgres")])
def test_a_signal_stops_gptask_tune_at_once_and_releases_its_trials(tmp_path, request, sig, code, workers, backend):
    record, hist = tmp_path / "runs", location(backend, tmp_path, request)
    record.mkdir()
    cmd = cli_run(record, hist)
    if not workers:
        cmd = cmd[:cmd.index("--workers")] + cmd[cmd.index("--workers") + 2:]
    proc = start(cmd)
    below: set[int] = set()
    try:
        wait_for(lambda: len(records(record)) >= (2 if workers else 1), proc=proc)
        below = descendants(proc.pid)
        if sig == signal.SIGINT:  # Ctrl-C on a terminal: to the whole foreground group, pool workers included
            os.killpg(proc.pid, sig)
        else:  # a batch system's SIGTERM to the tuner
            proc.send_signal(sig)
        # the objectives sleep 300 s: returning well before that means they were stopped, not waited for
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == code, err.decode()
        assert "Traceback" not in err.decode(), err.decode()
        assert wait_gone(below) == []
    finally:
        kill_all(proc, below)
    with open_storage(hist, read_only=True) as s:
        left = s.trials()
    assert left and all(t.status is Status.PENDING and t.owner is None for t in left)
    assert f"gptask: {'stopped by SIGTERM' if sig == signal.SIGTERM else 'interrupted (Ctrl-C)'}" in err.decode()


HUNG_LAUNCH = """
import sys
from apps.mpi_collectives.launcher import LaunchConfig, run_benchmark
hang = "from mpi4py import MPI; import time; c = MPI.COMM_WORLD; time.sleep(600) if c.rank == 0 else c.Barrier()"
run_benchmark("allreduce", 64, 2, {}, LaunchConfig(template=["{mpiexec}", "-n", "{nprocs}", "{python}", "-c", hang],
                                                   timeout=600))
"""


@pytest.mark.mpi
@pytest.mark.skipif(not MPIEXEC.exists(), reason="no mpiexec next to this python")
def test_kill_9_of_a_process_running_an_mpi_benchmark_takes_mpiexec_and_its_ranks(tmp_path):
    proc = start([sys.executable, "-c", HUNG_LAUNCH])
    below: set[int] = set()
    try:
        # mpiexec, its proxy and 2 ranks (python) below the launching process
        below = wait_for(lambda: d if len(d := descendants(proc.pid)) >= 4 else None, proc=proc)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert wait_gone(below) == [], "mpiexec or its ranks outlived the process that launched them"
    finally:
        kill_all(proc, below)


CRASH_RUN = """
import json, os, signal, sys
from pathlib import Path
import gptask as gt
first = Path({marker!r})


def f(task, p):
    # the first configuration ever run kills the process running it, every time (a segfault, the OOM killer)
    if not first.exists():
        first.write_text(json.dumps(p, sort_keys=True))
    if json.loads(first.read_text()) == dict(p):
        os.kill(os.getpid(), signal.SIGKILL)
    return (p["x"] - task["t"]) ** 2


problem = gt.Problem(gt.Space([gt.Real("t", 0, 1)]), gt.Space([gt.Real("x", 0, 1)]), f)
gt.tune(problem, tasks=[{{"t": 0.3}}], budget=4, n_initial=2, seed=0, history={hist!r}, progress=False,
        pso_particles=10, pso_iters=5, restarts=1)
"""


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_an_evaluation_that_kills_its_tuner_is_failed_after_max_attempts_not_rerun_on_every_resume(tmp_path, request,
                                                                                                   backend):
    """Without timeout= an evaluation runs in the tuner's process: one that kills it was re-run by every
    resume with no cap (issue 27 audit). The resume after MAX_ATTEMPTS deaths records it as failed and
    finishes the budget."""
    from gptask.data.storage.base import MAX_ATTEMPTS

    hist, marker = location(backend, tmp_path, request), tmp_path / "first.json"
    code = CRASH_RUN.format(marker=str(marker), hist=hist)
    codes = [subprocess.run([sys.executable, "-c", code], env=ENV, capture_output=True, text=True, timeout=300)
             for _ in range(MAX_ATTEMPTS + 1)]
    assert [c.returncode for c in codes] == [-signal.SIGKILL] * MAX_ATTEMPTS + [0], codes[-1].stderr
    with open_storage(hist, read_only=True) as s:
        trials = s.trials()
    crashed = trials[0]
    assert crashed.status is Status.FAILED and crashed.attempts == MAX_ATTEMPTS
    assert dict(crashed.params) == json.loads(marker.read_text())
    assert f"handed out {MAX_ATTEMPTS} times" in crashed.reason and "not run again" in crashed.reason
    assert len(trials) == 4 and all(t.status is Status.COMPLETE for t in trials[1:])
    assert "not run again" in codes[-1].stderr  # the resume says why it gave the trial up
