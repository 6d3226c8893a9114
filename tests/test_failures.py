"""Failed evaluations that speak (issue 27): each failure logged with its task and reason, counted
by reason in ``gptask show``, and a run whose first evaluations all fail for the same reason
stopped with an error naming it (a policy the user can relax), its finished trials kept."""

import logging
import os
import subprocess
import sys
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import gptask as gt
from gptask.data.storage import SQLiteStorage
from gptask.data.trials import Status
from gptask.evaluation.failed_runs import FailureWatch, failure_limit, reason_key, reasons_by_task

sys.path.insert(0, str(Path(__file__).parent))
from problems_for_tests import broken_problem, counting_problem, failing_problem  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests")])}


def gptask(*args, cwd):
    return subprocess.run([sys.executable, "-m", "gptask", *map(str, args)], env=ENV, cwd=cwd, capture_output=True,
                          text=True, timeout=600)


def test_the_default_limit_is_every_task_once_and_up_to_five_more():
    assert [failure_limit("auto", n) for n in (1, 2, 3, 5, 8, 20)] == [3, 4, 6, 10, 13, 25]
    assert failure_limit(7, 8) == 7 and failure_limit(None, 8) is None and failure_limit(0, 8) is None
    for bad in (-1, 1.5, True, "often"):
        with pytest.raises(ValueError, match="max_failures must be"):
            failure_limit(bad, 4)
    with pytest.raises(ValueError, match="max_failures must be"):
        gt.Tuner(counting_problem(), tasks=2, budget=4, max_failures="never")
    # numbers and spacing do not make a different reason
    assert reason_key("timeout after 20.0 s (pid 4242)") == reason_key("timeout after  20.0 s (pid 77)")
    assert reason_key("KeyError: 'nodes'") != reason_key("KeyError: 'cores'")


def test_a_broken_objective_stops_after_the_first_failures_naming_the_reason(tmp_path, caplog):
    path = tmp_path / "h.sqlite"
    caplog.set_level(logging.INFO, logger="gptask.core.progress")
    with pytest.raises(gt.TuningAborted, match=r"the first 13 evaluations all failed with the same reason: "
                                                r"KeyError: 'nodes'") as err:
        gt.tune(broken_problem(), tasks=8, budget=20, history=path)
    assert err.value.count == 13 and err.value.reason == "KeyError: 'nodes'" and str(path) in str(err.value)
    # the finished trials are committed; the trials asked with them are released, pending for a resume
    with SQLiteStorage(path, read_only=True) as h:
        trials = h.trials()
    failed = [t for t in trials if t.status is Status.FAILED]
    assert len(failed) == 13 and all(t.reason == "KeyError: 'nodes'" for t in failed)
    assert all(t.status in (Status.FAILED, Status.PENDING) for t in trials)
    # every failure was logged with its task and reason, and the iteration line counts them by reason
    lines = [r.getMessage() for r in caplog.records if r.name == "gptask.core.progress"]
    fail_lines = [ln for ln in lines if "failed: KeyError: 'nodes'" in ln and ln.startswith("task ")]
    assert len(fail_lines) == 12  # the 13th is in the error itself
    assert fail_lines[0].startswith("task 0 (t=") and "trial 1 failed" in fail_lines[0]
    assert any("(8 failed: KeyError: 'nodes' x8, 0 pending)" in ln for ln in lines)


def test_after_the_fix_the_same_call_resumes_and_keeps_everything(tmp_path):
    path, fixed, log = tmp_path / "h.sqlite", tmp_path / "fixed", tmp_path / "calls.txt"
    problem = broken_problem(fixed=str(fixed), log=str(log))
    with pytest.raises(gt.TuningAborted):
        gt.tune(problem, tasks=2, budget=6, history=path, progress=False)
    assert len(log.read_text().splitlines()) == 4  # 2 tasks + min(2, 5)
    fixed.write_text("")
    result = gt.tune(problem, tasks=2, budget=6, history=path, progress=False)
    assert [len(result.records(i, status=None)) for i in range(2)] == [6, 6]
    assert sum(r["status"] == Status.FAILED for r in result.history) == 4  # kept, not run again
    assert len(log.read_text().splitlines()) == 12  # every configuration ran once


