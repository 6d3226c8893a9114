"""Quality benchmark: MLA (``gt.tune``'s tuner) vs BoTorch's multi-task BO and single-task peers at
equal budget per task.

For each multitask family of :mod:`gptask.problem.functions` (``demo``, ``branin``, ``sphere``,
``branin_drift``, ``hartmann6``, ``mixed``) a Latin hypercube of ``--tasks`` tasks is drawn once
(task seed fixed, so every method and every seed sees the same tasks). Each method gets ``--budget``
evaluations per task (a comma list runs each budget), ``--n-initial`` of them (default: half) an
initial design:

* ``MLA``: :class:`gptask.Tuner` driven through ask/tell exactly as ``gt.tune`` drives it (so the
  model fit and the acquisition search can be timed apart); one LCM over all tasks.
* ``BoTorch-MTBO``: one ``botorch.models.MultiTaskGP`` over all tasks, ``LogExpectedImprovement``
  per task maximised by ``optimize_acqf`` (bench/mtbo.py; needs ``.bench-venv`` from
  ``bash bench/peers_setup.sh``); the same initial designs as MLA.
* ``gp_minimize``: scikit-optimize, run task by task, default settings (gp_hedge acquisition,
  L-BFGS acquisition optimiser) with an LHS initial design of ``n_initial`` points.
* ``TPE``: Optuna's TPE sampler, task by task, ``n_startup_trials = n_initial``.
* ``random``: uniform random search, task by task.

Integer and categorical parameters are given to each peer in its own terms (skopt / Optuna integer
and categorical dimensions, log-uniform where the parameter is on a log scale).

Quality is the normalised regret per task, ``(best found - f_opt) / (f_max - f_opt)``, with
``f_opt`` from the family's ``optimum(task)`` and ``f_max`` the largest value on a dense sample of
the parameter space (:func:`dense_sample`: a full grid of about 2e5 valid configurations plus 2e4
uniform points). Tuner time is the wall time spent outside the objective per iteration (one
proposal for every task): for MLA one LCM fit over all tasks + one PSO search per task; for
BoTorch-MTBO one model fit + one acquisition search per task; for gp_minimize its overhead per
model-based call times the tasks. BLAS (and torch) run one thread for every method.

Run from the repository root::

    PYTHONPATH=. python bench/quality.py --families demo,branin,sphere --tasks 8 --budget 20 \\
        --n-initial 10 --seeds 0,1 --out bench/results_quality.md

Long runs can be split: every run merges its results into ``--json`` as each (family, budget,
seed, method) finishes (``--resume`` skips those already there), and
``--merge a.json b.json ... --out report.md`` reports on several files together (later files win
where two hold the same run), e.g. a fresh MLA run against the peers of a baseline file.

``--variant NAME:key=value,...`` adds MLA with other tuner options (n_latent, kernel, restarts,
refit_restarts, pso_particles, pso_iters) as an extra method, e.g. ``--variant m52:kernel=matern52``;
``output_transform=none`` (or ``log``) overrides the automatic choice of the output transform.
"""

from __future__ import annotations

import argparse
import itertools
import logging
import math
import os
import sys
import time
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from gptask.evaluation.evaluate import Evaluator
from gptask.problem.functions import FAMILIES
from gptask.tuning.mla import Tuner, resolve_tasks
from gptask.problem.definition import Problem
from gptask.space.dimensions import Categorical, Dimension, Integer, Space

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import records  # noqa: E402

TASK_SEED = 12345
METHODS = ("MLA", "BoTorch-MTBO", "gp_minimize", "TPE", "random")
DEFAULT_METHODS = ("MLA", "gp_minimize", "TPE", "random")
FORMAT = "gptask-bench-quality/2"


# ---- regret -------------------------------------------------------------------------------------
def _axis(d: Dimension, k: int) -> list:
    """Every choice of a categorical; else ``k`` values spread evenly over the encoded line, bounds
    included (an integer dimension: the distinct integers they decode to, all of them when <= k)."""
    if isinstance(d, Categorical):
        return list(d.choices)
    if isinstance(d, Integer) and d.hi - d.lo + 1 <= k:
        return list(range(d.lo, d.hi + 1))
    return sorted(set(d.decode(np.linspace(0.0, 1.0, k).reshape(-1, 1))))


