"""One Slurm job per trial through ``submitit``: :class:`SlurmJobs`.

For runs longer than an allocation should wait for: ``gt.tune(..., executor=SlurmJobs(folder,
nodes=2, timeout_min=60))`` submits each evaluation as its own ``sbatch`` job (submitit pickles the
:class:`gptask.evaluation.evaluate.Job` with cloudpickle into ``folder``, which must be on a file system the
compute nodes see; the objective must be importable there). A job that fails, is cancelled or
times out is a FAILED trial with Slurm's reason; a stop (:meth:`SlurmJobs.request_stop`, or USR1
inside ``with``) cancels the trials' jobs and leaves their trials pending; ``shutdown`` cancels what
is still queued or running. submitit (the ``slurm`` extra) was chosen over dask-jobqueue because it
maps one function call to one Slurm job with Slurm's own states and ``scancel``, with no
long-lived worker jobs to size; it also runs the same code locally (``cluster="local"``). PBS and
LSF: submitit supports neither (dask-jobqueue's ``PBSCluster`` with the existing Dask path does,
untested here). Job arrays (``array=True``, the default): the trials the loop hands over together
(the initial design, several slots freed at once) go to Slurm as one job array (``sbatch --array``,
submitit's ``executor.batch()``), one submission for the scheduler instead of one per trial; a trial
handed over alone is a plain job. Each array task is still one trial with its own state and
``scancel`` (``JOB_TASK``).
"""

from __future__ import annotations

import concurrent.futures as cf
import logging
import signal
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ...evaluation.evaluate import JobResult, Outcome
from ...data.trials import Status
from .slurm import ClusterError

__all__ = ["SlurmJobs"]

log = logging.getLogger(__name__)

#: seconds between polls of the trials' job states
POLL_S = 2.0
#: seconds a trial handed over waits for others to go with it in one job array
ARRAY_GATHER_S = 0.5


