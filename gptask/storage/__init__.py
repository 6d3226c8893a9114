"""Histories: one narrow :class:`Storage` interface and its SQLite implementation.

``open_storage(path, signature)`` is what the tuner, TLA2 and the command line call; see
:mod:`gptask.storage.base` for the contract and :mod:`gptask.storage.sqlite` for the schema, its
version check and the upgrade of version-1 files.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from .base import (HistoryBusy, HistoryDamaged, HistoryError, HistoryMismatch, HistoryWriteFailed, NotAHistory, SchemaTooNew,
                   Storage, TrialHeld, TrialNotPending, UnknownTrial, normalised)
from .owner import Owner
from .sqlite import SCHEMA_VERSION, SQLiteStorage, read_signature

__all__ = ["Storage", "SQLiteStorage", "open_storage", "read_signature", "Owner", "SCHEMA_VERSION",
           "HistoryError", "HistoryMismatch", "NotAHistory", "SchemaTooNew", "UnknownTrial", "TrialNotPending", "TrialHeld",
           "HistoryDamaged", "HistoryWriteFailed", "HistoryBusy"]


def open_storage(history: "str | os.PathLike | Storage | None", signature: Mapping[str, Any] | None = None,
                 **options: Any) -> Storage:
    """The storage behind ``history``: a Storage as is, a path as a SQLite file (created for
    ``signature`` when missing), None as a history in memory. ``options``: see SQLiteStorage."""
    if isinstance(history, Storage):
        if signature is not None and history.signature != normalised(dict(signature)):
            raise HistoryMismatch(f"{history!r} was written for a different problem")
        return history
    if history is not None and not isinstance(history, (str, os.PathLike)):
        raise TypeError(f"history must be a file path, a gptask Storage or None, got {history!r}")
    return SQLiteStorage(history, signature, **options)