def dense_sample(space: Space, n_grid: int = 200_000, n_random: int = 20_000, seed: int = 0) -> list[dict]:
    """A dense sample of the valid configurations of ``space``: the full grid of the dimensions'
    :func:`_axis` values (every choice of a categorical, ``k`` values of every numeric dimension,
    spread on its own scale, bounds included; ``k`` chosen so that the grid holds about ``n_grid``
    points; an integer dimension with fewer values than ``k`` gives all of them)
    plus ``n_random`` points uniform in the encoded unit cube, decoded (snapped to valid values).
    For a box of linear reals this is a regular grid of ``round(n_grid ** (1/D))`` points per axis
    plus uniform points, as before integer and categorical parameters were supported."""
    numeric = [d for d in space.dimensions if not isinstance(d, Categorical)]
    n_cat = math.prod(d.n_columns for d in space.dimensions if isinstance(d, Categorical))
    per_axis = max(2, int(round((n_grid / n_cat) ** (1.0 / max(len(numeric), 1)))))
    axes = [_axis(d, per_axis) for d in space.dimensions]
    points = [dict(zip(space.names, combo)) for combo in itertools.product(*axes)]
    u = np.random.default_rng(seed).random((n_random, space.n_columns))
    return points + space.decode(u)


def f_max(problem: Problem, task: dict, n_grid: int = 200_000, n_random: int = 20_000, seed: int = 0) -> float:
    """Largest objective value of ``task`` over :func:`dense_sample` of the parameter space."""
    f = problem.objective
    return float(max(f(task, p) for p in dense_sample(problem.param_space, n_grid, n_random, seed)))


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
    with Tuner(problem, tasks, budget, n_initial, seed, None, **options) as tuner:
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


def _skopt_dimension(d: Dimension):
    """The scikit-optimize dimension of ``d`` (log-uniform prior on a log-scale parameter)."""
    from skopt import space as sk

    if isinstance(d, Categorical):
        return sk.Categorical(d.choices, name=d.name)
    prior = "log-uniform" if d.log else "uniform"
    return (sk.Integer if isinstance(d, Integer) else sk.Real)(d.lo, d.hi, prior=prior, name=d.name)


def _point(space: Space, values: list) -> dict[str, Any]:
    """A peer's list of values (numpy scalars allowed) as a validated configuration of ``space``."""
    return space.validate({n: v.item() if hasattr(v, "item") else v for n, v in zip(space.names, values)})


def run_gp_minimize(problem: Problem, tasks: list[dict], budget: int, n_initial: int, seed: int) -> dict[str, Any]:
    """scikit-optimize's gp_minimize task by task; its overhead per model-based call (point_s) and
    per iteration over all tasks (iter_s = point_s x tasks, one proposal per task)."""
    from skopt import gp_minimize

    space = problem.param_space
    dims = [_skopt_dimension(d) for d in space.dimensions]
    best, overhead = [], []
    for i, task in enumerate(tasks):
        obj = _TimedObjective(problem.objective)
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = gp_minimize(lambda x: float(obj(task, _point(space, x))), dims, n_calls=budget,
                              n_initial_points=n_initial, initial_point_generator="lhs",
                              random_state=seed * 1000 + i)
        total = time.perf_counter() - t0
        best.append(float(res.fun))
        overhead.append((total - obj.seconds) / max(budget - n_initial, 1))
    return {"best": best, "point_s": float(np.mean(overhead)), "iter_s": float(np.mean(overhead)) * len(tasks)}


def _suggest(trial, d: Dimension) -> Any:
    """Optuna's suggestion for dimension ``d`` (log scale where ``d`` has one)."""
    if isinstance(d, Categorical):
        return trial.suggest_categorical(d.name, d.choices)
    if isinstance(d, Integer):
        return trial.suggest_int(d.name, d.lo, d.hi, log=d.log)
    return trial.suggest_float(d.name, d.lo, d.hi, log=d.log)


