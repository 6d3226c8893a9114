"""The asynchronous loop: keep ``max_in_flight`` trials running on a ``concurrent.futures`` executor.

When a trial finishes it is told at once (by this process: the history has a single writer, the
workers never touch it), the model is brought up to date cheaply (block appends; a full refit every
``refit_every`` results or when the appends drift, :mod:`.updates`) and the freed slot gets a new
proposal, searched with every trial still running as a fantasy (:mod:`.fantasy`). No slot waits
for the slowest run of a batch, and one task can fill several slots.

Executors: any :class:`concurrent.futures.Executor`: ``ProcessPoolExecutor`` on one machine,
``mpi4py.futures.MPIPoolExecutor`` under ``mpiexec -n K python -m mpi4py.futures script.py``
(rank 0 tunes, the other ranks evaluate), a ``dask.distributed`` client's ``get_executor()``
(through dask-jobqueue, Slurm or PBS jobs as workers). Each trial travels as a
:class:`gptask.evaluation.evaluate.Job` (the objective, the configuration, the noise session's state) to
:func:`gptask.evaluation.evaluate.run_job`, and a :class:`~gptask.evaluation.evaluate.JobResult` comes back: the
executor serialises both, so a process-based executor needs a picklable objective (defined at
module level; Dask and mpi4py may be configured with cloudpickle for closures). That is transport
inside one run; nothing pickled is ever stored.

As in the serial loop: a failing objective (exception, NaN, timeout under ``timeout=``, a crashed
child) is a FAILED trial with its reason; a noise policy and pruner see the task's incumbent and
history as they were when the trial was sent (later results are folded in as they arrive).
``max_time``: no trial is sent after it, trials not started are cancelled, forked runs
(``timeout=``, or any run in a worker that descends from this process) are stopped at it; their
trials stay PENDING for the next run. Every job carries a :class:`gptask.evaluation.child.Guard`: when the
loop ends by an interruption (SIGTERM, Ctrl-C) or an error, the runs still going on in forked
groups on this host are killed within :data:`gptask.evaluation.child.GUARD_POLL_S` (the executor's shutdown
then has nothing to wait for), what has not started is cancelled and every pending trial is
released; when this process is killed (``kill -9``), the workers that descend from it (a
``ProcessPoolExecutor``'s) end with everything their runs started. Runs on other hosts belong to
the executor's machinery (a Dask nanny, ``mpiexec``).
An executor failure (a worker process that died, a job that could not be sent) stops the loop with
an error naming the trial, after telling every result that did come back.

Nothing finished is lost when this process is killed (``kill -9``, ``scancel --signal=KILL``)
between a run's end and its commit: the worker that has the result journals it beside a file
history first (:mod:`gptask.evaluation.journal`), and the campaign that takes the trial over
commits it instead of running it again (:meth:`Tuner.ask <gptask.tuning.tuner.Tuner.ask>`).
"""

from __future__ import annotations

import concurrent.futures as cf
import logging
import numbers
import pickle
import time
from typing import Any

from ..evaluation.child import guarded_runs
from ..evaluation.evaluate import Evaluator, Job, run_job
from ..evaluation.journal import remove as forget
from ..data.trials import Trial
from ..core.progress import Progress
from .steps import Waiting, report, tell_once
from .tuner import Tuner

__all__ = ["run_async", "check_executor", "ExecutorFailed"]

log = logging.getLogger(__name__)


class ExecutorFailed(RuntimeError):
    """The executor could not run a trial (not the objective failing: that is a FAILED trial)."""


def check_executor(executor: Any, max_in_flight: Any, comm: Any, parallel_evaluations: bool,
                   carried: tuple) -> int | None:
    """``max_in_flight`` as an int when ``executor`` is given (None otherwise), or a clear error.

    carried: what every job carries besides plain data (the objective, the noise policy, the
    pruner): checked to pickle when the executor is a ProcessPoolExecutor, which pickles them."""
    if max_in_flight is None:  # an executor that knows its capacity (gptask.tuning.cluster.SlurmSteps)
        max_in_flight = getattr(executor, "max_in_flight", None)
    if executor is None:
        if max_in_flight is not None:
            raise ValueError("max_in_flight needs an executor: give executor=... (e.g. a ProcessPoolExecutor)")
        return None
    if not isinstance(executor, cf.Executor):
        raise TypeError(f"executor must be a concurrent.futures.Executor (ProcessPoolExecutor, MPIPoolExecutor, "
                        f"a dask client's get_executor()), got {type(executor).__name__}")
    if comm is not None:
        raise ValueError("give comm (every rank runs tune) or executor (this process sends trials to its "
                         "workers), not both")
    if parallel_evaluations:
        raise ValueError("parallel_evaluations is for comm=...; with an executor every evaluation runs on it")
    if isinstance(max_in_flight, bool) or not isinstance(max_in_flight, numbers.Integral) or max_in_flight < 1:
        raise ValueError(f"max_in_flight must be an integer >= 1 with an executor (how many trials to keep "
                         f"running, usually its number of workers), got {max_in_flight!r}")
    if isinstance(executor, cf.ProcessPoolExecutor):
        try:
            pickle.dumps(carried)
        except (pickle.PicklingError, AttributeError, TypeError) as exc:
            raise TypeError(f"the objective cannot be sent to the ProcessPoolExecutor's workers ({exc}): define it "
                            "at module level (a lambda or a function defined inside another one does not "
                            "pickle)") from None
    return int(max_in_flight)


