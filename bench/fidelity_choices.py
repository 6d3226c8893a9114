"""The fidelity proposer's choices checked (issue 44): gptask with fidelity levels against gptask
without them at the same cost budget, side by side in one run, on small brute-forceable families.

Cost is deterministic (``run_cost``: iterations / 1000 seconds, a target run costs 1), so the
figures do not depend on the machine's load. Regret of the best *target* run bought within each
checkpoint of the cost budget (25, 50, 100 %), against a brute-force optimum on a 401 x 401 grid.
The full benchmark (literature families, peers) is the issue's own (bench/results of issue 44).

    PYTHONPATH=$PWD nice -n 5 .venv/bin/python bench/fidelity_choices.py --seeds 10 --budget 20
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import numpy as np

import gptask as gt
from gptask.tuning import fidelity as fidelity_module

FAST = dict(restarts=2, refit_restarts=1, pso_particles=20, pso_iters=15, progress=False)
GRID = np.linspace(0.0, 1.0, 401)


def quadratic(x, y, s):
    """Informative: a bias that shrinks with the fidelity s in (0, 1] and moves the optimum a little."""
    return (x - 0.3) ** 2 + (y - 0.7) ** 2 + 0.3 * (1 - s) * (x + 0.2)


def branin(x, y, s):
    """Branin on the unit square (min 0.397887 at three points), cheaper levels tilted along x."""
    a, b = 15 * x - 5, 15 * y
    f = (b - 5.1 / (4 * np.pi ** 2) * a ** 2 + 5 / np.pi * a - 6) ** 2 + 10 * (1 - 1 / (8 * np.pi)) * np.cos(a) + 10
    return f + 20 * (1 - s) * (x - 0.3)


def random_below(x, y, s):
    """Uninformative: the target is the quadratic, every cheaper level a pseudo-random value."""
    if np.ndim(x) == 0 and s < 1:
        return float(np.random.default_rng(int(x * 1e6) ^ int(y * 1e6) ^ int(s * 1e3)).random())
    return quadratic(x, y, 1.0)


FAMILIES = {"branin": branin, "quadratic": quadratic, "random_below": random_below}
#: name -> (with fidelity, (TARGET_EVERY, TARGET_COST_SHARE)): the default schedule, a cost-balanced one
#: (a target run once the cheaper runs since the last one cost as much as it), and no fidelity
VARIANTS = {"fidelity": (True, (3, None)), "fidelity_cost": (True, (30, 1.0)), "single": (False, (3, None))}


def problem(fn, fidelity: bool) -> gt.Problem:
    tasks = gt.Space([gt.Integer("n", 1, 2)])
    params = gt.Space([gt.Real("x", 0.0, 1.0), gt.Real("y", 0.0, 1.0)])
    if not fidelity:
        return gt.Problem(tasks, params, lambda t, p: fn(p["x"], p["y"], 1.0), run_cost=lambda point: 1.0)
    return gt.Problem(tasks, params, lambda t, p: fn(p["x"], p["y"], p["iterations"] / 1000),
                      fidelity=gt.Space([gt.Integer("iterations", 10, 1000, log=True)]),
                      target_fidelity={"iterations": 1000}, run_cost=lambda point: point["iterations"] / 1000)


def regrets(result, optimum: float, budget: float, marks=(0.25, 0.5, 1.0)) -> list[float | None]:
    """The regret of the best target run bought within each share of the cost budget (None: none yet)."""
    spent, best, out, k = 0.0, None, [], 0
    for t in sorted(result.history, key=lambda t: t.id):
        spent += t.extra["cost"]
        while k < len(marks) and spent > marks[k] * budget + 1e-9:
            out.append(None if best is None else best - optimum)
            k += 1
        if t.task_index == 0 and t.status.value == "complete":
            best = t.value if best is None else min(best, t.value)
    out += [None if best is None else best - optimum] * (len(marks) - k)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--budget", type=float, default=20.0)
    ap.add_argument("--families", default=",".join(FAMILIES))
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--out", default="bench/results/fidelity_choices.json")
    args = ap.parse_args()
    rows = []
    for name in args.families.split(","):
        fn = FAMILIES[name]
        X, Y = np.meshgrid(GRID, GRID)
        optimum = float(np.min(np.vectorize(lambda x, y: fn(x, y, 1.0))(X, Y) if name == "random_below"
                               else fn(X, Y, 1.0)))
        for seed in range(args.seeds):
            row = {"family": name, "seed": seed}
            for variant in args.variants.split(","):
                fid, schedule = VARIANTS[variant]
                fidelity_module.TARGET_EVERY, fidelity_module.TARGET_COST_SHARE = schedule
                t0 = time.process_time()
                r = gt.tune(problem(fn, fid), [{"n": 1}], cost_budget=args.budget, n_initial=8, seed=seed, **FAST)
                row[variant] = regrets(r, optimum, args.budget)
                row[variant + "_cpu_s"] = time.process_time() - t0
                if fid:
                    row[variant + "_dropped"] = sorted(r.fidelity["dropped"])
                    row[variant + "_target_runs"] = sum(t.task_index == 0 for t in r.history)
            rows.append(row)
            print(json.dumps(row), flush=True)
    Path(args.out).write_text(json.dumps({"machine": platform.node(), "date": time.strftime("%Y-%m-%d"),
                                          "budget": args.budget, "seeds": args.seeds, "families": args.families,
                                          "variants": args.variants, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
