"""A RAM burst buffer in the manner of Atos's Smart Burst Buffer (thesis, sec. 2.3).

Application threads call :meth:`BurstBuffer.write` / :meth:`BurstBuffer.read`. Each request goes
to a queue served by ``workers`` threads; a write is acknowledged (the call returns) once a worker
has copied it into the buffer. The buffer holds at most ``capacity`` bytes in blocks of
``block_size`` bytes. When the dirty (not yet written) part reaches ``threshold * capacity``,
``destagers`` threads take batches of dirty blocks, write them to the file (``pwritev`` of
contiguous runs, then ``fdatasync``) and mark them clean. Clean blocks stay for reuse (reads hit
them) until their room is needed. Writers wait when the buffer is full of dirty data: the buffer
never exceeds its capacity.

Durability: :meth:`flush` writes every buffered byte and waits for it; :meth:`close` serves every
queued request, flushes, then stops the threads. Using the buffer as a context manager closes it
even when the block raises (e.g. ``KeyboardInterrupt``), so no acknowledged byte is lost.

Consistency: a block is written by one destager at a time, from a snapshot taken under the lock;
a write landing on a block being destaged marks it dirty again, so the newer data is written
after. Reads see buffered data first, the file otherwise.

Optional second tier (``tier2_dir``): the RAM destagers then write to a staging file of the same
size in that directory (e.g. on a faster or larger device; no ``fdatasync``), bounded by
``tier2_capacity`` bytes; ``tier2_destagers`` threads copy staged blocks to the final file (with
``fdatasync``) once ``tier2_threshold`` of the tier is used, and on flush. A block staged again
before it was copied is copied again (versions are counted), reads of blocks not in RAM look in
the staging file first, and the staging file is deleted by a clean close. This mirrors the SBB's
RAM -> NVMe -> parallel file system path (thesis, fig. 2.6); on a machine with one disk it only adds
a copy.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field

__all__ = ["BurstBuffer", "BufferStats", "SBB_PARAMS"]

log = logging.getLogger(__name__)

SBB_PARAMS = ("workers", "destagers", "buffer_mb", "threshold")


@dataclass
class BufferStats:
    peak_bytes: int = 0
    writes: int = 0
    reads: int = 0
    read_hit_bytes: int = 0
    read_bytes: int = 0
    stall_seconds: float = 0.0
    destaged_bytes: int = 0
    destage_batches: int = 0
    tier2_bytes: int = 0
    tier2_destaged_bytes: int = 0
    errors: list = field(default_factory=list)

    def as_dict(self) -> dict:
        d = dict(self.__dict__)
        d["errors"] = [str(e) for e in self.errors]
        d["read_hit_rate"] = self.read_hit_bytes / self.read_bytes if self.read_bytes else 0.0
        return d


class _Block:
    __slots__ = ("data", "dirty", "gen", "inflight")

    def __init__(self, data: bytearray, dirty: bool) -> None:
        self.data = data
        self.dirty = dirty
        self.gen = 0
        self.inflight = False


class _Request:
    __slots__ = ("kind", "offset", "payload", "done", "result", "error")

    def __init__(self, kind: str, offset: int, payload) -> None:
        self.kind = kind
        self.offset = offset
        self.payload = payload
        # acknowledged by releasing this lock: a C-level lock, so that an interrupt (KeyboardInterrupt)
        # in the application thread can never leave a Python-level lock held (see _submit)
        self.done = threading.Lock()
        self.done.acquire()
        self.result = None
        self.error: BaseException | None = None


class BurstBuffer:
    """A bounded write-back buffer in front of one file.

    Parameters: ``path`` (an existing file; it is not truncated), ``capacity`` and ``block_size``
    (bytes; capacity is rounded down to whole blocks, at least one), ``workers`` and ``destagers``
    (threads, >= 1), ``threshold`` in (0, 1], ``batch_bytes`` the most a destager writes per
    ``fdatasync``; ``tier2_dir``, ``tier2_capacity`` (bytes, >= batch_bytes), ``tier2_threshold``,
    ``tier2_destagers``: the optional second tier (see the module docstring).
    """

    def __init__(
        self,
        path: str | os.PathLike,
        capacity: int,
        block_size: int,
        workers: int = 10,
        destagers: int = 10,
        threshold: float = 0.8,
        batch_bytes: int = 4 * 1024 * 1024,
        tier2_dir: str | os.PathLike | None = None,
        tier2_capacity: int = 0,
        tier2_threshold: float = 0.8,
        tier2_destagers: int = 2,
    ) -> None:
        for name, v in (("capacity", capacity), ("block_size", block_size), ("workers", workers),
                        ("destagers", destagers), ("batch_bytes", batch_bytes)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"BurstBuffer: {name} must be a positive integer, got {v!r}")
        if not 0.0 < float(threshold) <= 1.0:
            raise ValueError(f"BurstBuffer: threshold must lie in (0, 1], got {threshold}")
        if capacity < block_size:
            raise ValueError(f"BurstBuffer: capacity ({capacity}) must hold at least one block ({block_size})")
        if tier2_dir is not None:
            if isinstance(tier2_capacity, bool) or not isinstance(tier2_capacity, int) or tier2_capacity < batch_bytes:
                raise ValueError(f"BurstBuffer: tier2_capacity must be an integer >= batch_bytes ({batch_bytes}), "
                                 f"got {tier2_capacity!r}")
            if not 0.0 < float(tier2_threshold) <= 1.0:
                raise ValueError(f"BurstBuffer: tier2_threshold must lie in (0, 1], got {tier2_threshold}")
            if isinstance(tier2_destagers, bool) or not isinstance(tier2_destagers, int) or tier2_destagers < 1:
                raise ValueError(f"BurstBuffer: tier2_destagers must be a positive integer, got {tier2_destagers!r}")
        self.block_size = block_size
        self.n_blocks = capacity // block_size
        self.capacity = self.n_blocks * block_size
        self.threshold = float(threshold)
        self._trigger = max(1, int(self.threshold * self.n_blocks))  # dirty blocks that start destaging
        self._batch = max(1, batch_bytes // block_size)
        self.fd = os.open(path, os.O_RDWR)
        self.file_size = os.fstat(self.fd).st_size
        # optional second tier: a file of the same size in another directory (e.g. a faster disk);
        # _t2[k] = version of block k staged there and not yet copied to the final file
        self.t2_fd: int | None = None
        self._t2: OrderedDict[int, int] = OrderedDict()
        self._t2_inflight: set[int] = set()
        self._t2_reserved = 0
        self._t2_waiters = 0
        n_t2_threads = 0
        if tier2_dir is not None:
            t2_path = os.path.join(os.fspath(tier2_dir), os.path.basename(os.fspath(path)) + ".tier2")
            self.t2_fd = os.open(t2_path, os.O_RDWR | os.O_CREAT, 0o600)
            os.ftruncate(self.t2_fd, self.file_size)
            self.t2_path = t2_path
            self._t2_blocks = max(self._batch, tier2_capacity // block_size)
            self._t2_trigger = max(1, int(float(tier2_threshold) * self._t2_blocks))
            n_t2_threads = tier2_destagers
        self.stats = BufferStats()
        self._blocks: OrderedDict[int, _Block] = OrderedDict()  # LRU order
        self._dirty: OrderedDict[int, None] = OrderedDict()  # dirty, not in flight, FIFO
        self._clean: OrderedDict[int, None] = OrderedDict()  # clean blocks, LRU order
        self._n_inflight = 0
        self._wseq = 0  # writes applied so far; _last_write[k]: the sequence number of k's latest
        self._last_write: dict[int, int] = {}
        self._flushing = 0
        self._stopping = False
        self._closed = False
        self._cond = threading.Condition()
        self._requests: queue.SimpleQueue = queue.SimpleQueue()  # C-level: interrupt safe
        self._sub_lock = threading.Lock()
        self._n_submitted = 0
        self._n_served = 0
        self._workers = [threading.Thread(target=self._worker, name=f"bb-worker-{i}", daemon=True)
                         for i in range(workers)]
        self._destagers = [threading.Thread(target=self._destager, name=f"bb-destager-{i}", daemon=True)
                           for i in range(destagers)]
        self._destagers += [threading.Thread(target=self._tier2_destager, name=f"bb-t2-destager-{i}", daemon=True)
                            for i in range(n_t2_threads)]
        for t in self._workers + self._destagers:
            t.start()

    # -- application side ----------------------------------------------------------------------
    def _submit(self, kind: str, offset: int, payload):
        if self._closed:
            raise RuntimeError("BurstBuffer: the buffer is closed")
        req = _Request(kind, offset, payload)
        # Only C-level primitives on this path (SimpleQueue, a plain Lock): an interrupt raised here
        # cannot leave a lock held that the workers or close() need.
        with self._sub_lock:
            self._requests.put(req)
            self._n_submitted += 1
        req.done.acquire()
        if req.error is not None:
            raise RuntimeError(f"BurstBuffer: {kind} at offset {offset} failed: {req.error}") from req.error
        return req.result

    def write(self, offset: int, data) -> None:
        """Write ``data`` (bytes-like) at ``offset``; returns once the data sits in the buffer."""
        n = len(data)
        if offset < 0 or offset + n > self.file_size:
            raise ValueError(f"BurstBuffer.write of [{offset}, {offset + n}) outside the file (size {self.file_size})")
        self._submit("w", offset, data)

    def read(self, offset: int, length: int) -> bytes:
        """Read ``length`` bytes at ``offset``, buffered data first."""
        if offset < 0 or length < 0 or offset + length > self.file_size:
            raise ValueError(f"BurstBuffer.read of [{offset}, {offset + length}) outside the file (size {self.file_size})")
        return self._submit("r", offset, length)

    def flush(self) -> None:
        """Wait until every queued request is served and every buffered byte is on disk."""
        with self._cond:
            while self._n_served < self._n_submitted and not self.stats.errors:
                self._cond.wait()
            self._flushing += 1
            self._cond.notify_all()
            try:
                while (self._dirty or self._n_inflight or self._t2 or self._t2_inflight
                       or self._t2_reserved) and not self.stats.errors:
                    self._cond.wait()
            finally:
                self._flushing -= 1
        if self.stats.errors:
            raise RuntimeError(f"BurstBuffer: destaging failed: {self.stats.errors[0]}")
        os.fsync(self.fd)

    def close(self) -> None:
        """Serve the queue, flush, stop the threads and close the file. Safe to call twice."""
        if self._closed:
            return
        try:
            self.flush()
        finally:
            self._closed = True
            # workers first (they serve whatever is still queued, FIFO before their sentinel), then
            # the destagers, which drain every dirty or staged block before they exit
            for _ in self._workers:
                self._requests.put(None)
            for t in self._workers:
                t.join()
            with self._cond:
                self._stopping = True
                self._cond.notify_all()
            for t in self._destagers:
                t.join()
            if not self.stats.errors:
                self._drain_sync()
            os.close(self.fd)
            if self.t2_fd is not None:
                os.close(self.t2_fd)
                if not self.stats.errors:
                    os.unlink(self.t2_path)  # fully copied to the final file

    def __enter__(self) -> "BurstBuffer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def bytes_used(self) -> int:
        return len(self._blocks) * self.block_size

    @property
    def dirty_bytes(self) -> int:
        with self._cond:
            return (len(self._dirty) + self._n_inflight) * self.block_size

    # -- workers -------------------------------------------------------------------------------
    def _drain_sync(self) -> None:
        """After every thread stopped: write anything left (a safety net; normally nothing is)."""
        left = sorted(self._t2)
        if left:
            log.warning("burst buffer: %d staged blocks left at close, copying them now", len(left))
            self._write_blocks(self.fd, [(k, os.pread(self.t2_fd, self.block_size, k * self.block_size))
                                         for k in left])
            self._t2.clear()
        dirty = sorted(k for k, b in self._blocks.items() if b.dirty)
        if dirty:
            log.warning("burst buffer: %d dirty blocks left at close, writing them now", len(dirty))
            self._write_blocks(self.fd, [(k, bytes(self._blocks[k].data)) for k in dirty])
            for k in dirty:
                self._blocks[k].dirty = False
            self._dirty.clear()
        os.fsync(self.fd)

    def _worker(self) -> None:
        while True:
            req = self._requests.get()
            if req is None:
                return
            try:
                if req.kind == "w":
                    self._do_write(req.offset, req.payload)
                else:
                    req.result = self._do_read(req.offset, req.payload)
            except BaseException as e:  # noqa: BLE001 - handed back to the caller
                req.error = e
            finally:
                with self._cond:
                    self._n_served += 1
                    self._cond.notify_all()
                req.done.release()

    def _make_room(self) -> bool:
        """Under the lock: room for one more block, evicting a clean block if needed."""
        if len(self._blocks) < self.n_blocks:
            return True
        if self._clean:
            k, _ = self._clean.popitem(last=False)  # least recently used clean block
            del self._blocks[k]
            return True
        return False

    def _do_write(self, offset: int, data) -> None:
        bs = self.block_size
        mv = memoryview(data).cast("B")
        pos, end = offset, offset + len(mv)
        while pos < end:
            k = pos // bs
            lo = pos - k * bs
            hi = min(end - k * bs, bs)
            piece = mv[pos - offset: pos - offset + (hi - lo)]
            self._put_block(k, lo, piece)
            pos = k * bs + hi

    def _put_block(self, k: int, lo: int, piece) -> None:
        """Copy ``piece`` into block ``k`` at ``lo``, waiting for room if the buffer is full."""
        bs = self.block_size
        t0 = None
        with self._cond:
            while True:
                b = self._blocks.get(k)
                if b is not None:
                    b.data[lo:lo + len(piece)] = piece
                    self._blocks.move_to_end(k)
                    break
                if self._make_room():
                    base = None
                    if len(piece) < bs:
                        # a partial block takes its other bytes from the file; read under the lock, so
                        # that no write of this block can be destaged and evicted meanwhile
                        base = os.pread(self._source(k), bs, k * bs)
                    buf = bytearray(bs) if base is None else bytearray(base.ljust(bs, b"\0"))
                    buf[lo:lo + len(piece)] = piece
                    b = _Block(buf, dirty=False)
                    self._blocks[k] = b
                    break
                if t0 is None:
                    t0 = time.perf_counter()
                self._cond.notify_all()
                self._cond.wait()
            b.gen += 1
            self._wseq += 1
            self._last_write[k] = self._wseq
            self._clean.pop(k, None)
            if not b.dirty:
                b.dirty = True
                if not b.inflight:
                    self._dirty[k] = None
            self.stats.writes += 1
            self.stats.peak_bytes = max(self.stats.peak_bytes, self.bytes_used)
            if t0 is not None:
                self.stats.stall_seconds += time.perf_counter() - t0
            if len(self._dirty) + self._n_inflight >= self._trigger:
                self._cond.notify_all()

    def _source(self, k: int) -> int:
        """Under the lock: the file holding the newest version of a block not in RAM."""
        if self.t2_fd is not None and (k in self._t2 or k in self._t2_inflight):
            return self.t2_fd
        return self.fd

    def _do_read(self, offset: int, length: int) -> bytes:
        bs = self.block_size
        out = []
        pos, end = offset, offset + length
        hit = 0
        while pos < end:
            k = pos // bs
            lo = pos - k * bs
            hi = min(end - k * bs, bs)
            with self._cond:
                seq = self._wseq
                src = self._source(k)
                b = self._blocks.get(k)
                if b is not None:
                    self._blocks.move_to_end(k)
                    if k in self._clean:
                        self._clean.move_to_end(k)
                    chunk = bytes(b.data[lo:hi])
                    hit += hi - lo
            if b is None:
                whole = os.pread(src, bs, k * bs)
                chunk = whole[lo:hi]
                if len(whole) == bs:  # keep it as a clean block when there is room for it
                    with self._cond:
                        # cache it only if no write of this block happened since the file was read
                        if (k not in self._blocks and self._last_write.get(k, 0) <= seq
                                and self._make_room()):
                            self._blocks[k] = _Block(bytearray(whole), dirty=False)
                            self._clean[k] = None
                            self.stats.peak_bytes = max(self.stats.peak_bytes, self.bytes_used)
            out.append(chunk)
            pos = k * bs + hi
        with self._cond:
            self.stats.reads += 1
            self.stats.read_bytes += length
            self.stats.read_hit_bytes += hit
        return b"".join(out)

    # -- destagers -----------------------------------------------------------------------------
    def _take_batch(self) -> list[tuple[int, int, bytes]] | None:
        """Under the lock: wait for work; None means stop."""
        while True:
            if self._dirty and (self._flushing or self._stopping
                                or len(self._dirty) + self._n_inflight >= self._trigger):
                break
            if self._stopping:
                return None
            self._cond.wait()
        keys = []
        while self._dirty and len(keys) < self._batch:
            k, _ = self._dirty.popitem(last=False)
            keys.append(k)
        batch = []
        for k in sorted(keys):
            b = self._blocks[k]
            b.inflight = True
            batch.append((k, b.gen, bytes(b.data)))
        self._n_inflight += len(batch)
        return batch

    def _write_blocks(self, fd: int, blocks: list[tuple[int, bytes]]) -> None:
        """``pwritev`` sorted ``(block index, data)`` pairs to ``fd``, one call per contiguous run."""
        bs = self.block_size
        i = 0
        while i < len(blocks):
            j = i + 1
            while j < len(blocks) and blocks[j][0] == blocks[j - 1][0] + 1:
                j += 1
            start = blocks[i][0] * bs
            bufs = [blocks[m][1] for m in range(i, j)]
            limit = self.file_size - start  # the file's last block may be short
            if sum(len(x) for x in bufs) > limit:
                bufs = [b"".join(bufs)[:limit]]
            total = sum(len(x) for x in bufs)
            n = os.pwritev(fd, bufs, start)
            if n != total:
                raise OSError(f"short write: {n} of {total} bytes at offset {start}")
            i = j

    def _reserve_tier2(self, keys: list[int]) -> int:
        """Under the lock: wait for room for ``keys`` in the second tier; returns the blocks reserved."""
        while True:
            new = sum(1 for k in keys if k not in self._t2)
            if len(self._t2) + self._t2_reserved + new <= self._t2_blocks or self.stats.errors:
                self._t2_reserved += new
                return new
            self._t2_waiters += 1
            self._cond.notify_all()
            self._cond.wait()
            self._t2_waiters -= 1

    def _destager(self) -> None:
        """RAM destager: dirty blocks to the final file, or to the second tier when there is one."""
        bs = self.block_size
        while True:
            with self._cond:
                batch = self._take_batch()
                if batch is None:
                    return
                reserved = self._reserve_tier2([k for k, _, _ in batch]) if self.t2_fd is not None else 0
            error = None
            try:
                target = self.fd if self.t2_fd is None else self.t2_fd
                self._write_blocks(target, [(k, data) for k, _, data in batch])
                if self.t2_fd is None:
                    os.fdatasync(self.fd)  # the second tier is staging: only the final file is synced
            except BaseException as e:  # noqa: BLE001 - reported through flush()/close()
                error = e
                log.error("burst buffer destage failed: %s", e)
            with self._cond:
                self._n_inflight -= len(batch)
                self._t2_reserved -= reserved
                for k, gen, data in batch:
                    b = self._blocks[k]
                    b.inflight = False
                    if error is None and self.t2_fd is not None:
                        # staged in the second tier (a newer version there supersedes the older)
                        self._t2[k] = self._t2.get(k, 0) + 1
                        self._t2.move_to_end(k)
                        self.stats.tier2_bytes += bs
                    if error is None and b.gen == gen:
                        b.dirty = False
                        self._clean[k] = None
                        self.stats.destaged_bytes += bs
                    else:
                        self._dirty[k] = None  # newer data arrived (or the write failed): again
                if error is not None:
                    self.stats.errors.append(error)
                self.stats.destage_batches += 1
                self._cond.notify_all()
            if error is not None:
                return

    def _tier2_destager(self) -> None:
        """Second-tier destager: staged blocks copied to the final file, then forgotten."""
        bs = self.block_size
        while True:
            with self._cond:
                while True:
                    ready = [k for k in self._t2 if k not in self._t2_inflight]
                    if ready and (self._flushing or self._stopping or self._t2_waiters
                                  or len(self._t2) >= self._t2_trigger):
                        break
                    if (self._stopping and not ready and not self._t2_reserved and not self._n_inflight
                            and not self._dirty):
                        return
                    if self.stats.errors:
                        return
                    self._cond.wait()
                keys = sorted(ready[:self._batch])
                batch = [(k, self._t2[k]) for k in keys]
                self._t2_inflight.update(keys)
            error = None
            try:
                blocks = [(k, os.pread(self.t2_fd, bs, k * bs)) for k, _ in batch]
                self._write_blocks(self.fd, blocks)
                os.fdatasync(self.fd)
            except BaseException as e:  # noqa: BLE001 - reported through flush()/close()
                error = e
                log.error("burst buffer second-tier destage failed: %s", e)
            with self._cond:
                for k, gen in batch:
                    self._t2_inflight.discard(k)
                    if error is None and self._t2.get(k) == gen:
                        del self._t2[k]  # a newer staged version (gen changed) is copied again later
                        self.stats.tier2_destaged_bytes += bs
                if error is not None:
                    self.stats.errors.append(error)
                self._cond.notify_all()
            if error is not None:
                return
