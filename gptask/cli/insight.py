"""The insight subcommands of ``gptask``: ``sensitivity``, ``report`` and ``export-table``.

    gptask sensitivity runs.sqlite                      # Sobol indices per parameter (a history or a model file)
    gptask report runs.sqlite --out report.html         # one self-contained HTML page
    gptask export-table M.json --grid m=1000:4000:8,n=1000:4000:8 --format c-header --out table.h

:func:`add_parsers` registers them on the ``gptask`` parser; ``gptask.cli.main`` passes its problem
loader in, so that this module never imports the command line module (imports go one way).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..core.output_files import is_history
from ..insight.grid import MAX_POINTS
from ..insight.sensitivity import MAX_EVALUATIONS

__all__ = ["add_parsers", "load_result_or_model"]

ProblemLoader = Callable[[str, str], Any]


def _is_history(path: str) -> bool:
    from ..data.storage import is_url

    if is_url(path):
        return True
    if not Path(path).is_file():
        raise ValueError(f"no such file: {path}")
    return is_history(path)


def load_result_or_model(path: str, problem: Any = None) -> Any:
    """A result rebuilt from a history (SQLite) or a model loaded from a model file (JSON)."""
    if _is_history(path):
        from ..results.rebuild import result_from_history
        from ..data.storage import open_history

        with open_history(path, read_only=True) as h:
            return result_from_history(h)
    from ..transfer.model_io import load_model

    return load_model(path, problem=problem)


def _problem(args: argparse.Namespace, load_problem: ProblemLoader) -> Any:
    return load_problem(args.problem, args.problem_options) if args.problem else None


def _cmd_sensitivity(args: argparse.Namespace, load_problem: ProblemLoader) -> int:
    from ..results.table import format_rows
    from ..insight.sensitivity import check_work, sensitivity

    source = load_result_or_model(args.source, _problem(args, load_problem))
    task: Any = None
    if args.task is not None:
        task = int(args.task) if args.task.isdigit() else _task_dict(args.task, source)
    check_work(source, task, base=args.base, max_evaluations=args.max_evaluations)
    report = sensitivity(source, task=task, base=args.base, scale=args.scale, seed=args.seed)
    if args.json:
        print(json.dumps(report.to_json()))
        return 0
    print(report.describe())
    print(format_rows(report.table()))
    fixable = report.fixable()
    print("can be fixed (total index below 0.05 on every task): " + (", ".join(fixable) if fixable else "none"))
    known = [f for f in report.infeasible_fraction if f is not None]
    if known:
        print(f"the constraints forbid {100 * min(known):.0f}-{100 * max(known):.0f} % of the sampled box: "
              "the indices describe the model there too")
    return 0


def _task_dict(text: str, source: Any) -> dict:
    """``k=v,...`` as a task dict with the task space's types."""
    space = getattr(source, "task_space", None) or source.problem.task_space
    out = {}
    for item in text.split(","):
        key, sep, value = item.partition("=")
        if not sep or key.strip() not in space.names:
            raise ValueError(f"--task: expected an index or k=v,... over the task dimensions {space.names}, got {text!r}")
        out[key.strip()] = space[key.strip()].from_text(value.strip())
    return out


def _cmd_report(args: argparse.Namespace, load_problem: ProblemLoader) -> int:
    import time

    from ..core.output_files import check_outputs
    from ..insight.report import ReportOptions, write_report

    if not _is_history(args.history):
        raise ValueError(f"{args.history} is not a history (SQLite) file; gptask report reads the history of a run")
    check_outputs({"--out": args.out}, {"the history": args.history}, {"--out": {"html", "htm"}})
    problem = _problem(args, load_problem)
    t0 = time.perf_counter()
    opts = ReportOptions(grid=args.grid, sensitivity_base=args.base, problem_given=problem is not None,
                         tasks=tuple(args.task or ()), max_grid_points=args.max_grid_points,
                         max_evaluations=args.max_evaluations)
    path = write_report(args.history, args.out, problem=problem, options=opts, progress=not args.quiet)
    print(f"report: {path} ({path.stat().st_size / 1e6:.1f} MB, written in {time.perf_counter() - t0:.1f} s)")
    return 0


def _cmd_export_table(args: argparse.Namespace, load_problem: ProblemLoader) -> int:
    from ..transfer.model_io import load_model, read_recommendations
    from ..core.output_files import check_outputs
    from ..insight.export import to_c_header, to_csv, to_json
    from ..insight.grid import parse_grid
    from ..insight.selection import selection_table

    if _is_history(args.model):
        raise ValueError(f"{args.model} is a history; export-table reads a model file (written by gptask tune "
                         "--save-model or gptask fit --save-model)")
    check_outputs({"--out": args.out}, {"the model file": args.model})
    problem = _problem(args, load_problem)
    model = load_model(args.model, problem=problem)
    axes = parse_grid(args.grid, model.task_space, args.max_grid_points)
    table = selection_table(model, axes, fallback=args.fallback,
                            recommendations=read_recommendations(args.model), progress=not args.quiet)
    if args.format == "c-header":
        text = to_c_header(table, Path(args.model).name, prefix=args.c_prefix)
    elif args.format == "csv":
        text = to_csv(table, Path(args.model).name)
    else:
        text = to_json(table, Path(args.model).name)
    if args.out:
        Path(args.out).write_text(text)
        c = table.counts()
        print(f"{args.out}: {len(table.entries)} grid points: {c['tuned']} tuned tasks, {c['predicted']} predicted, "
              f"{c['fallback']} fallbacks (outside the tuned range "
              + "; ".join(f"{k} {v[0]}..{v[1]}" if isinstance(v, tuple) else f"{k} {v}"
                          for k, v in table.tuned_range.items()) + ")")
    else:
        sys.stdout.write(text)
    if problem is None:
        print("note: without --problem the constraints were not checked and new tasks were predicted over tasks "
              "(not by the joint model of a problem with features)", file=sys.stderr)
    return 0


