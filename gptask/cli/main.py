"""The ``gptask`` command line: tune, ask, tell, release, show, plot, export, fit, predict, and the
insight commands sensitivity, report, export-table (:mod:`gptask.cli.insight`).

    gptask tune --problem demo --tasks 5 --budget 20 --history runs.sqlite
    gptask tune --problem mypkg.mymod:make_problem --tasks 8 --budget 20 --history runs.sqlite
    gptask tune --problem demo --tasks 8 --budget 20 --workers 4      # 4 runs at a time, asynchronously
    gptask ask runs.sqlite --problem mymod:make_problem --tasks 4 --budget 20 -n 4   # PENDING trials
    gptask tell runs.sqlite 17 0.342                  # or: gptask tell runs.sqlite 17 --failed "exit 139"
    gptask tell runs.sqlite 17 time=0.342,memory=2.1e8  # a problem with named outputs: every one (or JSON)
    gptask release runs.sqlite 17                     # give a trial back (its job was cancelled)
    gptask show runs.sqlite
    gptask plot runs.sqlite --out convergence.png
    gptask export runs.sqlite --format csv
    gptask tune --problem demo --tasks 8 --budget 20 --save-model demo.json
    gptask predict demo.json --task t=4.2            # TLA1: predicted optimum, no run
    gptask fit --problem mymod:make_problem runs.csv --value time --save-model M.json   # no run
    gptask sensitivity runs.sqlite                   # which parameters matter (Sobol indices)
    gptask report runs.sqlite --out report.html      # one self-contained page for people
    gptask export-table M.json --grid m=1000:4000:8,n=1000:4000:8 --format c-header --out table.h

``--problem module:function`` imports ``module`` and calls ``function()`` (it must return a
``gptask.Problem``); the current directory is searched first, as ``python -m`` does, so a
``mymod.py`` next to where the command runs is found. Nothing given on the command line is
evaluated as code.

``--workers K`` runs the objective in a pool of K processes and keeps K trials running (the
asynchronous loop of :mod:`gptask.tuning.asynchronous`); each worker builds the problem again from
``--problem`` and ``--problem-options`` (:class:`NamedObjective`), so the objective itself need not
pickle. For MPI ranks as workers, see the ``MPIPoolExecutor`` example of the README.

``ask`` writes its trials to the history as PENDING and prints them (``ID<TAB>task<TAB>params``
per line, ``k=v,...``; ``--json``: a list of objects with ``id``, ``task_index``, ``task``,
``params``); the first ask creates the history with ``--tasks``, ``--budget``, ``--n-initial``
and ``--seed``, later asks default to what the history holds. Without ``--lease`` an asked trial
is held until it is told or released. Nothing printed means nothing to ask now (a line on stderr
says whether the run is done or waits for pending trials).

Exit status: 0 done; 2 bad input (the message names it); 3 ``tune`` stopped by its failure rule
(the first evaluations all failed for the same reason, :mod:`gptask.evaluation.failed_runs`); 141 when the
reader of stdout left early (``gptask show H | head``), quietly, as tools killed by SIGPIPE do.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import importlib
import inspect
import json
import logging
import math
import os
import re
import signal
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..results.rebuild import result_from_history

__all__ = ["main", "parse_assignments", "format_assignments", "format_table", "best_table", "result_from_history",
           "recommendation_table", "NamedObjective", "NamedObjectiveWithDeadline"]


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

    Keys are identifiers, or JSON strings in double quotes for any other name (``"a,b"=1``, a name
    holding a comma, an equals sign, a tab or a space); values are ints, finite floats, true/false or
    strings; a value in double quotes is a JSON string, taken as it is (``alg="a,b"``,
    ``flag="true"``): what :func:`format_assignments` writes for text with a comma, a quote, an
    equals sign, padding or that would read as a number. An empty text gives ``{}``; a malformed
    item or a repeated key raises ``ValueError`` naming ``what``.
    """
    out: dict[str, Any] = {}
    if not text or not text.strip():
        return out
    decoder = json.JSONDecoder()
    pos = 0
    while True:
        bad = f"{what}: expected comma-separated key=value pairs"
        lead = len(text[pos:]) - len(text[pos:].lstrip())
        if text[pos + lead:].startswith('"'):  # a quoted key: up to its closing quote, then '='
            try:
                key, stop = decoder.raw_decode(text, pos + lead)
            except json.JSONDecodeError:
                raise ValueError(f"{bad}, got an unterminated quoted name in {text!r}") from None
            after = text[stop:].lstrip()
            if not after.startswith("="):
                raise ValueError(f"{bad}, got a quoted name {key!r} without '=' after it in {text!r}")
            start_value = len(text) - len(after) + 1
            quoted_key = True
        else:
            eq = text.find("=", pos)
            comma = text.find(",", pos)
            if eq < 0 or 0 <= comma < eq:
                item = text[pos:] if comma < 0 else text[pos:comma]
                raise ValueError(f"{bad}, got {item!r} in {text!r}")
            key, start_value, quoted_key = text[pos:eq].strip(), eq + 1, False
        value_text = text[start_value:]
        if value_text.lstrip().startswith('"'):  # a quoted value: up to its closing quote
            start = start_value + len(value_text) - len(value_text.lstrip())
            try:
                parsed, stop = decoder.raw_decode(text, start)
            except json.JSONDecodeError:
                raise ValueError(f"{bad}, got an unterminated quoted value in {text!r}") from None
            rest = text[stop:]
            if rest.strip() and not rest.lstrip().startswith(","):
                raise ValueError(f"{bad}, got {rest.strip()!r} after a quoted value in {text!r}")
            end = -1 if not rest.strip() else stop + rest.index(",")
            value_out: Any = parsed
        else:
            comma = text.find(",", start_value)
            end = comma
            value = (text[start_value:] if comma < 0 else text[start_value:comma]).strip()
            if not value:
                item = text[pos:] if comma < 0 else text[pos:comma]
                raise ValueError(f"{bad}, got {item.strip()!r} in {text!r}")
            value_out = _scalar(value)
        if not quoted_key and not _KEY.fullmatch(key):
            item = text[pos:] if end < 0 else text[pos:end]
            raise ValueError(f"{bad}, got {item!r} in {text!r} (a name that is not an identifier goes in double "
                             "quotes: \"a b\"=1)")
        if key in out:
            raise ValueError(f"{what}: key {key!r} given twice in {text!r}")
        out[key] = value_out
        if end < 0:
            return out
        pos = end + 1


def _needs_quotes(value: str) -> bool:
    return (value != value.strip() or not value or any(c in value for c in ',="\\') or not value.isprintable()
            or not isinstance(_scalar(value), str))