class SlurmJobs(cf.Executor):
    """A :class:`concurrent.futures.Executor` submitting each call as one Slurm job (submitit).

    folder: where submitit writes the jobs' pickles and logs (shared with the compute nodes);
    max_jobs: trials queued or running at once (the loop's ``max_in_flight``); array: trials handed
    over within ARRAY_GATHER_S of each other go as one job array; ``slurm_options``: submitit's
    ``update_parameters`` (``nodes``, ``tasks_per_node``, ``timeout_min``, ``slurm_partition``,
    ``slurm_array_parallelism``, ...). ``job_ids``: the Slurm ids of every trial's job, in order of
    submission (``123`` for a plain job, ``123_4`` for task 4 of array 123)."""

    def __init__(self, folder: str | Path, max_jobs: int = 4, signals: Sequence[str] = ("USR1",),
                 array: bool = True, **slurm_options: Any) -> None:
        try:
            import submitit
        except ImportError:
            raise ClusterError("SlurmJobs needs submitit: pip install 'gptask[slurm]'") from None
        if isinstance(max_jobs, bool) or not isinstance(max_jobs, int) or max_jobs < 1:
            raise ClusterError(f"max_jobs must be an integer >= 1, got {max_jobs!r}")
        self._executor = submitit.AutoExecutor(folder=str(folder), cluster="slurm")
        self._executor.update_parameters(**slurm_options)
        self.max_in_flight = max_jobs
        self.array = bool(array)
        self.signals = tuple(signal.Signals[s if s.startswith("SIG") else f"SIG{s}"] for s in signals)
        self.stopped_by = ""
        self.job_ids: list[str] = []
        self._lock = threading.Condition()
        self._jobs: dict[cf.Future, Any] = {}
        self._handed: list[tuple[cf.Future, Callable[..., Any], tuple, dict]] = []
        self._shutdown = False
        self._previous: dict[int, Any] = {}
        self._submitter = threading.Thread(target=self._submit_handed, name="gptask-slurm-submit", daemon=True)
        self._submitter.start()
        self._poller = threading.Thread(target=self._poll, name="gptask-slurm-jobs", daemon=True)
        self._poller.start()

    def stop_requested(self) -> bool:
        return bool(self.stopped_by)

    def request_stop(self, why: str = "stop requested") -> None:
        """No new trial; the trials' jobs are cancelled and their trials stay pending."""
        self.stopped_by = self.stopped_by or why
        self._cancel_all(interrupted=True)

    def __enter__(self) -> "SlurmJobs":
        if threading.current_thread() is threading.main_thread():
            for s in self.signals:
                self._previous[s] = signal.signal(s, lambda n, f: threading.Thread(
                    target=self.request_stop, args=(f"stopped by {signal.Signals(n).name}",), daemon=True).start())
        return self

    def __exit__(self, *exc: Any) -> None:
        for s, previous in self._previous.items():
            signal.signal(s, previous)
        self.shutdown(wait=True, cancel_futures=True)

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> cf.Future:
        if self._shutdown:
            raise RuntimeError("cannot submit to a SlurmJobs executor after shutdown")
        future: cf.Future = cf.Future()
        future.set_running_or_notify_cancel()
        with self._lock:
            self._handed.append((future, fn, args, kwargs))
            self._lock.notify_all()
        return future

    def _submit_handed(self) -> None:
        """Submit the trials handed over: together as one job array when several came within
        ARRAY_GATHER_S of each other (and ``array``), else each as a plain job."""
        while True:
            with self._lock:
                while not self._handed and not self._shutdown:
                    self._lock.wait()
                if not self._handed:
                    return
                end = time.monotonic() + ARRAY_GATHER_S
                while self.array and len(self._handed) < self.max_in_flight and not self._shutdown \
                        and time.monotonic() < end:
                    self._lock.wait(timeout=end - time.monotonic())
                batch, self._handed = self._handed, []
            try:
                if len(batch) > 1 and self.array:
                    with self._executor.batch():
                        jobs = [self._executor.submit(fn, *args, **kwargs) for _, fn, args, kwargs in batch]
                else:
                    jobs = [self._executor.submit(fn, *args, **kwargs) for _, fn, args, kwargs in batch]
            except Exception as exc:  # noqa: BLE001 - sbatch refused: the trials fail with its reason
                reason = str(exc).strip().splitlines()[-1][:300] if str(exc).strip() else type(exc).__name__
                for future, *_ in batch:
                    future.set_result(JobResult(Outcome(None, (), Status.FAILED,
                                                        f"Slurm refused the trial's job: {reason}", 0.0)))
                continue
            with self._lock:
                for (future, *_), job in zip(batch, jobs):
                    self._jobs[future] = job
                    self.job_ids.append(str(job.job_id))
            log.info("%d trial(s) submitted as Slurm job(s) %s", len(jobs), ", ".join(str(j.job_id) for j in jobs))
            if self.stopped_by:  # a stop came while these were submitted
                self._cancel_all(interrupted=True)

    def _cancel_all(self, interrupted: bool) -> None:
        with self._lock:
            items = list(self._jobs.items())
            self._jobs.clear()
            handed, self._handed = self._handed, []
        for future, *_ in handed:  # never submitted
            future.set_result(JobResult(None, interrupted=f"{self.stopped_by}: not submitted") if interrupted
                              else JobResult(Outcome(None, (), Status.FAILED, "cancelled before its job was "
                                                     "submitted", 0.0)))
        for future, job in items:
            try:
                job.cancel(check=False)
            except Exception as exc:  # noqa: BLE001 - scancel failing leaves the job to Slurm
                log.warning("could not cancel Slurm job %s: %s", job.job_id, exc)
            if not future.done():
                future.set_result(JobResult(None, interrupted=f"{self.stopped_by}: Slurm job {job.job_id} cancelled")
                                  if interrupted else JobResult(Outcome(None, (), Status.FAILED,
                                                                        f"Slurm job {job.job_id} cancelled", 0.0)))

    def _poll(self) -> None:
        while not self._shutdown or self._jobs or self._handed or self._submitter.is_alive():
            with self._lock:
                items = list(self._jobs.items())
            for future, job in items:
                if not job.done():
                    continue
                with self._lock:
                    if self._jobs.pop(future, None) is None:
                        continue
                try:  # a job of several tasks runs the call in each: rank 0's result is the trial's
                    future.set_result(job.results()[0])
                except Exception as exc:  # noqa: BLE001 - the job's failure is the trial's
                    state = job.state
                    future.set_result(JobResult(Outcome(None, (), Status.FAILED,
                                                        f"Slurm job {job.job_id} ended {state}: "
                                                        f"{str(exc).strip().splitlines()[-1][:300] if str(exc).strip() else type(exc).__name__}",
                                                        0.0)))
            time.sleep(POLL_S)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self._lock:
            self._shutdown = True
            handed, self._handed = (self._handed, []) if cancel_futures else ([], self._handed)
            self._lock.notify_all()
        for future, *_ in handed:  # never submitted
            future.set_result(JobResult(Outcome(None, (), Status.FAILED, "cancelled before its job was submitted", 0.0)))
        if cancel_futures:
            self._submitter.join()  # a batch being submitted now is cancelled below, not left running
            self._cancel_all(interrupted=False)
        if wait:
            self._submitter.join()
            self._poller.join()
