"""SQLite history of a tuning run: every evaluation, the tasks, the problem signature, the models.

One file per run, WAL mode. Every finished evaluation is one row committed before the tuner asks
for its next proposal, so a killed run loses nothing and resumes where it stopped. Values are
stored as JSON text; nothing is pickled.

Tables
------
meta(key, value)                 problem signature (JSON), schema version, creation time
tasks(task_index, task)          the task dicts (JSON), fixed at the start of a run
evaluations(id, task_index, params, value, status, reason, samples, duration, source, created)
models(id, iteration, created, log_likelihood, params)   LCM hyperparameters after each fit
"""

from __future__ import annotations

import csv
import io
import json
import sqlite3
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["History", "HistoryMismatch", "SCHEMA_VERSION"]

SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS tasks (task_index INTEGER PRIMARY KEY, task TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS evaluations (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    task_index INTEGER NOT NULL,
    params TEXT NOT NULL,
    value REAL,
    status TEXT NOT NULL CHECK (status IN ('complete', 'failed')),
    reason TEXT NOT NULL DEFAULT '',
    samples TEXT NOT NULL DEFAULT '[]',
    duration REAL NOT NULL DEFAULT 0,
    source TEXT NOT NULL DEFAULT '',
    created REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS models (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    iteration INTEGER NOT NULL,
    created REAL NOT NULL,
    log_likelihood REAL,
    params TEXT NOT NULL
);
"""


class HistoryMismatch(ValueError):
    """The history file belongs to a different problem or task set."""


def _dumps(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, default=_json_default)


def _json_default(obj: Any) -> Any:
    import numpy as np

    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        return float(obj)
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, np.bool_):
        return bool(obj)
    raise TypeError(f"cannot store {type(obj).__name__} {obj!r} in a history")


class History:
    """A run's history in SQLite (``path``), or in memory when ``path`` is None.

    ``History(path, signature)`` creates the file or opens an existing one; opening a file written
    for another problem (different signature) raises :class:`HistoryMismatch`.
    """

    def __init__(self, path: str | Path | None, signature: Mapping[str, Any]) -> None:
        self.path = None if path is None else Path(path)
        target = ":memory:" if self.path is None else str(self.path)
        if self.path is not None and self.path.exists() and self.path.is_dir():
            raise ValueError(f"history path {self.path} is a directory")
        try:
            self._db = sqlite3.connect(target, isolation_level=None, timeout=30.0)
            if self.path is not None:
                self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL" if self.path is None else "PRAGMA synchronous=FULL")
            self._db.executescript(_SCHEMA)
        except sqlite3.DatabaseError as exc:
            raise ValueError(f"{path} is not a gptask history (SQLite error: {exc})") from None
        sig = _dumps(signature)
        stored = self._meta("signature")
        if stored is None:
            with self._db:
                self._db.execute("BEGIN")
                self._set_meta("signature", sig)
                self._set_meta("schema_version", str(SCHEMA_VERSION))
                self._set_meta("created", repr(time.time()))
        elif stored != sig:
            raise HistoryMismatch(
                f"history {path} was written for a different problem; its signature is "
                f"{stored[:300]} but this problem's is {sig[:300]}. Use another history file."
            )

    # ---- meta --------------------------------------------------------------------------------
    def _meta(self, key: str) -> str | None:
        row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else row[0]

    def _set_meta(self, key: str, value: str) -> None:
        self._db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, value))

    @property
    def signature(self) -> dict[str, Any]:
        return json.loads(self._meta("signature") or "{}")

    def get_meta(self, key: str) -> Any:
        raw = self._meta("user:" + key)
        return None if raw is None else json.loads(raw)

    def set_meta(self, key: str, value: Any) -> None:
        with self._db:
            self._db.execute("BEGIN")
            self._set_meta("user:" + key, _dumps(value))

    # ---- tasks -------------------------------------------------------------------------------
    def tasks(self) -> list[dict[str, Any]]:
        rows = self._db.execute("SELECT task FROM tasks ORDER BY task_index").fetchall()
        return [json.loads(r[0]) for r in rows]

    def set_tasks(self, tasks: Sequence[Mapping[str, Any]]) -> None:
        """Record the task set; an existing, different task set raises HistoryMismatch."""
        stored = self.tasks()
        new = [json.loads(_dumps(dict(t))) for t in tasks]
        if stored:
            if stored[: len(new)] != new[: len(stored)] or len(new) < len(stored):
                raise HistoryMismatch(
                    f"history {self.path} holds tasks {stored} but this run asks for {new}"
                )
            if len(new) == len(stored):
                return
        with self._db:
            self._db.execute("BEGIN")
            for i, t in enumerate(new[len(stored) :], start=len(stored)):
                self._db.execute("INSERT INTO tasks (task_index, task) VALUES (?, ?)", (i, _dumps(t)))

    # ---- evaluations -------------------------------------------------------------------------
    def add_evaluation(
        self,
        task_index: int,
        params: Mapping[str, Any],
        value: float | None,
        status: str,
        reason: str = "",
        samples: Sequence[float] = (),
        duration: float = 0.0,
        source: str = "",
    ) -> int:
        """Append one finished evaluation and commit it; returns its id."""
        with self._db:
            cur = self._db.execute(
                "INSERT INTO evaluations (task_index, params, value, status, reason, samples, duration,"
                " source, created) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    int(task_index),
                    _dumps(dict(params)),
                    None if value is None else float(value),
                    status,
                    reason,
                    _dumps(list(samples)),
                    float(duration),
                    source,
                    time.time(),
                ),
            )
        return int(cur.lastrowid)

    def records(self) -> list[dict[str, Any]]:
        """Every evaluation as a dict: id, task_index, task, params, value, status, reason, samples, ..."""
        tasks = self.tasks()
        rows = self._db.execute(
            "SELECT id, task_index, params, value, status, reason, samples, duration, source, created"
            " FROM evaluations ORDER BY id"
        ).fetchall()
        out = []
        for r in rows:
            ti = int(r[1])
            out.append(
                {
                    "id": r[0],
                    "task_index": ti,
                    "task": tasks[ti] if ti < len(tasks) else None,
                    "params": json.loads(r[2]),
                    "value": r[3],
                    "status": r[4],
                    "reason": r[5],
                    "samples": json.loads(r[6]),
                    "duration": r[7],
                    "source": r[8],
                    "created": r[9],
                }
            )
        return out

    # ---- models ------------------------------------------------------------------------------
    def add_model(self, iteration: int, params: Mapping[str, Any], log_likelihood: float | None) -> None:
        with self._db:
            self._db.execute(
                "INSERT INTO models (iteration, created, log_likelihood, params) VALUES (?, ?, ?, ?)",
                (int(iteration), time.time(), log_likelihood, _dumps(dict(params))),
            )

    def last_model(self) -> dict[str, Any] | None:
        row = self._db.execute(
            "SELECT iteration, log_likelihood, params FROM models ORDER BY id DESC LIMIT 1"
        ).fetchone()
        if row is None:
            return None
        return {"iteration": row[0], "log_likelihood": row[1], "params": json.loads(row[2])}

    def models(self) -> list[dict[str, Any]]:
        rows = self._db.execute("SELECT iteration, created, log_likelihood FROM models ORDER BY id").fetchall()
        return [{"iteration": r[0], "created": r[1], "log_likelihood": r[2]} for r in rows]

    # ---- export ------------------------------------------------------------------------------
    def to_csv(self) -> str:
        """The evaluations as CSV text, one column per task and parameter key."""
        recs = self.records()
        tkeys = sorted({k for r in recs for k in (r["task"] or {})})
        pkeys = sorted({k for r in recs for k in r["params"]})
        buf = io.StringIO()
        w = csv.writer(buf)
        w.writerow(["id", "task_index", *[f"task.{k}" for k in tkeys], *[f"param.{k}" for k in pkeys],
                    "value", "status", "reason", "samples", "duration", "source"])
        for r in recs:
            w.writerow([r["id"], r["task_index"], *[(r["task"] or {}).get(k, "") for k in tkeys],
                        *[r["params"].get(k, "") for k in pkeys],
                        "" if r["value"] is None else repr(r["value"]), r["status"], r["reason"],
                        json.dumps(r["samples"]), f"{r['duration']:.6g}", r["source"]])
        return buf.getvalue()

    def to_json(self) -> str:
        return json.dumps(
            {"signature": self.signature, "tasks": self.tasks(), "evaluations": self.records(),
             "models": self.models()},
            indent=1, default=_json_default,
        )

    def close(self) -> None:
        self._db.close()

    @staticmethod
    def read_signature(path: str | Path) -> dict[str, Any]:
        """The signature stored in an existing history file (for the CLI, which has no Problem)."""
        p = Path(path)
        if not p.is_file():
            raise ValueError(f"no history file at {p}")
        try:
            db = sqlite3.connect(f"file:{p}?mode=ro", uri=True)
            row = db.execute("SELECT value FROM meta WHERE key = 'signature'").fetchone()
            db.close()
        except sqlite3.DatabaseError as exc:
            raise ValueError(f"{p} is not a gptask history (SQLite error: {exc})") from None
        if row is None:
            raise ValueError(f"{p} is not a gptask history (no signature)")
        return json.loads(row[0])

    @classmethod
    def open_existing(cls, path: str | Path) -> "History":
        """Open an existing history without knowing its problem (read-only use: show/plot/export)."""
        return cls(path, cls.read_signature(path))