def run_tpe(problem: Problem, tasks: list[dict], budget: int, n_initial: int, seed: int) -> dict[str, Any]:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    space = problem.param_space
    best = []
    for i, task in enumerate(tasks):
        sampler = optuna.samplers.TPESampler(seed=seed * 1000 + i, n_startup_trials=n_initial)
        study = optuna.create_study(sampler=sampler, direction="minimize")
        study.optimize(lambda tr: float(problem.objective(task, {d.name: _suggest(tr, d) for d in space})),
                       n_trials=budget)
        best.append(float(study.best_value))
    return {"best": best}


def run_random(problem: Problem, tasks: list[dict], budget: int, n_initial: int, seed: int) -> dict[str, Any]:
    """Uniform random search in the encoded unit cube (log-uniform on a log-scale parameter)."""
    space = problem.param_space
    best = []
    for i, task in enumerate(tasks):
        u = np.random.default_rng([seed, 77, i]).random((budget, space.n_columns))
        best.append(min(float(problem.objective(task, p)) for p in space.decode(u)))
    return {"best": best}


def run_botorch(problem: Problem, tasks: list[dict], budget: int, n_initial: int, seed: int) -> dict[str, Any]:
    """BoTorch multi-task BO (bench/mtbo.py; needs torch and botorch)."""
    from mtbo import run_botorch_mtbo

    return run_botorch_mtbo(problem, tasks, budget, n_initial, seed)


RUNNERS: dict[str, Callable[..., dict[str, Any]]] = {
    "BoTorch-MTBO": run_botorch, "gp_minimize": run_gp_minimize, "TPE": run_tpe, "random": run_random}


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


def _cell_key(family: str, n_tasks: int, budget: int, n_initial: int) -> str:
    return f"{family}/T{n_tasks}/b{budget}/i{n_initial}"


def _method_order(names) -> list[str]:
    """Known methods in METHODS order, then the others (MLA variants) sorted."""
    names = set(names)
    return [m for m in METHODS if m in names] + sorted(names - set(METHODS))


def _done(data: dict, key: str, seed: int, method: str) -> bool:
    return method in data.get("cells", {}).get(key, {}).get("seeds", {}).get(str(seed), {})


def _known_optima(data: dict, family: str, tasks: list[dict]) -> tuple[list | None, list | None]:
    """f_opt and f_max of ``tasks`` from a cell of ``data`` with the same family and tasks (they take
    a minute to compute), else (None, None)."""
    for c in data.get("cells", {}).values():
        if c["family"] == family and c["tasks"] == tasks:
            return c["f_opt"], c["f_max"]
    return None, None


def _run_method(method: str, problem: Problem, tasks: list[dict], budget: int, n_initial: int, seed: int,
                variants: dict[str, dict[str, Any]]) -> dict[str, Any]:
    if method == "MLA" or method in variants:
        return run_mla(problem, tasks, budget, n_initial, seed, variants.get(method, {}))
    return RUNNERS[method](problem, tasks, budget, n_initial, seed)


