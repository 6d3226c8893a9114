"""The :class:`gptask.Problem` of MPI collective algorithm selection.

Task space: ``coll`` (Categorical over the chosen collectives; a constant when only one is
tuned), ``size`` (Integer, bytes, log scale) and ``nprocs`` (Integer).

Parameter space: ``algorithm`` (one Categorical), ``kval`` (Integer 2..max_kval), ``tree_type``
(Categorical) and ``chunk`` (Integer, bytes, log scale). Design: one union list of algorithm
names rather than one parameter per collective. Per-collective parameters would leave all but
one of them inert in every task, and an inert categorical still costs the model one-hot columns;
with a union list each task uses the same ``algorithm`` dimension and a constraint
(``algorithm_valid_for_coll``) rules out the names that collective lacks. When a single
collective is tuned the union *is* its list and the constraint never bites. Names shared
between collectives (``ring``, ``nb``, ``brucks``, ``tree``, ...) share a column, which lets the
multitask model carry what it learns about one to the others. The knobs exist for every
configuration but reach MPICH only when the chosen algorithm reads them (see algorithms.py).
The default configuration (:data:`DEFAULT`, measured first on every task) is MPICH's own choice
(``algorithm="auto"``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gptask as gt

from .algorithms import ALGORITHMS, COLLECTIVES, KNOB_DEFAULTS, TREE_TYPES, algorithms_for, union_algorithms
from .launcher import LaunchConfig
from .objective import CollectiveObjective

__all__ = ["problem", "param_space", "DEFAULT"]

#: the default configuration (measured first on every task): MPICH's own selection, the knobs at
#: their defaults (they reach MPICH only with an algorithm that reads them)
DEFAULT = {"algorithm": "auto", **KNOB_DEFAULTS}


def param_space(colls: Sequence[str] = COLLECTIVES, max_kval: int = 8, min_chunk: int = 1024,
                max_chunk: int = 4 * 1024 * 1024, multi_node: bool = False) -> gt.Space:
    """The tuning parameters for the collectives ``colls``."""
    return gt.Space([
        gt.Categorical("algorithm", union_algorithms(colls, multi_node)),
        gt.Integer("kval", 2, max_kval),
        gt.Categorical("tree_type", list(TREE_TYPES)),
        gt.Integer("chunk", min_chunk, max_chunk, log=True),
    ])


def problem(colls: Sequence[str] = ("allreduce", "bcast", "reduce", "allgather", "alltoall"),
            min_size: int = 8, max_size: int = 16 * 1024 * 1024, min_procs: int = 2,
            max_procs: int = 4, max_kval: int = 8, config: LaunchConfig | None = None,
            multi_node: bool = False) -> gt.Problem:
    """Build the collective-tuning problem.

    colls: collectives in the task space (a subset of ``allreduce, bcast, reduce, allgather,
        alltoall``, or one name); a single one becomes the constant ``coll``.
    min_size, max_size: message sizes in bytes (log scale; see bench.py for the per-collective
        meaning); max_procs: the largest rank count (``> cores`` oversubscribes, with yielding).
    max_kval: upper bound of the algorithm radix ``kval``.
    config: how jobs are launched (mpiexec/srun template, timeout, iterations); see LaunchConfig.
    multi_node: also offer the ``smp`` (node-hierarchical) algorithms, which need several nodes.
    """
    if isinstance(colls, str) and colls in ALGORITHMS:
        colls = [colls]  # one collective by name (``--problem-options colls=allreduce``)
    if isinstance(colls, str) or not colls:
        raise ValueError(f"colls must be a collective's name or a non-empty list of them, got {colls!r}")
    colls = list(dict.fromkeys(colls))
    bad = [c for c in colls if c not in ALGORITHMS]
    if bad:
        raise ValueError(f"unknown collectives {bad}; expected a subset of {list(COLLECTIVES)}")
    if not (1 <= min_size <= max_size):
        raise ValueError(f"need 1 <= min_size <= max_size, got {min_size}, {max_size}")
    if not (1 <= min_procs <= max_procs):
        raise ValueError(f"need 1 <= min_procs <= max_procs, got {min_procs}, {max_procs}")
    dims: list[Any] = []
    constants: dict[str, Any] = {}
    if len(colls) > 1:
        dims.append(gt.Categorical("coll", colls))
    else:
        constants["coll"] = colls[0]
    dims += [gt.Integer("size", min_size, max_size, log=True),
             gt.Integer("nprocs", min_procs, max_procs)]
    tasks = gt.Space(dims)
    params = param_space(colls, max_kval=max_kval, multi_node=multi_node)
    objective = CollectiveObjective(config, multi_node=multi_node)
    if constants:
        inner = objective

        def objective(task: dict, p: dict) -> float:  # noqa: F811 - adds the constant coll
            return inner({**constants, **task}, p)

    def algorithm_valid_for_coll(c: dict) -> bool:
        return c["algorithm"] in algorithms_for(c["coll"], multi_node)

    return gt.Problem(tasks, params, objective, constraints=[algorithm_valid_for_coll],
                      constants=constants, name="mpi_collectives", default=DEFAULT, unit="s")
