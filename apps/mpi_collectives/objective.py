"""The objective: time of one collective for a task and an algorithm configuration.

A task is ``{"coll": str, "size": int bytes, "nprocs": int}``; params are
``{"algorithm": str, "kval": int, "tree_type": str, "chunk": int}`` (knobs optional, ignored
unless the algorithm reads them). Values are validated before anything is launched.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from .algorithms import COLLECTIVES, check_algorithm, cvar_environment
from .launcher import LaunchConfig, run_benchmark

__all__ = ["CollectiveObjective", "check_task", "default_time", "evaluate"]

log = logging.getLogger(__name__)


def check_task(task: Mapping[str, Any]) -> tuple[str, int, int]:
    """Return ``(coll, size, nprocs)`` from ``task`` or raise ``ValueError``/``TypeError``."""
    if not isinstance(task, Mapping):
        raise TypeError(f"task must be a mapping with coll, size, nprocs; got {task!r}")
    missing = [k for k in ("coll", "size", "nprocs") if k not in task]
    if missing:
        raise ValueError(f"task lacks {missing}; got {dict(task)!r}")
    coll = task["coll"]
    if coll not in COLLECTIVES:
        raise ValueError(f"task coll={coll!r} is not one of {list(COLLECTIVES)}")
    out = []
    for name in ("size", "nprocs"):
        v = task[name]
        if isinstance(v, bool) or not (isinstance(v, int) or (isinstance(v, float) and v.is_integer())):
            raise TypeError(f"task {name} must be an integer, got {v!r}")
        if int(v) < 1:
            raise ValueError(f"task {name} must be >= 1, got {v!r}")
        out.append(int(v))
    return coll, out[0], out[1]


def evaluate(task: Mapping[str, Any], params: Mapping[str, Any],
             config: LaunchConfig | None = None, multi_node: bool = False) -> dict[str, Any]:
    """Run the benchmark for ``task`` with ``params``; return its full JSON record.

    Raises ``ValueError``/``TypeError`` for a bad task or parameter (before launching) and
    :class:`~apps.mpi_collectives.launcher.LaunchError` (a ``RuntimeError``) when the run fails.
    """
    coll, size, nprocs = check_task(task)
    env = cvar_environment(coll, params, multi_node=multi_node)
    res = run_benchmark(coll, size, nprocs, env, config)
    res["cvars"] = env
    return res


def default_time(task: Mapping[str, Any], config: LaunchConfig | None = None) -> float:
    """Seconds per call with MPICH's own algorithm choice (``auto``): the reference."""
    return float(evaluate(task, {"algorithm": "auto"}, config)["time"])


class CollectiveObjective:
    """``f(task, params) -> seconds`` for :class:`gptask.Problem` (a plain callable object)."""

    def __init__(self, config: LaunchConfig | None = None, multi_node: bool = False) -> None:
        if config is not None and not isinstance(config, LaunchConfig):
            raise TypeError(f"config must be a LaunchConfig, got {type(config).__name__}")
        self.config = config or LaunchConfig()
        self.multi_node = bool(multi_node)

    def __call__(self, task: Mapping[str, Any], params: Mapping[str, Any]) -> float:
        coll, _, _ = check_task(task)
        check_algorithm(coll, params.get("algorithm") if isinstance(params, Mapping) else None,
                        self.multi_node)
        res = evaluate(task, params, self.config, self.multi_node)
        log.info("%s %s -> %.3e s", dict(task), dict(params), res["time"])
        return float(res["time"])
