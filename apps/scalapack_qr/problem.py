"""The PDGEQRF tuning problem (GPTune paper, sec. 3, Table 1) as a :class:`gptask.Problem`.

Task space: ``m``, ``n`` (matrix rows, columns), integers in ``[128, m_max]`` (on a log scale with
``log_sizes=True``: run-free prediction for new sizes then interpolates log times over log sizes,
where the cost of a factorisation is close to a power law; the shipped models in ``models/`` use it).
Constants: ``nodes``, ``cores`` (cores per node), from the machine unless given.
Parameters:

* ``mb``, ``nb``: row/column block sizes, log-scale integers in ``[1, 256]``. 1 is the unblocked
  limit (legal and slow); beyond 256 a panel is a large fraction of any matrix that fits
  ``m_max`` and the level-2 panel work dominates. Their effect on time is multiplicative
  (halving a block changes the time by a factor), hence the log scale.
* ``nproc``: MPI processes, in ``[1, nodes * cores]``.
* ``p``: process-grid rows, in ``[1, nodes * cores]``; ``q = nproc // p``.
* ``nth``: BLAS threads per process, in ``[1, cores]``.

Constraints (each a named function of the merged dict):
``nproc % p == 0``, ``nproc * nth <= nodes * cores`` (dropped when ``oversubscribe``),
``mb * p <= m``, ``nb * q <= n`` (every process owns at least one block).

Default configuration (``Problem.default``, measured first on every task; results report the gain
over it): what a practitioner would run without tuning, :func:`hand_default`: mb = nb = 64 (smaller
when the matrix is too small for the grid), every core an MPI process on the most nearly square grid
p x q with p <= q, one BLAS thread.

Run-free prediction for new sizes uses :mod:`apps.scalapack_qr.features` (``Problem.features`` and
``Problem.cost_model``): derived block counts and a flops-per-core cost model.

The paper fixes ``nproc * nth == nodes * cores``; we allow ``<=`` so that using fewer cores can
be learnt to be better (e.g. on a loaded machine).

Memory (issue 25): the driver reports the bytes its largest process allocates (``"memory"``,
:mod:`apps.scalapack_qr.memory` computes the same without a run). ``problem(memory_limit=B)``
tunes the time within ``memory <= B`` bytes per process (an output limit: the objective returns
``{"time", "memory"}``); ``problem(memory_objective=True)`` tunes time and memory as two objectives
(a Pareto front per task). Without either the problem is the classic one: the time, one number.

Fidelity (issue 44, docs/fidelity.md): ``problem(size_fractions=[0.25])`` adds the fidelity dimension
``size_fraction`` (an ``Ordinal`` of the given fractions and 1.0, the target): a run at fraction
``f`` factors the ``round(f * m) x round(f * n)`` matrix with the configuration's blocks and grid,
and costs its measured wall time (launch included). The constraints keep speaking of the task's
``m``, ``n``, so every level runs the same configurations (a block larger than a scaled matrix is
legal in ScaLAPACK: one process row or column then owns it all). ``gt.tune(problem, tasks,
cost_budget=SECONDS)`` buys the cheap sizes where they rank configurations like the full one.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Sequence
from typing import Any

import gptask as gt
from gptask.problem.objectives import time_and_memory

from .build import build_driver
from .costmodel import CostModel
from .features import flops_per_core, point_features
from .launcher import DEFAULT_COMMAND, Launcher, LaunchError
from .memory import memory_per_process

__all__ = [
    "problem",
    "RealObjective",
    "ModelObjective",
    "InfeasibleConfiguration",
    "DEFAULT_M_MAX",
    "RESIDUAL_LIMIT",
    "constraints_for",
    "detect_cores",
    "repair",
    "hand_default",
    "HAND_BLOCK",
    "SIZE_FIDELITY",
    "scaled_sizes",
]

log = logging.getLogger(__name__)

#: Largest default matrix: a 2000 x 2000 PDGEQRF takes 0.5-2 s on 2 cores of this machine
#: (2 s for the worst block size 1), so any single run stays within a few seconds.
DEFAULT_M_MAX = 2000
MIN_SIZE = 128
BLOCK_MAX = 256
#: A factorisation whose backward error ||A - QR||_F / (||A||_F max(m,n) eps) exceeds this is
#: rejected (a correct one gives ~1e-2 here; a perturbed one gives > 1e6).
RESIDUAL_LIMIT = 10.0
#: the block size of the hand default (ScaLAPACK users' usual choice)
HAND_BLOCK = 64
#: the name of the fidelity dimension of ``problem(size_fractions=...)``: the matrix size fraction
SIZE_FIDELITY = "size_fraction"
#: the smallest side of a matrix scaled by a size fraction
MIN_SCALED_SIZE = 8


class InfeasibleConfiguration(ValueError):
    """The configuration violates one of the problem's constraints."""


