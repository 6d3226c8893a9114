"""Command line: ``python -m apps.mpi_collectives {evaluate,grid,tune,default} ...``.

``k=v,k=v`` lists are parsed by splitting and converting each value to int, then float, else
keeping the string; nothing is evaluated.
"""

from __future__ import annotations

import argparse
import json
import logging
import shlex
import sys
from collections.abc import Sequence
from typing import Any

from gptask.cli.arguments import max_failures_arg, parse_assignments
from gptask.evaluation.failed_runs import TuningAborted

from .algorithms import COLLECTIVES
from .launcher import LaunchConfig, LaunchError

__all__ = ["main", "parse_kv"]


def parse_kv(text: str) -> dict[str, Any]:
    """``"coll=allreduce,size=65536"`` -> ``{"coll": "allreduce", "size": 65536}`` (gptask's parser)."""
    return parse_assignments(text)


def _config(a: argparse.Namespace) -> LaunchConfig:
    kw: dict[str, Any] = {"timeout": a.timeout, "target": a.target, "stat": a.stat}
    if a.mpiexec:
        kw["mpiexec"] = a.mpiexec
    if a.launcher:
        kw["template"] = shlex.split(a.launcher)
    if a.cores:
        kw["cores"] = a.cores
    return LaunchConfig(**kw)


def _add_launch_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("launch")
    g.add_argument("--timeout", type=float, default=60.0, help="seconds before a run is killed")
    g.add_argument("--target", type=float, default=0.25, help="seconds of timed iterations per run")
    g.add_argument("--stat", choices=("min", "median"), default="min",
                   help="statistic of the per-iteration maxima reported as time")
    g.add_argument("--mpiexec", default="", help="launcher path (default: next to this python)")
    g.add_argument("--launcher", default="",
                   help="launch template, e.g. 'srun -n {nprocs} {python} {script}' "
                        "(placeholders: nprocs, mpiexec, python, script)")
    g.add_argument("--cores", type=int, default=0, help="cores per job (oversubscription yields)")


def _cmd_evaluate(a: argparse.Namespace) -> int:
    from .objective import evaluate

    task, params = parse_kv(a.task), parse_kv(a.params)
    res = evaluate(task, params, _config(a))
    print(json.dumps(res))
    return 0


def _cmd_default(a: argparse.Namespace) -> int:
    return _cmd_evaluate(argparse.Namespace(**{**vars(a), "params": "algorithm=auto"}))


def _cmd_grid(a: argparse.Namespace) -> int:
    from .grid import machine_description, sweep, write_csv

    task = parse_kv(a.task)
    header = machine_description()
    header["command"] = "python -m apps.mpi_collectives " + " ".join(map(shlex.quote, a.argv))
    header["stat"] = f"time = {a.stat} of per-iteration maxima over ranks, seconds"

    def progress(i: int, n: int, row: dict) -> None:
        t = f"{row['time']:.3e}" if row.get("status") == "complete" else row.get("reason", "")[:80]
        print(f"[{i}/{n}] {row['algorithm']} kval={row['kval']} tree_type={row['tree_type']} "
              f"chunk={row['chunk']}: {t}", file=sys.stderr, flush=True)

    rows = sweep(task, _config(a), repeats=a.repeats, seed=a.seed, progress=progress)
    la_end = machine_description()["loadavg"]
    header["loadavg_end"] = la_end
    if a.out:
        write_csv(a.out, rows, header)
    ok = [r for r in rows if r["status"] == "complete"]
    best = min(ok, key=lambda r: r["time"]) if ok else None
    auto = [r["time"] for r in ok if r["algorithm"] == "auto"]
    summary = {"task": task, "runs": len(rows), "failed": len(rows) - len(ok), "out": a.out or None}
    if best is not None:
        summary["best"] = {k: best[k] for k in ("algorithm", "kval", "tree_type", "chunk", "time")}
    if auto:
        summary["default_time"] = min(auto)
        if best is not None:
            summary["gain_over_default"] = 1.0 - best["time"] / min(auto)
    print(json.dumps(summary))
    return 0


