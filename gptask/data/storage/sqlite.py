"""The SQLite history (schema version 3), its version check and the upgrade of older files.

One file per run in WAL mode, ``synchronous=FULL``: every write is one committed transaction, so a
killed process loses nothing it had told. Several processes on one host may share a file (SQLite's
WAL journal needs them on the same host: on a cluster, keep the history on the node that runs
``gptask ask``/``tell``, see the README). Values are JSON text or SQLite numbers; nothing is pickled.

Schema 3
--------
::

    meta(key, value)          format "gptask.history", schema_version "2", signature (JSON),
                              created, and the run's state under "user:<key>" (JSON)
    tasks(task_index, task, closed)           task dict (JSON); why it takes no new trials, or NULL
    trials(id, task_index, params, params_key, status, value, samples, reason, extra, source,
           created, finished, duration, attempts, owner, lease_expires, objectives)
    models(id, iteration, created, log_likelihood, params, data_key)
    confirmations(id, task_index, params, status, value, samples, reason, created, duration, objectives)
                              re-measurements by ``result.recommend(i, confirm=k)``, not trials;
                              created with the first one (an optional table: no version change)
    machines(id, key, record, created)      machine records (gptask.data.provenance), each stored once
    trial_machines(trial_id, machine_id)    which machine a trial was measured on
                              both created with the first trial told with a record (optional tables,
                              as confirmations: no version change; a gptask without them reads the
                              file as before and simply does not see the machines)

``objectives`` (new in schema 3) holds every output of a problem with named outputs
(:mod:`gptask.problem.objectives`) as a JSON object ``{"time": 0.5, "memory": 1.2e9}``, and is NULL for
a problem whose objective returns one number (``value`` holds the primary objective in both cases).

Errors: a damaged file (malformed pages, truncated, not SQLite) raises :class:`HistoryDamaged` or
:class:`NotAHistory`, a failed write (a full disk, an I/O error, a lock held past
:data:`BUSY_TIMEOUT_S`) :class:`HistoryWriteFailed`, each naming the file and what to do, never a
bare ``sqlite3`` error: every statement goes through :class:`_Checked`. A write that fails leaves
the history as it was before that transaction; a history this call created and could not finish
creating is removed (no empty file stays behind to be mistaken for a run).

``PRAGMA application_id`` holds :data:`APPLICATION_ID`, so a gptask history is recognised without
guessing from table names. ``status`` is one of the :class:`~gptask.data.trials.Status` values;
``params_key`` is :func:`~gptask.data.trials.params_key` of ``params`` (indexed with the task, to find a
configuration already claimed); ``owner`` is the JSON of an :class:`~gptask.data.storage.owner.Owner`.

Version 1 (gptask 0.1 up to 10db37d) had ``evaluations`` rows, written only when finished, and no
application id. Opening one for writing upgrades it in place in one transaction: every row becomes
a trial with the same id (status "complete" or "failed"; "complete" rows whose reason starts with
"censored" or "pruned", the only way v1 could say so, become CENSORED), ``tasks`` gains ``closed``,
``models`` gains ``data_key``. Opening one read-only upgrades a copy in memory and leaves the
file as it was. A file written by a newer schema is refused with the versions named.

Version 2 (up to 59b0823) lacked the ``objectives`` columns: the upgrade adds them (NULL: every
trial of such a file returned one number), in place or in the in-memory copy alike; a version-1
file goes through both upgrades in one transaction. ``meta`` then records ``upgraded_from``.

Over 500 lines on purpose: one backend of the storage contract (schema, upgrades of older files,
claims, tells exactly once, holders), one class as the contract's tests see it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..trials import Proposal, Status, Trial, params_key
from .base import (COPY_TABLES, MAX_ATTEMPTS, HistoryBusy, HistoryDamaged, HistoryMismatch, HistoryWriteFailed, NotAHistory,
                   SchemaTooNew, Storage, TrialNotPending, UnknownTrial, UID_KEY, json_text, meta_rows,
                   mismatch_text, normalised, stored_json)
from .owner import Owner, holder_alive, running_holder
from .records import (check_claim, check_imported, check_lease, check_release, checked_tell, confirmation_from_row,
                      confirmation_values, given_up_reason, log_reclaimed, objectives_text,
                      trial_from_row, trials_where)

__all__ = ["SQLiteStorage", "SCHEMA_VERSION", "APPLICATION_ID", "FORMAT", "read_signature"]

log = logging.getLogger(__name__)

SCHEMA_VERSION = 3
FORMAT = "gptask.history"
#: "gpTk" as a big-endian 32-bit integer, in the file header of every schema-2 history
APPLICATION_ID = int.from_bytes(b"gpTk", "big")
#: seconds a writer waits for another process's transaction before giving up
BUSY_TIMEOUT_S = 60.0
#: most unfinished trial ids re-read by name in one incremental read (more: read on from the oldest)
TRIALS_AFTER_MAX_IDS = 500
#: seconds between two tries to open a history that another process is creating or upgrading
OPEN_RETRY_S = 0.05

_V1_TABLES = {"meta", "tasks", "evaluations", "models"}

_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE tasks (task_index INTEGER PRIMARY KEY, task TEXT NOT NULL, closed TEXT);
CREATE TABLE trials (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    task_index INTEGER NOT NULL,
    params TEXT NOT NULL,
    params_key TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('pending', 'complete', 'failed', 'censored')),
    value REAL,
    samples TEXT NOT NULL DEFAULT '[]',
    reason TEXT NOT NULL DEFAULT '',
    extra TEXT NOT NULL DEFAULT '{}',
    source TEXT NOT NULL DEFAULT '',
    created REAL NOT NULL,
    finished REAL,
    duration REAL,
    attempts INTEGER NOT NULL DEFAULT 1,
    owner TEXT,
    lease_expires REAL,
    objectives TEXT
);
CREATE INDEX trials_task_params ON trials (task_index, params_key);
CREATE INDEX trials_status ON trials (status);
CREATE TABLE models (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    iteration INTEGER NOT NULL,
    created REAL NOT NULL,
    log_likelihood REAL,
    params TEXT NOT NULL,
    data_key TEXT
);
"""