def test_failures_that_do_not_stop_a_run():
    # failures in a region of the space, with several reasons, among successes
    result = gt.tune(failing_problem(), tasks=2, budget=12, n_initial=8, seed=0, progress=False, max_failures=2)
    assert [len(result.records(i, status=None)) for i in range(2)] == [12, 12]
    assert result.history[0]["status"] == Status.FAILED and result.history[1]["status"] == Status.COMPLETE
    # a broken objective with the rule switched off spends its budget, as asked
    for off in (None, 0):
        result = gt.tune(broken_problem(), tasks=2, budget=5, progress=False, max_failures=off)
        assert len(result.history) == 10 and all(r["status"] == Status.FAILED for r in result.history)
    # a failure after a first success does not count, nor does a second reason
    watch = FailureWatch(2)
    trial = gt.tune(counting_problem(), tasks=1, budget=2, progress=False).history[0]
    watch.observe(trial, 1)
    assert not watch.armed

    def failed(k, reason):
        return gt.Trial(id=k, task_index=0, task={"t": 0.5}, params={"x": 0.1 * k}, status=Status.FAILED,
                        reason=reason)

    watch = FailureWatch(2)
    watch.observe(failed(1, "KeyError: 'nodes'"), 1)
    watch.observe(failed(2, "timeout after 20 s"), 1)  # a second reason: no longer one broken objective
    watch.observe(failed(3, "KeyError: 'nodes'"), 1)
    assert not watch.armed
    watch = FailureWatch(2)
    watch.observe(failed(1, "timeout after 20.1 s"), 1)
    with pytest.raises(gt.TuningAborted, match="timeout after 20.1 s"):
        watch.observe(failed(2, "timeout after 20.3 s"), 1)


def test_the_asynchronous_loop_stops_too(tmp_path):
    path = tmp_path / "h.sqlite"
    with ThreadPoolExecutor(2) as pool, pytest.raises(gt.TuningAborted, match="KeyError: 'nodes'"):
        gt.tune(broken_problem(), tasks=2, budget=8, history=path, executor=pool, max_in_flight=2, progress=False)
    with SQLiteStorage(path, read_only=True) as h:
        assert sum(t.status is Status.FAILED for t in h.trials()) == 4


def test_gptask_tune_exits_non_zero_saying_why_and_show_counts_reasons(tmp_path):
    args = ("tune", "--problem", "problems_for_tests:broken_problem", "--problem-options", "default=true",
            "--tasks", "3", "--budget", "6", "--history", "h.sqlite")
    r = gptask(*args, cwd=tmp_path)
    assert r.returncode == 3, r.stderr
    assert "tuning stopped: the first 6 evaluations all failed with the same reason: KeyError: 'nodes'" in r.stderr
    assert "task 0 (t=" in r.stderr and "trial 1 failed: KeyError: 'nodes'" in r.stderr
    show = gptask("show", "h.sqlite", cwd=tmp_path)
    assert show.returncode == 0, show.stderr
    assert "failed evaluations by reason:" in show.stdout
    with SQLiteStorage(tmp_path / "h.sqlite", read_only=True) as h:
        counts = reasons_by_task(h.trials())
    assert sum(sum(c.values()) for c in counts.values()) == 6
    for i, c in counts.items():
        assert f"task {i} (t=" in show.stdout and f"{sum(c.values())} failed: KeyError: 'nodes' ({c[chr(75) + 'eyError: ' + repr('nodes')]})" in show.stdout
    # relaxed: the whole budget runs, and the exit status is 0
    relaxed = gptask(*args[:-1], "h2.sqlite", "--max-failures", "0", "--quiet", cwd=tmp_path)
    assert relaxed.returncode == 0, relaxed.stderr
    assert relaxed.stderr.count("failed: KeyError: 'nodes'") == 18  # still one line per failure when quiet
    assert Counter(t.status for t in SQLiteStorage(tmp_path / "h2.sqlite", read_only=True).trials()) == {
        Status.FAILED: 18}
