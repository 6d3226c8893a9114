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


def costed_problem() -> gt.Problem:
    """:func:`counting_problem` whose every run costs 1 (a user cost model: ``run_cost``)."""
    base = counting_problem()
    return gt.Problem(base.task_space, base.param_space, base.objective, name="costed", run_cost=lambda point: 1.0)


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


def blocks_truth(task: dict, p: dict) -> float:
    """A positive "run time" with a task-dependent optimum in nb and x (blocks_problem's objective)."""
    best_nb = 4 + task["m"] / 50
    return (task["m"] / 100) * (1 + (math.log(p["nb"]) - math.log(best_nb)) ** 2 + (p["x"] - 0.3) ** 2
                                + (0.2 if p["alg"] == "b" else 0.0))


def blocks_fit(c: dict) -> bool:
    return c["nb"] <= c["m"]


#: blocks_problem's default configuration with default=True
BLOCKS_DEFAULT = {"nb": 8, "alg": "a", "x": 0.5}


def blocks_problem(default=None) -> gt.Problem:
    """Task m; parameters nb (log integer), alg (categorical with an integer choice), x; one
    constraint, one constant. default: None, True (BLOCKS_DEFAULT), a dict or a function task -> dict."""
    tasks = gt.Space([gt.Integer("m", 10, 1000)])
    params = gt.Space([gt.Integer("nb", 1, 256, log=True), gt.Categorical("alg", ["a", "b", 1]),
                       gt.Real("x", 0.0, 1.0)])
    return gt.Problem(tasks, params, blocks_truth, constraints=[blocks_fit], constants={"cores": 4}, name="blocks",
                      default=BLOCKS_DEFAULT if default is True else default)


class SleepyObjective:
    """The counting problem's objective for executor tests, picklable (a module-level class): each
    call sleeps a log-normal time (median ``median`` s, log-std ``sigma``, at most 10 medians),
    appends one JSON line (pid, start, end, task, params) to ``log`` and fails for x > 0.92
    (RuntimeError); with ``slow`` set, k == 8 sleeps that long instead (a run for ``timeout=`` to stop)."""

    def __init__(self, log: str, median: float = 0.05, slow: float = 0.0, sigma: float = 1.0) -> None:
        self.log, self.median, self.slow, self.sigma = log, median, slow, sigma

    def __call__(self, task, p):
        import json
        import random

        start = time.time()
        pause = self.median * min(10.0, random.lognormvariate(0.0, self.sigma))
        time.sleep(self.slow if self.slow and p["k"] == 8 else pause)
        with open(self.log, "a") as fh:
            fh.write(json.dumps({"pid": os.getpid(), "start": start, "end": time.time(), "task": task,
                                 "params": p}) + "\n")
        if p["x"] > 0.92:
            raise RuntimeError("solver diverged")
        return 1.0 + (p["x"] - task["t"]) ** 2 + 0.05 * (p["k"] - 4) ** 2


def sleepy_problem(log: str = "", median: float = 0.05, slow: float = 0.0, sigma: float = 1.0) -> gt.Problem:
    """The counting problem with a :class:`SleepyObjective` (for executors)."""
    base = counting_problem()
    return gt.Problem(base.task_space, base.param_space, SleepyObjective(log, median, slow, sigma), name="counting")


class DyingObjective:
    """The counting problem's objective, except that the process running it dies (``os._exit``) for
    x > 0.8: a crash no exception handler sees (picklable, for executor tests)."""

    def __call__(self, task, p):
        if p["x"] > 0.8:
            os._exit(3)
        return 1.0 + (p["x"] - task["t"]) ** 2 + 0.05 * (p["k"] - 4) ** 2


def dying_problem() -> gt.Problem:
    base = counting_problem()
    return gt.Problem(base.task_space, base.param_space, DyingObjective(), name="counting")


