"""Copying a whole history between backends (``gptask copy SRC DST``): SQLite file <-> PostgreSQL.

Every row is copied as stored, ids included: the meta rows (signature, creation time, the run's
state), tasks with their closed reasons, trials in every state with their holders, attempts and
leases, models, confirmation runs, machine records and which trial ran on which machine. The
destination is created for the source's problem; one that already holds trials or models (or
belongs to another problem) is refused, so nothing is ever merged by accident.
"""

from __future__ import annotations

import os
from typing import Any

from .base import COPY_TABLES as TABLES
from .base import HistoryError, Storage
from .postgres import PostgresStorage, is_url, redact
from .sqlite import SQLiteStorage

__all__ = ["copy_history"]

def _where(history: "str | os.PathLike") -> str:
    return redact(str(history)) if is_url(history) else str(history)


def copy_history(src: "str | os.PathLike", dst: "str | os.PathLike") -> dict[str, int]:
    """Copy the history ``src`` into ``dst`` (a path or a ``postgresql://`` URL each); returns the
    number of rows copied per table. HistoryError when ``dst`` holds trials or models already (or is
    of another problem)."""
    with _open(src, None, read_only=True) as source:
        rows = source.export_rows()  # type: ignore[attr-defined]
        signature = source.signature
    with _open(dst, signature) as dest:
        _check_empty(dest, _where(dst))
        dest.import_rows(rows)  # type: ignore[attr-defined]
    return {table: len(rows[table]) for table in TABLES}


def _check_empty(dest: Storage, where: str) -> None:
    held = dest.export_rows()  # type: ignore[attr-defined]
    n_trials, n_models = len(held["trials"]), len(held["models"])
    if n_trials or n_models or held["tasks"] or held["confirmations"]:
        raise HistoryError(f"destination {where} already holds {n_trials} trial(s) and {n_models} model(s): a copy goes "
                           "into a new or empty history only (nothing is merged)")


def _open(where: "str | os.PathLike", signature: Any, read_only: bool = False) -> Storage:
    if is_url(where):
        return PostgresStorage(str(where), signature, read_only=read_only)
    return SQLiteStorage(where, signature, read_only=read_only)
