"""The tuning problems: ``problem(accelerator="sro"|"sbb", backend="real"|"model", ...)``.

Task space: workload features (see ``workload.py``); parameter space: the accelerator's knobs.

Small-read prefetcher ("sro"), sizes in bytes:

=================  ===================  =========  =================================================
parameter          range                default    note
=================  ===================  =========  =================================================
binsize            64 KiB - 16 MiB log  1 MiB      thesis default 10 MB on 100 GB files, scaled
cluster_threshold  1 - 128 log          2          thesis default
prefetch_size      256 KiB - 128 MiB    16 MiB     thesis default 200 MB, scaled;
                   log                             constraint: prefetch_size <= cache_mb MiB
sequence_length    8 - 4096 log         100        thesis default
=================  ===================  =========  =================================================

The cache budget ``cache_mb`` (64 MiB) is a problem constant. The defaults of both tables
(:data:`DEFAULTS`) are the problem's default configuration: measured first on every task, and results
report the gain over it.

Burst buffer ("sbb"):

=================  ===================  =========  =================================================
workers            1 - 16 log           10         thesis default (Table 2.3)
destagers          1 - 16 log           10         thesis default (RAM destagers)
buffer_mb          16 - 256 MiB log     256        the largest buffer, as the thesis's default
threshold          0.1 - 1.0            0.8        fraction of the buffer that starts destaging
=================  ===================  =========  =================================================

Constraint: ``workers + destagers <= max_threads`` (24, a problem constant: the data node's thread
budget, as the thesis limited the data node to 8 cores).

The objective returns seconds (minimised): the run time of the read workload for "sro", the
application's I/O time (until every operation is acknowledged) for "sbb". With
``problem(memory_limit=B)`` (bytes) or ``problem(memory_objective=True)`` it returns
``{"time": seconds, "memory": bytes}`` instead, ``memory`` being the cache memory the accelerator
used: the peak bytes held by the prefetcher's page cache ("sro"), the peak bytes held by the burst
buffer ("sbb"); measured by the real run, replayed or estimated by the cost model (the model's
burst-buffer peak: the writes up to the destaging threshold, then the surplus of ingest over
destaging up to the capacity). The time is then tuned within ``memory <= B``, or time and memory
as two objectives. With
``backend="model"`` it returns the cost model's prediction instead (``model.py``), and the problem's
name says "model". The objective also accepts ``deadline=`` (seconds, see ``gptask.evaluation.noise``) and
keeps the counters of its last call in ``objective.last``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Any

import gptask as gt
from gptask.problem.objectives import time_and_memory

from .files import default_workdir
from .model import DiskModel, sbb_model, sro_model
from .runner import run_sbb, run_sro
from .workload import MIB, NAMED_TASKS, Workload, complete_features, generate

log = logging.getLogger(__name__)

__all__ = ["problem", "task_space", "param_space", "DEFAULTS", "CONSTANTS", "named_task", "IOObjective",
           "accelerator_of", "MAX_OPS"]

KIB = 1024
MAX_OPS = 32768  # any sampled task runs at most this many operations

_SRO_TASKS = gt.Space([
    gt.Integer("file_mb", 128, 1024, log=True),
    gt.Integer("n_leads", 1, 256, log=True),
    gt.Integer("scatter_kb", 64, 16384, log=True),
    gt.Integer("lead_advance_kb", 0, 4096),
    gt.Integer("ops_per_lead", 1, 1000, log=True),
    gt.Integer("op_kb", 4, 64, log=True),
    gt.Categorical("random_scatter", [0, 1]),
    gt.Categorical("sequential", [0, 1]),
    gt.Integer("volume_mb", 8, 64, log=True),
    gt.Integer("threads", 1, 4),
])
_SBB_TASKS = gt.Space([
    gt.Integer("file_mb", 128, 512, log=True),
    gt.Integer("n_leads", 1, 64, log=True),
    gt.Integer("scatter_kb", 64, 65536, log=True),
    gt.Integer("ops_per_lead", 1, 256, log=True),
    gt.Integer("op_kb", 4, 1024, log=True),
    gt.Categorical("sequential", [0, 1]),
    gt.Real("read_fraction", 0.0, 0.9),
    gt.Integer("volume_mb", 16, 512, log=True),
    gt.Integer("threads", 1, 8, log=True),
])
_SRO_PARAMS = gt.Space([
    gt.Integer("binsize", 64 * KIB, 16 * MIB, log=True),
    gt.Integer("cluster_threshold", 1, 128, log=True),
    gt.Integer("prefetch_size", 256 * KIB, 128 * MIB, log=True),
    gt.Integer("sequence_length", 8, 4096, log=True),
])
_SBB_PARAMS = gt.Space([
    gt.Integer("workers", 1, 16, log=True),
    gt.Integer("destagers", 1, 16, log=True),
    gt.Integer("buffer_mb", 16, 256, log=True),
    gt.Real("threshold", 0.1, 1.0),
])

DEFAULTS: dict[str, dict[str, Any]] = {
    "sro": {"binsize": 1 * MIB, "cluster_threshold": 2, "prefetch_size": 16 * MIB, "sequence_length": 100},
    "sbb": {"workers": 10, "destagers": 10, "buffer_mb": 256, "threshold": 0.8},
}
CONSTANTS: dict[str, dict[str, Any]] = {"sro": {"cache_mb": 64}, "sbb": {"max_threads": 24}}


def _check_acc(accelerator: str) -> str:
    if accelerator not in ("sro", "sbb"):
        raise ValueError(f"accelerator must be 'sro' or 'sbb', got {accelerator!r}")
    return accelerator


def task_space(accelerator: str) -> gt.Space:
    return _SRO_TASKS if _check_acc(accelerator) == "sro" else _SBB_TASKS


def param_space(accelerator: str) -> gt.Space:
    return _SRO_PARAMS if _check_acc(accelerator) == "sro" else _SBB_PARAMS


def accelerator_of(task_name: str) -> str:
    """"sro" for SRO.* named tasks, "sbb" for SBB.*."""
    if task_name not in NAMED_TASKS:
        raise ValueError(f"unknown named task {task_name!r}; known: {sorted(NAMED_TASKS)}")
    return task_name.split(".")[0].lower()


def named_task(name: str) -> dict[str, Any]:
    """A named task as a point of its accelerator's task space."""
    space = task_space(accelerator_of(name))
    return space.validate({k: NAMED_TASKS[name][k] for k in space.names})


