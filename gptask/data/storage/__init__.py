"""Histories: one narrow :class:`Storage` interface and two backends, a SQLite file and a PostgreSQL
database (``postgresql://user@host:port/db?schema=NAME``, :mod:`gptask.data.storage.postgres`).

``open_storage(path, signature)`` is what the tuner, TLA2 and the command line call; see
:mod:`gptask.data.storage.base` for the contract and :mod:`gptask.data.storage.sqlite` for the schema, its
version check and the upgrade of version-1 files.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from .base import (HistoryBusy, HistoryDamaged, HistoryError, HistoryMismatch, HistoryWriteFailed, NotAHistory, SchemaTooNew,
                   SchemaTooOld, Storage, TrialHeld, TrialNotPending, UnknownTrial, normalised)
from .owner import Owner
from .postgres import URL_SCHEMES, is_url, redact
from .sqlite import SCHEMA_VERSION, SQLiteStorage
from .sqlite import read_signature as _read_sqlite_signature

__all__ = ["Storage", "SQLiteStorage", "open_storage", "read_signature", "Owner", "SCHEMA_VERSION",
           "HistoryError", "HistoryMismatch", "NotAHistory", "SchemaTooNew", "SchemaTooOld", "UnknownTrial", "TrialNotPending", "TrialHeld",
           "HistoryDamaged", "HistoryWriteFailed", "HistoryBusy", "is_url", "redact", "open_history"]


def open_storage(history: "str | os.PathLike | Storage | None", signature: Mapping[str, Any] | None = None,
                 **options: Any) -> Storage:
    """The storage behind ``history``: a Storage as is, a ``postgresql://`` URL as a PostgreSQL
    history, a path as a SQLite file (either created for ``signature`` when missing), None as a
    history in memory. ``options`` (create, read_only): see SQLiteStorage."""
    if isinstance(history, Storage):
        if signature is not None and history.signature != normalised(dict(signature)):
            raise HistoryMismatch(f"{history!r} was written for a different problem")
        return history
    if history is not None and not isinstance(history, (str, os.PathLike)):
        raise TypeError(f"history must be a file path, a gptask Storage or None, got {history!r}")
    if isinstance(history, str) and history.startswith(URL_SCHEMES):
        from .postgres import PostgresStorage

        return PostgresStorage(history, signature, **options)
    return SQLiteStorage(history, signature, **options)


def open_history(history: "str | os.PathLike", read_only: bool = False, create: bool = False) -> Storage:
    """An existing history whatever its problem (the command line's show, tell, export): a SQLite
    file or a ``postgresql://`` URL."""
    if read_only:
        return open_storage(history, None, read_only=True)
    return open_storage(history, None, create=create)


def read_signature(path: "str | os.PathLike") -> dict[str, Any]:
    """The problem signature stored in an existing history (read-only; for tools without a Problem)."""
    if is_url(path):
        with open_history(path, read_only=True) as s:
            return s.signature
    return _read_sqlite_signature(path)
