"""Several real processes on one history: `gptask tune` commands side by side, one killed with
SIGKILL, tuners stopped by signals while their objective runs. Checked against the history file,
a log the objective appends to on every call (the independent count of runs), and /proc."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gptask.data.storage import Owner, open_storage
from gptask.data.trials import Status
from processes import like_a_terminal
from test_child import alive, wait_gone

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests")])}
pytestmark = pytest.mark.slow


def tune_cmd(hist: Path | str, problem: str, options: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "gptask", "tune", "--problem", problem, "--problem-options", options,
            "--history", str(hist), "--quiet", *extra]


def counting_cmd(hist: Path | str, log: Path) -> list[str]:
    return tune_cmd(hist, "problems_for_tests:counting_problem", f"log={log},sleep=0.2", "--tasks", "2",
                    "--budget", "8", "--n-initial", "4", "--seed", "5")


def runs(log: Path) -> list[tuple]:
    """Every objective call, as (t, x, k)."""
    return [tuple(line.split()) for line in log.read_text().splitlines()] if log.exists() else []


def start(cmd: list[str], cwd: Path) -> subprocess.Popen:
    return subprocess.Popen(cmd, env=ENV, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=like_a_terminal)


def test_three_tune_commands_on_one_history_run_each_configuration_once(tmp_path, history_location):
    hist, log = history_location, tmp_path / "calls.txt"
    procs = [start(counting_cmd(hist, log), tmp_path) for _ in range(3)]
    outs = [p.communicate(timeout=600) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1][-2000:] for o in outs]
    trials = open_storage(hist).trials()
    assert len(trials) == 16 and all(t.status is Status.COMPLETE for t in trials)
    assert [sum(t.task_index == i for t in trials) for i in (0, 1)] == [8, 8]
    assert len({(t.task_index, t.params["x"], t.params["k"]) for t in trials}) == 16
    calls = runs(log)
    assert len(calls) == 16 and len(set(calls)) == 16  # each configuration ran exactly once
    assert len({Owner.from_text(t.owner).pid for t in trials}) >= 2  # the work was shared
    assert all("best" in o[0] for o in outs)  # each process ends with the whole run's table


def test_a_process_killed_mid_run_loses_nothing_and_the_others_finish_its_work(tmp_path, history_location):
    hist, log = history_location, tmp_path / "calls.txt"
    procs = [start(counting_cmd(hist, log), tmp_path) for _ in range(3)]
    end = time.time() + 300
    while len(runs(log)) < 6 and time.time() < end:
        time.sleep(0.05)
    procs[0].send_signal(signal.SIGKILL)
    procs[0].wait()
    victim = procs[0].pid
    held = [t for t in open_storage(hist).trials(status=Status.PENDING) if Owner.from_text(t.owner).pid == victim]
    for p in procs[1:]:
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0, err[-2000:]
    trials = open_storage(hist).trials()
    assert len(trials) == 16 and all(t.status is Status.COMPLETE for t in trials)
    assert len({(t.task_index, t.params["x"], t.params["k"]) for t in trials}) == 16
    calls = runs(log)
    assert 16 <= len(calls) <= 17  # at most the run the killed process had in flight ran twice
    by_id = {t.id: t for t in trials}
    assert all(by_id[t.id].attempts >= 2 and by_id[t.id].params == t.params for t in held)
    # a resume afterwards finds the run complete and runs nothing
    r = subprocess.run(counting_cmd(hist, log), env=ENV, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and len(runs(log)) == len(calls), r.stderr[-2000:]


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM, signal.SIGINT])
def test_no_objective_outlives_a_stopped_tuner_and_its_trial_is_rerun(tmp_path, sig, history_location):
    hist, record = history_location, tmp_path / "pids.json"
    cmd = tune_cmd(hist, "problems_for_tests:spawning_problem", f"record={record}", "--tasks", "1", "--budget", "2",
                   "--n-initial", "2", "--timeout", "600")
    proc = start(cmd, tmp_path)
    end = time.time() + 120
    while not record.exists() and time.time() < end:
        time.sleep(0.05)
    got = json.loads(record.read_text())
    assert alive(got["pid"]) and alive(got["child"])
    assert got["pgid"] not in (os.getpgid(proc.pid), os.getpgid(0))  # its own process group
    proc.send_signal(sig)
    proc.communicate(timeout=60)
    assert wait_gone([got["pid"], got["child"]]) == []
    assert proc.returncode == {signal.SIGKILL: -9, signal.SIGTERM: 143, signal.SIGINT: proc.returncode}[sig] != 0
    in_flight, = open_storage(hist).trials()  # one task: one trial per iteration
    assert in_flight.status is Status.PENDING
    assert (in_flight.owner is None) == (sig != signal.SIGKILL)  # stopped cleanly: given back at once
    record.unlink()
    r = subprocess.run(tune_cmd(hist, "problems_for_tests:spawning_problem", f"record={record},sleep=0", "--tasks",
                                "1", "--budget", "2", "--n-initial", "2", "--timeout", "600"),
                       env=ENV, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    trials = open_storage(hist).trials()
    assert len(trials) == 2 and all(t.status is Status.COMPLETE for t in trials)
    assert trials[0].id == in_flight.id and trials[0].params == in_flight.params and trials[0].attempts == 2
