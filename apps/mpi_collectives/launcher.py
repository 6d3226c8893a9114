"""Launch the collective microbenchmark under MPI and parse its JSON line.

The job is started with an argument list (never a shell), in its own session so that a timeout
kills mpiexec *and* every rank it started, and with a watcher that kills that session when the
launching process dies (:func:`gptask.evaluation.child.launch`: a ``kill -9`` of the tuner leaves no rank). By default the launcher is the ``mpiexec`` that sits
next to the running Python (the pip ``mpich`` wheel's, the MPI that mpi4py is linked with);
clusters pass a template such as ``["srun", "-n", "{nprocs}", "{python}", "{script}"]`` or
``["{mpiexec}", "-f", "hosts", "-n", "{nprocs}", "{python}", "{script}"]``. Placeholders are
filled by plain string formatting from a fixed dict (``nprocs``, ``mpiexec``, ``python``,
``script``); the benchmark's own arguments are appended after the template.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gptask.evaluation.child import launch
from gptask.evaluation.evaluate import EvaluationFailed

from .algorithms import COLLECTIVES

__all__ = ["LaunchConfig", "LaunchError", "run_benchmark", "BENCH_SCRIPT", "default_mpiexec"]

log = logging.getLogger(__name__)

BENCH_SCRIPT = str(Path(__file__).with_name("bench.py"))
# Ask MPICH to report (instead of silently hiding) a forced algorithm it cannot apply; the
# benchmark counts those reports.
BASE_ENV = {"MPIR_CVAR_COLLECTIVE_FALLBACK": "print"}
# When ranks outnumber cores: call sched_yield on every idle poll of the shared-memory queue
# (MPICH's default waits 1000 polls), so that a waiting rank hands its core to a working one.
OVERSUBSCRIBED_ENV = {"MPIR_CVAR_POSIX_POLL_FREQUENCY": "1"}
_PLACEHOLDERS = ("nprocs", "mpiexec", "python", "script")


class LaunchError(EvaluationFailed, RuntimeError):
    """The benchmark job failed: crash, timeout, unparseable output or an algorithm fallback.

    A :class:`gptask.EvaluationFailed`, so the tuner records ``reason`` as the failure's reason.

    ``reason`` is a one-line explanation; ``pgid`` the process group of the job (already killed).
    """

    def __init__(self, reason: str, pgid: int | None = None, stderr: str = "") -> None:
        super().__init__(reason)
        self.reason = reason
        self.pgid = pgid
        self.stderr = stderr


def default_mpiexec() -> str:
    """The ``mpiexec`` next to ``sys.executable`` (the venv's, from the ``mpich`` wheel)."""
    return str(Path(sys.executable).with_name("mpiexec"))


@dataclass
class LaunchConfig:
    """How to start a benchmark job.

    mpiexec: launcher path (default: the one next to ``sys.executable``).
    python: interpreter run on every rank (default ``sys.executable``).
    template: optional argument list with ``{nprocs}``, ``{mpiexec}``, ``{python}``,
        ``{script}`` placeholders replacing ``mpiexec -n {nprocs} {python} {script}``.
    cores: cores available to the job; more ranks than this turns on yielding (default: the
        number of CPUs this process may run on).
    timeout: seconds before the whole job is killed and the evaluation fails.
    target: approximate seconds of timed iterations per run (see bench.py).
    min_iters, max_iters: bounds on the timed iteration count.
    warm_fraction: warm-up time as a fraction of ``target``.
    max_time: cap (seconds) on the timed phase of very slow configurations.
    stat: ``"min"`` (default) or ``"median"`` of the per-iteration maxima as the reported time.
    allow_fallback: if False (default) a run in which MPICH could not apply the forced
        algorithm raises :class:`LaunchError`; if True its (default-algorithm) time is returned.
    env: extra environment variables for the job.
    cwd: working directory of the job (default: inherited).
    """

    mpiexec: str = field(default_factory=default_mpiexec)
    python: str = field(default_factory=lambda: sys.executable)
    template: Sequence[str] | None = None
    cores: int = field(default_factory=lambda: len(os.sched_getaffinity(0)))
    timeout: float = 60.0
    target: float = 0.25
    min_iters: int = 20
    max_iters: int = 2000
    warm_fraction: float = 0.2
    max_time: float = 2.0
    stat: str = "min"
    allow_fallback: bool = False
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None

    def __post_init__(self) -> None:
        if not (isinstance(self.timeout, (int, float)) and self.timeout > 0):
            raise ValueError(f"LaunchConfig: timeout must be > 0 seconds, got {self.timeout!r}")
        if not (isinstance(self.target, (int, float)) and self.target > 0):
            raise ValueError(f"LaunchConfig: target must be > 0 seconds, got {self.target!r}")
        if not (1 <= self.min_iters <= self.max_iters):
            raise ValueError(f"LaunchConfig: need 1 <= min_iters <= max_iters, got "
                             f"{self.min_iters}, {self.max_iters}")
        if not (self.warm_fraction >= 0 and self.max_time > 0):
            raise ValueError(f"LaunchConfig: need warm_fraction >= 0 and max_time > 0, got "
                             f"{self.warm_fraction!r}, {self.max_time!r}")
        if self.stat not in ("median", "min"):
            raise ValueError(f"LaunchConfig: stat must be 'median' or 'min', got {self.stat!r}")
        if not (isinstance(self.cores, int) and self.cores >= 1):
            raise ValueError(f"LaunchConfig: cores must be a positive integer, got {self.cores!r}")
        if self.template is not None:
            if isinstance(self.template, str) or not all(isinstance(t, str) for t in self.template):
                raise TypeError("LaunchConfig: template must be a list of strings, got "
                                f"{self.template!r}")
            for t in self.template:
                try:
                    t.format(**{k: "" for k in _PLACEHOLDERS})
                except (KeyError, IndexError, ValueError) as exc:
                    raise ValueError(f"LaunchConfig: bad placeholder in template item {t!r}: "
                                     f"only {{{'}, {'.join(_PLACEHOLDERS)}}} are known") from exc

    def command(self, coll: str, size: int, nprocs: int) -> list[str]:
        """The argument list launching the benchmark for one (collective, size, nprocs)."""
        if self.template is None:
            if not Path(self.mpiexec).exists():
                raise FileNotFoundError(
                    f"mpiexec not found at {self.mpiexec}: install the 'mpich' wheel into this "
                    "environment or pass LaunchConfig(mpiexec=...)/template=[...]")
            head = [self.mpiexec, "-n", str(nprocs), self.python, BENCH_SCRIPT]
        else:
            values = {"nprocs": str(nprocs), "mpiexec": self.mpiexec, "python": self.python,
                      "script": BENCH_SCRIPT}
            head = [t.format(**values) for t in self.template]
        return head + [coll, str(size), "--target", repr(float(self.target)),
                       "--min-iters", str(self.min_iters), "--max-iters", str(self.max_iters),
                       "--warm-fraction", repr(float(self.warm_fraction)),
                       "--max-time", repr(float(self.max_time)), "--stat", self.stat]


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def parse_result(stdout: str) -> dict[str, Any]:
    """The last stdout line that is a JSON object with a finite positive ``time``."""
    for line in reversed(stdout.strip().splitlines()):
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError:
            continue
        t = data.get("time") if isinstance(data, dict) else None
        if isinstance(t, (int, float)) and not isinstance(t, bool) and 0 < t < float("inf"):
            return data
    raise ValueError("no JSON line with a positive finite 'time' in the benchmark output")


def run_benchmark(coll: str, size: int, nprocs: int, cvars: Mapping[str, str] | None = None,
                  config: LaunchConfig | None = None) -> dict[str, Any]:
    """Run the benchmark once; return its JSON record (``time`` in seconds, see bench.py).

    ``cvars`` are the MPICH control variables selecting the algorithm (from
    :func:`apps.mpi_collectives.algorithms.cvar_environment`). Raises :class:`LaunchError` on a
    non-zero exit, a timeout, output without a valid JSON line, or (unless
    ``config.allow_fallback``) when MPICH reports it could not apply the forced algorithm.
    """
    if coll not in COLLECTIVES:
        raise ValueError(f"unknown collective {coll!r}; expected one of {list(COLLECTIVES)}")
    for name, v in (("size", size), ("nprocs", nprocs)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be a positive integer, got {v!r}")
    config = config or LaunchConfig()
    argv = config.command(coll, size, nprocs)
    env = dict(os.environ)
    env.update(BASE_ENV)
    if nprocs > config.cores:
        env.update(OVERSUBSCRIBED_ENV)
    env.update(config.env)
    env.update(cvars or {})
    label = f"{coll} size={size} nprocs={nprocs} {dict(cvars or {})}"
    log.debug("launch %s: %s", label, argv)
    # a session of its own (a timeout kills mpiexec and every rank) that dies with this process:
    # the group is killed when the block ends, by an exception or not (stray ranks), and when
    # this process dies however it dies (gptask.evaluation.child.launch's watcher)
    with launch(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True,
                cwd=config.cwd) as proc:
        pgid = proc.pid
        try:
            out, err = proc.communicate(timeout=config.timeout)
        except subprocess.TimeoutExpired:
            _kill_group(pgid)
            out, err = proc.communicate()
            raise LaunchError(f"benchmark {label} timed out after {config.timeout:g} s and was killed",
                              pgid=pgid, stderr=err) from None
    if proc.returncode != 0:
        tail = " | ".join(err.strip().splitlines()[-3:])
        raise LaunchError(f"benchmark {label} exited with status {proc.returncode}: {tail}",
                          pgid=pgid, stderr=err)
    try:
        res = parse_result(out)
    except ValueError as exc:
        raise LaunchError(f"benchmark {label}: {exc}; stdout tail: {out.strip()[-200:]!r}",
                          pgid=pgid, stderr=err) from None
    if res.get("fallbacks", 0) > 0 and not config.allow_fallback:
        raise LaunchError(
            f"MPICH could not apply the forced algorithm for {label} and fell back to its "
            f"default ({res['fallbacks']} reports): the algorithm does not apply to this task",
            pgid=pgid, stderr=err)
    return res