def detect_cores() -> int:
    """Cores usable by this process (respects CPU affinity)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


# --- constraints: plain named functions so error messages and histories can name them ---------

def nproc_divisible_by_p(c: dict) -> bool:
    """nproc % p == 0 (the grid is p x q with q = nproc // p)."""
    return c["nproc"] % c["p"] == 0


def threads_fit_cores(c: dict) -> bool:
    """nproc * nth <= nodes * cores."""
    return c["nproc"] * c["nth"] <= c["nodes"] * c["cores"]


def row_blocks_fit(c: dict) -> bool:
    """mb * p <= m (every process row owns at least one row block)."""
    return c["mb"] * c["p"] <= c["m"]


def col_blocks_fit(c: dict) -> bool:
    """nb * q <= n with q = nproc // p (every process column owns a column block)."""
    return c["nb"] * (c["nproc"] // c["p"]) <= c["n"]


def constraints_for(oversubscribe: bool) -> list:
    rules = [nproc_divisible_by_p, threads_fit_cores, row_blocks_fit, col_blocks_fit]
    if oversubscribe:
        rules.remove(threads_fit_cores)
    return rules


def hand_default(task: dict, nodes: int, cores: int) -> dict:
    """The configuration a practitioner would use for ``task`` without tuning (module docstring):
    ``nproc = nodes * cores`` processes on the p x q grid with the largest p <= sqrt(nproc) dividing
    nproc, ``mb = nb = HAND_BLOCK`` unless a process row/column would own no block (then
    ``m // p``, ``n // q``), one thread."""
    nproc = nodes * cores
    p = max(d for d in range(1, math.isqrt(nproc) + 1) if nproc % d == 0)
    q = nproc // p
    return {"mb": max(1, min(HAND_BLOCK, task["m"] // p)), "nb": max(1, min(HAND_BLOCK, task["n"] // q)),
            "nproc": nproc, "p": p, "nth": 1}


def repair(problem: gt.Problem, task: dict, params: dict) -> dict:
    """The feasible configuration a peer tuner's infeasible proposal is mapped to (benchmarks).

    Tuners without constraint support (OpenTuner, HpBandSter, gp_minimize, random search) propose
    points of the box; each violated rule of ``problem`` is fixed in turn by the smallest change of
    one parameter, in this order: ``p`` becomes the largest divisor of ``nproc`` not above it;
    ``nth`` becomes ``nodes * cores // nproc``; ``mb`` becomes ``m // p``; ``nb`` becomes
    ``n // q``. Rules the problem does not have (``threads_fit_cores`` when oversubscribing) are
    left alone; a feasible configuration is returned unchanged. Raises ``ValueError`` if the
    result is still infeasible (not possible for :func:`problem`'s spaces).
    """
    task = problem.task_space.validate(task, "task")
    c = dict(problem.param_space.validate(params, "params"))
    rules = list(problem.constraints)
    consts = problem.constants

    def violates(rule) -> bool:
        return rule in rules and not rule({**consts, **task, **c})

    if violates(nproc_divisible_by_p):
        c["p"] = max(d for d in range(1, min(c["p"], c["nproc"]) + 1) if c["nproc"] % d == 0)
    if violates(threads_fit_cores):
        c["nth"] = max(1, consts["nodes"] * consts["cores"] // c["nproc"])
    if violates(row_blocks_fit):
        c["mb"] = max(1, task["m"] // c["p"])
    if violates(col_blocks_fit):
        c["nb"] = max(1, task["n"] // (c["nproc"] // c["p"]))
    if not problem.is_feasible(task, c):
        raise ValueError(f"repair: no feasible configuration found from {params} for task {task} "
                         f"(still violates {problem.constraint_names(problem.violated(task, c))})")
    return c


def scaled_sizes(task: dict, fraction: float | None) -> tuple[int, int]:
    """``(m, n)`` of the matrix a run at size fraction ``fraction`` factors (None: the task's own):
    ``round(fraction * m)``, ``round(fraction * n)``, at least :data:`MIN_SCALED_SIZE`."""
    if fraction is None:
        return task["m"], task["n"]
    return (max(MIN_SCALED_SIZE, int(round(fraction * task["m"]))),
            max(MIN_SCALED_SIZE, int(round(fraction * task["n"]))))


def _describe_violations(c: dict, rules: Sequence) -> str:
    bad = []
    for rule in rules:
        try:
            ok = bool(rule(dict(c)))
        except Exception as exc:  # noqa: BLE001 - report, do not crash, on a malformed dict
            ok, why = False, f" ({type(exc).__name__}: {exc})"
        else:
            why = ""
        if not ok:
            bad.append(f"{rule.__name__}: {rule.__doc__.splitlines()[0]}{why}")
    return "; ".join(bad)


class _Objective:
    """Shared argument checks of the real and model objectives."""

    def __init__(self, constants: dict, rules: Sequence, task_space: gt.Space, param_space: gt.Space) -> None:
        self.constants = dict(constants)
        self.rules = list(rules)
        self.task_space = task_space
        self.param_space = param_space

    def _check(self, task: dict, params: dict) -> tuple[dict, dict, tuple[int, int]]:
        """The validated ``(task, params, (m, n))``; ``(m, n)``: the sizes to run, the task's scaled
        by the ``size_fraction`` in ``params`` when there is one (the fidelity of the problem)."""
        params = dict(params)
        fraction = params.pop(SIZE_FIDELITY, None)
        if fraction is not None and (isinstance(fraction, bool) or not isinstance(fraction, (int, float))
                                     or not 0 < fraction <= 1):
            raise ValueError(f"{SIZE_FIDELITY} must be a number in (0, 1], got {fraction!r}")
        task = self.task_space.validate(task, "task")
        params = self.param_space.validate(params, "params")
        merged = {**self.constants, **task, **params}
        why = _describe_violations(merged, self.rules)
        if why:
            raise InfeasibleConfiguration(
                f"infeasible configuration task={task} params={params} "
                f"(nodes={self.constants['nodes']}, cores={self.constants['cores']}): violates {why}"
            )
        return task, params, scaled_sizes(task, fraction)


class RealObjective(_Objective):
    """Runs the real ScaLAPACK PDGEQRF; returns the driver's time in seconds (min over repeats),
    or with ``memory=True`` ``{"time": seconds, "memory": bytes per process}``.

    Raises :class:`InfeasibleConfiguration` (a ``ValueError``) for a configuration outside the
    constraints, :class:`~apps.scalapack_qr.launcher.LaunchError` for a crash, a timeout, bad
    output or a failed residual check.
    """

    def __init__(self, constants, rules, task_space, param_space, launcher: Launcher,
                 repeats: int, timeout: float, check: bool, memory: bool = False) -> None:
        super().__init__(constants, rules, task_space, param_space)
        self.launcher = launcher
        self.repeats = repeats
        self.timeout = timeout
        self.check = check
        self.memory = memory
        self.last_record: dict[str, Any] | None = None

    def run(self, task: dict, params: dict) -> dict[str, Any]:
        """Launch once and return the driver's full JSON record (time, times, residual, ...)."""
        task, params, (m, n) = self._check(task, params)
        p, nproc = params["p"], params["nproc"]
        args = [m, n, params["mb"], params["nb"], p, nproc // p, self.repeats]
        if self.check:
            args.append("--check")
        record = self.launcher.run(build_driver(), args, nproc=nproc, nth=params["nth"],
                                   nodes=self.constants["nodes"], timeout=self.timeout)
        if self.check:
            res = record.get("residual")
            passed = record.get("check_passed", isinstance(res, (int, float)) and 0 <= res <= RESIDUAL_LIMIT)
            if passed is not True or not isinstance(res, (int, float)) or not (0 <= res <= RESIDUAL_LIMIT):
                raise LaunchError(
                    f"residual check failed: ||A - QR||/(||A|| max(m,n) eps) = {res} > {RESIDUAL_LIMIT} "
                    f"for task={task} params={params}: the factorisation is wrong"
                )
        record["nth"] = params["nth"]
        self.last_record = record
        return record

    def __call__(self, task: dict, params: dict) -> Any:
        record = self.run(task, params)
        if self.memory:
            return {"time": float(record["time"]), "memory": float(record["memory"])}
        return float(record["time"])


class ModelObjective(_Objective):
    """The analytic cost MODEL (eq. 18-19, fitted unit times): predicted seconds, no run; with
    ``memory=True`` also the driver's memory per process (:func:`memory_per_process`, ``repeats``
    timings) as ``{"time", "memory"}``."""

    def __init__(self, constants, rules, task_space, param_space, model: CostModel, memory: bool = False,
                 repeats: int = 1) -> None:
        super().__init__(constants, rules, task_space, param_space)
        self.model = model
        self.memory = memory
        self.repeats = repeats

    def __call__(self, task: dict, params: dict) -> Any:
        task, params, (m, n) = self._check(task, params)
        p = params["p"]
        time = self.model.predict(m, n, params["mb"], params["nb"], p,
                                  params["nproc"] // p, params["nth"])
        if not self.memory:
            return time
        mem = memory_per_process(m, n, params["mb"], params["nb"], p, params["nproc"] // p,
                                 self.repeats)
        return {"time": float(time), "memory": float(mem)}


def _positive_int(name: str, v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise ValueError(f"problem(): {name} must be a positive integer, got {v!r}")
    return v


def problem(
    m_max: int = DEFAULT_M_MAX,
    nodes: int = 1,
    cores: int | None = None,
    oversubscribe: bool = False,
    backend: str = "real",
    repeats: int = 2,
    timeout: float = 60.0,
    check: bool = True,
    launcher: Launcher | Sequence[str] | None = None,
    log_sizes: bool = False,
    memory_limit: float | None = None,
    memory_objective: bool = False,
    size_fractions: Sequence[float] | None = None,
) -> gt.Problem:
    """The PDGEQRF tuning problem.

    Parameters
    ----------
    m_max: upper bound of the task dimensions ``m`` and ``n`` (lower bound 128).
    nodes, cores: machine description (constants); ``cores`` defaults to the cores usable here.
    oversubscribe: drop the ``nproc * nth <= nodes * cores`` constraint.
    backend: ``"real"`` runs ScaLAPACK; ``"model"`` evaluates the fitted analytic MODEL (eq. 18-19).
    repeats: timed factorisations per launch (the driver reports their minimum).
    timeout: seconds before a launch is killed and reported as failed.
    check: verify each factorisation's residual (not timed); a wrong result is a failure.
    launcher: a :class:`Launcher` or a command template list (default: Debian MPICH mpiexec).
    log_sizes: put the task dimensions ``m``, ``n`` on a log scale (module docstring).
    memory_limit: bytes per process; the time is tuned within ``memory <= memory_limit`` (module
    docstring). memory_objective: tune time and memory per process as two objectives.
    size_fractions: matrix size fractions in (0, 1) of cheap runs: the problem then has the fidelity
    dimension ``size_fraction`` (these and 1.0, the target; module docstring); None: no fidelity.
    """
    m_max = _positive_int("m_max", m_max)
    if m_max < MIN_SIZE:
        raise ValueError(f"problem(): m_max must be >= {MIN_SIZE}, got {m_max}")
    nodes = _positive_int("nodes", nodes)
    cores = detect_cores() if cores is None else _positive_int("cores", cores)
    repeats = _positive_int("repeats", repeats)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
        raise ValueError(f"problem(): timeout must be a positive number of seconds, got {timeout!r}")
    if backend not in ("real", "model"):
        raise ValueError(f"problem(): backend must be 'real' or 'model', got {backend!r}")
    outputs = time_and_memory(memory_limit, bool(memory_objective))
    if not isinstance(memory_objective, bool):
        raise ValueError(f"problem(): memory_objective must be True or False, got {memory_objective!r}")
    with_memory = memory_limit is not None or memory_objective

    total = nodes * cores
    if not isinstance(log_sizes, bool):
        raise ValueError(f"problem(): log_sizes must be True or False, got {log_sizes!r}")
    task_space = gt.Space([gt.Integer("m", MIN_SIZE, m_max, log=log_sizes),
                           gt.Integer("n", MIN_SIZE, m_max, log=log_sizes)])
    param_space = gt.Space([
        gt.Integer("mb", 1, BLOCK_MAX, log=True),
        gt.Integer("nb", 1, BLOCK_MAX, log=True),
        gt.Integer("nproc", 1, total),
        gt.Integer("p", 1, total),
        gt.Integer("nth", 1, cores),
    ])
    constants = {"nodes": nodes, "cores": cores}
    rules = constraints_for(oversubscribe)
    if backend == "real":
        if launcher is None:
            launcher = Launcher(DEFAULT_COMMAND)
        elif not isinstance(launcher, Launcher):
            launcher = Launcher(launcher)
        objective = RealObjective(constants, rules, task_space, param_space, launcher,
                                  repeats, float(timeout), bool(check), memory=with_memory)
        name = "scalapack_pdgeqrf"
    else:
        objective = ModelObjective(constants, rules, task_space, param_space, CostModel.load(), memory=with_memory,
                                   repeats=repeats)
        name = "scalapack_pdgeqrf_MODEL"
    fidelity = _size_fidelity(size_fractions)
    if fidelity:
        name += "_size_fidelity"
    return gt.Problem(task_space, param_space, objective, constraints=rules,
                      constants=constants, name=name, **fidelity,
                      default=lambda task: hand_default(task, nodes, cores),
                      features=point_features, cost_model=flops_per_core, unit="s", **outputs)


def _size_fidelity(size_fractions: Sequence[float] | None) -> dict[str, Any]:
    """The ``fidelity=``, ``target_fidelity=`` arguments of :func:`problem` for ``size_fractions``
    (``{}`` for None), after checking each fraction is a number in (0, 1)."""
    if size_fractions is None:
        return {}
    if isinstance(size_fractions, (str, bytes)) or not isinstance(size_fractions, Sequence) or not size_fractions:
        raise ValueError(f"problem(): size_fractions must be a non-empty list of fractions in (0, 1), "
                         f"got {size_fractions!r}")
    for f in size_fractions:
        if isinstance(f, bool) or not isinstance(f, (int, float)) or not 0 < f < 1:
            raise ValueError(f"problem(): each of size_fractions must be a number in (0, 1) (1.0, the target, "
                             f"is added), got {f!r}")
    values = sorted({float(f) for f in size_fractions} | {1.0})
    return {"fidelity": gt.Space([gt.Ordinal(SIZE_FIDELITY, values)]), "target_fidelity": {SIZE_FIDELITY: 1.0}}
