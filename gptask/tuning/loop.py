"""``tune``: the loop over the ask/tell engine (and :func:`run`, which ``tune_new_task`` shares).

Without an executor, each iteration asks for one trial per task that takes new trials, evaluates
them and tells the results (each committed before the next evaluation starts, and journalled
before its commit: :func:`gptask.tuning.steps.tell_journalled`; with ``parallel_evaluations``
under MPI each rank journals the runs it did before it hands them to rank 0, which commits them:
:func:`gptask.tuning.steps.journal_on_rank`). With one, the
asynchronous loop of :mod:`.asynchronous` keeps ``max_in_flight`` trials running instead. The loop
ends when the run is done (every task's budget used, target reached or space exhausted, nothing
pending) or at ``max_time``.
When other processes sharing the history hold the last pending trials it waits for them, polling
the history, and takes them over if their process dies.

Interruptions: a SIGTERM (a batch system's wall-time warning, ``scancel``) or Ctrl-C stops the run
at once: a running objective is killed with its process group, this process's PENDING trials are
released (they stay PENDING and the next run re-proposes them, nothing else is lost), and the
exception goes on (SIGTERM as ``SystemExit(143)``). ``max_time`` stops the loop cleanly and returns
the result; the trials it could not run stay PENDING likewise.

A cost budget (``Tuner(cost_budget=...)``) is checked before every run starts, not once per batch:
once the summed cost has reached it, the trials of the batch not started are released as
``max_time`` leaves them (PENDING: a resume with a larger ``cost_budget`` runs them first, nothing is
run twice), and the loop returns. So the sum ends at most one run above the budget serially (and on
rank 0 under MPI); with ``parallel_evaluations`` a batch runs in rounds of one run per rank, the
budget checked before each round, so at most one run per rank is in flight when it is reached.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..core.checks import check_seconds
from ..evaluation.evaluate import EvaluationInterrupted, Evaluator, Outcome
from ..core.parallel import allgather_json, bcast_json, blas_threads_per_rank, collective, my_items
from ..problem.definition import Problem
from ..results.result import TuningResult
from ..core.smoke import smoke_limits
from ..data.storage import Storage
from ..data.trials import Trial
from .asynchronous import check_executor, run_async
from ..core.progress import Progress
from ..model.surrogate.data import check_fit_size
from .steps import Waiting, journal_on_rank, report, tell_journalled
from .tuner import Tuner
from ..model.surrogate.updates import RefitPolicy

__all__ = ["tune", "run", "run_serial", "loop_options", "set_async_refits"]

log = logging.getLogger(__name__)
#: the histories without a result journal this process has warned about (:func:`run`)
_warned: set[str] = set()


@contextlib.contextmanager
def _sigterm_raises() -> Iterator[None]:
    """While tuning in the main thread, SIGTERM raises SystemExit(143) so that cleanup runs."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_term(signum: int, frame: Any) -> None:
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, on_term)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def _blas_limits(comm: Any) -> Iterator[None]:
    if comm is None:
        yield
        return
    from threadpoolctl import threadpool_limits

    limits = threadpool_limits(limits=blas_threads_per_rank(comm), user_api="blas")
    try:
        yield
    finally:
        limits.unregister()


def tune(problem: Problem, tasks: int | Sequence[Mapping[str, Any]] = 4, budget: int = 20, n_initial: int | None = None,
         seed: int = 0, history: str | Path | Storage | None = None, *, evaluator: Evaluator | None = None,
         progress: bool = True, max_time: float | None = None, parallel_evaluations: bool = False,
         executor: Any = None, max_in_flight: int | None = None, **tuner_options: Any) -> TuningResult:
    """The plain loop of :func:`gptask.tune` (without sources); returns a :class:`TuningResult`.
    Every option is described once, in :func:`gptask.api.campaign.tune`'s docstring.

    evaluator: how a configuration is evaluated (an :class:`~gptask.evaluation.evaluate.Evaluator`
    of ``problem.objective`` with its repeats, aggregate, timeout, noise policy and pruner; None: one
    run of the objective, no time limit). progress, max_time, parallel_evaluations, executor,
    max_in_flight: the loop's options. tuner_options: the :class:`Tuner`'s keywords (``n_latent``,
    ``comm``, ``target``, ``max_failures``, the :class:`~gptask.tuning.config.TunerSettings` fields).

    Without an executor the serial loop of the module docstring runs (on every rank of ``comm``:
    evaluations on rank 0 only, or round robin with ``parallel_evaluations``; rank 0 alone writes the
    history; every rank returns the same result; max_time is checked between iterations only). With
    one, the asynchronous loop of :mod:`gptask.tuning.asynchronous` (a full refit every
    ``max(open tasks, max_in_flight)`` results unless ``refit_every`` says otherwise); the objective
    (with noise and pruner) is sent to the workers: define it at module level.
    """
    tasks, budget, n_initial = smoke_limits(tasks, budget, n_initial)  # GPTASK_MAX_TASKS / _BUDGET, if set
    if isinstance(budget, int) and isinstance(tasks, (int, Sequence)) and not isinstance(tasks, (bool, str)):
        n_tasks = tasks if isinstance(tasks, int) else len(tasks)
        check_fit_size(n_tasks * budget, f"a run of {n_tasks} tasks x budget {budget} = {n_tasks * budget:,} points")
    if evaluator is None:
        evaluator = Evaluator(problem.objective, outputs=problem.outputs)
    loop = loop_options(evaluator, max_time, executor, max_in_flight, tuner_options.get("comm"), parallel_evaluations)
    with Tuner(problem, tasks, budget, n_initial, seed, history, **tuner_options) as tuner:
        set_async_refits(tuner, loop["max_in_flight"], tuner_options)
        return run(tuner, evaluator, progress=progress, parallel_evaluations=parallel_evaluations, **loop)


