"""Cost MODELS of the two accelerators (no I/O): fast stand-ins for tests and wide sweeps.

Every value these functions return is a model prediction, not a measurement; results carry
``"backend": "model"``. Constants (``DiskModel``) were fitted by eye to cold-cache reads and
writes on the development machine (a virtual disk: ~0.1 ms per random 4 KiB read, ~800 MB/s for
large reads, ~2 GB/s write-back); they set the scale, not the truth.

* Small-read prefetcher: the prefetcher's own logic is replayed in accounting mode (no data) over
  the workload, which gives exact counts of demand misses and prefetch requests; the predicted time
  is ``n_ops * cpu_op + sum over disk requests of (latency + bytes / read_bw)``, the disk part
  divided by the number of threads that can keep the disk busy (at most ``disk_queue``).
* Burst buffer: a fluid model. Writes enter at ``R_in`` (workers copying, bounded by the
  application threads and the cores), destaging runs at ``R_out`` (destagers, saturating at the
  disk's write bandwidth) once the dirty data reaches ``threshold * buffer``; when the buffer is
  full the application proceeds at ``R_out``. Reads cost a latency unless they hit the buffer
  (re-used blocks, in proportion to how much of the touched data the buffer holds). Threads beyond
  the cores add a contention overhead, so more threads are not free.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from .prefetcher import SmallReadPrefetcher
from .workload import MIB, Workload

__all__ = ["DiskModel", "sro_model", "sbb_model"]


@dataclass(frozen=True)
class DiskModel:
    latency: float = 100e-6        # s per random read request
    read_bw: float = 800e6         # B/s for large reads
    write_bw: float = 1.5e9        # B/s write-back with fdatasync
    fsync: float = 2e-3            # s per fdatasync
    cpu_op: float = 15e-6          # s of Python per application operation
    handoff: float = 40e-6         # s per request handed to a worker thread
    copy_bw: float = 3e9           # B/s memcpy into the buffer
    cores: int = 2
    contention: float = 0.03       # relative slowdown per thread beyond the cores
    disk_queue: int = 4            # concurrent requests the disk serves in parallel
    destager_half: float = 2.0     # destagers reaching half the write bandwidth


def sro_model(workload: Workload, params: Mapping[str, Any], cache_bytes: int,
              disk: DiskModel = DiskModel(), enabled: bool = True) -> dict:
    """Predicted run time (s) of the prefetcher on ``workload`` and the replayed counters."""
    pf = SmallReadPrefetcher(
        None, workload.file_size,
        binsize=int(params["binsize"]), cluster_threshold=int(params["cluster_threshold"]),
        prefetch_size=int(params["prefetch_size"]), sequence_length=int(params["sequence_length"]),
        cache_bytes=int(cache_bytes), enabled=enabled,
    )
    op = workload.op_size
    for off, r in zip(workload.offsets.tolist(), workload.is_read.tolist()):
        if r:
            pf.read(off, op)
    s = pf.stats
    requests = s.miss_requests + s.prefetch_requests
    io = requests * disk.latency + (s.miss_bytes + s.prefetch_bytes) / disk.read_bw
    par = max(1, min(workload.n_threads, disk.disk_queue))
    cpu = workload.n_ops * disk.cpu_op + s.prefetches * 5 * disk.cpu_op
    t = cpu + io / par
    d = s.as_dict()
    d.update(time=float(t), backend="model", cache_peak_bytes=pf.cache.peak_bytes)
    return d


def _reuse_fraction(workload: Workload) -> tuple[int, int, int]:
    """(reads, reads of blocks touched before, distinct blocks touched)."""
    blocks = workload.offsets // workload.op_size
    _, first = np.unique(blocks, return_index=True)
    seen_before = np.ones(blocks.shape[0], dtype=bool)
    seen_before[first] = False
    reads = workload.is_read
    return int(reads.sum()), int((reads & seen_before).sum()), int(first.shape[0])


def sbb_model(workload: Workload, params: Mapping[str, Any], disk: DiskModel = DiskModel()) -> dict:
    """Predicted application I/O time and drain time (s) of the burst buffer on ``workload``."""
    workers, destagers = int(params["workers"]), int(params["destagers"])
    buf = float(params["buffer_mb"]) * MIB
    thr = float(params["threshold"])
    op = workload.op_size
    n_threads = workload.n_threads
    total_threads = workers + destagers + n_threads
    slow = 1.0 + disk.contention * max(0, total_threads - disk.cores)
    n_reads, n_reuse, n_blocks = _reuse_fraction(workload)
    n_writes = workload.n_ops - n_reads
    v_w = float(n_writes * op)
    # ingest: each request costs a handoff plus a copy; requests in parallel up to min(threads, workers, cores)
    par_in = max(1.0, min(n_threads, workers, disk.cores))
    t_req = (disk.handoff + op / disk.copy_bw) * slow
    r_in = par_in * op / t_req  # B/s
    # drain: destagers saturate the disk's write bandwidth; each batch pays an fdatasync
    batch = 4 * MIB
    r_out = disk.write_bw * destagers / (destagers + disk.destager_half) / slow
    r_out = 1.0 / (1.0 / r_out + disk.fsync / batch)
    start = thr * buf
    if v_w <= start or r_in <= r_out:
        t_w = v_w / r_in
    else:
        t_full = start / r_in + (buf - start) / (r_in - r_out)  # buffer reaches capacity
        v_full = r_in * t_full
        t_w = v_w / r_in if v_w <= v_full else t_full + (v_w - v_full) / r_out
    # reads: a re-used block hits when the buffer holds it (proportion of the touched data it can hold)
    hold = min(1.0, buf / max(1.0, n_blocks * op))
    hits = n_reuse * hold
    par_rd = max(1.0, min(n_threads, workers, disk.disk_queue))
    t_r = (n_reads * t_req + (n_reads - hits) * (disk.latency + op / disk.read_bw)) / par_rd
    app = t_w + t_r + workload.n_ops * disk.cpu_op / max(1.0, min(n_threads, disk.cores))
    # what is still dirty when the application finishes drains at r_out
    left = min(v_w, max(0.0, v_w - r_out * max(0.0, app - start / r_in)), buf) if v_w > 0 else 0.0
    drain = left / r_out + (disk.fsync if v_w > 0 else 0.0)
    # the buffer's peak occupancy: every block written stays until the dirty part reaches the
    # threshold; beyond it the buffer keeps growing at r_in - r_out while the application writes
    # (up to the capacity), else it holds at the threshold; never more than the distinct blocks touched
    v_distinct = float(n_blocks * op)
    v_new = min(v_w, v_distinct)
    peak = v_new if v_new <= start or r_in <= r_out else start + (v_new - start) * (1 - r_out / r_in)
    peak = min(buf, v_distinct, peak)
    return {"time": float(app), "drain_time": float(drain), "total_time": float(app + drain),
            "read_hit_rate_model": float(hits / n_reads) if n_reads else 0.0, "backend": "model",
            "peak_bytes": float(peak)}
