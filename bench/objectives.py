"""Issue 25: several objectives, failures, and PDGEQRF within a memory limit.

    PYTHONPATH=. python bench/objectives.py front    [--seeds 0-4] [--out bench/results_objectives_front.json]
    PYTHONPATH=. python bench/objectives.py failures [--seeds 0-4] [--out bench/results_objectives_failures.json]
    PYTHONPATH=. python bench/objectives.py pdgeqrf  [--seeds 0-4] [--out bench/results_objectives_pdgeqrf.json]
    PYTHONPATH=. python bench/objectives.py report   (the markdown tables of the JSON files above)

**front**: two-objective multitask families with known fronts, four tasks each, four variables in
[0, 1]. The task moves the Pareto set (``x_i* = 0.2 + 0.6 t`` for ``i >= 2``, ``t`` in 0, 1/3, 2/3,
1) and leaves the front where the standard problem has it:

* ``zdt1``: ``f1 = x1``, ``g = 1 + 3 sum_{i>=2} (x_i - x_i*)^2``, ``f2 = g (1 - sqrt(f1 / g))``;
  front ``f2 = 1 - sqrt(f1)`` (ZDT1 of Zitzler, Deb & Thiele, 2000, with the Pareto set moved);
* ``dtlz2``: ``g = sum_{i>=2} (x_i - x_i*)^2``, ``f1 = (1 + g) cos(x1 pi / 2)``,
  ``f2 = (1 + g) sin(x1 pi / 2)``; front the quarter circle (DTLZ2 of Deb et al., 2002, two objectives).

The score is each task's hypervolume (reference point (1.1, 1.1)) of the points found after 20 and
40 runs of the task, divided by the true front's (a front of 20,001 points), averaged over the
tasks. gptask tunes the four tasks at once (one LCM per objective, log-EHVI, 10 initial runs per
task); the peers tune each task alone with the same 40 runs: Optuna's ``GPSampler`` (multi-objective,
10 start-up trials), Optuna's ``NSGAIISampler`` (population 10, so that 40 runs are 4 generations;
its default of 50 would be one random generation) and uniform random search.

**failures**: a "blocks and processes" family where a third of the space fails: a dense QR of an
``N x N`` matrix (the task, ``N`` from 6,000 to 14,000) on a 64-core node with ``nb`` (8-512, log),
``nproc`` and ``nth`` (``nproc * nth <= 64``); a run whose memory per process
``8 (N^2/nproc + 2 nb N / sqrt(nproc) + (1 + nth) nb^2)`` bytes exceeds 300 MB fails ("out of
memory"), 36 % of the allowed configurations (every integer nb, nproc, nth) averaged over the tasks; otherwise it takes the time
of :func:`hybrid_time` (compute over ``nproc * nth`` cores with a block-size efficiency and a
threading loss, panel work, communication growing with ``nproc``). The tuner does not know the
limit. gptask with the failure model (the default), cautious (``failure_model=0.7``: every proposal,
the initial designs' included, at least 70 % likely to succeed) and without it (``failure_model=False``:
failures imputed as the task's worst value, as before issue 25; ``--settings``): failed runs and regret
(time over the best feasible configuration of the 153,015 allowed per task, relative) after 20 and 40
runs per task. The same for the two-task ``failing`` family of tests/test_multiobjective.py (a third of a
square fails, the optimum of one task on the failure boundary).

**pdgeqrf**: real PDGEQRF runs on this machine, time within a memory limit per process that
excludes the unconstrained optimum (``--memory-limit``); each seed tunes two tasks (20 runs
each, 8 initial) and re-launches its recommendation 3 times (``confirm=3``): every re-launch's
memory must meet the limit. Compared with the best configuration of the stored grids
(apps/scalapack_qr/data/grid_*.csv, their memory computed by apps/scalapack_qr/memory.py) inside
and outside the limit.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import gptask as gt  # noqa: E402
from gptask.model.pareto import hypervolume  # noqa: E402
from gptask.data.trials import Status  # noqa: E402

log = logging.getLogger("bench.objectives")

REF = np.array([1.1, 1.1])
FRONT_TASKS = [0.0, 1 / 3, 2 / 3, 1.0]
N_VARS = 4
BUDGETS = (20, 40)
N_INITIAL = 10


# ---- front: families with known fronts ---------------------------------------------------------
def _shift(t: float) -> float:
    return 0.2 + 0.6 * t


def zdt1(t: float, x: np.ndarray) -> tuple[float, float]:
    g = 1.0 + 3.0 * float(np.sum((x[1:] - _shift(t)) ** 2))
    f1 = float(x[0])
    return f1, g * (1.0 - math.sqrt(f1 / g))


def dtlz2(t: float, x: np.ndarray) -> tuple[float, float]:
    g = float(np.sum((x[1:] - _shift(t)) ** 2))
    return (1 + g) * math.cos(x[0] * math.pi / 2), (1 + g) * math.sin(x[0] * math.pi / 2)


FAMILIES = {"zdt1": zdt1, "dtlz2": dtlz2}


def true_front(name: str) -> np.ndarray:
    u = np.linspace(0.0, 1.0, 20001)
    if name == "zdt1":
        return np.column_stack([u, 1 - np.sqrt(u)])
    return np.column_stack([np.cos(u * math.pi / 2), np.sin(u * math.pi / 2)])


def front_problem(name: str) -> gt.Problem:
    fn = FAMILIES[name]
    params = gt.Space([gt.Real(f"x{k}", 0.0, 1.0) for k in range(N_VARS)])

    def objective(task: dict, p: dict) -> dict:
        f1, f2 = fn(task["t"], np.array([p[f"x{k}"] for k in range(N_VARS)]))
        return {"f1": f1, "f2": f2}

    return gt.Problem(gt.Space([gt.Real("t", 0.0, 1.0)]), params, objective, objectives=["f1", "f2"], name=name)


def hv_ratios(points: list[np.ndarray], true_hv: float) -> dict[str, float]:
    """Hypervolume / true hypervolume of the first b points, for b in BUDGETS."""
    P = np.asarray(points, float).reshape(-1, 2)
    return {str(b): hypervolume(P[:b], REF) / true_hv for b in BUDGETS}


def run_gptask_front(name: str, seed: int) -> list[dict[str, float]]:
    prob = front_problem(name)
    res = gt.tune(prob, tasks=[{"t": t} for t in FRONT_TASKS], budget=max(BUDGETS), n_initial=N_INITIAL,
                  seed=seed, progress=False)
    true_hv = hypervolume(true_front(name), REF)
    out = []
    for i in range(len(FRONT_TASKS)):
        pts = [[r["values"]["f1"], r["values"]["f2"]] for r in res.records(i, status=None) if r["values"]]
        out.append(hv_ratios(pts, true_hv))
    return out


def run_optuna_front(name: str, seed: int, sampler: str) -> list[dict[str, float]]:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    fn = FAMILIES[name]
    true_hv = hypervolume(true_front(name), REF)
    out = []
    for i, t in enumerate(FRONT_TASKS):
        s = seed * 100 + i
        if sampler == "gp":
            smp = optuna.samplers.GPSampler(seed=s, n_startup_trials=N_INITIAL)
        elif sampler == "nsga2":
            smp = optuna.samplers.NSGAIISampler(seed=s, population_size=10)
        else:
            smp = optuna.samplers.RandomSampler(seed=s)
        study = optuna.create_study(directions=["minimize", "minimize"], sampler=smp)
        pts = []

        def objective(trial: Any) -> tuple[float, float]:
            x = np.array([trial.suggest_float(f"x{k}", 0.0, 1.0) for k in range(N_VARS)])
            f = fn(t, x)
            pts.append(f)
            return f

        study.optimize(objective, n_trials=max(BUDGETS))
        out.append(hv_ratios(pts, true_hv))
    return out


def cmd_front(args: argparse.Namespace) -> dict:
    methods = {"gptask": run_gptask_front, "optuna_gp": lambda n, s: run_optuna_front(n, s, "gp"),
               "optuna_nsga2": lambda n, s: run_optuna_front(n, s, "nsga2"),
               "random": lambda n, s: run_optuna_front(n, s, "random")}
    chosen = args.methods.split(",") if args.methods else list(methods)
    rows = _load(args.out)
    done = {(r["family"], r["method"], r["seed"]) for r in rows}
    for name in args.families.split(","):
        for seed in args.seeds:
            for m in chosen:
                if (name, m, seed) in done:
                    continue
                t0 = time.perf_counter()
                per_task = methods[m](name, seed)
                rows.append({"family": name, "method": m, "seed": seed, "per_task": per_task,
                             "seconds": time.perf_counter() - t0})
                log.info("%s %s seed %d: %s (%.0f s)", name, m, seed,
                         {b: round(float(np.mean([p[b] for p in per_task])), 4) for b in per_task[0]},
                         rows[-1]["seconds"])
                _save(args.out, rows)
    return {"rows": rows}


# ---- failures ----------------------------------------------------------------------------------
HYBRID_TASKS = [6000, 8000, 10000, 12000, 14000]
HYBRID_LIMIT = 300e6
CORES = 64


def hybrid_memory(N: Any, nb: Any, nproc: Any, nth: Any) -> Any:
    """Bytes per process of the synthetic QR (numbers or arrays)."""
    return 8.0 * (N * N / nproc + 2 * nb * N / np.sqrt(nproc) + (1 + nth) * nb * nb)


def hybrid_time(N: Any, nb: Any, nproc: Any, nth: Any) -> Any:
    """Seconds of the synthetic QR (module docstring; numbers or arrays)."""
    compute = (4 / 3) * N ** 3 / (nproc * nth * 4e9 * nb / (nb + 48) / (1 + 0.04 * (nth - 1)))
    panel = 2 * N * N * nb / (np.sqrt(nproc) * np.sqrt(nth) * 1e9)
    comm = (N / nb) * (np.log2(nproc + 1) * 2e-3 + nproc * 1e-3) + N * N * np.log2(nproc + 1) / np.sqrt(
        nproc) * 8 / 2e9
    return compute + panel + comm


def hybrid_objective(task: dict, p: dict) -> float:
    N, nb, nproc, nth = (float(v) for v in (task["N"], p["nb"], p["nproc"], p["nth"]))
    if hybrid_memory(N, nb, nproc, nth) > HYBRID_LIMIT:
        raise MemoryError("out of memory")
    return float(hybrid_time(N, nb, nproc, nth))


def hybrid_problem() -> gt.Problem:
    return gt.Problem(gt.Space([gt.Integer("N", 4000, 16000)]),
                      gt.Space([gt.Integer("nb", 8, 512, log=True), gt.Integer("nproc", 1, CORES),
                                gt.Integer("nth", 1, CORES)]),
                      hybrid_objective, constraints=[f"nproc * nth <= {CORES}"], name="hybrid_qr")


def hybrid_optima() -> tuple[list[float], float]:
    """Per task the best feasible time over every allowed configuration (every integer nb, nproc,
    nth with nproc * nth <= 64: 153,015 per task); and the failing fraction of those, averaged over
    the tasks."""
    pairs = np.array([(P, th) for P in range(1, CORES + 1) for th in range(1, CORES // P + 1)], float)
    nb = np.repeat(np.arange(8, 513, dtype=float), len(pairs))
    P, th = np.tile(pairs[:, 0], 505), np.tile(pairs[:, 1], 505)
    best, fail = [], []
    for N in HYBRID_TASKS:
        ok = hybrid_memory(float(N), nb, P, th) <= HYBRID_LIMIT
        best.append(float(np.min(hybrid_time(float(N), nb, P, th)[ok])))
        fail.append(1 - float(ok.mean()))
    return best, float(np.mean(fail))


def failing_square(task: dict, p: dict) -> float:
    """tests/test_multiobjective.py's ``failing``: a third of the square fails."""
    if p["x1"] + p["x2"] > 1.2 + 0.2 * task["t"]:
        raise MemoryError("out of memory")
    return 1.0 + (p["x1"] - 0.75) ** 2 + (p["x2"] - 0.55) ** 2