def _cmd_confirm(a: argparse.Namespace) -> int:
    from .grid import confirm, machine_description, read_csv, summarize, write_csv

    header, rows = read_csv(a.file)

    def progress(i: int, n: int, row: dict) -> None:
        t = f"{row['time']:.3e}" if row.get("status") == "complete" else row.get("reason", "")[:80]
        print(f"[{i}/{n}] {row['algorithm']}: {t}", file=sys.stderr, flush=True)

    header["confirm_command"] = "python -m apps.mpi_collectives " + " ".join(map(shlex.quote, a.argv))
    header["confirm_loadavg"] = machine_description()["loadavg"]
    extra = confirm(rows, top=a.top, repeats=a.repeats, config=_config(a), progress=progress)
    header["confirm_loadavg_end"] = machine_description()["loadavg"]
    write_csv(a.file, [*rows, *extra], header)
    print(json.dumps(summarize([*rows, *extra])))
    return 0


def _cmd_summary(a: argparse.Namespace) -> int:
    from .grid import read_csv, summarize

    print("| task | configs (failed) | sweep: default (s) | sweep: best configuration | best (s) "
          "| gain | default's rank | confirmed best | confirmed gain, min / median of runs "
          "| load avg start / end |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for path in a.files:
        header, rows = read_csv(path)
        s = summarize(rows)
        t, b = s["task"], s["best"]
        knobs = ", ".join(f"{k}={b[k]}" for k in ("kval", "tree_type", "chunk")
                          if k in b and _knob_active(t["coll"], b["algorithm"], k))
        cfg = b["algorithm"] + (f" ({knobs})" if knobs else "")
        print(f"| {t['coll']} {t['size']} B, {t['nprocs']} ranks | {s['configs']} ({s['failed_configs']}) "
              f"| {s.get('default_time', float('nan')):.3e} | {cfg} | {b['time']:.3e} "
              f"| {100 * s.get('gain_over_default', float('nan')):.0f} % | {s.get('default_rank', '-')} "
              f"| {_label(t['coll'], s.get('confirmed_best'))} "
              f"| {_pct(s.get('confirmed_gain_min'))} / {_pct(s.get('confirmed_gain_median'))} "
              f"| {header.get('loadavg', '?').split()[0]} / {header.get('loadavg_end', '?').split()[0]} |")
    return 0


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.0f} %"


def _label(coll: str, b: dict | None) -> str:
    if not b:
        return "-"
    knobs = ", ".join(f"{k}={b[k]}" for k in ("kval", "tree_type", "chunk")
                      if k in b and _knob_active(coll, b["algorithm"], k))
    return b["algorithm"] + (f" ({knobs})" if knobs else "")


def _knob_active(coll: str, algorithm: str, knob: str) -> bool:
    from .algorithms import active_knobs

    return knob in active_knobs(coll, algorithm)


def _cmd_tune(a: argparse.Namespace) -> int:
    from gptask import tune

    from .problem import DEFAULT, problem

    colls = [c.strip() for c in a.colls.split(",") if c.strip()]
    cfg = _config(a)
    prob = problem(colls=colls, min_size=a.min_size, max_size=a.max_size, min_procs=a.min_procs,
                   max_procs=a.max_procs, config=cfg)
    tasks: Any = a.tasks
    if a.task:
        tasks = [parse_kv(t) for t in a.task]
    result = tune(prob, tasks=tasks, budget=a.budget, n_initial=a.n_initial, seed=a.seed,
                  history=a.history or None, repeats=a.repeats, aggregate="min", progress=not a.no_progress,
                  max_failures=a.max_failures)
    confirm = a.confirm if a.confirm is not None else (3 if a.compare_default else 0)
    for i, task in enumerate(result.tasks):
        params, value = result.best(i)
        # best: the single fastest launch while tuning (optimistic); labelled when it is MPICH's default
        line: dict[str, Any] = {"task": task, "best": params, "time": value,
                                "best_is_default": _is_mpich_default(params)}
        if a.compare_default or confirm:
            # one rule (gptask.results.recommend): the candidates and MPICH's default re-launched round robin,
            # the lowest minimum kept; the gain compares the two by the same runs
            rec = result.recommend(i, confirm=confirm, progress=not a.no_progress)
            mpich_default = rec.is_default or _is_mpich_default(rec.params)
            line.update(recommended=rec.params, is_default=mpich_default,
                        recommended_label="MPICH's default (algorithm=auto)" if mpich_default else "tuned",
                        recommended_time=rec.value, basis=rec.basis, runs=len(rec.pick.confirmations),
                        default={"params": dict(DEFAULT), "time": rec.default_value},
                        gain_over_default=0.0 if mpich_default and rec.gain is not None else rec.gain,
                        gain_basis=rec.gain_basis)
        print(json.dumps(line), flush=True)
    return 0


