"""What is specific to PostgreSQL histories (the shared contract runs in test_storage.py on both
backends): copying between backends, credentials never shown, bad servers and bad databases, a
server restart and dropped connections, holders on other hosts judged by their heartbeats, schema
versions (older layouts written with raw SQL, upgraded or refused), and faults during a campaign of
`gptask tune` processes (a tuner's connections ended, a restart, a server turned read-only, a full disk)."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import quote

import pytest

psycopg = pytest.importorskip("psycopg")

from gptask.data.storage import (HistoryMismatch, NotAHistory, Owner, SchemaTooNew, TrialHeld, open_storage,  # noqa: E402
                            redact)
from gptask.data.storage import postgres as pg  # noqa: E402
from gptask.data.storage.base import HistoryError, HistoryWriteFailed  # noqa: E402
from gptask.data.storage.copy import copy_history  # noqa: E402
from gptask.data.trials import Proposal, Status, Trial  # noqa: E402
from tests.postgres_server import PASSWORD, PASSWORD_USER, TempServer, find_bin  # noqa: E402

SIG = {"name": "p", "task_space": [{"type": "real", "name": "t", "lo": 0, "hi": 1, "log": False}]}
TASKS = [{"t": 0.1}, {"t": 0.9}]
ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
MACHINE = {"label": "node", "cpu": "x", "cores": 4}


def prop(i, x):
    return Proposal(i, TASKS[i], {"x": x}, "initial")


def cli(*args, env=None):
    return subprocess.run([sys.executable, "-m", "gptask", *args], capture_output=True, text=True, timeout=120,
                          env={**ENV, **(env or {})})


def filled(where):
    """A history holding every kind of row: trials in each state, models, confirmations, machines, meta."""
    s = open_storage(where, SIG)
    s.set_tasks(TASKS)
    s.set_meta("seed", 7)
    s.set_meta("settings", {"budget": 5})
    a, b, c, d = s.add_trials([prop(0, 0.1), prop(0, 0.2), prop(1, 0.3), prop(1, 0.4)], Owner.this_process("tune"))
    s.add_trials([prop(1, 0.5)], Owner.detached("ask"), lease=3600)
    s.finish(a.id, Status.COMPLETE, 1.5, samples=[1.4, 1.6], duration=0.2, machine=MACHINE)
    s.finish(b.id, Status.FAILED, reason="crashed")
    s.finish(c.id, Status.CENSORED, 9.0, reason="timeout")
    s.import_trials([Trial(id=0, task_index=1, task=TASKS[1], params={"x": 0.9}, status=Status.COMPLETE, value=2.0)])
    s.add_model(1, {"ls": [0.5]}, -3.2, "key")
    s.add_confirmation(0, {"x": 0.1}, Status.COMPLETE, 1.45)
    s.close_task(1, "budget spent")
    s.release(Owner.this_process("other"), ids=[d.id], force=True)
    return s


def test_a_copy_to_postgres_and_back_is_equal_and_keeps_every_row(tmp_path, pg_server):
    src, url, back = tmp_path / "a.sqlite", pg_server.new_url(), tmp_path / "b.sqlite"
    filled(src).close()
    counts = copy_history(src, url)
    assert counts == {"tasks": 2, "trials": 6, "models": 1, "confirmations": 1, "machines": 1, "trial_machines": 1}
    copy_history(url, back)
    with open_storage(src) as a, open_storage(url) as p, open_storage(back) as b:
        assert a.export_rows() == p.export_rows() == b.export_rows()
        assert a.trials() == p.trials() == b.trials() and a.machines() == p.machines()
        assert p.get_meta("seed") == 7 and p.closed_tasks() == {1: "budget spent"}
        # the copy goes on where the source stopped: new ids follow the copied ones
        t, = p.add_trials([prop(0, 0.7)], Owner.detached("ask"))
        assert t.id == max(x.id for x in a.trials()) + 1


def test_copy_refuses_a_destination_in_use_or_of_another_problem(tmp_path, pg_server):
    src, url = tmp_path / "a.sqlite", pg_server.new_url()
    filled(src).close()
    with open_storage(url, {**SIG, "name": "other"}) as o:
        o.set_tasks(TASKS)
    r = cli("copy", str(src), url)
    assert r.returncode == 2 and "different problem" in r.stderr and "Traceback" not in r.stderr
    copy_history(src, url2 := pg_server.new_url())
    r = cli("copy", str(src), url2)
    assert r.returncode == 2 and "already holds 6 trial(s)" in r.stderr, r.stderr
    r = cli("copy", url2, str(tmp_path / "c.sqlite"))
    assert r.returncode == 0 and "6 trials" in r.stdout, r.stderr


def test_a_password_is_never_shown_and_odd_characters_work(pg_server):
    if not isinstance(pg_server, TempServer):
        pytest.skip("needs the test server's password role")
    host_port = f"127.0.0.1:{pg_server.port}"
    good = f"postgresql://{PASSWORD_USER}:{quote(PASSWORD, safe='')}@{host_port}/postgres?schema=pw_hist"
    with open_storage(good, SIG) as s:  # ':', '@', '/' and '%' in the password, percent-encoded
        s.set_tasks(TASKS)
        assert quote(PASSWORD, safe="") not in repr(s) and PASSWORD not in str(s) and "***" in repr(s)
    bad = good.replace(quote(PASSWORD, safe=""), "wrong-pass-1234")
    with pytest.raises(pg.HistoryUnreachable, match="refused the credentials") as err:
        open_storage(bad, SIG)
    assert "wrong-pass-1234" not in str(err.value)
    for args in (["show", bad], ["export", bad], ["show", good + "&sslmode=disable"]):
        r = cli(*args)
        assert "wrong-pass-1234" not in r.stderr + r.stdout and PASSWORD not in r.stderr + r.stdout
        assert quote(PASSWORD, safe="") not in r.stderr + r.stdout
    assert cli("show", bad).returncode == 2
    # PGPASSWORD: a URL without the password
    plain = f"postgresql://{PASSWORD_USER}@{host_port}/postgres?schema=pw_hist"
    r = cli("export", plain, env={"PGPASSWORD": PASSWORD})
    assert r.returncode == 0, r.stderr
    assert redact("postgresql://u:p%40ss@h:1/d?password=x&schema=s") == "postgresql://u:***@h:1/d?password=***&schema=s"


def test_the_report_of_a_postgresql_history_names_it_without_its_password(pg_server, tmp_path):
    """gptask report on a PostgreSQL history (it crashed: 'str' object has no attribute 'name'): the page is
    written, names the history by its URL with the password as *** and holds the run's evaluations (reference:
    the trials read back from the database)."""
    if not isinstance(pg_server, TempServer):
        pytest.skip("needs the test server's password role")
    url = (f"postgresql://{PASSWORD_USER}:{quote(PASSWORD, safe='')}@127.0.0.1:{pg_server.port}/postgres"
           "?schema=report_hist")
    r = cli("tune", "--problem", "branin", "--task", "u=0.5,v=0.2", "--budget", "4", "--history", url, "-q")
    assert r.returncode == 0, r.stderr
    page = tmp_path / "r.html"
    r = cli("report", url, "--out", str(page))
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    html = page.read_text()
    assert PASSWORD not in html and quote(PASSWORD, safe="") not in html
    assert f"postgresql://{PASSWORD_USER}:***@127.0.0.1:{pg_server.port}/postgres" in html
    with open_storage(url, read_only=True) as s:
        n = len([t for t in s.trials() if t.status.finished])
    assert n == 4 and f"{n} finished evaluation(s)" in html


def test_an_unreachable_server_names_host_and_port_without_a_traceback():
    import socket

    with socket.socket() as sk:
        sk.bind(("127.0.0.1", 0))
        port = sk.getsockname()[1]
    url = f"postgresql://nobody:hunter2@127.0.0.1:{port}/db"
    with pytest.raises(pg.HistoryUnreachable, match=f"cannot reach PostgreSQL server 127.0.0.1:{port}.*check that"):
        open_storage(url, SIG)
    r = cli("show", url)
    assert r.returncode == 2 and f"127.0.0.1:{port}" in r.stderr and "Traceback" not in r.stderr
    assert "hunter2" not in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_other_programs_other_problems_and_newer_schemas_are_refused(pg_server):
    url = pg_server.new_url()
    schema = url.rsplit("=", 1)[1]
    with psycopg.connect(pg_server.url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
        conn.execute(f"CREATE TABLE {schema}.customers (id int)")
    with pytest.raises(NotAHistory, match="customers"):
        open_storage(url, SIG)
    other = pg_server.new_url()
    open_storage(other, SIG).close()
    with pytest.raises(HistoryMismatch, match="different problem: name: the history's .*, this problem's 'q'"):
        open_storage(other, {**SIG, "name": "q"})
    schema = other.rsplit("=", 1)[1]
    with psycopg.connect(pg_server.url, autocommit=True) as conn:
        conn.execute(f"UPDATE {schema}.meta SET value = '99' WHERE key = 'schema_version'")
    with pytest.raises(SchemaTooNew, match="schema 99"):
        open_storage(other, SIG)
    with pytest.raises(FileNotFoundError):
        open_storage(pg_server.new_url())  # no history there, and no problem to create one for
    with pytest.raises(ValueError, match="schema name"):
        open_storage(pg_server.url + "?schema=a;drop", SIG)


def test_a_read_only_server_gives_a_write_error_that_keeps_what_was_told(pg_server):
    if not isinstance(pg_server, TempServer):
        pytest.skip("needs the test server")
    with psycopg.connect(pg_server.url, autocommit=True) as conn:
        conn.execute("CREATE DATABASE ro")
    url = pg_server.url.rsplit("/", 1)[0] + "/ro?schema=h"
    with open_storage(url, SIG) as s:
        s.set_tasks(TASKS)
        t, = s.add_trials([prop(0, 0.1)], Owner.detached("ask"))
        s.finish(t.id, Status.COMPLETE, 1.0)
    with psycopg.connect(pg_server.url, autocommit=True) as conn:
        conn.execute("ALTER DATABASE ro SET default_transaction_read_only = on")
    with open_storage(url, SIG) as s, pytest.raises(HistoryWriteFailed, match="read-only"):
        s.add_trials([prop(0, 0.2)], Owner.detached("ask"))
    with open_storage(url, read_only=True) as s:
        assert [x.value for x in s.trials()] == [1.0]


HOLDER = """
import socket, sys, time
socket.gethostname = lambda: "node-b"          # a tuner on another host
from gptask.data.storage import Owner, open_storage
from gptask.data.trials import Proposal
s = open_storage(sys.argv[1])
me = Owner.this_process("tune")
t, = s.add_trials([Proposal(0, {"t": 0.1}, {"x": 0.42}, "initial")], me)
print(t.id, flush=True)
time.sleep(600)
"""


@pytest.fixture
def own_server():
    if find_bin() is None:
        pytest.skip("no PostgreSQL server binaries")
    with TempServer() as srv:
        yield srv


def test_restarts_and_dropped_connections_lose_nothing_and_remote_holders_live_by_heartbeat(own_server, monkeypatch):
    monkeypatch.setattr(pg, "HOLDER_TIMEOUT_S", 4.0)
    url = own_server.new_url()
    s = open_storage(url, SIG)
    s.set_tasks(TASKS)
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, url], stdout=subprocess.PIPE, text=True, env=ENV)
    try:
        remote_id = int(holder.stdout.readline())
        me = Owner.this_process("tune")
        mine, = s.add_trials([prop(0, 0.2)], me)
        own_server.pg_ctl("restart")  # every connection is cut
        assert s.reclaim(me) == []  # reconnects; the remote holder is alive (grace after a server start)
        with pytest.raises(TrialHeld, match="node-b"):
            s.release(ids=[remote_id])
        with psycopg.connect(own_server.url, autocommit=True) as conn:  # drop this client's connection
            conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'gptask' "
                         "AND pid <> pg_backend_pid()")
        told = s.finish(mine.id, Status.COMPLETE, 3.0)
        assert told.status is Status.COMPLETE
        time.sleep(pg.HOLDER_TIMEOUT_S + 1)
        assert s.reclaim(me) == []  # its heartbeat went on after the restart and the dropped connection
        holder.send_signal(signal.SIGKILL)
        holder.wait()
        end = time.time() + 60
        back = []
        while not back and time.time() < end:
            back = s.reclaim(me)
            time.sleep(0.5)
        assert [t.id for t in back] == [remote_id] and back[0].attempts == 2
        assert [(t.id, t.status) for t in s.trials()] == [(remote_id, Status.PENDING), (mine.id, Status.COMPLETE)]
    finally:
        holder.kill()
        holder.wait()
        s.close()


def test_a_tell_whose_commit_was_cut_off_is_recorded_once(pg_server, monkeypatch):
    """The connection dies right after the server committed a tell: the retry recognises its own result."""
    s = open_storage(pg_server.new_url(), SIG)
    s.set_tasks(TASKS)
    t, = s.add_trials([prop(0, 0.1)], Owner.detached("ask"))
    real = s._tx
    calls = []

    from contextlib import contextmanager

    @contextmanager
    def cut_after_commit():
        with real() as cur:
            yield cur
        if not calls:
            calls.append(1)
            s._conn.close()  # the commit went through; the client never heard back
            raise psycopg.OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(s, "_tx", cut_after_commit)
    told = s.finish(t.id, Status.COMPLETE, 2.5)
    assert told.value == 2.5 and calls == [1]
    monkeypatch.undo()
    with pytest.raises(HistoryError, match="already told"):
        s.finish(t.id, Status.COMPLETE, 2.5)
    s.close()


# ---- schema versions ------------------------------------------------------------------------------
# Schema 2, written here with raw SQL: the layout before the objectives columns (without told_by and
# holders, which the upgrade adds as well).
V2_LAYOUT = """
CREATE SCHEMA {s};
CREATE TABLE {s}.meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE {s}.tasks (task_index INTEGER PRIMARY KEY, task TEXT NOT NULL, closed TEXT);
CREATE TABLE {s}.trials (
    id BIGSERIAL PRIMARY KEY, task_index INTEGER NOT NULL, params TEXT NOT NULL, params_key TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('pending', 'complete', 'failed', 'censored')),
    value DOUBLE PRECISION, samples TEXT NOT NULL DEFAULT '[]', reason TEXT NOT NULL DEFAULT '',
    extra TEXT NOT NULL DEFAULT '{{}}', source TEXT NOT NULL DEFAULT '', created DOUBLE PRECISION NOT NULL,
    finished DOUBLE PRECISION, duration DOUBLE PRECISION, attempts INTEGER NOT NULL DEFAULT 1, owner TEXT,
    lease_expires DOUBLE PRECISION, UNIQUE (task_index, params_key));
