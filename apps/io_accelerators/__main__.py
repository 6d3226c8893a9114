"""Command line: ``python -m apps.io_accelerators {evaluate,tune,grid} ...`` from the repo root.

evaluate  one configuration on one task; prints one JSON line with "time" (seconds), the samples,
          the default configuration's time and the gain over it (unless --no-reference)
tune      gt.tune over named or LHS-sampled tasks; prints one JSON line per task with the
          recommended configuration (gptask.results.recommend: re-launched with the default, round robin)
          and its gain over the default from those runs
grid      exhaustive sweep of a small discretised parameter grid for one task; writes a CSV (with a
          machine description and the load average in its header comments)
summary   default, best, gain over default and the spread of repeated samples of stored grids
compare   Spearman rank agreement of a model grid with a measured grid, regret of the model's best

Examples::

    python -m apps.io_accelerators evaluate --task name=SRO.1 --params cluster_threshold=8
    python -m apps.io_accelerators evaluate --backend model --task name=SBB.1 --params workers=4
    python -m apps.io_accelerators grid --task name=SRO.1 --repeats 2 --out apps/io_accelerators/data/grid_SRO.1.csv
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
from pathlib import Path
from typing import Any

from gptask.cli.arguments import max_failures_arg, parse_assignments
from gptask.evaluation.failed_runs import TuningAborted
from gptask.evaluation.noise import Pruner, StaticResampling

from .problem import DEFAULTS, IOObjective, accelerator_of, named_task, problem
from .workload import MIB, NAMED_TASKS

KIB = 1024

#: the small grids of the ``grid`` command (sizes in bytes)
GRIDS: dict[str, dict[str, list]] = {
    "sro": {
        "binsize": [256 * KIB, 1 * MIB, 4 * MIB],
        "cluster_threshold": [1, 2, 8, 32],
        "prefetch_size": [1 * MIB, 4 * MIB, 16 * MIB],
        "sequence_length": [100, 1000],
    },
    "sbb": {
        "workers": [1, 4, 10],
        "destagers": [1, 4, 10],
        "buffer_mb": [32, 128, 256],
        "threshold": [0.2, 0.5, 0.8],
    },
}


def parse_kv(text: str | None, what: str) -> dict[str, Any]:
    """``"a=1,b=2.5,name=SRO.1"`` -> dict (gptask's parser: numbers converted, nothing evaluated)."""
    try:
        return parse_assignments(text or "", f"--{what}")
    except ValueError as exc:
        raise SystemExit(str(exc)) from None


def _task_and_acc(task: dict[str, Any], accelerator: str | None) -> tuple[dict[str, Any], str]:
    name = task.get("name")
    if name is not None:
        acc = accelerator_of(str(name))
        if accelerator is not None and accelerator != acc:
            raise SystemExit(f"task {name} belongs to accelerator {acc}, not {accelerator}")
        return task, acc
    if accelerator is None:
        raise SystemExit("give --accelerator sro|sbb for a task without a name")
    return task, accelerator


def machine() -> dict[str, Any]:
    load = os.getloadavg()
    return {"host": platform.node(), "cpus": os.cpu_count(), "platform": platform.platform(),
            "python": platform.python_version(), "loadavg": [round(x, 2) for x in load],
            "utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


def _measure(obj: IOObjective, task: dict, params: dict, repeats: int, aggregate: str,
             deadline: float | None = None) -> tuple[float, list, dict]:
    """``repeats`` runs aggregated; with a ``deadline`` (s) a slower run is stopped and the result is
    censored (``details["censored"]``; its value is then the deadline, a lower bound)."""
    pruner = Pruner(fixed=deadline) if deadline is not None else None
    res = StaticResampling(repeats, aggregate).evaluate(
        lambda deadline=None: obj(task, params, deadline=deadline), pruner=pruner)
    details = dict(obj.last) if not res.censored else {}
    details["censored"] = int(res.censored)
    return res.value, list(res.samples), details


def cmd_evaluate(a: argparse.Namespace) -> int:
    task, acc = _task_and_acc(parse_kv(a.task, "task"), a.accelerator)
    params = parse_kv(a.params, "params")
    obj = IOObjective(acc, a.backend, a.workdir, seed=a.seed, direct=a.direct)
    full = obj.params(params)
    value, samples, details = _measure(obj, task, full, a.repeats, a.aggregate)
    out: dict[str, Any] = {"time": value, "samples": samples, "accelerator": acc, "backend": a.backend,
                           "task": task, "params": full, "details": details}
    if not a.no_reference:
        dflt, dsamples, _ = _measure(obj, task, dict(DEFAULTS[acc]), a.repeats, a.aggregate)
        out.update(default_time=dflt, default_samples=dsamples, gain_over_default=(dflt - value) / dflt)
    if a.backend == "model":
        out["note"] = "MODEL prediction, not a measurement"
    out["machine"] = machine()
    print(json.dumps(out, default=float))
    return 0


def cmd_tune(a: argparse.Namespace) -> int:
    import gptask as gt
    acc = a.accelerator
    if a.tasks:
        names = [s.strip() for s in a.tasks.split(",") if s.strip()]
        accs = {accelerator_of(n) for n in names}
        if len(accs) != 1:
            raise SystemExit(f"--tasks must all belong to one accelerator, got {names}")
        acc = accs.pop()
        tasks: Any = [named_task(n) for n in names]
    else:
        if acc is None:
            raise SystemExit("give --tasks NAMES or --accelerator with --n-tasks")
        tasks = int(a.n_tasks)
    prob = problem(acc, a.backend, a.workdir, seed=a.seed)
    result = gt.tune(prob, tasks=tasks, budget=a.budget, n_initial=a.n_initial, seed=a.seed,
                     history=a.history, repeats=a.repeats, aggregate=a.aggregate, progress=not a.no_progress,
                     max_failures=a.max_failures)
    for i, task in enumerate(result.tasks):
        best, value = result.best(i)
        # one rule (gptask.results.recommend): the best configurations by the model, the fastest launch's and the
        # default re-launched round robin, --confirm times each; the gain compares those runs like for like
        rec = result.recommend(i, confirm=a.confirm, progress=not a.no_progress)
        print(json.dumps({"task_index": i, "task": task, "best_params": best, "best_value": value,
                          "recommended": rec.params, "is_default": rec.is_default, "basis": rec.basis,
                          "recommended_time": rec.value, "runs": len(rec.pick.confirmations),
                          "default_time": rec.default_value, "gain_over_default": rec.gain,
                          "gain_basis": rec.gain_basis, "backend": a.backend, "machine": machine()},
                         default=float), flush=True)
    return 0


def cmd_grid(a: argparse.Namespace) -> int:
    task, acc = _task_and_acc(parse_kv(a.task, "task"), a.accelerator)
    obj = IOObjective(acc, a.backend, a.workdir, seed=a.seed, direct=a.direct)
    grid = GRIDS[acc]
    names = list(grid)
    combos = [dict(zip(names, vals)) for vals in itertools.product(*(grid[n] for n in names))]
    prob = problem(acc, a.backend, a.workdir, seed=a.seed)
    tpoint = {k: v for k, v in task.items() if k != "name"}
    full_task = {**(named_task(task["name"]) if "name" in task else {}), **tpoint}
    combos = [c for c in combos if prob.is_feasible(full_task, obj.params(c))]
    out = Path(a.out) if a.out else Path(__file__).parent / "data" / f"grid_{task.get('name', acc)}_{a.backend}.csv"
    out.parent.mkdir(parents=True, exist_ok=True)
    m0 = machine()
    rows = []
    t0 = time.perf_counter()
    for _ in range(a.warmup):  # discarded: creates the data file and warms what we cannot drop (host caches)
        obj(task, obj.params(dict(DEFAULTS[acc])))
    # the default first, then the grid; every point gets `repeats` samples; with --prune-factor F a
    # run slower than F x the default's time is stopped and its row marked censored (time = that bound)
    deadline = None
    for label, params in [("default", dict(DEFAULTS[acc]))] + [("grid", c) for c in combos]:
        full = obj.params(params)
        value, samples, details = _measure(obj, task, full, a.repeats, a.aggregate, deadline)
        if label == "default" and a.prune_factor:
            deadline = a.prune_factor * max(samples)
        row = {"kind": label, **full, "time": value, "samples": " ".join(f"{s:.5f}" for s in samples),
               "censored": details["censored"], "loadavg1": round(os.getloadavg()[0], 2)}
        for k in ("hit_rate", "prefetch_bytes", "drain_time", "stall_seconds", "read_hit_rate"):
            if k in details:
                row[k] = details[k]
        rows.append(row)
        print(json.dumps(row, default=float), file=sys.stderr if a.quiet else sys.stdout)
    m1 = machine()
    keys: list[str] = []
    for r in rows:
        keys += [k for k in r if k not in keys]
    with open(out, "w", newline="") as fh:
        fh.write(f"# io_accelerators grid: accelerator={acc} backend={a.backend} task={json.dumps(task)}\n")
        fh.write(f"# full task: {json.dumps(full_task)}\n")
        fh.write(f"# command: python -m apps.io_accelerators {' '.join(sys.argv[1:])}\n")
        fh.write(f"# machine at start: {json.dumps(m0)}\n# machine at end: {json.dumps(m1)}\n")
        fh.write(f"# prune_factor={a.prune_factor} (censored=1 rows: stopped at that factor x the default's "
                 f"slowest sample; their time is a lower bound)\n")
        fh.write(f"# repeats={a.repeats} aggregate={a.aggregate} wall={time.perf_counter() - t0:.1f}s; "
                 "cold page cache per run (fsync + POSIX_FADV_DONTNEED); the host may still cache the "
                 "virtual disk, and other jobs share the machine: see loadavg1 per row\n")
        if a.backend == "model":
            fh.write("# MODEL predictions, not measurements\n")
        w = csv.DictWriter(fh, fieldnames=keys)
        w.writeheader()
        w.writerows(rows)
    best = min((r for r in rows if r["kind"] == "grid" and not r["censored"]), key=lambda r: r["time"])
    dflt = rows[0]["time"]
    print(json.dumps({"out": str(out), "n_points": len(rows) - 1, "default_time": dflt, "best_time": best["time"],
                      "gain_over_default": (dflt - best["time"]) / dflt,
                      "best_params": {k: best[k] for k in names}}, default=float))
    return 0


_NOT_PARAMS = {"kind", "time", "samples", "censored", "loadavg1", "hit_rate", "prefetch_bytes", "drain_time",
               "stall_seconds", "read_hit_rate"}


def summarize(path: str | os.PathLike) -> dict[str, Any]:
    """Default, best and gain of a stored grid CSV, with the spread of its repeated samples."""
    with open(path) as fh:
        rows = list(csv.DictReader(line for line in fh if not line.startswith("#")))
    if not rows:
        raise ValueError(f"{path}: no rows")
    censored = [r for r in rows if r.get("censored", "0") == "1"]
    grid = [r for r in rows if r["kind"] == "grid" and r.get("censored", "0") != "1"]
    dflt = next(r for r in rows if r["kind"] == "default")
    best = min(grid, key=lambda r: float(r["time"]))
    spreads = []
    for r in rows:
        s = [float(x) for x in r["samples"].split()]
        if len(s) > 1:
            spreads.append((max(s) - min(s)) / min(s))
    loads = [float(r["loadavg1"]) for r in rows]
    params = [k for k in rows[0] if k not in _NOT_PARAMS]
    times = sorted(float(r["time"]) for r in grid)
    return {
        "file": str(path), "n_points": len(grid) + len(censored), "n_censored": len(censored),
        "default_time": float(dflt["time"]),
        "best_time": float(best["time"]), "median_time": times[len(times) // 2], "worst_time": times[-1],
        "gain_over_default": (float(dflt["time"]) - float(best["time"])) / float(dflt["time"]),
        "best_params": {k: best[k] for k in params},
        "repeat_spread_median": sorted(spreads)[len(spreads) // 2] if spreads else None,
        "repeat_spread_max": max(spreads) if spreads else None,
        "loadavg1_range": [min(loads), max(loads)],
    }


def compare(real_csv: str | os.PathLike, model_csv: str | os.PathLike) -> dict[str, Any]:
    """How well a model grid ranks the points of a measured grid (Spearman rho over the points
    measured to completion in both), and how the model's best point fares in the measurements."""
    from scipy.stats import spearmanr

    def load(p):
        with open(p) as fh:
            rows = [r for r in csv.DictReader(line for line in fh if not line.startswith("#"))
                    if r["kind"] == "grid" and r.get("censored", "0") != "1"]
        return {tuple((k, r[k]) for k in r if k not in _NOT_PARAMS): float(r["time"]) for r in rows}

    real, model = load(real_csv), load(model_csv)
    keys = [k for k in real if k in model]
    if len(keys) < 3:
        raise ValueError("compare: fewer than 3 grid points in common")
    rho = float(spearmanr([real[k] for k in keys], [model[k] for k in keys]).statistic)
    mbest = min(keys, key=lambda k: model[k])
    rbest = min(real[k] for k in keys)
    rank = sorted(real[k] for k in keys).index(real[mbest]) + 1
    return {"real": str(real_csv), "model": str(model_csv), "n_common": len(keys), "spearman_rho": rho,
            "model_best_params": dict(mbest), "model_best_real_time": real[mbest], "real_best_time": rbest,
            "model_best_rank_in_real": rank, "model_best_regret": (real[mbest] - rbest) / rbest}


def cmd_compare(a: argparse.Namespace) -> int:
    print(json.dumps(compare(a.real, a.model), default=float))
    return 0


def cmd_summary(a: argparse.Namespace) -> int:
    for p in a.files:
        print(json.dumps(summarize(p), default=float))
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m apps.io_accelerators", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)

    def common(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("--accelerator", choices=["sro", "sbb"], default=None,
                        help="inferred from a named task (SRO.* / SBB.*)")
        sp.add_argument("--backend", choices=["real", "model"], default="real",
                        help="real: run on files with a cold page cache; model: the cost model (default real)")
        sp.add_argument("--workdir", default=None, help="directory for the data files (default: a temp dir)")
        sp.add_argument("--seed", type=int, default=0, help="seed of the generated workloads (default 0)")
        sp.add_argument("--repeats", type=int, default=1, help="runs per measurement (default 1)")
        sp.add_argument("--aggregate", choices=["min", "median", "mean"], default="min",
                        help="how the --repeats runs are combined (default min)")

    e = sub.add_parser("evaluate", help="one configuration on one task")
    common(e)
    e.add_argument("--task", required=True, help="name=SRO.1 or feature=value,...; named tasks: "
                   + ", ".join(NAMED_TASKS))
    e.add_argument("--params", default="", help="k=v,... (missing ones take the defaults)")
    e.add_argument("--no-reference", action="store_true", help="do not measure the default configuration")
    e.add_argument("--direct", action="store_true", help="O_DIRECT reads (sro)")
    e.set_defaults(fn=cmd_evaluate)

    t = sub.add_parser("tune", help="gt.tune over tasks")
    common(t)
    t.add_argument("--tasks", default=None, help="named tasks, comma separated (e.g. SRO.1,SRO.2,SRO.3)")
    t.add_argument("--n-tasks", type=int, default=4, help="LHS-sampled tasks when --tasks is absent")
    t.add_argument("--budget", type=int, default=20, help="evaluations per task, the default included (default 20)")
    t.add_argument("--n-initial", type=int, default=10, help="initial design size per task (default 10)")
    t.add_argument("--history", default=None, help="SQLite history file (resumes when it exists)")
    t.add_argument("--confirm", type=int, default=2, metavar="K",
                   help="re-launches of each candidate and of the default for the recommendation (default 2)")
    t.add_argument("--no-progress", action="store_true", help="no progress bar or per-iteration log lines")
    t.add_argument("--max-failures", type=max_failures_arg, default="auto", metavar="K",
                   help="stop when the first K runs all failed for the same reason (default auto: tasks + "
                        "min(tasks, 5); 0: never)")
    t.set_defaults(fn=cmd_tune)

    g = sub.add_parser("grid", help="exhaustive sweep of a small grid for one task")
    common(g)
    g.add_argument("--task", required=True, help="name=SRO.1 or feature=value,...")
    g.add_argument("--out", default=None, help="CSV file (default: apps/io_accelerators/data/grid_TASK_BACKEND.csv)")
    g.add_argument("--direct", action="store_true", help="O_DIRECT reads (sro)")
    g.add_argument("--quiet", action="store_true", help="per-point lines to stderr")
    g.add_argument("--warmup", type=int, default=1, help="discarded runs of the default before the sweep")
    g.add_argument("--prune-factor", type=float, default=3.0,
                   help="stop runs slower than this factor x the default's time (0: never)")
    g.set_defaults(fn=cmd_grid)

    s = sub.add_parser("summary", help="default, best, gain and noise of stored grid CSVs")
    s.add_argument("files", nargs="+", help="grid CSV files")
    s.set_defaults(fn=cmd_summary)

    c = sub.add_parser("compare", help="rank agreement of a model grid with a measured grid")
    c.add_argument("real", help="a grid CSV of measurements")
    c.add_argument("model", help="a grid CSV of the same grid on the model backend")
    c.set_defaults(fn=cmd_compare)
    return p


def main(argv: list[str] | None = None) -> int:
    a = build_parser().parse_args(argv)
    if getattr(a, "repeats", 1) < 1:
        raise SystemExit("--repeats must be >= 1")
    try:
        return a.fn(a)
    except (ValueError, TypeError) as e:
        raise SystemExit(f"error: {e}") from None
    except TuningAborted as e:
        print(f"error: {e}", file=sys.stderr)
        return 3


if __name__ == "__main__":
    sys.exit(main())
