"""MPI collectives experiment (issue 7): MLA vs MPICH's default, single-task BO and the grid optimum.

Collective: allreduce (the pip ``mpich`` wheel, MPICH 5.0.2, run through apps/mpi_collectives).
Tasks: ``(size, nprocs)``; the training set is a Latin hypercube of ``--tasks`` message sizes on a
log scale from 8 B to 16 MiB (one size per stratum, rounded to whole doubles) with ``nprocs`` in
{2, 4} (half of the strata each, randomly assigned; seed ``TASK_SEED``). Parameters: the app's
space (algorithm, kval 2..8, tree_type, chunk 1 KiB..4 MiB); the objective is one benchmark run
(the minimum over 20-2000 calls of the slowest rank's time, seconds).

Three sub-commands, each a separate locked invocation on the shared machine:

``grids``  exhaustive sweeps (apps.mpi_collectives.grid: every algorithm x kval {2,3,4} x tree_type
           x chunk {4K,32K,256K,2M} where read; ``--repeats`` passes in shuffled order), then the
           sweep's top ``--confirm-top`` and the default re-measured ``--confirm-repeats`` times
           round robin. Written to apps/mpi_collectives/data/grid_allreduce_<size>_<nprocs>.csv.
``tune``   MLA (gptask.Tuner, one LCM over all training tasks, ask/tell) and single-task BO
           (scikit-optimize ``Optimizer``, GP, gp_hedge, LHS initial design, fitted to log10 of the
           time: the favourable setting for it), both ``--budget`` runs per task with ``--n-initial``
           initial points, *interleaved*: each MLA proposal of a task is followed by one BO run of
           the same task. Then TLA1 (gptask.predict_optimum from the MLA result, no run) for the
           ``--tla1`` tasks. Then the CONFIRMATION: per task the candidates {default (auto), MLA's
           best, BO's best, the grid optimum (where a grid exists), TLA1's prediction (test
           tasks)} are re-measured ``--confirm`` times, round robin (round r measures every task's
           every candidate once, in a fresh random order), in one job sequence. Raw data: JSON.
``trajectory`` re-measures (``--rounds`` times, round robin, one job) every configuration that was
           ever a method's best-so-far, with the default and the grid optimum: the confirmed value
           of each method's pick after r runs (the runs-needed figures below).
``report`` the markdown tables from the JSON (no measurement).

Definitions (all on confirmed values; ``stat`` = median of a configuration's confirmation runs,
the minimum is reported alongside):
  gain over default   1 - best / default
  beatable task       the best confirmed configuration of the task (any candidate) is more than
                      ``BEATABLE`` (10 %) faster than the default
  distance to optimum best / optimum - 1, optimum = the grid optimum's confirmed value (tasks with
                      a grid); on tasks without a grid: the best confirmed candidate ("best known")
  runs needed         (trajectory) the first run r at which the method's pick so far (its lowest
                      single run) has a confirmed median within 5 % / 10 % of the optimum measured in
                      the same job; ">B" if never. The lenient variant in the main table compares the
                      best single-run value so far with the confirmed median of the best candidate.

Commands used for bench/results_mpi_collectives.md (repo root, PYTHONPATH=$PWD, the venv python)::

    flock /work/wt/machine.lock nice -n 5 python bench/mpi_collectives.py grids --which 0-3
    flock /work/wt/machine.lock nice -n 5 python bench/mpi_collectives.py grids --which 4-7
    flock /work/wt/machine.lock nice -n 5 python bench/mpi_collectives.py grids --which 8-11
    flock /work/wt/machine.lock nice -n 5 python bench/mpi_collectives.py tune --budget 20 --n-initial 10 --confirm 5
    flock /work/wt/machine.lock nice -n 5 python bench/mpi_collectives.py trajectory --rounds 5
    flock /work/wt/machine.lock nice -n 5 python bench/mpi_collectives.py tune --budget 20 --n-initial 10 \
        --confirm 5 --seed 1 --json apps/mpi_collectives/data/mla_experiment_seed1.json
    flock /work/wt/machine.lock nice -n 5 python bench/mpi_collectives.py grids \
        --extra bcast:1048576:4,reduce:65536:4,allgather:65536:4,alltoall:65536:4
    python bench/mpi_collectives.py report

Smoke test (seconds, no lock): ``python bench/mpi_collectives.py tune --tasks 2 --budget 4
--n-initial 2 --confirm 1 --tla1 65536:4 --target 0.02 --json /tmp/coll.json --no-grids`` and
``report --json /tmp/coll.json --out /tmp/coll.md``.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import logging
import os
import random
import shlex
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import gptask as gt  # noqa: E402
from apps.mpi_collectives.algorithms import KNOB_NAMES, TREE_TYPES, active_knobs, algorithms_for, canonical  # noqa: E402
from apps.mpi_collectives.grid import confirm, machine_description, read_csv, sweep, write_csv  # noqa: E402
from apps.mpi_collectives.launcher import LaunchConfig, LaunchError  # noqa: E402
from apps.mpi_collectives.objective import evaluate  # noqa: E402
from apps.mpi_collectives.problem import problem as coll_problem  # noqa: E402

COLL = "allreduce"
TASK_SEED = 7
MIN_SIZE, MAX_SIZE = 8, 16 * 1024 * 1024
DATA = ROOT / "apps" / "mpi_collectives" / "data"
JSON_OUT = DATA / "mla_experiment.json"
MD_OUT = ROOT / "bench" / "results_mpi_collectives.md"
BEATABLE = 0.10
# Tasks with a fresh grid: indices into the LHS training set, then the TLA1 test tasks (sizes not
# in the training set; they are also the tasks of the older, load-affected stored grids).
GRID_LHS = (1, 3, 6, 7)
TLA1_TASKS = ((1024, 4), (65536, 4), (1048576, 4), (65536, 2))
GRID_LHS_MORE = (0, 2, 4, 5)  # grid task indices 8-11 (added when the grids proved fast)


def lhs_tasks(n: int, seed: int = TASK_SEED) -> list[dict]:
    """``n`` tasks: one log-uniform size per stratum of [8 B, 16 MiB], nprocs 2 or 4 (half each)."""
    rng = np.random.default_rng(seed)
    lo, hi = np.log2(MIN_SIZE), np.log2(MAX_SIZE)
    u = (np.arange(n) + rng.random(n)) / n
    sizes = np.maximum(8, np.round(2 ** (lo + u * (hi - lo)) / 8) * 8).astype(int)
    procs = rng.permutation([2] * (n // 2) + [4] * (n - n // 2))
    return [{"size": int(s), "nprocs": int(p)} for s, p in zip(sizes, procs)]


def grid_tasks() -> list[dict]:
    train = lhs_tasks(8)
    return ([train[i] for i in GRID_LHS] + [{"size": s, "nprocs": p} for s, p in TLA1_TASKS]
            + [train[i] for i in GRID_LHS_MORE])


def grid_path(task: dict) -> Path:
    return DATA / f"grid_{task.get('coll', COLL)}_{task['size']}_{task['nprocs']}.csv"


def loadavg() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def command_line() -> str:
    return "python " + " ".join(shlex.quote(a) for a in sys.argv)


def key_of(params: dict, coll: str = COLL) -> tuple:
    c = canonical(coll, params)
    return (c["algorithm"], *(c[k] for k in KNOB_NAMES))


def label(params: dict, coll: str = COLL) -> str:
    act = active_knobs(coll, params["algorithm"])
    knobs = ", ".join(f"{k}={params[k]}" for k in KNOB_NAMES if k in act)
    return params["algorithm"] + (f" ({knobs})" if knobs else "")


def clean(params: dict) -> dict:
    """JSON-friendly params (numpy scalars to Python)."""
    out = {}
    for k, v in params.items():
        out[k] = v.item() if hasattr(v, "item") else v
    return out


# ---- grids ---------------------------------------------------------------------------------------
def cmd_grids(a: argparse.Namespace) -> None:
    if a.extra:
        chosen = [{"coll": c, "size": int(s), "nprocs": int(p)}
                  for c, s, p in (t.split(":") for t in a.extra.split(",") if t)]
    else:
        lo, _, hi = a.which.partition("-")
        chosen = grid_tasks()[int(lo): int(hi or lo) + 1]
    cfg = LaunchConfig(target=a.target)
    print(f"# grids, {uptime()}", flush=True)
    for task in chosen:
        t0 = time.time()
        full = {"coll": COLL, **task}
        coll = full["coll"]
        header = machine_description()
        header["command"] = command_line()
        header["stat"] = "time = min of per-iteration maxima over ranks, seconds"
        header["note"] = "issue 7 ground truth, under flock /work/wt/machine.lock (one timed job at a time)"
        rows = sweep(full, cfg, repeats=a.repeats, seed=a.seed)
        header["loadavg_end"] = loadavg()
        header["confirm_command"] = f"grid.confirm(top={a.confirm_top}, repeats={a.confirm_repeats}) in the same job"
        header["confirm_loadavg"] = loadavg()
        extra = confirm(rows, top=a.confirm_top, repeats=a.confirm_repeats, config=cfg)
        header["confirm_loadavg_end"] = loadavg()
        path = grid_path(task)
        write_csv(str(path), [*rows, *extra], header)
        best = grid_optimum(path, coll)
        print(f"{task}: {len(rows)} runs + {len(extra)} confirm in {time.time() - t0:.0f} s; "
              f"optimum {label(best[0], coll)} {best[1]:.3e} s; load {loadavg()}", flush=True)
    print(f"# end, {uptime()}", flush=True)


def grid_optimum(path: Path, coll: str = COLL) -> tuple[dict, float]:
    """(params, median confirm time) of the grid's best confirmed configuration (not auto);
    without confirm rows, the best sweep configuration and its minimum."""
    _, rows = read_csv(str(path))
    ok = [r for r in rows if r.get("status") == "complete"]
    conf = [r for r in ok if r.get("phase") == "confirm" and r["algorithm"] != "auto"]
    pool = conf or [r for r in ok if r["algorithm"] != "auto"]
    times: dict[tuple, list[float]] = {}
    params: dict[tuple, dict] = {}
    for r in pool:
        p = {"algorithm": r["algorithm"], **{k: r[k] for k in KNOB_NAMES}}
        times.setdefault(key_of(p, coll), []).append(float(r["time"]))
        params[key_of(p, coll)] = p
    stat = np.median if conf else np.min
    k = min(times, key=lambda k: stat(times[k]))
    return params[k], float(stat(times[k]))


# ---- tune ----------------------------------------------------------------------------------------
class BO:
    """Single-task GP BO (scikit-optimize) on one task, ask/tell, fitted to log10(time)."""

    def __init__(self, n_initial: int, seed: int, max_kval: int = 8) -> None:
        from skopt import Optimizer
        from skopt.space import Categorical, Integer

        self.names = ["algorithm", "kval", "tree_type", "chunk"]
        dims = [Categorical(list(algorithms_for(COLL))), Integer(2, max_kval), Categorical(list(TREE_TYPES)),
                Integer(1024, 4 * 1024 * 1024, prior="log-uniform")]
        self.opt = Optimizer(dims, base_estimator="GP", n_initial_points=n_initial,
                             initial_point_generator="lhs", random_state=seed)
        self.failed: list[list] = []
        self.worst: float | None = None

    def ask(self) -> tuple[list, dict]:
        x = self.opt.ask()
        return x, clean(dict(zip(self.names, x)))

    def tell(self, x: list, value: float | None) -> None:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="The objective has been evaluated at this point before")
            if value is None:  # a failed run counts as the worst value seen (told once one exists)
                if self.worst is None:
                    self.failed.append(x)
                else:
                    self.opt.tell(x, self.worst)
                return
            y = float(np.log10(value))
            self.worst = y if self.worst is None else max(self.worst, y)
            self.opt.tell(x, y)
            for xf in self.failed:
                self.opt.tell(xf, self.worst)
            self.failed = []


def measure(task: dict, params: dict, cfg: LaunchConfig) -> tuple[float | None, str]:
    try:
        return float(evaluate({"coll": COLL, **task}, params, cfg)["time"]), ""
    except LaunchError as exc:
        return None, exc.reason


def cmd_tune(a: argparse.Namespace) -> None:
    cfg = LaunchConfig(target=a.target)
    train = lhs_tasks(8)[: a.tasks] if a.tasks <= 8 else lhs_tasks(a.tasks)
    tests = [{"size": int(s), "nprocs": int(p)} for s, p in (t.split(":") for t in a.tla1.split(",") if t)]
    prob = coll_problem(colls=[COLL], min_size=MIN_SIZE, max_size=MAX_SIZE, min_procs=2, max_procs=4, config=cfg)
    out: dict[str, Any] = {"command": command_line(), "start": _dt.datetime.now(_dt.timezone.utc).isoformat(),
                           "uptime_start": uptime(), "machine": machine_description(), "budget": a.budget,
                           "n_initial": a.n_initial, "seed": a.seed, "confirm_repeats": a.confirm,
                           "target": a.target, "train": train, "tests": tests, "runs": []}
    print(f"# tune: {len(train)} tasks x {a.budget} runs, {uptime()}", flush=True)
    tuner = gt.Tuner(prob, tasks=train, budget=a.budget, n_initial=a.n_initial, seed=a.seed)
    bos = [BO(a.n_initial, a.seed + 100 + i) for i in range(len(train))]
    count = {"MLA": [0] * len(train), "BO": [0] * len(train)}
    t_model = {"MLA": 0.0, "BO": 0.0}
    t_start = time.time()

    def record(method: str, i: int, params: dict, value: float | None, reason: str) -> None:
        count[method][i] += 1
        out["runs"].append({"method": method, "task": i, "run": count[method][i], "params": params, "time": value,
                            "reason": reason, "load1": round(os.getloadavg()[0], 2)})

    def bo_step(i: int) -> None:
        t0 = time.time()
        x, params = bos[i].ask()
        t_model["BO"] += time.time() - t0
        value, reason = measure(train[i], params, cfg)
        t0 = time.time()
        bos[i].tell(x, value)
        t_model["BO"] += time.time() - t0
        record("BO", i, params, value, reason)

    while not tuner.done:
        t0 = time.time()
        props = tuner.ask()
        t_model["MLA"] += time.time() - t0
        if not props:
            break
        for p in props:  # each MLA run is followed by one BO run of the same task
            value, reason = measure(train[p.task_index], p.params, cfg)
            tuner.tell(p, value, reason)
            record("MLA", p.task_index, clean(p.params), value, reason)
            if count["BO"][p.task_index] < a.budget:
                bo_step(p.task_index)
        done = sum(count["MLA"])
        print(f"  MLA {done}/{len(train) * a.budget} runs, {time.time() - t_start:.0f} s, load {loadavg()}",
              flush=True)
    for i in range(len(train)):
        while count["BO"][i] < a.budget:
            bo_step(i)
    out["model_seconds"] = t_model
    out["tuning_seconds"] = time.time() - t_start
    res = tuner.result()

    # TLA1: predicted optimum for the test tasks (no run)
    out["tla1"] = []
    for task in tests:
        pred = gt.predict_optimum(res, task)
        out["tla1"].append({"task": task, "params": clean(pred.params), "predicted_time": pred.value,
                            "predicted_std": pred.value_std})
        print(f"  TLA1 {task}: {label(pred.params)} (predicted {pred.value:.3e} s)", flush=True)

    # candidates per task
    cands: list[tuple[dict, dict[str, dict]]] = []  # (task, {name: params})
    for i, task in enumerate(train):
        c = {"default": {"algorithm": "auto"}}
        for m in ("MLA", "BO"):
            ok = [r for r in out["runs"] if r["method"] == m and r["task"] == i and r["time"] is not None]
            if ok:
                c[m] = min(ok, key=lambda r: r["time"])["params"]
        if not a.no_grids and grid_path(task).exists():
            c["grid"] = grid_optimum(grid_path(task))[0]
        cands.append((task, c))
    for t in out["tla1"]:
        c = {"default": {"algorithm": "auto"}, "TLA1": t["params"]}
        if not a.no_grids and grid_path(t["task"]).exists():
            c["grid"] = grid_optimum(grid_path(t["task"]))[0]
        cands.append((t["task"], c))

    # confirmation: round robin, each distinct configuration of a task once per round
    rng = random.Random(a.seed)
    conf: list[dict] = []
    print(f"# confirmation: {a.confirm} rounds, {uptime()}", flush=True)
    t0 = time.time()
    for r in range(a.confirm):
        for ti, (task, c) in enumerate(cands):
            distinct: dict[tuple, dict] = {}
            for p in c.values():
                distinct.setdefault(key_of(p), p)
            keys = list(distinct)
            rng.shuffle(keys)
            for k in keys:
                value, reason = measure(task, distinct[k], cfg)
                conf.append({"task": task, "key": list(k), "params": distinct[k], "round": r, "time": value,
                             "reason": reason, "load1": round(os.getloadavg()[0], 2)})
        print(f"  round {r + 1}/{a.confirm} done, {time.time() - t0:.0f} s, load {loadavg()}", flush=True)
    out["candidates"] = [{"task": t, "configs": c} for t, c in cands]
    out["confirm"] = conf
    out["confirm_seconds"] = time.time() - t0
    out["uptime_end"] = uptime()
    out["end"] = _dt.datetime.now(_dt.timezone.utc).isoformat()
    Path(a.json).write_text(json.dumps(out, indent=1, default=str))
    print(f"# wrote {a.json}; {out['uptime_end']}", flush=True)


# ---- trajectory confirmation --------------------------------------------------------------------
def best_so_far_configs(out: dict, method: str, i: int) -> list[dict | None]:
    """Per run r = 1..B of ``method`` on training task i: the configuration with the lowest single-run
    time among runs 1..r (None before the first complete run)."""
    best, cur, seq = float("inf"), None, []
    for r in sorted((r for r in out["runs"] if r["method"] == method and r["task"] == i), key=lambda r: r["run"]):
        if r["time"] is not None and r["time"] < best:
            best, cur = r["time"], r["params"]
        seq.append(cur)
    return seq


def cmd_trajectory(a: argparse.Namespace) -> None:
    """Re-measure every configuration that was ever a method's best-so-far, with the default and the
    grid optimum, ``--rounds`` times round robin: the confirmed value of each method's pick after r runs."""
    cfg = LaunchConfig(target=a.target)
    out = json.loads(Path(a.json).read_text())
    work: list[tuple[dict, dict[tuple, dict]]] = []
    for i, task in enumerate(out["train"]):
        distinct: dict[tuple, dict] = {}
        for p in out["candidates"][i]["configs"].values():
            distinct.setdefault(key_of(p), p)
        for m in ("MLA", "BO"):
            for p in best_so_far_configs(out, m, i):
                if p is not None:
                    distinct.setdefault(key_of(p), p)
        work.append((task, distinct))
    n = sum(len(d) for _, d in work)
    tr: dict[str, Any] = {"command": command_line(), "uptime_start": uptime(), "rounds": a.rounds,
                          "start": _dt.datetime.now(_dt.timezone.utc).isoformat(), "runs": []}
    print(f"# trajectory confirmation: {n} configurations x {a.rounds} rounds, {tr['uptime_start']}", flush=True)
    rng = random.Random(a.seed)
    t0 = time.time()
    for r in range(a.rounds):
        for task, distinct in work:
            keys = list(distinct)
            rng.shuffle(keys)
            for k in keys:
                value, reason = measure(task, distinct[k], cfg)
                tr["runs"].append({"task": task, "key": list(k), "params": distinct[k], "round": r, "time": value,
                                   "reason": reason, "load1": round(os.getloadavg()[0], 2)})
        print(f"  round {r + 1}/{a.rounds} done, {time.time() - t0:.0f} s, load {loadavg()}", flush=True)
    tr["seconds"] = time.time() - t0
    tr["uptime_end"] = uptime()
    tr["end"] = _dt.datetime.now(_dt.timezone.utc).isoformat()
    out["trajectory"] = tr
    Path(a.json).write_text(json.dumps(out, indent=1, default=str))
    print(f"# wrote {a.json}; {tr['uptime_end']}", flush=True)


