"""What the step-result journal costs (gptask/evaluation/journal.py).

1. One journal write (temp file, fsync, rename, fsync of the folder) and one removal, on the file
   system of ``--dir``: median, 95th percentile and maximum over ``--writes`` writes.
2. A campaign on a process pool with a SQLite history, journal on (as shipped) and off (the
   tuner's journal_path returning None, i.e. main before the journal), side by side in one run,
   for several seeds: wall time, and the ratio on / off (the worst seed reported).

    PYTHONPATH=. python bench/journal_cost.py --out bench/results/step_journal.json
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import gptask as gt  # noqa: E402
from gptask.evaluation import journal  # noqa: E402
from gptask.evaluation.evaluate import Outcome  # noqa: E402
from gptask.tuning.tuner import Tuner  # noqa: E402
from problems_for_tests import sleepy_problem  # noqa: E402


def write_cost(folder: Path, n: int) -> dict:
    history = folder / "h.sqlite"
    outcome = Outcome.of(1.2345).to_json()
    writes, removes = [], []
    for i in range(n):
        path = journal.entry_path(history, i)
        t0 = time.perf_counter()
        journal.write(path, i, {"t": 0.4}, {"x": 0.5, "k": 3}, outcome)
        writes.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        journal.remove(path)
        removes.append(time.perf_counter() - t0)
    writes.sort()
    removes.sort()
    return {"writes": n, "write_median_ms": 1e3 * writes[n // 2], "write_p95_ms": 1e3 * writes[int(0.95 * n)],
            "write_max_ms": 1e3 * writes[-1], "remove_median_ms": 1e3 * removes[n // 2]}


def campaign(folder: Path, seed: int, journalled: bool, budget: int, workers: int, median: float) -> float:
    history = folder / f"h-{seed}-{int(journalled)}.sqlite"
    log = folder / f"calls-{seed}-{int(journalled)}.jsonl"
    real = Tuner.journal_path
    if not journalled:
        Tuner.journal_path = lambda self, trial_id: None  # type: ignore[method-assign]
    try:
        t0 = time.perf_counter()
        with cf.ProcessPoolExecutor(workers) as ex:
            gt.tune(sleepy_problem(str(log), median=median), tasks=2, budget=budget, n_initial=budget // 2,
                    seed=seed, history=history, progress=False, executor=ex, max_in_flight=workers,
                    pso_particles=10, pso_iters=5, restarts=1)
        return time.perf_counter() - t0
    finally:
        Tuner.journal_path = real  # type: ignore[method-assign]
        assert journal.journals(history) == {}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", default=None, help="where to write (default: a temporary folder under /tmp)")
    ap.add_argument("--writes", type=int, default=300)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--budget", type=int, default=12, help="runs per task (2 tasks)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--median", type=float, default=0.05, help="median seconds of a run")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="journal-cost-", dir=args.dir))
    try:
        out = {"machine": platform.node(), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
               "load_before": os.getloadavg()[0], "cost": write_cost(folder, args.writes), "campaigns": []}
        for seed in range(args.seeds):
            on, off = (campaign(folder, seed, True, args.budget, args.workers, args.median),
                       campaign(folder, seed, False, args.budget, args.workers, args.median))
            out["campaigns"].append({"seed": seed, "journal_s": on, "no_journal_s": off, "ratio": on / off})
            print(f"seed {seed}: journal {on:.2f} s, none {off:.2f} s, ratio {on / off:.3f}", flush=True)
        out["load_after"] = os.getloadavg()[0]
        out["worst_ratio"] = max(c["ratio"] for c in out["campaigns"])
        print(json.dumps(out["cost"]), f"worst ratio {out['worst_ratio']:.3f}")
        if args.out:
            Path(args.out).write_text(json.dumps(out, indent=1) + "\n")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
