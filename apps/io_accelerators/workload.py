"""I/O workload generator: the thesis's "fakeapp" features, scaled to one small machine.

A workload (the tuning *task*) is a dict of features:

=================  =====  ============================================================================
feature            unit   meaning
=================  =====  ============================================================================
file_mb            MiB    size of the file the workload accesses
n_leads            -      number of leads: the file is cut into ``n_leads`` equal regions, one per lead
scatter_kb         KiB    width of the window around a lead's position where its operations fall
lead_advance_kb    KiB    how far a lead's window slides after each visit (0: it never moves)
ops_per_lead       -      successive operations per visit to a lead (the thesis's "repeat")
op_kb              KiB    size of every operation (offsets are multiples of it)
random_scatter     0/1    1: each lead draws its scatter from U(op, scatter) and its operations per
                          visit from U(ops_per_lead / 5, ops_per_lead) (the thesis's -g / -G flags)
sequential         0/1    1: operations of a visit are consecutive blocks; 0: uniform in the window
read_fraction      -      probability that an operation is a read (else a write)
volume_mb          MiB    total bytes moved; the number of operations is ``volume / op``
threads            -      concurrent application threads; lead ``i`` belongs to thread ``i % threads``
=================  =====  ============================================================================

Leads are visited round-robin. Visit ``v`` of lead ``i`` places its window at
``base_i + (v * lead_advance) mod (region - scatter_i)`` and issues its operations in that
window. Out-of-range features are clipped, never rejected (scatter to the lead's region, the op size
to the scatter, threads to the number of leads), so every point of the task space is a valid
workload. :func:`generate` is deterministic for a given ``(features, seed)``.

Named tasks (``NAMED_TASKS``) mirror the thesis (Tables 4.2 and 4.4), with volumes and file sizes
divided so that a run takes about a second on this machine (files of 256 MiB - 1 GiB instead of
20-500 GB):

* SRO.1: 4 leads, wide scatter (8 MiB vs 50 MB), a sliding window (2 MiB vs 10 MB), 1000 ops/visit.
* SRO.2: 220 leads, 2 MiB scatter (vs 10 MB), one op per visit, no sliding window.
* SRO.3: 100 leads, scatter and ops per visit drawn per lead (U(op, 10 MiB), U(100, 500)).
* SBB.1: bandwidth bound: 8 threads writing their own region sequentially by 1 MiB blocks (vs 8
  processes, 10 MB blocks, 200 GB), 512 MiB in all.
* SBB.2: latency bound: 8 threads (vs 32 processes), random 4 KiB ops, 75 % reads, 32 MiB moved
  within 8 x 4 MiB hot regions (the data set fits in the buffer, as in the thesis).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

KIB = 1024
MIB = 1024 * 1024

__all__ = ["FEATURES", "DEFAULT_FEATURES", "NAMED_TASKS", "Workload", "generate", "complete_features"]

#: every feature and its default value (used for features a task does not set)
DEFAULT_FEATURES: dict[str, Any] = {
    "file_mb": 512,
    "n_leads": 4,
    "scatter_kb": 8192,
    "lead_advance_kb": 0,
    "ops_per_lead": 100,
    "op_kb": 4,
    "random_scatter": 0,
    "sequential": 0,
    "read_fraction": 1.0,
    "volume_mb": 40,
    "threads": 1,
}
FEATURES = tuple(DEFAULT_FEATURES)

NAMED_TASKS: dict[str, dict[str, Any]] = {
    "SRO.1": dict(file_mb=1024, n_leads=4, scatter_kb=8192, lead_advance_kb=2048, ops_per_lead=1000,
                  op_kb=4, random_scatter=0, sequential=0, read_fraction=1.0, volume_mb=40, threads=1),
    "SRO.2": dict(file_mb=1024, n_leads=220, scatter_kb=2048, lead_advance_kb=0, ops_per_lead=1,
                  op_kb=4, random_scatter=0, sequential=0, read_fraction=1.0, volume_mb=40, threads=1),
    "SRO.3": dict(file_mb=1024, n_leads=100, scatter_kb=10240, lead_advance_kb=0, ops_per_lead=500,
                  op_kb=4, random_scatter=1, sequential=0, read_fraction=1.0, volume_mb=40, threads=1),
    "SBB.1": dict(file_mb=512, n_leads=8, scatter_kb=65536, lead_advance_kb=0, ops_per_lead=64,
                  op_kb=1024, random_scatter=0, sequential=1, read_fraction=0.0, volume_mb=512, threads=8),
    "SBB.2": dict(file_mb=256, n_leads=8, scatter_kb=4096, lead_advance_kb=0, ops_per_lead=64,
                  op_kb=4, random_scatter=0, sequential=0, read_fraction=0.75, volume_mb=32, threads=8),
}

_INT_FEATURES = {k for k, v in DEFAULT_FEATURES.items() if isinstance(v, int)}


def complete_features(task: Mapping[str, Any]) -> dict[str, Any]:
    """Fill the features a task leaves out with their defaults; reject unknown or bad ones.

    A task may be ``{"name": "SRO.1"}`` (a named task, other keys override it).
    """
    if not isinstance(task, Mapping):
        raise TypeError(f"a task must be a dict of workload features, got {type(task).__name__}")
    task = dict(task)
    out = dict(DEFAULT_FEATURES)
    name = task.pop("name", None)
    if name is not None:
        if name not in NAMED_TASKS:
            raise ValueError(f"unknown named task {name!r}; known: {sorted(NAMED_TASKS)}")
        out.update(NAMED_TASKS[name])
    unknown = sorted(set(task) - set(DEFAULT_FEATURES))
    if unknown:
        raise ValueError(f"unknown workload features {unknown}; known: {list(FEATURES)}")
    out.update(task)
    for k in FEATURES:
        v = out[k]
        if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
            raise TypeError(f"workload feature {k!r} must be a number, got {v!r}")
        if not math.isfinite(float(v)):
            raise ValueError(f"workload feature {k!r} must be finite, got {v}")
        if k in _INT_FEATURES:
            if float(v) != int(v):
                raise ValueError(f"workload feature {k!r} must be an integer, got {v}")
            out[k] = int(v)
        else:
            out[k] = float(v)
    for k in ("file_mb", "n_leads", "op_kb", "volume_mb", "threads", "ops_per_lead", "scatter_kb"):
        if out[k] < 1:
            raise ValueError(f"workload feature {k!r} must be >= 1, got {out[k]}")
    if out["lead_advance_kb"] < 0:
        raise ValueError(f"workload feature 'lead_advance_kb' must be >= 0, got {out['lead_advance_kb']}")
    if not 0.0 <= out["read_fraction"] <= 1.0:
        raise ValueError(f"workload feature 'read_fraction' must lie in [0, 1], got {out['read_fraction']}")
    for k in ("random_scatter", "sequential"):
        if out[k] not in (0, 1):
            raise ValueError(f"workload feature {k!r} must be 0 or 1, got {out[k]}")
    if out["op_kb"] * KIB > out["file_mb"] * MIB:
        raise ValueError(f"op_kb={out['op_kb']} is larger than the file ({out['file_mb']} MiB)")
    return out


@dataclass(frozen=True)
class Workload:
    """A generated operation list.

    ``offsets``, ``is_read``, ``thread``, ``lead``: arrays of shape (n_ops,) (bytes, bool, int, int);
    every operation moves ``op_size`` bytes. ``thread`` values lie in ``range(n_threads)``.
    """

    features: dict
    file_size: int
    op_size: int
    offsets: np.ndarray
    is_read: np.ndarray
    thread: np.ndarray
    lead: np.ndarray
    n_threads: int

    @property
    def n_ops(self) -> int:
        return int(self.offsets.shape[0])

    @property
    def volume(self) -> int:
        return self.n_ops * self.op_size

    def thread_ops(self, t: int) -> np.ndarray:
        """Indices (in issue order) of the operations of thread ``t``."""
        return np.flatnonzero(self.thread == t)


def generate(task: Mapping[str, Any], seed: int = 0, max_ops: int | None = None) -> Workload:
    """Generate the operations of a workload (deterministic for ``(task, seed)``).

    ``max_ops`` caps the number of operations (the volume is cut, never the pattern's shape), so
    that any task of a sampled task space runs in bounded time.
    """
    f = complete_features(task)
    rng = np.random.default_rng([int(seed), 0x10ACCE1])
    op = f["op_kb"] * KIB
    file_size = f["file_mb"] * MIB
    nb = file_size // op  # blocks of op size in the file
    n_leads = min(f["n_leads"], nb)
    region = nb // n_leads  # blocks per lead region
    base = np.arange(n_leads, dtype=np.int64) * region
    s_max = int(min(max(f["scatter_kb"] * KIB // op, 1), region))
    if f["random_scatter"]:
        scatter = rng.integers(1, s_max + 1, size=n_leads)
        lo = max(1, f["ops_per_lead"] // 5)
        reps = rng.integers(lo, f["ops_per_lead"] + 1, size=n_leads)
    else:
        scatter = np.full(n_leads, s_max, dtype=np.int64)
        reps = np.full(n_leads, f["ops_per_lead"], dtype=np.int64)
    n_ops = max(1, f["volume_mb"] * MIB // op)
    if max_ops is not None:
        n_ops = min(n_ops, int(max_ops))
    advance = f["lead_advance_kb"] * KIB  # bytes
    chunks: list[np.ndarray] = []
    leads: list[np.ndarray] = []
    done = 0
    visit = 0
    while done < n_ops:
        for i in range(n_leads):
            if done >= n_ops:
                break
            room = region - scatter[i] + 1
            pos = ((visit * advance) // op) % room
            k = int(min(reps[i], n_ops - done))
            if f["sequential"]:
                start = (visit * int(reps[i])) % int(scatter[i]) if advance == 0 else 0
                blk = (start + np.arange(k)) % scatter[i]
            else:
                blk = rng.integers(0, scatter[i], size=k)
            chunks.append(base[i] + pos + blk)
            leads.append(np.full(k, i, dtype=np.int64))
            done += k
        visit += 1
    blocks = np.concatenate(chunks).astype(np.int64)
    lead = np.concatenate(leads)
    is_read = rng.random(blocks.shape[0]) < f["read_fraction"]
    n_threads = int(min(f["threads"], n_leads))
    return Workload(
        features=f,
        file_size=int(file_size),
        op_size=int(op),
        offsets=blocks * op,
        is_read=is_read,
        thread=lead % n_threads,
        lead=lead,
        n_threads=n_threads,
    )
