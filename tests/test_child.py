"""Objective processes run in their own process group and never outlive their evaluation or the
tuner (checked on real processes through /proc and signals)."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gptask.evaluation.child import ChildDied, ChildTimeout, run_in_process_group
from gptask.evaluation.evaluate import Evaluator

ROOT = Path(__file__).resolve().parents[1]


def alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] not in "ZX"


def wait_gone(pids, seconds=10.0) -> list[int]:
    end = time.time() + seconds
    while time.time() < end and any(alive(p) for p in pids):
        time.sleep(0.05)
    return [p for p in pids if alive(p)]


def spawning_objective(record: Path, sleep: float):
    """An objective that starts a long `sleep` of its own, records both pids and its process
    group, then sleeps ``sleep`` seconds and returns 1.0."""

    def f(task, params):
        child = subprocess.Popen(["sleep", "300"])
        tmp = record.with_suffix(".tmp")
        tmp.write_text(json.dumps({"pid": os.getpid(), "child": child.pid, "pgid": os.getpgid(0)}))
        os.replace(tmp, record)
        time.sleep(sleep)
        return 1.0

    return f


def test_work_runs_in_its_own_group_and_leaves_nothing_behind(tmp_path):
    record = tmp_path / "pids.json"
    assert Evaluator(spawning_objective(record, 0.0), timeout=30)({}, {}).value == 1.0
    got = json.loads(record.read_text())
    assert got["pgid"] != os.getpgid(0) and got["pid"] != os.getpid()
    assert wait_gone([got["pid"], got["child"]]) == []


def test_timeout_kills_the_objective_and_what_it_started(tmp_path):
    record = tmp_path / "pids.json"
    out = Evaluator(spawning_objective(record, 60.0), timeout=1.0)({}, {})
    assert out.status == "failed" and "timeout after 1 s" in out.reason
    got = json.loads(record.read_text())
    assert wait_gone([got["pid"], got["child"]]) == []


def test_results_errors_and_deaths_come_back():
    assert run_in_process_group(lambda: {"value": [1.0] * 50_000}, limit=30)["value"][-1] == 1.0  # > a pipe buffer
    assert "ZeroDivisionError" in run_in_process_group(lambda: {"v": 1 / 0})["error"]
    with pytest.raises(ChildDied):
        run_in_process_group(lambda: os._exit(3))
    with pytest.raises(ChildTimeout):
        run_in_process_group(lambda: time.sleep(30) or {}, limit=0.3)


EVALUATING = """
import json, os, subprocess, sys, time
sys.path.insert(0, {tests!r})
from gptask.evaluation.evaluate import Evaluator
from test_child import spawning_objective
from pathlib import Path
Evaluator(spawning_objective(Path(sys.argv[1]), 300.0), timeout=600)({{}}, {{}})
"""


def test_a_killed_evaluating_process_takes_its_objective_group_with_it(tmp_path):
    record = tmp_path / "pids.json"
    proc = subprocess.Popen([sys.executable, "-c", EVALUATING.format(tests=str(ROOT / "tests")), str(record)],
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    end = time.time() + 60
    while not record.exists() and time.time() < end:
        time.sleep(0.05)
    got = json.loads(record.read_text())
    assert alive(got["pid"]) and alive(got["child"])
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert wait_gone([got["pid"], got["child"]]) == []


def test_a_run_stops_when_its_guard_stop_file_goes_and_not_before(tmp_path):
    from gptask.evaluation.child import guarded_runs

    record = tmp_path / "pids.json"
    with guarded_runs() as guard:
        assert guard.holds() and guard.is_here() and not guard.is_ancestor()
        stop = Path(guard.stop)

        def work():
            spawning_objective(record, 300.0)({}, {})
            return {}

        import threading

        def remove_when_running():
            end = time.time() + 60
            while not record.exists() and time.time() < end:
                time.sleep(0.05)
            stop.unlink()  # what the tuner's interruption does

        threading.Thread(target=remove_when_running, daemon=True).start()
        with pytest.raises(ChildDied):
            run_in_process_group(work, limit=None, guard=guard)
    assert not stop.exists() and not guard.holds()
    got = json.loads(record.read_text())
    assert wait_gone([got["pid"], got["child"]]) == []


HOLDING = """
import sys, time
from gptask.evaluation.child import guarded_runs
with guarded_runs() as guard:
    print(guard.stop, flush=True)
    time.sleep(300)