def trajectory_analysis(out: dict, checkpoints: tuple[int, ...] = (5, 10, 15, 20)) -> dict:
    """Confirmed (trajectory job) median of each method's pick after r runs, relative to the optimum
    (the better of the grid optimum and auto, measured in the same job)."""
    tr = out["trajectory"]
    B = out["budget"]

    def med(task: dict, p: dict) -> float:
        k = list(key_of(p))
        v = [c["time"] for c in tr["runs"] if c["task"] == task and c["key"] == k and c["time"] is not None]
        return float(np.median(v)) if v else float("nan")

    rows = []
    for i, task in enumerate(out["train"]):
        c = out["candidates"][i]["configs"]
        opt = min(med(task, c[n]) for n in ("grid", "default") if n in c)
        row: dict[str, Any] = {"task": task, "opt": opt}
        for m in ("MLA", "BO"):
            seq = best_so_far_configs(out, m, i)
            dist = [float("nan") if p is None else med(task, p) / opt - 1 for p in seq]
            row[f"dist_{m}"] = dist
            for eps in (0.05, 0.10):
                row[f"need{int(eps * 100)}_{m}"] = next((r + 1 for r, d in enumerate(dist) if d <= eps), None)
        rows.append(row)
    return {"rows": rows, "checkpoints": [c for c in checkpoints if c <= B], "budget": B}