CREATE TABLE {s}.models (id BIGSERIAL PRIMARY KEY, iteration INTEGER NOT NULL, created DOUBLE PRECISION NOT NULL,
    log_likelihood DOUBLE PRECISION, params TEXT NOT NULL, data_key TEXT);
CREATE TABLE {s}.confirmations (id BIGSERIAL PRIMARY KEY, task_index INTEGER NOT NULL, params TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('complete', 'failed')), value DOUBLE PRECISION,
    samples TEXT NOT NULL DEFAULT '[]', reason TEXT NOT NULL DEFAULT '', created DOUBLE PRECISION NOT NULL,
    duration DOUBLE PRECISION);
CREATE TABLE {s}.machines (id BIGSERIAL PRIMARY KEY, key TEXT NOT NULL UNIQUE, record TEXT NOT NULL,
    created DOUBLE PRECISION NOT NULL);
CREATE TABLE {s}.trial_machines (trial_id BIGINT PRIMARY KEY, machine_id BIGINT NOT NULL);
INSERT INTO {s}.meta VALUES ('format', 'gptask.history'), ('schema_version', '{version}'), ('created', '1.0'),
    ('signature', '{signature}'), ('user:seed', '7');
INSERT INTO {s}.tasks VALUES (0, '{{"t": 0.1}}', NULL), (1, '{{"t": 0.9}}', 'budget spent');
INSERT INTO {s}.trials (task_index, params, params_key, status, value, samples, reason, created, finished, owner)
    VALUES (0, '{{"x": 0.1}}', '{key1}', 'complete', 1.5, '[1.4, 1.6]', '', 10.0, 11.0, NULL),
           (1, '{{"x": 0.3}}', '{key3}', 'failed', NULL, '[]', 'crashed', 12.0, 13.0, NULL),
           (0, '{{"x": 0.2}}', '{key2}', 'pending', NULL, '[]', '', 14.0, NULL, NULL);
