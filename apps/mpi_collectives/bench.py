"""Collective microbenchmark, run under ``mpiexec -n P python bench.py COLL SIZE [options]``.

This file is a script executed on every MPI rank; it is also importable (``measure`` and the
argument parser) but imports mpi4py only inside :func:`main`, so importing it never starts MPI.

What it measures
----------------
One MPI collective (``allreduce``, ``bcast``, ``reduce``, ``allgather`` or ``alltoall``) on
float64 numpy buffers through mpi4py's upper-case (buffer) API. ``SIZE`` is in bytes and is
rounded to a whole number of float64 elements (at least one):

* allreduce, reduce, bcast: the buffer each rank contributes / receives has SIZE bytes;
* allgather: each rank contributes SIZE bytes (receives P * SIZE);
* alltoall: each rank sends SIZE bytes to every rank (buffers of P * SIZE bytes), the
  per-destination convention MPICH's own thresholds use.

Procedure: one untimed call (connection set-up), three probe calls (the fastest of their
per-call maxima sizes the run), ``n_warm`` warm-up calls, then ``n_iter`` timed calls. Every timed call is
preceded by a barrier so that calls do not overlap; the time of call i is the maximum over
ranks of that rank's wall time (``MPI.Wtime``) for call i, collected once at the end with
``Gather`` (a collective that the algorithm variables under test do not touch). Iteration
counts adapt so that the timed phase lasts about ``--target`` seconds: tiny messages get up to
``--max-iters`` iterations, big ones at least ``--min-iters`` (fewer, but at least 3, when that
would take more than ``--max-time`` seconds). All ranks run the same counts
(rank 0 decides and scatters them), so no rank can deadlock waiting for another.

Reported value: the JSON line printed by rank 0 has ``time`` = the *minimum* of the
per-iteration maxima (seconds), plus ``median``, ``p25``, ``p75``, ``mean`` and ``n_iter``.
Why the minimum: on this shared, oversubscribed machine other jobs only ever *add* time (a rank
preempted for a scheduler slice inflates that iteration's maximum), so the noise is one-sided and
heavy-tailed; the minimum over many iterations is the statistic closest to the collective's own
cost and, measured here under a load average of 5-7 on 2 cores, the most repeatable one from
run to run (README.md has the numbers; the Active Harmony paper argues the same for heavy-tailed
run times). ``--stat median`` reports the median instead (what an application calling the
collective repeatedly on a quiet machine sees).

MPICH reports a forced algorithm that cannot apply to the call's arguments on stderr when
``MPIR_CVAR_COLLECTIVE_FALLBACK=print`` (the launcher sets it). The script captures its own
stderr (file descriptor 2) around the warm-up and timed calls and counts those reports in
``fallbacks``: a non-zero count means MPICH ran its default algorithm instead of the forced one.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable, Sequence

COLLECTIVES = ("allreduce", "bcast", "reduce", "allgather", "alltoall")
STATS = ("min", "median")
# MPICH prints "<Coll> <algorithm> cannot be applied." when it falls back (COLLECTIVE_FALLBACK=print).
FALLBACK_MARK = "cannot be applied"


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="time one MPI collective (run under mpiexec)")
    p.add_argument("coll", choices=COLLECTIVES)
    p.add_argument("size", type=int, help="message size in bytes (see module docstring)")
    p.add_argument("--target", type=float, default=0.25, help="seconds of timed iterations (approx.)")
    p.add_argument("--warm-fraction", type=float, default=0.2, help="warm-up time as a fraction of --target")
    p.add_argument("--min-iters", type=int, default=20)
    p.add_argument("--max-iters", type=int, default=2000)
    p.add_argument("--max-time", type=float, default=2.0,
                   help="cap on the timed phase for very slow configurations (seconds)")
    p.add_argument("--stat", choices=STATS, default="min")
    p.add_argument("--no-capture", action="store_true", help="do not capture stderr (no fallback count)")
    a = p.parse_args(argv)
    if a.size < 1:
        p.error(f"size must be >= 1 byte, got {a.size}")
    if not (a.target > 0 and 0 <= a.warm_fraction):
        p.error("--target must be > 0 and --warm-fraction >= 0")
    if not (1 <= a.min_iters <= a.max_iters):
        p.error("need 1 <= --min-iters <= --max-iters")
    return a


def iteration_counts(probe: float, target: float, warm_fraction: float, min_iters: int,
                     max_iters: int, max_time: float = 2.0) -> tuple[int, int]:
    """(n_warm, n_iter) for a collective whose slowest rank took ``probe`` seconds per call.

    ``n_iter`` aims at ``target`` seconds, within [min_iters, max_iters]; a configuration so
    slow that ``min_iters`` calls would exceed ``max_time`` seconds gets fewer (at least 3).
    """
    probe = max(probe, 1e-7)
    n_iter = int(min(max_iters, max(min_iters, round(target / probe))))
    n_iter = max(3, min(n_iter, int(max_time / probe)))
    n_warm = int(min(max_iters, max(2, round(warm_fraction * target / probe))))
    return n_warm, n_iter


def _operation(comm, coll: str, count: int) -> Callable[[], None]:
    """The zero-argument call to time, with its buffers allocated and touched."""
    import numpy as np
    from mpi4py import MPI

    p = comm.Get_size()
    if coll == "allreduce":
        s, r = np.ones(count), np.empty(count)
        return lambda: comm.Allreduce(s, r, op=MPI.SUM)
    if coll == "reduce":
        s, r = np.ones(count), np.empty(count)
        return lambda: comm.Reduce(s, r, op=MPI.SUM, root=0)
    if coll == "bcast":
        b = np.ones(count)
        return lambda: comm.Bcast(b, root=0)
    if coll == "allgather":
        s, r = np.ones(count), np.empty(count * p)
        return lambda: comm.Allgather(s, r)
    if coll == "alltoall":
        s, r = np.ones(count * p), np.empty(count * p)
        return lambda: comm.Alltoall(s, r)
    raise ValueError(f"unknown collective {coll!r}; expected one of {COLLECTIVES}")


class _CaptureFd2:
    """Redirect file descriptor 2 (C and Python stderr) to a temporary file while active."""

    def __enter__(self) -> "_CaptureFd2":
        sys.stderr.flush()
        self._file = tempfile.TemporaryFile(mode="w+b")
        self._saved = os.dup(2)
        os.dup2(self._file.fileno(), 2)
        self.text = ""
        return self

    def __exit__(self, *exc) -> None:
        sys.stderr.flush()
        os.dup2(self._saved, 2)
        os.close(self._saved)
        self._file.seek(0)
        self.text = self._file.read().decode("utf-8", "replace")
        self._file.close()


def measure(comm, coll: str, size: int, target: float = 0.25, warm_fraction: float = 0.2,
            min_iters: int = 20, max_iters: int = 2000, stat: str = "min",
            capture: bool = True, max_time: float = 2.0) -> dict | None:
    """Time ``coll`` on ``comm``; return the result dict on rank 0 and ``None`` elsewhere."""
    import numpy as np
    from mpi4py import MPI

    rank, nprocs = comm.Get_rank(), comm.Get_size()
    count = max(1, int(round(size / 8)))
    op = _operation(comm, coll, count)

    def timed(n: int) -> np.ndarray:
        out = np.empty(n)
        for i in range(n):
            comm.Barrier()
            t0 = MPI.Wtime()
            op()
            out[i] = MPI.Wtime() - t0
        return out

    def slowest(times: np.ndarray) -> np.ndarray:
        """(n,) per-iteration maximum over ranks, on rank 0 (zeros elsewhere)."""
        allt = np.empty((nprocs, times.size)) if rank == 0 else None
        comm.Gather(times, allt, root=0)
        return allt.max(axis=0) if rank == 0 else np.zeros(times.size)

    cap = _CaptureFd2() if capture else None
    if cap is not None:
        cap.__enter__()
    try:
        op()  # untimed: first-touch and connection set-up
        probe = slowest(timed(3))
        counts = np.zeros((nprocs, 2), dtype=np.int64)
        if rank == 0:
            counts[:] = iteration_counts(float(probe.min()), target, warm_fraction, min_iters,
                                         max_iters, max_time)
        mine = np.zeros(2, dtype=np.int64)
        comm.Scatter(counts, mine, root=0)
        n_warm, n_iter = int(mine[0]), int(mine[1])
        wall0 = time.perf_counter()
        timed(n_warm)
        per_iter = slowest(timed(n_iter))
        wall = time.perf_counter() - wall0
    finally:
        if cap is not None:
            cap.__exit__(None, None, None)
    fallbacks = cap.text.count(FALLBACK_MARK) if cap is not None else -1
    nfb = np.array([fallbacks], dtype=np.int64)
    allfb = np.zeros(nprocs, dtype=np.int64)
    comm.Gather(nfb, allfb, root=0)
    if rank != 0:
        return None
    med = float(np.median(per_iter))
    mn = float(per_iter.min())
    return {
        "time": med if stat == "median" else mn,
        "stat": stat,
        "coll": coll,
        "size": int(size),
        "bytes": int(count * 8),
        "nprocs": int(nprocs),
        "n_warm": n_warm,
        "n_iter": n_iter,
        "min": mn,
        "median": med,
        "p25": float(np.percentile(per_iter, 25)),
        "p75": float(np.percentile(per_iter, 75)),
        "mean": float(per_iter.mean()),
        "wall": wall,
        "fallbacks": int(allfb.max()) if fallbacks >= 0 else -1,
        "stderr_tail": cap.text[-400:] if cap is not None and fallbacks else "",
    }


def main(argv: Sequence[str] | None = None) -> int:
    a = parse_args(argv)
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    res = measure(comm, a.coll, a.size, target=a.target, warm_fraction=a.warm_fraction,
                  min_iters=a.min_iters, max_iters=a.max_iters, stat=a.stat,
                  capture=not a.no_capture, max_time=a.max_time)
    if res is not None:
        res["mpi_library"] = MPI.Get_library_version().splitlines()[0].strip()
        sys.stdout.write(json.dumps(res) + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