class BrokenObjective:
    """Raises ``KeyError: 'nodes'`` on every call (a launcher reading a missing setting), unless the
    file ``fixed`` exists; every call appends a line to ``log`` when given."""

    def __init__(self, fixed: str = "", log: str = "") -> None:
        self.fixed, self.log = fixed, log

    def __call__(self, task, p):
        if self.log:
            with open(self.log, "a") as fh:
                fh.write(f"{task['t']!r} {p['x']!r}\n")
        if self.fixed and os.path.exists(self.fixed):
            return 1.0 + (p["x"] - task["t"]) ** 2
        settings = {"cores": 4}
        return float(settings["nodes"])


def broken_problem(fixed: str = "", log: str = "", default: bool = False) -> gt.Problem:
    """A 1-parameter problem whose objective is :class:`BrokenObjective`, in seconds."""
    tasks = gt.Space([gt.Real("t", 0.0, 1.0)])
    params = gt.Space([gt.Real("x", 0.0, 1.0)])
    return gt.Problem(tasks, params, BrokenObjective(fixed, log), name="broken", unit="s",
                      default={"x": 0.5} if default else None)


def sized_problem(x_max: float = 1.0, cores: int = 4) -> gt.Problem:
    """A 1-task-dimension quadratic whose parameter range and constant come from its options (a
    problem built by a factory with options, as the apps' are)."""
    tasks = gt.Space([gt.Real("t", 0.0, 1.0)])
    params = gt.Space([gt.Real("x", 0.0, float(x_max))])
    return gt.Problem(tasks, params, lambda task, p: 1.0 + (p["x"] - task["t"]) ** 2, constants={"cores": int(cores)},
                      name="sized")


class WorkerKillingObjective(DyingObjective):
    """For x > 0.8, kills the executor's worker process running it (the child of the process that
    made this objective, found through /proc): an executor failure, not the objective's."""

    def __init__(self) -> None:
        self.tuner = os.getpid()

    def __call__(self, task, p):
        if p["x"] > 0.8:
            pid = os.getpid()
            while True:
                with open(f"/proc/{pid}/stat") as fh:
                    stat = fh.read()
                parent = int(stat[stat.rindex(")") + 2:].split()[1])
                if parent in (self.tuner, 0, 1):
                    break
                pid = parent
            os.kill(pid, 9)
        return super().__call__(task, p)


def worker_killing_problem() -> gt.Problem:
    base = counting_problem()
    return gt.Problem(base.task_space, base.param_space, WorkerKillingObjective(), name="counting")


class SpawningObjective:
    """Starts a ``sleep 300`` of its own, writes ``{"pid", "child"}`` to ``<record>/<pid>.json``, then
    sleeps ``sleep`` seconds and returns: picklable (a module-level class), for executor workers, to
    watch what outlives the tuner."""

    def __init__(self, record: str, sleep: float = 300.0) -> None:
        self.record, self.sleep = record, sleep

    def __call__(self, task, p):
        import json
        import subprocess

        child = subprocess.Popen(["sleep", "300"])
        path = os.path.join(self.record, f"{os.getpid()}.json")
        with open(path + ".tmp", "w") as fh:
            json.dump({"pid": os.getpid(), "child": child.pid}, fh)
        os.replace(path + ".tmp", path)
        time.sleep(self.sleep)
        return 1.0 + p["x"]


def spawning_pool_problem(record: str = ".", sleep: float = 300.0) -> gt.Problem:
    """:func:`spawning_problem` with a picklable :class:`SpawningObjective` (executors, ``--workers``)."""
    tasks = gt.Space([gt.Real("t", 0.0, 1.0)])
    params = gt.Space([gt.Real("x", 0.0, 1.0)])
    return gt.Problem(tasks, params, SpawningObjective(record, sleep), name="spawning")


#: categorical choices that need quoting in ``k=v`` text: a comma, an equals sign, quotes, padding,
#: a tab, text that reads as a number or a boolean
AWKWARD_CHOICES = ["a,b", "x=y", 'say "hi"', " pad ", "tab\there", "12", "true", "-O3", "plain"]