#: confirmation runs (TuningResult.recommend): finished re-measurements, apart from the trials
_CONFIRMATIONS_TABLE = """CREATE TABLE IF NOT EXISTS confirmations (
    id INTEGER PRIMARY KEY AUTOINCREMENT, task_index INTEGER NOT NULL, params TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('complete', 'failed')), value REAL,
    samples TEXT NOT NULL DEFAULT '[]', reason TEXT NOT NULL DEFAULT '', created REAL NOT NULL, duration REAL,
    objectives TEXT)"""
_CONFIRMATION_COLUMNS = "id, task_index, params, status, value, samples, reason, created, duration, objectives"

_TRIAL_COLUMNS = ("id, task_index, params, status, value, samples, reason, extra, source, created, finished, "
                  "duration, attempts, owner, objectives")

#: machine records (gptask.data.provenance) and the machine of each trial: optional tables, created on first use
_MACHINE_TABLES = ("CREATE TABLE IF NOT EXISTS machines (id INTEGER PRIMARY KEY AUTOINCREMENT, key TEXT NOT NULL "
                   "UNIQUE, record TEXT NOT NULL, created REAL NOT NULL)",
                   "CREATE TABLE IF NOT EXISTS trial_machines (trial_id INTEGER PRIMARY KEY, machine_id INTEGER NOT NULL)")


def _history_error(exc: sqlite3.DatabaseError, where: str) -> Exception:
    """The error to raise for SQLite's ``exc`` on the history ``where``: one that names the file and says
    what to do (``exc`` itself when it is none of the failures a user can meet)."""
    name = getattr(exc, "sqlite_errorname", "") or ""
    text = str(exc)
    if name.startswith("SQLITE_NOTADB") or "not a database" in text:
        return NotAHistory(f"{where} is not a gptask history: not an SQLite database, or its header is damaged "
                           f"({text})")
    if name.startswith("SQLITE_CORRUPT") or "malformed" in text:
        return HistoryDamaged(f"history {where} is damaged ({text}): restore it from a copy (`sqlite3 {where} "
                              ".recover` may save what can still be read)")
    if name.startswith(("SQLITE_FULL", "SQLITE_IOERR")) or "disk is full" in text or "I/O error" in text:
        return HistoryWriteFailed(f"cannot write history {where}: {text} (is its disk full?); every result told "
                                  "before this one is kept: free space and run the same command again to resume")
    if text.startswith(("no such table", "no such column")):
        return HistoryDamaged(f"history {where} is damaged: {text}; it was changed by hand or by another program: "
                              "restore it from a copy")
    if name.startswith("SQLITE_BUSY") or "database is locked" in text:
        return HistoryBusy(f"history {where} stayed locked by another process for more than "
                           f"{BUSY_TIMEOUT_S:g} s ({text}); try again when it is done")
    return exc


class _Checked:
    """An SQLite connection whose errors name the history (:func:`_history_error`): the statements and
    the rows they fetch (a malformed page may show only when a row is read)."""

    def __init__(self, db: sqlite3.Connection, where: str) -> None:
        self.raw, self.where = db, where

    @contextlib.contextmanager
    def checked(self) -> Iterator[None]:
        try:
            yield
        except sqlite3.DatabaseError as exc:
            err = _history_error(exc, self.where)
            if err is exc:
                raise
            raise err from exc

    def execute(self, sql: str, args: Sequence[Any] = ()) -> "_Rows":
        with self.checked():
            return _Rows(self.raw.execute(sql, args), self)

    def backup(self, target: "_Checked") -> None:
        with self.checked():
            self.raw.backup(target.raw)

    def close(self) -> None:
        self.raw.close()


class _Rows:
    """A cursor of :class:`_Checked`: fetches rows the same way, with the same errors."""

    def __init__(self, cursor: sqlite3.Cursor, db: _Checked) -> None:
        self.cursor, self.db = cursor, db

    def fetchone(self) -> Any:
        with self.db.checked():
            return self.cursor.fetchone()

    def fetchall(self) -> list[Any]:
        with self.db.checked():
            return self.cursor.fetchall()

    def __iter__(self) -> Iterator[Any]:
        return iter(self.fetchall())

    @property
    def lastrowid(self) -> int | None:
        return self.cursor.lastrowid

    @property
    def rowcount(self) -> int:
        return self.cursor.rowcount