def format_assignments(values: Mapping[str, Any]) -> str:
    """``{"m": 5000, "alg": "ring"}`` -> ``"m=5000,alg=ring"``, what :func:`parse_assignments` reads back to
    the same values: text that holds a comma, a quote, an equals sign, a backslash, padding or a
    control character, or that would read as a number or a boolean, is written as a JSON string, and
    so is a name that is not an identifier (a tab, a comma, an equals sign, a space in it): the line
    never holds a raw tab, so ``gptask ask``'s tab-separated columns stay three."""
    def text(v: Any) -> str:
        if isinstance(v, bool):
            return json.dumps(v)
        if isinstance(v, str) and _needs_quotes(v):
            return json.dumps(v)
        return str(v)

    return ",".join(f"{k if _KEY.fullmatch(k) else json.dumps(k)}={text(v)}" for k, v in values.items())


def format_table(rows: Sequence[dict[str, Any]], unit: str = "", value_columns: Sequence[str] = ()) -> str:
    """A plain text table of dict rows (union of keys, in first-seen order; gains in percent; the
    unit in the headers of ``value_columns``): :func:`gptask.results.table.format_rows`."""
    from ..results.table import format_rows

    return format_rows(rows, unit, value_columns)


#: what --problem accepts, for its error messages
_PROBLEM_TAKES = ("--problem takes demo, branin, sphere (the built-in families) or module:function, where the "
                  "module is a file of your project (found from the current directory or PYTHONPATH) or an "
                  "installed package, never Python's standard library, and the function (a plain Python function, "
                  "called with --problem-options as keywords) returns a gptask.Problem, or module:name of a "
                  "gptask.Problem itself")


def load_problem(spec: str, options: dict[str, Any] | None = None):
    """``demo``/``branin``/``sphere`` or ``module:function``; ``function(**options)`` -> Problem."""
    from ..problem.functions import FAMILIES
    from ..problem.definition import Problem

    options = options or {}
    if spec in FAMILIES:
        problem = FAMILIES[spec][0](**options)
    else:
        if ":" not in spec:
            raise ValueError(f"--problem must be one of {sorted(FAMILIES)} or module:function, got {spec!r}")
        mod_name, fn_name = spec.split(":", 1)
        top = mod_name.split(".")[0]
        if top in sys.stdlib_module_names or top in sys.builtin_module_names:
            raise ValueError(f"--problem {spec}: {top!r} is a module of Python's standard library; {_PROBLEM_TAKES}")
        if os.getcwd() not in sys.path and "" not in sys.path:
            # last, not first as `python -m` does: a module next to the user is found, but a file there
            # named like an installed package (pyswarms.py, numpy.py) never replaces it
            sys.path.append(os.getcwd())
        try:
            module = importlib.import_module(mod_name)
        except ModuleNotFoundError as exc:
            raise ValueError(f"--problem {spec}: cannot import {exc.name!r} (searched the current directory "
                             "and PYTHONPATH; add the module's directory to PYTHONPATH)") from None
        fn = getattr(module, fn_name, None)
        if isinstance(fn, Problem):
            if options:
                raise ValueError(f"--problem {spec} is a Problem, not a function: it takes no --problem-options")
            return fn
        if not callable(fn):
            raise ValueError(f"{mod_name} has no callable {fn_name!r}")
        if not (inspect.isfunction(fn) or inspect.isclass(fn) and issubclass(fn, Problem)):
            raise ValueError(f"--problem {spec}: {fn_name!r} is a {type(fn).__name__}, not a function defined in "
                             f"Python; {_PROBLEM_TAKES}")
        home = (getattr(fn, "__module__", None) or "").split(".")[0]
        if home in sys.stdlib_module_names or home in sys.builtin_module_names:
            raise ValueError(f"--problem {spec}: {fn_name!r} comes from {home!r}, a module of Python's standard "
                             f"library; {_PROBLEM_TAKES}")
        problem = fn(**options)
    if not isinstance(problem, Problem):
        raise TypeError(f"{spec} returned {type(problem).__name__}, not a gptask.Problem")
    return problem


_LOADED: dict[str, Any] = {}


class NamedObjective:
    """The objective of the problem ``spec`` (``load_problem(spec, options)``), loaded on first call
    in each process: what ``gptask tune --workers`` sends to its worker processes instead of the
    objective itself (a demo's lambda or a closure does not pickle; a name and options do)."""

    def __init__(self, spec: str, options: Mapping[str, Any]) -> None:
        self.spec, self.options = spec, dict(options)

    def objective(self) -> Any:
        key = json.dumps([self.spec, self.options], sort_keys=True)
        if key not in _LOADED:
            _LOADED[key] = load_problem(self.spec, self.options).objective
        return _LOADED[key]

    def __call__(self, task: dict, params: dict) -> Any:
        return self.objective()(task, params)


def _pool_worker_start(spec: str, options: Mapping[str, Any]) -> None:
    """Start of a ``--workers`` pool process: Ctrl-C is the tuner's to handle (it stops the runs and
    releases their trials), and the problem is loaded once here, before the runs are forked from it."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    NamedObjective(spec, options).objective()


class NamedObjectiveWithDeadline(NamedObjective):
    """A :class:`NamedObjective` whose objective takes the pruning ``deadline`` keyword."""

    def __call__(self, task: dict, params: dict, deadline: float | None = None) -> Any:  # type: ignore[override]
        return self.objective()(task, params, deadline=deadline)


def best_table(history) -> list[dict[str, Any]]:
    """One row per task from a history (a Storage): task values, best parameters, best value, the
    default configuration's value and the gain over it (when the history records a default), counts."""
    from ..results.baseline import default_values, gain, stored_defaults
    from ..data.trials import Status

    recs = [t for t in history.trials() if t.status.finished]
    defaults = stored_defaults(history)
    dvalues = default_values(recs, defaults) if any(d is not None for d in defaults) else None
    rows = []
    for i, task in enumerate(history.tasks()):
        mine = [r for r in recs if r["task_index"] == i]
        ok = [r for r in mine if r["status"] == Status.COMPLETE]
        row: dict[str, Any] = {"task": i, **task}
        if ok:
            b = min(ok, key=lambda r: r["value"])
            row.update(b["params"])
            row["best"] = b["value"]
        else:
            row["best"] = None
        if dvalues is not None:
            row["default"] = dvalues[i]
            row["gain"] = gain(dvalues[i], row["best"])
        row["evals"] = len(mine)
        row["failed"] = sum(r["status"] == Status.FAILED for r in mine)
        rows.append(row)
    return rows


