"""Output files of a run (plots, model files, summaries), checked before any tuning starts, so a
typo in a path costs nothing instead of an hour of runs, and an output never replaces an input of
the same command (the history, the data) or any history."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path

__all__ = ["check_output_path", "refuse_overwriting_a_history", "same_file", "is_history", "is_history_head", "SQLITE_HEADER"]


#: the first 16 bytes of every SQLite database (a gptask history is one)
SQLITE_HEADER = b"SQLite format 3\0"


def _head(path: str | os.PathLike, n: int) -> bytes:
    """The first ``n`` bytes of ``path`` (b"" when it cannot be read)."""
    try:
        with open(path, "rb") as fh:
            return fh.read(n)
    except OSError:
        return b""


def is_history(path: str | os.PathLike) -> bool:
    """Whether ``path`` is an SQLite database (a gptask history, or another one): its first bytes
    are SQLite's. False for a missing or unreadable file."""
    return is_history_head(_head(path, len(SQLITE_HEADER)))


def is_history_head(head: bytes) -> bool:
    """Whether ``head``, the first bytes of a file (at least 16 of them), are an SQLite database's."""
    return head[:len(SQLITE_HEADER)] == SQLITE_HEADER


def same_file(a: str | os.PathLike, b: str | os.PathLike) -> bool:
    """Whether the paths ``a`` and ``b`` name one file: the same inode when both exist (links
    included), else the same absolute path once symbolic links are resolved."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return Path(a).resolve() == Path(b).resolve()


def refuse_overwriting_a_history(path: str | os.PathLike, what: str) -> None:
    """ValueError when ``path`` exists and is an SQLite database (a gptask history, or another one):
    no output of gptask replaces one."""
    p = Path(path)
    if is_history(p):
        raise ValueError(f"{what} {p} is a gptask history (an SQLite database): gptask does not write over one; "
                         "give another file name")


def check_output_path(path: str | os.PathLike, what: str, suffixes: Iterable[str] | None = None,
                      inputs: Mapping[str, str | os.PathLike | None] | None = None) -> Path:
    """``path`` as a Path if a file can be written there, else ValueError naming ``what`` and why:
    the directory is missing or not writable, the path is a directory, its suffix is not one of
    ``suffixes`` (without dots, e.g. ``{"png", "pdf"}``), it is one of ``inputs`` (what each is ->
    its path, e.g. ``{"the history": "runs.sqlite"}``: by inode or resolved path, so a link to an
    input counts) or it is an existing SQLite database (a history)."""
    p = Path(path)
    for name, source in (inputs or {}).items():
        if source is not None and same_file(p, source):
            raise ValueError(f"{what} {p} is {name} ({source}): writing it would destroy it; give another file name")
    refuse_overwriting_a_history(p, what)
    if p.is_dir():
        raise ValueError(f"{what} {p} is a directory; give a file name")
    parent = p.absolute().parent
    if not parent.is_dir():
        raise ValueError(f"{what} {p}: directory {parent} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise ValueError(f"{what} {p} is not writable")
    if suffixes is not None:
        allowed = sorted({s.lower().lstrip(".") for s in suffixes})
        if p.suffix.lower().lstrip(".") not in allowed:
            raise ValueError(f"{what} {p} must end in one of {', '.join('.' + s for s in allowed)}, got "
                             f"{p.suffix or 'no suffix'}")
    return p
