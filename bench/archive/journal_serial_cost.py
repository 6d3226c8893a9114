"""What journalling the serial loop costs, and the gap it closes (gptask/tuning/steps.py:tell_journalled).

The serial loop (no executor) evaluates a trial in the tuner's own process and commits it at once:
the gap between a run's end and its commit is the tell itself. For each history backend (a SQLite
file; a PostgreSQL schema on a throw-away local server, when its binaries are installed) and seed,
one serial campaign with the journal on (SQLite: the default folder; PostgreSQL: ``journal=`` a
folder) and one with ``journal=False``, side by side in one run (in alternating order):

- wall time of each, and the ratio on / off (the worst seed reported);
- in the journalled campaign: the time of each journal write plus removal (what the journal adds
  per complete run; failed runs are not journalled), their sum over the campaign, and the time of
  each tell (the gap a kill could fall into without it), median and max.

    PYTHONPATH=. python bench/archive/journal_serial_cost.py --out bench/results/journal_all.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

import gptask as gt  # noqa: E402
import gptask.tuning.steps as steps  # noqa: E402
from problems_for_tests import sleepy_problem  # noqa: E402


class Timed:
    """Wraps the module attribute ``name`` of ``module`` and keeps the seconds of each call."""

    def __init__(self, module, name: str) -> None:
        self.module, self.name, self.real, self.seconds = module, name, getattr(module, name), []
        self.first_args: list = []

    def __enter__(self) -> "Timed":
        def timed(*args, **kwargs):
            self.first_args.append(args[0] if args else None)
            t0 = time.perf_counter()
            try:
                return self.real(*args, **kwargs)
            finally:
                self.seconds.append(time.perf_counter() - t0)
        setattr(self.module, self.name, timed)
        return self

    def __exit__(self, *exc) -> None:
        setattr(self.module, self.name, self.real)


def stats_ms(seconds: list[float]) -> dict:
    s = sorted(seconds)
    return {"n": len(s), "median_ms": 1e3 * s[len(s) // 2], "max_ms": 1e3 * s[-1]} if s else {"n": 0}


def campaign(folder: Path, history: str, seed: int, journalled: bool, budget: int, median: float) -> dict:
    log = folder / f"calls-{seed}-{int(journalled)}.jsonl"
    option = (None if not history.startswith("postgresql") else str(folder / "journal")) if journalled else False
    with Timed(steps.result_journal, "write") as w, Timed(steps.result_journal, "remove") as r, \
            Timed(steps, "tell_once") as tells:
        t0 = time.perf_counter()
        gt.tune(sleepy_problem(str(log), median=median), tasks=2, budget=budget, n_initial=budget // 2, seed=seed,
                history=history, progress=False, pso_particles=10, pso_iters=5, restarts=1, journal=option)
        wall = time.perf_counter() - t0
    leftover = [p for p in folder.rglob("trial-*.json")]
    assert not leftover, leftover
    removes = [s for s, path in zip(r.seconds, r.first_args) if path is not None]
    assert len(removes) == len(w.seconds) and (w.seconds or not journalled)  # complete runs only, each removed
    return {"wall_s": wall, "journal": stats_ms([a + b for a, b in zip(w.seconds, removes)]),
            "journal_total_s": sum(w.seconds) + sum(removes), "tell": stats_ms(tells.seconds)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--budget", type=int, default=12, help="runs per task (2 tasks)")
    ap.add_argument("--median", type=float, default=0.05, help="median seconds of a run")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="journal-serial-"))
    server = None
    backends = {"sqlite": lambda seed, on: str(folder / f"h-{seed}-{int(on)}.sqlite")}
    try:
        from postgres_server import TempServer, find_bin

        if find_bin() is not None:
            server = TempServer().start()
            backends["postgres"] = lambda seed, on: server.new_url(f"b{seed}_{int(on)}")
    except (ImportError, OSError) as exc:
        print(f"no PostgreSQL server ({exc}): SQLite only", file=sys.stderr)
    try:
        out = {"machine": platform.node(), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
               "command": " ".join(["python"] + sys.argv), "load_before": os.getloadavg()[0], "rows": []}
        for name, where in backends.items():
            for seed in range(args.seeds):
                if seed % 2:  # the order alternates, so that a drift of the machine's load favours neither
                    off = campaign(folder, where(seed, False), seed, False, args.budget, args.median)
                    on = campaign(folder, where(seed, True), seed, True, args.budget, args.median)
                else:
                    on = campaign(folder, where(seed, True), seed, True, args.budget, args.median)
                    off = campaign(folder, where(seed, False), seed, False, args.budget, args.median)
                row = {"backend": name, "seed": seed, "on": on, "off": off, "ratio": on["wall_s"] / off["wall_s"]}
                out["rows"].append(row)
                print(f"{name} seed {seed}: on {on['wall_s']:.2f} s, off {off['wall_s']:.2f} s, ratio "
                      f"{row['ratio']:.3f}; journal per run median {on['journal']['median_ms']:.2f} ms (max "
                      f"{on['journal']['max_ms']:.1f}), {on['journal_total_s']:.3f} s in all; tell median {on['tell']['median_ms']:.2f} ms (max "
                      f"{on['tell']['max_ms']:.1f}), without the journal {off['tell']['median_ms']:.2f} ms", flush=True)
        out["load_after"] = os.getloadavg()[0]
        out["worst_ratio"] = {b: max(r["ratio"] for r in out["rows"] if r["backend"] == b) for b in backends}
        # the journal's own time over the campaign's wall time: what it adds, without the machine's noise
        out["worst_journal_share"] = {b: max(r["on"]["journal_total_s"] / r["on"]["wall_s"] for r in out["rows"]
                                             if r["backend"] == b) for b in backends}
        print("worst ratio on / off:", out["worst_ratio"], "worst journal share of the wall time:",
              out["worst_journal_share"])
        if args.out:
            Path(args.out).write_text(json.dumps(out, indent=1) + "\n")
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