INSERT INTO {s}.confirmations (task_index, params, status, value, created) VALUES (0, '{{"x": 0.1}}', 'complete',
    1.45, 15.0);
"""


def old_history(server, version: int = 2) -> str:
    """A history of schema ``version`` in the old layout, written with raw SQL; its URL."""
    from gptask.data.storage.base import json_text
    from gptask.data.trials import params_key

    url = server.new_url("old")
    schema = url.rsplit("=", 1)[1]
    sql = V2_LAYOUT.format(s=schema, version=version, signature=json_text(SIG).replace("'", "''"),
                           key1=params_key({"x": 0.1}), key2=params_key({"x": 0.2}), key3=params_key({"x": 0.3}))
    with psycopg.connect(server.url, autocommit=True) as conn, conn.transaction():
        for statement in sql.split(";"):
            if statement.strip():
                conn.execute(statement)
    return url


def columns(server, url: str) -> dict[str, set[str]]:
    schema = url.rsplit("=", 1)[1]
    with psycopg.connect(server.url, autocommit=True) as conn:
        rows = conn.execute("SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = %s",
                            (schema,)).fetchall()
    out: dict[str, set[str]] = {}
    for table, column in rows:
        out.setdefault(table, set()).add(column)
    return out


def test_a_schema_2_history_is_upgraded_once_keeping_every_row(pg_server):
    url = old_history(pg_server)
    before = columns(pg_server, url)
    assert "objectives" not in before["trials"] and "holders" not in before
    with pytest.raises(pg.SchemaTooOld, match=f"schema 2, older than this gptask's {pg.SCHEMA_VERSION}.*read-only"):
        open_storage(url, read_only=True)
    assert columns(pg_server, url) == before  # read-only: nothing written
    with open_storage(url, SIG) as s:
        assert s.schema_version == pg.SCHEMA_VERSION == 3
        assert s.raw_meta()["upgraded_from"] == "2" and s.get_meta("seed") == 7
        trials = s.trials()
        assert [(t.task_index, t.params, t.status, t.value, t.samples, t.reason, t.values) for t in trials] == [
            (0, {"x": 0.1}, Status.COMPLETE, 1.5, (1.4, 1.6), "", {}),
            (1, {"x": 0.3}, Status.FAILED, None, (), "crashed", {}),
            (0, {"x": 0.2}, Status.PENDING, None, (), "", {})]
        assert s.closed_tasks() == {1: "budget spent"}
        assert [(c.value, c.values) for c in s.confirmations()] == [(1.45, {})]
        # what schema 3 added works on the upgraded history: outputs by name, the tell's token, holders
        got, = s.reclaim(Owner.this_process("tune"))
        assert got.id == trials[2].id
        told = s.finish(got.id, Status.COMPLETE, 2.0, values={"time": 2.0, "memory": 5.0})
        assert told.values == {"time": 2.0, "memory": 5.0}
        new, = s.add_trials([prop(1, 0.7)], Owner.this_process("tune"))
        assert new.id == trials[2].id + 1
    assert columns(pg_server, url)["trials"] >= {"objectives", "told_by"} and "holders" in columns(pg_server, url)
    with open_storage(url, read_only=True) as s:  # once upgraded, read-only opens work and nothing is redone
        assert s.raw_meta()["upgraded_from"] == "2" and len(s.trials()) == 4


def test_tuners_opening_an_older_history_at_once_upgrade_it_once(pg_server, caplog):
    import logging
    import threading

    url = old_history(pg_server)
    errors, barrier = [], threading.Barrier(4)

    def open_it():
        try:
            barrier.wait()
            with open_storage(url, SIG) as s:
                assert s.schema_version == 3 and len(s.trials()) == 3
        except Exception as exc:  # noqa: BLE001 (reported below)
            errors.append(exc)

    with caplog.at_level(logging.INFO, logger=pg.__name__):
        threads = [threading.Thread(target=open_it) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert errors == []
    assert [r.getMessage() for r in caplog.records].count(
        f"history {redact(url)} upgraded from schema 2 to 3") == 1


def test_an_upgrade_that_fails_midway_leaves_the_history_as_it_was(pg_server, monkeypatch):
    url = old_history(pg_server)
    before = columns(pg_server, url)
    monkeypatch.setitem(pg._UPGRADES, 2, pg._UPGRADES[2] + ("SELECT 1 / 0",))  # a step that fails, last
    with pytest.raises(psycopg.errors.DivisionByZero):
        open_storage(url, SIG)
    assert columns(pg_server, url) == before
    monkeypatch.undo()
    with open_storage(url, SIG) as s:
        assert s.schema_version == 3 and len(s.trials()) == 3


def test_an_older_history_of_another_problem_is_refused_before_any_upgrade(pg_server):
    url = old_history(pg_server)
    before = columns(pg_server, url)
    with pytest.raises(HistoryMismatch, match="different problem"):
        open_storage(url, {**SIG, "name": "q"})
    assert columns(pg_server, url) == before


def test_schema_1_and_newer_schemas_are_refused_naming_both_versions(pg_server, capsys):
    from gptask.cli.main import main

    url = old_history(pg_server, version=1)
    with pytest.raises(pg.SchemaTooOld, match="has history schema 1; this gptask upgrades schema 2 and newer to 3"):
        open_storage(url, SIG)
    newer = old_history(pg_server, version=4)
    with pytest.raises(SchemaTooNew, match="has history schema 4; this gptask reads schema 3 and older"):
        open_storage(newer, SIG)
    for where, text in ((url, "schema 1"), (newer, "schema 4")):
        assert main(["show", where]) == 2
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and text in err and "Traceback" not in err, err


# ---- faults during a campaign ---------------------------------------------------------------------
TUNE = [sys.executable, "-m", "gptask", "tune", "--problem", "problems_for_tests:counting_problem", "--tasks", "2",
        "--budget", "8", "--n-initial", "4", "--seed", "{seed}", "--quiet", "--problem-options", "log={log},sleep=0.3",
        "--history", "{url}", "--journal", "{journal}"]  # a PostgreSQL campaign's journal: a folder its tuners share


def finished(url: str) -> int:
    """How many trials of the history ``url`` are finished (0 while it does not exist yet)."""
    try:
        with open_storage(url, read_only=True) as s:
            return sum(t.status.finished for t in s.trials())
    except FileNotFoundError:
        return 0


def wait_until(predicate, procs, seconds: float = 240.0) -> None:
    end = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > end or any(p.poll() is not None for p in procs):
            raise AssertionError("timed out or a tuner ended early: " + " | ".join(
                p.stderr.read()[-1500:] for p in procs if p.poll() is not None))
        time.sleep(0.3)


def test_a_dropped_tuner_connection_and_a_server_restart_mid_campaign_lose_nothing_and_run_nothing_twice(
        own_server, tmp_path):
    """Two `gptask tune` on one history: the connections of one are ended by pg_terminate_backend (found by
    its application_name, PGAPPNAME), then the server restarts; both finish the budget, every configuration
    run once (the objective's own log of calls is the independent count)."""
    url, log = own_server.new_url("campaign"), tmp_path / "calls.log"
    env = {**ENV, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests")])}
    cmd = [c.format(seed=5, log=log, url=url, journal=tmp_path / "journal") for c in TUNE]
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env={**env, "PGAPPNAME": f"tuner-{k}"})
             for k in (1, 2)]
    try:
        wait_until(lambda: finished(url) >= 3, procs)
        dropped, end = 0, time.monotonic() + 60
        with psycopg.connect(own_server.url, autocommit=True) as conn:
            while not dropped and time.monotonic() < end:
                dropped = conn.execute("SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM "
                                       "pg_stat_activity WHERE application_name = 'tuner-1'").fetchone()[0]
                time.sleep(0.05)
        assert dropped >= 1  # a connection of the running tuner was ended, not none
        at_restart = finished(url)
        wait_until(lambda: finished(url) >= at_restart + 2, procs)
        before = {t.id: t for t in open_storage(url, read_only=True).trials() if t.status.finished}
        own_server.pg_ctl("restart")
        outs = [p.communicate(timeout=400) for p in procs]
    finally:
        for p in procs:
            p.kill()
            p.wait()
    for p, (_, err) in zip(procs, outs):
        assert p.returncode == 0 and "Traceback" not in err, err[-2000:]
    with open_storage(url, read_only=True) as s:
        trials = s.trials()
    assert len(trials) == 16 and all(t.status is Status.COMPLETE for t in trials)
    assert all(t == before[t.id] for t in trials if t.id in before)  # kept as they were
    calls = log.read_text().splitlines()
    with open_storage(url, read_only=True) as s:
        tasks = s.tasks()
    configs = sorted(f"{tasks[t.task_index]['t']!r} {t.params['x']!r} {t.params['k']!r}" for t in trials)
    assert sorted(calls) == configs  # each configuration run exactly once, none lost