def _discard_unfinished(path: Path) -> None:
    """Remove the history ``path`` this process began to create but could not finish (a full disk),
    with its journal files, unless it holds tables after all (another process finished it)."""
    try:
        probe = sqlite3.connect(_uri(path, "ro"), uri=True, isolation_level=None)
        try:
            tables = probe.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
        finally:
            probe.close()
    except sqlite3.Error:
        tables = 0 if path.exists() and path.stat().st_size == 0 else None
    if tables == 0:
        for leftover in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
            with contextlib.suppress(OSError):
                leftover.unlink()


def _uri(path: Path, mode: str) -> str:
    return f"{path.absolute().as_uri()}?mode={mode}"


def _tables(db: _Checked) -> set[str]:
    rows = db.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
    return {r[0] for r in rows if not r[0].startswith("sqlite_")}


def _meta(db: _Checked, key: str) -> str | None:
    row = db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    return None if row is None else row[0]


def _version(db: _Checked, where: str) -> int:
    """0 for an empty database, else the schema version of a gptask history; NotAHistory otherwise.
    Reads only: an unrelated database is refused before anything is written to it."""
    tables = _tables(db)
    app_id = int(db.execute("PRAGMA application_id").fetchone()[0])
    if not tables and app_id == 0:
        return 0
    if "meta" in tables and (app_id == APPLICATION_ID or _V1_TABLES <= tables):
        raw = _meta(db, "schema_version")
        if raw is not None and _meta(db, "signature") is not None:
            try:
                return int(raw)
            except ValueError:
                pass
    names = ", ".join(sorted(tables)) or "none"
    raise NotAHistory(f"{where} is an SQLite database but not a gptask history (tables: {names}); "
                      "give another path for the history")


def _consistent_version(db: _Checked, where: str) -> int:
    """:func:`_version` read in one transaction: its reads see one state of the file, not the tables
    from before another process created them and the application id from after."""
    db.execute("BEGIN")
    try:
        return _version(db, where)
    finally:
        if db.raw.in_transaction:
            with contextlib.suppress(sqlite3.Error):
                db.raw.execute("ROLLBACK")


def _upgrade(db: _Checked, version: int) -> None:
    """Schema ``version`` -> SCHEMA_VERSION inside the caller's transaction (module docstring)."""
    if version < 2:
        _upgrade_v1(db)
    if version < 3:
        _upgrade_v2(db)
    db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
    if _meta(db, "upgraded_from") is None:
        db.execute("INSERT INTO meta (key, value) VALUES ('upgraded_from', ?)", (str(version),))


def _upgrade_v2(db: _Checked) -> None:
    """Schema 2 -> 3: the ``objectives`` columns (NULL: one number per trial)."""
    db.execute("ALTER TABLE trials ADD COLUMN objectives TEXT")
    if "confirmations" in _tables(db):
        db.execute("ALTER TABLE confirmations ADD COLUMN objectives TEXT")
    log.info("history upgraded from schema 2 to 3 (outputs of several objectives)")


def _upgrade_v1(db: _Checked) -> None:
    """Schema 1 -> 2 inside the caller's transaction (see the module docstring)."""
    db.execute("ALTER TABLE tasks ADD COLUMN closed TEXT")
    db.execute("ALTER TABLE models ADD COLUMN data_key TEXT")
    db.execute("""CREATE TABLE trials (
        id INTEGER PRIMARY KEY AUTOINCREMENT, task_index INTEGER NOT NULL, params TEXT NOT NULL,
        params_key TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('pending', 'complete', 'failed', 'censored')),
        value REAL, samples TEXT NOT NULL DEFAULT '[]', reason TEXT NOT NULL DEFAULT '',
        extra TEXT NOT NULL DEFAULT '{}', source TEXT NOT NULL DEFAULT '', created REAL NOT NULL,
        finished REAL, duration REAL, attempts INTEGER NOT NULL DEFAULT 1, owner TEXT, lease_expires REAL)""")
    db.execute("CREATE INDEX trials_task_params ON trials (task_index, params_key)")
    db.execute("CREATE INDEX trials_status ON trials (status)")
    rows = db.execute("SELECT id, task_index, params, value, status, reason, samples, duration, source, created"
                      " FROM evaluations ORDER BY id").fetchall()
    for (id_, ti, params, value, status, reason, samples, duration, source, created) in rows:
        if status == "complete" and reason.startswith(("censored", "pruned")):
            status = Status.CENSORED.value
        db.execute(
            "INSERT INTO trials (id, task_index, params, params_key, status, value, samples, reason, source,"
            " created, finished, duration) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (id_, ti, params, params_key(stored_json(params, f"column params of evaluation {id_}", db.where)), status, value, samples, reason, source, created,
             created, duration),
        )
    db.execute("DROP TABLE evaluations")
    db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('format', ?)", (FORMAT,))
    db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    log.info("history upgraded from schema 1 to 2 (%d trials)", len(rows))