def trajectory_text(out: dict, ta: dict) -> str:
    tr, B = out["trajectory"], ta["budget"]
    L = ["### Runs needed, on confirmed values (trajectory confirmation)\n",
         f"Job: `{tr['command']}`, {tr['start'][:16]} UTC, {tr['seconds']:.0f} s; uptime at start `{tr['uptime_start']}`, "
         f"at end `{tr['uptime_end']}`. Every configuration that was ever a method's best-so-far (lowest single run "
         f"so far), plus auto and the grid optimum, re-measured {tr['rounds']} times round robin in one job; a "
         f"method's pick after r runs is scored by the median of those runs relative to the task's optimum (the "
         f"better of the grid optimum and auto, medians from the same job). Runs needed = first r at which the pick "
         f"is within 5 % / 10 % of the optimum.\n",
         "| task (size B, ranks) | MLA: runs to 5 % / 10 % | BO: runs to 5 % / 10 % | "
         + " | ".join(f"dist after {c} runs, MLA / BO" for c in ta["checkpoints"]) + " |",
         "|---|---|---|" + "---|" * len(ta["checkpoints"])]
    for r in ta["rows"]:
        t = r["task"]
        cells = [f"{pct(r['dist_MLA'][c - 1])} / {pct(r['dist_BO'][c - 1])}" for c in ta["checkpoints"]]
        L.append(f"| {t['size']}, {t['nprocs']} | {_runs(r['need5_MLA'], B)} / {_runs(r['need10_MLA'], B)} | "
                 f"{_runs(r['need5_BO'], B)} / {_runs(r['need10_BO'], B)} | " + " | ".join(cells) + " |")
    cells = [f"{pct(_mean([r['dist_MLA'][c - 1] for r in ta['rows']]))} / "
             f"{pct(_mean([r['dist_BO'][c - 1] for r in ta['rows']]))}" for c in ta["checkpoints"]]
    need = {f"{m}{e}": [r[f"need{e}_{m}"] for r in ta["rows"]] for m in ("MLA", "BO") for e in (5, 10)}
    L.append(f"| **median / mean over tasks** | {_median_runs(need['MLA5'], B)} / {_median_runs(need['MLA10'], B)} | "
             f"{_median_runs(need['BO5'], B)} / {_median_runs(need['BO10'], B)} | " + " | ".join(cells) + " |")
    L.append("")
    return "\n".join(L)


