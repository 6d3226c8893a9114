"""Transfer benchmark: TLA1 (0 runs) and TLA2 vs cold-start BO and random search on new tasks.

For each family (demo, branin, sphere from gptask.problem.functions, optima known):
  1. MLA (gt.tune) on --train-tasks Latin-hypercube tasks with --mla-budget runs each;
  2. --new-tasks other tasks (another LHS of the task space); on each:
     TLA1: the objective at gt.predict_optimum (no run to choose it);
     TLA2 at each budget (gt.tune_new_task, refit="never"; plus refit="auto" at --auto-budget);
     skopt.gp_minimize and uniform random search started cold at the same budgets
     (random: the expected best of `budget` uniform draws, averaged over 50 repetitions).
  Regret is normalised per task: (best - f_opt) / (f_max - f_opt), f_max the largest of 4000
  uniform random values.
  3. Model update time (demo family, --timing-tasks tasks x --timing-points points, data sampled
     uniformly): extend + one append per TLA2 iteration vs a full warm-started refit
     (LCM.fit(init=previous, restarts=1)) at each of the same iterations.

Run from the repo root, e.g.:
    nice -n 10 python bench/transfer.py --families demo,branin,sphere --train-tasks 10 --new-tasks 10
Prints markdown tables; --json writes the raw numbers.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import gptask as gt  # noqa: E402
from gptask.problem.functions import FAMILIES  # noqa: E402
from gptask.tuning.mla import resolve_tasks  # noqa: E402
from gptask.model.numerics import LCM  # noqa: E402
from gptask.space.sampling import lhs_points  # noqa: E402


def f_max_estimate(problem, task, rng) -> float:
    pts = lhs_points(problem.param_space, 4000, rng)
    return max(problem.objective(task, p) for p in pts)


def random_regret(problem, task, budget, f_opt, f_max, rng, reps=50) -> float:
    vals = np.array([problem.objective(task, p) for p in lhs_points(problem.param_space, reps * budget, rng)])
    rng.shuffle(vals)
    best = vals.reshape(reps, budget).min(axis=1)
    return float(np.mean((best - f_opt) / (f_max - f_opt)))


def skopt_best(problem, task, budget, seed) -> float:
    from skopt import gp_minimize
    from skopt.space import Real

    dims = [Real(d.lo, d.hi, name=d.name) for d in problem.param_space.dimensions]
    names = problem.param_space.names
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The objective has been evaluated at this point before")
        r = gp_minimize(lambda v: problem.objective(task, dict(zip(names, v))), dims, n_calls=budget,
                        n_initial_points=min(10, max(2, budget // 2)), random_state=seed)
    return float(r.fun)


def run_family(name, args, out):
    make, optimum = FAMILIES[name]
    problem = make()
    train = resolve_tasks(problem, args.train_tasks, args.seed)
    new_tasks = resolve_tasks(problem, args.new_tasks, args.seed + 1000)
    opts = dict(pso_particles=args.pso_particles, pso_iters=args.pso_iters, restarts=2, refit_restarts=1)
    t0 = time.perf_counter()
    res = gt.tune(problem, tasks=train, budget=args.mla_budget, n_initial=args.mla_budget // 2, seed=args.seed,
                  progress=False, **opts)
    t_mla = time.perf_counter() - t0
    rng = np.random.default_rng(args.seed)
    rows = []
    for k, task in enumerate(new_tasks):
        _, f_opt = optimum(task)
        f_max = f_max_estimate(problem, task, rng)
        reg = lambda v: (v - f_opt) / (f_max - f_opt)  # noqa: E731
        row = {"task": task}
        t0 = time.perf_counter()
        pred = gt.predict_optimum(res, task)
        row["tla1_s"] = time.perf_counter() - t0
        row["tla1"] = reg(problem.objective(task, pred.params))
        for b in args.budgets:
            t0 = time.perf_counter()
            new = gt.tune_new_task(res, task, budget=b, seed=args.seed + k, pso_particles=args.pso_particles,
                                   pso_iters=args.pso_iters)
            row[f"tla2_{b}_s"] = time.perf_counter() - t0
            row[f"tla2_{b}"] = reg(new.best_new()[1])
            row[f"bo_{b}"] = reg(skopt_best(problem, task, b, args.seed + k))
            row[f"rand_{b}"] = random_regret(problem, task, b, f_opt, f_max, rng)
        if args.auto_budget:
            b = args.auto_budget
            new = gt.tune_new_task(res, task, budget=b, refit="auto", seed=args.seed + k,
                                   pso_particles=args.pso_particles, pso_iters=args.pso_iters)
            row[f"auto_{b}"] = reg(new.best_new()[1])
            row[f"auto_{b}_refits"] = new.refits
        rows.append(row)
        print(f"  {name} new task {k}: " + ", ".join(f"{key}={v:.3g}" for key, v in row.items()
                                                     if key != "task" and not key.endswith("_s")), flush=True)
    acc = gt.transfer_accuracy(res).summary()
    out[name] = {"mla_seconds": t_mla, "rows": rows, "accuracy": acc, "train_tasks": train}
    return out[name]


def timing(args):
    """Per TLA2 iteration: block update (extend, then appends) vs full warm refit, same data."""
    problem = FAMILIES["demo"][0]()
    rng = np.random.default_rng(args.seed)
    tasks = resolve_tasks(problem, args.timing_tasks + 1, args.seed + 7)
    X, Y = [], []
    for t in tasks:
        pts = lhs_points(problem.param_space, args.timing_points, rng)
        v = np.array([problem.objective(t, p) for p in pts])
        X.append(problem.param_space.encode(pts))
        Y.append((v - v.mean()) / (v.std() + 1e-12))
    base = LCM(n_latent=min(4, args.timing_tasks)).fit(X[:-1], Y[:-1], restarts=1, seed=0)
    n0 = 3
    t0 = time.perf_counter()
    m = base.extend(X[-1][:n0], Y[-1][:n0], restarts=4, seed=0)
    t_extend = time.perf_counter() - t0
    t_append, t_refit = [], []
    ref = m
    for k in range(n0, args.timing_points):
        t0 = time.perf_counter()
        m = m.append(args.timing_tasks, X[-1][k : k + 1], Y[-1][k : k + 1])
        t_append.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        ref = LCM(base.n_latent).fit(X[:-1] + [X[-1][: k + 1]], Y[:-1] + [Y[-1][: k + 1]], restarts=1, seed=0,
                                     init=ref.get_params())
        t_refit.append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    LCM(base.n_latent).fit(X, Y, restarts=1, seed=0)
    t_cold = time.perf_counter() - t0
    return {"tasks": args.timing_tasks, "points_per_task": args.timing_points, "N": int(base.n_points.sum()),
            "n_latent": base.n_latent, "extend_s": t_extend, "append_median_s": float(np.median(t_append)),
            "refit_median_s": float(np.median(t_refit)), "cold_fit_s": t_cold,
            "iterations": len(t_append)}


def summarise(name, fam, budgets, auto_budget):
    rows = fam["rows"]
    n = len(rows)
    med = lambda key: float(np.median([r[key] for r in rows]))  # noqa: E731
    lines = [f"### {name}: {len(fam['train_tasks'])} MLA tasks, {n} new tasks (MLA {fam['mla_seconds']:.0f} s)", "",
             "| method | runs | median normalised regret | mean |", "|---|---|---|---|",
             f"| TLA1 | 0 | {med('tla1'):.3g} | {np.mean([r['tla1'] for r in rows]):.3g} |"]
    for b in budgets:
        for key, label in (("tla2", "TLA2 (refit never)"), ("bo", "gp_minimize cold"), ("rand", "random cold")):
            lines.append(f"| {label} | {b} | {med(f'{key}_{b}'):.3g} | {np.mean([r[f'{key}_{b}'] for r in rows]):.3g} |")
    if auto_budget:
        b = auto_budget
        lines.append(f"| TLA2 (refit auto, {sum(r[f'auto_{b}_refits'] for r in rows)} refits in all) | {b} | "
                     f"{med(f'auto_{b}'):.3g} | {np.mean([r[f'auto_{b}'] for r in rows]):.3g} |")
    lines.append("")
    tla1_vs_rand = sum(r["tla1"] < r["rand_10"] for r in rows) if 10 in budgets else None
    tla2_vs_bo = sum(r["tla2_10"] <= r["bo_20"] + 1e-12 for r in rows) if {10, 20} <= set(budgets) else None
    if tla1_vs_rand is not None:
        lines.append(f"- TLA1 (0 runs) beats random search with 10 runs on {tla1_vs_rand}/{n} new tasks")
    if tla2_vs_bo is not None:
        lines.append(f"- TLA2 at 10 runs reaches gp_minimize's 20-run regret on {tla2_vs_bo}/{n} new tasks")
    acc = fam["accuracy"]
    lines.append(f"- leave-one-task-out (transfer_accuracy): median |error| / value range "
                 f"{acc['median_value_range_error']:.3g}, median 2-std coverage {acc['median_coverage_2std']:.2f}, "
                 f"median TLA1 encoded distance to the observed best {acc['median_param_distance']:.3g}")
    lines.append("")
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--families", default="demo,branin,sphere")
    p.add_argument("--train-tasks", type=int, default=10)
    p.add_argument("--new-tasks", type=int, default=10)
    p.add_argument("--mla-budget", type=int, default=20)
    p.add_argument("--budgets", default="5,10,20")
    p.add_argument("--auto-budget", type=int, default=10, help="also run TLA2 refit='auto' at this budget (0: no)")
    p.add_argument("--pso-particles", type=int, default=20)
    p.add_argument("--pso-iters", type=int, default=20)
    p.add_argument("--timing-tasks", type=int, default=30)
    p.add_argument("--timing-points", type=int, default=12)
    p.add_argument("--no-timing", action="store_true")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", default=None, help="write raw results here")
    args = p.parse_args(argv)
    args.budgets = [int(b) for b in args.budgets.split(",") if b]
    logging.basicConfig(level=logging.WARNING)
    out: dict = {}
    start = time.perf_counter()
    text = [f"Command: `{' '.join([os.path.basename(sys.executable), *sys.argv])}`",
            f"Machine: {platform.node()} {platform.machine()}, {os.cpu_count()} cores; "
            f"load at start: {subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}",
            f"Date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}", ""]
    for name in [f for f in args.families.split(",") if f]:
        print(f"family {name}", flush=True)
        fam = run_family(name, args, out)
        text.append(summarise(name, fam, args.budgets, args.auto_budget))
    if not args.no_timing:
        tm = timing(args)
        out["timing"] = tm
        text += [f"### model update per TLA2 iteration, demo data, {tm['tasks']} old tasks "
                 f"(N = {tm['N']} points, Q = {tm['n_latent']})", "",
                 "| update | seconds | ratio to full refit |", "|---|---|---|",
                 f"| full warm refit (median over {tm['iterations']} iterations) | {tm['refit_median_s']:.4g} | 1 |",
                 f"| append, block update (median) | {tm['append_median_s']:.4g} | "
                 f"{tm['refit_median_s'] / tm['append_median_s']:.0f}x cheaper |",
                 f"| extend (once per new task, 4 restarts) | {tm['extend_s']:.4g} | "
                 f"{tm['refit_median_s'] / tm['extend_s']:.1f}x cheaper |",
                 f"| cold fit of all {tm['tasks'] + 1} tasks (1 restart) | {tm['cold_fit_s']:.4g} | |", ""]
    text.append(f"Total wall time {time.perf_counter() - start:.0f} s; load at end: "
                f"{subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}")
    print("\n".join(text))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1, default=float))


if __name__ == "__main__":
    main()
