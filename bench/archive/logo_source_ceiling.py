"""What 40-run sources can give a new GPU at best (issue 24's leave-one-GPU-out targets).

    PYTHONPATH=. python bench/archive/logo_source_ceiling.py --seeds 0-9 --out bench/archive/logo_source_ceiling.jsonl
    PYTHONPATH=. python bench/archive/logo_source_ceiling.py --report bench/archive/logo_source_ceiling.jsonl

For each GPU of the recorded convolution campaign held out in turn, the other five are tuned
jointly (40 runs each, the seed's run, as ``bench/leave_one_gpu_out.py`` does). Then, looking at
the held-out GPU's recording (an oracle no tuner has), the fraction of its optimum reached by the
best of:

* ``all_measured``: every configuration any of the five sources completed (about 145 distinct ones):
  the most that any rule *choosing among the sources' measurements* can reach, whatever its budget;
* ``top1`` / ``top2`` / ``top4``: each source's 1 / 2 / 4 fastest (5 / 10 / 20 runs at most;
  ``top1`` is the benchmark's "others' best").

A method that beats ``all_measured`` on the new GPU must find, within its runs, configurations no
source measured that are faster there than everything the sources measured.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import gptask as gt  # noqa: E402
import leave_one_gpu_out as logo  # noqa: E402
from joint_union_ceiling import ranked_runs  # noqa: E402
from gptask.data.trials import point_key  # noqa: E402
from run_free_sources import fractions  # noqa: E402
from suite_families import CONVOLUTION_GPUS as GPUS  # noqa: E402

RULES = ("all_measured", "top1", "top2", "top4")


def run_one(problem: gt.Problem, recs: dict, held: str, seed: int) -> dict:
    """One held-out GPU and seed: the fraction of its optimum of each rule's best configuration."""
    others = [g for g in GPUS if g != held]
    sources = gt.tune(problem, tasks=[{"gpu": recs[g].label} for g in others], budget=logo.SOURCE_BUDGET,
                      seed=seed, progress=False, max_failures=None)
    ranked = ranked_runs(sources, len(others))
    measured = list({point_key(p): p for runs in ranked for p in runs}.values())
    picks = {"all_measured": measured, **{f"top{k}": [p for runs in ranked for p in runs[:k]] for k in (1, 2, 4)}}
    row = {"gpu": held, "seed": seed, "n_measured": len(measured)}
    row.update({rule: round(float(fractions(recs[held], picks[rule]).max(initial=0.0)), 4) for rule in RULES})
    return row


def report(rows: list[dict]) -> str:
    seeds = sorted({r["seed"] for r in rows})
    lines = [f"{len(seeds)} seeds; fraction of the held-out GPU's optimum, mean over seeds (worst seed)", "",
             "| rule | " + " | ".join(GPUS) + " | mean (worst seed) |", "|---" * (len(GPUS) + 2) + "|"]
    for rule in RULES:
        table = np.array([[next(r[rule] for r in rows if r["gpu"] == g and r["seed"] == s) for s in seeds] for g in GPUS])
        cells = [f"{m:.3f} ({w:.3f})" for m, w in zip(table.mean(1), table.min(1))]
        lines.append(f"| {rule} | " + " | ".join(cells) + f" | {table.mean():.3f} ({table.mean(0).min():.3f}) |")
    lines.append("")
    lines.append(f"configurations the five sources completed: {np.mean([r['n_measured'] for r in rows]):.0f} on average")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default="0-9", help="a range A-B")
    ap.add_argument("--out", help="append a JSON line per GPU and seed")
    ap.add_argument("--report", help="print the table of a file of such lines")
    args = ap.parse_args(argv)
    if args.report:
        print(report([json.loads(line) for line in Path(args.report).read_text().splitlines() if line.strip()]))
        return 0
    a, b = (int(x) for x in args.seeds.split("-"))
    problem, recs = logo.campaign()
    rows = []
    for seed in range(a, b + 1):
        for held in GPUS:
            rows.append(run_one(problem, recs, held, seed))
            print(json.dumps(rows[-1]), flush=True)
            if args.out:
                with open(args.out, "a") as fh:
                    fh.write(json.dumps(rows[-1]) + "\n")
    print(report(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