def machine_lines(machines: Mapping[int, dict], trials: Sequence[Any]) -> list[str]:
    """What ``gptask show`` says of the machines a history's trials ran on: one line per machine
    record (its trials, its description, Python and packages), and a warning line when the trials
    come from more than one machine."""
    from ..data.provenance import history_rows, machine_groups

    if not machines:
        return ["machine: not recorded (trials told before gptask recorded machines, or with provenance=None)"]
    out = [f"{label}: {text}" for label, text in history_rows(machines, trials)]
    kinds = machine_groups(machines)
    if len(kinds) > 1:
        out.append(f"warning: the trials come from {len(kinds)} different machines (mixed on request)")
    return out


def front_text(result: Any) -> str:
    """Each task's Pareto front (``result.pareto(i)``) as lines of text: its configurations with
    their observed outputs, best primary objective first."""
    from ..core.labels import task_label

    lines = []
    for i, task in enumerate(result.tasks):
        front = result.pareto(i)
        lines.append(f"front of task {i} ({task_label(task)}): {len(front)} configuration(s)"
                     + (" meeting the limits" if result.problem.outputs.limits else ""))
        if front:
            rows = [{**p.params, **p.values, "evaluations": p.evaluations} for p in front]
            lines.append(format_table(rows))
    return "\n".join(lines)


def recommendation_table(result: Any) -> list[dict[str, Any]]:
    """One row per task with a complete evaluation: its recommendation by the one rule of
    :mod:`gptask.results.recommend` (``result.recommend(i)``, which reads the confirmation runs already
    made), as :func:`gptask.results.recommend.recommendation_row` writes it."""
    from ..results.recommend import recommendation_table as table

    return table(result, progress=False)


def _progress_logging(quiet: bool) -> None:
    """Progress lines (one per iteration when stderr is not a terminal) unless ``quiet``."""
    from ..core.progress import LOGGER_NAME

    logging.getLogger(LOGGER_NAME).setLevel(logging.WARNING if quiet else logging.INFO)


def _check_outputs(args: argparse.Namespace) -> None:
    from ..core.output_files import check_outputs
    from ..results.plots import plot_formats

    check_outputs({"--plot": args.plot, "--save-model": args.save_model}, {"the history": args.history},
                  {"--plot": plot_formats()}, models={"--save-model"})


def _cmd_tune(args: argparse.Namespace) -> int:
    from concurrent.futures import ProcessPoolExecutor

    from ..evaluation.noise import accepts_deadline
    from ..results.plots import plot_convergence
    from ..tuning import tune

    options = parse_assignments(args.problem_options)
    problem = load_problem(args.problem, options)
    _check_outputs(args)
    if args.workers is not None and args.workers < 1:
        raise ValueError(f"--workers must be >= 1, got {args.workers}")
    tasks: Any = args.tasks
    if args.task:
        tasks = [parse_assignments(t) for t in args.task]
    quiet = args.quiet or args.no_progress
    _progress_logging(quiet)
    kwargs = dict(tasks=tasks, budget=args.budget, n_initial=args.n_initial, seed=args.seed, history=args.history,
                  repeats=args.repeats, aggregate=args.aggregate, timeout=args.timeout, n_latent=args.n_latent,
                  progress=not quiet, max_time=args.max_time, target=args.target, max_failures=args.max_failures,
                  mix_machines=args.mix_machines, failure_model=failure_model_arg(args.failure_model))
    if args.executor == "srun":
        if args.workers is not None:
            raise ValueError("--workers is for runs on this machine; with --executor srun every evaluation is a "
                             "job step on the allocation's nodes")
        result = _tune_in_allocation(args, tune, problem, kwargs)
    elif args.requeue or args.on_stop is not None:
        raise ValueError("--requeue and --on-stop need --executor srun (a campaign inside a Slurm allocation)")
    elif args.workers is None:
        result = tune(problem, **kwargs)
    else:
        named = (NamedObjectiveWithDeadline if accepts_deadline(problem.objective) else NamedObjective)(
            args.problem, options)
        sent = copy.copy(problem)  # the same problem (default, unit, features) with a picklable objective
        sent.objective = named
        with ProcessPoolExecutor(args.workers, initializer=_pool_worker_start, initargs=(args.problem, options)) as pool:
            result = tune(sent, executor=pool, max_in_flight=args.workers, **kwargs)
    print(result.table())
    for i, reason in sorted(result.closed.items()):
        print(f"task {i} stopped early: {reason}")
    if result.pending:
        print(f"{len(result.pending)} trial(s) pending (ids {[t.id for t in result.pending]}): run the same "
              "command again to finish them")
    status = 0
    if args.save_model:
        _save_model(result, args.save_model, quiet, args.problem, options)
    if args.plot:
        try:
            defaults = [None if (d := result.default(i)) is None else d[1] for i in range(len(result.tasks))]
            plot_convergence(result.history, args.plot, title=f"{problem.name}: best so far per task",
                             tasks=result.tasks, defaults=defaults, unit=problem.unit)
            print(f"convergence plot: {args.plot}")
        except (OSError, ValueError) as exc:
            print(f"gptask: error: the convergence plot failed: {exc}", file=sys.stderr)
            status = 1
    return status


def _tune_in_allocation(args: argparse.Namespace, tune: Any, problem: Any, kwargs: dict) -> Any:
    """``tune(problem, executor=SlurmSteps(...))`` inside this Slurm allocation (ClusterError, a
    ValueError, without one); with ``--requeue``, a stop by USR1 or SIGTERM requeues the job once
    the history is closed."""
    from ..tuning.cluster import SlurmSteps, requeue

    executor = SlurmSteps(on_stop=args.on_stop or "cancel")
    try:
        with executor:
            result = tune(problem, executor=executor, **kwargs)
    except SystemExit as exc:  # SIGTERM (the loop's handler): the history is closed by now
        if args.requeue and exc.code == 128 + signal.SIGTERM:
            requeue()
        raise
    if executor.stopped_by:
        print(f"gptask: {executor.stopped_by}: {len(result.pending)} trial(s) left pending", file=sys.stderr)
        if args.requeue:
            requeue()
    return result


