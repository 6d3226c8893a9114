"""Command line of the PDGEQRF app, run from the repo root::

    python -m apps.scalapack_qr evaluate --task m=2000,n=2000 --params mb=32,nb=32,nproc=2,p=1,nth=1
    python -m apps.scalapack_qr tune --tasks 8 --budget 20 --n-initial 10 --history qr.sqlite [--confirm 3] [--backend model]
    python -m apps.scalapack_qr grid --task m=500,n=500 [--out file.csv]
    python -m apps.scalapack_qr build

``evaluate`` prints one JSON line with ``"time"`` in seconds (a measurement for the real backend,
a MODEL prediction for ``--backend model``, labelled as such).
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from typing import Any

from gptask.cli.arguments import max_failures_arg, parse_assignments

__all__ = ["main", "parse_kv", "build_parser"]


def parse_kv(text: str, what: str = "argument") -> dict[str, Any]:
    """``"a=1,b=2.5,c=x"`` -> ``{"a": 1, "b": 2.5, "c": "x"}`` (gptask's parser; no eval); empty is an error."""
    out = parse_assignments(text, what)
    if not out:
        raise ValueError(f"{what}: no key=value pairs in {text!r}")
    return out


def _add_problem_args(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--backend", choices=("real", "model"), default="real",
                    help="real: run ScaLAPACK; model: the fitted analytic cost MODEL (eq. 18-19)")
    ap.add_argument("--m-max", type=int, default=None, help="upper bound of m and n (default 2000)")
    ap.add_argument("--nodes", type=int, default=1, help="nodes of the machine (default 1)")
    ap.add_argument("--cores", type=int, default=None, help="cores per node (default: detected)")
    ap.add_argument("--oversubscribe", action="store_true", help="drop nproc*nth <= nodes*cores")
    ap.add_argument("--repeats", type=int, default=2, help="timed factorisations per launch (min kept)")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds before a launch is killed")
    ap.add_argument("--no-check", action="store_true", help="skip the residual check")
    ap.add_argument("--launcher", default=None,
                    help='launch prefix, e.g. "srun -n {nproc} -c {nth}" (default: Debian MPICH mpiexec)')
    ap.add_argument("--memory-limit", type=float, default=None, metavar="BYTES",
                    help="tune the time within this memory per process (bytes, e.g. 4.2e6; the driver's "
                         "allocations, see apps/scalapack_qr/memory.py); default: no limit")


def _problem(args: argparse.Namespace):
    from .problem import DEFAULT_M_MAX, problem

    return problem(
        m_max=args.m_max or DEFAULT_M_MAX, nodes=args.nodes, cores=args.cores,
        oversubscribe=args.oversubscribe, backend=args.backend, repeats=args.repeats,
        timeout=args.timeout, check=not args.no_check,
        launcher=shlex.split(args.launcher) if args.launcher else None,
        memory_limit=args.memory_limit,
    )


def _cmd_evaluate(args: argparse.Namespace) -> int:
    pb = _problem(args)
    task = parse_kv(args.task, "--task")
    params = parse_kv(args.params, "--params")
    try:
        if args.backend == "real":
            rec = dict(pb.objective.run(task, params))
            rec["backend"] = "real"
        else:
            out = pb.objective(task, params)
            rec = {**(out if isinstance(out, dict) else {"time": out}), **task, **params, "backend": "model",
                   "note": "analytic MODEL prediction (eq. 18-19), not a measurement"}
    except Exception as exc:  # noqa: BLE001 - report any failure as one JSON line
        print(json.dumps({"status": "failed", "reason": f"{type(exc).__name__}: {exc}"}))
        return 1
    print(json.dumps(rec))
    return 0


def _cmd_grid(args: argparse.Namespace) -> int:
    from .grid import POW2_BLOCKS, sweep

    pb = _problem(args)
    task = parse_kv(args.task, "--task")
    blocks = tuple(int(b) for b in args.blocks.split(",")) if args.blocks else POW2_BLOCKS

    def progress(i: int, total: int, params: dict, row: dict) -> None:
        shown = row["time"] if row["status"] == "complete" else row["reason"]
        print(f"[{i}/{total}] {params} -> {shown}", file=sys.stderr, flush=True)

    note = ("real ScaLAPACK runs" if args.backend == "real"
            else "analytic MODEL predictions (eq. 18-19), not measurements")
    if args.out:
        with open(args.out, "w", newline="") as fh:
            rows = sweep(pb, task, fh, blocks=blocks, seed=args.seed, note=note, progress=progress)
    else:
        rows = sweep(pb, task, sys.stdout, blocks=blocks, seed=args.seed, note=note, progress=progress)
    ok = [r for r in rows if r["status"] == "complete"]
    if ok:
        best = min(ok, key=lambda r: r["time"])
        keys = ("mb", "nb", "nproc", "p", "nth")
        print(f"best of {len(ok)} ({len(rows) - len(ok)} failed): "
              f"{ {k: best[k] for k in keys} } time {best['time']:.4g} s", file=sys.stderr)
    return 0 if ok else 1


def _cmd_tune(args: argparse.Namespace) -> int:
    import gptask as gt
    from gptask.core.output_files import check_output_path
    from gptask.results.plots import plot_convergence, plot_formats
    from gptask.results.recommend import (COLUMNS_NOTE, DEFAULT_AGGREGATE, DEFAULT_CANDIDATES, RULE, VALUE_COLUMNS,
                                  recommendation_row)
    from gptask.results.table import format_rows

    if args.plot:
        check_output_path(args.plot, "--plot", plot_formats())
    if args.out:
        check_output_path(args.out, "--out")
    pb = _problem(args)
    tasks: Any = [parse_kv(t, "--task") for t in args.task] if args.task else args.tasks
    result = gt.tune(pb, tasks=tasks, budget=args.budget, n_initial=args.n_initial, seed=args.seed,
                     history=args.history, progress=not args.no_progress, max_failures=args.max_failures)
    defaults = [result.default(i) for i in range(len(result.tasks))]
    if args.plot:
        plot_convergence(result.history, args.plot, tasks=result.tasks,
                         title="PDGEQRF: best time so far per task; dashed: the hand default",
                         defaults=[None if d is None else d[1] for d in defaults], unit=pb.unit)
        print(f"convergence plot: {args.plot}")
    label = " (analytic MODEL values, not measurements)" if args.backend == "model" else ""
    if args.confirm:
        print(f"recommended configuration per task{label}: the {DEFAULT_CANDIDATES} lowest posterior means "
              f"among the evaluated configurations, the fastest launch's and the hand default, re-launched "
              f"{args.confirm} times each (round robin), the fastest re-launch kept", flush=True)
    else:
        print(f"recommended configuration per task{label}: {RULE.format(aggregate=DEFAULT_AGGREGATE)}", flush=True)
    best, recommended, rows = [], [], []
    for i, task in enumerate(result.tasks):
        try:
            params, value = result.best(i)
        except ValueError as exc:  # e.g. no run of the task met the memory limit
            print(f"task {i} {task}: nothing to recommend: {exc}")
            continue
        best.append({"task": task, "params": params, "time": value})
        rec = result.recommend(i, confirm=args.confirm, progress=not args.no_progress)
        rows.append(recommendation_row(rec))
        pick = rec.pick
        spread = pick.spread
        recommended.append({
            **rec.to_json(), "time_min": spread[0] if spread else None, "time_median": pick.median,
            "time_max": spread[1] if spread else None, "time_iqr": pick.iqr, "runs": len(pick.confirmations),
            "failures": list(pick.failures),
            "default": None if rec.default is None else {"params": dict(rec.default.params),
                                                         "time": rec.default_value},
            "candidates": [{"params": c.params, "predicted": c.predicted, "confirmations": list(c.confirmations),
                            "failures": list(c.failures)} for c in rec.candidates],
        })
    print(format_rows(rows, "s", VALUE_COLUMNS))
    print(COLUMNS_NOTE.format(aggregate=DEFAULT_AGGREGATE) + "; raw best: the single fastest launch while tuning "
          "(an optimistic figure); the default is the hand default (mb = nb = 64, all cores on a near-square grid, "
          "one thread); pick: 'default' when no tuned configuration beat it")
    if args.out:
        with open(args.out, "w") as fh:
            json.dump({"backend": args.backend, "confirm": args.confirm, "unit": "s", "recommended": recommended,
                       "best": best}, fh, indent=1)
    return 0


def _cmd_summary(args: argparse.Namespace) -> int:
    from .grid import read_csv, summarize

    for path in args.csv:
        print(json.dumps({"file": path, **summarize(read_csv(path), top=args.top)}))
    return 0


def _cmd_build(args: argparse.Namespace) -> int:
    from .build import build_driver

    print(build_driver(force=args.force))
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The command line's parser (subcommands evaluate, tune, grid, summary, build)."""
    ap = argparse.ArgumentParser(prog="python -m apps.scalapack_qr",
                                 description="Tune ScaLAPACK PDGEQRF (QR factorisation).")
    sub = ap.add_subparsers(dest="command", required=True)

    ev = sub.add_parser("evaluate", help="run (or model) one configuration; prints one JSON line")
    ev.add_argument("--task", required=True, help="m=...,n=...")
    ev.add_argument("--params", required=True, help="mb=...,nb=...,nproc=...,p=...,nth=...")
    _add_problem_args(ev)

    tu = sub.add_parser("tune", help="multitask tuning with gptask.tune")
    tu.add_argument("--tasks", type=int, default=8, help="number of LHS tasks")
    tu.add_argument("--task", action="append", help="explicit task m=...,n=... (repeatable)")
    tu.add_argument("--budget", type=int, default=20,
                    help="launches per task while tuning, the hand default included (default 20)")
    tu.add_argument("--n-initial", type=int, default=10,
                    help="launches of each task's initial Latin hypercube design (default 10)")
    tu.add_argument("--seed", type=int, default=0, help="seed of the tasks, designs and model (default 0)")
    tu.add_argument("--max-failures", type=max_failures_arg, default="auto", metavar="K",
                    help="stop when the first K launches all failed for the same reason (default auto: tasks + "
                         "min(tasks, 5); 0: never)")
    tu.add_argument("--history", default=None, help="SQLite history file (resumes if it exists)")
    tu.add_argument("--out", default=None, help="write the best configurations as JSON")
    tu.add_argument("--plot", default=None, help="write the convergence plot (PNG) here")
    tu.add_argument("--confirm", type=int, default=0,
                    help="re-launch the best configurations by the model this many times each and "
                         "recommend the fastest (result.recommend(i, confirm=K))")
    tu.add_argument("--no-progress", action="store_true", help="no progress bar")
    _add_problem_args(tu)

    gr = sub.add_parser("grid", help="exhaustive sweep of a discretised space for one task")
    gr.add_argument("--task", required=True, help="m=...,n=...")
    gr.add_argument("--out", default=None, help="CSV file (default: stdout)")
    gr.add_argument("--blocks", default=None, help="block sizes for mb and nb (default 1,2,4,...,256)")
    gr.add_argument("--seed", type=int, default=0, help="seed of the run order shuffle")
    _add_problem_args(gr)

    su = sub.add_parser("summary", help="best configurations and noise of grid CSV files")
    su.add_argument("csv", nargs="+", help="grid CSV files written by the grid command")
    su.add_argument("--top", type=int, default=5, help="how many of the best configurations to list (default 5)")

    bu = sub.add_parser("build", help="compile the driver (if needed) and print its path")
    bu.add_argument("--force", action="store_true", help="rebuild even when the driver is up to date")

    return ap


def main(argv: list[str] | None = None) -> int:
    ap = build_parser()
    args = ap.parse_args(argv)
    handler = {"evaluate": _cmd_evaluate, "tune": _cmd_tune, "grid": _cmd_grid, "summary": _cmd_summary,
               "build": _cmd_build}
    try:
        return handler[args.command](args)
    except (ValueError, TypeError) as exc:
        ap.exit(2, f"{ap.prog} {args.command}: error: {exc}\n")
    except RuntimeError as exc:  # missing packages, build failures
        ap.exit(3, f"{ap.prog} {args.command}: {exc}\n")
    return 0