def run_async(tuner: Tuner, evaluator: Evaluator, executor: cf.Executor, max_in_flight: int, reporter: Progress,
              stop_at: float | None) -> None:
    """Keep up to ``max_in_flight`` trials of ``tuner`` running on ``executor`` until the run is
    done or ``stop_at`` (a ``time.monotonic()`` instant); see the module docstring."""
    with guarded_runs() as guard:  # its end stops every run still going on
        _loop(tuner, evaluator, executor, max_in_flight, reporter, stop_at, guard)


def _loop(tuner: Tuner, evaluator: Evaluator, executor: cf.Executor, max_in_flight: int, reporter: Progress,
          stop_at: float | None, guard: Any) -> None:
    running: dict[cf.Future, tuple[Trial, Job]] = {}
    waiting = Waiting()
    per_line = max(1, len(tuner.open_tasks()))
    told, ask_s, said_time_up = 0, 0.0, False
    # an executor that can be told to stop (gptask.tuning.cluster.SlurmSteps at a walltime signal): as max_time
    stop_requested = getattr(executor, "stop_requested", None)
    try:
        while True:
            stopped = stop_requested is not None and stop_requested()
            time_up = stopped or (stop_at is not None and time.monotonic() >= stop_at)
            if time_up and not said_time_up:
                said_time_up = True
                for f in [f for f in running if f.cancel()]:
                    del running[f]  # never started: stays pending
                reporter.message("%s: no new trials; %d running, the rest stay pending for the next run",
                                 "stop requested" if stopped else "max_time reached", len(running))
            if not time_up and len(running) < max_in_flight:
                t0 = time.monotonic()
                trials = tuner.ask(max_in_flight - len(running))
                ask_s += time.monotonic() - t0
                for t in trials:  # each result is journalled where it is known, before it travels back
                    job = evaluator.job(t.task, t.params, stop_at=stop_at, guard=guard, trial=t.id,
                                        journal=tuner.journal_path(t.id))
                    try:
                        running[executor.submit(run_job, job)] = (t, job)
                    except Exception as exc:  # e.g. a process pool broken by a worker that died
                        raise _failed(t, exc) from exc
            if not running:
                if time_up or tuner.done:
                    return
                waiting.pause(tuner, reporter, stop_at)
                continue
            waiting.reset()
            timeout = None if stop_at is None or time_up else max(0.0, stop_at - time.monotonic())
            if stop_requested is not None:  # look again at least every second
                timeout = 1.0 if timeout is None else min(timeout, 1.0)
            done, _ = cf.wait(list(running), timeout=timeout, return_when=cf.FIRST_COMPLETED)
            failure: tuple[Trial, BaseException] | None = None
            for f in sorted(done, key=lambda f: running[f][0].id):
                trial, job = running.pop(f)
                try:
                    result = f.result()
                except BaseException as exc:  # noqa: BLE001 - the executor's failure, not the objective's
                    failure = failure or (trial, exc)
                    continue
                if result.interrupted:
                    reporter.message("trial %d stopped at max_time (%s): it stays pending", trial.id,
                                     result.interrupted)
                    continue
                tell_once(tuner, trial, evaluator.record(job, result), reporter=reporter)
                forget(job.journal)  # committed (or told by another process first)
                reporter.advance()
                told += 1
                if told % per_line == 0:
                    report(tuner, reporter, ask_s)
                    ask_s = 0.0
            if failure is not None:
                raise _failed(*failure) from failure[1]
    finally:
        for f in running:
            f.cancel()


def _failed(trial: Trial, exc: BaseException) -> ExecutorFailed:
    return ExecutorFailed(f"the executor could not run trial {trial.id} (task {trial.task_index}, "
                          f"{dict(trial.params)}): {type(exc).__name__}: {exc}; the trials not told stay pending for "
                          "the next run (on workers that are not this process's children, e.g. MPI ranks, an objective "
                          "that may crash its process is safer under timeout=, which runs it in a child process)")
