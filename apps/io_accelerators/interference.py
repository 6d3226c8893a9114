"""Background I/O interference: another process writing a scratch file in bursts.

The thesis (``shared/seeds/001``, ch. 5) tunes under injected interference: a concurrent I/O
application arriving periodically. Here a separate process (so that it does not share the tuned
process's interpreter lock) alternates *bursts* and *pauses*:

* during a burst of ``U(burst_lo, burst_hi)`` seconds it writes ``block_kb`` blocks round robin over
  a scratch file of ``file_mb`` MiB (overwritten in place, so the disk use stays constant) and calls
  ``fsync`` after every ``fsync_mb`` MiB and at the end of the burst; the written pages are then
  dropped from the page cache (``POSIX_FADV_DONTNEED``) so the interference does not also shrink
  the cache the tuned workload sees;
* then it sleeps ``U(pause_lo, pause_hi)`` seconds.

The durations come from a generator seeded by ``seed`` (:func:`schedule`), so two runs with the same
spec follow the same on/off pattern (the bytes written per burst depend on the disk's speed).
:class:`BackgroundIO` runs it as a context manager and returns what it did (bytes, bursts, busy
seconds, throughput) so that a benchmark can state the intensity it injected.
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

log = logging.getLogger(__name__)

__all__ = ["InterferenceSpec", "schedule", "run_interference", "BackgroundIO"]

KIB = 1024
MIB = 1024 * 1024


@dataclass(frozen=True)
class InterferenceSpec:
    """Intensity of the background writer (sizes in KiB / MiB, durations in seconds)."""

    file_mb: int = 256
    block_kb: int = 1024
    fsync_mb: int = 16
    burst_lo: float = 0.5
    burst_hi: float = 2.0
    pause_lo: float = 0.5
    pause_hi: float = 3.0
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("file_mb", "block_kb", "fsync_mb"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"InterferenceSpec.{name} must be an integer >= 1, got {v!r}")
        if self.block_kb * KIB > self.file_mb * MIB:
            raise ValueError(f"InterferenceSpec: block_kb={self.block_kb} exceeds file_mb={self.file_mb}")
        for lo, hi in (("burst_lo", "burst_hi"), ("pause_lo", "pause_hi")):
            a, b = getattr(self, lo), getattr(self, hi)
            if not (isinstance(a, (int, float)) and isinstance(b, (int, float))) or not 0 <= a <= b:
                raise ValueError(f"InterferenceSpec: need 0 <= {lo} <= {hi}, got {a!r}, {b!r}")
        if self.burst_hi <= 0:
            raise ValueError("InterferenceSpec: burst_hi must be > 0")

    @property
    def duty_cycle(self) -> float:
        """Expected fraction of the time spent in bursts."""
        b = (self.burst_lo + self.burst_hi) / 2
        return b / (b + (self.pause_lo + self.pause_hi) / 2)


def schedule(spec: InterferenceSpec, n: int) -> list[tuple[float, float]]:
    """The first ``n`` (burst seconds, pause seconds) pairs of ``spec``'s on/off pattern."""
    rng = np.random.default_rng([int(spec.seed), 0x10B6])
    out = []
    for _ in range(int(n)):
        out.append((float(rng.uniform(spec.burst_lo, spec.burst_hi)),
                    float(rng.uniform(spec.pause_lo, spec.pause_hi))))
    return out


