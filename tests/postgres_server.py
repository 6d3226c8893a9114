"""A throw-away PostgreSQL server for the tests and benchmarks: initdb in a temporary data directory,
pg_ctl on a free local port, stopped and removed at the end.

Running as root (CI, containers), initdb and postgres refuse root: they run as the ``postgres`` user
that Debian's package creates, with the data directory and socket in a world-traversable directory
of /tmp that this user owns (a clone under mode-700 /root cannot be entered by it).
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import uuid
from pathlib import Path

#: a role with a password, for the tests of credentials (password authentication over TCP)
PASSWORD_USER = "gptask_pw"
PASSWORD = "s3cr:t@/p%w"


def find_bin() -> Path | None:
    """The directory of initdb and pg_ctl (Debian keeps them off PATH), or None."""
    found = shutil.which("initdb")
    if found:
        return Path(found).parent
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    return Path(versions[-1]).parent if versions else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class TempServer:
    """``with TempServer() as srv: srv.url`` is a superuser URL of a fresh server on 127.0.0.1."""

    def __init__(self) -> None:
        self.bindir = find_bin()
        if self.bindir is None:
            raise FileNotFoundError("no PostgreSQL server binaries (initdb): apt-get install postgresql")
        self.root = Path(tempfile.mkdtemp(prefix="gptask-pg-", dir="/tmp"))
        self.data, self.sock = self.root / "data", self.root / "sock"
        self.port = _free_port()
        self.as_root = os.geteuid() == 0
        self.user = "postgres" if self.as_root else os.environ.get("USER") or "postgres"
        self.url = f"postgresql://{self.user}@127.0.0.1:{self.port}/postgres"

    def _run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        cmd = list(args)
        if self.as_root:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        return subprocess.run(cmd, check=check, capture_output=True, text=True, cwd="/tmp")

    def start(self) -> "TempServer":
        os.chmod(self.root, 0o755)
        self.sock.mkdir()
        if self.as_root:
            shutil.chown(self.root, "postgres")
            shutil.chown(self.sock, "postgres")
        self._run(str(self.bindir / "initdb"), "-D", str(self.data), "-U", self.user, "-A", "trust", "--no-sync",
                  "-E", "UTF8")
        (self.data / "pg_hba.conf").write_text(
            f"local all all trust\nhost all {PASSWORD_USER} 127.0.0.1/32 scram-sha-256\n"
            "host all all 127.0.0.1/32 trust\nhost all all ::1/128 trust\n")
        self.pg_ctl("start")
        self.psql(f"CREATE ROLE {PASSWORD_USER} LOGIN PASSWORD '{PASSWORD.replace(chr(39), chr(39) * 2)}'; "
                  f"GRANT CREATE ON DATABASE postgres TO {PASSWORD_USER}")
        return self

    def pg_ctl(self, action: str) -> None:
        opts = f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.sock} -c fsync=off -c max_connections=200"
        args = [str(self.bindir / "pg_ctl"), "-D", str(self.data), "-w", "-t", "60", "-l",
                str(self.root / "log"), "-o", opts, action]
        if action != "start":
            args[-1:] = [action, "-m", "fast"]
        self._run(*args)

    def psql(self, sql: str) -> str:
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn, conn.cursor() as cur:
            cur.execute(sql)
            return str(cur.statusmessage)

    @property
    def socket_url(self) -> str:
        """The superuser URL of the server through its Unix socket (in :attr:`sock`), not TCP."""
        return f"postgresql://{self.user}@/postgres?host={self.sock}&port={self.port}"

    def new_url(self, prefix: str = "t", unix_socket: bool = False) -> str:
        """The URL of a fresh history schema (nothing created yet), over TCP or the Unix socket."""
        base = self.socket_url + "&" if unix_socket else self.url + "?"
        return f"{base}schema={prefix}_{uuid.uuid4().hex[:12]}"

    def stop(self) -> None:
        self._run(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-w", "stop", "-m", "immediate", check=False)
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> "TempServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class GivenServer:
    """A server named by ``GPTASK_TEST_POSTGRES_URL`` (not started or stopped here)."""

    def __init__(self, url: str) -> None:
        self.url = url

    def new_url(self, prefix: str = "t") -> str:
        sep = "&" if "?" in self.url else "?"
        return f"{self.url}{sep}schema={prefix}_{uuid.uuid4().hex[:12]}"
