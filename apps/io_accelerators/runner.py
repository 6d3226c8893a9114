"""Real runs: a workload driven through the prefetcher or the burst buffer on a real file.

``run_sro`` and ``run_sbb`` prepare (once) the data file under ``workdir``, drop it from the page
cache, replay the workload's operations with ``workload.n_threads`` threads and return a
:class:`RunResult`. Times are wall-clock seconds (``time.perf_counter``).

A ``deadline`` (seconds) stops the run early: the application threads stop issuing operations
and :class:`gptask.evaluation.noise.RunCensored` is raised with the elapsed time (the burst buffer still
drains what it acknowledged before the exception leaves).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gptask.evaluation.noise import RunCensored

from .burst_buffer import BurstBuffer
from .files import DirectReader, drop_cache, prepare_file
from .prefetcher import SmallReadPrefetcher
from .workload import MIB, Workload

log = logging.getLogger(__name__)

__all__ = ["RunResult", "run_sro", "run_sbb", "write_payload", "payload_slice", "data_file", "PAYLOAD_SEED"]

PAYLOAD_SEED = 7


@dataclass
class RunResult:
    """One measured run. ``time``: the objective (seconds); ``details``: counters."""

    time: float
    details: dict = field(default_factory=dict)


def data_file(workdir: str | os.PathLike, workload: Workload) -> Path:
    """The shared data file for a workload: sizes are rounded up to a power of two MiB (so sampled
    tasks reuse a handful of files); the workload only touches its first ``file_size`` bytes."""
    mib = max(1, -(-workload.file_size // MIB))
    return prepare_file(workdir, (1 << (mib - 1).bit_length()) * MIB)


def _replay(workload: Workload, op_fn, deadline: float | None) -> float:
    """Run ``op_fn(i)`` for every operation, one thread per workload thread; elapsed seconds.

    Raises :class:`RunCensored` when ``deadline`` passes, the first exception of a thread otherwise.
    """
    stop = threading.Event()
    errors: list[BaseException] = []
    t0 = time.perf_counter()

    def body(t: int) -> None:
        try:
            for i in workload.thread_ops(t):
                if stop.is_set():
                    return
                op_fn(int(i))
                if deadline is not None and time.perf_counter() - t0 > deadline:
                    stop.set()
                    return
        except BaseException as e:  # noqa: BLE001 - re-raised in the caller's thread
            errors.append(e)
            stop.set()

    if workload.n_threads == 1:
        body(0)
    else:
        threads = [threading.Thread(target=body, args=(t,), name=f"app-{t}") for t in range(workload.n_threads)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
    elapsed = time.perf_counter() - t0
    if errors:
        raise errors[0]
    if stop.is_set():
        raise RunCensored(elapsed)
    return elapsed


def run_sro(
    workload: Workload,
    params: Mapping[str, Any],
    workdir: str | os.PathLike,
    cache_bytes: int,
    deadline: float | None = None,
    direct: bool = False,
    kernel_readahead: bool = False,
    enabled: bool = True,
) -> RunResult:
    """Replay the (read) operations of ``workload`` through a :class:`SmallReadPrefetcher`.

    ``params``: binsize, prefetch_size (bytes), cluster_threshold, sequence_length. Writes of a
    mixed workload are skipped (the prefetcher is a read accelerator). ``kernel_readahead=False``
    disables Linux read-ahead on the file (``POSIX_FADV_RANDOM``) so that only our prefetcher
    prefetches; ``direct=True`` reads with ``O_DIRECT``; ``enabled=False`` measures plain reads.
    """
    path = data_file(workdir, workload)
    drop_cache(path)
    fd = os.open(path, os.O_RDONLY)
    dreader = DirectReader(path) if direct else None
    try:
        if not kernel_readahead:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
        reader = dreader.read if dreader is not None else (lambda off, n: os.pread(fd, n, off))
        pf = SmallReadPrefetcher(
            reader, workload.file_size,
            binsize=int(params["binsize"]), cluster_threshold=int(params["cluster_threshold"]),
            prefetch_size=int(params["prefetch_size"]), sequence_length=int(params["sequence_length"]),
            cache_bytes=int(cache_bytes), enabled=enabled,
        )
        offsets, is_read, op = workload.offsets, workload.is_read, workload.op_size

        def op_fn(i: int) -> None:
            if is_read[i]:
                pf.read(int(offsets[i]), op)

        elapsed = _replay(workload, op_fn, deadline)
    finally:
        os.close(fd)
        if dreader is not None:
            dreader.close()
    d = pf.stats.as_dict()
    d["cache_peak_bytes"] = pf.cache.peak_bytes
    return RunResult(time=elapsed, details=d)


def write_payload(op_size: int) -> bytes:
    """The pool the burst-buffer runs take their written data from (deterministic)."""
    from .files import chunk_bytes

    return chunk_bytes(PAYLOAD_SEED, 0, op_size + 4 * MIB)


def payload_slice(pool: bytes, i: int, op_size: int) -> memoryview:
    """The data written by operation ``i``: a distinct 4 KiB-aligned window of the pool."""
    slots = (len(pool) - op_size) // 4096 + 1
    start = ((i * 7919) % slots) * 4096
    return memoryview(pool)[start:start + op_size]


def run_sbb(
    workload: Workload,
    params: Mapping[str, Any],
    workdir: str | os.PathLike,
    deadline: float | None = None,
    batch_bytes: int = 4 * MIB,
    path: str | os.PathLike | None = None,
    tier2_dir: str | os.PathLike | None = None,
) -> RunResult:
    """Replay ``workload`` through a :class:`BurstBuffer`.

    ``params``: workers, destagers, buffer_mb, threshold (fraction). ``time`` is the application's
    I/O time (until every operation is acknowledged); ``details["drain_time"]`` is the time from
    then until every byte is on disk, ``details["total_time"]`` their sum. With ``tier2_dir`` the
    buffer stages through a second tier there; ``params`` may then also give ``tier2_mb`` (1024),
    ``tier2_threshold`` (0.8) and ``tier2_destagers`` (2).
    """
    path = Path(path) if path is not None else data_file(workdir, workload)
    drop_cache(path)
    pool = write_payload(workload.op_size)
    offsets, is_read, op = workload.offsets, workload.is_read, workload.op_size
    bb = BurstBuffer(
        path, capacity=int(params["buffer_mb"]) * MIB, block_size=op,
        workers=int(params["workers"]), destagers=int(params["destagers"]),
        threshold=float(params["threshold"]), batch_bytes=batch_bytes,
        tier2_dir=tier2_dir, tier2_capacity=int(params.get("tier2_mb", 1024)) * MIB,
        tier2_threshold=float(params.get("tier2_threshold", 0.8)),
        tier2_destagers=int(params.get("tier2_destagers", 2)),
    )
    with bb:
        def op_fn(i: int) -> None:
            if is_read[i]:
                bb.read(int(offsets[i]), op)
            else:
                bb.write(int(offsets[i]), payload_slice(pool, i, op))

        app_time = _replay(workload, op_fn, deadline)
        t1 = time.perf_counter()
        bb.flush()
        drain = time.perf_counter() - t1
    d = bb.stats.as_dict()
    d.update(drain_time=drain, total_time=app_time + drain, capacity=bb.capacity)
    return RunResult(time=app_time, details=d)
