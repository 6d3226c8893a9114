"""The PostgreSQL history: the same :class:`~gptask.data.storage.base.Storage` contract as the SQLite file,
in a database server that several hosts can share (``pip install gptask[postgres]``, psycopg 3).

A history is named by a URL, ``postgresql://user@host:port/dbname?schema=NAME``: its tables live in
the PostgreSQL schema NAME (default :data:`DEFAULT_SCHEMA`), so one database holds many histories.
Every other URL parameter and the libpq environment (``PGPASSWORD``, ``~/.pgpass``, ``PGSERVICE``,
``sslmode``, ``sslrootcert``, ``application_name``, ...) pass through to libpq unchanged (a
connection is named :data:`APPLICATION_NAME` in ``pg_stat_activity`` unless the URL or ``PGAPPNAME``
names it). A password is never shown: every message, ``repr`` and stored text uses :func:`redact`.

Schema 3 (the version of the SQLite schema it mirrors), in schema NAME::

    meta(key, value)            format "gptask.history", schema_version, signature (JSON), created,
                                the run's state under "user:<key>"
    tasks(task_index, task, closed)
    trials(id, task_index, params, params_key, status, value, samples, reason, extra, source, created,
           finished, duration, attempts, owner, lease_expires, objectives, told_by)
                                UNIQUE (task_index, params_key): one trial per configuration
    models, confirmations, machines, trial_machines   as in the SQLite schema
    holders(token, host, pid, seen)                   heartbeats of live tuner processes

Versions. ``meta.schema_version`` records the layout. Opening a history of an older schema for
writing upgrades it in one transaction, under the same advisory lock as its creation (a failed step
leaves it as it was; two processes opening it at once upgrade it once), and records
``upgraded_from``; the steps are :data:`_UPGRADES`. Schema 2 is the layout before the ``objectives``
columns (as in SQLite; with ``told_by`` and ``holders``, added by the upgrade when absent). A
history opened read-only is never written: an older one is refused, naming both versions and how to
upgrade it. Schema 1 (SQLite's ``evaluations`` rows) never existed on PostgreSQL and is refused; a
newer schema than :data:`SCHEMA_VERSION` is refused, naming both versions.

Concurrency is by transactions and row locks: a claim locks the rows of its tasks (``SELECT ... FOR
UPDATE``), so two clients never claim one configuration or overrun a task's budget; a tell or a
reclaim locks the trial rows it changes. ``told_by`` holds a token of the tell that finished a
trial: a tell whose connection was lost during its commit is retried and recognises its own result,
so a dropped connection or a server restart neither loses a result nor reports it twice.

Owner liveness across hosts: a process holder on this host is alive while its process exists (as
for SQLite); a process holder on another host is alive while its heartbeat is fresh. A storage that
claims trials for a process owner of its own process keeps a row in ``holders`` and a thread
refreshes its ``seen`` (server time) every :data:`HEARTBEAT_S` seconds on a connection of its own,
reconnecting after a restart or a dropped connection. A holder whose heartbeat is older than
:data:`HOLDER_TIMEOUT_S` is dead (``kill -9``, a lost node), except within HOLDER_TIMEOUT_S of a
server start (the keepers reconnect first). A holder with no heartbeat row cannot be checked and
counts as alive until its lease, if any, expires.

Over 500 lines on purpose: one backend of the storage contract (schema, versions, claims under row
locks, tells exactly once, holders and heartbeats, reconnection), one class as the contract's tests
see it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, NamedTuple, TypeVar
from urllib.parse import SplitResult, parse_qsl, quote, unquote, urlencode, urlsplit, urlunsplit

from ..trials import Proposal, Status, Trial, params_key
from .base import (COPY_TABLES, MAX_ATTEMPTS, HistoryDamaged, HistoryError, HistoryMismatch, HistoryWriteFailed, NotAHistory,
                   SchemaTooNew, SchemaTooOld, Storage, TrialNotPending, UnknownTrial, UID_KEY, json_text, meta_rows,
                   mismatch_text, normalised, stored_json)
from .owner import Owner, holder_alive, running_holder
from .records import (check_claim, check_imported, check_lease, check_release, checked_tell, confirmation_from_row,
                      confirmation_values, given_up_reason, log_reclaimed, objectives_text,
                      trial_from_row, trials_where)

__all__ = ["PostgresStorage", "Location", "URL_SCHEMES", "is_url", "redact", "split_url", "HistoryUnreachable", "DEFAULT_SCHEMA",
           "SCHEMA_VERSION", "HEARTBEAT_S", "HOLDER_TIMEOUT_S", "APPLICATION_NAME"]

log = logging.getLogger(__name__)

SCHEMA_VERSION = 3
FORMAT = "gptask.history"
DEFAULT_SCHEMA = "gptask"
#: seconds between two heartbeats of a live holder
HEARTBEAT_S = 2.0
#: a holder on another host whose heartbeat is older than this is dead
HOLDER_TIMEOUT_S = float(os.environ.get("GPTASK_PG_HOLDER_TIMEOUT_S", "20"))
#: seconds a client keeps trying to reconnect after losing its connection (a server restart)
RECONNECT_S = float(os.environ.get("GPTASK_PG_RECONNECT_S", "60"))
#: the application_name of a connection (pg_stat_activity) unless the URL or PGAPPNAME names one
APPLICATION_NAME = "gptask"
#: seconds libpq waits for a connection
CONNECT_TIMEOUT_S = 10
_SCHEMA_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")
#: the URL schemes of a PostgreSQL history
URL_SCHEMES = ("postgresql://", "postgres://")

T = TypeVar("T")


class HistoryUnreachable(HistoryError):
    """The database server cannot be reached or refused the connection (host, port, credentials)."""


def is_url(history: Any) -> bool:
    """Whether ``history`` names a PostgreSQL history (a ``postgresql://`` or ``postgres://`` URL,
    :data:`URL_SCHEMES`)."""
    return isinstance(history, str) and history.startswith(URL_SCHEMES)


def redact(url: str) -> str:
    """``url`` with its password (and a ``password=`` parameter) replaced by ``***``."""
    try:
        return _shown(urlsplit(url))
    except ValueError:
        return "postgresql://***"


def _shown(parts: SplitResult) -> str:
    """A split URL put back together without its password (:func:`redact`)."""
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, hostport = netloc.rpartition("@")
        if ":" in userinfo:
            userinfo = userinfo.split(":", 1)[0] + ":***"
        netloc = f"{userinfo}@{hostport}"
    query = [(k, "***" if k.lower() == "password" else v) for k, v in parse_qsl(parts.query, keep_blank_values=True)]
    return urlunsplit((parts.scheme, netloc, parts.path, urlencode(query, safe="*/"), ""))


class Location(NamedTuple):
    """A history URL read once: libpq's connection URL, the schema holding the history, and the URL
    as messages show it (without its password)."""

    conninfo: str
    schema: str
    shown: str


def split_url(url: str) -> Location:
    """The :class:`Location` of a history URL: ``?schema=`` is gptask's, the rest libpq's."""
    try:
        parts = urlsplit(url)
    except ValueError:
        raise ValueError("history URL postgresql://*** cannot be read as a URL") from None
    shown = _shown(parts)
    query = parse_qsl(parts.query, keep_blank_values=True)
    schema = DEFAULT_SCHEMA
    rest = []
    for k, v in query:
        if k == "schema":
            schema = v
        else:
            rest.append((k, v))
    if not _SCHEMA_NAME.fullmatch(schema):
        raise ValueError(f"schema name in history URL {shown} must be letters, digits and _ (not starting "
                         f"with a digit, at most 63), got {schema!r}")
    return Location(urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode(rest, quote_via=quote), "")), schema,
                    shown)


def _where(url: str) -> tuple[str, str]:
    """(host, port) a URL names, for messages (libpq's defaults when absent)."""
    try:
        parts = urlsplit(url)
        host = unquote(parts.hostname or "") or os.environ.get("PGHOST", "") or "the local socket"
        port = str(parts.port or os.environ.get("PGPORT", "5432"))
    except ValueError:
        host, port = "?", "?"
    return host, port


def _psycopg() -> Any:
    try:
        import psycopg
    except ImportError:
        raise ImportError("a postgresql:// history needs psycopg 3: pip install 'gptask[postgres]'") from None
    return psycopg


_SCHEMA = """
CREATE TABLE {s}.meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE {s}.tasks (task_index INTEGER PRIMARY KEY, task TEXT NOT NULL, closed TEXT);
CREATE TABLE {s}.trials (
    id BIGSERIAL PRIMARY KEY, task_index INTEGER NOT NULL, params TEXT NOT NULL, params_key TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('pending', 'complete', 'failed', 'censored')),
    value DOUBLE PRECISION, samples TEXT NOT NULL DEFAULT '[]', reason TEXT NOT NULL DEFAULT '',
    extra TEXT NOT NULL DEFAULT '{{}}', source TEXT NOT NULL DEFAULT '', created DOUBLE PRECISION NOT NULL,
    finished DOUBLE PRECISION, duration DOUBLE PRECISION, attempts INTEGER NOT NULL DEFAULT 1, owner TEXT,
    lease_expires DOUBLE PRECISION, objectives TEXT, told_by TEXT,
    UNIQUE (task_index, params_key));
CREATE INDEX trials_status ON {s}.trials (status);
CREATE TABLE {s}.models (id BIGSERIAL PRIMARY KEY, iteration INTEGER NOT NULL, created DOUBLE PRECISION NOT NULL,
    log_likelihood DOUBLE PRECISION, params TEXT NOT NULL, data_key TEXT);
CREATE TABLE {s}.confirmations (id BIGSERIAL PRIMARY KEY, task_index INTEGER NOT NULL, params TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('complete', 'failed')), value DOUBLE PRECISION,
    samples TEXT NOT NULL DEFAULT '[]', reason TEXT NOT NULL DEFAULT '', created DOUBLE PRECISION NOT NULL,
    duration DOUBLE PRECISION, objectives TEXT);
CREATE TABLE {s}.machines (id BIGSERIAL PRIMARY KEY, key TEXT NOT NULL UNIQUE, record TEXT NOT NULL,
    created DOUBLE PRECISION NOT NULL);
CREATE TABLE {s}.trial_machines (trial_id BIGINT PRIMARY KEY, machine_id BIGINT NOT NULL);
CREATE TABLE {s}.holders (token TEXT PRIMARY KEY, host TEXT NOT NULL, pid INTEGER, seen DOUBLE PRECISION NOT NULL)
"""

#: {version: the statements that take a history of that schema to the next one}, run in order in
#: one transaction by :meth:`PostgresStorage._open` (``{s}``: the history's schema)
_UPGRADES: dict[int, tuple[str, ...]] = {
    2: ("ALTER TABLE {s}.trials ADD COLUMN IF NOT EXISTS objectives TEXT",
        "ALTER TABLE {s}.confirmations ADD COLUMN IF NOT EXISTS objectives TEXT",
        "ALTER TABLE {s}.trials ADD COLUMN IF NOT EXISTS told_by TEXT",
        "CREATE TABLE IF NOT EXISTS {s}.holders (token TEXT PRIMARY KEY, host TEXT NOT NULL, pid INTEGER, "
        "seen DOUBLE PRECISION NOT NULL)"),
}
#: the oldest schema :data:`_UPGRADES` takes to :data:`SCHEMA_VERSION`
OLDEST_UPGRADABLE = min(_UPGRADES)

_TRIAL_COLUMNS = ("t.id, t.task_index, t.params, t.status, t.value, t.samples, t.reason, t.extra, t.source, t.created,"
                  " t.finished, t.duration, t.attempts, t.owner, t.objectives, m.machine_id")
_CONFIRMATION_COLUMNS = "id, task_index, params, status, value, samples, reason, created, duration, objectives"
_NOW = "extract(epoch from clock_timestamp())::float8"


class _Lost(Exception):
    """The connection to the server was lost (a restart, pg_terminate_backend): reconnect and retry."""


class PostgresStorage(Storage):
    """A history in schema ``?schema=`` (default "gptask") of the PostgreSQL database ``url``.

    signature, create, read_only: as for :class:`~gptask.data.storage.sqlite.SQLiteStorage` (an absent
    history is created for ``signature`` when ``create``; None opens an existing one whatever its
    problem; read_only never writes).
    """

    def __init__(self, url: str, signature: Mapping[str, Any] | None = None, *, create: bool = True,
                 read_only: bool = False) -> None:
        self.path = None
        self._conninfo, self.schema, self.url = split_url(url)  # self.url: without the password
        # the name pg_stat_activity shows: the URL's application_name or PGAPPNAME when given, else "gptask"
        self._named = bool(os.environ.get("PGAPPNAME")) or any(
            k == "application_name" for k, _ in parse_qsl(urlsplit(self._conninfo).query))
        self.read_only = bool(read_only)
        self._s = f'"{self.schema}"'
        self._conn: Any = None
        self._held: set[str] = set()
        self._keeper: threading.Thread | None = None
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._retrying = False
        self._connect()
        try:
            self._run(lambda: self._open(signature, create))
        except BaseException:
            self.close()
            raise

    # ---- connections and errors ---------------------------------------------------------------
    def _new_connection(self) -> Any:
        psycopg = _psycopg()
        host, port = _where(self._conninfo)
        try:
            named = {} if self._named else {"application_name": APPLICATION_NAME}
            return psycopg.connect(self._conninfo, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S, **named)
        except psycopg.OperationalError as exc:
            text = _clean(str(exc), self._conninfo)
            if "password authentication failed" in text or "no password supplied" in text \
                    or "authentication failed" in text:
                raise HistoryUnreachable(
                    f"PostgreSQL server {host}:{port} refused the credentials for history {self.url}: "
                    f"{text}; check the user name and the password (PGPASSWORD, ~/.pgpass, PGSERVICE)") from None
            if "does not exist" in text:
                raise HistoryUnreachable(f"history {self.url}: {text}; create the database first "
                                         "(createdb) or name an existing one") from None
            raise HistoryUnreachable(
                f"cannot reach PostgreSQL server {host}:{port} for history {self.url}: {text}; check that the "
                "server runs, the host name and port, the network and the server's pg_hba.conf") from None

    def _connect(self) -> None:
        self._conn = self._new_connection()

    def _reconnect(self) -> None:
        with contextlib.suppress(Exception):
            self._conn.close()
        self._conn = None
        deadline = time.monotonic() + RECONNECT_S
        while True:
            try:
                self._connect()
                return
            except HistoryUnreachable:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def _error(self, exc: Exception) -> Exception:
        """The gptask error for a psycopg error ``exc`` (naming the history, never its password)."""
        psycopg = _psycopg()
        state = getattr(exc, "sqlstate", None) or ""
        text = _clean(str(exc).strip(), self._conninfo)
        if state.startswith("53") or state == "25006" or state.startswith("58"):
            what = "the server is read-only" if state == "25006" else "the server is out of resources (disk full?)"
            return HistoryWriteFailed(f"cannot write history {self.url}: {text} ({what}); every result told before "
                                      "this one is kept: fix the server and run the same command again to resume")
        if state == "42501":
            return PermissionError(f"history {self.url}: {text} (the database user may not do this)")
        if isinstance(exc, psycopg.errors.UndefinedTable) or isinstance(exc, psycopg.errors.UndefinedColumn):
            return HistoryDamaged(f"history {self.url} is damaged: it lacks a table or column it needs ({text}); it was "
                                  "changed by hand or by another program: restore it from a copy")
        return exc

    def _run(self, op: Callable[[], T], write: bool = False) -> T:
        """``op`` with psycopg's errors translated; a lost connection is re-opened and ``op`` run again."""
        psycopg = _psycopg()
        attempt = 0
        while True:
            if self._conn is None:
                raise ValueError(f"history {self.url} is closed")
            try:
                return op()
            except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
                state = str(getattr(exc, "sqlstate", None) or "")
                lost = self._conn.closed or self._conn.broken or state.startswith(("08", "57P"))
                if not lost:
                    err = self._error(exc)
                    if err is exc:
                        raise
                    raise err from None
                attempt += 1
                if attempt > 5:
                    raise HistoryUnreachable(f"lost the connection to history {self.url} and could not get it back: "
                                             f"{_clean(str(exc), self._conninfo)}") from None
                log.warning("lost the connection to history %s (%s); reconnecting", self.url,
                            _clean(str(exc).strip(), self._conninfo))
                self._reconnect()
                self._retrying = True
            except psycopg.Error as exc:
                err = self._error(exc)
                if err is exc:
                    raise
                raise err from None

    @contextlib.contextmanager
    def _tx(self) -> Iterator[Any]:
        """One transaction (a cursor); committed when the block ends, rolled back on any error."""
        if self.read_only:
            raise PermissionError(f"history {self.url} was opened read-only")
        with self._conn.transaction(), self._conn.cursor() as cur:
            yield cur

    def _q(self, sql: str, args: Sequence[Any] = ()) -> list[Any]:
        """Rows of one read statement (outside a transaction)."""
        def read() -> list[Any]:
            with self._conn.cursor() as cur:
                cur.execute(sql.replace("{s}", self._s), args)
                return cur.fetchall()
        return self._run(read)

    def _x(self, cur: Any, sql: str, args: Sequence[Any] = ()) -> Any:
        cur.execute(sql.replace("{s}", self._s), args)
        return cur

    # ---- opening ------------------------------------------------------------------------------
    def _version(self, cur: Any) -> int:
        """0 for an absent schema, else the schema version; NotAHistory for another program's tables."""
        tables = {r[0] for r in self._x(cur, "SELECT table_name FROM information_schema.tables WHERE table_schema = %s",
                                         (self.schema,)).fetchall()}
        if not tables:
            return 0
        if {"meta", "trials", "tasks"} <= tables:
            rows = dict(self._x(cur, "SELECT key, value FROM {s}.meta WHERE key IN "
                                     "('format', 'schema_version', 'signature')").fetchall())
            if rows.get("format") == FORMAT and "signature" in rows:
                with contextlib.suppress(ValueError):
                    return int(rows.get("schema_version", ""))
        names = ", ".join(sorted(tables))
        raise NotAHistory(f"schema {self.schema!r} of {self.url} holds tables of another program ({names}), not a "
                          "gptask history; name another schema (?schema=NAME)")

    def _open(self, signature: Mapping[str, Any] | None, create: bool) -> None:
        with self._conn.transaction(), self._conn.cursor() as cur:
            # one creator at a time: a transaction-scoped advisory lock on the schema's name
            self._x(cur, "SELECT pg_advisory_xact_lock(hashtext(%s))", ("gptask:" + self.schema,))
            version = self._version(cur)
            if version > SCHEMA_VERSION:
                raise SchemaTooNew(f"{self.url} (schema {self.schema!r}) has history schema {version}; this gptask "
                                   f"reads schema {SCHEMA_VERSION} and older: upgrade gptask to use it")
            if 0 < version < OLDEST_UPGRADABLE:
                raise SchemaTooOld(f"{self.url} (schema {self.schema!r}) has history schema {version}; this gptask "
                                   f"upgrades schema {OLDEST_UPGRADABLE} and newer to {SCHEMA_VERSION} (schema "
                                   f"{version} was only ever a SQLite file: copy such a file with gptask copy)")
            if 0 < version < SCHEMA_VERSION:
                if signature is not None:
                    self._check_signature(cur, signature)  # never touch another problem's history
                if self.read_only:
                    raise SchemaTooOld(f"{self.url} (schema {self.schema!r}) has history schema {version}, older than "
                                       f"this gptask's {SCHEMA_VERSION}, and was opened read-only: open it once for "
                                       "writing to upgrade it (gptask tune or ask with its problem, or open_storage(URL)"
                                       " in Python), then read it")
                self._upgrade(cur, version)
            if version == 0:
                if signature is None or not create or self.read_only:
                    raise FileNotFoundError(f"no history in schema {self.schema!r} of {self.url}")
                self._x(cur, "CREATE SCHEMA IF NOT EXISTS {s}")
                for statement in _SCHEMA.split(";"):
                    if statement.strip():
                        self._x(cur, statement.format(s="{s}"))
                for key, value in (("format", FORMAT), ("schema_version", str(SCHEMA_VERSION)),
                                   ("created", repr(time.time())), ("signature", json_text(dict(signature)))):
                    self._x(cur, "INSERT INTO {s}.meta (key, value) VALUES (%s, %s)", (key, value))
            if signature is not None:
                self._check_signature(cur, signature)

    def _check_signature(self, cur: Any, signature: Mapping[str, Any]) -> None:
        """HistoryMismatch unless the history was written for the problem of ``signature``."""
        stored = dict(self._x(cur, "SELECT key, value FROM {s}.meta WHERE key = 'signature'").fetchall())
        sig = normalised(dict(signature))
        theirs = stored_json(stored["signature"], "the signature (meta)", self.url)
        if theirs != sig:
            raise HistoryMismatch(
                f"history {self.url} (schema {self.schema!r}) was written for a different problem: "
                f"{mismatch_text(theirs, sig)}. Use another schema (?schema=NAME) for this problem.", where=self.url,
                stored=theirs)

    def _upgrade(self, cur: Any, version: int) -> None:
        """Schema ``version`` -> SCHEMA_VERSION inside the caller's transaction (:data:`_UPGRADES`)."""
        for step in range(version, SCHEMA_VERSION):
            for statement in _UPGRADES[step]:
                self._x(cur, statement)
        self._x(cur, "UPDATE {s}.meta SET value = %s WHERE key = 'schema_version'", (str(SCHEMA_VERSION),))
        self._x(cur, "INSERT INTO {s}.meta (key, value) VALUES ('upgraded_from', %s) ON CONFLICT (key) DO NOTHING",
                (str(version),))
        log.info("history %s upgraded from schema %d to %d", self.url, version, SCHEMA_VERSION)

    # ---- plumbing -----------------------------------------------------------------------------
    def close(self) -> None:
        self._stop.set()
        if self._keeper is not None:
            self._keeper.join(timeout=10)
            self._keeper = None
        if self._conn is not None:
            with contextlib.suppress(Exception):
                self._conn.close()
            self._conn = None

    def __repr__(self) -> str:
        return f"PostgresStorage({self.url})"

    def __str__(self) -> str:
        return self.url

    def _write(self, body: Callable[[Any], T]) -> T:
        """``body(cursor)`` in one transaction, retried whole when the connection was lost."""
        self._retrying = False

        def op() -> T:
            with self._tx() as cur:
                return body(cur)
        return self._run(op, write=True)

    # ---- holders and liveness -----------------------------------------------------------------
    def _hold(self, cur: Any, owner: Owner) -> None:
        """Record a heartbeat for ``owner`` when it is this process, and keep it fresh."""
        if owner.pid != os.getpid() or owner.host != socket.gethostname():
            return
        self._x(cur, f"INSERT INTO {{s}}.holders (token, host, pid, seen) VALUES (%s, %s, %s, {_NOW}) "
                     f"ON CONFLICT (token) DO UPDATE SET seen = {_NOW}", (owner.token, owner.host, owner.pid))
        with self._lock:
            self._held.add(owner.token)
            if self._keeper is None:
                self._keeper = threading.Thread(target=self._keep, name="gptask-pg-heartbeat", daemon=True)
                self._keeper.start()

    def _keep(self) -> None:
        """The heartbeat thread: refresh ``seen`` of this process's holders on a connection of its own."""
        conn = None
        while not self._stop.wait(HEARTBEAT_S):
            try:
                if conn is None or conn.closed or conn.broken:
                    conn = self._new_connection()
                with self._lock:
                    tokens = sorted(self._held)
                with conn.cursor() as cur:
                    cur.execute(f"UPDATE {self._s}.holders SET seen = {_NOW} WHERE token = ANY(%s)", (tokens,))
            except Exception as exc:  # the server restarts: try again at the next beat
                log.debug("heartbeat of history %s failed: %s", self.url, _clean(str(exc), self._conninfo))
                with contextlib.suppress(Exception):
                    if conn is not None:
                        conn.close()
                conn = None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()

    def _liveness(self, cur: Any) -> Callable[[str | None, float | None, float], bool]:
        """holder_alive with the heartbeats: a process holder on another host whose heartbeat went stale
        is dead (outside the grace after a server start)."""
        now_s, started = self._x(cur, f"SELECT {_NOW}, extract(epoch from pg_postmaster_start_time())::float8"
                                 ).fetchone()
        beats = dict(self._x(cur, "SELECT token, seen FROM {s}.holders").fetchall())
        fresh_server = now_s - started < HOLDER_TIMEOUT_S
        here = socket.gethostname()

        def alive(text: str | None, expires: float | None, now: float) -> bool:
            if not holder_alive(text, expires, now):
                return False
            owner = Owner.read(text)
            if owner is None or owner.pid is None or owner.host == here:
                return True
            seen = beats.get(owner.token)
            return seen is None or fresh_server or now_s - seen <= HOLDER_TIMEOUT_S
        return alive

    # ---- the run ------------------------------------------------------------------------------
    @property
    def signature(self) -> dict[str, Any]:
        rows = self._q("SELECT value FROM {s}.meta WHERE key = 'signature'")
        return stored_json(rows[0][0], "the signature (meta)", self.url) if rows else {}

    def get_meta(self, key: str) -> Any:
        rows = self._q("SELECT value FROM {s}.meta WHERE key = %s", ("user:" + key,))
        return stored_json(rows[0][0], f"the run's state {key!r} (meta)", self.url) if rows else None

    def set_meta(self, key: str, value: Any) -> None:
        text = json_text(value)
        self._write(lambda cur: self._x(cur, "INSERT INTO {s}.meta (key, value) VALUES (%s, %s) ON CONFLICT (key) "
                                             "DO UPDATE SET value = EXCLUDED.value", ("user:" + key, text)))

    def uid(self) -> str:
        rows = self._q("SELECT value FROM {s}.meta WHERE key = %s", (UID_KEY,))
        if not rows:  # the first writer's wins (ON CONFLICT DO NOTHING)
            self._write(lambda cur: self._x(cur, "INSERT INTO {s}.meta (key, value) VALUES (%s, %s) ON CONFLICT (key) "
                                                 "DO NOTHING", (UID_KEY, uuid.uuid4().hex)))
            rows = self._q("SELECT value FROM {s}.meta WHERE key = %s", (UID_KEY,))
        return str(rows[0][0])

    def raw_meta(self) -> dict[str, str]:
        """Every meta row as stored (for copying a history)."""
        return dict(self._q("SELECT key, value FROM {s}.meta ORDER BY key"))

    @property
    def schema_version(self) -> int:
        rows = self._q("SELECT value FROM {s}.meta WHERE key = 'schema_version'")
        return int(rows[0][0]) if rows else 0

    # ---- tasks --------------------------------------------------------------------------------
    def _tasks(self, rows: Any) -> list[dict[str, Any]]:
        """The task dicts of rows of ``SELECT task FROM tasks ORDER BY task_index``."""
        return [stored_json(r[0], f"task {i}", self.url) for i, r in enumerate(rows)]

    def _read_tasks(self, cur: Any) -> list[dict[str, Any]]:
        """The task dicts, read inside the caller's transaction ``cur``."""
        return self._tasks(self._x(cur, "SELECT task FROM {s}.tasks ORDER BY task_index"))

    def tasks(self) -> list[dict[str, Any]]:
        return self._tasks(self._q("SELECT task FROM {s}.tasks ORDER BY task_index"))

    def set_tasks(self, tasks: Sequence[Mapping[str, Any]]) -> None:
        new = [normalised(dict(t)) for t in tasks]

        def body(cur: Any) -> None:
            self._x(cur, "SELECT 1 FROM {s}.meta WHERE key = 'signature' FOR UPDATE")  # one writer of the task list
            stored = self._read_tasks(cur)
            if stored[: len(new)] != new[: len(stored)] or len(new) < len(stored):
                raise HistoryMismatch(f"history {self.url} holds tasks {stored} but this run asks for {new}")
            for i, t in enumerate(new[len(stored):], start=len(stored)):
                self._x(cur, "INSERT INTO {s}.tasks (task_index, task) VALUES (%s, %s)", (i, json_text(t)))
        self._write(body)

    def closed_tasks(self) -> dict[int, str]:
        return {int(i): str(r) for i, r in self._q("SELECT task_index, closed FROM {s}.tasks WHERE closed IS NOT NULL")}

    def close_task(self, task_index: int, reason: str) -> None:
        def body(cur: Any) -> None:
            n = self._x(cur, "UPDATE {s}.tasks SET closed = %s WHERE task_index = %s AND closed IS NULL",
                        (str(reason), int(task_index))).rowcount
            if n == 0 and self._x(cur, "SELECT 1 FROM {s}.tasks WHERE task_index = %s",
                                  (int(task_index),)).fetchone() is None:
                raise ValueError(f"task index {task_index} is not in history {self.url}")
        self._write(body)

    # ---- trials -------------------------------------------------------------------------------

    _SELECT = f"SELECT {_TRIAL_COLUMNS} FROM {{s}}.trials t LEFT JOIN {{s}}.trial_machines m ON m.trial_id = t.id"

    def trials(self, task_index: int | None = None, status: Status | None = None) -> list[Trial]:
        where, args = trials_where(task_index, status, "%s")

        def read() -> list[Trial]:
            with self._conn.transaction(), self._conn.cursor() as cur:  # tasks and trials of one state
                tasks = self._read_tasks(cur)
                sql = self._SELECT + where + " ORDER BY t.id"
                return [trial_from_row(r, tasks, self.url) for r in self._x(cur, sql, args).fetchall()]
        return self._run(read)

    def trials_after(self, last_id: int, ids: Sequence[int] = ()) -> list[Trial]:
        wanted = sorted({int(i) for i in ids if i <= last_id})

        def read() -> list[Trial]:
            with self._conn.transaction(), self._conn.cursor() as cur:
                tasks = self._read_tasks(cur)
                rows = self._x(cur, self._SELECT + " WHERE t.id > %s OR t.id = ANY(%s) ORDER BY t.id",
                               (int(last_id), wanted)).fetchall()
                return [trial_from_row(r, tasks, self.url) for r in rows]
        return self._run(read)

    def _fetch(self, cur: Any, trial_id: int, tasks: list[dict[str, Any]] | None = None) -> Trial:
        """Trial ``trial_id``; ``tasks``: the history's tasks when the caller has read them (a loop over
        many trials reads them once, not once per trial)."""
        if tasks is None:
            tasks = self._read_tasks(cur)
        return trial_from_row(self._x(cur, self._SELECT + " WHERE t.id = %s", (trial_id,)).fetchone(), tasks, self.url)

    # ---- machines -----------------------------------------------------------------------------
    def _machine_id(self, cur: Any, record: Mapping[str, Any]) -> int:
        from ..provenance import check_record, record_key

        record = check_record(record)
        key = record_key(record)
        self._x(cur, "INSERT INTO {s}.machines (key, record, created) VALUES (%s, %s, %s) ON CONFLICT (key) DO NOTHING",
                (key, json_text(record), time.time()))
        return int(self._x(cur, "SELECT id FROM {s}.machines WHERE key = %s", (key,)).fetchone()[0])

    def add_machine(self, record: Mapping[str, Any]) -> int:
        return self._write(lambda cur: self._machine_id(cur, record))

    def machines(self) -> dict[int, dict[str, Any]]:
        return {int(i): stored_json(r, f"machine record {i}", self.url)
                for i, r in self._q("SELECT id, record FROM {s}.machines ORDER BY id")}

    # ---- claims -------------------------------------------------------------------------------
    def _hand_over(self, cur: Any, trial_id: int, owner: Owner, lease: float | None) -> Trial:
        self._x(cur, "UPDATE {s}.trials SET owner = %s, lease_expires = %s, attempts = attempts + 1 WHERE id = %s",
                (owner.to_text(), None if lease is None else time.time() + lease, trial_id))
        return self._fetch(cur, trial_id)

    def add_trials(self, proposals: Sequence[Proposal], owner: Owner, budget: int | None = None,
                   lease: float | None = None) -> list[Trial | None]:
        check_claim(proposals, lease)
        mine = owner.to_text()

        def body(cur: Any) -> list[Trial | None]:
            retrying = self._retrying
            now = time.time()
            wanted = self._lock_tasks(cur, [p.task_index for p in proposals])
            counts = dict(self._x(cur, "SELECT task_index, count(*) FROM {s}.trials WHERE task_index = ANY(%s) "
                                       "GROUP BY task_index", (wanted,)).fetchall())
            alive = self._liveness(cur)
            self._hold(cur, owner)
            tasks = self._read_tasks(cur)
            out: list[Trial | None] = []
            for p in proposals:
                i = int(p.task_index)
                key = params_key(p.params)
                same = self._x(cur, "SELECT id, status, owner, lease_expires FROM {s}.trials WHERE task_index = %s AND "
                                    "params_key = %s ORDER BY id FOR UPDATE", (i, key)).fetchall()
                if same:
                    if retrying and same[0][1] == Status.PENDING.value and same[0][2] == mine:
                        out.append(self._fetch(cur, same[0][0]))  # committed before the connection was lost
                        continue
                    orphan = next((r[0] for r in same if r[1] == Status.PENDING.value and not alive(r[2], r[3], now)),
                                  None)
                    out.append(None if orphan is None else self._hand_over(cur, orphan, owner, lease))
                    continue
                if budget is not None and counts.get(i, 0) >= budget:
                    out.append(None)
                    continue
                id_ = self._x(cur, "INSERT INTO {s}.trials (task_index, params, params_key, status, source, created,"
                                   " owner, lease_expires) VALUES (%s, %s, %s, 'pending', %s, %s, %s, %s) RETURNING id",
                              (i, json_text(dict(p.params)), key, str(p.source), now, mine,
                               None if lease is None else now + lease)).fetchone()[0]
                counts[i] = counts.get(i, 0) + 1
                out.append(self._fetch(cur, int(id_), tasks))
            return out
        return self._write(body)

    def _lock_tasks(self, cur: Any, indices: Sequence[int]) -> list[int]:
        """The distinct task indices, sorted, after checking each is a task of this history and taking
        the row lock of each (claims and imports on one task are serialised: budget, one configuration)."""
        n_tasks = int(self._x(cur, "SELECT count(*) FROM {s}.tasks").fetchone()[0])
        wanted = sorted({int(i) for i in indices})
        for i in wanted:
            if not 0 <= i < n_tasks:
                raise ValueError(f"task index {i} is outside 0..{n_tasks - 1} of history {self.url}")
        self._x(cur, "SELECT task_index FROM {s}.tasks WHERE task_index = ANY(%s) ORDER BY task_index FOR UPDATE",
                (wanted,))
        return wanted

    def import_trials(self, trials: Sequence[Trial],
                      machines: Sequence[Mapping[str, Any] | None] | None = None) -> list[Trial | None]:
        check_imported(trials, machines)

        def body(cur: Any) -> list[Trial | None]:
            now = time.time()
            self._lock_tasks(cur, [t.task_index for t in trials])
            tasks = self._read_tasks(cur)
            out: list[Trial | None] = []
            for k, t in enumerate(trials):
                i, key = int(t.task_index), params_key(t.params)
                if self._x(cur, "SELECT 1 FROM {s}.trials WHERE task_index = %s AND params_key = %s",
                           (i, key)).fetchone():
                    out.append(None)
                    continue
                value = None if t.status is Status.FAILED else float(t.value)  # type: ignore[arg-type]
                id_ = self._x(cur, "INSERT INTO {s}.trials (task_index, params, params_key, status, value, samples, "
                                   "reason, extra, source, created, finished, duration, objectives) VALUES (%s, %s, %s,"
                                   " %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING id",
                              (i, json_text(dict(t.params)), key, t.status.value, value,
                               json_text([float(x) for x in t.samples]), str(t.reason), json_text(dict(t.extra)),
                               str(t.source), t.created or now, t.finished or now,
                               None if t.duration is None else float(t.duration),
                               objectives_text(t.values if t.status is not Status.FAILED else None))).fetchone()[0]
                if machines is not None and machines[k] is not None:
                    self._x(cur, "INSERT INTO {s}.trial_machines (trial_id, machine_id) VALUES (%s, %s)",
                            (int(id_), self._machine_id(cur, machines[k])))
                out.append(self._fetch(cur, int(id_), tasks))
            return out
        return self._write(body)

    def reclaim(self, owner: Owner, limit: int | None = None, task_indices: Sequence[int] | None = None,
                lease: float | None = None) -> list[Trial]:
        check_lease(lease)
        if limit is not None and limit <= 0:
            return []
        wanted = None if task_indices is None else {int(i) for i in task_indices}
        given_up: list[str] = []

        def body(cur: Any) -> list[Trial]:
            given_up.clear()
            now = time.time()
            alive = self._liveness(cur)
            self._hold(cur, owner)
            out: list[Trial] = []
            rows = self._x(cur, "SELECT id, task_index, owner, lease_expires, attempts FROM {s}.trials WHERE status = "
                                "'pending' ORDER BY id FOR UPDATE SKIP LOCKED").fetchall()
            for id_, ti, holder, expires, attempts in rows:
                if limit is not None and len(out) >= limit:
                    break
                if (wanted is None or ti in wanted) and not alive(holder, expires, now):
                    if holder is not None and attempts >= MAX_ATTEMPTS:
                        reason = given_up_reason(holder, attempts)
                        self._x(cur, "UPDATE {s}.trials SET status = 'failed', reason = %s, finished = %s, "
                                     "lease_expires = NULL WHERE id = %s", (reason, now, int(id_)))
                        given_up.append(f"trial {id_}: {reason}")
                        continue
                    out.append(self._hand_over(cur, int(id_), owner, lease))
            return out
        out = self._write(body)
        log_reclaimed(log, given_up, out)
        return out

    def finish(self, trial_id: int, status: Status, value: float | None = None, samples: Sequence[float] = (),
               reason: str = "", extra: Mapping[str, Any] | None = None, duration: float | None = None,
               expected: Trial | None = None, machine: Mapping[str, Any] | None = None,
               values: Mapping[str, float] | None = None) -> Trial:
        status, value, objectives = checked_tell(trial_id, status, value, duration, values)
        token = uuid.uuid4().hex

        def body(cur: Any) -> Trial:
            row = self._x(cur, "SELECT task_index, params_key, status, value, told_by FROM {s}.trials WHERE id = %s "
                               "FOR UPDATE", (trial_id,)).fetchone()
            if row is None:
                n = self._x(cur, "SELECT min(id), max(id) FROM {s}.trials").fetchone()
                held = "no trials" if n[0] is None else f"trial ids {n[0]}..{n[1]}"
                raise UnknownTrial(f"trial {trial_id} is not in history {self.url} (it holds {held})")
            ti, key, stored_status, stored_value, told_by = row
            if expected is not None and (expected.task_index != ti or params_key(expected.params) != key):
                raise HistoryMismatch(
                    f"trial {trial_id} of history {self.url} is task {ti} with other parameters than the trial "
                    f"told (task {expected.task_index}, {dict(expected.params)}): it was asked from another history")
            if stored_status != Status.PENDING.value:
                if told_by == token:  # this very tell committed before the connection was lost
                    return self._fetch(cur, trial_id)
                shown = f" with value {stored_value!r}" if stored_value is not None else ""
                raise TrialNotPending(f"trial {trial_id} was already told: it is {stored_status}{shown}; "
                                      "a trial takes exactly one result")
            self._x(cur, "UPDATE {s}.trials SET status = %s, value = %s, samples = %s, reason = %s, extra = %s, "
                         "finished = %s, duration = %s, lease_expires = NULL, objectives = %s, told_by = %s WHERE id = %s",
                    (status.value, value, json_text([float(s) for s in samples]), str(reason),
                     json_text(dict(extra or {})), time.time(), None if duration is None else float(duration),
                     objectives, token, trial_id))
            if machine is not None:
                mid = self._machine_id(cur, machine)
                self._x(cur, "INSERT INTO {s}.trial_machines (trial_id, machine_id) VALUES (%s, %s) ON CONFLICT "
                             "(trial_id) DO UPDATE SET machine_id = EXCLUDED.machine_id", (trial_id, mid))
            return self._fetch(cur, trial_id)
        return self._write(body)

    def release(self, owner: Owner | None = None, ids: Sequence[int] | None = None, force: bool = False) -> list[int]:
        if owner is None and ids is None:
            raise ValueError("release needs an owner or trial ids")

        def body(cur: Any) -> list[int]:
            found: list[int] = []
            if owner is not None:
                found += [r[0] for r in self._x(cur, "SELECT id FROM {s}.trials WHERE status = 'pending' AND owner = %s"
                                                     " FOR UPDATE", (owner.to_text(),)).fetchall()]
            now = time.time()
            alive = self._liveness(cur)
            for i in ids or ():
                row = self._x(cur, "SELECT status, owner, lease_expires FROM {s}.trials WHERE id = %s FOR UPDATE",
                              (int(i),)).fetchone()
                running = None if row is None or not alive(row[1], row[2], now) else running_holder(row[1], row[2], now)
                check_release(i, row, running, force, self.url)
                found.append(int(i))
            for i in found:
                self._x(cur, "UPDATE {s}.trials SET owner = NULL, lease_expires = NULL WHERE id = %s", (i,))
            return sorted(set(found))
        return self._write(body)

    # ---- copying (gptask.data.storage.copy) ---------------------------------------------------------
    def export_rows(self) -> dict[str, list[tuple[Any, ...]]]:
        """Every row of the history, table by table (:data:`gptask.data.storage.copy.TABLES`, and "meta")."""
        def read() -> dict[str, list[tuple[Any, ...]]]:
            with self._conn.transaction(), self._conn.cursor() as cur:
                out = {"meta": [tuple(r) for r in self._x(cur, "SELECT key, value FROM {s}.meta ORDER BY key")]}
                for table, cols in COPY_TABLES.items():
                    out[table] = [tuple(r) for r in self._x(
                        cur, f"SELECT {', '.join(cols)} FROM {{s}}.{table} ORDER BY {cols[0]}").fetchall()]
                return out
        return self._run(read)

    def import_rows(self, rows: Mapping[str, Sequence[Sequence[Any]]]) -> None:
        """Write ``rows`` (of :meth:`export_rows`) into this empty history in one transaction."""
        def body(cur: Any) -> None:
            for key, value in meta_rows(dict(rows)):
                self._x(cur, "INSERT INTO {s}.meta (key, value) VALUES (%s, %s) ON CONFLICT (key) DO UPDATE SET "
                             "value = EXCLUDED.value", (key, value))
            for table, cols in COPY_TABLES.items():
                data = [tuple(r) for r in rows.get(table, ())]
                if data:
                    cur.executemany(f"INSERT INTO {self._s}.{table} ({', '.join(cols)}) VALUES "
                                    f"({', '.join(['%s'] * len(cols))})", data)
                if cols[0] == "id":  # the next id follows the copied ones
                    self._x(cur, f"SELECT setval(pg_get_serial_sequence('{self._s}.{table}', 'id'), "
                                 f"GREATEST((SELECT max(id) FROM {{s}}.{table}), 1), "
                                 f"(SELECT max(id) IS NOT NULL FROM {{s}}.{table}))")
        self._write(body)

    # ---- confirmation runs --------------------------------------------------------------------
    def add_confirmation(self, task_index: int, params: Mapping[str, Any], status: Status,
                         value: float | None = None, samples: Sequence[float] = (), reason: str = "",
                         duration: float | None = None, values: Mapping[str, float] | None = None) -> Trial:
        row_values = confirmation_values(task_index, params, status, value, samples, reason, duration, values)

        def body(cur: Any) -> Any:
            if not 0 <= int(task_index) < int(self._x(cur, "SELECT count(*) FROM {s}.tasks").fetchone()[0]):
                raise ValueError(f"task index {task_index} is not in history {self.url}")
            return self._x(cur, "INSERT INTO {s}.confirmations (task_index, params, status, value, samples, reason, "
                                f"created, duration, objectives) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING "
                                f"{_CONFIRMATION_COLUMNS}", row_values).fetchone()
        row = self._write(body)
        return confirmation_from_row(row, self.tasks(), self.url)

    def confirmations(self, task_index: int | None = None) -> list[Trial]:
        sql = f"SELECT {_CONFIRMATION_COLUMNS} FROM {{s}}.confirmations"
        args: list[Any] = []
        if task_index is not None:
            sql += " WHERE task_index = %s"
            args.append(int(task_index))
        tasks = self.tasks()
        return [confirmation_from_row(r, tasks, self.url) for r in self._q(sql + " ORDER BY id", args)]


    # ---- models -------------------------------------------------------------------------------
    def add_model(self, iteration: int, params: Mapping[str, Any], log_likelihood: float | None,
                  data_key: str | None = None) -> None:
        self._write(lambda cur: self._x(
            cur, "INSERT INTO {s}.models (iteration, created, log_likelihood, params, data_key) VALUES "
                 "(%s, %s, %s, %s, %s)", (int(iteration), time.time(), log_likelihood, json_text(dict(params)), data_key)))

    def last_model(self) -> dict[str, Any] | None:
        rows = self._q("SELECT iteration, log_likelihood, params, data_key FROM {s}.models ORDER BY id DESC LIMIT 1")
        if not rows:
            return None
        r = rows[0]
        return {"iteration": r[0], "log_likelihood": r[1], "params": stored_json(r[2], "the last model's parameters", self.url), "data_key": r[3]}

    def models(self) -> list[dict[str, Any]]:
        rows = self._q("SELECT iteration, created, log_likelihood, data_key FROM {s}.models ORDER BY id")
        return [{"iteration": r[0], "created": r[1], "log_likelihood": r[2], "data_key": r[3]} for r in rows]

    def fit_diagnostics(self) -> list[dict[str, Any]]:
        rows = self._q("SELECT params FROM {s}.models ORDER BY id")
        return [dict(stored_json(r[0], "a model's parameters", self.url).get("diagnostics") or {}) for r in rows]


def _clean(text: str, conninfo: str) -> str:
    """libpq's message without the password of ``conninfo`` in it (libpq does not echo it, but be sure)."""
    try:
        password = urlsplit(conninfo).password
    except ValueError:
        password = None
    for secret in {password, unquote(password) if password else None, os.environ.get("PGPASSWORD")} - {None, ""}:
        text = text.replace(str(secret), "***")
    return " ".join(text.split())