def awkward_choices_problem() -> gt.Problem:
    """One categorical parameter with :data:`AWKWARD_CHOICES` and a task of the same kind."""
    tasks = gt.Space([gt.Categorical("machine", ["node,07", "plain"])])
    params = gt.Space([gt.Categorical("alg", AWKWARD_CHOICES), gt.Integer("n", 1, 4)])
    return gt.Problem(tasks, params, lambda task, p: 1.0 + AWKWARD_CHOICES.index(p["alg"]) + p["n"], name="awkward")


def time_memory_problem() -> gt.Problem:
    """Two minimised objectives, time (seconds) and memory (bytes): time is least at x = t, memory
    grows with x (a front between x = 0 and x = t)."""
    def objective(task: dict, p: dict) -> dict:
        return {"time": 1.0 + (p["x"] - task["t"]) ** 2, "memory": 1e8 * (1.0 + p["x"])}

    return gt.Problem(gt.Space([gt.Real("t", 0.2, 0.8)]), gt.Space([gt.Real("x", 0.0, 1.0)]), objective,
                      objectives={"time": "min", "memory": "min"}, name="time_memory")


def awkward_names_problem() -> gt.Problem:
    """Dimension names holding a tab, a comma, an equals sign and a space (issue 40: ``gptask ask``'s
    tab-separated lines broke on them)."""
    tasks = gt.Space([gt.Categorical("node,rack", ["a", "b"])])
    params = gt.Space([gt.Integer("blocks\tper=row", 1, 4), gt.Categorical("alg name", ["x", "y"])])
    return gt.Problem(tasks, params, lambda task, p: 1.0 + p["blocks\tper=row"] + (p["alg name"] == "y"),
                      name="awkward-names")


def capped_bowl(task: dict, p: dict) -> float:
    """One optimum at (3, 4, 2) for every task (they settle on it and stall), a little higher for a larger cap."""
    return 1.0 + (p["x"] - 3) ** 2 / 16 + (p["y"] - 4) ** 2 / 16 + (p["z"] - 2) ** 2 / 16 + 0.01 * task["cap"]


def capped_problem(name: str = "probe-capped") -> gt.Problem:
    """A listed bowl (x, y, z in 0-7) where each task allows its own configurations (x + y + z <= cap): the
    tasks' domains differ in size and order, as PDGEQRF's do (the process grid and blocks must fit the matrix)."""
    return gt.Problem(gt.Space([gt.Integer("cap", 0, 30)]),
                      gt.Space([gt.Ordinal(n, list(range(8))) for n in ("x", "y", "z")]), capped_bowl, name=name,
                      constraints=["x + y + z <= cap"])


def fidelity_value(task: dict, p: dict) -> float:
    """:func:`fidelity_problem`'s objective: minimum ``0.01 (1 + 10 / iterations)`` at ``x = 0.3 n``
    (fewer iterations scale the bowl up)."""
    return ((p["x"] - 0.3 * task["n"]) ** 2 + 0.01) * (1.0 + 10.0 / p["iterations"])


def fidelity_problem(priced: bool = True) -> gt.Problem:
    """A bowl per task ``n`` in 1..3 with an iterations fidelity (10 to 1000, target 1000) that only
    scales it; priced: a run costs ``iterations / 1000`` seconds (``run_cost``), else its wall time
    (:func:`unpriced_fidelity_problem`)."""
    return gt.Problem(gt.Space([gt.Integer("n", 1, 3)]), gt.Space([gt.Real("x", 0.0, 1.0)]), fidelity_value,
                      name="fidelity-bowl", fidelity=gt.Space([gt.Integer("iterations", 10, 1000, log=True)]),
                      target_fidelity={"iterations": 1000},
                      run_cost=(lambda point: point["iterations"] / 1000.0) if priced else None)


def unpriced_fidelity_problem() -> gt.Problem:
    """:func:`fidelity_problem` whose runs cost their wall time (no ``run_cost``)."""
    return fidelity_problem(priced=False)