def _is_mpich_default(params: dict) -> bool:
    """Whether a configuration is MPICH's own choice (``algorithm=auto``: the knobs are then inert)."""
    return params.get("algorithm") == "auto"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m apps.mpi_collectives",
                                description="tune MPICH collective algorithms")
    sub = p.add_subparsers(dest="command", required=True)

    e = sub.add_parser("evaluate", help="one measurement; prints a JSON line with 'time'")
    e.add_argument("--task", required=True, help="coll=allreduce,size=65536,nprocs=4")
    e.add_argument("--params", required=True, help="algorithm=ring[,kval=..,tree_type=..,chunk=..]")
    _add_launch_options(e)
    e.set_defaults(func=_cmd_evaluate)

    d = sub.add_parser("default", help="measure MPICH's own choice (algorithm=auto)")
    d.add_argument("--task", required=True, help="coll=allreduce,size=65536,nprocs=4")
    _add_launch_options(d)
    d.set_defaults(func=_cmd_default)

    g = sub.add_parser("grid", help="exhaustive sweep of the discretised space for one task")
    g.add_argument("--task", required=True, help="coll=allreduce,size=65536,nprocs=4")
    g.add_argument("--out", default="", help="CSV file to write")
    g.add_argument("--repeats", type=int, default=1, help="runs of each configuration (default 1)")
    g.add_argument("--seed", type=int, default=0, help="seed of the shuffled run order (default 0)")
    _add_launch_options(g)
    g.set_defaults(func=_cmd_grid)

    c = sub.add_parser("confirm", help="re-measure the best sweep configurations and the "
                       "default, interleaved; appends rows to the CSV")
    c.add_argument("file", help="a grid CSV written by the grid command (rows are appended)")
    c.add_argument("--top", type=int, default=3, help="how many of the sweep's best configurations (default 3)")
    c.add_argument("--repeats", type=int, default=5, help="re-measurements of each, and of the default (default 5)")
    _add_launch_options(c)
    c.set_defaults(func=_cmd_confirm)

    s = sub.add_parser("summary", help="markdown table of grid CSVs: default, best, gain")
    s.add_argument("files", nargs="+", help="grid CSV files")
    s.set_defaults(func=_cmd_summary)

    t = sub.add_parser("tune", help="multitask tuning with gptask.tune")
    t.add_argument("--tasks", type=int, default=4, help="number of tasks (LHS) when no --task")
    t.add_argument("--task", action="append", default=[], help="explicit task (repeatable)")
    t.add_argument("--colls", default="allreduce", help=f"comma list from {','.join(COLLECTIVES)}")
    t.add_argument("--min-size", type=int, default=8, help="smallest message size in bytes (default 8)")
    t.add_argument("--max-size", type=int, default=16 * 1024 * 1024,
                   help="largest message size in bytes (default 16 MiB)")
    t.add_argument("--min-procs", type=int, default=2, help="fewest ranks (default 2)")
    t.add_argument("--max-procs", type=int, default=4, help="most ranks; more than the cores oversubscribe (default 4)")
    t.add_argument("--budget", type=int, default=20, help="evaluations per task, the default included (default 20)")
    t.add_argument("--n-initial", type=int, default=10, help="initial design size per task (default 10)")
    t.add_argument("--seed", type=int, default=0, help="seed of the tasks, designs and model (default 0)")
    t.add_argument("--history", default="", help="SQLite history file (resumable)")
    t.add_argument("--repeats", type=int, default=1,
                   help="runs per evaluation, aggregated by their minimum")
    t.add_argument("--compare-default", action="store_true",
                   help="recommend per task by re-launching the best configurations and MPICH's default "
                        "(algorithm=auto) round robin (--confirm times each, default 3) and report the gain over "
                        "the default from those runs (0 when the default is recommended: is_default)")
    t.add_argument("--confirm", type=int, default=None, metavar="K",
                   help="re-launches per candidate for the recommendation (default 3 with --compare-default, "
                        "else none)")
    t.add_argument("--max-failures", type=max_failures_arg, default="auto", metavar="K",
                   help="stop when the first K evaluations all failed for the same reason (default auto: "
                        "tasks + min(tasks, 5); 0: never)")
    t.add_argument("--no-progress", action="store_true", help="no progress bar or per-iteration log lines")
    _add_launch_options(t)
    t.set_defaults(func=_cmd_tune)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    a = parser.parse_args(argv)
    a.argv = argv
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        return a.func(a)
    except (ValueError, TypeError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except LaunchError as exc:
        print(f"run failed: {exc.reason}", file=sys.stderr)
        return 1
    except TuningAborted as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 3