def loop_options(evaluator: Evaluator, max_time: float | None, executor: Any, max_in_flight: int | None,
                 comm: Any = None, parallel_evaluations: bool = False) -> dict[str, Any]:
    """:func:`run`'s ``stop_at``, ``executor`` and ``max_in_flight`` from a campaign's options, checked
    (:func:`~gptask.tuning.asynchronous.check_executor`: the objective, noise policy and pruner pickle for a
    ProcessPoolExecutor); ``stop_at`` counts ``max_time`` seconds from now."""
    max_time = check_seconds("max_time", max_time)
    max_in_flight = check_executor(executor, max_in_flight, comm, parallel_evaluations,
                                   (evaluator.objective, evaluator.noise, evaluator.pruner))
    return {"stop_at": None if max_time is None else time.monotonic() + max_time, "executor": executor,
            "max_in_flight": max_in_flight}


def set_async_refits(tuner: Tuner, max_in_flight: int | None, tuner_options: Mapping[str, Any]) -> None:
    """With trials in flight (``max_in_flight``), a full refit every ``max(open tasks, max_in_flight)`` results
    unless the campaign set ``refit_every``."""
    if max_in_flight is not None and "refit_every" not in tuner_options:
        tuner.policy = RefitPolicy(max(len(tuner.open_tasks()), max_in_flight),
                                   bool(tuner_options.get("refit_on_drift", True)))


def run(tuner: Tuner, evaluator: Evaluator, progress: bool = True, parallel_evaluations: bool = False,
        stop_at: float | None = None, executor: Any = None, max_in_flight: int | None = None,
        lazy_model: bool = False) -> TuningResult:
    """Drive ``tuner`` until its run is done or ``stop_at`` (a ``time.monotonic()`` instant) and return
    its result: serially (on MPI ranks with ``tuner.comm``), or asynchronously on ``executor`` with
    ``max_in_flight`` trials running (arguments checked by the caller, as :func:`tune` does). What
    could not run is released, PENDING for the next run; the caller closes the tuner. SIGTERM
    raises SystemExit(143) meanwhile, so that the caller's cleanup runs. lazy_model: the result's model
    fitted at first use when none was fitted during the run (:meth:`Tuner.result`)."""
    if tuner.journal_note is not None and tuner.journal_note not in _warned:
        _warned.add(tuner.journal_note)  # once per history and process
        log.warning("%s", tuner.journal_note)
    with _sigterm_raises(), _blas_limits(tuner.comm):
        mine = [i for i in range(tuner.n_tasks) if tuner.proposes_for(i)]
        total = len(mine) * tuner.budget
        done = sum(min(tuner.count(i), tuner.budget) for i in mine)
        reporter = Progress(progress and tuner.rank == 0, total, done)
        try:
            if executor is None:
                run_serial(tuner, evaluator, reporter, parallel_evaluations, stop_at)
            else:
                assert max_in_flight is not None
                run_async(tuner, evaluator, executor, max_in_flight, reporter, stop_at)
            tuner.release()  # what could not run stays PENDING, free for any process to take
            return tuner.result(lazy_model=True) if lazy_model else tuner.result()
        finally:
            reporter.close()