def _mount_tmpfs(where: Path, size_kib: int, owner: str) -> bool:
    import pwd
    import shutil

    where.mkdir()
    if os.geteuid() != 0 or not shutil.which("mount"):
        return False
    uid = pwd.getpwnam(owner).pw_uid if owner != "root" else 0
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_kib}k,uid={uid},mode=0700", "tmpfs", str(where)],
                       capture_output=True)
    return r.returncode == 0


def test_a_full_disk_is_a_clear_error_and_a_failed_import_writes_nothing(pg_server, capsys):
    """The history's tables on a 1 MiB file system of their own (a tablespace on a tmpfs; the server's
    log stays on its disk), filled to the last byte: a write is HistoryWriteFailed naming the history
    and the full disk, an import of many trials that fails part way leaves none of them; with space
    again the same import succeeds."""
    import uuid

    if not isinstance(pg_server, TempServer):
        pytest.skip("needs the test server")
    disk = pg_server.root / f"disk_{uuid.uuid4().hex[:8]}"
    if not _mount_tmpfs(disk, 1024, pg_server.user if pg_server.as_root else "root"):
        pytest.skip("cannot mount a small tmpfs here (needs root)")
    name = disk.name
    try:
        with psycopg.connect(pg_server.url, autocommit=True) as conn:
            conn.execute(f"CREATE TABLESPACE {name} LOCATION '{disk}'")
            conn.execute(f"CREATE DATABASE {name}")
            conn.execute(f"ALTER DATABASE {name} SET default_tablespace = {name}")
        url = pg_server.url.rsplit("/", 1)[0] + f"/{name}?schema=h"
        with open_storage(url, SIG) as s:
            s.set_tasks(TASKS)
            t, = s.add_trials([prop(0, 0.1)], Owner.detached("ask"))
            s.finish(t.id, Status.COMPLETE, 1.0)
            filler = disk / "filler"
            fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
            for size in (1 << 16, 4096, 1):  # to the last byte
                try:
                    while True:
                        os.write(fd, b"\0" * size)
                except OSError:
                    pass
            os.close(fd)
            many = [Trial(id=0, task_index=i % 2, task=TASKS[i % 2], params={"x": i / 1000, "pad": "p" * 300},
                          status=Status.COMPLETE, value=float(i)) for i in range(400)]
            with pytest.raises(HistoryWriteFailed, match=r"cannot write history .*disk full"):
                s.import_trials(many)
            assert [x.id for x in s.trials()] == [t.id]  # none of the 400 half-written
            filler.unlink()
            assert sum(x is not None for x in s.import_trials(many)) == 400
            assert len(s.trials()) == 401
    finally:
        with psycopg.connect(pg_server.url, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name}")
            conn.execute(f"DROP TABLESPACE IF EXISTS {name}")
        subprocess.run(["umount", "-l", str(disk)], check=False)


