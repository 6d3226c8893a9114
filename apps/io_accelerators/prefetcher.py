"""A small-read prefetcher in the manner of Atos's Small Read Optimizer (thesis, sec. 2.2).

The file is cut into zones of ``binsize`` bytes. Every demand read records its zone in a FIFO
window of the last ``sequence_length`` accesses. When a zone reaches ``cluster_threshold``
accesses inside the window, ``prefetch_size`` bytes centred on the zone are read (only the pages
not already cached, in as few requests as possible) into an LRU page cache bounded by
``cache_bytes``; the zone's count then restarts. A zone that triggers again while nothing has
been evicted since its last prefetch costs no lookup at all (its pages are all still there). Demand
reads are served from cached pages where present and from the file for the rest (a read may be
partly a hit). Pages are ``page_size`` bytes (64 KiB); demand misses are not cached: only
prefetched data is (the prefetcher's job is to turn many small reads into few large ones).

The same logic runs without data (``reader=None``): it then only counts what a real run would
read, which the cost model (``model.py``) turns into a predicted time.

Thread safety: all bookkeeping happens under one lock; file reads happen outside it.
"""

from __future__ import annotations

import threading
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["PageCache", "SmallReadPrefetcher", "PrefetchStats", "SRO_PARAMS"]

PAGE = 64 * 1024
SRO_PARAMS = ("binsize", "cluster_threshold", "prefetch_size", "sequence_length")


class PageCache:
    """LRU cache of ``page_size``-byte pages, never holding more than ``budget`` bytes.

    Not thread safe by itself (the prefetcher locks around it). With ``store=False`` pages hold no
    data (``None``), only their accounting.
    """

    def __init__(self, budget: int, page_size: int = PAGE, store: bool = True) -> None:
        if budget < page_size:
            raise ValueError(f"cache budget must hold at least one page ({page_size} B), got {budget}")
        self.budget = int(budget)
        self.page_size = int(page_size)
        self.store = store
        self._pages: OrderedDict[int, bytes | None] = OrderedDict()
        self.bytes_used = 0
        self.peak_bytes = 0
        self.evictions = 0

    def __contains__(self, page: int) -> bool:
        return page in self._pages

    def __len__(self) -> int:
        return len(self._pages)

    def get(self, page: int) -> bytes | None:
        """The page's data (``None`` in accounting mode); marks it most recently used. KeyError if absent."""
        self._pages.move_to_end(page)
        return self._pages[page]

    def put(self, page: int, data: bytes | None) -> None:
        if page in self._pages:
            self._pages.move_to_end(page)
            return
        size = self.page_size
        while self.bytes_used + size > self.budget:
            self._pages.popitem(last=False)
            self.bytes_used -= size
            self.evictions += 1
        self._pages[page] = data if self.store else None
        self.bytes_used += size
        self.peak_bytes = max(self.peak_bytes, self.bytes_used)


@dataclass
class PrefetchStats:
    """Counters of one run (bytes and numbers of requests)."""

    demand_ops: int = 0
    demand_bytes: int = 0
    hit_bytes: int = 0
    miss_requests: int = 0
    miss_bytes: int = 0
    prefetches: int = 0
    prefetch_requests: int = 0
    prefetch_bytes: int = 0

    @property
    def hit_rate(self) -> float:
        """Fraction of demanded bytes served from the cache."""
        return self.hit_bytes / self.demand_bytes if self.demand_bytes else 0.0

    def as_dict(self) -> dict:
        d = dict(self.__dict__)
        d["hit_rate"] = self.hit_rate
        return d


