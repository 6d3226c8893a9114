"""Data files for the workloads, cold-cache helpers and aligned (O_DIRECT) reads."""

from __future__ import annotations

import logging
import mmap
import os
import tempfile
from pathlib import Path

import numpy as np

log = logging.getLogger(__name__)

MIB = 1024 * 1024
ALIGN = 4096

__all__ = ["default_workdir", "prepare_file", "drop_cache", "chunk_bytes", "DirectReader"]


def default_workdir() -> Path:
    """``$GPTASK_IO_WORKDIR`` or ``<tmp>/gptask_io`` (created if missing)."""
    d = Path(os.environ.get("GPTASK_IO_WORKDIR") or Path(tempfile.gettempdir()) / "gptask_io")
    d.mkdir(parents=True, exist_ok=True)
    return d


def chunk_bytes(seed: int, k: int, size: int = MIB) -> bytes:
    """The deterministic content of the ``k``-th MiB of a data file made with ``seed``."""
    return np.random.default_rng([int(seed), int(k), 0xF11E]).bytes(size)


def prepare_file(workdir: str | os.PathLike, size: int, seed: int = 0, name: str | None = None) -> Path:
    """A file of ``size`` bytes (a multiple of 1 MiB) with deterministic content, made once.

    Reused when a file of the right size already exists (its content is not re-checked: the
    burst buffer overwrites parts of it, which no timing depends on).
    """
    if size <= 0 or size % MIB:
        raise ValueError(f"prepare_file: size must be a positive multiple of 1 MiB, got {size}")
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    path = workdir / (name or f"data_{size // MIB}MiB_s{seed}.bin")
    if path.exists() and path.stat().st_size == size:
        return path
    tmp = path.with_suffix(".part")
    log.info("writing %s (%d MiB)", path, size // MIB)
    with open(tmp, "wb") as fh:
        for k in range(size // MIB):
            fh.write(chunk_bytes(seed, k))
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    return path


def drop_cache(path: str | os.PathLike) -> None:
    """Write back then drop the file's pages from the OS page cache (a cold-cache run).

    ``posix_fadvise(DONTNEED)`` only drops clean pages, hence the ``fsync`` first.
    """
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


class DirectReader:
    """``read(offset, length) -> bytes`` through ``O_DIRECT`` (page cache bypassed).

    Offsets and lengths need not be aligned: the aligned covering range is read into an
    anonymous ``mmap`` (page aligned) and sliced.
    """

    def __init__(self, path: str | os.PathLike) -> None:
        if not hasattr(os, "O_DIRECT"):
            raise RuntimeError("O_DIRECT is not available on this platform")
        self.fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
        self.size = os.fstat(self.fd).st_size

    def read(self, offset: int, length: int) -> bytes:
        a0 = offset - offset % ALIGN
        a1 = min(-(-(offset + length) // ALIGN) * ALIGN, -(-self.size // ALIGN) * ALIGN)
        buf = mmap.mmap(-1, a1 - a0)
        try:
            n = os.preadv(self.fd, [buf], a0)
            return bytes(buf[offset - a0: min(offset - a0 + length, n)])
        finally:
            buf.close()

    def close(self) -> None:
        os.close(self.fd)
