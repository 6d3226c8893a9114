"""Quality benchmark: MLA (``gt.tune``'s tuner) vs single-task peers at equal budget per task.

For each multitask family of :mod:`gptask.functions` (``demo``, ``branin``, ``sphere``) a Latin
hypercube of ``--tasks`` tasks is drawn once (task seed fixed, so every method and every seed sees
the same tasks). Each method gets ``--budget`` evaluations per task, ``--n-initial`` of them an
initial design:

* ``MLA``: :class:`gptask.Tuner` driven through ask/tell exactly as ``gt.tune`` drives it (so the
  model fit and the acquisition search can be timed apart); one LCM over all tasks.
* ``gp_minimize``: scikit-optimize, run task by task, default settings (gp_hedge acquisition,
  L-BFGS acquisition optimiser) with an LHS initial design of ``n_initial`` points.
* ``TPE``: Optuna's TPE sampler, task by task, ``n_startup_trials = n_initial``.
* ``random``: uniform random search, task by task.

Quality is the normalised regret per task, ``(best found - f_opt) / (f_max - f_opt)``, with
``f_opt`` from the family's ``optimum(task)`` and ``f_max`` the largest value on a dense sample of
the parameter box (a full grid of about 2e5 points plus 2e4 uniform points, see :func:`f_max`).
Tuner time is the wall time spent outside the objective: for MLA per iteration (one LCM fit over
all tasks + one PSO search per task) and per proposed point (iteration / tasks); for gp_minimize
per model-based call (total minus objective time, over ``budget - n_initial`` calls).

Run from the repository root::

    PYTHONPATH=. python bench/quality.py --families demo,branin,sphere --tasks 8 --budget 20 \\
        --n-initial 10 --seeds 0,1 --out bench/results_quality.md

``--variant NAME:key=value,...`` adds MLA with other tuner options (n_latent, kernel, restarts,
refit_restarts, pso_particles, pso_iters) as an extra method, e.g. ``--variant m52:kernel=matern52``;
``output_transform=none`` (or ``log``) overrides the automatic choice of the output transform.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import logging
import math
import os
import shlex
import sys
import time
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from gptask.evaluate import Evaluator
from gptask.functions import FAMILIES
from gptask.mla import Tuner, resolve_tasks
from gptask.problem import Problem
from gptask.space import Real

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from machine import describe_machine  # noqa: E402

TASK_SEED = 12345
METHODS = ("MLA", "gp_minimize", "TPE", "random")


# ---- regret -------------------------------------------------------------------------------------
def _box(problem: Problem) -> tuple[list[str], np.ndarray, np.ndarray]:
    names, lo, hi = [], [], []
    for d in problem.param_space.dimensions:
        if not isinstance(d, Real) or getattr(d, "log", False):
            raise ValueError(f"the benchmark handles linear Real parameters only, got {d!r}")
        names.append(d.name)
        lo.append(d.lo)
        hi.append(d.hi)
    return names, np.array(lo, float), np.array(hi, float)


def f_max(problem: Problem, task: dict, n_grid: int = 200_000, n_random: int = 20_000, seed: int = 0) -> float:
    """Largest objective value of ``task`` on a full grid of ~``n_grid`` points of the parameter box
    (``round(n_grid ** (1/D))`` points per axis, bounds included) plus ``n_random`` uniform points."""
    names, lo, hi = _box(problem)
    dim = len(names)
    per_axis = max(2, int(round(n_grid ** (1.0 / dim))))
    axes = [np.linspace(0.0, 1.0, per_axis)] * dim
    grid = np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, dim)
    u = np.vstack([grid, np.random.default_rng(seed).random((n_random, dim))])
    x = lo + u * (hi - lo)
    f = problem.objective
    return float(max(f(task, dict(zip(names, map(float, row)))) for row in x))


def regret(best: float, f_opt: float, fmax: float) -> float:
    return (best - f_opt) / (fmax - f_opt)


# ---- methods ------------------------------------------------------------------------------------
class _TimedObjective:
    """Wraps ``objective(task, params)``; accumulates the seconds spent inside it."""

    def __init__(self, objective: Callable[[dict, dict], float]) -> None:
        self.objective, self.seconds, self.calls = objective, 0.0, 0

    def __call__(self, task: dict, params: dict) -> float:
        t0 = time.perf_counter()
        try:
            return self.objective(task, params)
        finally:
            self.seconds += time.perf_counter() - t0
            self.calls += 1


def run_mla(problem: Problem, tasks: list[dict], budget: int, n_initial: int, seed: int,
            options: dict[str, Any]) -> dict[str, Any]:
    """MLA via ask/tell (the loop of ``gt.tune``); best value per task and timings per iteration."""
    tuner = Tuner(problem, tasks, budget, n_initial, seed, None, **options)
    evaluator = Evaluator(problem.objective)
    fit_times: list[float] = []
    inner_fit = tuner.fit_model

    def timed_fit():
        t0 = time.perf_counter()
        try:
            return inner_fit()
        finally:
            fit_times.append(time.perf_counter() - t0)

    tuner.fit_model = timed_fit  # ask() calls self.fit_model(); time it apart from the search
    ask_times = []
    while not tuner.done:
        t0 = time.perf_counter()
        proposals = tuner.ask()
        dt = time.perf_counter() - t0
        if not proposals:
            break
        if proposals[0].source == "search":
            ask_times.append(dt)
        for p in proposals:
            tuner.tell(p, evaluator(p.task, p.params))
    best = []
    for i in range(len(tasks)):
        ok = [r["value"] for r in tuner.records if r["task_index"] == i and r["status"] == "complete"]
        best.append(min(ok) if ok else math.inf)
    n_it = len(ask_times)
    fit = float(np.sum(fit_times[:n_it])) if n_it else 0.0
    total = float(np.sum(ask_times))
    return {"best": best, "iterations": n_it, "fit_s": fit / max(n_it, 1),
            "search_s": (total - fit) / max(n_it, 1), "iter_s": total / max(n_it, 1),
            "point_s": total / max(n_it, 1) / len(tasks)}


def run_gp_minimize(problem: Problem, tasks: list[dict], budget: int, n_initial: int, seed: int) -> dict[str, Any]:
    from skopt import gp_minimize

    names, lo, hi = _box(problem)
    best, overhead = [], []
    for i, task in enumerate(tasks):
        obj = _TimedObjective(problem.objective)
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = gp_minimize(lambda x: float(obj(task, dict(zip(names, map(float, x))))),
                              list(zip(lo.tolist(), hi.tolist())), n_calls=budget,
                              n_initial_points=n_initial, initial_point_generator="lhs",
                              random_state=seed * 1000 + i)
        total = time.perf_counter() - t0
        best.append(float(res.fun))
        overhead.append((total - obj.seconds) / max(budget - n_initial, 1))
    return {"best": best, "point_s": float(np.mean(overhead))}


def run_tpe(problem: Problem, tasks: list[dict], budget: int, n_initial: int, seed: int) -> dict[str, Any]:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    names, lo, hi = _box(problem)
    best = []
    for i, task in enumerate(tasks):
        sampler = optuna.samplers.TPESampler(seed=seed * 1000 + i, n_startup_trials=n_initial)
        study = optuna.create_study(sampler=sampler, direction="minimize")
        study.optimize(lambda tr: float(problem.objective(
            task, {n: tr.suggest_float(n, a, b) for n, a, b in zip(names, lo, hi)})), n_trials=budget)
        best.append(float(study.best_value))
    return {"best": best}


def run_random(problem: Problem, tasks: list[dict], budget: int, n_initial: int, seed: int) -> dict[str, Any]:
    names, lo, hi = _box(problem)
    best = []
    for i, task in enumerate(tasks):
        u = np.random.default_rng([seed, 77, i]).random((budget, len(names)))
        best.append(min(float(problem.objective(task, dict(zip(names, map(float, lo + r * (hi - lo))))))
                        for r in u))
    return {"best": best}


# ---- driver -------------------------------------------------------------------------------------
def _parse_variant(text: str) -> tuple[str, dict[str, Any]]:
    name, _, body = text.partition(":")
    opts: dict[str, Any] = {}
    for item in filter(None, body.split(",")):
        k, _, v = item.partition("=")
        if k not in ("n_latent", "kernel", "restarts", "refit_restarts", "pso_particles", "pso_iters",
                     "output_transform"):
            raise ValueError(f"unknown MLA option {k!r} in variant {text!r}")
        opts[k] = v if k in ("kernel", "output_transform") else int(v)
    return f"MLA[{name}]", opts


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--families", default="demo,branin,sphere")
    ap.add_argument("--tasks", type=int, default=8)
    ap.add_argument("--budget", type=int, default=20)
    ap.add_argument("--n-initial", type=int, default=10)
    ap.add_argument("--seeds", default="0,1")
    ap.add_argument("--methods", default=",".join(METHODS), help="subset of " + ",".join(METHODS))
    ap.add_argument("--variant", action="append", default=[], help="NAME:key=value,... extra MLA run")
    ap.add_argument("--out", default=None, help="markdown file for the results")
    ap.add_argument("--json", default=None, help="optional raw per-task results (JSON)")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)

    from threadpoolctl import threadpool_limits

    threadpool_limits(1)  # every method single-threaded BLAS: fair, and kind to a shared machine
    families = [f.strip() for f in args.families.split(",") if f.strip()]
    for f in families:
        if f not in FAMILIES:
            raise SystemExit(f"unknown family {f!r}; choose from {sorted(FAMILIES)}")
    seeds = [int(s) for s in args.seeds.split(",")]
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    for m in methods:
        if m not in METHODS:
            raise SystemExit(f"unknown method {m!r}; choose from {METHODS}")
    variants = dict(_parse_variant(v) for v in args.variant)
    command = "PYTHONPATH=. python bench/quality.py " + " ".join(shlex.quote(a) for a in (argv or sys.argv[1:]))
    started = _dt.datetime.now(_dt.timezone.utc)
    load_start = _load()

    raw: dict[str, Any] = {}
    for fam in families:
        make_problem, optimum = FAMILIES[fam]
        problem = make_problem()
        tasks = resolve_tasks(problem, args.tasks, TASK_SEED)
        f_opt = [optimum(t)[1] for t in tasks]
        fmax = [f_max(problem, t) for t in tasks]
        fam_raw: dict[str, Any] = {"tasks": tasks, "f_opt": f_opt, "f_max": fmax, "runs": {}}
        for seed in seeds:
            runs: dict[str, Any] = {}
            for m in methods + list(variants):
                t0 = time.perf_counter()
                if m == "MLA":
                    out = run_mla(problem, tasks, args.budget, args.n_initial, seed, {})
                elif m in variants:
                    out = run_mla(problem, tasks, args.budget, args.n_initial, seed, variants[m])
                else:
                    runner = {"gp_minimize": run_gp_minimize, "TPE": run_tpe, "random": run_random}[m]
                    out = runner(problem, tasks, args.budget, args.n_initial, seed)
                out["regret"] = [regret(b, fo, fm) for b, fo, fm in zip(out["best"], f_opt, fmax)]
                out["wall_s"] = time.perf_counter() - t0
                runs[m] = out
                print(f"[{fam} seed {seed}] {m:14s} mean regret {np.mean(out['regret']):.4f}  "
                      f"({out['wall_s']:.1f} s)", file=sys.stderr, flush=True)
            fam_raw["runs"][seed] = runs
        raw[fam] = fam_raw
        if args.json:
            with open(args.json, "w") as fh:
                json.dump(raw, fh, indent=1, default=float)

    text = report(raw, methods + list(variants), args, command, started, load_start)
    print(text)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(text)
    return 0


def _stderr(v: np.ndarray) -> float:
    return float(np.std(v, ddof=1) / math.sqrt(len(v))) if len(v) > 1 else float("nan")


def report(raw: dict, methods: list[str], args: argparse.Namespace, command: str,
           started: _dt.datetime, load_start: str) -> str:
    """The markdown results: per family, mean regret per method, MLA-vs-gp_minimize wins, timings."""
    finished = _dt.datetime.now(_dt.timezone.utc)
    lines = [
        "# Quality benchmark: MLA vs single-task peers", "",
        f"- command: `{command}`",
        f"- machine: {describe_machine()}",
        f"- date: {started:%Y-%m-%d %H:%M} to {finished:%H:%M} UTC; load average at start {load_start}, "
        f"at end {_load()} (shared machine)",
        f"- {args.tasks} LHS tasks per family (task seed {TASK_SEED}, same tasks for every method and seed), "
        f"budget {args.budget} evaluations per task of which {args.n_initial} initial, seeds {args.seeds}",
        "- regret per task = (best found - f_opt) / (f_max - f_opt); f_opt from the family's optimum(); "
        "f_max = max over a full grid of ~2e5 points of the parameter box plus 2e4 uniform points",
        "- mean regret is over tasks x seeds (+- standard error); 'MLA < it' = fraction of (task, seed) "
        "pairs where MLA's regret is lower than that method's (ties count half)",
        "- tuner s/point: seconds outside the objective per proposed point after the initial design "
        "(MLA: one iteration = one LCM fit over all tasks + one PSO search per task, divided by the tasks; "
        "gp_minimize: its overhead per call); BLAS limited to 1 thread for every method",
        "",
    ]
    for fam, fr in raw.items():
        seeds = list(fr["runs"])
        lines += [f"## {fam}", ""]
        head = "| method | mean regret | median | MLA < it | tuner s/point | MLA fit s/iter | MLA search s/iter |"
        lines += [head, "|---|---|---|---|---|---|---|"]
        mla_all = np.concatenate([fr["runs"][s]["MLA"]["regret"] for s in seeds]) if "MLA" in methods else None
        for m in methods:
            r = np.concatenate([fr["runs"][s][m]["regret"] for s in seeds])
            wins = "-"
            if mla_all is not None and m != "MLA":
                wins = f"{(np.sum(mla_all < r) + 0.5 * np.sum(mla_all == r)) / len(r):.2f}"
            pt = [fr["runs"][s][m].get("point_s") for s in seeds]
            pt_s = f"{np.mean(pt):.3f}" if pt[0] is not None else "-"
            fit = [fr["runs"][s][m].get("fit_s") for s in seeds]
            fit_s = f"{np.mean(fit):.2f}" if fit[0] is not None else "-"
            sr = [fr["runs"][s][m].get("search_s") for s in seeds]
            sr_s = f"{np.mean(sr):.2f}" if sr[0] is not None else "-"
            lines.append(f"| {m} | {np.mean(r):.4f} +- {_stderr(r):.4f} | {np.median(r):.4f} | {wins} | "
                         f"{pt_s} | {fit_s} | {sr_s} |")
        lines += ["", "Per task (regret averaged over seeds):", "",
                  "| task | f_opt | f_max | " + " | ".join(methods) + " |",
                  "|---" * (3 + len(methods)) + "|"]
        for i, t in enumerate(fr["tasks"]):
            cells = [f"{np.mean([fr['runs'][s][m]['regret'][i] for s in seeds]):.4f}" for m in methods]
            task = ", ".join(f"{k}={v:.3g}" for k, v in t.items())
            lines.append(f"| {task} | {fr['f_opt'][i]:.4g} | {fr['f_max'][i]:.4g} | " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