# ---- report --------------------------------------------------------------------------------------
def confirmed(out: dict, task: dict, params: dict) -> tuple[float, float, int]:
    """(median, min, n) of the complete confirmation runs of ``params`` on ``task`` (nan if none)."""
    k = list(key_of(params))
    v = [c["time"] for c in out["confirm"] if c["task"] == task and c["key"] == k and c["time"] is not None]
    if not v:
        return float("nan"), float("nan"), 0
    return float(np.median(v)), float(np.min(v)), len(v)


def runs_needed(out: dict, method: str, i: int, ref: float, eps: float) -> int | None:
    best = float("inf")
    for r in sorted((r for r in out["runs"] if r["method"] == method and r["task"] == i), key=lambda r: r["run"]):
        if r["time"] is not None:
            best = min(best, r["time"])
        if best <= (1 + eps) * ref:
            return r["run"]
    return None


def fmt_t(x: float) -> str:
    return "-" if x != x else f"{x:.3e}"


def pct(x: float) -> str:
    return "-" if x != x else f"{100 * x:+.0f} %"


def analyse(out: dict) -> dict:
    """Per-task confirmed figures for the training tasks and the TLA1 test tasks."""
    B = out["budget"]
    rows = []
    for i, task in enumerate(out["train"]):
        c = out["candidates"][i]["configs"]
        stats = {name: confirmed(out, task, p) for name, p in c.items()}
        med = {n: s[0] for n, s in stats.items()}
        best_name = min((n for n in med if med[n] == med[n]), key=lambda n: med[n])
        # the grid includes auto, so the grid optimum is the better of its best forced configuration and auto
        opt_pool = ("grid", "default") if "grid" in med and med["grid"] == med["grid"] else (best_name,)
        opt_name = min(opt_pool, key=lambda n: med[n])
        opt_min = min(stats[n][1] for n in opt_pool)
        ref = med[best_name]
        row = {"task": task, "configs": c, "stats": stats, "best_known": best_name, "optimum_from": opt_name,
               "has_grid": len(opt_pool) == 2,
               "beatable": med[best_name] < (1 - BEATABLE) * med["default"], "mla_tuned_best": None}
        for m in ("MLA", "BO"):
            if m not in med:
                continue
            row[f"gain_{m}"] = 1 - med[m] / med["default"]
            row[f"gain_min_{m}"] = 1 - stats[m][1] / stats["default"][1]
            row[f"dist_{m}"] = med[m] / med[opt_name] - 1
            row[f"dist_min_{m}"] = stats[m][1] / opt_min - 1
            for eps in (0.05, 0.10):
                row[f"runs{int(eps * 100)}_{m}"] = runs_needed(out, m, i, ref, eps)
        row["gain_opt"] = 1 - med[opt_name] / med["default"]
        rows.append(row)
    tests = []
    for j, t in enumerate(out["tla1"]):
        c = out["candidates"][len(out["train"]) + j]["configs"]
        stats = {name: confirmed(out, t["task"], p) for name, p in c.items()}
        row = {"task": t["task"], "configs": c, "stats": stats}
        if "grid" in stats:
            opt = min(("grid", "default"), key=lambda n: stats[n][0])
            row["optimum_from"] = opt
            row["same_alg"] = c["TLA1"]["algorithm"] == (c[opt]["algorithm"])
            row["dist"] = stats["TLA1"][0] / stats[opt][0] - 1
            row["dist_min"] = stats["TLA1"][1] / min(stats["grid"][1], stats["default"][1]) - 1
        row["gain"] = 1 - stats["TLA1"][0] / stats["default"][0]
        tests.append(row)
    return {"rows": rows, "tests": tests, "budget": B}