def test_a_server_that_turns_read_only_mid_run_stops_the_tuner_clearly_and_the_resume_ends_exactly(own_server,
                                                                                                    tmp_path):
    """default_transaction_read_only switched on for the whole server (ALTER SYSTEM, reload) while a
    `gptask tune` runs: it stops with one line naming the history and the read-only server (exit
    status 2), what was told is kept as it was, and the same command ends the budget exactly once
    the server takes writes again."""
    url, log = own_server.new_url("ro"), tmp_path / "calls.log"
    env = {**ENV, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests")])}
    cmd = [c.format(seed=5, log=log, url=url, journal=tmp_path / "journal") for c in TUNE]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        wait_until(lambda: finished(url) >= 3, [proc])
        with psycopg.connect(own_server.url, autocommit=True) as conn:
            conn.execute("ALTER SYSTEM SET default_transaction_read_only = on")
            conn.execute("SELECT pg_reload_conf()")
        _, err = proc.communicate(timeout=300)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == 2 and "Traceback" not in err, err[-2000:]
    assert len(err.strip().splitlines()) == 1 and "read-only" in err and redact(url) in err, err
    kept = {t.id: t for t in open_storage(url, read_only=True).trials() if t.status.finished}
    assert len(kept) >= 3
    with psycopg.connect(own_server.url, autocommit=True) as conn:
        conn.execute("ALTER SYSTEM RESET default_transaction_read_only")
        conn.execute("SELECT pg_reload_conf()")
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    with open_storage(url, read_only=True) as s:
        after = s.trials()
    assert len(after) == 16 and all(t.status is Status.COMPLETE for t in after)
    assert all(t == kept[t.id] for t in after if t.id in kept)
