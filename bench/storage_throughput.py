"""Trials per second through the storage's ask/tell (claim one trial, tell its result) with 1, 4 and
8 concurrent client processes: a SQLite file, PostgreSQL over TCP on 127.0.0.1 and PostgreSQL over
its Unix socket (the local server's socket directory), side by side in one run, each repeated
(--repeats, interleaved) and reported as the median and the worst repeat, with the ratios to
SQLite; then the wall time of one whole small tuning run (``gptask tune --problem demo``) with each
history. ``--json`` writes every measured rate.

    PYTHONPATH=$PWD nice -n 5 .venv/bin/python bench/storage_throughput.py [--seconds 3 --repeats 3 --json F]

Starts a throw-away PostgreSQL server (tests/postgres_server.py) unless GPTASK_TEST_POSTGRES_URL is
set (then TCP only: the socket of a given server is not known here).
"""

import argparse
import json
import multiprocessing as mp
import os
import statistics
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
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", type=Path, default=None, help="write the measured rates here")
    args = ap.parse_args()
    given = os.environ.get("GPTASK_TEST_POSTGRES_URL")
    server = GivenServer(given) if given else TempServer().start()
    kinds = ["sqlite", "postgres tcp"] + ([] if given else ["postgres unix socket"])
    out: dict = {"date": time.strftime("%Y-%m-%d"), "seconds": args.seconds, "repeats": args.repeats,
                 "load_before": os.getloadavg(), "rates": {}, "tune_s": {}}
    try:
        with tempfile.TemporaryDirectory() as d:
            tmp = Path(d)

            def where(kind: str, name: str) -> str:
                if kind == "sqlite":
                    return str(tmp / f"{name}.sqlite")
                return server.new_url(name, unix_socket=True) if kind.endswith("socket") else server.new_url(name)

            print(f"load before: {os.getloadavg()}")
            head = " ".join(f"{k + ' median/worst':>30}" for k in kinds)
            print(f"{'clients':>8} {head}   ratios of medians to sqlite")
            for n in (1, 4, 8):
                rates: dict[str, list[float]] = {k: [] for k in kinds}
                for r in range(args.repeats):  # interleaved: a change of load hits every backend alike
                    for k in kinds:
                        rates[k].append(rate(where(k, f"r{n}_{r}"), n, args.seconds))
                out["rates"][str(n)] = rates
                med = {k: statistics.median(v) for k, v in rates.items()}
                cells = " ".join(f"{med[k]:>21.0f} / {min(rates[k]):>6.0f}" for k in kinds)
                ratios = ", ".join(f"{k} {med[k] / med['sqlite']:.2f}" for k in kinds[1:])
                print(f"{n:>8} {cells}   {ratios}", flush=True)
            for k in kinds:
                out["tune_s"][k] = tune_time(where(k, "tune"), tmp)
            print("whole `gptask tune --problem demo --tasks 2 --budget 12`: "
                  + ", ".join(f"{k} {v:.1f} s" for k, v in out["tune_s"].items()))
            out["load_after"] = os.getloadavg()
            print(f"load after: {os.getloadavg()}")
    finally:
        if not given:
            server.stop()
    if args.json:
        args.json.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
