import os
import sys
from pathlib import Path

import numpy as np
import pytest

import gptask.model.numerics.linalg as la

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("MPLBACKEND", "Agg")


@pytest.fixture
def root() -> Path:
    return ROOT


@pytest.fixture
def factor_sizes(monkeypatch):
    """Record the size of every Cholesky factorisation made through linalg.robust_cholesky."""
    sizes = []
    real = la.robust_cholesky

    def recording(K, what="covariance matrix"):
        sizes.append(np.shape(K)[0])
        return real(K, what)

    monkeypatch.setattr(la, "robust_cholesky", recording)
    return sizes


@pytest.fixture(scope="session")
def pg_server():
    """A PostgreSQL server for the whole session: the one GPTASK_TEST_POSTGRES_URL names, else one
    started here (initdb, pg_ctl) in a temporary directory and stopped at the end."""
    from tests.postgres_server import GivenServer, TempServer, find_bin

    pytest.importorskip("psycopg")
    given = os.environ.get("GPTASK_TEST_POSTGRES_URL")
    if given:
        yield GivenServer(given)
        return
    if find_bin() is None:
        pytest.skip("no PostgreSQL server (apt-get install postgresql, or set GPTASK_TEST_POSTGRES_URL)")
    server = TempServer().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(params=["sqlite", "postgres"])
def history_location(request, tmp_path):
    """Where a fresh history lives, for each backend: a SQLite file path or a PostgreSQL URL (a new schema)."""
    if request.param == "sqlite":
        return tmp_path / "h.sqlite"
    return request.getfixturevalue("pg_server").new_url()
