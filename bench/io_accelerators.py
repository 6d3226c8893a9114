"""I/O accelerators benchmark (issue #8): MLA gain over the defaults, distance to a grid optimum,
and the noise policies of gptask.evaluation.noise under injected background I/O.

Three parts, one per invocation (each holds the machine lock on its own), from the repo root:

    flock /work/wt/machine.lock nice -n 5 /work/venv/bin/python bench/io_accelerators.py gain
    flock /work/wt/machine.lock nice -n 5 /work/venv/bin/python bench/io_accelerators.py grid
    flock /work/wt/machine.lock nice -n 5 /work/venv/bin/python bench/io_accelerators.py noise

gain   For each accelerator, one MLA run (gt.tune, --budget runs per task, half of them the initial
       design) over its named tasks (SRO.1-3 / SBB.1-2) and --n-lhs Latin-hypercube tasks (SBB
       volumes capped at --sbb-volume-cap MiB so that a run takes seconds). Then a CONFIRMATION
       phase: the default and MLA's best of every task re-measured --confirm times, round robin over
       tasks and both configurations. gain = 1 - best / default on the confirmed medians (and mins).
grid   For --grid-tasks: every point of the small grid of ``python -m apps.io_accelerators grid``
       measured in --grid-passes round-robin passes (runs slower than 3x the default are stopped:
       censored), then the grid's --grid-top best points, the default and MLA's best (read from the
       gain part's JSON when present) re-measured --confirm-grid times round robin. distance =
       confirmed(MLA best) / confirmed(grid optimum) - 1.
noise  One task (--noise-task), single-task tuning with a fixed budget of --noise-budget evaluated
       configurations, under a background writer (apps/io_accelerators/interference.py: bursts of
       U(0.5, 2) s of 1 MiB writes with an fsync every 16 MiB, pauses of U(0.5, 3) s, the same
       on/off pattern for every policy of a seed). Policies: none (1 run per configuration),
       static k=3 (min), SEDR (10 % interval, <= 5 runs, mean), Adaptive (<= 5 runs, mean), and
       "none, 3x configurations" (1 run per configuration) as a control with static k=3's run count. Then,
       WITHOUT background I/O, every chosen configuration, the default and the grid optimum (from
       the grid part's JSON) re-measured --confirm-noise times round robin: distance of the chosen
       configuration's confirmed median to the best confirmed median, runs and seconds spent.

Each part writes apps/io_accelerators/data/bench_<part>[_model].json (raw numbers, machine, load
at start and end, command) and prints its markdown tables (pasted into
bench/results_io_accelerators.md). Development: ``--backend model`` (the cost model, no lock
needed) and ``--tiny`` (small budgets and volumes).
"""

from __future__ import annotations

import argparse
import csv
import itertools
import json
import os
import platform
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import gptask as gt  # noqa: E402
from gptask.evaluation.noise import SEDR, Adaptive, Pruner, StaticResampling  # noqa: E402
from gptask.space.sampling import lhs_points  # noqa: E402

from apps.io_accelerators.__main__ import GRIDS  # noqa: E402
from apps.io_accelerators.files import default_workdir  # noqa: E402
from apps.io_accelerators.interference import BackgroundIO, InterferenceSpec  # noqa: E402
from apps.io_accelerators.problem import DEFAULTS, named_task, problem  # noqa: E402

DATA = ROOT / "apps" / "io_accelerators" / "data"
NAMED = {"sro": ["SRO.1", "SRO.2", "SRO.3"], "sbb": ["SBB.1", "SBB.2"]}


# ----------------------------------------------------------------------------------------------
# plumbing


