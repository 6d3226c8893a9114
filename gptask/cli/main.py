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
import logging
import math
import os
import signal
import sys
from collections.abc import Sequence

from ..results.rebuild import result_from_history
from .arguments import FAILURE_MODEL_HELP, format_assignments, format_table, max_failures_arg, parse_assignments
from .asktell import cmd_ask, cmd_release, cmd_tell
from .problems import NamedObjective, NamedObjectiveWithDeadline, load_problem
from .tune import cmd_fit, cmd_predict, cmd_slurm_script, cmd_tune
from .views import best_table, cmd_export, cmd_plot, cmd_show, recommendation_table

__all__ = ["main", "parse_assignments", "format_assignments", "format_table", "best_table", "result_from_history",
           "recommendation_table", "NamedObjective", "NamedObjectiveWithDeadline"]


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="gptask", description="Multitask GP autotuning for HPC applications")
    p.add_argument("-v", "--verbose", action="count", default=0, help="more logging (-v info, -vv debug)")
    sub = p.add_subparsers(dest="command", required=True)

    t = sub.add_parser("tune", help="tune a problem for a set of tasks (MLA)")
    t.add_argument("--problem", default="demo", help="demo | branin | sphere | module:function")
    t.add_argument("--problem-options", default="", help="k=v,... passed to the problem function")
    t.add_argument("--tasks", type=int, default=5, help="number of LHS tasks (ignored with --task)")
    t.add_argument("--task", action="append", help="an explicit task k=v,... (repeatable)")
    t.add_argument("--aux-task", action="append", metavar="TASK",
                   help="an auxiliary task k=v,... (repeatable): tuned only for what it teaches the --task ones, e.g. "
                        "a small matrix for large ones; no result of its own (docs/fidelity.md)")
    t.add_argument("--budget", type=int, default=None,
                   help="evaluations per task, initial design and the problem's default included (default 20; "
                        "with --cost-budget, as many as it allows)")
    t.add_argument("--cost-budget", type=float, default=None,
                   help="seconds of summed run cost (wall time, the problem's run_cost or its 'cost' output) after "
                        "which no run starts; with --budget, whichever is reached first (docs/fidelity.md)")
    t.add_argument("--n-initial", type=int, default=None,
                   help="evaluations of each task's initial Latin hypercube design before the model proposes "
                        "(default: half the budget)")
    t.add_argument("--seed", type=int, default=0,
                   help="seed of the tasks, designs, fits and searches; a history resumes only with its own seed "
                        "(default 0)")
    t.add_argument("--history", default=None,
                   help="SQLite file (resumes when it exists; several tune commands may share it)")
    t.add_argument("--journal", default=None, metavar="DIR",
                   help="folder where each finished run's result waits for its commit to the history, so that a "
                        "campaign killed in between commits it on the resume instead of running it again (made when "
                        "missing; default: HISTORY.results beside a SQLite history, none for a postgresql:// one: "
                        "give a folder every tuner host shares)")
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
    t.add_argument("--source", action="append", default=None, metavar="PATH",
                   help="measurements of the same problem to learn from (repeatable): a history (SQLite file), a "
                        "model file or a CSV of measurements with machine.* columns; each of their (task, machine) "
                        "pairs is a task of the model and takes no run (docs/sources.md)")
    t.add_argument("--select-sources", action="store_true",
                   help="with --source: after this machine's initial designs, leave out each source that does not "
                        "help predict its runs (docs/sources.md)")
    t.add_argument("-q", "--quiet", action="store_true", help="no progress bar or per-iteration log lines")
    t.add_argument("--no-progress", action="store_true", help="same as --quiet")
    t.add_argument("--executor", choices=["srun"], default=None,
                   help="srun: inside a Slurm allocation, run each evaluation as an srun job step on free nodes, "
                        "as many at once as fit (the objective launches with gptask.tuning.cluster.current_step())")
    t.add_argument("--on-stop", choices=["cancel", "finish"], default=None,
                   help="with --executor srun, at a USR1 (sbatch --signal=B:USR1@S): cancel the running steps "
                        "(default; their trials stay pending) or let them finish")
    t.add_argument("--requeue", action="store_true",
                   help="with --executor srun: when USR1 or the time limit's SIGTERM stops the campaign, requeue "
                        "this Slurm job (scontrol requeue) after closing the history; the requeued job resumes "
                        "(not when the job is cancelled with scancel)")
    t.set_defaults(func=cmd_tune)

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
    ss.set_defaults(func=cmd_slurm_script)

    a = sub.add_parser("ask", help="write the next trials to a history as PENDING and print them")
    a.add_argument("history", help="SQLite file (created by the first ask)")
    a.add_argument("--problem", required=True, help="demo | branin | sphere | module:function")
    a.add_argument("--problem-options", default="", help="k=v,... passed to the problem function")
    a.add_argument("-n", type=int, default=None, help="at most this many trials (default: the rest of the initial designs, "
                   "else one search proposal per task)")
    a.add_argument("--json", action="store_true", help="print a JSON list of {id, task_index, task, params}")
    a.add_argument("--tasks", type=int, default=None, help="number of LHS tasks (first ask; default 5)")
    a.add_argument("--task", action="append", help="an explicit task k=v,... (repeatable; first ask)")
    a.add_argument("--aux-task", action="append", metavar="TASK",
                   help="an auxiliary task k=v,... (repeatable; first ask): tuned only for what it teaches the others")
    a.add_argument("--budget", type=int, default=None, help="evaluations per task (default: the history's, or 20)")
    a.add_argument("--n-initial", type=int, default=None,
                   help="initial design size per task (first ask; default: the history's, or half the budget)")
    a.add_argument("--cost-budget", type=float, default=None,
                   help="seconds of summed run cost after which nothing more is asked (each run's cost: the problem's "
                        "run_cost, its 'cost' output, or the --duration told; default: the history's, or none)")
    a.add_argument("--seed", type=int, default=None, help="seed (first ask; default: the history's, or 0)")
    a.add_argument("--target", type=float, default=None,
                   help="a task stops once its best value is <= TARGET (default: the history's, or none)")
    a.add_argument("--lease", type=float, default=None,
                   help="seconds after which a trial not told is given to the next ask (default: never)")
    a.add_argument("--failure-model", default=None, metavar="on|off|P",
                   help=FAILURE_MODEL_HELP + " (default: the history's setting, or 'on')")
    a.set_defaults(func=cmd_ask)

    tl = sub.add_parser("tell", help="record the result of a PENDING trial")
    tl.add_argument("history", help="the history the trial was asked from (a SQLite file or a postgresql:// URL)")
    tl.add_argument("id", type=int, help="the trial id printed by ask")
    tl.add_argument("value", nargs="?", default=None,
                    help="the measured value (a number); for a problem with named outputs every output, as "
                         "time=0.5,memory=2e8 or a JSON object")
    tl.add_argument("--failed", metavar="REASON", default=None, help="the run failed, for this reason")
    tl.add_argument("--duration", type=float, default=None,
                    help="seconds the run took (stored; the run's cost unless the problem prices runs or has a "
                         "'cost' output)")
    tl.add_argument("--machine", default="auto",
                    help="the machine the run ran on: auto (this one, default), none, or a JSON file written by "
                         "`gptask machine --out` on the node that ran it")
    tl.add_argument("--mix-machines", action="store_true",
                    help="accept a result of a machine the history has not seen next to other machines' results")
    tl.set_defaults(func=cmd_tell)

    rl = sub.add_parser("release", help="give PENDING trials back: the next ask proposes them again")
    rl.add_argument("history", help="the history, a SQLite file or a postgresql:// URL")
    rl.add_argument("ids", type=int, nargs="+", help="ids of PENDING trials to give back")
    rl.add_argument("--force", action="store_true",
                    help="release a trial even while the live process that holds it runs it (it may run twice)")
    rl.set_defaults(func=cmd_release)

    s = sub.add_parser("show", help="best launch, recommended configuration and pending trials per task of a history")
    s.add_argument("history", help="the history, a SQLite file or a postgresql:// URL (read only)")
    s.set_defaults(func=cmd_show)

    pl = sub.add_parser("plot", help="convergence plot (PNG) of a history")
    pl.add_argument("history", help="the history, a SQLite file or a postgresql:// URL (read only)")
    pl.add_argument("--out", default=None, help="image file to write (PNG, PDF, SVG, ...; default: HISTORY.png)")
    pl.add_argument("--front", action="store_true",
                    help="draw each task's Pareto front (several objectives) with the default and the recommendation "
                         "marked, instead of the convergence (default file: HISTORY.front.png)")
    pl.set_defaults(func=cmd_plot)

    pr = sub.add_parser("predict", help="predicted optimum of a task from a saved model (no runs)")
    pr.add_argument("model", help="model file written by tune --save-model / result.save_model")
    pr.add_argument("--task", required=True, help="the task, k=v,...")
    pr.add_argument("--params", default=None, help="also predict the objective at this configuration, k=v,...")
    pr.add_argument("--problem", default=None, help="demo | branin | sphere | module:function, to check constraints")
    pr.add_argument("--problem-options", default="", help="k=v,... passed to the problem function")
    pr.add_argument("--json", action="store_true", help="print one JSON line")
    pr.set_defaults(func=cmd_predict)

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
    f.set_defaults(func=cmd_fit)

    e = sub.add_parser("export", help="export a history as CSV or JSON")
    e.add_argument("history", help="the history, a SQLite file or a postgresql:// URL (read only)")
    e.add_argument("--format", choices=["csv", "json"], default="csv",
                   help="csv: one row per trial (task.* and param.* columns; gptask fit reads it back); "
                        "json: everything, models and confirmation runs included (default csv)")
    e.add_argument("--out", default=None, help="file to write (default: standard output)")
    e.set_defaults(func=cmd_export)
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
_FLOAT_ARGS = {"cost_budget": "--cost-budget", "timeout": "--timeout", "max_time": "--max-time", "target": "--target", "lease": "--lease",
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