def _cmd_slurm_script(args: argparse.Namespace) -> int:
    from ..tuning.cluster.script import slurm_script

    tune_args = list(args.tune_args)
    if tune_args[:1] == ["--"]:
        tune_args = tune_args[1:]
    text = slurm_script(tune_args, args.nodes, args.time, args.signal_seconds, requeue=not args.no_requeue,
                        on_stop=args.on_stop, job_name=args.job_name, partition=args.partition,
                        account=args.account)
    if args.output:
        Path(args.output).write_text(text)
        print(f"sbatch script: {args.output} (submit it with: sbatch {args.output})", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


def _save_model(result: Any, path: str, quiet: bool, spec: str, options: Mapping[str, Any]) -> None:
    """``result.save_model(path)``, saying first on stderr that the accuracy report is computed (a
    leave-one-task-out refit per task: about 2 s each for the 8 tasks of the shipped 16-core data).
    The file's metadata records ``--problem`` and ``--problem-options`` (``gptask predict`` names
    them when it is given another problem)."""
    import time

    if not quiet:
        print(f"gptask: saving the model to {path} with its leave-one-task-out accuracy (a refit per task, "
              f"{len(result.tasks)} tasks)", file=sys.stderr, flush=True)
    t0 = time.perf_counter()
    result.save_model(path, metadata={"problem": {"factory": spec, "options": dict(options)}})
    print(f"model file: {path}" + ("" if quiet else f" (written in {time.perf_counter() - t0:.1f} s)"))


def _tuner_for_ask(args: argparse.Namespace):
    """A Tuner on ``args.history`` whose settings default to what the history holds."""
    from ..data.storage import Owner, is_url, open_history
    from ..tuning import Tuner

    problem = load_problem(args.problem, parse_assignments(args.problem_options))
    stored: dict[str, Any] = {}
    if is_url(args.history) or Path(args.history).exists():
        with contextlib.suppress(FileNotFoundError), open_history(args.history, read_only=True) as h:
            stored = {**(h.get_meta("settings") or {}), "seed": h.get_meta("seed"), "tasks": h.tasks()}
    tasks: Any = [parse_assignments(t) for t in args.task] if args.task else (
        args.tasks if args.tasks is not None else stored.get("tasks") or 5)
    budget = args.budget if args.budget is not None else stored.get("budget", 20)
    n_initial = args.n_initial if args.n_initial is not None else stored.get("n_initial")
    seed = args.seed if args.seed is not None else (stored.get("seed") or 0)
    target = args.target if args.target is not None else stored.get("target")
    failure_model = (failure_model_arg(args.failure_model) if args.failure_model is not None
                     else stored.get("failure_model", True))
    # an ask runs nothing: the machine is the one that tells (gptask tell --machine)
    return Tuner(problem, tasks, budget, n_initial, seed, args.history, target=target,
                 owner=Owner.detached("gptask ask"), lease=args.lease, provenance=None,
                 failure_model=failure_model)


def _cmd_ask(args: argparse.Namespace) -> int:
    tuner = _tuner_for_ask(args)
    try:
        trials = tuner.ask(args.n)
        if not trials:
            pending = tuner.pending
            if not pending and tuner.done:
                print("gptask: nothing to ask: every task is done", file=sys.stderr)
            else:
                print(f"gptask: nothing to ask now: {len(pending)} trial(s) pending (ids {[t.id for t in pending]})",
                      file=sys.stderr)
    finally:
        tuner.close(release=False)  # the shell holds the trials until it tells them
    if args.json:
        print(json.dumps([{"id": t.id, "task_index": t.task_index, "task": dict(t.task), "params": dict(t.params)}
                          for t in trials]))
    else:
        for t in trials:
            print(f"{t.id}\t{format_assignments(t.task)}\t{format_assignments(t.params)}")
    return 0


def _told_values(text: str, spec: Any, where: str) -> dict[str, float]:
    """The outputs a ``gptask tell`` VALUE gives for a problem with named outputs ``spec`` (an
    :class:`gptask.problem.objectives.Outputs`): ``time=0.5,memory=2e8`` (:func:`parse_assignments`) or a
    JSON object; every output, finite numbers. ValueError naming what is wrong otherwise (a bare
    number among them: it would store a result without the other outputs)."""
    how = (f"the problem of {where} has the outputs {', '.join(spec.names)}: give every one, as "
           f"{','.join(f'{n}=NUMBER' for n in spec.names)} or a JSON object; report a failed run with --failed REASON")
    stripped = text.strip()
    if stripped.startswith(("{", "[")):
        try:
            returned: Any = json.loads(stripped)
        except json.JSONDecodeError as exc:
            raise ValueError(f"VALUE {text!r} is not valid JSON ({exc.msg}); {how}") from None
    elif "=" in stripped:
        returned = parse_assignments(stripped, "VALUE")
    else:
        raise ValueError(f"VALUE {text!r} is not a value of every output; {how}")
    values, why = spec.parse(returned)
    if values is None:
        raise ValueError(f"VALUE {text!r}: {why.replace('objective returned', 'got', 1)}; {how}")
    return values


def _cmd_tell(args: argparse.Namespace) -> int:
    from ..evaluation.evaluate import Outcome
    from ..problem.objectives import Outputs
    from ..data.storage import open_history

    if args.failed is not None and args.value is not None:
        raise ValueError("give a VALUE or --failed REASON, not both")
    if args.failed is None and args.value is None:
        raise ValueError("give the VALUE the run measured, or --failed REASON")
    if args.duration is not None and not args.duration >= 0:
        raise ValueError(f"--duration must be >= 0 seconds, got {args.duration}")
    from .machines import tell_record
    from ..data.provenance import check_history

    machine = tell_record(args.machine)
    with open_history(args.history) as h:
        named = h.signature.get("outputs")
        if args.failed is not None:
            outcome = Outcome.of(None, args.failed or "reported as failed")
        elif named:  # several outputs: every one of them, never one number alone
            spec = Outputs.from_json(named)
            values = _told_values(args.value, spec, f"history {args.history}")
            outcome = Outcome.of(values, outputs=spec)
        else:
            try:
                number = float(args.value)
            except ValueError:
                raise ValueError(f"VALUE must be a number, got {args.value!r}; report a failed run with "
                                 "--failed REASON") from None
            outcome = Outcome.of(number)
        check_history(h.machines(), machine, args.mix_machines, f"history {args.history}", "--mix-machines")
        t = h.finish(args.id, outcome.status, outcome.value, outcome.samples, outcome.reason, outcome.extra,
                     args.duration, machine=machine, values=outcome.values)
    shown = (f"values {format_assignments(outcome.values)}" if outcome.values else f"value {t.value!r}") if t.value is not None \
        else f"reason {t.reason!r}"
    print(f"trial {t.id}: {t.status.value}, {shown}")
    return 0


def _cmd_release(args: argparse.Namespace) -> int:
    from ..data.storage import open_history

    with open_history(args.history) as h:
        released = h.release(ids=args.ids, force=args.force)
    print(f"released trial(s) {released}: the next ask proposes them again")
    return 0


def _cmd_show(args: argparse.Namespace) -> int:
    from ..core.labels import stored_unit, task_label
    from ..results.recommend import COLUMNS_NOTE, DEFAULT_AGGREGATE, RULE, VALUE_COLUMNS, nothing_to_recommend
    from ..sources.selection import SourceSelection
    from ..sources.multisource import SELECTION_META
    from ..data.storage import open_history
    from ..data.storage.owner import Owner
    from ..data.trials import Status
    from ..evaluation.failed_runs import reasons_by_task

    with open_history(args.history, read_only=True) as h:
        trials = h.trials()
        pending = [t for t in trials if t.status is Status.PENDING]
        result = result_from_history(h)
        unit = stored_unit(h)
        extra = f"  confirmation runs: {len(result.confirmations)}" if result.confirmations else ""
        print(f"problem: {h.signature.get('name')}  tasks: {len(h.tasks())}  "
              f"evaluations: {len(trials) - len(pending)}  pending: {len(pending)}{extra}"
              + (f"  unit: {unit}" if unit else ""))
        for line in machine_lines(h.machines(), trials):
            print(line)
        selection = h.get_meta(SELECTION_META)
        if selection is not None:
            print("sources judged by this machine's initial designs (select_sources=True):")
            for line in SourceSelection.from_json(selection["selection"]).lines():
                print(f"  {line}")
        print("raw best (the single best launch per task; gain: over the default as measured while tuning):")
        print(format_table(best_table(h), unit, ("best", "default")))
        for i, reason in sorted(h.closed_tasks().items()):
            print(f"task {i}: {reason}")
        failures = reasons_by_task(trials)
        if failures:
            print("failed evaluations by reason:")
            for i, counts in failures.items():
                why = "; ".join(f"{reason} ({n})" for reason, n in counts.most_common())
                print(f"  task {i} ({task_label(h.tasks()[i])}): {sum(counts.values())} failed: {why}")
    spec = result.problem.outputs
    if spec is not None:
        print(f"outputs: {', '.join(f'{n} ({spec.direction(n)})' if n in spec.objectives else n for n in spec.names)}"
              + (f"; limits: {', '.join(map(str, spec.limits))}" if spec.limits else ""))
        if len(spec.objectives) > 1:
            print(front_text(result))
    if result.model is None and not result.confirmations:
        print("recommended: none yet (no model was fitted)")
    else:
        print(f"recommended ({RULE.format(aggregate=DEFAULT_AGGREGATE)}"
              + ("; on the front of several objectives: equal weights on the objectives scaled over the front"
                 if spec is not None and len(spec.objectives) > 1 else "")
              + ("; only configurations meeting every limit" if spec is not None and spec.limits else "") + "):")
        print(format_table(recommendation_table(result), unit, VALUE_COLUMNS))
        print(COLUMNS_NOTE.format(aggregate=DEFAULT_AGGREGATE))
        for i, task in enumerate(result.tasks):
            why = nothing_to_recommend(result, i)
            if why is not None and result.records(i):
                print(f"task {i} ({task_label(task)}): {why}: nothing to recommend")
    for t in pending:
        holder = "released" if t.owner is None else Owner.from_text(t.owner).describe()
        print(f"pending trial {t.id}: task {t.task_index} {format_assignments(t.params)} ({holder}, "
              f"attempt {t.attempts})")
    return 0


def _cmd_plot(args: argparse.Namespace) -> int:
    from ..results.baseline import default_values, stored_defaults
    from ..core.labels import stored_unit
    from ..core.output_files import check_outputs
    from ..results.plots import plot_convergence, plot_formats
    from ..data.storage import is_url, open_history

    out = args.out or str(Path("history" if is_url(args.history) else args.history).with_suffix(
        ".front.png" if args.front else ".png"))
    check_outputs({"--out": out}, {"the history": args.history}, {"--out": plot_formats()})
    with open_history(args.history, read_only=True) as h:
        if args.front:
            from ..results.plots_front import plot_fronts

            plot_fronts(result_from_history(h), out, title=f"{h.signature.get('name')}: front per task")
            print(out)
            return 0
        records = [t for t in h.trials() if t.status.finished]
        plot_convergence(records, out, title=f"{h.signature.get('name')}: best so far per task", tasks=h.tasks(),
                         defaults=default_values(records, stored_defaults(h)), unit=stored_unit(h))
    print(out)
    return 0


def _cmd_export(args: argparse.Namespace) -> int:
    from ..core.output_files import check_outputs
    from ..data.storage import open_history
    from ..data.storage.export import to_csv, to_json

    check_outputs({"--out": args.out}, {"the history": args.history})
    with open_history(args.history, read_only=True) as h:
        text = to_csv(h) if args.format == "csv" else to_json(h)
    if args.out:
        Path(args.out).write_text(text)
    else:
        sys.stdout.write(text)
    return 0


def _cmd_fit(args: argparse.Namespace) -> int:
    from ..sources.importing import fit
    from ..sources.importing import import_runs
    from ..core.output_files import check_outputs, same_file

    options = parse_assignments(args.problem_options)
    problem = load_problem(args.problem, options)
    check_outputs({"--save-model": args.save_model}, {"the data": args.data, "the history": args.history},
                  models={"--save-model"})
    if args.history and same_file(args.history, args.data):
        raise ValueError(f"--history {args.history} is the data ({args.data}): importing would destroy it; give "
                         "another file name")
    from .machines import tell_record

    reading = {"value": args.value, "status": args.status, "aggregate": args.aggregate,
               "skip_invalid": args.skip_invalid, "mix_machines": args.mix_machines,
               "machine": None if args.machine is None else tell_record(args.machine, label_ok=True)}
    if args.history:
        report = import_runs(problem, args.data, args.history, **reading)
        print(f"history {args.history}: {report.summary()}")
    _progress_logging(args.quiet)
    result = fit(problem, args.data, n_latent=args.n_latent, output_transform=args.output_transform,
                 restarts=args.restarts, seed=args.seed, progress=not args.quiet, **reading)
    print(result.table())
    print(f"model: {result.model.n_latent} latent process(es), {result.model.kernel} kernel, "
          f"{'log' if result.transform.use_log else 'no'} output transform, {int(result.model.n_points.sum())} points",
          flush=True)
    if args.save_model:
        _save_model(result, args.save_model, args.quiet, args.problem, options)
    return 0


def _default_lines(problem: Any, model: Any, task: dict, pred: Any) -> list[str]:
    """What ``gptask predict`` says about the problem's default configuration for ``task``."""
    from ..results.baseline import gain
    from ..core.labels import format_gain
    from ..transfer import predict

    try:
        default = problem.default_for(task)
    except ValueError as exc:
        return [f"default configuration: not usable here ({exc})"]
    if default is None:
        return []
    mean, std = predict(model, task, default)
    g = gain(mean, pred.value)
    unit = f" {problem.unit}" if problem.unit else ""
    return [f"default configuration {format_assignments(default)}: predicted {mean:.6g} +- {std:.3g}{unit}",
            "predicted gain of the predicted optimum over it: " + format_gain(g)]


def _cmd_predict(args: argparse.Namespace) -> int:
    from ..transfer.model_io import ModelFileError, load_model, read_metadata
    from ..transfer import predict
    from ..transfer import predict_optimum

    problem = load_problem(args.problem, parse_assignments(args.problem_options)) if args.problem else None
    try:
        model = load_model(args.model, problem=problem)
    except ModelFileError as exc:
        built = read_metadata(args.model).get("problem") if problem is not None and "another problem" in str(exc) \
            else None
        if isinstance(built, dict) and built.get("factory"):
            raise ModelFileError(f"{exc}. The model was saved from --problem {built['factory']}" + (
                f" --problem-options {format_assignments(built['options'])}" if built.get("options") else "")
                + f"; this command gave --problem {args.problem}"
                + (f" --problem-options {args.problem_options}" if args.problem_options else
                   " without --problem-options")) from None
        raise
    task = parse_assignments(args.task)
    pred = predict_optimum(model, task)
    out: dict[str, Any] = {"task": pred.task, "params": pred.params, "std_encoded": pred.std,
                           "value": pred.value, "value_std": pred.value_std, "feasible": pred.feasible,
                           "projected": pred.projected, "route": pred.route,
                           "tuned_task": model.task_index(pred.task) is not None}
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
    unit = f" {problem.unit}" if problem is not None and problem.unit else ""
    print(f"predicted objective there: {pred.value:.6g} +- {pred.value_std:.3g}{unit}")
    print("chosen by: " + ("the joint model (least predicted value among feasible candidates)" if pred.route == "joint"
                           else "TLA1 (one GP per parameter over the tuned tasks' best configurations)"))
    if pred.feasible is None:
        built = read_metadata(args.model).get("problem")
        hint = ""
        if isinstance(built, dict) and built.get("factory"):
            hint = f": --problem {built['factory']}" + (
                f" --problem-options {format_assignments(built['options'])}" if built.get("options") else "")
        print(f"constraints: not checked (pass --problem to load them{hint})")
    elif pred.projected:
        print("constraints: the raw prediction was infeasible and was moved to the nearest feasible point")
    if problem is not None:
        for line in _default_lines(problem, model, pred.task, pred):
            print(line)
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


def max_failures_arg(text: str) -> int | str:
    """``--max-failures``: "auto" or an integer >= 0."""
    if text == "auto":
        return text
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected 'auto' or an integer >= 0, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected 'auto' or an integer >= 0, got {text!r}")
    return value


def failure_model_arg(text: str) -> bool | float:
    """``--failure-model``: "on", "off" or the least probability of success of a proposal (a
    ValueError naming the option otherwise)."""
    from ..model.surrogate.failure_model import success_threshold

    if text in ("on", "off"):
        return text == "on"
    try:
        return success_threshold(float(text))
    except ValueError:
        raise ValueError(f"--failure-model must be 'on', 'off' or a probability p with 0.5 <= p < 1, got {text!r}") \
            from None


FAILURE_MODEL_HELP = ("'on' (default): once a run failed, a model of where runs fail keeps the search where success "
                      "is likelier than not; P (0.5 <= P < 1): cautious, every proposal, initial designs included, at "
                      "least P likely to succeed (fewer failed runs, e.g. 0.7); 'off': failures count as the worst value")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="gptask", description="Multitask GP autotuning for HPC applications")
    p.add_argument("-v", "--verbose", action="count", default=0, help="more logging (-v info, -vv debug)")
    sub = p.add_subparsers(dest="command", required=True)

    t = sub.add_parser("tune", help="tune a problem for a set of tasks (MLA)")
    t.add_argument("--problem", default="demo", help="demo | branin | sphere | module:function")
    t.add_argument("--problem-options", default="", help="k=v,... passed to the problem function")
    t.add_argument("--tasks", type=int, default=5, help="number of LHS tasks (ignored with --task)")
    t.add_argument("--task", action="append", help="an explicit task k=v,... (repeatable)")
    t.add_argument("--budget", type=int, default=20,
                   help="evaluations per task, initial design and the problem's default included (default 20)")
    t.add_argument("--n-initial", type=int, default=None,
                   help="evaluations of each task's initial Latin hypercube design before the model proposes "
                        "(default: half the budget)")
    t.add_argument("--seed", type=int, default=0,
                   help="seed of the tasks, designs, fits and searches; a history resumes only with its own seed "
                        "(default 0)")
    t.add_argument("--history", default=None,
                   help="SQLite file (resumes when it exists; several tune commands may share it)")
    t.add_argument("--repeats", type=int, default=1,
                   help="runs of the objective per evaluation, combined by --aggregate (default 1)")
    t.add_argument("--aggregate", default="min", choices=["min", "median", "mean"],
                   help="how the --repeats runs of one evaluation are combined (default min, for run times)")
    t.add_argument("--timeout", type=float, default=None, help="seconds per run")
    t.add_argument("--n-latent", type=int, default=None,
                   help="latent processes of the multitask model (LCM); default 1")
    t.add_argument("--max-failures", type=max_failures_arg, default="auto", metavar="K",
                   help="stop with exit status 3 when the first K evaluations all failed for the same reason "
                        "(the objective looks broken; finished trials stay in the history); 'auto' (default): "
                        "the number of tasks plus min(tasks, 5), at least 3; 0: never stop")
    t.add_argument("--failure-model", default="on", metavar="on|off|P",
                   help=FAILURE_MODEL_HELP)
    t.add_argument("--workers", type=int, default=None,
                   help="run the objective in K worker processes, K trials at a time (asynchronous)")
    t.add_argument("--max-time", type=float, default=None,
                   help="seconds for the whole run: no evaluation starts after it; unfinished trials stay pending")
    t.add_argument("--target", type=float, default=None, help="a task stops once its best value is <= TARGET")
    t.add_argument("--plot", default=None, help="write the convergence plot (PNG, PDF, SVG, ...) here")
    t.add_argument("--save-model", default=None, help="write the model (JSON) here")
    t.add_argument("--mix-machines", action="store_true",
                   help="accept this machine's trials in a history holding another machine's (refused otherwise)")
    t.add_argument("-q", "--quiet", action="store_true", help="no progress bar or per-iteration log lines")
    t.add_argument("--no-progress", action="store_true", help="same as --quiet")
    t.add_argument("--executor", choices=["srun"], default=None,
                   help="srun: inside a Slurm allocation, run each evaluation as an srun job step on free nodes, "
                        "as many at once as fit (the objective launches with gptask.tuning.cluster.current_step())")
    t.add_argument("--on-stop", choices=["cancel", "finish"], default=None,
                   help="with --executor srun, at a USR1 (sbatch --signal=B:USR1@S): cancel the running steps "
                        "(default; their trials stay pending) or let them finish")
    t.add_argument("--requeue", action="store_true",
                   help="with --executor srun: when USR1 or SIGTERM stops the campaign, requeue this Slurm job "
                        "(scontrol requeue) after closing the history; the requeued job resumes")
    t.set_defaults(func=_cmd_tune)

    ss = sub.add_parser("slurm-script", help="write an sbatch script running a tuning campaign in an allocation")
    ss.add_argument("--nodes", type=int, required=True, help="nodes of the allocation")
    ss.add_argument("--time", type=int, required=True, metavar="MINUTES", help="walltime of each job, in minutes")
    ss.add_argument("--signal-seconds", type=int, default=300,
                    help="USR1 this many seconds before the walltime (default 300, at least 60)")
    ss.add_argument("--no-requeue", action="store_true", help="do not requeue the job when the walltime comes")
    ss.add_argument("--on-stop", choices=["cancel", "finish"], default="cancel",
                    help="at the signal: cancel the running steps (default) or let them finish")
    ss.add_argument("--job-name", default="gptask", help="the job's name (default gptask)")
    ss.add_argument("--partition", default=None, help="#SBATCH --partition (default: the cluster's)")
    ss.add_argument("--account", default=None, help="#SBATCH --account (default: yours)")
    ss.add_argument("-o", "--output", default=None, help="write the script here (default: stdout)")
    ss.add_argument("tune_args", nargs=argparse.REMAINDER, metavar="-- TUNE ARGS",
                    help="the arguments of gptask tune (--problem ..., --history FILE required)")
    ss.set_defaults(func=_cmd_slurm_script)

    a = sub.add_parser("ask", help="write the next trials to a history as PENDING and print them")
    a.add_argument("history", help="SQLite file (created by the first ask)")
    a.add_argument("--problem", required=True, help="demo | branin | sphere | module:function")
    a.add_argument("--problem-options", default="", help="k=v,... passed to the problem function")
    a.add_argument("-n", type=int, default=None, help="at most this many trials (default: the rest of the initial designs, "
                   "else one search proposal per task)")
    a.add_argument("--json", action="store_true", help="print a JSON list of {id, task_index, task, params}")
    a.add_argument("--tasks", type=int, default=None, help="number of LHS tasks (first ask; default 5)")
    a.add_argument("--task", action="append", help="an explicit task k=v,... (repeatable; first ask)")
    a.add_argument("--budget", type=int, default=None, help="evaluations per task (default: the history's, or 20)")
    a.add_argument("--n-initial", type=int, default=None,
                   help="initial design size per task (first ask; default: the history's, or half the budget)")
    a.add_argument("--seed", type=int, default=None, help="seed (first ask; default: the history's, or 0)")
    a.add_argument("--target", type=float, default=None,
                   help="a task stops once its best value is <= TARGET (default: the history's, or none)")
    a.add_argument("--lease", type=float, default=None,
                   help="seconds after which a trial not told is given to the next ask (default: never)")
    a.add_argument("--failure-model", default=None, metavar="on|off|P",
                   help=FAILURE_MODEL_HELP + " (default: the history's setting, or 'on')")
    a.set_defaults(func=_cmd_ask)

    tl = sub.add_parser("tell", help="record the result of a PENDING trial")
    tl.add_argument("history", help="the SQLite history the trial was asked from")
    tl.add_argument("id", type=int, help="the trial id printed by ask")
    tl.add_argument("value", nargs="?", default=None,
                    help="the measured value (a number); for a problem with named outputs every output, as "
                         "time=0.5,memory=2e8 or a JSON object")
    tl.add_argument("--failed", metavar="REASON", default=None, help="the run failed, for this reason")
    tl.add_argument("--duration", type=float, default=None, help="seconds the run took (stored)")
    tl.add_argument("--machine", default="auto",
                    help="the machine the run ran on: auto (this one, default), none, or a JSON file written by "
                         "`gptask machine --out` on the node that ran it")
    tl.add_argument("--mix-machines", action="store_true",
                    help="accept a result of a machine the history has not seen next to other machines' results")
    tl.set_defaults(func=_cmd_tell)

    rl = sub.add_parser("release", help="give PENDING trials back: the next ask proposes them again")
    rl.add_argument("history", help="the SQLite history")
    rl.add_argument("ids", type=int, nargs="+", help="ids of PENDING trials to give back")
    rl.add_argument("--force", action="store_true",
                    help="release a trial even while the live process that holds it runs it (it may run twice)")
    rl.set_defaults(func=_cmd_release)

    s = sub.add_parser("show", help="best launch, recommended configuration and pending trials per task of a history")
    s.add_argument("history", help="the SQLite history (read only)")
    s.set_defaults(func=_cmd_show)

    pl = sub.add_parser("plot", help="convergence plot (PNG) of a history")
    pl.add_argument("history", help="the SQLite history (read only)")
    pl.add_argument("--out", default=None, help="image file to write (PNG, PDF, SVG, ...; default: HISTORY.png)")
    pl.add_argument("--front", action="store_true",
                    help="draw each task's Pareto front (several objectives) with the default and the recommendation "
                         "marked, instead of the convergence (default file: HISTORY.front.png)")
    pl.set_defaults(func=_cmd_plot)

    pr = sub.add_parser("predict", help="predicted optimum of a task from a saved model (no runs)")
    pr.add_argument("model", help="model file written by tune --save-model / result.save_model")
    pr.add_argument("--task", required=True, help="the task, k=v,...")
    pr.add_argument("--params", default=None, help="also predict the objective at this configuration, k=v,...")
    pr.add_argument("--problem", default=None, help="demo | branin | sphere | module:function, to check constraints")
    pr.add_argument("--problem-options", default="", help="k=v,... passed to the problem function")
    pr.add_argument("--json", action="store_true", help="print one JSON line")
    pr.set_defaults(func=_cmd_predict)

    f = sub.add_parser("fit", help="fit the model to existing measurements (CSV), no run; save it for predict")
    f.add_argument("data", help="CSV file: one row per measurement, a column per task and parameter name and --value")
    f.add_argument("--problem", required=True, help="demo | branin | sphere | module:function")
    f.add_argument("--problem-options", default="", help="k=v,... passed to the problem function")
    f.add_argument("--value", default="value", help="the column holding the measured value (default: value)")
    f.add_argument("--status", default=None, help="a column holding complete/failed/censored per row")
    f.add_argument("--aggregate", default="min", choices=["min", "median", "mean"],
                   help="value of repeated rows of one configuration (all kept as samples)")
    f.add_argument("--skip-invalid", action="store_true",
                   help="leave bad rows out (listed) instead of refusing the file")
    f.add_argument("--n-latent", type=int, default=None, help="latent processes of the LCM (default 1)")
    f.add_argument("--output-transform", default="auto", choices=["auto", "log", "none"],
                   help="model log(values) or the values; auto: chosen by likelihood (default)")
    f.add_argument("--restarts", type=int, default=3, help="starts of the model fit")
    f.add_argument("--seed", type=int, default=0, help="seed of the fit's starting points (default 0)")
    f.add_argument("--save-model", default=None, help="write the model (JSON) here, for gptask predict")
    f.add_argument("--history", default=None,
                   help="also import the rows into this history (SQLite) for gptask tune to continue from")
    f.add_argument("--machine", default=None,
                   help="the machine of rows without machine.* columns: a JSON file written by `gptask machine "
                        "--out`, or a label naming it (default: none recorded)")
    f.add_argument("--mix-machines", action="store_true",
                   help="accept rows of several machines in one fit or history (refused otherwise)")
    f.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    f.set_defaults(func=_cmd_fit)

    e = sub.add_parser("export", help="export a history as CSV or JSON")
    e.add_argument("history", help="the SQLite history (read only)")
    e.add_argument("--format", choices=["csv", "json"], default="csv",
                   help="csv: one row per trial (task.* and param.* columns; gptask fit reads it back); "
                        "json: everything, models and confirmation runs included (default csv)")
    e.add_argument("--out", default=None, help="file to write (default: standard output)")
    e.set_defaults(func=_cmd_export)
    from .copy import register as register_copy
    from .machines import register as register_machine
    from .replay import register as register_replay
    from .insight import add_parsers as add_insight_parsers

    register_machine(sub)
    register_replay(sub)
    register_copy(sub)
    add_insight_parsers(sub, lambda spec, options: load_problem(spec, parse_assignments(options)))
    return p


