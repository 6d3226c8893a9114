"""mpi4py helpers: split work over ranks, exchange results, propagate errors, cap BLAS threads.

Everything here runs under a plain ``mpiexec -n N python script.py`` (no ``Spawn``). Data cross
ranks only as numpy buffers (``Allreduce``/``Allgather``/``Bcast``) or as UTF-8 JSON bytes in such
buffers; the pickle-based lower-case mpi4py API is never used, so nothing a user could craft is
unpickled. ``comm=None`` means serial: every helper then works on one process without MPI.

BLAS threads: with ``r`` ranks on a node of ``c`` cores each rank gets ``max(1, c // r)`` BLAS threads
(:func:`blas_threads_per_rank`), so ranks never oversubscribe the cores. The LCM fit itself uses a
single BLAS thread by default (see ``gptask.model.numerics.lcm``).
"""

from __future__ import annotations

import json
import os
import traceback
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

__all__ = ["rank_size", "my_items", "allgather_rows", "bcast_json", "allgather_json", "collective",
           "RemoteError", "blas_threads_per_rank"]

T = TypeVar("T")


class RemoteError(RuntimeError):
    """Raised on every rank when some rank failed inside a collective step."""


def rank_size(comm: Any) -> tuple[int, int]:
    """(rank, size) of ``comm``; (0, 1) when ``comm`` is None."""
    if comm is None:
        return 0, 1
    return int(comm.Get_rank()), int(comm.Get_size())


def my_items(n: int, comm: Any) -> list[int]:
    """The item indices ``k`` in ``range(n)`` this rank owns: ``k % size == rank`` (round robin)."""
    rank, size = rank_size(comm)
    return list(range(rank, n, size))


def allgather_rows(local: dict[int, np.ndarray], n: int, width: int, comm: Any) -> np.ndarray:
    """Assemble an ``(n, width)`` float array whose row ``k`` was computed by the rank owning ``k``.

    ``local`` maps this rank's item indices to ``(width,)`` rows. Rows are combined with one
    ``Allgather`` of fixed-size buffers; every rank returns the same array.
    """
    rank, size = rank_size(comm)
    mine = np.zeros((n, width))
    for k, row in local.items():
        mine[k] = row
    if size == 1:
        return mine
    everyone = np.empty((size, n, width))
    comm.Allgather(mine, everyone)
    return np.array([everyone[k % size, k] for k in range(n)])


def _json_bytes(obj: Any) -> np.ndarray:
    return np.frombuffer(json.dumps(obj, sort_keys=True).encode("utf-8"), dtype=np.uint8)


def bcast_json(obj: Any, comm: Any, root: int = 0) -> Any:
    """Broadcast a JSON-serialisable object from ``root``; every rank returns the same object."""
    rank, size = rank_size(comm)
    if size == 1:
        return json.loads(json.dumps(obj))
    payload = _json_bytes(obj) if rank == root else np.empty(0, dtype=np.uint8)
    n = np.array([payload.size], dtype=np.int64)
    comm.Bcast(n, root=root)
    if rank != root:
        payload = np.empty(int(n[0]), dtype=np.uint8)
    comm.Bcast(payload, root=root)
    return json.loads(payload.tobytes().decode("utf-8"))


def allgather_json(obj: Any, comm: Any) -> list[Any]:
    """Every rank's JSON-serialisable ``obj``, in rank order, on every rank."""
    rank, size = rank_size(comm)
    if size == 1:
        return [json.loads(json.dumps(obj))]
    from mpi4py import MPI

    payload = _json_bytes(obj)
    counts = np.empty(size, dtype=np.int64)
    comm.Allgather(np.array([payload.size], dtype=np.int64), counts)
    displs = np.concatenate([[0], np.cumsum(counts)[:-1]])
    out = np.empty(int(counts.sum()), dtype=np.uint8)
    comm.Allgatherv(payload, [out, counts.tolist(), displs.tolist(), MPI.BYTE])
    return [json.loads(out[a : a + c].tobytes().decode("utf-8")) for a, c in zip(displs, counts)]


def collective(fn: Callable[[], T], comm: Any, what: str = "a collective step") -> T:
    """Run ``fn`` on every rank; if it raises on any rank, raise :class:`RemoteError` on all ranks.

    The ranks agree on success with one small ``Allgather`` after ``fn`` returns, so a rank that
    fails never leaves the others waiting in a later collective. ``fn`` itself must not enter a
    collective after a local failure could have happened on another rank.
    """
    rank, size = rank_size(comm)
    if size == 1:
        return fn()
    result: Any = None
    error = ""
    try:
        result = fn()
    except BaseException as exc:  # noqa: BLE001 - report any failure to the other ranks
        error = f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=4)}"
    errors = allgather_json(error, comm)
    bad = [(r, e) for r, e in enumerate(errors) if e]
    if bad:
        text = "; ".join(f"rank {r}: {e.splitlines()[0]}" for r, e in bad)
        raise RemoteError(f"{what} failed on {len(bad)} of {size} ranks: {text}")
    return result


def blas_threads_per_rank(comm: Any, cores: int | None = None) -> int:
    """BLAS threads each rank should use so the ranks sharing a node do not oversubscribe it:
    ``max(1, cores // ranks_on_this_node)``; ``cores`` defaults to the CPUs this process may use."""
    if cores is None:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    if comm is None:
        return max(1, int(cores))
    from mpi4py import MPI

    node = comm.Split_type(MPI.COMM_TYPE_SHARED)
    try:
        local = int(node.Get_size())
    finally:
        node.Free()
    return max(1, int(cores) // local)