def square_problem() -> gt.Problem:
    return gt.Problem(gt.Space([gt.Real("t", 0.0, 1.0)]), gt.Space([gt.Real("x1", 0.0, 1.0), gt.Real("x2", 0.0, 1.0)]),
                      failing_square, name="failing_square")


def square_optima() -> list[float]:
    # t = 0: the bowl's centre (0.75, 0.55) is beyond x1 + x2 <= 1.2; the best is its projection
    # (0.7, 0.5) with value 1.005; t = 1: the centre is feasible (1.3 <= 1.4), value 1
    return [1.005, 1.0]


def run_failures(family: str, seed: int, failure_model: bool | float) -> dict[str, Any]:
    if family == "hybrid":
        prob, tasks, optima = hybrid_problem(), [{"N": n} for n in HYBRID_TASKS], hybrid_optima()[0]
    else:
        prob, tasks, optima = square_problem(), [{"t": 0.0}, {"t": 1.0}], square_optima()
    res = gt.tune(prob, tasks=tasks, budget=max(BUDGETS), n_initial=N_INITIAL, seed=seed, progress=False,
                  failure_model=failure_model, max_failures=None)
    out: dict[str, Any] = {}
    for b in BUDGETS:
        failed, regret = 0, []
        for i in range(len(tasks)):
            first = res.records(i, status=None)[:b]
            failed += sum(r["status"] == Status.FAILED for r in first)
            ok = [r["value"] for r in first if r["status"] == Status.COMPLETE]
            regret.append(min(ok) / optima[i] - 1 if ok else float("inf"))
        out[str(b)] = {"failed": failed, "failed_search": sum(
            r["status"] == Status.FAILED and r["source"] == "search" for i in range(len(tasks))
            for r in res.records(i, status=None)[:b]), "regret": regret}
    return out


