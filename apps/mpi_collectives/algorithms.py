"""Catalogue of MPICH collective algorithms and their numeric knobs (control variables).

Pure data and validation: nothing here launches MPI. The names are those the ``mpich`` wheel
(MPICH 5.0.2) lists with ``mpivars``; each algorithm is forced with
``MPIR_CVAR_<COLL>_INTRA_ALGORITHM=<name>`` and ``auto`` leaves MPICH's own selection (the
reference every result is compared with).

Knobs are shared, generic tuning parameters whose *meaning* depends on the chosen algorithm:

``kval``      the radix of whichever k-parameterised algorithm is chosen (tree branching factor,
              recursive-exchange / recursive-multiplying / Bruck radix);
``tree_type`` ``kary``, ``knomial_1`` or ``knomial_2`` for the tree algorithms;
``chunk``     the pipeline chunk size in bytes of the pipelined tree algorithms.

A knob is *active* only for the algorithms listed in :data:`KNOBS`; for the others it still
exists in the parameter space (so every configuration has the same dimensions) but is ignored:
:func:`cvar_environment` puts only active knobs into the job's environment, and
:func:`canonical` pins inactive knobs to their default so an exhaustive grid does not measure
the same run several times. Topology-aware tree types and the ``smp``/``ccl`` algorithms need
several nodes or a CCL library and are left out (``smp`` can be enabled with
``multi_node=True``); ``pairwise_sendrecv_replace`` (alltoall) needs ``MPI_IN_PLACE``, which the
benchmark does not use.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = [
    "COLLECTIVES", "ALGORITHMS", "KNOBS", "KNOB_DEFAULTS", "TREE_TYPES", "algorithms_for",
    "active_knobs", "canonical", "cvar_environment", "check_algorithm", "union_algorithms",
]

COLLECTIVES: tuple[str, ...] = ("allreduce", "bcast", "reduce", "allgather", "alltoall")

ALGORITHMS: dict[str, tuple[str, ...]] = {
    "allreduce": ("auto", "nb", "recursive_doubling", "recursive_multiplying",
                  "reduce_scatter_allgather", "k_reduce_scatter_allgather", "tree", "recexch",
                  "ring"),
    "bcast": ("auto", "binomial", "nb", "scatter_recursive_doubling_allgather",
              "scatter_ring_allgather", "pipelined_tree", "tree"),
    "reduce": ("auto", "binomial", "nb", "reduce_scatter_gather"),
    "allgather": ("auto", "brucks", "k_brucks", "nb", "recursive_doubling", "ring",
                  "recexch_doubling", "recexch_halving"),
    "alltoall": ("auto", "brucks", "k_brucks", "nb", "pairwise", "scattered"),
}
# Algorithms that only apply on communicators spanning several nodes (MPICH's "parent-comm").
MULTI_NODE_ALGORITHMS: dict[str, tuple[str, ...]] = {
    "allreduce": ("smp",), "bcast": ("smp",), "reduce": ("smp",),
}

TREE_TYPES: tuple[str, ...] = ("kary", "knomial_1", "knomial_2")

# (collective, algorithm) -> {generic knob: MPICH control variable (without MPIR_CVAR_)}
KNOBS: dict[tuple[str, str], dict[str, str]] = {
    ("allreduce", "recursive_multiplying"): {"kval": "ALLREDUCE_RECURSIVE_MULTIPLYING_KVAL"},
    ("allreduce", "recexch"): {"kval": "ALLREDUCE_RECEXCH_KVAL"},
    ("allreduce", "k_reduce_scatter_allgather"): {"kval": "ALLREDUCE_RECEXCH_KVAL"},
    ("allreduce", "tree"): {"kval": "ALLREDUCE_TREE_KVAL", "tree_type": "ALLREDUCE_TREE_TYPE",
                            "chunk": "ALLREDUCE_TREE_PIPELINE_CHUNK_SIZE"},
    ("bcast", "tree"): {"kval": "BCAST_TREE_KVAL", "tree_type": "BCAST_TREE_TYPE"},
    ("bcast", "pipelined_tree"): {"kval": "BCAST_TREE_KVAL", "tree_type": "BCAST_TREE_TYPE",
                                  "chunk": "BCAST_TREE_PIPELINE_CHUNK_SIZE"},
    ("allgather", "k_brucks"): {"kval": "ALLGATHER_BRUCKS_KVAL"},
    ("allgather", "recexch_doubling"): {"kval": "ALLGATHER_RECEXCH_KVAL"},
    ("allgather", "recexch_halving"): {"kval": "ALLGATHER_RECEXCH_KVAL"},
    ("alltoall", "k_brucks"): {"kval": "ALLTOALL_BRUCKS_KVAL"},
}
KNOB_NAMES: tuple[str, ...] = ("kval", "tree_type", "chunk")
# Values used for inactive knobs (MPICH's defaults, chunk = the bcast pipeline default).
KNOB_DEFAULTS: dict[str, Any] = {"kval": 2, "tree_type": "kary", "chunk": 8192}
# Discretisation used by the exhaustive grid (the space itself is wider).
KNOB_GRID: dict[str, tuple[Any, ...]] = {
    "kval": (2, 3, 4),
    "tree_type": TREE_TYPES,
    "chunk": (4096, 32768, 262144, 2097152),
}


def _check_coll(coll: str) -> str:
    if coll not in ALGORITHMS:
        raise ValueError(f"unknown collective {coll!r}; expected one of {list(COLLECTIVES)}")
    return coll


def algorithms_for(coll: str, multi_node: bool = False) -> tuple[str, ...]:
    """The algorithm names this app offers for ``coll`` (``auto`` first)."""
    algs = ALGORITHMS[_check_coll(coll)]
    if multi_node:
        algs = algs + MULTI_NODE_ALGORITHMS.get(coll, ())
    return algs


def union_algorithms(colls: Sequence[str], multi_node: bool = False) -> list[str]:
    """All algorithm names of ``colls`` in first-seen order (the choices of one Categorical)."""
    out: list[str] = []
    for c in colls:
        for a in algorithms_for(c, multi_node):
            if a not in out:
                out.append(a)
    return out


def check_algorithm(coll: str, algorithm: object, multi_node: bool = False) -> str:
    """Return ``algorithm`` if MPICH offers it for ``coll`` here, else raise ``ValueError``."""
    algs = algorithms_for(coll, multi_node)
    if not isinstance(algorithm, str) or algorithm not in algs:
        raise ValueError(
            f"algorithm {algorithm!r} is not available for {coll}; expected one of {list(algs)}")
    return algorithm


def active_knobs(coll: str, algorithm: str) -> dict[str, str]:
    """{knob: control variable suffix} of the knobs ``algorithm`` reads (may be empty)."""
    return dict(KNOBS.get((_check_coll(coll), algorithm), {}))


def _check_knob(name: str, value: Any) -> Any:
    if name == "tree_type":
        if value not in TREE_TYPES:
            raise ValueError(f"tree_type must be one of {list(TREE_TYPES)}, got {value!r}")
        return value
    if isinstance(value, bool) or not isinstance(value, (int,)) and not (
            isinstance(value, float) and value.is_integer()):
        raise TypeError(f"{name} must be an integer, got {value!r}")
    v = int(value)
    if name == "kval" and v < 2:
        raise ValueError(f"kval must be >= 2, got {v}")
    if name == "chunk" and v < 1:
        raise ValueError(f"chunk must be >= 1 byte, got {v}")
    return v


def canonical(coll: str, params: Mapping[str, Any]) -> dict[str, Any]:
    """``params`` with the inactive knobs reset to :data:`KNOB_DEFAULTS` (for de-duplication)."""
    alg = params["algorithm"]
    act = active_knobs(coll, alg)
    out = dict(params)
    for k in KNOB_NAMES:
        if k not in act:
            out[k] = KNOB_DEFAULTS[k]
    return out


def cvar_environment(coll: str, params: Mapping[str, Any], multi_node: bool = False) -> dict[str, str]:
    """Environment variables forcing ``params`` for ``coll``: the algorithm and its active knobs.

    ``params`` must hold ``algorithm``; knobs the algorithm does not read are ignored, knobs it
    reads but ``params`` lacks keep MPICH's default. ``auto`` gives an empty dict (MPICH's own
    choice, the reference). Raises ``ValueError``/``TypeError`` naming a bad value.
    """
    if not isinstance(params, Mapping) or "algorithm" not in params:
        raise ValueError(f"params must be a mapping with an 'algorithm' key, got {params!r}")
    alg = check_algorithm(coll, params["algorithm"], multi_node)
    if alg == "auto":
        return {}
    env = {f"MPIR_CVAR_{coll.upper()}_INTRA_ALGORITHM": alg}
    for knob, cvar in active_knobs(coll, alg).items():
        if knob in params:
            env[f"MPIR_CVAR_{cvar}"] = str(_check_knob(knob, params[knob]))
    return env