def run_interference(path: str | os.PathLike, spec: InterferenceSpec, stop: Any = None,
                     max_seconds: float | None = None, ready: Any = None) -> dict[str, Any]:
    """Write bursts to ``path`` until ``stop`` (an Event-like object) is set or ``max_seconds`` pass.

    ``ready`` (an Event-like object, optional) is set once the scratch file exists, just before the
    first burst.

    Returns the counters: ``bytes`` written, ``bursts`` started, ``busy_s`` (seconds in bursts),
    ``wall_s``, ``mb_per_s_busy`` (throughput within bursts), ``duty_cycle`` (measured).
    """
    size = spec.file_mb * MIB
    block = spec.block_kb * KIB
    buf = np.random.default_rng([int(spec.seed), 0xB10C]).bytes(block)
    fsync_every = max(1, (spec.fsync_mb * MIB) // block)
    nblocks = size // block
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    written = bursts = 0
    busy = 0.0
    k = 0
    t_start = time.perf_counter()

    def stopped() -> bool:
        if stop is not None and stop.is_set():
            return True
        return max_seconds is not None and time.perf_counter() - t_start >= max_seconds

    def wait(seconds: float) -> None:
        end = time.perf_counter() + seconds
        while not stopped() and time.perf_counter() < end:
            time.sleep(min(0.05, max(0.0, end - time.perf_counter())))

    try:
        os.ftruncate(fd, size)
        if ready is not None:
            ready.set()
        rng = np.random.default_rng([int(spec.seed), 0x10B6])
        while not stopped():
            burst = float(rng.uniform(spec.burst_lo, spec.burst_hi))
            pause = float(rng.uniform(spec.pause_lo, spec.pause_hi))
            bursts += 1
            t0 = time.perf_counter()
            n = 0
            while not stopped() and time.perf_counter() - t0 < burst:
                os.pwrite(fd, buf, (k % nblocks) * block)
                k += 1
                n += 1
                written += block
                if n % fsync_every == 0:
                    os.fsync(fd)
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            busy += time.perf_counter() - t0
            wait(pause)
    finally:
        os.close(fd)
    wall = time.perf_counter() - t_start
    return {"bytes": written, "bursts": bursts, "busy_s": busy, "wall_s": wall,
            "mb_per_s_busy": written / MIB / busy if busy > 0 else 0.0,
            "duty_cycle": busy / wall if wall > 0 else 0.0}


def _child(path: str, spec_d: dict, stop: Any, ready: Any, out: Any) -> None:  # pragma: no cover - child
    try:
        out.put(run_interference(path, InterferenceSpec(**spec_d), stop, ready=ready))
    except BaseException as exc:  # report instead of dying silently
        out.put({"error": f"{type(exc).__name__}: {exc}"})


class BackgroundIO:
    """``with BackgroundIO(workdir, spec) as bg: ...`` runs the writer in a separate process.

    After the block, ``bg.stats`` holds the counters of :func:`run_interference` plus the spec.
    The scratch file (``<workdir>/interference_<file_mb>MiB.bin``) is removed at exit unless
    ``keep_file``.
    """

    def __init__(self, workdir: str | os.PathLike, spec: InterferenceSpec = InterferenceSpec(),
                 keep_file: bool = False) -> None:
        if not isinstance(spec, InterferenceSpec):
            raise TypeError(f"spec must be an InterferenceSpec, got {spec!r}")
        self.workdir = Path(workdir)
        self.spec = spec
        self.keep_file = bool(keep_file)
        self.path = self.workdir / f"interference_{spec.file_mb}MiB.bin"
        self.stats: dict[str, Any] = {}
        self._proc: Any = None

    def __enter__(self) -> BackgroundIO:
        self.workdir.mkdir(parents=True, exist_ok=True)
        ctx = mp.get_context("spawn")
        self._stop = ctx.Event()
        self._ready = ctx.Event()
        self._out = ctx.Queue()
        self._proc = ctx.Process(target=_child, daemon=True,
                                 args=(str(self.path), asdict(self.spec), self._stop, self._ready, self._out))
        self._proc.start()
        if not self._ready.wait(timeout=60):  # the writer is running when the block starts
            self._stop.set()
            self._proc.join(timeout=5)
            raise RuntimeError("the background I/O writer did not start within 60 s")
        log.info("background I/O started (pid %s): %s", self._proc.pid, self.spec)
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        try:
            stats = self._out.get(timeout=60)
        except Exception:  # noqa: BLE001 - queue.Empty or a broken child
            stats = {"error": "no report from the background writer"}
        self._proc.join(timeout=10)
        if self._proc.is_alive():
            self._proc.terminate()
            self._proc.join(timeout=5)
        self.stats = {**stats, "spec": asdict(self.spec)}
        if not self.keep_file:
            try:
                self.path.unlink()
            except FileNotFoundError:
                pass
        log.info("background I/O stopped: %s", self.stats)