def _mean(xs: list) -> float:
    xs = [x for x in xs if x is not None and x == x]
    return float(np.mean(xs)) if xs else float("nan")


def _runs(x: int | None, B: int) -> str:
    return f">{B}" if x is None else str(x)


def _median_runs(xs: list, B: int) -> str:
    v = sorted(float("inf") if x is None else x for x in xs)
    if not v:
        return "-"
    m = v[(len(v) - 1) // 2] if len(v) % 2 else None
    if m is None:
        lo, hi = v[len(v) // 2 - 1], v[len(v) // 2]
        m = (lo + hi) / 2
    return f">{B}" if m == float("inf") else f"{m:g}"


def _opt_note(r: dict) -> str:
    if r["has_grid"]:
        return " (grid optimum: auto)" if r["optimum_from"] == "default" else ""
    return f" (best known: {r['optimum_from']})"


def report_text(out: dict, an: dict, grids: list[tuple[dict, dict, list]]) -> str:
    B = an["budget"]
    L = []
    L.append("## MLA vs default, single-task BO and the grid optimum (issue 7)\n")
    L.append(f"Tuning job: `{out['command']}`, {out['start'][:16]} to {out['end'][:16]} UTC, "
             f"{out['tuning_seconds']:.0f} s of tuning + {out['confirm_seconds']:.0f} s of confirmation. "
             f"Uptime at start: `{out['uptime_start']}`; at end: `{out['uptime_end']}`.\n")
    L.append(f"{len(out['train'])} allreduce tasks (LHS: message size log-uniform 8 B-16 MiB, nprocs 2 or 4), "
             f"{B} runs per task for each method ({out['n_initial']} initial), MLA and BO interleaved run by run. "
             f"Confirmation: every candidate re-measured {out['confirm_repeats']} times round robin; the table "
             f"uses the **median** of those runs (minimum in brackets where given). Times in seconds.\n")
    L.append("| task (size B, ranks) | default | MLA best (config) | BO best (config) | grid optimum (config) | "
             "gain MLA | gain BO | gain of optimum | dist MLA | dist BO | runs to 5 % / 10 %: MLA | BO |")
    L.append("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in an["rows"]:
        s, c = r["stats"], r["configs"]
        cell = lambda n: f"{fmt_t(s[n][0])} ({label(c[n])})" if n in s else "-"  # noqa: E731
        t = r["task"]
        L.append(f"| {t['size']}, {t['nprocs']}{' *' if r['beatable'] else ''} | {fmt_t(s['default'][0])} | "
                 f"{cell('MLA')} | {cell('BO')} | {cell('grid')} | {pct(r.get('gain_MLA', float('nan')))} | "
                 f"{pct(r.get('gain_BO', float('nan')))} | {pct(r['gain_opt'])}"
                 f"{_opt_note(r)} | "
                 f"{pct(r.get('dist_MLA', float('nan')))} | {pct(r.get('dist_BO', float('nan')))} | "
                 f"{_runs(r.get('runs5_MLA'), B)} / {_runs(r.get('runs10_MLA'), B)} | "
                 f"{_runs(r.get('runs5_BO'), B)} / {_runs(r.get('runs10_BO'), B)} |")
    L.append("\n`*`: beatable task (the best confirmed configuration is more than 10 % faster than the default). "
             "dist = distance to the optimum (confirmed median of the grid optimum, i.e. the better of the grid's "
             "best forced configuration and auto; on tasks without a grid the best confirmed candidate). Negative distance: the tuner found a configuration better than the grid's "
             "optimum (the tuners search kval 2..8 and any chunk, the grid kval 2-4 and 4 chunk sizes).\n")
    beat = [r for r in an["rows"] if r["beatable"]]
    grid_rows = [r for r in an["rows"] if r["has_grid"]]
    L.append("Summary (median of confirmation runs; in brackets: on the minimum of the runs):\n")
    L.append("| figure | MLA | single-task BO | target |")
    L.append("|---|---|---|---|")
    for name, rows_, key, target in (
            (f"mean gain over default, beatable tasks ({len(beat)})", beat, "gain", "about 48 %"),
            (f"mean gain over default, all tasks ({len(an['rows'])})", an["rows"], "gain", ""),
            (f"mean distance to the grid optimum ({len(grid_rows)} tasks with a grid)", grid_rows, "dist",
             "within 6 %"),
            (f"mean distance to the optimum / best known, all tasks ({len(an['rows'])})", an["rows"], "dist", "")):
        cells = []
        for m in ("MLA", "BO"):
            cells.append(f"{pct(_mean([r.get(f'{key}_{m}') for r in rows_]))} "
                         f"({pct(_mean([r.get(f'{key}_min_{m}') for r in rows_]))})")
        L.append(f"| {name} | {cells[0]} | {cells[1]} | {target} |")
    for eps in (5, 10):
        cells = []
        for m in ("MLA", "BO"):
            xs = [r.get(f"runs{eps}_{m}") for r in an["rows"]]
            cells.append(f"median {_median_runs(xs, B)}, reached on {sum(x is not None for x in xs)}/{len(xs)}")
        L.append(f"| runs needed to come within {eps} % of the reference, single-run values (lenient; the "
                 f"trajectory table below scores confirmed picks) | {cells[0]} | {cells[1]} | fewer than BO |")
    L.append(f"| mean gain of the optimum over default, beatable tasks | "
             f"{pct(_mean([r['gain_opt'] for r in beat]))} | | |")
    L.append("")
    L.append("### TLA1: predicted configuration for unseen message sizes (no run)\n")
    L.append("| task (size B, ranks) | default | TLA1 prediction (config) | grid optimum (config) | same algorithm | "
             "distance to grid optimum, median (min) | gain over default |")
    L.append("|---|---|---|---|---|---|---|")
    for r in an["tests"]:
        s, c, t = r["stats"], r["configs"], r["task"]
        g = "-"
        if "grid" in s:
            o = r["optimum_from"]
            g = f"{fmt_t(s[o][0])} ({label(c[o]) if o == 'grid' else 'auto'})"
        L.append(f"| {t['size']}, {t['nprocs']} | {fmt_t(s['default'][0])} | {fmt_t(s['TLA1'][0])} "
                 f"({label(c['TLA1'])}) | {g} | {'yes' if r.get('same_alg') else 'no' if 'same_alg' in r else '-'} | "
                 f"{pct(r.get('dist', float('nan')))} ({pct(r.get('dist_min', float('nan')))}) | {pct(r['gain'])} |")
    L.append("")
    if grids:
        L.append("### Ground-truth grids (fresh)\n")
        L.append("| task (coll size B, ranks) | configurations (failed) | optimum (config), confirmed median | "
                 "default, confirmed median | gain | sweep load start / end | date |")
        L.append("|---|---|---|---|---|---|---|")
        for task, header, rows in grids:
            coll = task["coll"]
            sweep_rows = [x for x in rows if x.get("phase") in ("", "sweep")]
            n_fail = len({key_of(x, coll) for x in sweep_rows if x.get("status") != "complete"})
            n_cfg = len({key_of(x, coll) for x in sweep_rows})
            p, v = grid_optimum(grid_path(task), coll)
            auto = [x["time"] for x in rows if x.get("phase") == "confirm" and x["algorithm"] == "auto"
                    and x.get("status") == "complete"]
            d = float(np.median(auto)) if auto else float("nan")
            L.append(f"| {coll} {task['size']}, {task['nprocs']} | {n_cfg} ({n_fail}) | {fmt_t(v)} "
                     f"({label(p, coll)}) | {fmt_t(d)} | {pct(1 - v / d)} | {header.get('loadavg', '?').split()[0]} / "
                     f"{header.get('loadavg_end', '?').split()[0]} | {header.get('date_utc', '?')} |")
        L.append("")
    return "\n".join(L)


def cmd_report(a: argparse.Namespace) -> None:
    out = json.loads(Path(a.json).read_text())
    an = analyse(out)
    grids = []
    for p in sorted(DATA.glob("grid_*.csv")):
        header, rows = read_csv(str(p))
        if "issue 7" in header.get("note", "") and rows:
            task = {k: rows[0][k] for k in ("coll", "size", "nprocs")}
            grids.append((task, header, rows))
    grids.sort(key=lambda g: (g[0]["coll"] != COLL, g[0]["coll"], g[0]["nprocs"], g[0]["size"]))
    text = report_text(out, an, grids)
    if "trajectory" in out:
        text += "\n" + trajectory_text(out, trajectory_analysis(out))
    if a.out:
        Path(a.out).write_text(text + "\n")
    print(text)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("grids", help="fresh exhaustive grids of the ground-truth tasks")
    g.add_argument("--which", default="0-7", help="index range into the grid task list, e.g. 0-3")
    g.add_argument("--extra", default="", help="instead: comma list of coll:size:nprocs tasks")
    g.add_argument("--repeats", type=int, default=1)
    g.add_argument("--confirm-top", type=int, default=3)
    g.add_argument("--confirm-repeats", type=int, default=3)
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--target", type=float, default=0.25)
    g.set_defaults(func=cmd_grids)
    t = sub.add_parser("tune", help="MLA and BO on the LHS tasks, TLA1, confirmation")
    t.add_argument("--tasks", type=int, default=8)
    t.add_argument("--budget", type=int, default=20)
    t.add_argument("--n-initial", type=int, default=10)
    t.add_argument("--confirm", type=int, default=5)
    t.add_argument("--tla1", default=",".join(f"{s}:{q}" for s, q in TLA1_TASKS),
                   help="comma list of size:nprocs test tasks")
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--target", type=float, default=0.25, help="seconds of timed calls per run")
    t.add_argument("--no-grids", action="store_true", help="ignore stored grids (smoke tests)")
    t.add_argument("--json", default=str(JSON_OUT))
    t.set_defaults(func=cmd_tune)
    q = sub.add_parser("trajectory", help="confirm every best-so-far configuration of both methods")
    q.add_argument("--rounds", type=int, default=3)
    q.add_argument("--seed", type=int, default=1)
    q.add_argument("--target", type=float, default=0.25)
    q.add_argument("--json", default=str(JSON_OUT))
    q.set_defaults(func=cmd_trajectory)
    r = sub.add_parser("report", help="markdown tables from the JSON")
    r.add_argument("--json", default=str(JSON_OUT))
    r.add_argument("--out", default="")
    r.set_defaults(func=cmd_report)
    a = p.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    a.func(a)


if __name__ == "__main__":
    main()