"""


def test_a_killed_tuners_stop_file_is_removed_by_the_next_tuner_and_nothing_else_is(tmp_path, monkeypatch):
    """A tuner killed by SIGKILL leaves its stop file (it cannot remove it); the next guarded block on the host
    removes it, and leaves a live tuner's file, another host's, an empty one and one that is not an owner's."""
    import socket
    import tempfile

    from gptask.evaluation.child import guarded_runs

    env = dict(os.environ, TMPDIR=str(tmp_path))

    def holding() -> tuple[subprocess.Popen, Path]:
        proc = subprocess.Popen([sys.executable, "-c", HOLDING], stdout=subprocess.PIPE, text=True, env=env,
                                cwd=Path(__file__).parent)
        return proc, Path(proc.stdout.readline().strip())

    alive, live = holding()
    try:
        killed, dead = holding()
        assert dead.parent == tmp_path and live.exists() and dead.exists()
        killed.send_signal(signal.SIGKILL)  # it cannot remove its own file
        killed.wait()
        assert dead.exists()
        owner = json.loads(dead.read_text())
        elsewhere = tmp_path / "gptask-runs-elsewhere.stop"
        elsewhere.write_text(json.dumps(dict(owner, host=socket.gethostname() + "-other")))
        empty = tmp_path / "gptask-runs-empty.stop"
        empty.write_text("")
        garbled = tmp_path / "gptask-runs-garbled.stop"
        garbled.write_text("not an owner")
        monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
        with guarded_runs() as guard:
            assert not dead.exists()
            assert live.exists() and elsewhere.exists() and empty.exists() and garbled.exists()
            assert Path(guard.stop).exists() and guard.holds()
        assert not Path(guard.stop).exists() and live.exists()
    finally:
        alive.kill()
        alive.wait()


LAUNCHING = """
import sys, time
from gptask.evaluation.child import launch
with launch(["sh", "-c", "sleep 300 & sleep 300 & echo started; wait"], stdout=open(sys.argv[1], "w")):
    time.sleep(300)
"""


def test_a_launched_session_dies_with_the_process_that_launched_it(tmp_path):
    started = tmp_path / "started"
    proc = subprocess.Popen([sys.executable, "-c", LAUNCHING, str(started)], env={**os.environ, "PYTHONPATH": str(ROOT)})
    end = time.time() + 60
    while not (started.exists() and started.read_text()) and time.time() < end:
        time.sleep(0.05)
    # the launched shell leads a session of its own: find its group's members through /proc
    members = [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit() and _session_of(int(p.name)) is not None
               and _session_of(int(p.name)) != os.getsid(0) and _parent_chain_has(int(p.name), proc.pid)]
    try:
        assert len(members) >= 3  # sh and its two sleeps
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert wait_gone(members, 60) == []
    finally:
        for p in members:
            if alive(p):
                os.kill(p, signal.SIGKILL)


def test_launch_kills_strays_when_its_block_ends():
    from gptask.evaluation.child import launch

    with launch(["sh", "-c", "sleep 300 & echo $!"], stdout=subprocess.PIPE, text=True) as proc:
        stray = int(proc.stdout.readline())
        proc.wait()  # the launcher exited; its background sleep did not
        assert alive(stray)
    assert wait_gone([stray]) == []


def _session_of(pid: int) -> int | None:
    try:
        return os.getsid(pid)
    except OSError:
        return None


def _parent_chain_has(pid: int, ancestor: int) -> bool:
    for _ in range(32):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return False
        pid = int(stat[stat.rindex(")") + 2:].split()[1])
        if pid == ancestor:
            return True
        if pid <= 1:
            return False
    return False