def cmd_failures(args: argparse.Namespace) -> dict:
    rows = _load(args.out)
    done = {(r["family"], r["failure_model"], r["seed"]) for r in rows}
    for family in args.families.split(","):
        for seed in args.seeds:
            for on in args.settings:
                if (family, on, seed) in done:
                    continue
                t0 = time.perf_counter()
                got = run_failures(family, seed, on)
                rows.append({"family": family, "failure_model": on, "seed": seed, **got,
                             "seconds": time.perf_counter() - t0})
                log.info("%s failure_model=%s seed %d: %s", family, on, seed,
                         {b: (got[b]["failed"], round(float(np.mean(got[b]["regret"])), 4)) for b in got})
                _save(args.out, rows)
    return {"rows": rows}


def plot_failure_region(path: Path, seed: int = 0) -> None:
    """The learnt P(success) of the hybrid family's largest task over (nproc, nb) at nth = 1 after a
    40-run tuning, the true boundary drawn over it, the runs marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    prob = hybrid_problem()
    tasks = [{"N": n} for n in HYBRID_TASKS]
    with gt.Tuner(prob, tasks=tasks, budget=max(BUDGETS), n_initial=N_INITIAL, seed=seed, max_failures=None) as tu:
        ev = gt.Evaluator(prob.objective)
        while not tu.done:
            for t in tu.ask():
                tu.tell(t, ev(t.task, t.params))
        tu.fit_model()
        fm = tu.outputs.failure
        i = len(tasks) - 1
        nbs = np.exp(np.linspace(np.log(8), np.log(512), 60))
        procs = np.arange(1, CORES + 1)
        NB, PP = np.meshgrid(nbs, procs)
        grid = [{"nb": int(round(a)), "nproc": int(b), "nth": 1} for a, b in zip(NB.ravel(), PP.ravel())]
        P = fm.prob_success(tasks[i], prob.param_space.encode(grid)).reshape(NB.shape)
        mem = hybrid_memory(float(tasks[i]["N"]), NB, PP.astype(float), 1.0)
        runs = [t for t in tu.records if t.task_index == i]
    fig, ax = plt.subplots(figsize=(5.5, 4))
    cs = ax.contourf(PP, NB, P, levels=np.linspace(0, 1, 11), cmap="RdYlGn")
    fig.colorbar(cs, ax=ax, label="learnt P(success)")
    ax.contour(PP, NB, mem, levels=[HYBRID_LIMIT], colors="k", linewidths=2)
    for t in runs:
        ax.scatter(t.params["nproc"], t.params["nb"], marker="x" if t.status is Status.FAILED else "o",
                   c="k" if t.status is Status.FAILED else "w", edgecolors="k", s=25)
    ax.set_yscale("log")
    ax.set_xlabel("nproc")
    ax.set_ylabel("nb")
    ax.set_title(f"hybrid QR, N = {tasks[i]['N']}: failure model after {len(runs)} runs\n"
                 "black line: true memory limit; x: failed runs (any nth), o: finished", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ---- pdgeqrf -----------------------------------------------------------------------------------
PDGEQRF_TASKS = [{"m": 1000, "n": 500}, {"m": 500, "n": 1000}]


def grid_reference(limit: float) -> dict[str, Any]:
    """Per stored grid task: the fastest configuration overall and within the limit (memory from
    apps/scalapack_qr/memory.py, repeats 2 as the grids were measured)."""
    from apps.scalapack_qr.grid import read_csv
    from apps.scalapack_qr.memory import memory_per_process

    out = {}
    for task in PDGEQRF_TASKS:
        rows = [r for r in read_csv(ROOT / "apps/scalapack_qr/data" / f"grid_m{task['m']}_n{task['n']}.csv")
                if r["status"] == "complete"]
        for r in rows:
            r["memory"] = memory_per_process(task["m"], task["n"], r["mb"], r["nb"], r["p"], r["nproc"] // r["p"], 2)
        best = min(rows, key=lambda r: r["time"])
        inside = [r for r in rows if r["memory"] <= limit]
        fit = min(inside, key=lambda r: r["time"])
        keys = ("mb", "nb", "nproc", "p", "nth")
        out[f"m{task['m']}_n{task['n']}"] = {
            "best": {**{k: best[k] for k in keys}, "time": best["time"], "memory": best["memory"]},
            "best_within": {**{k: fit[k] for k in keys}, "time": fit["time"], "memory": fit["memory"]},
            "share_within": len(inside) / len(rows)}
    return out


def cmd_pdgeqrf(args: argparse.Namespace) -> dict:
    from apps.scalapack_qr import problem

    rows = _load(args.out)
    done = {r["seed"] for r in rows}
    for seed in args.seeds:
        if seed in done:
            continue
        prob = problem(repeats=2, cores=2, memory_limit=args.memory_limit)
        t0 = time.perf_counter()
        res = gt.tune(prob, tasks=PDGEQRF_TASKS, budget=20, n_initial=8, seed=seed, progress=False)
        per_task = []
        for i in range(len(PDGEQRF_TASKS)):
            rec = res.recommend(i, confirm=3, progress=False)
            runs = [c for c in res.confirmations if c["task_index"] == i and dict(c["params"]) == rec.params]
            unconstrained = min(res.records(i), key=lambda r: r["value"])
            per_task.append({
                "recommended": rec.params, "value": rec.value, "basis": rec.basis,
                "relaunch_memory": [c["values"].get("memory") for c in runs],
                "relaunch_times": [c["value"] for c in runs],
                "relaunch_failed": [c["reason"] for c in runs if c["status"] != Status.COMPLETE],
                "meets_limit": all(c["status"] == Status.COMPLETE and c["values"]["memory"] <= args.memory_limit
                                   for c in runs) and bool(runs),
                "runs_outside_limit": sum(r["values"]["memory"] > args.memory_limit for r in res.records(i)),
                "failed": sum(r["status"] == Status.FAILED for r in res.records(i, status=None)),
                "fastest_run_any_memory": {"params": dict(unconstrained["params"]), "time": unconstrained["value"],
                                           "memory": unconstrained["values"]["memory"]},
            })
        rows.append({"seed": seed, "limit": args.memory_limit, "per_task": per_task,
                     "seconds": time.perf_counter() - t0})
        log.info("pdgeqrf seed %d: %s", seed, [(p["recommended"], p["meets_limit"]) for p in per_task])
        _save(args.out, rows)
    return {"rows": rows, "grid": grid_reference(args.memory_limit)}


# ---- report ------------------------------------------------------------------------------------
def _load(path: str | None) -> list[dict]:
    if path and Path(path).exists():
        return json.loads(Path(path).read_text()).get("rows", [])
    return []


def _save(path: str | None, rows: list[dict], extra: dict | None = None) -> None:
    if not path:
        return
    doc = {"machine": machine(), "rows": rows, **(extra or {})}
    tmp = Path(str(path) + ".tmp")
    tmp.write_text(json.dumps(doc, indent=1))
    os.replace(tmp, path)


def machine() -> dict[str, Any]:
    cpu = ""
    try:
        cpu = next(ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return {"cpu": cpu, "cores": len(os.sched_getaffinity(0)), "python": platform.python_version(),
            "date": time.strftime("%Y-%m-%d"), "loadavg": os.getloadavg()}


def report_front(doc: dict) -> str:
    rows = doc["rows"]
    lines = ["| family | method | HV ratio at 20 runs/task: mean | worst seed | at 40: mean | worst seed | seconds/seed |",
             "|---|---|---|---|---|---|---|"]
    for fam in dict.fromkeys(r["family"] for r in rows):
        for m in dict.fromkeys(r["method"] for r in rows):
            mine = [r for r in rows if r["family"] == fam and r["method"] == m]
            if not mine:
                continue
            per_seed = {b: [float(np.mean([p[b] for p in r["per_task"]])) for r in mine] for b in ("20", "40")}
            lines.append(f"| {fam} | {m} | {np.mean(per_seed['20']):.4f} | {min(per_seed['20']):.4f} | "
                         f"{np.mean(per_seed['40']):.4f} | {min(per_seed['40']):.4f} | "
                         f"{np.mean([r['seconds'] for r in mine]):.0f} |")
    return "\n".join(lines)


def report_failures(doc: dict) -> str:
    rows = doc["rows"]
    lines = ["| family | failure model | runs/task | failed runs (all tasks, mean over seeds) | of them in the search "
             "| mean regret | worst seed's mean regret |", "|---|---|---|---|---|---|---|"]
    for fam in dict.fromkeys(r["family"] for r in rows):
        for on in dict.fromkeys(r["failure_model"] for r in rows):
            mine = [r for r in rows if r["family"] == fam and r["failure_model"] == on]
            label = {True: "on (the default)", False: "off (imputed)"}.get(on, f"cautious, `failure_model={on}`")
            for b in ("20", "40"):
                if not mine:
                    continue
                reg = [float(np.mean(r[b]["regret"])) for r in mine]
                lines.append(f"| {fam} ({len(mine)} seeds) | {label} | {b} | "
                             f"{np.mean([r[b]['failed'] for r in mine]):.1f} | "
                             f"{np.mean([r[b]['failed_search'] for r in mine]):.1f} | {np.mean(reg):.4f} | "
                             f"{max(reg):.4f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("command", choices=("front", "failures", "pdgeqrf", "report", "plot-failures"))
    ap.add_argument("--seeds", default="0-4", help="seeds, e.g. 0-4 or 0,2")
    ap.add_argument("--families", default=None)
    ap.add_argument("--methods", default=None, help="front: gptask,optuna_gp,optuna_nsga2,random (default all)")
    ap.add_argument("--memory-limit", type=float, default=4.15e6, help="pdgeqrf: bytes per process")
    ap.add_argument("--settings", default="true,0.7,false",
                    help="failures: the failure_model settings compared (true, false or a probability)")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    args.settings = [{"true": True, "false": False}[v] if v in ("true", "false") else float(v)
                     for v in args.settings.split(",")]
    lo, _, hi = args.seeds.partition("-")
    args.seeds = list(range(int(lo), int(hi) + 1)) if hi else [int(s) for s in args.seeds.split(",")]
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    logging.getLogger("gptask").setLevel(logging.ERROR)
    here = ROOT / "bench"
    if args.command == "front":
        args.families = args.families or "zdt1,dtlz2"
        args.out = args.out or str(here / "results_objectives_front.json")
        cmd_front(args)
    elif args.command == "failures":
        args.families = args.families or "hybrid,square"
        args.out = args.out or str(here / "results_objectives_failures.json")
        cmd_failures(args)
    elif args.command == "pdgeqrf":
        args.out = args.out or str(here / "results_objectives_pdgeqrf.json")
        got = cmd_pdgeqrf(args)
        _save(args.out, got["rows"], {"grid": got["grid"]})
    elif args.command == "plot-failures":
        plot_failure_region(Path(args.out or here / "results_objectives_failure_region.png"))
    else:
        for name, fn in (("front", report_front), ("failures", report_failures)):
            p = here / f"results_objectives_{name}.json"
            if p.exists():
                print(fn(json.loads(p.read_text())))
                print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