def run_serial(tuner: Tuner, evaluator: Evaluator, reporter: Progress, parallel: bool, stop_at: float | None) -> None:
    """The synchronous loop: ask one trial per open task, evaluate them all, tell them, again."""
    waiting = Waiting()
    while True:
        if _time_is_up(tuner, stop_at):
            reporter.message("max_time reached: stopping; unfinished trials stay pending for the next run")
            return
        t0 = time.monotonic()
        # one trial per task that takes new ones: other processes sharing the history get the rest
        trials = tuner.ask(max(1, len(tuner.open_tasks())))
        ask_s = time.monotonic() - t0
        if not trials:
            if tuner.done:
                return
            waiting.pause(tuner, reporter, stop_at)
            continue
        waiting.reset()
        try:
            left = _evaluate_all(tuner, evaluator, trials, parallel, stop_at if tuner.size == 1 else None, reporter)
        except EvaluationInterrupted as exc:
            reporter.message("max_time reached (%s): the trials not run stay pending", exc)
            return
        report(tuner, reporter, ask_s)
        if left:
            reporter.message("cost budget of %.4g s reached: %d trial(s) not started stay pending for the next run",
                             tuner.cost_budget, left)
            return


def _time_is_up(tuner: Tuner, stop_at: float | None) -> bool:
    if stop_at is None:
        return False
    return bool(bcast_json(time.monotonic() >= stop_at, tuner.comm))  # rank 0 decides for all


def _evaluate_all(tuner: Tuner, evaluator: Evaluator, trials: list[Trial], parallel: bool, stop_at: float | None,
                  reporter: Progress) -> int:
    """Evaluate and tell ``trials``: serially, on rank 0 only, or round robin over the ranks; with
    a cost budget, no run starts once it is spent (with ``parallel``: no round of one run per rank).
    Returns how many of ``trials`` were not started for that reason (the same on every rank)."""
    if tuner.size == 1:
        for k, t in enumerate(trials):
            if stop_at is not None and time.monotonic() >= stop_at:
                raise EvaluationInterrupted("max_time reached before this evaluation")
            if tuner.cost_spent_up():
                return len(trials) - k
            tell_journalled(tuner, t, evaluator(t.task, t.params, stop_at=stop_at), reporter=reporter)
            reporter.advance()
        return 0
    if parallel:
        # the history's journal folder goes with the work: the other ranks journal what they ran
        # before handing it to rank 0 (they have no history open; a rank on another host needs the
        # folder on a file system it shares with rank 0)
        here = tuner.journal_dir if tuner.rank == 0 else None
        folder = bcast_json(None if here is None else os.path.abspath(here), tuner.comm)
        # with a cost budget, rounds of one run per rank: the budget is checked before each
        step = len(trials) if tuner.cost_budget is None else tuner.size
        ran = 0
        for first in range(0, len(trials), max(1, step)):
            if tuner.cost_budget is not None and bcast_json(tuner.cost_spent_up(), tuner.comm):  # rank 0's word
                break
            part = trials[first: first + step]
            _round_on_ranks(tuner, evaluator, part, folder, reporter)
            ran += len(part)
    else:
        # rank 0 evaluates and records each result at once (committed before the next run)
        def on_root() -> int:
            for k, t in enumerate(trials):
                if tuner.cost_spent_up():
                    return k
                tell_journalled(tuner, t, evaluator(t.task, t.params), local=True, reporter=reporter)
            return len(trials)

        ran = int(bcast_json(collective(lambda: on_root() if tuner.rank == 0 else None, tuner.comm, "evaluations"),
                             tuner.comm))
    tuner.refresh()
    reporter.advance(ran)
    return len(trials) - ran


def _round_on_ranks(tuner: Tuner, evaluator: Evaluator, trials: list[Trial], folder: str | None,
                    reporter: Progress) -> None:
    """Run ``trials`` round robin over the ranks (``parallel_evaluations``) and tell them on rank 0;
    ``folder``: the history's journal folder, where the other ranks journal what they ran."""
    def mine() -> dict[str, Any]:
        out = {}
        for k in my_items(len(trials), tuner.comm):
            outcome = evaluator(trials[k].task, trials[k].params)
            if tuner.rank == 0:
                tell_journalled(tuner, trials[k], outcome, local=True, reporter=reporter)  # committed now
            else:
                written = journal_on_rank(folder, trials[k], outcome)
                out[str(k)] = {"outcome": outcome.to_json(), "written": written}
        return out

    merged: dict[str, Any] = {}
    for part in allgather_json(collective(mine, tuner.comm, "evaluations"), tuner.comm):
        merged.update(part)
    collective(lambda: [tell_journalled(tuner, trials[int(k)], Outcome.from_json(d["outcome"]), local=True,
                                        reporter=reporter, written=bool(d["written"]))
                        for k, d in sorted(merged.items())], tuner.comm, "recording evaluations")
