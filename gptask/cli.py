"""The ``gptask`` command line: tune, show, plot, export, predict.

    gptask tune --problem demo --tasks 5 --budget 20 --history runs.sqlite
    gptask tune --problem mypkg.mymod:make_problem --tasks 8 --budget 20 --history runs.sqlite
    gptask show runs.sqlite
    gptask plot runs.sqlite --out convergence.png
    gptask export runs.sqlite --format csv
    gptask tune --problem demo --tasks 8 --budget 20 --save-model demo.json
    gptask predict demo.json --task t=4.2            # TLA1: predicted optimum, no run

``--problem module:function`` imports ``module`` and calls ``function()`` (it must return a
``gptask.Problem``); nothing given on the command line is evaluated as code.
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import math
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["main", "parse_assignments", "format_table", "best_table", "result_from_history", "recommendation_table"]


_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")


def _scalar(text: str) -> Any:
    """'12' -> 12, '1.5' -> 1.5, 'true' -> True; anything else (including 'nan', 'inf') stays a
    string. Nothing is evaluated."""
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    try:
        return int(text)
    except ValueError:
        pass
    try:
        v = float(text)
    except ValueError:
        return text
    return v if math.isfinite(v) else text


def parse_assignments(text: str, what: str = "argument") -> dict[str, Any]:
    """Parse ``"m=5000,n=3000,alg=ring"`` into ``{"m": 5000, "n": 3000, "alg": "ring"}``.

    Keys are identifiers; values are ints, finite floats, true/false or strings. An empty text
    gives ``{}``; a malformed item or a repeated key raises ``ValueError`` naming ``what``.
    """
    out: dict[str, Any] = {}
    if not text or not text.strip():
        return out
    for item in text.split(","):
        key, sep, value = item.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not _KEY.fullmatch(key) or not value:
            raise ValueError(f"{what}: expected comma-separated key=value pairs, got {item!r} in {text!r}")
        if key in out:
            raise ValueError(f"{what}: key {key!r} given twice in {text!r}")
        out[key] = _scalar(value)
    return out


def format_table(rows: Sequence[dict[str, Any]]) -> str:
    """A plain text table of dict rows (union of keys, in first-seen order)."""
    if not rows:
        return "(no rows)"
    keys: list[str] = []
    for r in rows:
        keys += [k for k in r if k not in keys]

    def cell(v: Any) -> str:
        if v is None:
            return "-"
        if isinstance(v, float):
            return f"{v:.4g}"
        return str(v)

    cells = [[cell(r.get(k)) for k in keys] for r in rows]
    widths = [max(len(k), *(len(c[j]) for c in cells)) for j, k in enumerate(keys)]
    line = "  ".join(k.rjust(w) for k, w in zip(keys, widths))
    body = ["  ".join(c.rjust(w) for c, w in zip(row, widths)) for row in cells]
    return "\n".join([line, "  ".join("-" * w for w in widths), *body])


def load_problem(spec: str, options: dict[str, Any] | None = None):
    """``demo``/``branin``/``sphere`` or ``module:function``; ``function(**options)`` -> Problem."""
    from .functions import FAMILIES
    from .problem import Problem

    options = options or {}
    if spec in FAMILIES:
        problem = FAMILIES[spec][0](**options)
    else:
        if ":" not in spec:
            raise ValueError(f"--problem must be one of {sorted(FAMILIES)} or module:function, got {spec!r}")
        mod_name, fn_name = spec.split(":", 1)
        module = importlib.import_module(mod_name)
        fn = getattr(module, fn_name, None)
        if not callable(fn):
            raise ValueError(f"{mod_name} has no callable {fn_name!r}")
        problem = fn(**options)
    if not isinstance(problem, Problem):
        raise TypeError(f"{spec} returned {type(problem).__name__}, not a gptask.Problem")
    return problem


def best_table(history) -> list[dict[str, Any]]:
    """One row per task from a History: task values, best parameters, best value, counts (tuning
    evaluations only: confirmation runs are not counted)."""
    from .recommend import is_confirmation

    recs = [r for r in history.records() if not is_confirmation(r)]
    rows = []
    for i, task in enumerate(history.tasks()):
        mine = [r for r in recs if r["task_index"] == i]
        ok = [r for r in mine if r["status"] == "complete"]
        row: dict[str, Any] = {"task": i, **task}
        if ok:
            b = min(ok, key=lambda r: r["value"])
            row.update(b["params"])
            row["best"] = b["value"]
        else:
            row["best"] = None
        row["evals"] = len(mine)
        row["failed"] = len(mine) - len(ok)
        rows.append(row)
    return rows


def result_from_history(history: Any) -> Any:
    """A :class:`gptask.TuningResult` rebuilt from a History without its problem: the spaces from the
    signature, the tuning evaluations and confirmation runs, and the model conditioned on every
    evaluation with the last stored hyperparameters (None before the first fit). Its objective
    cannot be run (no confirmation runs), and constraints are not known."""
    from .evaluate import EvaluationFailed
    from .mla import training_data
    from .models import LCM
    from .problem import Problem
    from .recommend import is_confirmation
    from .result import TuningResult
    from .space import Space

    sig = history.signature
    name = sig.get("name", "problem")

    def no_objective(task: dict, params: dict) -> float:
        raise EvaluationFailed(f"the problem {name!r} was rebuilt from a history: its objective is not available")

    problem = Problem(Space.from_json(sig["task_space"]), Space.from_json(sig["param_space"]), no_objective,
                      constants=sig.get("constants") or {}, name=name)
    tasks, records = history.tasks(), history.records()
    evaluations = [r for r in records if not is_confirmation(r)]
    confirmations = [r for r in records if is_confirmation(r)]
    last, use_log = history.last_model(), history.get_meta("use_log")
    model = transform = None
    if last is not None and use_log is not None:
        X, Y, transform = training_data(problem.param_space, evaluations, len(tasks), bool(use_log))
        W = last["params"]["W"]  # nested lists (Q, T, rank)
        model = LCM(n_latent=len(W), kernel=history.get_meta("kernel") or "rbf", rank=len(W[0][0])).condition(
            X, Y, params=last["params"])
    return TuningResult(problem, tasks, evaluations, model, transform, confirmations=confirmations)


def recommendation_table(result: Any) -> list[dict[str, Any]]:
    """One row per task with a complete evaluation: the configuration with the lowest posterior mean
    among those evaluated (``result.recommend(i)``), its predicted value and std, the median of its
    confirmation runs if any, and the raw best launch for comparison."""
    rows = []
    for i in range(len(result.tasks)):
        if not result.records(i):
            continue
        rec = result.recommend(i)
        pick = rec.pick
        row: dict[str, Any] = {"task": i, **rec.params, "predicted": rec.predicted, "+-": rec.predicted_std}
        if pick.confirmations:
            row["confirmed"] = pick.median
            row["runs"] = len(pick.confirmations)
        row["raw best"] = rec.raw_best_value
        row["same as raw"] = "yes" if rec.params == rec.raw_best_params else "no"
        rows.append(row)
    return rows


def _cmd_tune(args: argparse.Namespace) -> int:
    from .mla import tune
    from .plots import plot_convergence

    problem = load_problem(args.problem, parse_assignments(args.problem_options))
    tasks: Any = args.tasks
    if args.task:
        tasks = [parse_assignments(t) for t in args.task]
    result = tune(problem, tasks=tasks, budget=args.budget, n_initial=args.n_initial, seed=args.seed,
                  history=args.history, repeats=args.repeats, aggregate=args.aggregate,
                  timeout=args.timeout, n_latent=args.n_latent, progress=not args.no_progress)
    rows = result.table()
    print(format_table(rows))
    if args.plot:
        plot_convergence(result.history, args.plot, title=f"{problem.name}: best so far per task",
                         tasks=result.tasks)
        print(f"convergence plot: {args.plot}")
    if args.save_model:
        result.save_model(args.save_model)
        print(f"model: {args.save_model}")
    return 0


def _cmd_show(args: argparse.Namespace) -> int:
    from .history import History

    h = History.open_existing(args.history)
    result = result_from_history(h)
    extra = f"  confirmation runs: {len(result.confirmations)}" if result.confirmations else ""
    print(f"problem: {h.signature.get('name')}  tasks: {len(h.tasks())}  evaluations: {len(result.history)}{extra}")
    print("raw best (the single best launch per task):")
    print(format_table(best_table(h)))
    if result.model is None:
        print("recommendation: none yet (no model was fitted)")
        return 0
    print("recommended (the evaluated configuration with the lowest posterior mean of the model):")
    print(format_table(recommendation_table(result)))
    return 0


def _cmd_plot(args: argparse.Namespace) -> int:
    from .history import History
    from .plots import plot_convergence
    from .recommend import is_confirmation

    h = History.open_existing(args.history)
    out = args.out or str(Path(args.history).with_suffix(".png"))
    evaluations = [r for r in h.records() if not is_confirmation(r)]
    plot_convergence(evaluations, out, title=f"{h.signature.get('name')}: best so far per task", tasks=h.tasks())
    print(out)
    return 0


def _cmd_export(args: argparse.Namespace) -> int:
    from .history import History

    h = History.open_existing(args.history)
    text = h.to_csv() if args.format == "csv" else h.to_json()
    if args.out:
        Path(args.out).write_text(text)
    else:
        sys.stdout.write(text)
    return 0


def _cmd_predict(args: argparse.Namespace) -> int:
    from .model_io import load_model
    from .transfer import predict, predict_optimum

    problem = load_problem(args.problem, parse_assignments(args.problem_options)) if args.problem else None
    model = load_model(args.model, problem=problem)
    task = parse_assignments(args.task)
    pred = predict_optimum(model, task)
    out: dict[str, Any] = {"task": pred.task, "params": pred.params, "std_encoded": pred.std,
                           "value": pred.value, "value_std": pred.value_std, "feasible": pred.feasible,
                           "projected": pred.projected, "tuned_task": model.task_index(pred.task) is not None}
    if args.params:
        mean, std = predict(model, task, parse_assignments(args.params))
        out["at_params"] = {"params": parse_assignments(args.params), "value": mean, "value_std": std}
    out["accuracy"] = (model.accuracy or {}).get("summary")
    if args.json:
        print(json.dumps(out, default=str))
        return 0
    print(f"task: {pred.task}" + ("  (a tuned task)" if out["tuned_task"] else "  (new task: transferred)"))
    rows = [{"parameter": k, "predicted": v, "std (encoded units)": pred.std[k]} for k, v in pred.params.items()]
    print(format_table(rows))
    print(f"predicted objective there: {pred.value:.6g} +- {pred.value_std:.3g}")
    if pred.feasible is None:
        print("constraints: not checked (pass --problem to load them)")
    elif pred.projected:
        print("constraints: the raw prediction was infeasible and was moved to the nearest feasible point")
    if "at_params" in out:
        a = out["at_params"]
        print(f"predicted objective at {a['params']}: {a['value']:.6g} +- {a['value_std']:.3g}")
    acc = out["accuracy"]
    if acc:
        def fmt(v: Any) -> str:
            return "-" if v is None else f"{v:.3g}"

        print(f"held-out accuracy (leave one of {acc['n_tasks']} tasks out): median |error|/range "
              f"{fmt(acc['median_value_range_error'])}, median 2-std coverage {fmt(acc['median_coverage_2std'])}, "
              f"median relative error of the predicted best {fmt(acc['median_best_ape'])}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="gptask", description="Multitask GP autotuning for HPC applications")
    p.add_argument("-v", "--verbose", action="count", default=0, help="more logging (-v info, -vv debug)")
    sub = p.add_subparsers(dest="command", required=True)

    t = sub.add_parser("tune", help="tune a problem for a set of tasks (MLA)")
    t.add_argument("--problem", default="demo", help="demo | branin | sphere | module:function")
    t.add_argument("--problem-options", default="", help="k=v,... passed to the problem function")
    t.add_argument("--tasks", type=int, default=5, help="number of LHS tasks (ignored with --task)")
    t.add_argument("--task", action="append", help="an explicit task k=v,... (repeatable)")
    t.add_argument("--budget", type=int, default=20)
    t.add_argument("--n-initial", type=int, default=None)
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--history", default=None, help="SQLite file (resumes when it exists)")
    t.add_argument("--repeats", type=int, default=1)
    t.add_argument("--aggregate", default="min", choices=["min", "median", "mean"])
    t.add_argument("--timeout", type=float, default=None, help="seconds per run")
    t.add_argument("--n-latent", type=int, default=None)
    t.add_argument("--plot", default=None, help="write the convergence plot (PNG) here")
    t.add_argument("--save-model", default=None, help="write the model (JSON) here")
    t.add_argument("--no-progress", action="store_true")
    t.set_defaults(func=_cmd_tune)

    s = sub.add_parser("show", help="best launch and recommended configuration per task of a history")
    s.add_argument("history")
    s.set_defaults(func=_cmd_show)

    pl = sub.add_parser("plot", help="convergence plot (PNG) of a history")
    pl.add_argument("history")
    pl.add_argument("--out", default=None)
    pl.set_defaults(func=_cmd_plot)

    pr = sub.add_parser("predict", help="predicted optimum of a task from a saved model (no runs)")
    pr.add_argument("model", help="model file written by tune --save-model / result.save_model")
    pr.add_argument("--task", required=True, help="the task, k=v,...")
    pr.add_argument("--params", default=None, help="also predict the objective at this configuration, k=v,...")
    pr.add_argument("--problem", default=None, help="demo | branin | sphere | module:function, to check constraints")
    pr.add_argument("--problem-options", default="", help="k=v,... passed to the problem function")
    pr.add_argument("--json", action="store_true", help="print one JSON line")
    pr.set_defaults(func=_cmd_predict)

    e = sub.add_parser("export", help="export a history as CSV or JSON")
    e.add_argument("history")
    e.add_argument("--format", choices=["csv", "json"], default="csv")
    e.add_argument("--out", default=None)
    e.set_defaults(func=_cmd_export)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    level = logging.WARNING - 10 * min(args.verbose, 2)
    logging.basicConfig(level=level, format="%(asctime)s %(name)s %(levelname)s: %(message)s")
    try:
        return int(args.func(args) or 0)
    except (ValueError, TypeError, FileNotFoundError) as exc:
        print(f"gptask: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