def machine() -> dict[str, Any]:
    return {"host": platform.node(), "cpus": os.cpu_count(), "platform": platform.platform(),
            "python": platform.python_version(), "loadavg": [round(x, 2) for x in os.getloadavg()],
            "utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


def jsonable(x: Any) -> Any:
    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    if isinstance(x, np.generic):
        return x.item()
    return x


class Meter:
    """The objective, counting runs and their wall seconds (the tuner sees the same callable)."""

    def __init__(self, objective: Any) -> None:
        self.objective = objective
        self.runs = 0
        self.wall = 0.0

    def __call__(self, task: dict, params: dict, deadline: float | None = None) -> float:
        t0 = time.perf_counter()
        try:
            return self.objective(task, params, deadline=deadline)
        finally:
            self.runs += 1
            self.wall += time.perf_counter() - t0

    def reset(self) -> tuple[int, float]:
        out = (self.runs, self.wall)
        self.runs, self.wall = 0, 0.0
        return out


def metered_problem(acc: str, backend: str, seed: int) -> tuple[gt.Problem, Meter]:
    p = problem(acc, backend, seed=seed)
    meter = Meter(p.objective)
    return gt.Problem(p.task_space, p.param_space, meter, constraints=p.constraints, constants=p.constants,
                      name=p.name), meter


def full_params(acc: str, params: dict) -> dict:
    return {**DEFAULTS[acc], **params}


def confirm(meter: Meter, items: list[tuple[str, dict, dict]], k: int) -> dict[str, list[float]]:
    """``k`` rounds; each round runs every item once, the order rotated by one each round."""
    out: dict[str, list[float]] = {label: [] for label, _, _ in items}
    n = len(items)
    for r in range(k):
        for j in range(n):
            label, task, params = items[(j + r) % n]
            out[label].append(float(meter(task, params)))
    return out


def med(v: list[float]) -> float:
    return float(np.median(v))


def json_path(part: str, backend: str, tiny: bool) -> Path:
    return DATA / f"bench_{part}{'_tiny' if tiny else ''}{'' if backend == 'real' else '_' + backend}.json"


def save(part: str, a: argparse.Namespace, payload: dict) -> Path:
    DATA.mkdir(parents=True, exist_ok=True)
    path = json_path(part, a.backend, a.tiny)
    with open(path, "w") as fh:
        json.dump(jsonable(payload), fh, indent=1)
    return path


def load(part: str, a: argparse.Namespace) -> dict | None:
    path = json_path(part, a.backend, a.tiny)
    if not path.exists():
        return None
    with open(path) as fh:
        return json.load(fh)


def short(acc: str, params: dict) -> str:
    if acc == "sro":
        return (f"bin {params['binsize'] / 2**20:.3g}M thr {params['cluster_threshold']} "
                f"pf {params['prefetch_size'] / 2**20:.3g}M seq {params['sequence_length']}")
    return (f"w {params['workers']} d {params['destagers']} buf {params['buffer_mb']} "
            f"thr {float(params['threshold']):.2f}")


def task_label(task: dict) -> str:
    keys = ["file_mb", "n_leads", "scatter_kb", "ops_per_lead", "op_kb", "sequential", "read_fraction",
            "volume_mb", "threads"]
    return ", ".join(f"{k}={round(task[k], 2) if isinstance(task[k], float) else task[k]}"
                     for k in keys if k in task)


# ----------------------------------------------------------------------------------------------
# part a: MLA gain over the default


def lhs_tasks(acc: str, n: int, seed: int, sbb_cap: int, tiny: bool) -> list[dict]:
    p = problem(acc, "model")
    tasks = lhs_points(p.task_space, n, np.random.default_rng([seed, 0x1A5]))
    out = []
    for t in tasks:
        t = dict(t)
        if acc == "sbb":
            t["volume_mb"] = min(int(t["volume_mb"]), sbb_cap)
        if tiny:
            t["volume_mb"] = min(int(t["volume_mb"]), 8 if acc == "sro" else 16)
        out.append(p.task_space.validate(t))
    return out


def named_tasks(acc: str, tiny: bool) -> list[dict]:
    out = []
    for n in NAMED[acc]:
        t = named_task(n)
        if tiny:
            t["volume_mb"] = min(int(t["volume_mb"]), 8 if acc == "sro" else 16)
        out.append(t)
    return out


def part_gain(a: argparse.Namespace) -> dict:
    res: dict[str, Any] = {"part": "gain", "backend": a.backend, "budget": a.budget, "confirm": a.confirm,
                           "n_lhs": a.n_lhs, "seed": a.seed, "sbb_volume_cap": a.sbb_volume_cap, "rows": [],
                           "runs": {}}
    for acc in a.accelerators.split(","):
        named = named_tasks(acc, a.tiny)
        lhs = lhs_tasks(acc, a.n_lhs, a.seed, a.sbb_volume_cap, a.tiny)
        tasks = named + lhs
        labels = NAMED[acc] + [f"{acc.upper()}-LHS{i}" for i in range(len(lhs))]
        prob, meter = metered_problem(acc, a.backend, a.seed)
        t0 = time.perf_counter()
        r = gt.tune(prob, tasks=tasks, budget=a.budget, n_initial=a.budget // 2, seed=a.seed, progress=False)
        tune_wall = time.perf_counter() - t0
        tune_runs, tune_run_wall = meter.reset()
        print(f"[gain] {acc}: MLA {len(tasks)} tasks x {a.budget} runs in {tune_wall:.0f} s "
              f"({tune_runs} runs, {tune_run_wall:.0f} s of runs)", flush=True)
        items, bests = [], []
        for i, (lab, t) in enumerate(zip(labels, tasks)):
            best, value = r.best(i)
            bests.append((best, value))
            items.append((f"{lab}|default", t, dict(DEFAULTS[acc])))
            items.append((f"{lab}|mla", t, full_params(acc, best)))
        t0 = time.perf_counter()
        conf = confirm(meter, items, a.confirm)
        conf_wall = time.perf_counter() - t0
        res["runs"][acc] = {"tune_wall_s": tune_wall, "tune_runs": tune_runs, "tune_run_wall_s": tune_run_wall,
                            "confirm_wall_s": conf_wall, "confirm_runs": meter.reset()[0]}
        for i, (lab, t) in enumerate(zip(labels, tasks)):
            d, m = conf[f"{lab}|default"], conf[f"{lab}|mla"]
            res["rows"].append({
                "acc": acc, "task_label": lab, "task": t, "best_params": full_params(acc, bests[i][0]),
                "mla_value": bests[i][1], "default_samples": d, "mla_samples": m,
                "default_median": med(d), "mla_median": med(m), "default_min": min(d), "mla_min": min(m),
                "gain_median": 1 - med(m) / med(d), "gain_min": 1 - min(m) / min(d),
                "mla_beats_default_every_round": all(x < y for x, y in zip(m, d)),
            })
    return res


def md_gain(res: dict) -> str:
    lines = [f"Budget {res['budget']} runs per task (half initial design), confirmation k={res['confirm']} "
             "round robin; times in seconds; gain = 1 - MLA / default.", "",
             "| task | default median | MLA best (tuning value) | MLA best, confirmed median | gain (medians) "
             "| gain (mins) | MLA faster in every round | MLA's best configuration |",
             "|---|---|---|---|---|---|---|---|"]
    for r in res["rows"]:
        lines.append(f"| {r['task_label']} | {r['default_median']:.3f} | {r['mla_value']:.3f} | "
                     f"{r['mla_median']:.3f} | {100 * r['gain_median']:.0f} % | {100 * r['gain_min']:.0f} % | "
                     f"{'yes' if r['mla_beats_default_every_round'] else 'no'} | {short(r['acc'], r['best_params'])} |")
    lines.append("")
    for acc in sorted({r["acc"] for r in res["rows"]}):
        g = [r["gain_median"] for r in res["rows"] if r["acc"] == acc]
        gl = [r["gain_median"] for r in res["rows"] if r["acc"] == acc and "LHS" in r["task_label"]]
        ru = res["runs"][acc]
        lines.append(f"- {acc}: median gain over all {len(g)} tasks {100 * np.median(g):.0f} %"
                     + (f", over the {len(gl)} LHS tasks {100 * np.median(gl):.0f} % (min {100 * min(gl):.0f} %, "
                        f"max {100 * max(gl):.0f} %)" if gl else "")
                     + f"; MLA {ru['tune_wall_s']:.0f} s ({ru['tune_runs']} runs, {ru['tune_run_wall_s']:.0f} s "
                     f"in runs), confirmation {ru['confirm_wall_s']:.0f} s ({ru['confirm_runs']} runs)")
    lines += ["", "LHS tasks:", ""]
    lines += [f"- {r['task_label']}: {task_label(r['task'])}" for r in res["rows"] if "LHS" in r["task_label"]]
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------------
# part b: distance to an exhaustive optimum


def grid_points(acc: str, prob: gt.Problem, task: dict) -> list[dict]:
    g = GRIDS[acc]
    names = list(g)
    combos = [full_params(acc, dict(zip(names, v))) for v in itertools.product(*(g[n] for n in names))]
    return [c for c in combos if prob.is_feasible(task, c)]


def part_grid(a: argparse.Namespace) -> dict:
    gain = load("gain", a)
    res: dict[str, Any] = {"part": "grid", "backend": a.backend, "passes": a.grid_passes, "confirm": a.confirm_grid,
                           "tasks": []}
    for name in a.grid_tasks.split(","):
        acc = name[:3].lower()
        task = named_tasks(acc, a.tiny)[NAMED[acc].index(name)]
        prob, meter = metered_problem(acc, a.backend, a.seed)
        pts = grid_points(acc, prob, task)
        dflt = dict(DEFAULTS[acc])
        t0 = time.perf_counter()
        meter(task, dflt)  # warm-up, discarded
        d0 = [float(meter(task, dflt)) for _ in range(2)]
        deadline = a.prune_factor * max(d0)
        pruner = Pruner(fixed=deadline)
        samples: list[list[float]] = [[] for _ in pts]
        censored = [False] * len(pts)
        loads = [0.0] * len(pts)
        for p in range(a.grid_passes):
            order = range(len(pts)) if p % 2 == 0 else reversed(range(len(pts)))
            for j in order:
                if censored[j]:
                    continue
                nr = StaticResampling(1).evaluate(lambda deadline=None, j=j: meter(task, pts[j], deadline=deadline),
                                                  pruner=pruner)
                samples[j].append(nr.samples[0])
                censored[j] = nr.censored
                loads[j] = os.getloadavg()[0]
        grid_wall = time.perf_counter() - t0
        grid_runs = meter.reset()[0]
        est = [min(s) if not c else float("inf") for s, c in zip(samples, censored)]
        top = sorted(range(len(pts)), key=lambda j: est[j])[: a.grid_top]
        items = [("default", task, dflt)] + [(f"grid#{k}", task, pts[j]) for k, j in enumerate(top)]
        mla = None
        if gain is not None:
            mla = next((r for r in gain["rows"] if r["task_label"] == name), None)
            if mla is not None:
                items.append(("mla", task, full_params(acc, mla["best_params"])))
        t0 = time.perf_counter()
        conf = confirm(meter, items, a.confirm_grid)
        conf_wall = time.perf_counter() - t0
        grid_best_label = min((lab for lab in conf if lab.startswith("grid#")), key=lambda lab: med(conf[lab]))
        opt = med(conf[grid_best_label])
        out = {"task_label": name, "acc": acc, "task": task, "n_points": len(pts), "n_censored": sum(censored),
               "prune_deadline_s": deadline, "grid_wall_s": grid_wall, "grid_runs": grid_runs,
               "confirm_wall_s": conf_wall, "confirm_runs": meter.reset()[0],
               "points": [{"params": pts[j], "samples": samples[j], "censored": censored[j], "loadavg1": loads[j]}
                          for j in range(len(pts))],
               "grid_best_by_sweep": pts[top[0]], "grid_best_by_sweep_value": est[top[0]],
               "confirmed": {lab: {"samples": conf[lab], "median": med(conf[lab]), "min": min(conf[lab]),
                                   "params": next(p for l2, _, p in items if l2 == lab)} for lab in conf},
               "grid_optimum_label": grid_best_label, "grid_optimum_median": opt,
               "default_median": med(conf["default"]),
               "grid_gain_median": 1 - opt / med(conf["default"])}
        if mla is not None:
            out["mla_distance_median"] = med(conf["mla"]) / opt - 1
            out["mla_distance_min"] = min(conf["mla"]) / min(conf[grid_best_label]) - 1
        res["tasks"].append(out)
        write_grid_csv(a, out)
        print(f"[grid] {name}: {len(pts)} points x {a.grid_passes} passes in {grid_wall:.0f} s; "
              f"confirmation {conf_wall:.0f} s", flush=True)
    return res


def write_grid_csv(a: argparse.Namespace, out: dict) -> None:
    """The sweep in the CSV format of ``python -m apps.io_accelerators grid`` (summary/compare work)."""
    if a.backend != "real" or a.tiny:
        return
    path = DATA / f"grid_{out['task_label']}_locked.csv"
    names = list(GRIDS[out["acc"]])
    rows = []
    for p in out["points"]:
        s = p["samples"]
        rows.append({"kind": "grid", **{k: p["params"][k] for k in DEFAULTS[out["acc"]]},
                     "time": out["prune_deadline_s"] if p["censored"] else min(s),
                     "samples": " ".join(f"{x:.5f}" for x in s), "censored": int(p["censored"]),
                     "loadavg1": round(p["loadavg1"], 2)})
    d = out["confirmed"]["default"]
    rows.insert(0, {"kind": "default", **{k: DEFAULTS[out["acc"]][k] for k in DEFAULTS[out["acc"]]},
                    "time": min(d["samples"]), "samples": " ".join(f"{x:.5f}" for x in d["samples"]),
                    "censored": 0, "loadavg1": rows[0]["loadavg1"]})
    with open(path, "w", newline="") as fh:
        fh.write(f"# io_accelerators grid (bench/io_accelerators.py grid, under the machine lock): "
                 f"task={out['task_label']} grid={names} passes={a.grid_passes} round robin\n")
        fh.write(f"# full task: {json.dumps(jsonable(out['task']))}\n")
        fh.write(f"# command: python bench/io_accelerators.py {' '.join(sys.argv[1:])}\n")
        fh.write(f"# machine at start: {json.dumps(a.m0)}\n# machine at end: {json.dumps(machine())}\n")
        fh.write("# time = min of the passes; censored=1: stopped at 3x the default, time = that bound; "
                 "the default row holds the confirmation samples\n")
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def md_grid(res: dict) -> str:
    lines = [f"Grid: {res['passes']} round-robin passes (min), runs over 3x the default stopped; confirmation "
             f"k={res['confirm']} round robin of the default, the sweep's best points and MLA's best.", "",
             "| task | points (censored) | sweep | default (confirmed median) | grid optimum (confirmed median) "
             "| its gain over default | MLA best (confirmed median) | MLA distance to grid optimum (medians / mins) "
             "| grid optimum | MLA best |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for t in res["tasks"]:
        c = t["confirmed"]
        mla = c.get("mla")
        lines.append(
            f"| {t['task_label']} | {t['n_points']} ({t['n_censored']}) | {t['grid_wall_s']:.0f} s, {t['grid_runs']} runs "
            f"| {t['default_median']:.3f} | {t['grid_optimum_median']:.3f} | {100 * t['grid_gain_median']:.0f} % | "
            + (f"{mla['median']:.3f} | {100 * t['mla_distance_median']:+.0f} % / {100 * t['mla_distance_min']:+.0f} % | "
               if mla else "- | - | ")
            + f"{short(t['acc'], c[t['grid_optimum_label']]['params'])} | "
            + (f"{short(t['acc'], mla['params'])} |" if mla else "- |"))
    lines.append("")
    for t in res["tasks"]:
        lines.append(f"- {t['task_label']} confirmed medians: "
                     + ", ".join(f"{lab} {v['median']:.3f}" for lab, v in t["confirmed"].items()))
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------------
# part c: noise policies under injected background I/O


def policies(budget: int) -> list[tuple[str, Any, int]]:
    """(name, noise policy or None, budget in configurations)."""
    return [("none", None, budget),
            ("static k=3 (min)", StaticResampling(3, "min"), budget),
            ("SEDR 10 %, <= 5 (mean)", SEDR(rel_width=0.1, max_samples=5), budget),
            ("Adaptive <= 5 (mean)", Adaptive(max_samples=5), budget),
            ("none, 3x configurations", None, 3 * budget)]


def part_noise(a: argparse.Namespace) -> dict:
    name = a.noise_task
    acc = name[:3].lower()
    task = named_tasks(acc, a.tiny)[NAMED[acc].index(name)]
    spec = (InterferenceSpec(file_mb=16, block_kb=256, fsync_mb=4, seed=0) if a.tiny else InterferenceSpec())
    res: dict[str, Any] = {"part": "noise", "backend": a.backend, "task_label": name, "task": task,
                           "budget": a.noise_budget, "seeds": a.noise_seeds, "confirm": a.confirm_noise,
                           "interference": asdict(spec), "runs": []}
    prob, meter = metered_problem(acc, a.backend, 0)
    workdir = default_workdir()
    pols = policies(a.noise_budget)
    if not a.equal_runs_control:
        pols = pols[:-1]
    for s in range(a.noise_seeds):
        order = pols if s % 2 == 0 else pols[::-1]  # alternate the order of the policies between seeds
        for pname, pol, budget in order:
            spec_s = replace(spec, seed=s)  # every policy of a seed meets the same on/off pattern
            t0 = time.perf_counter()
            with BackgroundIO(workdir, spec_s) as bg:
                r = gt.tune(prob, tasks=[task], budget=budget, n_initial=max(2, budget * 2 // 5), seed=s,
                            progress=False, noise=pol)
            wall = time.perf_counter() - t0
            runs, run_wall = meter.reset()
            best, value = r.best(0)
            recs = r.records(0)
            res["runs"].append({"policy": pname, "seed": s, "budget": budget, "best_params": full_params(acc, best),
                                "best_value_under_noise": value, "runs": runs, "run_wall_s": run_wall,
                                "tune_wall_s": wall, "configurations": len(recs),
                                "unique_configurations": len({json.dumps(jsonable(x["params"]), sort_keys=True)
                                                              for x in recs}),
                                "interference": bg.stats})
            print(f"[noise] seed {s} {pname}: {runs} runs, {run_wall:.0f} s of runs, {wall:.0f} s in all; "
                  f"best {value:.3f} under noise; background wrote {bg.stats.get('bytes', 0) / 2**20:.0f} MiB",
                  flush=True)
    # ground truth without background I/O
    items = [("default", task, dict(DEFAULTS[acc]))]
    grid = load("grid", a)
    if grid is not None:
        g = next((t for t in grid["tasks"] if t["task_label"] == name), None)
        if g is not None:
            items.append(("grid optimum", task, g["confirmed"][g["grid_optimum_label"]]["params"]))
    for k, r in enumerate(res["runs"]):
        items.append((f"run{k}", task, r["best_params"]))
    t0 = time.perf_counter()
    conf = confirm(meter, items, a.confirm_noise)
    res["confirm_wall_s"] = time.perf_counter() - t0
    res["confirm_runs"] = meter.reset()[0]
    res["confirmed"] = {lab: {"samples": v, "median": med(v), "min": min(v)} for lab, v in conf.items()}
    best_known = min(med(v) for v in conf.values())
    res["best_known_median"] = best_known
    res["best_known_label"] = min(conf, key=lambda lab: med(conf[lab]))
    for k, r in enumerate(res["runs"]):
        m = med(conf[f"run{k}"])
        r["truth_median"] = m
        r["distance_best_known"] = m / best_known - 1
        if "grid optimum" in conf:
            r["distance_grid_optimum"] = m / med(conf["grid optimum"]) - 1
        r["improvement_default"] = 1 - m / med(conf["default"])
    return res


def md_noise(res: dict) -> str:
    st = [r["interference"] for r in res["runs"] if "bytes" in r["interference"]]
    mbps = np.median([x["mb_per_s_busy"] for x in st]) if st else float("nan")
    duty = np.median([x["duty_cycle"] for x in st]) if st else float("nan")
    c = res["confirmed"]
    spec = {k: v for k, v in res["interference"].items() if k != "seed"}
    lines = [f"Task {res['task_label']}, {res['seeds']} seed(s), {res['budget']} configurations per run "
             f"(40 % initial design); background writer: {spec}, its seed = the tuning seed; measured median duty cycle "
             f"{duty:.2f}, {mbps:.0f} MiB/s within bursts. Ground truth: confirmed medians of {res['confirm']} "
             f"runs without background I/O, round robin. Default {c['default']['median']:.3f} s"
             + (f", grid optimum {c['grid optimum']['median']:.3f} s" if "grid optimum" in c else "")
             + f", best known {res['best_known_median']:.3f} s ({res['best_known_label']}).", "",
             "| policy | distance to best known (median over seeds; per seed) | improvement over default "
             "| runs (mean) | seconds in runs (mean) | tuning wall s (mean) | configurations (unique) |",
             "|---|---|---|---|---|---|---|"]
    names = list(dict.fromkeys(r["policy"] for r in res["runs"]))
    for n in names:
        rs = sorted((r for r in res["runs"] if r["policy"] == n), key=lambda r: r["seed"])
        d = [r["distance_best_known"] for r in rs]
        lines.append(f"| {n} | {100 * np.median(d):.0f} % ({', '.join(f'{100 * x:.0f}' for x in d)}) | "
                     f"{100 * np.median([r['improvement_default'] for r in rs]):.0f} % | "
                     f"{np.mean([r['runs'] for r in rs]):.0f} | {np.mean([r['run_wall_s'] for r in rs]):.0f} | "
                     f"{np.mean([r['tune_wall_s'] for r in rs]):.0f} | "
                     f"{np.mean([r['configurations'] for r in rs]):.0f} "
                     f"({np.mean([r['unique_configurations'] for r in rs]):.0f}) |")
    lines.append("")
    lines.append("Chosen configurations (value under noise -> confirmed median without noise):")
    lines.append("")
    for r in res["runs"]:
        acc = "sro" if "binsize" in r["best_params"] else "sbb"
        lines.append(f"- seed {r['seed']}, {r['policy']}: {short(acc, r['best_params'])}: "
                     f"{r['best_value_under_noise']:.3f} -> {r['truth_median']:.3f} s")
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("part", choices=["gain", "grid", "noise", "tables"])
    ap.add_argument("--backend", choices=["real", "model"], default="real")
    ap.add_argument("--tiny", action="store_true", help="small budgets and volumes (development)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--accelerators", default="sro,sbb")
    ap.add_argument("--budget", type=int, default=20)
    ap.add_argument("--n-lhs", type=int, default=6)
    ap.add_argument("--confirm", type=int, default=3)
    ap.add_argument("--sbb-volume-cap", type=int, default=128, help="MiB, LHS tasks of the burst buffer")
    ap.add_argument("--grid-tasks", default="SRO.1,SBB.2")
    ap.add_argument("--grid-passes", type=int, default=2)
    ap.add_argument("--grid-top", type=int, default=3)
    ap.add_argument("--confirm-grid", type=int, default=5)
    ap.add_argument("--prune-factor", type=float, default=3.0)
    ap.add_argument("--noise-task", default="SRO.1")
    ap.add_argument("--noise-budget", type=int, default=15)
    ap.add_argument("--noise-seeds", type=int, default=3)
    ap.add_argument("--confirm-noise", type=int, default=5)
    ap.add_argument("--no-equal-runs-control", dest="equal_runs_control", action="store_false")
    a = ap.parse_args(argv)
    if a.tiny:
        a.budget, a.n_lhs, a.confirm = min(a.budget, 6), min(a.n_lhs, 2), min(a.confirm, 2)
        a.grid_passes, a.confirm_grid = 1, 2
        a.noise_budget, a.noise_seeds, a.confirm_noise = min(a.noise_budget, 5), 1, 2
    render = {"gain": md_gain, "grid": md_grid, "noise": md_noise}
    if a.part == "tables":
        for part, fn in render.items():
            res = load(part, a)
            if res is not None:
                print(f"## {part}\n\n{fn(res)}\n")
        return 0
    a.m0 = machine()
    t0 = time.perf_counter()
    res = {"gain": part_gain, "grid": part_grid, "noise": part_noise}[a.part](a)
    res.update(machine_start=a.m0, machine_end=machine(), wall_s=time.perf_counter() - t0,
               command=f"python bench/io_accelerators.py {' '.join(sys.argv[1:] if argv is None else argv)}",
               tiny=a.tiny)
    path = save(a.part, a, res)
    print(f"\n# {a.part} ({a.backend}{', tiny' if a.tiny else ''}): {res['wall_s']:.0f} s; load "
          f"{a.m0['loadavg']} -> {res['machine_end']['loadavg']}; raw: {path.relative_to(ROOT)}\n")
    print(render[a.part](res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
