"""What the ranks' journal costs under MPI with parallel_evaluations (gptask/tuning/steps.py:journal_on_rank).

With ``parallel_evaluations=True`` under ``mpiexec -n 2``, every rank other than 0 now journals the
runs it did before it hands them to rank 0, and rank 0, finding the file there, no longer writes it
itself: the same number of writes per run as before, moved to the rank that ran it, plus one small
broadcast of the journal folder per batch. Side by side in one run (alternating order, per seed),
three campaigns of the same design on a SQLite history:

- ``main``: the code in ``--main`` (default /work/main: rank 0 journals every result before its commit);
- ``ranks``: this tree (each rank journals its own runs);
- ``off``: this tree with ``journal=False`` (no journal at all).

Each campaign: 2 tasks, budget 12, all 12 runs per task design points (no model fit: the loop and
its journal only), runs of ``--sleep`` seconds (default 0.05), one per rank and batch. The time is
that of ``gt.tune`` on rank 0 (not the interpreters' start). Reported per seed and variant, and the
ratios ranks / main and ranks / off, with the worst seed.

    PYTHONPATH=. python bench/mpi_journal_cost.py --out bench/results/mpi_journal.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VARIANTS = ("main", "ranks", "off")


def objective(task: dict, params: dict) -> float:
    time.sleep(float(os.environ.get("BENCH_SLEEP", "0.05")))
    return 1.0 + (params["x"] - task["t"]) ** 2 + 0.05 * (params["k"] - 4) ** 2


def campaign(history: str, journal: str, seed: int, out: str) -> None:
    """One campaign under mpiexec (every rank calls this); rank 0 writes {"seconds", "trials"} to ``out``."""
    from mpi4py import MPI

    import gptask as gt

    comm = MPI.COMM_WORLD
    problem = gt.Problem(gt.Space([gt.Real("t", 0.0, 1.0)]), gt.Space([gt.Real("x", 0.0, 1.0), gt.Integer("k", 1, 8)]),
                         objective, name="counting")
    options = {} if journal == "default" else {"journal": False}
    comm.Barrier()
    t0 = time.perf_counter()
    res = gt.tune(problem, tasks=2, budget=12, n_initial=12, seed=seed, history=history, progress=False, comm=comm,
                  parallel_evaluations=True, **options)
    seconds = time.perf_counter() - t0
    if comm.Get_rank() == 0:
        complete = sum(r["status"] == "complete" for r in res.history)
        Path(out).write_text(json.dumps({"seconds": seconds, "trials": len(res.history), "complete": complete,
                                         "gptask": gt.__file__}))


def one(variant: str, seed: int, main: Path, sleep: float, work: Path) -> dict:
    mpiexec = Path(sys.executable).with_name("mpiexec")
    tree = main if variant == "main" else ROOT
    out, hist = work / f"{variant}-{seed}.json", work / f"{variant}-{seed}.sqlite"
    env = {**os.environ, "PYTHONPATH": str(tree), "OMP_NUM_THREADS": "1", "BENCH_SLEEP": str(sleep)}
    r = subprocess.run([str(mpiexec), "-n", "2", sys.executable, __file__, "--campaign", str(hist),
                        "off" if variant == "off" else "default", str(seed), str(out)],
                       capture_output=True, text=True, env=env, timeout=600)
    if r.returncode != 0:
        raise SystemExit(f"{variant} seed {seed} failed: {r.stderr[-2000:]}")
    got = json.loads(out.read_text())
    assert got["trials"] == got["complete"] == 24, got
    assert got["gptask"].startswith(str(tree)), (got["gptask"], tree)
    return got


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--campaign", nargs=4, metavar=("HISTORY", "JOURNAL", "SEED", "OUT"), help=argparse.SUPPRESS)
    ap.add_argument("--main", default="/work/main", help="the tree whose gptask is the 'main' variant")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--sleep", type=float, default=0.05, help="seconds per run")
    ap.add_argument("--out", help="JSON of every campaign and the ratios")
    args = ap.parse_args()
    if args.campaign:
        history, journal, seed, out = args.campaign
        campaign(history, journal, int(seed), out)
        return
    main_tree = Path(args.main).resolve()
    commit = subprocess.run(["git", "-C", str(main_tree), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    here = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True).stdout.strip()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for seed in range(args.seeds):
            order = VARIANTS if seed % 2 == 0 else tuple(reversed(VARIANTS))
            got = {v: one(v, seed, main_tree, args.sleep, Path(tmp))["seconds"] for v in order}
            row = {"seed": seed, **{v: got[v] for v in VARIANTS},
                   "ranks/main": got["ranks"] / got["main"], "ranks/off": got["ranks"] / got["off"]}
            rows.append(row)
            print(f"seed {seed}: " + ", ".join(f"{v} {got[v]:.3f} s" for v in VARIANTS)
                  + f"; ranks/main {row['ranks/main']:.3f}, ranks/off {row['ranks/off']:.3f}", flush=True)
    worst = {k: max(r[k] for r in rows) for k in ("ranks/main", "ranks/off")}
    print(f"worst seed: ranks/main {worst['ranks/main']:.3f}, ranks/off {worst['ranks/off']:.3f}")
    if args.out:
        Path(args.out).write_text(json.dumps({
            "machine": f"{platform.node()} {platform.processor() or platform.machine()}, {os.cpu_count()} cores",
            "date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "main": commit, "branch": here,
            "sleep_s": args.sleep, "campaign": "2 tasks x 12 design points, mpiexec -n 2, parallel_evaluations, SQLite",
            "rows": rows, "worst": worst}, indent=1) + "\n")


if __name__ == "__main__":
    main()
