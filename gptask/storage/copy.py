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

from .base import HistoryError, Storage

__all__ = ["copy_history", "TABLES", "COPIED_META"]

#: the tables of a history and their columns, as both backends store them (copied in this order)
TABLES: dict[str, tuple[str, ...]] = {
    "tasks": ("task_index", "task", "closed"),
    "trials": ("id", "task_index", "params", "params_key", "status", "value", "samples", "reason", "extra", "source",
               "created", "finished", "duration", "attempts", "owner", "lease_expires", "objectives"),
    "models": ("id", "iteration", "created", "log_likelihood", "params", "data_key"),
    "confirmations": ("id", "task_index", "params", "status", "value", "samples", "reason", "created", "duration",
                      "objectives"),
    "machines": ("id", "key", "record", "created"),
    "trial_machines": ("trial_id", "machine_id"),
}
#: meta rows a copy carries over (the run's own state is every "user:" key); format and
#: schema_version are the destination's own
COPIED_META = ("signature", "created", "upgraded_from")


def _where(history: "str | os.PathLike") -> str:
    from .postgres import is_url, redact

    return redact(str(history)) if is_url(history) else str(history)


def copy_history(src: "str | os.PathLike", dst: "str | os.PathLike") -> dict[str, int]:
    """Copy the history ``src`` into ``dst`` (a path or a ``postgresql://`` URL each); returns the
    number of rows copied per table. HistoryError when ``dst`` holds trials or models already (or is
    of another problem)."""
    from . import open_history, open_storage

    with open_history(src, read_only=True) as source:
        rows = source.export_rows()  # type: ignore[attr-defined]
        signature = source.signature
    with open_storage(dst, signature) as dest:
        _check_empty(dest, _where(dst))
        dest.import_rows(rows)  # type: ignore[attr-defined]
    return {table: len(rows[table]) for table in TABLES}


def _check_empty(dest: Storage, where: str) -> None:
    held = dest.export_rows()  # type: ignore[attr-defined]
    n_trials, n_models = len(held["trials"]), len(held["models"])
    if n_trials or n_models or held["tasks"] or held["confirmations"]:
        raise HistoryError(f"destination {where} already holds {n_trials} trial(s) and {n_models} model(s): a copy goes "
                           "into a new or empty history only (nothing is merged)")


def meta_rows(rows: dict[str, Any]) -> list[tuple[str, str]]:
    """The meta rows of ``rows`` that a copy writes."""
    return [(k, v) for k, v in rows["meta"] if k in COPIED_META or k.startswith("user:")]
