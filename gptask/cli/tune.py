"""``gptask tune``, ``slurm-script``, ``fit`` and ``predict``: tuning runs, existing measurements and
run-free predictions."""

from __future__ import annotations
import argparse
import copy
import json
import logging
import math
import signal
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from .arguments import failure_model_arg, format_assignments, format_table, parse_assignments
from .problems import NamedObjective, NamedObjectiveWithDeadline, load_problem, pool_worker_start

__all__ = ['cmd_tune', 'cmd_slurm_script', 'cmd_fit', 'cmd_predict']


def _progress_logging(quiet: bool) -> None:
    """Progress lines (one per iteration when stderr is not a terminal) unless ``quiet``."""
    from ..core.progress import LOGGER_NAME

    logging.getLogger(LOGGER_NAME).setLevel(logging.WARNING if quiet else logging.INFO)


def _check_outputs(args: argparse.Namespace) -> None:
    from ..core.output_files import check_outputs, same_file
    from ..data.storage.postgres import URL_SCHEMES
    from ..results.plots import plot_formats

    sources = [s for s in args.source or [] if not s.startswith(URL_SCHEMES)]  # files (a database is no output)
    inputs = {"the history": args.history, **{f"--source {path}": path for path in sources}}
    check_outputs({"--plot": args.plot, "--save-model": args.save_model}, inputs,
                  {"--plot": plot_formats()}, models={"--save-model"})
    for path in sources:
        if args.history is not None and same_file(path, args.history):
            raise ValueError(f"--source {path} is the --history: a campaign's own runs are in its history already "
                             "(give the sources' files, and a history of its own)")
    if args.select_sources and not args.source:
        raise ValueError("--select-sources judges the --source files: give at least one")