def _create(db: _Checked) -> None:
    for statement in _SCHEMA.split(";"):
        if statement.strip():
            db.execute(statement)
    db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    for key, value in (("format", FORMAT), ("schema_version", str(SCHEMA_VERSION)), ("created", repr(time.time()))):
        db.execute("INSERT INTO meta (key, value) VALUES (?, ?)", (key, value))


def _check_signature(db: _Checked, where: str, signature: Mapping[str, Any]) -> None:
    stored = _meta(db, "signature") or "{}"
    sig = normalised(dict(signature))
    theirs = stored_json(stored, "the signature (meta)", str(where))
    if theirs != sig:
        raise HistoryMismatch(f"history {where} was written for a different problem: {mismatch_text(theirs, sig)}. "
                              "Use another history file.", where=str(where), stored=theirs)


def _check_writable_path(path: Path, create: bool) -> None:
    """Clear errors for the ways a path can fail before SQLite gets a say."""
    if path.is_dir():
        raise IsADirectoryError(f"history path {path} is a directory; give a file name such as {path / 'runs.sqlite'}")
    parent = path.absolute().parent
    if not path.exists():
        if not create:
            raise FileNotFoundError(f"no history file at {path}")
        if not parent.is_dir():
            raise FileNotFoundError(f"cannot create history {path}: directory {parent} does not exist")
        if not os.access(parent, os.W_OK | os.X_OK):
            raise PermissionError(f"cannot create history {path}: directory {parent} is not writable")
        return
    if not os.access(path, os.R_OK):
        raise PermissionError(f"history {path} is not readable (permission denied)")
    if not os.access(path, os.W_OK):
        raise PermissionError(f"history {path} is read-only; tuning needs to write to it "
                              "(gptask show and gptask export can still read it)")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise PermissionError(f"history {path}: its directory {parent} is not writable, and SQLite's WAL "
                              "journal keeps its -wal and -shm files next to the history")


