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
``scancel`` (``JOB_TASK``). A problem with fidelity: ``fidelity_resources`` (as for
:class:`~gptask.tuning.cluster.slurm.SlurmSteps`) gives each fidelity level's job its own nodes,
ranks per node, CPUs per rank and time limit; trials handed over together go as one array per level.
"""

from __future__ import annotations

import concurrent.futures as cf
import dataclasses
import logging
import math
import signal
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ...evaluation.evaluate import Job, JobResult, Outcome, journal_result, take_journal
from ...data.trials import Status
from .slurm import ClusterError, Resources, check_fidelity_resources, check_level_resources, level_resources_spec, \
    resources_at_level, split_fidelity

__all__ = ["SlurmJobs"]

log = logging.getLogger(__name__)

#: seconds between polls of the trials' job states
POLL_S = 2.0
#: seconds a trial handed over waits for others to go with it in one job array
ARRAY_GATHER_S = 0.5
#: submitit's time limit of a job when neither ``timeout_min`` nor a level's ``time_limit`` gives one
SUBMITIT_TIMEOUT_MIN = 5


class SlurmJobs(cf.Executor):
    """A :class:`concurrent.futures.Executor` submitting each call as one Slurm job (submitit).

    folder: where submitit writes the jobs' pickles and logs (shared with the compute nodes);
    max_jobs: trials queued or running at once (the loop's ``max_in_flight``); array: trials handed
    over within ARRAY_GATHER_S of each other go as one job array; ``slurm_options``: submitit's
    ``update_parameters`` (``nodes``, ``tasks_per_node``, ``timeout_min``, ``slurm_partition``,
    ``slurm_array_parallelism``, ...). ``job_ids``: the Slurm ids of every trial's job, in order of
    submission (``123`` for a plain job, ``123_4`` for task 4 of array 123). fidelity_resources: for a
    problem with fidelity, what a job at each level needs in place of ``nodes``, ``tasks_per_node``,
    ``cpus_per_task`` and ``timeout_min`` (a level's ``time_limit``, seconds, rounded up to minutes):
    a mapping ``{level: Resources | nodes | {field: value}}`` or ``f(fidelity: dict)``, as
    :class:`~gptask.tuning.cluster.slurm.SlurmSteps` takes it (None: the objective's
    ``fidelity_resources`` attribute, else ``slurm_options`` at every level); each trial then
    records its job's resources in ``trial.extra["resources"]``."""

    def __init__(self, folder: str | Path, max_jobs: int = 4, signals: Sequence[str] = ("USR1",),
                 array: bool = True, fidelity_resources: Mapping[Any, Any] | Callable[[dict], Any] | None = None,
                 **slurm_options: Any) -> None:
        try:
            import submitit
        except ImportError:
            raise ClusterError("SlurmJobs needs submitit: pip install 'gptask[slurm]'") from None
        if isinstance(max_jobs, bool) or not isinstance(max_jobs, int) or max_jobs < 1:
            raise ClusterError(f"max_jobs must be an integer >= 1, got {max_jobs!r}")
        check_fidelity_resources(fidelity_resources)
        self.fidelity_resources = fidelity_resources
        self._base = _base_resources(slurm_options)
        self._executor = submitit.AutoExecutor(folder=str(folder), cluster="slurm")
        self._executor.update_parameters(**slurm_options)
        self.max_in_flight = max_jobs
        self.array = bool(array)
        self.signals = tuple(signal.Signals[s if s.startswith("SIG") else f"SIG{s}"] for s in signals)
        self.stopped_by = ""
        self.job_ids: list[str] = []
        self._lock = threading.Condition()
        self._journalled: dict[cf.Future, Job] = {}  # the jobs whose results this executor journals
        self._jobs: dict[cf.Future, tuple[Any, Resources | None]] = {}  # a trial's job, its resources
        self._handed: list[tuple[cf.Future, Callable[..., Any], tuple, dict, Resources | None]] = []
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

    def check_problem(self, problem: Any) -> None:
        """Check the ``fidelity_resources`` (given here or the objective's attribute) against
        ``problem``'s fidelity levels before any run (``gt.tune`` calls it): ClusterError naming a
        level it gives nothing for, a key that is no level, a bad value, or fidelity_resources for a
        problem without fidelity."""
        by_level = level_resources_spec(self.fidelity_resources, getattr(problem, "objective", None))
        check_level_resources(by_level, problem, self._base, None, "")

    def needs(self, fn: Callable[..., Any], args: tuple) -> Resources | None:
        """The Resources of the job of ``fn(*args)`` (args[0] a :class:`gptask.evaluation.evaluate.Job`)
        at its fidelity level: ``slurm_options``' with the level's ``fidelity_resources`` fields
        replaced; None without fidelity_resources or fidelity (the job gets ``slurm_options``)."""
        _, _, fidelity, objective = split_fidelity(args[0] if args else None)
        by_level = level_resources_spec(self.fidelity_resources, objective)
        if fidelity is None or by_level is None:
            return None
        return resources_at_level(by_level, fidelity, list(fidelity), self._base)

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> cf.Future:
        if self._shutdown:
            raise RuntimeError("cannot submit to a SlurmJobs executor after shutdown")
        res = self.needs(fn, args)
        future: cf.Future = cf.Future()
        future.set_running_or_notify_cancel()
        # journalled here when its result is read, not on the compute node (where the history's folder may not be)
        journalled, args = take_journal(args)
        if journalled is not None:
            self._journalled[future] = journalled
        with self._lock:
            self._handed.append((future, fn, args, kwargs, res))
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
            groups: dict[Resources | None, list] = {}
            for item in batch:  # one array per level's resources
                groups.setdefault(item[4], []).append(item)
            for res, group in groups.items():
                self._submit_group(res, group)
            if self.stopped_by:  # a stop came while these were submitted
                self._cancel_all(interrupted=True)

    def _submit_group(self, res: Resources | None, group: list) -> None:
        """Submit trials of the same resources: as one job array when several (and ``array``)."""
        try:
            if res is not None:
                self._executor.update_parameters(**_submitit_parameters(res))
            if len(group) > 1 and self.array:
                with self._executor.batch():
                    jobs = [self._executor.submit(fn, *args, **kwargs) for _, fn, args, kwargs, _ in group]
            else:
                jobs = [self._executor.submit(fn, *args, **kwargs) for _, fn, args, kwargs, _ in group]
        except Exception as exc:  # noqa: BLE001 - sbatch refused: the trials fail with its reason
            reason = str(exc).strip().splitlines()[-1][:300] if str(exc).strip() else type(exc).__name__
            for future, *_ in group:
                future.set_result(JobResult(Outcome(None, (), Status.FAILED,
                                                    f"Slurm refused the trial's job: {reason}", 0.0)))
            return
        with self._lock:
            for (future, *_), job in zip(group, jobs):
                self._jobs[future] = (job, res)
                self.job_ids.append(str(job.job_id))
        log.info("%d trial(s) submitted as Slurm job(s) %s%s", len(jobs), ", ".join(str(j.job_id) for j in jobs),
                 "" if res is None else f" ({res.nodes} node(s), {res.ntasks} rank(s) each)")

    def _cancel_all(self, interrupted: bool) -> None:
        with self._lock:
            items = list(self._jobs.items())
            self._jobs.clear()
            handed, self._handed = self._handed, []
        for future, *_ in handed:  # never submitted
            future.set_result(JobResult(None, interrupted=f"{self.stopped_by}: not submitted") if interrupted
                              else JobResult(Outcome(None, (), Status.FAILED, "cancelled before its job was "
                                                     "submitted", 0.0)))
        for future, (job, _) in items:
            self._journalled.pop(future, None)
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
            for future, (job, res) in items:
                if not job.done():
                    continue
                with self._lock:
                    if self._jobs.pop(future, None) is None:
                        continue
                try:  # a job of several tasks runs the call in each: rank 0's result is the trial's
                    result = _with_resources(job.results()[0], res)
                    journalled = self._journalled.pop(future, None)
                    if journalled is not None and isinstance(result, JobResult):
                        journal_result(journalled, result)  # before the campaign may be killed (journal.py)
                    future.set_result(result)
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


def _base_resources(slurm_options: Mapping[str, Any]) -> Resources:
    """The Resources ``slurm_options`` (submitit's names) give a job: ``nodes``, ``tasks_per_node``,
    ``cpus_per_task``, ``timeout_min`` (as ``time_limit`` in seconds); Slurm's defaults for the others."""
    timeout = slurm_options.get("timeout_min")
    return Resources(nodes=slurm_options.get("nodes", 1), tasks_per_node=slurm_options.get("tasks_per_node", 1),
                     cpus_per_task=slurm_options.get("cpus_per_task", 1),
                     time_limit=None if timeout is None else 60.0 * timeout)


def _submitit_parameters(res: Resources) -> dict[str, int]:
    """submitit's ``update_parameters`` for a job of ``res`` (its time limit rounded up to minutes)."""
    minutes = SUBMITIT_TIMEOUT_MIN if res.time_limit is None else max(1, math.ceil(res.time_limit / 60.0))
    return {"nodes": res.nodes, "tasks_per_node": res.tasks_per_node, "cpus_per_task": res.cpus_per_task,
            "timeout_min": minutes}


def _with_resources(result: Any, res: Resources | None) -> Any:
    """``result`` (a JobResult) with ``res`` recorded in its outcome's ``extra["resources"]``."""
    if res is None or not isinstance(result, JobResult) or result.outcome is None:
        return result
    return dataclasses.replace(result, outcome=dataclasses.replace(
        result.outcome, extra={**result.outcome.extra, "resources": res.record()}))
