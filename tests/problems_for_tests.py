"""Small problems used by the tests (importable as ``problems_for_tests:NAME`` from the CLI)."""

import math
import os
import time

import gptask as gt


def counting_problem(log: str = "", sleep: float = 0.0) -> gt.Problem:
    """A cheap 2-parameter quadratic per task; every call appends one line to ``log``."""
    tasks = gt.Space([gt.Real("t", 0.0, 1.0)])
    params = gt.Space([gt.Real("x", 0.0, 1.0), gt.Integer("k", 1, 8)])

    def f(task, p):
        if log:
            with open(log, "a") as fh:
                fh.write(f"{task['t']!r} {p['x']!r} {p['k']!r}\n")
                fh.flush()
                os.fsync(fh.fileno())
        if sleep:
            time.sleep(sleep)
        return 1.0 + (p["x"] - task["t"]) ** 2 + 0.05 * (p["k"] - 4) ** 2

    return gt.Problem(tasks, params, f, name="counting")


def failing_problem() -> gt.Problem:
    """Fails in three ways in three regions of x; smooth elsewhere (minimum near x = 0.3)."""
    tasks = gt.Space([gt.Real("t", 0.0, 1.0)])
    params = gt.Space([gt.Real("x", 0.0, 1.0)])

    def f(task, p):
        x = p["x"]
        if x > 0.85:
            raise RuntimeError("solver diverged")
        if 0.6 < x < 0.7:
            return float("nan")
        if 0.7 <= x <= 0.75:
            return math.inf
        return 2.0 + (x - 0.3 - 0.1 * task["t"]) ** 2

    return gt.Problem(tasks, params, f, name="failing")


def penalty_problem() -> gt.Problem:
    """Returns the "penalty" 1e308 for x > 0.8 (as users do for a crashed run), else a smooth bowl
    whose values straddle 0 (so no log transform applies)."""
    tasks = gt.Space([gt.Real("t", 0.0, 1.0)])
    params = gt.Space([gt.Real("x", 0.0, 1.0)])

    def f(task, p):
        if p["x"] > 0.8:
            return 1e308
        return (p["x"] - 0.3 - 0.1 * task["t"]) ** 2 - 0.01

    return gt.Problem(tasks, params, f, name="penalty")


def tiny_discrete_problem() -> gt.Problem:
    """Four configurations per task (k in 1..4): fewer than a usual budget."""
    tasks = gt.Space([gt.Real("t", 0.0, 1.0)])
    params = gt.Space([gt.Integer("k", 1, 4)])
    return gt.Problem(tasks, params, lambda task, p: 1.0 + (p["k"] - 1 - 2 * task["t"]) ** 2, name="tiny")


def spawning_problem(record: str = "", sleep: float = 300.0) -> gt.Problem:
    """An objective that starts a `sleep 300` of its own, writes its pid, its child's pid and its
    process group to ``record`` (JSON), then sleeps ``sleep`` seconds: to watch what outlives whom."""
    import json
    import subprocess

    tasks = gt.Space([gt.Real("t", 0.0, 1.0)])
    params = gt.Space([gt.Real("x", 0.0, 1.0)])

    def f(task, p):
        child = subprocess.Popen(["sleep", "300"])
        tmp = record + ".tmp"
        with open(tmp, "w") as fh:
            json.dump({"pid": os.getpid(), "child": child.pid, "pgid": os.getpgid(0)}, fh)
        os.replace(tmp, record)
        time.sleep(sleep)
        return 1.0 + p["x"]

    return gt.Problem(tasks, params, f, name="spawning")