def add_parsers(sub: Any, load_problem: ProblemLoader) -> None:
    """Register ``sensitivity``, ``report`` and ``export-table`` on ``sub`` (the ``gptask`` parser's
    subparsers). load_problem(spec, options_text) -> Problem: the command line's problem loader."""

    def bind(fn: Callable[[argparse.Namespace, ProblemLoader], int]) -> Callable[[argparse.Namespace], int]:
        return lambda args: fn(args, load_problem)

    def problem_options(p: argparse.ArgumentParser, why: str) -> None:
        p.add_argument("--problem", default=None, help=f"demo | branin | sphere | module:function ({why})")
        p.add_argument("--problem-options", default="", help="k=v,... passed to the problem function")

    def max_evaluations(p: argparse.ArgumentParser) -> None:
        p.add_argument("--max-evaluations", type=int, default=MAX_EVALUATIONS, metavar="N",
                       help="refuse a sensitivity of more model evaluations than this, all tasks together "
                            f"(--base x (parameters + 2) x tasks; default {MAX_EVALUATIONS:,})")

    def max_grid_points(p: argparse.ArgumentParser) -> None:
        p.add_argument("--max-grid-points", type=int, default=MAX_POINTS, metavar="N",
                       help=f"refuse a --grid of more points than this (default {MAX_POINTS:,})")

    s = sub.add_parser("sensitivity", help="Sobol indices of every parameter on the model's mean (which parameters matter)")
    s.add_argument("source", help="a history (SQLite, read only) or a model file (JSON)")
    s.add_argument("--task", default=None, help="one task: its index or k=v,... (default: every task, and their mean)")
    s.add_argument("--base", type=int, default=1024,
                   help="Saltelli base sample N, a power of 2: N x (parameters + 2) model evaluations per task "
                        "(default 1024)")
    s.add_argument("--scale", choices=["model", "user"], default="model",
                   help="model: the model's units (log of the objective under the log transform: relative "
                        "effects; default); user: the predicted median in the objective's units")
    s.add_argument("--seed", type=int, default=0, help="seed of the Sobol sequences and the bootstrap (default 0)")
    s.add_argument("--json", action="store_true", help="print one JSON object")
    max_evaluations(s)
    problem_options(s, "to count the configurations the constraints forbid")
    s.set_defaults(func=bind(_cmd_sensitivity))

    r = sub.add_parser("report", help="one self-contained HTML page about a history (no server, no network)")
    r.add_argument("history", help="the history, a SQLite file or a postgresql:// URL (read only)")
    r.add_argument("--out", required=True, help="the HTML file to write")
    r.add_argument("--grid", default=None,
                   help="the task grid of the task-space map, as for export-table (default: 7 values per varying "
                        "task dimension over the tuned range)")
    r.add_argument("--base", type=int, default=1024, help="Saltelli base sample N of the sensitivity (default 1024)")
    max_evaluations(r)
    max_grid_points(r)
    r.add_argument("--task", action="append", default=None,
                   help="a task to answer on the page, k=v,... (repeatable): what to run there and how sure, or "
                        "that it lies outside the tuned range")
    r.add_argument("-q", "--quiet", action="store_true", help="no progress bar or per-section log lines")
    problem_options(r, "for its constraints, features and default")
    r.set_defaults(func=bind(_cmd_report))

    e = sub.add_parser("export-table", help="the recommended configuration at every point of a task grid, run-free "
                                            "from a model file (JSON, CSV or a C header)")
    e.add_argument("model", help="model file written by tune --save-model / fit --save-model")
    e.add_argument("--grid", required=True,
                   help="every task dimension: name=lo:hi:count (evenly spaced, ends included), "
                        "name=lo:hi:count:log, name=v1|v2|..., comma-separated; e.g. m=1000:4000:8,n=1000:4000:8")
    e.add_argument("--format", choices=["json", "csv", "c-header"], default="json",
                   help="json (default), csv, or c-header (a static table and a nearest-point lookup function)")
    e.add_argument("--out", default=None, help="file to write (default: standard output)")
    e.add_argument("--fallback", choices=["nearest", "default"], default="nearest",
                   help="what a point outside the model's task range gets: the nearest tuned task's recommendation "
                        "(default) or the problem's default configuration (needs --problem); never a prediction")
    e.add_argument("--c-prefix", default="gptask_table", help="prefix of the C header's names (default gptask_table)")
    e.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    max_grid_points(e)
    problem_options(e, "for the constraints and, for a problem with features, the joint model of new tasks")
    e.set_defaults(func=bind(_cmd_export_table))
