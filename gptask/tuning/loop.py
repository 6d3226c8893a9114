"""``tune``: the loop over the ask/tell engine.

Each iteration asks for one trial per task that takes new trials, evaluates them and tells the
results (each committed before the next evaluation starts). The loop ends when the run is done
(every task's budget used, target reached or space exhausted, nothing pending) or at ``max_time``.
When other processes sharing the history hold the last pending trials it waits for them, polling
the history, and takes them over if their process dies.

Interruptions: a SIGTERM (a batch system's wall-time warning, ``scancel``) or Ctrl-C stops the run
at once: a running objective is killed with its process group, this process's PENDING trials are
released (they stay PENDING and the next run re-proposes them, nothing else is lost), and the
exception goes on (SIGTERM as ``SystemExit(143)``). ``max_time`` stops the loop cleanly and returns
the result; the trials it could not run stay PENDING likewise.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..evaluate import EvaluationInterrupted, Evaluator, Outcome
from ..parallel import allgather_json, bcast_json, blas_threads_per_rank, collective, my_items
from ..problem import Problem
from ..result import TuningResult
from ..storage import Storage, TrialNotPending
from ..trials import Status, Trial
from .progress import Progress
from .settings import WAIT_LOG_S, WAIT_MAX_S, WAIT_MIN_S
from .tuner import Tuner, check_seconds

__all__ = ["tune"]

log = logging.getLogger(__name__)


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


def tune(
    problem: Problem,
    tasks: int | Sequence[Mapping[str, Any]] = 4,
    budget: int = 20,
    n_initial: int | None = None,
    seed: int = 0,
    history: str | Path | Storage | None = None,
    repeats: int = 1,
    aggregate: str = "min",
    n_latent: int | None = None,
    progress: bool = True,
    timeout: float | None = None,
    comm: Any = None,
    parallel_evaluations: bool = False,
    noise: Any = None,
    pruner: Any = None,
    max_time: float | None = None,
    target: Any = None,
    **tuner_options: Any,
) -> TuningResult:
    """Tune ``problem`` for a set of tasks with MLA; returns a :class:`TuningResult`.

    tasks: a number of tasks (Latin hypercube over the task space) or a list of task dicts.
    budget: evaluations per task in total (initial design included); n_initial: initial design size
    per task (default: half the budget). history: SQLite file; the same call with the same file
    resumes a killed run, and several processes may run the same call on one file at once (each
    configuration is run once, the budget holds across them). repeats/aggregate: runs per
    evaluation and how they are combined. timeout: seconds per run (None: no limit); such runs go to
    a child process group that dies with the tuner.
    max_time: seconds for the whole call: no evaluation starts after it and a run under ``timeout``
    is stopped at it; unfinished trials stay PENDING for the next call. target: a task stops once
    its best value is <= target (a number, or one number or None per task).
    progress: a bar on a terminal, else one log line per iteration (see
    :mod:`gptask.tuning.progress`); False for none.
    comm: an mpi4py communicator; call ``tune`` on every rank. Model restarts and per-task searches
    are spread over the ranks; evaluations run on rank 0 only, or, with
    ``parallel_evaluations=True`` (the objective is rank-local), round robin over the ranks.
    Rank 0 alone writes the history, and records each of its own results as soon as it has it.
    Every rank returns the same result. (Under MPI, max_time is checked between iterations only.)
    noise, pruner: a :mod:`gptask.noise` policy (instead of ``repeats``) and pruning rule; see
    :class:`gptask.evaluate.Evaluator`.
    tuner_options: kernel, restarts, refit_restarts, pso_particles, pso_iters, output_transform
    ("auto": log of positive outputs or not, decided once by likelihood; "log"; "none") (see :class:`Tuner`).
    """
    max_time = check_seconds("max_time", max_time)
    evaluator = Evaluator(problem.objective, repeats=repeats, aggregate=aggregate, timeout=timeout,
                          noise=noise, pruner=pruner)
    start = time.monotonic()
    with _sigterm_raises(), _blas_limits(comm), Tuner(problem, tasks, budget, n_initial, seed, history,
                                                      n_latent=n_latent, comm=comm, target=target,
                                                      **tuner_options) as tuner:
        total = tuner.n_tasks * tuner.budget
        done = sum(min(tuner.count(i), tuner.budget) for i in range(tuner.n_tasks))
        reporter = Progress(progress and tuner.rank == 0, total, done)
        try:
            _loop(tuner, evaluator, reporter, parallel_evaluations, None if max_time is None else start + max_time)
            tuner.release()  # what could not run stays PENDING, free for any process to take
            return tuner.result()
        finally:
            reporter.close()


def _loop(tuner: Tuner, evaluator: Evaluator, reporter: Progress, parallel: bool, stop_at: float | None) -> None:
    wait, last_said = WAIT_MIN_S, 0.0
    while True:
        if _time_is_up(tuner, stop_at):
            reporter.message("max_time reached: stopping; unfinished trials stay pending for the next run")
            return
        t0 = time.monotonic()
        # one trial per task that takes new ones: other processes sharing the history get the rest
        trials = tuner.ask(max(1, sum(tuner.closed_reason(i) is None for i in range(tuner.n_tasks))))
        ask_s = time.monotonic() - t0
        if not trials:
            if tuner.done:
                return
            if time.monotonic() - last_said >= WAIT_LOG_S:
                holders = sorted({t.owner or "nobody" for t in tuner.pending})
                reporter.message("nothing to ask: waiting for %d pending trial(s) held by other processes (%s)",
                                 len(tuner.pending), "; ".join(h[:120] for h in holders))
                last_said = time.monotonic()
            time.sleep(wait if stop_at is None else max(0.0, min(wait, stop_at - time.monotonic())))
            wait = min(2 * wait, WAIT_MAX_S)
            continue
        wait = WAIT_MIN_S
        try:
            _evaluate_all(tuner, evaluator, trials, parallel, stop_at if tuner.size == 1 else None, reporter)
        except EvaluationInterrupted as exc:
            reporter.message("max_time reached (%s): the trials not run stay pending", exc)
            return
        _report(tuner, reporter, ask_s)


def _time_is_up(tuner: Tuner, stop_at: float | None) -> bool:
    if stop_at is None:
        return False
    return bool(bcast_json(time.monotonic() >= stop_at, tuner.comm))  # rank 0 decides for all


def _report(tuner: Tuner, reporter: Progress, ask_s: float) -> None:
    records = tuner.records
    n_done = sum(tuner.closed_reason(i) is not None for i in range(tuner.n_tasks))
    reporter.iteration(n_done, tuner.n_tasks, len(records), sum(t.status is Status.FAILED for t in records),
                       len(tuner.pending), [tuner.best_value(i) for i in range(tuner.n_tasks)], ask_s)


def _tell(tuner: Tuner, trial: Trial, outcome: Outcome, local: bool = False) -> None:
    """Tell ``trial``; if someone else told it first (its lease ran out and it was re-proposed,
    then the first holder reported after all), keep that result and go on."""
    try:
        if local:
            tuner.tell_local(trial, outcome)
        else:
            tuner.tell(trial, outcome)
    except TrialNotPending as exc:
        log.warning("%s; this run's result for it is dropped", exc)


def _evaluate_all(tuner: Tuner, evaluator: Evaluator, trials: list[Trial], parallel: bool, stop_at: float | None,
                  reporter: Progress) -> None:
    """Evaluate and tell ``trials``: serially, on rank 0 only, or round robin over the ranks."""
    if tuner.size == 1:
        for t in trials:
            if stop_at is not None and time.monotonic() >= stop_at:
                raise EvaluationInterrupted("max_time reached before this evaluation")
            _tell(tuner, t, evaluator(t.task, t.params, stop_at=stop_at))
            reporter.advance()
        return
    if parallel:
        def mine() -> dict[str, Any]:
            out = {}
            for k in my_items(len(trials), tuner.comm):
                outcome = evaluator(trials[k].task, trials[k].params)
                if tuner.rank == 0:
                    _tell(tuner, trials[k], outcome, local=True)  # committed now: a dying rank cannot lose it
                else:
                    out[str(k)] = outcome.to_json()
            return out

        merged: dict[str, Any] = {}
        for part in allgather_json(collective(mine, tuner.comm, "evaluations"), tuner.comm):
            merged.update(part)
        collective(lambda: [_tell(tuner, trials[int(k)], Outcome.from_json(d), local=True)
                            for k, d in sorted(merged.items())], tuner.comm, "recording evaluations")
    else:
        # rank 0 evaluates and records each result at once (committed before the next run)
        collective(lambda: [_tell(tuner, t, evaluator(t.task, t.params), local=True) for t in trials]
                   if tuner.rank == 0 else None, tuner.comm, "evaluations")
    tuner.refresh()
    reporter.advance(len(trials))
