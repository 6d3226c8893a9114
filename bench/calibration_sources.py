"""The calibrated intervals of one task tuned beside sources, on generated families (issue 45): the
setting of ``bench/calibration_large.py`` (a task of 11 runs beside sources of tens to hundreds of
measurements: tasks of unequal size) on problems drawn by ``bench/suite_generated.py`` instead of the
recorded convolution campaign, so that the fold rule chosen there is judged on problems it was not
chosen on.

    python bench/calibration_sources.py --families gen:0-9 [--held 0,-1] [--seeds 0-1] [--per-task 20,40,60]
                                        [--kinds refit,refit_task,conditioned] [--out F.jsonl]
    python bench/calibration_sources.py --summary --out F.jsonl

A case: family ``gen:N``, held-out task ``k`` (``--held``: task indices, negative from the end), seed. Every
other task of the family is a source of ``--per-task`` Latin hypercube configurations measured by the
family's objective (its noise is a deterministic function of task and configuration, as in a run); task
``k`` is tuned for 10 runs and one proposal (``refit_every=None``, every source measurement in the model).
The fitted model then gives its calibration factors the ways of ``calibration_large.KINDS``, scored on
``HELD_OUT`` new Latin hypercube configurations per task (measured the same way): the coverage of the
calibrated 95 % intervals of a new measurement, per task (drawn afresh, not checked against the model's
points: on a listed space a few may be among them). Rows are appended to ``--out`` as each case ends.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import gptask as gt  # noqa: E402
from calibration import COVER_OK  # noqa: E402
from calibration_large import INITIAL_RUNS, KINDS, coverage, fold_factors, start_rows  # noqa: E402
from gptask.space.sampling import lhs_points  # noqa: E402
from row_files import parse_seeds  # noqa: E402
from suite_families import family  # noqa: E402

#: new configurations per task the intervals are scored on
HELD_OUT = 1000


def run_case(name: str, held: int, seed: int, per_task: int, kinds: tuple[str, ...]) -> dict:
    fam = family(name)
    prob, tasks = fam.problem, fam.tasks
    held = held % len(tasks)
    rng = np.random.default_rng([seed, held, per_task])
    rows = []
    for j, task in enumerate(tasks):
        if j != held:
            rows += [{**task, **p, "value": float(prob.objective(task, p))}
                     for p in lhs_points(prob.param_space, per_task, rng)]
    res = gt.tune(prob, [tasks[held]], INITIAL_RUNS + 1, n_initial=INITIAL_RUNS, seed=seed,
                  sources=[gt.Source(rows, machine="earlier")], progress=False, refit_every=None,
                  failure_model=False, source_points=None)
    lcm = res.model
    order = [dict(t) for t in res.tasks]
    row: dict = {"family": name, "held": held, "seed": seed, "per_task": per_task,
                 "points": int(sum(lcm.n_points)), "tasks": len(order)}
    held_out = []
    for i, task in enumerate(order):
        configs = lhs_points(prob.param_space, HELD_OUT, rng)
        y = np.array([float(prob.objective({"task": task["task"]}, c)) for c in configs])
        held_out.append((prob.param_space.encode(configs), y))
    own = next(i for i, t in enumerate(order) if t["task"] == tasks[held]["task"])  # the tuned task
    for kind in kinds:
        factors, seconds = fold_factors(lcm, kind)
        inside = [float(np.mean(coverage(lcm, res.transform, i, X, y, factors[i]))) for i, (X, y) in enumerate(held_out)]
        row[kind] = {"seconds": seconds, "noisy": factors[:, 1].tolist(),
                     "coverage_held": inside[own], "per_task": [c for i, c in enumerate(inside) if i != own]}
    return row


def parse_families(text: str) -> list[str]:
    """``gen:0-9`` or ``gen:3,gen:7`` -> family names."""
    out = []
    for part in text.split(","):
        if part.startswith("gen:") and "-" in part:
            out += [f"gen:{s}" for s in parse_seeds(part[4:])]
        else:
            out.append(part)
    return out


def summary(path: Path) -> str:
    """Per points per source task and fold kind: source tasks and held-out tasks in 85-99 %, under, over."""
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    rows = [r for r in rows if "family" in r]
    out = ["| per source task | cases | folds | source tasks in 85-99 % / under / over (lowest) | "
           "tuned task in / under / over (lowest) | seconds |", "|---|---|---|---|---|---|"]

    low, high = COVER_OK

    def count(v):
        return (f"{sum(low <= x <= high for x in v)} / {sum(x < low for x in v)} / {sum(x > high for x in v)} "
                f"of {len(v)} ({min(v):.3f})")
    for per in sorted({r["per_task"] for r in rows}):
        rs = [r for r in rows if r["per_task"] == per]
        for kind in KINDS:
            scored = [r[kind] for r in rs if kind in r]
            if scored:
                src = [c for k in scored for c in k["per_task"]]
                held = [k["coverage_held"] for k in scored]
                sec = np.mean([k["seconds"] for k in scored])
                out.append(f"| {per} | {len(scored)} | {kind} | {count(src)} | {count(held)} | {sec:.1f} |")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--families", default="gen:0-9")
    ap.add_argument("--held", default="0,-1", help="held-out task indices (negative: from the end)")
    ap.add_argument("--seeds", type=parse_seeds, default=parse_seeds("0"))
    ap.add_argument("--per-task", default="20,40,60")
    ap.add_argument("--kinds", default="refit,refit_task,conditioned")
    ap.add_argument("--out", required=True)
    ap.add_argument("--summary", action="store_true")
    args = ap.parse_args()
    out = Path(args.out)
    if args.summary:
        print(summary(out))
        return
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    start_rows(out)
    for per in (int(v) for v in args.per_task.split(",")):
        for name in parse_families(args.families):
            for seed in args.seeds:
                for held in (int(v) for v in args.held.split(",")):
                    row = run_case(name, held, seed, per, tuple(args.kinds.split(",")))
                    logging.warning("%s %s", name, {k: row[k] for k in ("held", "seed", "per_task", "points")})
                    with out.open("a") as f:
                        f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