class SmallReadPrefetcher:
    """Demand reads through a zone-density prefetcher.

    Parameters (bytes unless said): ``reader(offset, length) -> bytes`` (e.g. ``os.pread`` on an
    open file) or ``None`` for accounting only; ``file_size``; ``binsize``; ``cluster_threshold``
    (accesses); ``prefetch_size``; ``sequence_length`` (accesses); ``cache_bytes``; ``enabled``
    (False: plain reads, the no-accelerator baseline).
    """

    def __init__(
        self,
        reader: Callable[[int, int], bytes] | None,
        file_size: int,
        binsize: int,
        cluster_threshold: int,
        prefetch_size: int,
        sequence_length: int,
        cache_bytes: int,
        page_size: int = PAGE,
        enabled: bool = True,
    ) -> None:
        for name, v in (("file_size", file_size), ("binsize", binsize), ("cluster_threshold", cluster_threshold),
                        ("prefetch_size", prefetch_size), ("sequence_length", sequence_length),
                        ("cache_bytes", cache_bytes), ("page_size", page_size)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"SmallReadPrefetcher: {name} must be a positive integer, got {v!r}")
        if prefetch_size > cache_bytes:
            raise ValueError(
                f"SmallReadPrefetcher: prefetch_size <= cache_bytes must hold, got {prefetch_size} > {cache_bytes}")
        self.reader = reader
        self.file_size = file_size
        self.binsize = binsize
        self.cluster_threshold = cluster_threshold
        self.prefetch_size = prefetch_size
        self.sequence_length = sequence_length
        self.enabled = enabled
        self.cache = PageCache(cache_bytes, page_size, store=reader is not None)
        self.page_size = page_size
        self.stats = PrefetchStats()
        self._window: deque[tuple[int, int]] = deque()
        self._count: dict[int, int] = {}
        self._gen: dict[int, int] = {}
        self._zone_epoch: dict[int, int] = {}  # zone -> cache eviction count after its last prefetch
        self._lock = threading.Lock()

    # -- bookkeeping -------------------------------------------------------------------------
    def _record(self, offset: int) -> int | None:
        """Record one access; return the zone to prefetch, if this access triggers one."""
        zone = offset // self.binsize
        g = self._gen.get(zone, 0)
        self._window.append((zone, g))
        c = self._count.get(zone, 0) + 1
        self._count[zone] = c
        if len(self._window) > self.sequence_length:
            oz, og = self._window.popleft()
            if self._gen.get(oz, 0) == og:
                self._count[oz] -= 1
                if self._count[oz] == 0:
                    del self._count[oz]
        if c >= self.cluster_threshold:
            self._gen[zone] = g + 1  # earlier accesses of this zone no longer count
            self._count.pop(zone, None)
            return zone
        return None

    def _prefetch_range(self, zone: int) -> tuple[int, int]:
        centre = zone * self.binsize + self.binsize // 2
        start = max(0, min(centre - self.prefetch_size // 2, self.file_size - self.prefetch_size))
        p0 = start // self.page_size
        p1 = -(-min(start + self.prefetch_size, self.file_size) // self.page_size)
        return p0, p1

    @staticmethod
    def _runs(pages: list[int]) -> list[tuple[int, int]]:
        """Contiguous runs ``[a, b)`` of a sorted page list."""
        runs: list[tuple[int, int]] = []
        for p in pages:
            if runs and runs[-1][1] == p:
                runs[-1] = (runs[-1][0], p + 1)
            else:
                runs.append((p, p + 1))
        return runs

    def _prefetch(self, zone: int) -> None:
        p0, p1 = self._prefetch_range(zone)
        with self._lock:
            self.stats.prefetches += 1
            if self._zone_epoch.get(zone) == self.cache.evictions:
                return  # nothing was evicted since this zone was last prefetched: all still cached
            missing = [p for p in range(p0, p1) if p not in self.cache]
        ps = self.page_size
        for a, b in self._runs(missing):
            start, end = a * ps, min(b * ps, self.file_size)
            data = self.reader(start, end - start) if self.reader is not None else None
            with self._lock:
                self.stats.prefetch_requests += 1
                self.stats.prefetch_bytes += end - start
                for p in range(a, b):
                    chunk = None if data is None else data[(p - a) * ps:(p - a + 1) * ps]
                    self.cache.put(p, chunk)
        with self._lock:
            self._zone_epoch[zone] = self.cache.evictions

    # -- the demand path ---------------------------------------------------------------------
    def read(self, offset: int, length: int) -> bytes | None:
        """Read ``length`` bytes at ``offset`` (``None`` in accounting mode)."""
        if offset < 0 or length < 0 or offset + length > self.file_size:
            raise ValueError(f"read of [{offset}, {offset + length}) is outside the file (size {self.file_size})")
        if self.enabled:
            with self._lock:
                zone = self._record(offset)
            if zone is not None:
                self._prefetch(zone)
        ps = self.page_size
        end = offset + length
        pieces: list[tuple[int, int, bytes | None]] = []  # (start, end, data or None for a miss)
        hit = 0
        with self._lock:
            pos = offset
            while pos < end:
                p = pos // ps
                seg_end = min((p + 1) * ps, end)
                if p in self.cache:
                    page = self.cache.get(p)
                    data = None if page is None else page[pos - p * ps: seg_end - p * ps]
                    pieces.append((pos, seg_end, data if data is not None else b""))
                    hit += seg_end - pos
                elif pieces and pieces[-1][2] is None and pieces[-1][1] == pos:
                    pieces[-1] = (pieces[-1][0], seg_end, None)
                else:
                    pieces.append((pos, seg_end, None))
                pos = seg_end
            self.stats.demand_ops += 1
            self.stats.demand_bytes += length
            self.stats.hit_bytes += hit
        out = []
        n_miss = miss_bytes = 0
        for a, b, data in pieces:
            if data is None:
                n_miss += 1
                miss_bytes += b - a
                if self.reader is not None:
                    data = self.reader(a, b - a)
            out.append(data)
        if n_miss:
            with self._lock:
                self.stats.miss_requests += n_miss
                self.stats.miss_bytes += miss_bytes
        if self.reader is None:
            return None
        return b"".join(out)