def _prefetch_fits(c: Mapping[str, Any]) -> bool:
    return c["prefetch_size"] <= c["cache_mb"] * MIB


def _thread_budget(c: Mapping[str, Any]) -> bool:
    return c["workers"] + c["destagers"] <= c["max_threads"]


class IOObjective:
    """``f(task, params, deadline=None) -> seconds`` for one accelerator and backend.

    Generated workloads are kept per task (a task is regenerated identically anyway). ``last``
    holds the details of the latest call (counters, drain time, backend).
    """

    def __init__(self, accelerator: str, backend: str = "real", workdir: str | os.PathLike | None = None,
                 seed: int = 0, cache_mb: int = 64, disk: DiskModel = DiskModel(), direct: bool = False,
                 memory: bool = False) -> None:
        self.accelerator = _check_acc(accelerator)
        self.memory = bool(memory)
        if backend not in ("real", "model"):
            raise ValueError(f"backend must be 'real' or 'model', got {backend!r}")
        self.backend = backend
        self.workdir = workdir
        self.seed = int(seed)
        self.cache_mb = int(cache_mb)
        self.disk = disk
        self.direct = bool(direct)
        self._workloads: dict[tuple, Workload] = {}
        self.last: dict[str, Any] = {}

    def workload(self, task: Mapping[str, Any]) -> Workload:
        f = complete_features(task)
        key = tuple(sorted(f.items()))
        w = self._workloads.get(key)
        if w is None:
            if len(self._workloads) > 32:
                self._workloads.clear()
            w = self._workloads[key] = generate(f, seed=self.seed, max_ops=MAX_OPS)
        return w

    def params(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """The accelerator's defaults overridden by ``params`` (unknown names rejected)."""
        unknown = sorted(set(params) - set(DEFAULTS[self.accelerator]))
        if unknown:
            raise ValueError(f"unknown {self.accelerator} parameters {unknown}; known: {list(DEFAULTS[self.accelerator])}")
        p = {**DEFAULTS[self.accelerator], **params}
        return param_space(self.accelerator).validate(p)

    def __call__(self, task: Mapping[str, Any], params: Mapping[str, Any], deadline: float | None = None) -> Any:
        time = self._time(task, params, deadline)
        if not self.memory:
            return time
        used = self.last["cache_peak_bytes"] if self.accelerator == "sro" else self.last["peak_bytes"]
        return {"time": time, "memory": float(used)}

    def _time(self, task: Mapping[str, Any], params: Mapping[str, Any], deadline: float | None) -> float:
        w = self.workload(task)
        p = self.params(params)
        if self.accelerator == "sro" and p["prefetch_size"] > self.cache_mb * MIB:
            raise ValueError(f"prefetch_size={p['prefetch_size']} exceeds the cache budget of {self.cache_mb} MiB")
        if self.backend == "model":
            if self.accelerator == "sro":
                d = sro_model(w, p, self.cache_mb * MIB, self.disk)
            else:
                d = sbb_model(w, p, self.disk)
            self.last = d
            return float(d["time"])
        workdir = self.workdir if self.workdir is not None else default_workdir()
        if self.accelerator == "sro":
            r = run_sro(w, p, workdir, cache_bytes=self.cache_mb * MIB, deadline=deadline, direct=self.direct)
        else:
            r = run_sbb(w, p, workdir, deadline=deadline)
        self.last = {**r.details, "time": r.time, "backend": "real"}
        return float(r.time)


def problem(accelerator: str = "sro", backend: str = "real", workdir: str | os.PathLike | None = None,
            seed: int = 0, cache_mb: int = 64, max_threads: int = 24, direct: bool = False,
            memory_limit: float | None = None, memory_objective: bool = False) -> gt.Problem:
    """The tuning problem of one accelerator.

    ``backend="real"`` runs the accelerator on real files under ``workdir`` (default
    ``$GPTASK_IO_WORKDIR`` or ``<tmp>/gptask_io``); ``backend="model"`` uses the cost model (the
    problem's name then ends in ``.model``). ``seed`` fixes the generated workloads.
    memory_limit, memory_objective: the cache memory used as a limited output or as a second
    objective (module docstring).
    """
    _check_acc(accelerator)
    outputs = time_and_memory(memory_limit, bool(memory_objective), "io_accelerators problem()")
    with_memory = memory_limit is not None or bool(memory_objective)
    obj = IOObjective(accelerator, backend, workdir, seed=seed, cache_mb=cache_mb, direct=direct, memory=with_memory)
    if accelerator == "sro":
        constants = {"cache_mb": int(cache_mb)}
        constraints = [_prefetch_fits]
    else:
        constants = {"max_threads": int(max_threads)}
        constraints = [_thread_budget]
    return gt.Problem(task_space(accelerator), param_space(accelerator), obj, constraints=constraints,
                      constants=constants, name=f"io_accelerators.{accelerator}.{backend}",
                      default=DEFAULTS[accelerator], unit="s", **outputs)