def cmd_tune(args: argparse.Namespace) -> int:
    from concurrent.futures import ProcessPoolExecutor

    from ..evaluation.noise import accepts_deadline
    from ..results.plots import plot_convergence
    from ..api.campaign import tune

    options = parse_assignments(args.problem_options)
    problem = load_problem(args.problem, options)
    _check_outputs(args)
    if args.journal is not None:
        from ..evaluation.journal import check_folder

        check_folder(args.journal, "--journal")  # a file, or not writable: refused before the problem runs
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
                  mix_machines=args.mix_machines, failure_model=failure_model_arg(args.failure_model),
                  cost_budget=args.cost_budget, journal=args.journal)
    if args.aux_task:
        kwargs["aux_tasks"] = [parse_assignments(t) for t in args.aux_task]
    if args.source:  # the sources' keywords only when given: gt.tune's defaults otherwise
        kwargs.update(sources=list(args.source), select_sources=args.select_sources)
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
        with ProcessPoolExecutor(args.workers, initializer=pool_worker_start, initargs=(args.problem, options)) as pool:
            result = tune(sent, executor=pool, max_in_flight=args.workers, **kwargs)
    print(result.table())
    if result.cost_spent is not None:
        print(f"cost spent: {result.cost_spent:.4g} s" + ("" if result.cost_budget is None else
                                                          f" of a cost budget of {result.cost_budget:.4g} s"))
    for i, reason in sorted(result.closed.items()):
        print(f"task {i} stopped early: {reason}")
    if result.pending:
        spent = result.cost_budget is not None and (result.cost_spent or 0.0) >= result.cost_budget
        print(f"{len(result.pending)} trial(s) pending (ids {[t.id for t in result.pending]}): "
              + ("the cost budget is spent; the same command with a larger --cost-budget runs them" if spent
                 else "run the same command again to finish them"))
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
    ValueError, without one); with ``--requeue``, a stop by USR1, or by the SIGTERM of the job's time
    limit, requeues the job once the history is closed (the SIGTERM of ``scancel`` does not: the
    job was cancelled)."""
    from ..tuning.cluster import SlurmSteps, ending_at_time_limit, requeue

    executor = SlurmSteps(on_stop=args.on_stop or "cancel")
    try:
        with executor:
            result = tune(problem, executor=executor, **kwargs)
    except SystemExit as exc:  # SIGTERM (the loop's handler): the history is closed by now
        if args.requeue and exc.code == 128 + signal.SIGTERM:
            if ending_at_time_limit():
                requeue()
            else:
                print("gptask: the job was cancelled (not at its time limit): not requeued; submit the same "
                      "script again to resume", file=sys.stderr)
        raise
    if executor.stopped_by:
        print(f"gptask: {executor.stopped_by}: {len(result.pending)} trial(s) left pending", file=sys.stderr)
        if args.requeue:
            requeue()
    return result


def cmd_slurm_script(args: argparse.Namespace) -> int:
    from ..tuning.cluster.script import slurm_script

    tune_args = list(args.tune_args)
    if tune_args[:1] == ["--"]:
        tune_args = tune_args[1:]
    text = slurm_script(tune_args, args.nodes, args.time, args.signal_seconds, requeue=not args.no_requeue,
                        on_stop=args.on_stop, job_name=args.job_name, partition=args.partition,
                        account=args.account)
    if _option(tune_args, "--history", "").startswith(("postgresql://", "postgres://")) \
            and _option(tune_args, "--journal") is None:
        print("gptask slurm-script: warning: a PostgreSQL history has no result journal unless the tune line gives "
              "--journal DIR (a folder on a shared file system): a run killed between its end and its commit is "
              "run again (docs/histories.md, the result journal)", file=sys.stderr)
    if args.output:
        Path(args.output).write_text(text)
        print(f"sbatch script: {args.output} (submit it with: sbatch {args.output})", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


def _option(args: Sequence[str], name: str, default: str | None = None) -> str | None:
    """The value of option ``name`` in the argument list ``args`` (``--name V`` or ``--name=V``; the last
    one given), ``default`` when absent."""
    value = default
    for k, a in enumerate(args):
        if a == name and k + 1 < len(args):
            value = args[k + 1]
        elif a.startswith(name + "="):
            value = a[len(name) + 1:]
    return value


def _save_model(result: Any, path: str, quiet: bool, spec: str, options: Mapping[str, Any]) -> None:
    """``result.save_model(path)``, saying first on stderr that the accuracy report is computed (a
    leave-one-task-out refit per task: about 2 s each for the 8 tasks of the shipped 16-core data).
    The file's metadata records ``--problem`` and ``--problem-options`` (``gptask predict`` names
    them when it is given another problem)."""
    import time

    tuned = sum(1 for i in range(len(result.tasks)) if result.records(i))
    if not quiet:  # the accuracy report needs 3 tuned tasks (gptask.transfer.accuracy)
        print(f"gptask: saving the model to {path}" + (
            f" with its leave-one-task-out accuracy (a refit per task, {tuned} tasks)" if tuned >= 3 else ""),
            file=sys.stderr, flush=True)
    t0 = time.perf_counter()
    result.save_model(path, metadata={"problem": {"factory": spec, "options": dict(options)}})
    print(f"model file: {path}" + ("" if quiet else f" (written in {time.perf_counter() - t0:.1f} s)"))


def cmd_fit(args: argparse.Namespace) -> int:
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
    try:
        mean, std = predict(model, task, default)
    except ValueError as exc:  # a new task of a model of one tuned task
        return [f"default configuration {format_assignments(default)}: not predicted ({exc})"]
    g = gain(mean, pred.value)
    unit = f" {problem.unit}" if problem.unit else ""
    return [f"default configuration {format_assignments(default)}: predicted {mean:.6g} +- {std:.3g}{unit}",
            "predicted gain of the predicted optimum over it: " + format_gain(g)]


def cmd_predict(args: argparse.Namespace) -> int:
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
    known = not math.isnan(pred.value)  # NaN: a new task of a model of one tuned task (route "one task")
    out: dict[str, Any] = {"task": pred.task, "params": pred.params, "std_encoded": pred.std,
                           "value": pred.value if known else None, "value_std": pred.value_std if known else None,
                           "feasible": pred.feasible,
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
    print(f"predicted objective there: {pred.value:.6g} +- {pred.value_std:.3g}{unit}" if known else
          "predicted objective there: unknown (a new task's values need a model of at least 2 tuned tasks)")
    print("chosen by: " + {"joint": "the joint model (least predicted value among feasible candidates)",
                           "one task": "the one tuned task's best configuration (TLA1 needs 2 tuned tasks to say "
                                       "how the optimum moves with the task)"}.get(
        pred.route, "TLA1 (one GP per parameter over the tuned tasks' best configurations)"))
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