#: the largest value a count argument takes (--tasks, --budget, --repeats, -n, ...): far beyond what the
#: exact model fits (gptask.model.numerics.defaults.EXACT_FIT_MAX_POINTS), small enough that nothing overflows
MAX_COUNT = 100_000
#: the most processes --workers starts
MAX_WORKERS = 1024
#: trial ids and seeds are SQLite / numpy 64-bit integers
MAX_ID = 2**63 - 1
#: integer arguments (their attribute) -> (the option as typed, smallest, largest value); the library
#: checks the meaning (budget >= n_initial, ...), these keep numbers where nothing overflows
_INT_ARGS = {"id": ("trial id", 1, MAX_ID), "ids": ("trial id", 1, MAX_ID), "seed": ("--seed", 0, MAX_ID),
             "tasks": ("--tasks", None, MAX_COUNT), "budget": ("--budget", None, MAX_COUNT),
             "n_initial": ("--n-initial", None, MAX_COUNT), "repeats": ("--repeats", None, MAX_COUNT),
             "n_latent": ("--n-latent", None, MAX_COUNT), "n": ("-n", None, MAX_COUNT),
             "restarts": ("--restarts", None, MAX_COUNT), "workers": ("--workers", None, MAX_WORKERS)}
#: float arguments that must be finite numbers (NaN and infinity mean nothing there)
_FLOAT_ARGS = {"timeout": "--timeout", "max_time": "--max-time", "target": "--target", "lease": "--lease",
               "duration": "--duration"}


