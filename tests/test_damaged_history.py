"""A damaged history file and a full disk: a clear error naming the file from every command, never a
raw ``sqlite3`` traceback, never an empty history left behind, and nothing finished lost (the resume
after freeing space ends exactly)."""

import contextlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

import gptask as gt
from gptask.cli.main import main
from gptask.data.storage import HistoryError, SQLiteStorage

TESTS = Path(__file__).parent
ROOT = TESTS.parent
sys.path.insert(0, str(TESTS))
from problems_for_tests import counting_problem  # noqa: E402

FAST = dict(pso_particles=10, pso_iters=5, restarts=1)


@pytest.fixture(scope="module")
def good_history(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("good") / "h.sqlite"
    gt.tune(counting_problem(), tasks=2, budget=5, n_initial=3, seed=0, history=path, progress=False, **FAST)
    return path


def damaged(good: Path, folder: Path, how: str) -> Path:
    data = good.read_bytes()
    page = 4096
    assert len(data) >= 6 * page
    if how == "not a database":
        data = bytes((i * 7919) % 251 for i in range(len(data)))
    elif how == "malformed pages":  # the header and schema intact, the table pages overwritten
        data = data[: 2 * page] + bytes((i * 31 + 7) % 256 for i in range(len(data) - 2 * page))
    elif how == "truncated":
        data = data[: len(data) // 2]
    path = folder / "damaged.sqlite"
    path.write_bytes(data)
    return path


COMMANDS = {
    "show": ["show", "{h}"],
    "export": ["export", "{h}"],
    "ask": ["ask", "{h}", "--problem", "problems_for_tests:counting_problem"],
    "tell": ["tell", "{h}", "3", "0.5"],
    "tune": ["tune", "--problem", "problems_for_tests:counting_problem", "--tasks", "2", "--budget", "5",
             "--n-initial", "3", "--history", "{h}", "-q"],
}


@pytest.mark.parametrize("how", ["not a database", "malformed pages", "truncated"])
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_damaged_history_is_a_clear_error_naming_the_file(good_history, tmp_path, capsys, how, command):
    path = damaged(good_history, tmp_path, how)
    before = path.read_bytes()
    code = main([c.format(h=path) for c in COMMANDS[command]])
    err = capsys.readouterr().err
    assert code == 2
    assert str(path) in err and ("damaged" in err or "not a gptask history" in err), err
    assert path.read_bytes() == before  # nothing written to it


def test_a_damaged_history_through_the_api_raises_a_history_error(good_history, tmp_path):
    path = damaged(good_history, tmp_path, "malformed pages")
    with pytest.raises(HistoryError, match=f"history {path} is damaged"):
        SQLiteStorage(path, read_only=True).trials()


def _mount_small_tmpfs(where: Path, size_kib: int) -> bool:
    where.mkdir()
    if os.geteuid() != 0 or not shutil.which("mount"):
        return False
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_kib}k", "tmpfs", str(where)], capture_output=True)
    return r.returncode == 0


@pytest.fixture
def small_disk(tmp_path):
    """A 2 MiB file system of its own (a tmpfs: root only), to fill."""
    where = tmp_path / "disk"
    if not _mount_small_tmpfs(where, 2048):
        pytest.skip("cannot mount a small tmpfs here (needs root)")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def fill(disk: Path) -> Path:
    """Fill ``disk`` to the last byte; returns the filler file (delete it to free the space)."""
    filler = disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    try:
        for size in (1 << 16, 4096, 1):
            with contextlib.suppress(OSError):
                while True:
                    os.write(fd, b"\0" * size)
    finally:
        os.close(fd)
    return filler


def test_a_new_history_on_a_full_disk_is_a_clear_error_and_leaves_no_file(small_disk, capsys):
    filler = fill(small_disk)
    hist = small_disk / "new.sqlite"
    code = main(["tune", "--problem", "problems_for_tests:counting_problem", "--tasks", "2", "--budget", "4",
                 "--history", str(hist), "-q"])
    err = capsys.readouterr().err
    assert code == 2 and str(hist) in err and "full" in err, err
    assert sorted(p.name for p in small_disk.iterdir()) == ["filler"]  # no empty history left behind
    filler.unlink()


SLOW_TUNE = ["tune", "--problem", "problems_for_tests:counting_problem", "--problem-options", "sleep=0.3",
             "--tasks", "2", "--budget", "8", "--n-initial", "3", "--history", "{h}", "-q"]


def test_a_disk_that_fills_up_while_tuning_stops_the_run_clearly_and_the_resume_ends_exactly(small_disk, tmp_path):
    hist = small_disk / "h.sqlite"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(TESTS)])}
    proc = subprocess.Popen([sys.executable, "-m", "gptask", *[c.format(h=hist) for c in SLOW_TUNE]],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        end = time.monotonic() + 180
        finished = 0
        while finished < 3 and time.monotonic() < end and proc.poll() is None:
            time.sleep(0.2)
            if hist.exists():
                with contextlib.suppress(HistoryError):
                    finished = sum(t.status.finished for t in SQLiteStorage(hist, read_only=True).trials())
        assert finished >= 3, proc.stderr.read() if proc.poll() is not None else "too slow"
        filler = fill(small_disk)
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 2, err
    assert "Traceback" not in err and f"history {hist}" in err and "full" in err, err
    kept = {t.id: t for t in SQLiteStorage(hist, read_only=True).trials() if t.status.finished}
    assert len(kept) >= 3
    filler.unlink()  # space again: the same command resumes and ends exactly at the budget
    assert main([c.format(h=hist) for c in SLOW_TUNE]) == 0
    after = SQLiteStorage(hist, read_only=True).trials()
    assert len(after) == 16 and all(t.status.finished for t in after)
    assert all(after_t == kept[after_t.id] for after_t in after if after_t.id in kept)  # kept as they were
    for i in range(2):
        assert len({tuple(sorted(t.params.items())) for t in after if t.task_index == i}) == 8


# ---- damaged rows, on both backends --------------------------------------------------------------
# A history whose file (or server) is sound but whose rows were changed by hand or by another program:
# a column that should hold JSON does not, a table is gone. Every command names the history and says
# it is damaged (one line, exit status 2); nothing is written.

@pytest.fixture(scope="module")
def good_rows() -> dict:
    """The tuned history of each backend (tuned once, on first use), to copy and damage: {backend: location}."""
    return {}


def _good(backend: str, cache: dict, tmp_path_factory, pg_server_getter) -> str:
    if backend not in cache:
        where = (str(tmp_path_factory.mktemp("rows") / "h.sqlite") if backend == "sqlite"
                 else pg_server_getter().new_url("good"))
        gt.tune(counting_problem(), tasks=2, budget=5, n_initial=3, seed=0, history=where, progress=False, **FAST)
        cache[backend] = where
    return cache[backend]


DAMAGES = {
    "params not JSON": "UPDATE trials SET params = '{{not json' WHERE id = (SELECT min(id) FROM trials)",
    "samples not JSON": "UPDATE trials SET samples = 'nan,' WHERE id = (SELECT max(id) FROM trials)",
    "task not JSON": "UPDATE tasks SET task = '[[' WHERE task_index = 1",
    "signature not JSON": "UPDATE meta SET value = 'sig' WHERE key = 'signature'",
    "state not JSON": "UPDATE meta SET value = '{{' WHERE key = 'user:settings'",
    "trials table gone": "DROP TABLE trials",
}


def _damage(location: str, sql: str) -> None:
    if location.startswith("postgresql://"):
        import psycopg

        from gptask.data.storage.postgres import split_url

        conninfo, schema, _ = split_url(location)
        with psycopg.connect(conninfo, autocommit=True) as conn:
            conn.execute(f"SET search_path TO {schema}")
            conn.execute(sql.format())
    else:
        import sqlite3

        with contextlib.closing(sqlite3.connect(location)) as db, db:
            db.execute(sql.format())


def _copy(backend: str, good: str, tmp_path: Path, pg_server_getter) -> str:
    if backend == "sqlite":
        where = tmp_path / "h.sqlite"
        with contextlib.closing(__import__("sqlite3").connect(good)) as src, \
                contextlib.closing(__import__("sqlite3").connect(where)) as dst:
            src.backup(dst)
        return str(where)
    from gptask.data.storage.copy import copy_history

    where = pg_server_getter().new_url("damaged")
    copy_history(good, where)
    return where


def _rows(location: str) -> list:
    """Every row of the history's tables, raw (to check nothing was written)."""
    if location.startswith("postgresql://"):
        import psycopg

        from gptask.data.storage.postgres import split_url

        conninfo, schema, _ = split_url(location)
        with psycopg.connect(conninfo, autocommit=True) as conn:
            tables = [r[0] for r in conn.execute("SELECT table_name FROM information_schema.tables WHERE "
                                                 "table_schema = %s ORDER BY table_name", (schema,))]
            return [(t, sorted(map(repr, conn.execute(f"SELECT * FROM {schema}.{t}").fetchall()))) for t in tables]
    import sqlite3

    with contextlib.closing(sqlite3.connect(location)) as db:
        tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
        return [(t, sorted(map(repr, db.execute(f"SELECT * FROM {t}").fetchall()))) for t in tables]


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
@pytest.mark.parametrize("how", sorted(DAMAGES))
def test_damaged_rows_are_a_clear_error_naming_the_history(good_rows, tmp_path_factory, tmp_path, request, capsys,
                                                           backend, how):
    def server():
        return request.getfixturevalue("pg_server")

    good = _good(backend, good_rows, tmp_path_factory, server)
    where = _copy(backend, good, tmp_path, server)
    _damage(where, DAMAGES[how])
    before = _rows(where)
    shown = where if backend == "sqlite" else where.split("?")[0]
    # (export reads no run state; tell reads only the trial told, a sound one here)
    for command in ("show", "ask", "tune") + (("export",) if how != "state not JSON" else ()):
        code = main([c.format(h=where) for c in COMMANDS[command]])
        err = capsys.readouterr().err
        assert code == 2, (command, err)
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, (command, err)
        assert shown in err and "damaged" in err, (command, err)
    assert _rows(where) == before  # nothing written