def _split(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--families", default="demo,branin,sphere", help="subset of " + ",".join(FAMILIES))
    ap.add_argument("--tasks", type=int, default=8)
    ap.add_argument("--budget", default="20", help="evaluations per task; a comma list runs each")
    ap.add_argument("--n-initial", type=int, default=None, help="initial design size (default: half the budget)")
    ap.add_argument("--seeds", default="0,1")
    ap.add_argument("--methods", default=",".join(DEFAULT_METHODS), help="subset of " + ",".join(METHODS))
    ap.add_argument("--variant", action="append", default=[], help="NAME:key=value,... extra MLA run")
    ap.add_argument("--out", default=None, help="markdown file for the report (of everything in --json)")
    ap.add_argument("--fmax-grid", type=int, default=200_000,
                    help="grid points of the dense sample that gives f_max (plus a tenth as many uniform)")
    ap.add_argument("--json", default=None,
                    help="raw results file; results are merged into it as each run finishes")
    ap.add_argument("--resume", action="store_true",
                    help="skip the (family, budget, seed, method) runs already in --json")
    ap.add_argument("--merge", nargs="+", default=None, metavar="JSON",
                    help="run nothing: merge these result files (into --json if given) and report")
    ap.add_argument("--pending", action="store_true",
                    help="run nothing: print how many runs --json lacks; exit status 3 when none")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)

    if args.merge:
        records.write_report(report(records.merged(args.merge, args.json)), args.out)
        return 0

    from threadpoolctl import threadpool_limits

    threadpool_limits(1)  # every method single-threaded BLAS (torch too, in mtbo): fair, kind to others
    families, methods = _split(args.families), _split(args.methods)
    for f in families:
        if f not in FAMILIES:
            raise SystemExit(f"unknown family {f!r}; choose from {sorted(FAMILIES)}")
    for m in methods:
        if m not in METHODS:
            raise SystemExit(f"unknown method {m!r}; choose from {METHODS}")
    budgets, seeds = [int(b) for b in _split(args.budget)], [int(v) for v in _split(args.seeds)]
    if args.n_initial is not None and len(budgets) > 1:
        raise SystemExit("--n-initial needs a single --budget (the default is half of each budget)")
    variants = dict(_parse_variant(v) for v in args.variant)
    if args.pending:
        known = records.read(args.json) if args.json and os.path.exists(args.json) else {}
        keys = [_cell_key(f, args.tasks, b, b // 2 if args.n_initial is None else args.n_initial)
                for f in families for b in budgets]
        n = sum(not _done(known, k, s, m) for k in keys for s in seeds for m in methods + list(variants))
        print(n)
        return 0 if n else 3
    results = records.Results(FORMAT, "quality.py", argv, args.json)
    for fam in families:
        make_problem, optimum = FAMILIES[fam]
        problem = make_problem()
        tasks = resolve_tasks(problem, args.tasks, TASK_SEED)
        f_opt, fmax = _known_optima(results.data, fam, tasks)
        if f_opt is None:
            f_opt = [optimum(t)[1] for t in tasks]
            fmax = [f_max(problem, t, n_grid=args.fmax_grid, n_random=args.fmax_grid // 10) for t in tasks]
        for budget in budgets:
            n_initial = budget // 2 if args.n_initial is None else args.n_initial
            key = _cell_key(fam, args.tasks, budget, n_initial)
            head = {"family": fam, "n_tasks": args.tasks, "budget": budget, "n_initial": n_initial,
                    "tasks": tasks, "f_opt": f_opt, "f_max": fmax}
            for seed in seeds:
                for m in methods + list(variants):
                    if args.resume and _done(results.data, key, seed, m):
                        continue
                    load, t0 = records.load_average(), time.perf_counter()
                    out = _run_method(m, problem, tasks, budget, n_initial, seed, variants)
                    out["regret"] = [regret(b, fo, fm) for b, fo, fm in zip(out["best"], f_opt, fmax)]
                    out["wall_s"] = time.perf_counter() - t0
                    out["load_start"], out["load_end"] = load, records.load_average()
                    if m in variants:
                        out["options"] = variants[m]
                    results.add({"cells": {key: {**head, "seeds": {str(seed): {m: out}}}}})
                    print(f"[{fam} b{budget} seed {seed}] {m:14s} mean regret {np.mean(out['regret']):.4f}  "
                          f"({out['wall_s']:.1f} s)", file=sys.stderr, flush=True)
    records.write_report(report(results.finish()), args.out)
    return 0


# ---- report -------------------------------------------------------------------------------------
def _stderr(v: np.ndarray) -> float:
    return float(np.std(v, ddof=1) / math.sqrt(len(v))) if len(v) > 1 else float("nan")


def method_stats(cell: dict[str, Any], method: str) -> dict[str, Any] | None:
    """Regret and timing summary of ``method`` in one cell (family x budget), over the seeds it ran:
    mean / standard error / median over tasks x seeds, the worst seed (largest mean over tasks) and
    its ratio to the mean, tuner seconds per iteration (fit, search, total) averaged over seeds."""
    runs = {s: r[method] for s, r in cell["seeds"].items() if method in r}
    if not runs:
        return None
    regrets = np.concatenate([r["regret"] for r in runs.values()])
    per_seed = {s: float(np.mean(r["regret"])) for s, r in runs.items()}
    worst_seed = max(per_seed, key=per_seed.get)
    mean = float(np.mean(regrets))

    def timing(name: str) -> float | None:
        v = [r[name] for r in runs.values() if r.get(name) is not None]
        return float(np.mean(v)) if v else None

    return {"n_seeds": len(runs), "mean": mean, "se": _stderr(regrets), "median": float(np.median(regrets)),
            "worst": per_seed[worst_seed], "worst_seed": worst_seed,
            "worst_ratio": per_seed[worst_seed] / mean if mean > 0 else float("nan"),
            "iter_s": timing("iter_s"), "fit_s": timing("fit_s"), "search_s": timing("search_s")}


def _fmt_s(v: float | None, digits: int = 2) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


def _sorted_cells(data: dict[str, Any]) -> list[dict[str, Any]]:
    cells = list(data.get("cells", {}).values())
    fam_order = {f: k for k, f in enumerate(FAMILIES)}
    return sorted(cells, key=lambda c: (fam_order.get(c["family"], 99), c["family"], c["budget"], c["n_tasks"]))


def _summary_tables(cells: list[dict[str, Any]], methods: list[str]) -> list[str]:
    lines = ["## Summary", "", "Mean normalised regret over tasks x seeds (lowest in bold; seeds per method "
             "in brackets where they differ from the row's most):", "",
             "| family | tasks | budget (initial) | " + " | ".join(methods) + " |",
             "|---|---|---|" + "---|" * len(methods)]
    stats = [{m: method_stats(c, m) for m in methods} for c in cells]
    for c, st in zip(cells, stats):
        present = [v["mean"] for v in st.values() if v]
        best = min(present) if present else None
        most = max((v["n_seeds"] for v in st.values() if v), default=0)
        cols = []
        for m in methods:
            v = st[m]
            if v is None:
                cols.append("-")
                continue
            txt = f"{v['mean']:.4f}"
            txt = f"**{txt}**" if v["mean"] == best else txt
            cols.append(txt + (f" ({v['n_seeds']})" if v["n_seeds"] != most else ""))
        lines.append(f"| {c['family']} | {c['n_tasks']} | {c['budget']} ({c['n_initial']}) | "
                     + " | ".join(cols) + " |")
    lines += ["", "Worst seed (the seed whose mean regret over tasks is largest) and its ratio to the "
              "method's mean regret:", "", "| family | budget | " + " | ".join(methods) + " |",
              "|---|---|" + "---|" * len(methods)]
    for c, st in zip(cells, stats):
        cols = ["-" if st[m] is None else f"{st[m]['worst']:.4f} ({st[m]['worst_ratio']:.1f}x)" for m in methods]
        lines.append(f"| {c['family']} | {c['budget']} | " + " | ".join(cols) + " |")
    timed = [m for m in methods if any(st[m] and st[m]["iter_s"] is not None for st in stats)]
    ratio = "MLA" in timed and "BoTorch-MTBO" in timed
    lines += ["", "Tuner seconds per iteration (one proposal for every task, time outside the objective; "
              "gp_minimize: its overhead per call x tasks):", "",
              "| family | budget | " + " | ".join(timed) + (" | MLA / BoTorch-MTBO |" if ratio else " |"),
              "|---|---|" + "---|" * (len(timed) + ratio)]
    for c, st in zip(cells, stats):
        cols = [_fmt_s(st[m]["iter_s"] if st[m] else None) for m in timed]
        if ratio:
            a, b = (st[m]["iter_s"] if st[m] else None for m in ("MLA", "BoTorch-MTBO"))
            cols.append(f"{a / b:.3f}" if a is not None and b else "-")
        lines.append(f"| {c['family']} | {c['budget']} | " + " | ".join(cols) + " |")
    return lines + [""]


def _cell_tables(c: dict[str, Any], methods: list[str]) -> list[str]:
    lines = [f"### {c['family']}, {c['n_tasks']} tasks, budget {c['budget']} ({c['n_initial']} initial)", "",
             "| method | seeds | mean regret | median | worst seed (ratio) | MLA < it | tuner s/iter | fit s/iter "
             "| search s/iter |", "|---|---|---|---|---|---|---|---|---|"]
    for m in methods:
        st = method_stats(c, m)
        if st is None:
            continue
        wins = "-"
        common = [s for s, r in c["seeds"].items() if "MLA" in r and m in r]
        if m != "MLA" and common:
            a = np.concatenate([c["seeds"][s]["MLA"]["regret"] for s in common])
            b = np.concatenate([c["seeds"][s][m]["regret"] for s in common])
            wins = f"{(np.sum(a < b) + 0.5 * np.sum(a == b)) / len(a):.2f}"
        lines.append(f"| {m} | {st['n_seeds']} | {st['mean']:.4f} +- {st['se']:.4f} | {st['median']:.4f} | "
                     f"{st['worst']:.4f} (seed {st['worst_seed']}, {st['worst_ratio']:.1f}x) | {wins} | "
                     f"{_fmt_s(st['iter_s'])} | {_fmt_s(st['fit_s'])} | {_fmt_s(st['search_s'])} |")
    shown = [m for m in methods if method_stats(c, m)]
    lines += ["", "Per task (regret averaged over seeds):", "",
              "| task | f_opt | f_max | " + " | ".join(shown) + " |", "|---" * (3 + len(shown)) + "|"]
    for i, t in enumerate(c["tasks"]):
        cells = [f"{np.mean([r[m]['regret'][i] for r in c['seeds'].values() if m in r]):.4f}" for m in shown]
        task = ", ".join(f"{k}={v:.3g}" for k, v in t.items())
        lines.append(f"| {task} | {c['f_opt'][i]:.4g} | {c['f_max'][i]:.4g} | " + " | ".join(cells) + " |")
    return lines + [""]


def report(data: dict[str, Any]) -> str:
    """The markdown report of a results file: its runs, the summary tables over every (family, budget)
    cell, then per cell the per-method and per-task tables."""
    cells = _sorted_cells(data)
    methods = _method_order({m for c in cells for r in c["seeds"].values() for m in r})
    lines = ["# Tuning quality: MLA vs BoTorch multi-task BO and single-task peers", "", "Runs:", ""]
    for r in data.get("runs", []):
        lines.append(f"- `{r['command']}`: {r['started']} to {r.get('finished', '(unfinished)')} UTC, load "
                     f"average {r['load_start']} at start, {r.get('load_end', '?')} at end; {r['machine']}")
    lines += [
        "",
        f"- tasks: a Latin hypercube of the family's task space (task seed {TASK_SEED}), the same for every "
        "method and seed; MLA and BoTorch-MTBO start from the same LHS initial design per task and seed",
        "- regret per task = (best found - f_opt) / (f_max - f_opt); f_opt from the family's optimum(); "
        "f_max = max over a dense sample of the parameter space (a full grid of ~2e5 valid configurations, "
        "every categorical choice, integers on their own scale, plus 2e4 uniform points; `dense_sample`)",
        "- 'MLA < it' = fraction of (task, seed) pairs, over the seeds both ran, where MLA's regret is lower "
        "(ties count half)",
        "- tuner s/iter: seconds outside the objective for one iteration over all tasks (MLA: one LCM fit + "
        "one PSO search per task; BoTorch-MTBO: one MultiTaskGP fit + one optimize_acqf per task; "
        "gp_minimize: its overhead per call x tasks); BLAS and torch limited to 1 thread for every method",
        "",
    ]
    lines += _summary_tables(cells, methods)
    lines += ["## Details", ""]
    for c in cells:
        lines += _cell_tables(c, methods)
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