def check_numbers(args: argparse.Namespace) -> None:
    """ValueError naming the argument when a number given on the command line is out of range
    (:data:`_INT_ARGS`) or not finite (:data:`_FLOAT_ARGS`), before anything is read or written."""
    for attr, (name, lo, hi) in _INT_ARGS.items():
        value = getattr(args, attr, None)
        for v in value if isinstance(value, list) else [value]:
            if isinstance(v, int) and ((lo is not None and v < lo) or v > hi):
                low = "" if lo is None else f"{lo} <= "
                raise ValueError(f"{name} must be {low}{name.lstrip('-')} <= {hi:,}, got {v}")
    for attr, name in _FLOAT_ARGS.items():
        v = getattr(args, attr, None)
        if isinstance(v, float) and not math.isfinite(v):
            raise ValueError(f"{name} must be a finite number, got {v}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    level = logging.WARNING - 10 * min(args.verbose, 2)
    logging.basicConfig(level=level, format="%(asctime)s %(name)s %(levelname)s: %(message)s")
    from ..evaluation.failed_runs import TuningAborted

    try:
        check_numbers(args)
        return int(args.func(args) or 0)
    except BrokenPipeError:  # `gptask show H | head -1`: the reader left; stop quietly, as standard tools do
        return quiet_broken_pipe()
    except TuningAborted as exc:
        print(f"gptask: {exc}", file=sys.stderr)
        return EXIT_ABORTED
    except (ValueError, TypeError, OSError) as exc:
        print(f"gptask: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return _interrupted(args, "interrupted (Ctrl-C)", 128 + signal.SIGINT)
    except SystemExit as exc:
        if exc.code == 128 + signal.SIGTERM:  # raised by the tuning loop's SIGTERM handler
            return _interrupted(args, "stopped by SIGTERM", exc.code)
        raise


def _interrupted(args: argparse.Namespace, what: str, code: int) -> int:
    """One line instead of a traceback when a signal stops a command; its exit code 128 + signal."""
    tail = ("; the runs in progress were stopped and their trials stay pending: the same command resumes"
            if args.command == "tune" else "")
    print(f"gptask: {what}{tail}", file=sys.stderr)
    return code


#: exit status of ``gptask tune`` stopped by its failure rule (every first evaluation failed alike)
EXIT_ABORTED = 3
#: exit status when stdout's reader went away (128 + SIGPIPE, as a tool killed by SIGPIPE reports)
EXIT_BROKEN_PIPE = 141


def quiet_broken_pipe() -> int:
    """After a BrokenPipeError on stdout: point stdout at /dev/null so that the interpreter's final
    flush does not complain, and return :data:`EXIT_BROKEN_PIPE`."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass
    return EXIT_BROKEN_PIPE


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
