"""Trials per second through the storage's ask/tell (claim one trial, tell its result) with 1, 4 and
8 concurrent client processes, SQLite file against PostgreSQL on a local socket, side by side; then
the wall time of one whole small tuning run (``gptask tune --problem demo``) with each history.

    PYTHONPATH=$PWD .venv/bin/python bench/storage_throughput.py [--seconds 3]

Starts a throw-away PostgreSQL server (tests/postgres_server.py) unless GPTASK_TEST_POSTGRES_URL is set.
"""

import argparse
import multiprocessing as mp
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gptask.data.storage import Owner, open_storage  # noqa: E402
from gptask.data.trials import Proposal, Status  # noqa: E402
from tests.postgres_server import GivenServer, TempServer  # noqa: E402

SIG = {"name": "bench", "task_space": [{"type": "real", "name": "t", "lo": 0, "hi": 1, "log": False}]}


def client(where: str, k: int, start: float, stop: float, out: "mp.Queue") -> None:
    s = open_storage(where, SIG)
    me = Owner.this_process("bench")
    n, i = 0, 0
    while time.time() < start:
        time.sleep(0.001)
    while time.time() < stop:
        i += 1
        t, = s.add_trials([Proposal(0, {"t": 0.5}, {"x": k * 10_000_000 + i}, "bench")], me)
        s.finish(t.id, Status.COMPLETE, float(i))
        n += 1
    s.close()
    out.put(n)


def rate(where: str, clients: int, seconds: float) -> float:
    with open_storage(where, SIG) as s:
        s.set_tasks([{"t": 0.5}])
    q: mp.Queue = mp.Queue()
    start = time.time() + 1.5
    procs = [mp.Process(target=client, args=(where, k, start, start + seconds, q)) for k in range(clients)]
    for p in procs:
        p.start()
    total = sum(q.get(timeout=120) for _ in procs)
    for p in procs:
        p.join()
    return total / seconds


def tune_time(where: str, tmp: Path) -> float:
    cmd = [sys.executable, "-m", "gptask", "tune", "--problem", "demo", "--tasks", "2", "--budget", "12",
           "--seed", "1", "--history", where, "--quiet"]
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True, cwd=tmp, env={**os.environ, "PYTHONPATH": str(ROOT)})
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=3.0)
    args = ap.parse_args()
    given = os.environ.get("GPTASK_TEST_POSTGRES_URL")
    server = GivenServer(given) if given else TempServer().start()
    try:
        with tempfile.TemporaryDirectory() as d:
            tmp = Path(d)
            print(f"load before: {os.getloadavg()}")
            print(f"{'clients':>8} {'sqlite trials/s':>16} {'postgres trials/s':>18}")
            for n in (1, 4, 8):
                a = rate(str(tmp / f"r{n}.sqlite"), n, args.seconds)
                b = rate(server.new_url("bench"), n, args.seconds)
                print(f"{n:>8} {a:>16.0f} {b:>18.0f}", flush=True)
            a = tune_time(str(tmp / "tune.sqlite"), tmp)
            b = tune_time(server.new_url("tune"), tmp)
            print(f"whole `gptask tune --problem demo --tasks 2 --budget 12`: sqlite {a:.1f} s, postgres {b:.1f} s "
                  f"(+{b - a:.1f} s)")
            print(f"load after: {os.getloadavg()}")
    finally:
        if not given:
            server.stop()


if __name__ == "__main__":
    main()