class SQLiteStorage(Storage):
    """A history in the SQLite file ``path`` (None: in memory, for runs without a history).

    signature: the problem signature; a new file is created for it, an existing one must have been
    created for an equal one (else HistoryMismatch). None opens an existing history whatever its
    problem (the command line's show, tell, export). create: allow creating the file.
    read_only: never write to the file (a schema-1 file is upgraded in a copy in memory).
    """

    def __init__(self, path: str | os.PathLike | None, signature: Mapping[str, Any] | None = None, *,
                 create: bool = True, read_only: bool = False) -> None:
        self.path = None if path is None else Path(path)
        self.read_only = bool(read_only)
        self._copy = False  # True once a read-only schema-1 file has been copied into memory
        self._db: _Checked | None = None
        where = "the in-memory history" if self.path is None else str(self.path)
        creating = False
        if self.path is None:
            db = sqlite3.connect(":memory:", isolation_level=None)
        elif read_only:
            db = self._connect_read_only(self.path)
        else:
            _check_writable_path(self.path, create and signature is not None)
            creating = not self.path.exists()
            try:
                db = sqlite3.connect(str(self.path), isolation_level=None, timeout=BUSY_TIMEOUT_S)
            except sqlite3.OperationalError as exc:
                raise PermissionError(f"cannot open history {self.path}: {exc}") from None
        self._db = _Checked(db, where)
        deadline = time.monotonic() + BUSY_TIMEOUT_S
        while True:
            try:
                self._open(self._db, where, signature)
                break
            except HistoryBusy:
                # processes opening one new history at once: SQLite answers some of them SQLITE_BUSY at
                # once, without waiting (switching the journal to WAL while another creates the tables
                # would deadlock). Try again: nothing was written, and the file is another's to finish
                if time.monotonic() < deadline:
                    time.sleep(OPEN_RETRY_S)
                    continue
                self.close()
                raise
            except BaseException:
                self.close()
                if creating and self.path is not None:
                    _discard_unfinished(self.path)
                raise

    @staticmethod
    def _connect_read_only(path: Path) -> sqlite3.Connection:
        if path.is_dir():
            raise IsADirectoryError(f"history path {path} is a directory")
        if not path.is_file():
            raise FileNotFoundError(f"no history file at {path}")
        if not os.access(path, os.R_OK):
            raise PermissionError(f"history {path} is not readable (permission denied)")
        try:
            db = sqlite3.connect(_uri(path, "ro"), uri=True, isolation_level=None, timeout=BUSY_TIMEOUT_S)
            with _Checked(db, str(path)).checked():
                db.execute("SELECT count(*) FROM sqlite_master").fetchone()
            return db
        except sqlite3.OperationalError:
            # a WAL file in a directory we may not write to: read it as an immutable snapshot
            return sqlite3.connect(_uri(path, "ro") + "&immutable=1", uri=True, isolation_level=None)

    def _open(self, db: _Checked, where: str, signature: Mapping[str, Any] | None) -> None:
        version = _consistent_version(db, where)
        if version > SCHEMA_VERSION:
            raise SchemaTooNew(f"{where} has history schema {version}; this gptask reads schema "
                               f"{SCHEMA_VERSION} and older: upgrade gptask to use it")
        if version == 0 and signature is None:
            raise NotAHistory(f"{where} is empty: not a gptask history")
        if version and signature is not None:
            _check_signature(db, where, signature)  # before any upgrade: never touch another run's file
        if self.read_only:
            if version < SCHEMA_VERSION:
                memory = _Checked(sqlite3.connect(":memory:", isolation_level=None), where)
                db.backup(memory)
                db.close()
                self._db, self._copy = memory, True
                db = memory
                with self._write():
                    _upgrade(db, version)
        else:
            if self.path is not None:
                db.execute("PRAGMA journal_mode=WAL")
                db.execute("PRAGMA synchronous=FULL")
            with self._write():
                version = _version(db, where)  # again, under the write lock: another process may have acted
                if version == 0:
                    if signature is None:
                        raise NotAHistory(f"{where} is empty: not a gptask history")
                    _create(db)
                    db.execute("INSERT INTO meta (key, value) VALUES ('signature', ?)", (json_text(dict(signature)),))
                elif version < SCHEMA_VERSION:
                    _upgrade(db, version)
        if signature is not None:
            _check_signature(db, where, signature)  # (again: another process may have created the file)

    # ---- plumbing ----------------------------------------------------------------------------
    @property
    def db(self) -> _Checked:
        if self._db is None:
            raise ValueError(f"history {self.path} is closed")
        return self._db

    @contextlib.contextmanager
    def _write(self) -> Iterator[_Checked]:
        """One write transaction, holding SQLite's write lock from its first statement; rolled back
        whole when anything in it fails, the commit included (a full disk)."""
        if self.read_only and not self._copy:
            raise PermissionError(f"history {self.path} was opened read-only")
        db = self.db
        db.execute("BEGIN IMMEDIATE")
        try:
            yield db
            db.execute("COMMIT")
        except BaseException:
            if db.raw.in_transaction:  # SQLite may have rolled back by itself (SQLITE_FULL, SQLITE_IOERR)
                with contextlib.suppress(sqlite3.Error):
                    db.raw.execute("ROLLBACK")
            raise

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None

    def __repr__(self) -> str:
        return f"SQLiteStorage({str(self.path) if self.path else ':memory:'})"

    # ---- the run -----------------------------------------------------------------------------
    @property
    def signature(self) -> dict[str, Any]:
        return stored_json(_meta(self.db, "signature") or "{}", "the signature (meta)", self.db.where)

    def get_meta(self, key: str) -> Any:
        raw = _meta(self.db, "user:" + key)
        return None if raw is None else stored_json(raw, f"the run's state {key!r} (meta)", self.db.where)

    def set_meta(self, key: str, value: Any) -> None:
        with self._write() as db:
            db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", ("user:" + key, json_text(value)))

    def uid(self) -> str:
        made = _meta(self.db, UID_KEY)
        if made is None:
            with self._write() as db:  # the first writer's wins (INSERT OR IGNORE)
                db.execute("INSERT OR IGNORE INTO meta (key, value) VALUES (?, ?)", (UID_KEY, uuid.uuid4().hex))
            made = _meta(self.db, UID_KEY)
        return str(made)

    @property
    def schema_version(self) -> int:
        return int(_meta(self.db, "schema_version") or 0)

    # ---- tasks -------------------------------------------------------------------------------
    def tasks(self) -> list[dict[str, Any]]:
        rows = self.db.execute("SELECT task FROM tasks ORDER BY task_index").fetchall()
        return [stored_json(r[0], f"task {i}", self.db.where) for i, r in enumerate(rows)]

    def set_tasks(self, tasks: Sequence[Mapping[str, Any]]) -> None:
        new = [normalised(dict(t)) for t in tasks]
        with self._write() as db:
            stored = [stored_json(r[0], f"task {i}", db.where)
                      for i, r in enumerate(db.execute("SELECT task FROM tasks ORDER BY task_index"))]
            if stored[: len(new)] != new[: len(stored)] or len(new) < len(stored):
                raise HistoryMismatch(f"history {self.path} holds tasks {stored} but this run asks for {new}")
            for i, t in enumerate(new[len(stored):], start=len(stored)):
                db.execute("INSERT INTO tasks (task_index, task) VALUES (?, ?)", (i, json_text(t)))

    def closed_tasks(self) -> dict[int, str]:
        rows = self.db.execute("SELECT task_index, closed FROM tasks WHERE closed IS NOT NULL").fetchall()
        return {int(i): str(reason) for i, reason in rows}

    def close_task(self, task_index: int, reason: str) -> None:
        with self._write() as db:
            cur = db.execute("UPDATE tasks SET closed = ? WHERE task_index = ? AND closed IS NULL",
                             (str(reason), int(task_index)))
            if cur.rowcount == 0 and db.execute("SELECT 1 FROM tasks WHERE task_index = ?",
                                                (int(task_index),)).fetchone() is None:
                raise ValueError(f"task index {task_index} is not in history {self.path}")

    # ---- trials ------------------------------------------------------------------------------

    def _select(self, db: _Checked) -> str:
        """The SELECT of a trial's columns and its machine id (NULL without the machine tables)."""
        cols = ", ".join("t." + c.strip() for c in _TRIAL_COLUMNS.split(","))
        if "trial_machines" in _tables(db):
            return f"SELECT {cols}, m.machine_id FROM trials t LEFT JOIN trial_machines m ON m.trial_id = t.id"
        return f"SELECT {cols}, NULL FROM trials t"

    def trials(self, task_index: int | None = None, status: Status | None = None) -> list[Trial]:
        where, args = trials_where(task_index, status, "?")
        sql = self._select(self.db) + where
        tasks = self.tasks()
        return [trial_from_row(r, tasks, self.db.where) for r in self.db.execute(sql + " ORDER BY t.id", args).fetchall()]

    def trials_after(self, last_id: int, ids: Sequence[int] = ()) -> list[Trial]:
        ids = sorted({int(i) for i in ids if i <= last_id})
        if len(ids) > TRIALS_AFTER_MAX_IDS:  # too many to list: re-read from the oldest of them on
            last_id, ids = ids[0] - 1, []
        where = "t.id > ?" + (f" OR t.id IN ({', '.join('?' * len(ids))})" if ids else "")
        tasks = self.tasks()
        rows = self.db.execute(self._select(self.db) + f" WHERE {where} ORDER BY t.id", [int(last_id), *ids])
        return [trial_from_row(r, tasks, self.db.where) for r in rows.fetchall()]

    def _fetch(self, db: _Checked, trial_id: int, tasks: list[dict[str, Any]] | None = None) -> Trial:
        """Trial ``trial_id``; ``tasks``: the history's tasks when the caller has read them (a loop over
        many trials reads them once, not once per trial)."""
        return trial_from_row(db.execute(self._select(db) + " WHERE t.id = ?", (trial_id,)).fetchone(),
                              self.tasks() if tasks is None else tasks, db.where)

    # ---- machines ----------------------------------------------------------------------------
    def _machine_id(self, db: _Checked, record: Mapping[str, Any]) -> int:
        """The id of ``record`` (stored first if new), inside the caller's write transaction."""
        from ..provenance import check_record, record_key

        record = check_record(record)
        for statement in _MACHINE_TABLES:
            db.execute(statement)
        key = record_key(record)
        row = db.execute("SELECT id FROM machines WHERE key = ?", (key,)).fetchone()
        if row is not None:
            return int(row[0])
        cur = db.execute("INSERT INTO machines (key, record, created) VALUES (?, ?, ?)",
                         (key, json_text(record), time.time()))
        return int(cur.lastrowid)

    def add_machine(self, record: Mapping[str, Any]) -> int:
        with self._write() as db:
            return self._machine_id(db, record)

    def machines(self) -> dict[int, dict[str, Any]]:
        if "machines" not in _tables(self.db):
            return {}
        return {int(i): stored_json(r, f"machine record {i}", self.db.where)
                for i, r in self.db.execute("SELECT id, record FROM machines ORDER BY id")}

    def _hand_over(self, db: _Checked, trial_id: int, owner: Owner, lease: float | None) -> Trial:
        db.execute("UPDATE trials SET owner = ?, lease_expires = ?, attempts = attempts + 1 WHERE id = ?",
                   (owner.to_text(), None if lease is None else time.time() + lease, trial_id))
        return self._fetch(db, trial_id)

    def add_trials(self, proposals: Sequence[Proposal], owner: Owner, budget: int | None = None,
                   lease: float | None = None) -> list[Trial | None]:
        check_claim(proposals, lease)
        out: list[Trial | None] = []
        with self._write() as db:
            now = time.time()
            n_tasks = int(db.execute("SELECT count(*) FROM tasks").fetchone()[0])
            counts = dict(db.execute("SELECT task_index, count(*) FROM trials GROUP BY task_index").fetchall())
            tasks = self.tasks()
            for p in proposals:
                i = int(p.task_index)
                if not 0 <= i < n_tasks:
                    raise ValueError(f"task index {i} is outside 0..{n_tasks - 1} of history {self.path}")
                key = params_key(p.params)
                same = db.execute("SELECT id, status, owner, lease_expires FROM trials WHERE task_index = ? AND "
                                  "params_key = ? ORDER BY id", (i, key)).fetchall()
                if same:
                    orphan = next((r[0] for r in same if r[1] == Status.PENDING.value
                                   and not holder_alive(r[2], r[3], now)), None)
                    out.append(None if orphan is None else self._hand_over(db, orphan, owner, lease))
                    continue
                if budget is not None and counts.get(i, 0) >= budget:
                    out.append(None)
                    continue
                cur = db.execute(
                    "INSERT INTO trials (task_index, params, params_key, status, source, created, owner,"
                    " lease_expires) VALUES (?, ?, ?, 'pending', ?, ?, ?, ?)",
                    (i, json_text(dict(p.params)), key, str(p.source), now, owner.to_text(),
                     None if lease is None else now + lease),
                )
                counts[i] = counts.get(i, 0) + 1
                out.append(self._fetch(db, int(cur.lastrowid), tasks))
        return out

    def import_trials(self, trials: Sequence[Trial],
                      machines: Sequence[Mapping[str, Any] | None] | None = None) -> list[Trial | None]:
        check_imported(trials, machines)
        out: list[Trial | None] = []
        with self._write() as db:
            now = time.time()
            n_tasks = int(db.execute("SELECT count(*) FROM tasks").fetchone()[0])
            tasks = self.tasks()
            for k, t in enumerate(trials):
                i = int(t.task_index)
                if not 0 <= i < n_tasks:
                    raise ValueError(f"task index {i} is outside 0..{n_tasks - 1} of history {self.path}")
                key = params_key(t.params)
                if db.execute("SELECT 1 FROM trials WHERE task_index = ? AND params_key = ?", (i, key)).fetchone():
                    out.append(None)
                    continue
                value = None if t.status is Status.FAILED else float(t.value)  # type: ignore[arg-type]
                cur = db.execute(
                    "INSERT INTO trials (task_index, params, params_key, status, value, samples, reason, extra,"
                    " source, created, finished, duration, objectives) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (i, json_text(dict(t.params)), key, t.status.value, value, json_text([float(x) for x in t.samples]),
                     str(t.reason), json_text(dict(t.extra)), str(t.source), t.created or now, t.finished or now,
                     None if t.duration is None else float(t.duration),
                     objectives_text(t.values if t.status is not Status.FAILED else None)),
                )
                if machines is not None and machines[k] is not None:
                    db.execute("INSERT INTO trial_machines (trial_id, machine_id) VALUES (?, ?)",
                               (int(cur.lastrowid), self._machine_id(db, machines[k])))
                out.append(self._fetch(db, int(cur.lastrowid), tasks))
        return out

    def reclaim(self, owner: Owner, limit: int | None = None, task_indices: Sequence[int] | None = None,
                lease: float | None = None) -> list[Trial]:
        check_lease(lease)
        if limit is not None and limit <= 0:
            return []
        wanted = None if task_indices is None else {int(i) for i in task_indices}
        out: list[Trial] = []
        given_up: list[str] = []
        with self._write() as db:
            now = time.time()
            rows = db.execute("SELECT id, task_index, owner, lease_expires, attempts FROM trials"
                              " WHERE status = 'pending' ORDER BY id").fetchall()
            for id_, ti, holder, expires, attempts in rows:
                if limit is not None and len(out) >= limit:
                    break
                if (wanted is None or ti in wanted) and not holder_alive(holder, expires, now):
                    if holder is not None and attempts >= MAX_ATTEMPTS:
                        reason = given_up_reason(holder, attempts)
                        db.execute("UPDATE trials SET status = 'failed', reason = ?, finished = ?, lease_expires = NULL"
                                   " WHERE id = ?", (reason, now, int(id_)))
                        given_up.append(f"trial {id_}: {reason}")
                        continue
                    out.append(self._hand_over(db, int(id_), owner, lease))
        log_reclaimed(log, given_up, out)
        return out

    def finish(self, trial_id: int, status: Status, value: float | None = None, samples: Sequence[float] = (),
               reason: str = "", extra: Mapping[str, Any] | None = None, duration: float | None = None,
               expected: Trial | None = None, machine: Mapping[str, Any] | None = None,
               values: Mapping[str, float] | None = None) -> Trial:
        status, value, objectives = checked_tell(trial_id, status, value, duration, values)
        with self._write() as db:
            row = db.execute("SELECT task_index, params_key, status, value FROM trials WHERE id = ?",
                             (trial_id,)).fetchone()
            if row is None:
                n = db.execute("SELECT min(id), max(id) FROM trials").fetchone()
                held = "no trials" if n[0] is None else f"trial ids {n[0]}..{n[1]}"
                raise UnknownTrial(f"trial {trial_id} is not in history {self.path} (it holds {held})")
            ti, key, stored_status, stored_value = row
            if expected is not None and (expected.task_index != ti or params_key(expected.params) != key):
                raise HistoryMismatch(
                    f"trial {trial_id} of history {self.path} is task {ti} with other parameters than the trial "
                    f"told (task {expected.task_index}, {dict(expected.params)}): it was asked from another history")
            if stored_status != Status.PENDING.value:
                shown = f" with value {stored_value!r}" if stored_value is not None else ""
                raise TrialNotPending(f"trial {trial_id} was already told: it is {stored_status}{shown}; "
                                      "a trial takes exactly one result")
            db.execute(
                "UPDATE trials SET status = ?, value = ?, samples = ?, reason = ?, extra = ?, finished = ?,"
                " duration = ?, lease_expires = NULL, objectives = ? WHERE id = ?",
                (status.value, value, json_text([float(s) for s in samples]), str(reason), json_text(dict(extra or {})),
                 time.time(), None if duration is None else float(duration), objectives, trial_id),
            )
            if machine is not None:
                db.execute("INSERT OR REPLACE INTO trial_machines (trial_id, machine_id) VALUES (?, ?)",
                           (trial_id, self._machine_id(db, machine)))
            return self._fetch(db, trial_id)

    def release(self, owner: Owner | None = None, ids: Sequence[int] | None = None, force: bool = False) -> list[int]:
        if owner is None and ids is None:
            raise ValueError("release needs an owner or trial ids")
        with self._write() as db:
            found: list[int] = []
            if owner is not None:
                found += [r[0] for r in db.execute("SELECT id FROM trials WHERE status = 'pending' AND owner = ?",
                                                   (owner.to_text(),))]
            now = time.time()
            for i in ids or ():
                row = db.execute("SELECT status, owner, lease_expires FROM trials WHERE id = ?", (int(i),)).fetchone()
                check_release(i, row, None if row is None else running_holder(row[1], row[2], now), force, str(self.path))
                found.append(int(i))
            for i in found:
                db.execute("UPDATE trials SET owner = NULL, lease_expires = NULL WHERE id = ?", (i,))
        return sorted(set(found))

    # ---- copying (gptask.data.storage.copy) ---------------------------------------------------------
    def export_rows(self) -> dict[str, list[tuple[Any, ...]]]:
        """Every row of the history, table by table (:data:`gptask.data.storage.copy.TABLES`, and "meta")."""
        have = _tables(self.db)
        out: dict[str, list[tuple[Any, ...]]] = {"meta": [tuple(r) for r in self.db.execute(
            "SELECT key, value FROM meta ORDER BY key").fetchall()]}
        for table, cols in COPY_TABLES.items():
            out[table] = [] if table not in have else [tuple(r) for r in self.db.execute(
                f"SELECT {', '.join(cols)} FROM {table} ORDER BY {cols[0]}").fetchall()]
        return out

    def import_rows(self, rows: Mapping[str, Sequence[Sequence[Any]]]) -> None:
        """Write ``rows`` (of :meth:`export_rows`) into this empty history in one transaction."""
        with self._write() as db:
            db.execute(_CONFIRMATIONS_TABLE)
            for statement in _MACHINE_TABLES:
                db.execute(statement)
            for key, value in meta_rows(dict(rows)):
                db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, value))
            for table, cols in COPY_TABLES.items():
                for r in rows.get(table, ()):
                    db.execute(f"INSERT INTO {table} ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
                               tuple(r))

    # ---- confirmation runs (not trials) ------------------------------------------------------
    def add_confirmation(self, task_index: int, params: Mapping[str, Any], status: Status,
                         value: float | None = None, samples: Sequence[float] = (), reason: str = "",
                         duration: float | None = None, values: Mapping[str, float] | None = None) -> Trial:
        row_values = confirmation_values(task_index, params, status, value, samples, reason, duration, values)
        with self._write() as db:
            if not 0 <= int(task_index) < int(db.execute("SELECT count(*) FROM tasks").fetchone()[0]):
                raise ValueError(f"task index {task_index} is not in history {self.path}")
            db.execute(_CONFIRMATIONS_TABLE)
            cur = db.execute(
                "INSERT INTO confirmations (task_index, params, status, value, samples, reason, created, duration,"
                " objectives) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", row_values)
            row = db.execute(f"SELECT {_CONFIRMATION_COLUMNS} FROM confirmations WHERE id = ?",
                             (cur.lastrowid,)).fetchone()
        return confirmation_from_row(row, self.tasks(), self.db.where)

    def confirmations(self, task_index: int | None = None) -> list[Trial]:
        if "confirmations" not in _tables(self.db):
            return []
        sql = f"SELECT {_CONFIRMATION_COLUMNS} FROM confirmations"
        args: list[Any] = []
        if task_index is not None:
            sql += " WHERE task_index = ?"
            args.append(int(task_index))
        tasks = self.tasks()
        return [confirmation_from_row(r, tasks, self.db.where) for r in self.db.execute(sql + " ORDER BY id", args).fetchall()]


    # ---- models ------------------------------------------------------------------------------
    def add_model(self, iteration: int, params: Mapping[str, Any], log_likelihood: float | None,
                  data_key: str | None = None) -> None:
        with self._write() as db:
            db.execute("INSERT INTO models (iteration, created, log_likelihood, params, data_key) VALUES (?, ?, ?, ?, ?)",
                       (int(iteration), time.time(), log_likelihood, json_text(dict(params)), data_key))

    def last_model(self) -> dict[str, Any] | None:
        row = self.db.execute("SELECT iteration, log_likelihood, params, data_key FROM models ORDER BY id DESC LIMIT 1"
                              ).fetchone()
        if row is None:
            return None
        return {"iteration": row[0], "log_likelihood": row[1], "params": stored_json(row[2], "the last model's parameters", self.db.where), "data_key": row[3]}

    def models(self) -> list[dict[str, Any]]:
        rows = self.db.execute("SELECT iteration, created, log_likelihood, data_key FROM models ORDER BY id").fetchall()
        return [{"iteration": r[0], "created": r[1], "log_likelihood": r[2], "data_key": r[3]} for r in rows]

    def fit_diagnostics(self) -> list[dict[str, Any]]:
        rows = self.db.execute("SELECT params FROM models ORDER BY id").fetchall()
        return [dict(stored_json(r[0], "a model's parameters", self.db.where).get("diagnostics") or {}) for r in rows]






def read_signature(path: str | os.PathLike) -> dict[str, Any]:
    """The problem signature stored in an existing history (read-only; for tools without a Problem)."""
    with SQLiteStorage(path, read_only=True) as s:
        return s.signature

