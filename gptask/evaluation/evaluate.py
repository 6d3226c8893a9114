"""Running the objective: repeats, aggregation, timeouts and failure capture.

An evaluation of ``objective(task, params)`` is *failed* (never raised to the tuner) when the
objective raises, returns something that is not a finite real number, or runs past ``timeout``
seconds. With ``repeats=k`` the objective runs ``k`` times and the finite samples are aggregated
(``min`` by default: for run times the minimum is the least noisy estimate of the achievable time,
shared/seeds/000); the raw samples are kept in the outcome.

Values: a finite float is the value, stored exactly as given (what the model makes of a huge or
tiny one is the tuner's rule, :mod:`gptask.model.surrogate.data`); NaN, inf and non-numbers fail the
evaluation with that reason (:func:`gptask.data.trials.check_value`).

Timeouts: when ``timeout`` is set, each run happens in a forked child process group that sends its
result back as JSON through a pipe and is killed at the deadline, so a hung objective cannot hang
the tuner; the group dies with the tuner too (:mod:`gptask.evaluation.child`). Without a timeout the
objective runs in this process. ``stop_at`` (a ``time.monotonic()`` instant, e.g. the end of a
run's ``max_time``) stops a forked run when it comes first, raising :class:`EvaluationInterrupted`:
that is not a failure of the configuration, and its trial stays PENDING.

Several outputs: for a problem with named outputs (``Problem(objectives=...)``,
:mod:`gptask.problem.objectives`) the evaluator is given them (``outputs=``) and the objective returns a
mapping; a run whose mapping misses a key, has an extra one, or holds NaN, inf or a non-number under
one key is failed with that reason (:meth:`gptask.problem.objectives.Outputs.parse`). Repeats are
aggregated output by output; ``Outcome.values`` holds the result and ``Outcome.value`` the
primary objective's. Noise policies work on one number and are refused with several outputs.

Noise reduction: with ``noise=`` a policy of :mod:`gptask.evaluation.noise` (``StaticResampling``, ``SEDR``,
``Adaptive``) decides how many runs each evaluation gets, instead of a fixed ``repeats``; a
``pruner=`` (:class:`gptask.evaluation.noise.Pruner`) stops runs already slower than a bound derived from the
task's incumbent. Policies keep their state (iteration, history, incumbent) per task. An
objective that accepts a ``deadline=`` keyword receives the bound in seconds and may stop itself
by raising :class:`gptask.evaluation.noise.RunCensored`; a censored or pruned evaluation has status
CENSORED, its censoring time (a lower bound of its true value) or its partial aggregate as
value, and the reason "censored: ..." or "pruned: ...". ``Outcome.extra`` carries the policy's
decision (``{"noise": reason, "n_samples": k}``) into the trial record.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ..core.checks import check_int, check_seconds
from .child import ChildDied, ChildTimeout, Guard, die_with, exception_text, run_in_process_group
from . import journal as result_journal
from .noise import AGGREGATES, RunCensored, Session, accepts_deadline, check_aggregate, evaluate_with_state
from ..problem.objectives import Outputs
from ..data.trials import Status, check_value, point_key

__all__ = ["EvaluationFailed", "EvaluationInterrupted", "Outcome", "Evaluator", "Job", "JobResult", "run_job",
           "journal_result", "take_journal", "AGGREGATES"]

log = logging.getLogger(__name__)


class EvaluationFailed(Exception):
    """An objective may raise this to report a failed run with a reason (e.g. a crashed job)."""


class EvaluationInterrupted(Exception):
    """A forked run was stopped at the caller's ``stop_at`` (e.g. the end of ``max_time``): the
    configuration was not judged, so its trial stays PENDING for the resume."""


@dataclass(frozen=True)
class Outcome:
    """The result of one evaluation (possibly several repeats).

    value: the aggregated objective (None when failed); samples: every finite sample, in run order;
    status: a :class:`~gptask.data.trials.Status` (text accepted): COMPLETE, FAILED or CENSORED;
    reason: why it failed or was censored ("" when complete); duration: wall seconds; extra: what
    else the evaluation reports, kept in the trial record (JSON values); values: every output of a
    problem with named outputs (``value`` is then the primary objective's), empty otherwise.
    """

    value: float | None
    samples: tuple[float, ...] = ()
    status: Status = Status.COMPLETE
    reason: str = ""
    duration: float = 0.0
    extra: dict = field(default_factory=dict)
    values: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        status = Status.parse(self.status)
        if not status.finished:
            raise ValueError("an Outcome is a finished result: complete, failed or censored, not pending")
        object.__setattr__(self, "status", status)
        if status is not Status.FAILED:
            value, why = check_value(self.value)
            if value is None:
                raise ValueError(f"a {status.value} Outcome needs a finite value: {why}")
            object.__setattr__(self, "value", value)

    @property
    def ok(self) -> bool:
        return self.status is Status.COMPLETE

    def to_json(self) -> dict[str, Any]:
        return {"value": self.value, "samples": list(self.samples), "status": self.status.value,
                "reason": self.reason, "duration": self.duration, "extra": dict(self.extra),
                "values": dict(self.values)}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "Outcome":
        return cls(d["value"], tuple(d["samples"]), d["status"], d["reason"], float(d["duration"]), dict(d["extra"]),
                   dict(d.get("values") or {}))

    @classmethod
    def of(cls, result: Any, reason: str = "", outputs: Outputs | None = None) -> "Outcome":
        """An Outcome from what a user reports: an Outcome as is; None as failed (``reason``);
        a finite number as complete; anything else (NaN, inf, text) as failed saying why. With
        ``outputs`` (a problem's named outputs) a result is a mapping of them instead, checked by
        :meth:`Outputs.parse`."""
        if isinstance(result, Outcome):
            return result
        if result is None:
            return cls(None, (), Status.FAILED, reason or "reported as failed")
        if outputs is not None:
            values, why = outputs.parse(result)
            if values is None:
                return cls(None, (), Status.FAILED, why)
            primary = values[outputs.primary]
            return cls(primary, (primary,), Status.COMPLETE, reason, values=values)
        value, why = check_value(result)
        if value is None:
            return cls(None, (), Status.FAILED, why)
        return cls(value, (value,), Status.COMPLETE, reason)


def _as_finite(result: Any) -> float:
    """The objective's return value as a finite float, or raise EvaluationFailed saying why."""
    value, why = check_value(result)
    if value is None:
        raise EvaluationFailed(why)
    return value


def _describe(exc: BaseException) -> str:
    """``"Type: first line of the message"`` of ``exc`` (its type alone when the message is empty, and
    a note when it cannot be read: :func:`gptask.evaluation.child.exception_text`)."""
    if isinstance(exc, EvaluationFailed):
        lines = str(exc).strip().splitlines()
        return lines[0] if lines else "objective reported a failure"
    full = exception_text(exc)
    if not full.startswith(f"{type(exc).__name__}: "):
        return full  # no message, or one that could not be read
    lines = full[len(type(exc).__name__) + 2:].strip().splitlines()
    return f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__


def _as_result(result: Any, outputs: Outputs | None) -> float | dict[str, float]:
    """The objective's return value: a finite float, or with ``outputs`` the checked mapping of
    them; EvaluationFailed saying why otherwise."""
    if outputs is None:
        return _as_finite(result)
    values, why = outputs.parse(result)
    if values is None:
        raise EvaluationFailed(why)
    return values


def _run_message(objective: Callable, task: dict, params: dict, kwargs: dict, outputs: Outputs | None = None) -> dict:
    """One run as the JSON message a forked worker sends back."""
    try:
        return {"value": _as_result(objective(task, params, **kwargs), outputs)}
    except RunCensored as exc:
        return {"censored": exc.elapsed}
    except BaseException as exc:  # noqa: BLE001 - everything becomes a reason
        return {"error": _describe(exc)}


@dataclass(frozen=True)
class Job:
    """One evaluation, with everything needed to run it and nothing of the tuner: what
    :meth:`Evaluator.job` hands to :func:`run_job`, in this process or in an executor's worker
    (which receives it pickled: the objective must then be picklable, e.g. defined at module level).

    objective: ``f(task, params)``; task, params: dicts; repeats, aggregate, timeout, noise, pruner:
    as in :class:`Evaluator`; state: the task's noise-session state when the job was made
    (:meth:`gptask.evaluation.noise.Session.state`) or None without a policy; deadline: a UNIX time at which a
    forked run is stopped (the caller's ``stop_at``; wall-clock so that it means the same on another
    machine), or None; guard: the tuner's :class:`gptask.evaluation.child.Guard` when the job goes to an executor
    (a worker that descends from the tuner then runs every run in a child process group that dies
    with the tuner or when it is interrupted, and ends itself when the tuner dies), else None;
    outputs: the problem's named outputs (:class:`gptask.problem.objectives.Outputs`), or None for one number;
    trial: the id of the trial this job evaluates (None: not a trial of a history); journal: the file
    where :func:`run_job` writes its result before returning it (:mod:`gptask.evaluation.journal`),
    or None.
    """

    objective: Callable[..., Any]
    task: dict
    params: dict
    repeats: int = 1
    aggregate: str = "min"
    timeout: float | None = None
    noise: Any = None
    pruner: Any = None
    state: dict | None = None
    deadline: float | None = None
    guard: Guard | None = None
    outputs: Outputs | None = None
    trial: int | None = None
    journal: str | None = None


@dataclass(frozen=True)
class JobResult:
    """What :func:`run_job` returns: the outcome, the policy's result for the tuner's session (None
    without a policy or when the evaluation failed), or why the job was interrupted at its
    deadline (then ``outcome`` is None and the trial stays PENDING)."""

    outcome: Outcome | None
    noisy: Any = None
    interrupted: str = ""


def _forks(job: Job) -> bool:
    """Whether ``job``'s runs go to a child process group: under a timeout, and always in an executor's
    worker that descends from the tuner (which then also dies with the tuner, :func:`gptask.evaluation.child.die_with`)."""
    if job.guard is not None and not job.guard.is_here() and job.guard.is_ancestor():
        die_with(job.guard)
        return True
    return job.timeout is not None


def _run_once(job: Job, stop_at: float | None, forked: bool = False, **kwargs: Any) -> Any:
    """One run of ``job``: a finite float (a dict of them with ``job.outputs``), or EvaluationFailed
    with the reason (EvaluationInterrupted
    at ``stop_at``, a ``time.monotonic()`` instant). forked: run it in a child process group (always
    under a timeout). ``kwargs`` (e.g. ``deadline``) go to the objective."""
    task, params = dict(job.task), dict(job.params)
    if job.timeout is None and not forked:
        try:
            return _as_result(job.objective(task, params, **kwargs), job.outputs)
        except (EvaluationFailed, RunCensored):
            raise
        except Exception as exc:  # noqa: BLE001 - a failing objective is data, not a crash
            raise EvaluationFailed(_describe(exc)) from exc
    limit, interrupted = job.timeout, False
    if stop_at is not None:
        left = max(0.0, stop_at - time.monotonic())
        if limit is None or left < limit:
            limit, interrupted = left, True
    guard = None if job.guard is None or job.guard.is_here() else job.guard
    try:
        msg = run_in_process_group(lambda: _run_message(job.objective, task, params, kwargs, job.outputs), limit,
                                   guard)
    except ChildTimeout:
        if interrupted:
            raise EvaluationInterrupted(f"stopped after {limit:.3g} s: the run's time is up") from None
        raise EvaluationFailed(f"timeout after {job.timeout:g} s") from None
    except ChildDied as exc:
        if guard is not None and not guard.holds():
            raise EvaluationInterrupted("stopped: the tuner was interrupted or died") from None
        raise EvaluationFailed(f"objective process died ({exc})") from None
    if "error" in msg:
        raise EvaluationFailed(msg["error"])
    if "censored" in msg:
        raise RunCensored(float(msg["censored"]))
    if job.outputs is not None:
        return {k: float(v) for k, v in msg["value"].items()}
    return float(msg["value"])


def _repeated(job: Job, stop_at: float | None, forked: bool) -> Outcome:
    start = time.perf_counter()
    samples: list[Any] = []
    primary = None if job.outputs is None else job.outputs.primary
    for _ in range(job.repeats):
        try:
            samples.append(_run_once(job, stop_at, forked))
        except EvaluationFailed as exc:
            reason = str(exc)
            log.info("evaluation failed for task=%s params=%s: %s", dict(job.task), dict(job.params), reason)
            kept = tuple(s if primary is None else s[primary] for s in samples)
            return Outcome(None, kept, Status.FAILED, reason, time.perf_counter() - start)
    how = AGGREGATES[job.aggregate]
    if primary is None:
        return Outcome(how(np.asarray(samples)), tuple(samples), Status.COMPLETE, "", time.perf_counter() - start)
    values = {k: float(how(np.asarray([s[k] for s in samples]))) for k in samples[0]}  # output by output
    return Outcome(values[primary], tuple(s[primary] for s in samples), Status.COMPLETE, "",
                   time.perf_counter() - start, values=values)


def _with_policy(job: Job, stop_at: float | None, forked: bool) -> JobResult:
    start = time.perf_counter()
    pass_deadline = accepts_deadline(job.objective)

    def sample(deadline: float | None = None) -> float:
        if deadline is not None and pass_deadline:
            return _run_once(job, stop_at, forked, deadline=deadline)
        return _run_once(job, stop_at, forked)

    try:
        res = evaluate_with_state(job.noise, job.pruner, job.state, sample)
    except (EvaluationFailed, ValueError) as exc:
        reason = str(exc) or type(exc).__name__
        log.info("evaluation failed for task=%s params=%s: %s", dict(job.task), dict(job.params), reason)
        return JobResult(Outcome(None, (), Status.FAILED, reason, time.perf_counter() - start))
    stopped = res.censored or res.pruned
    outcome = Outcome(float(res.value), tuple(res.samples), Status.CENSORED if stopped else Status.COMPLETE,
                      res.reason if stopped else "", time.perf_counter() - start,
                      extra={"noise": res.reason, "n_samples": res.n_samples})
    return JobResult(outcome, res)


def run_job(job: Job) -> JobResult:
    """Run ``job`` (repeats and aggregation, or its noise policy and pruner; its timeout in a child
    process group); never raises for a failing objective, whose failure is the outcome. With
    ``job.journal`` a complete or censored outcome is written there before it is returned
    (:func:`journal_result`)."""
    stop_at = None if job.deadline is None else time.monotonic() + (job.deadline - time.time())
    forked = _forks(job)
    try:
        if job.noise is not None:
            result = _with_policy(job, stop_at, forked)
        else:
            result = JobResult(_repeated(job, stop_at, forked))
    except EvaluationInterrupted as exc:
        return JobResult(None, interrupted=str(exc))
    journal_result(job, result)
    return result


def take_journal(args: tuple) -> tuple[Job | None, tuple]:
    """For an executor that journals results itself (where and when its result is final, rather than
    :func:`run_job` in the worker): ``(the job, args with its journal removed)`` when ``args[0]`` is a
    :class:`Job` with a journal file, else ``(None, args)``. The executor then calls
    :func:`journal_result` with that job."""
    if args and isinstance(args[0], Job) and args[0].journal is not None:
        return args[0], (replace(args[0], journal=None), *args[1:])
    return None, args


def journal_result(job: Job, result: JobResult, path: str | None = None) -> bool:
    """Write ``result``'s outcome to the journal file ``path`` (default ``job.journal``) when it is
    one that is journalled (complete or censored, :mod:`gptask.evaluation.journal`); whether it was
    written."""
    path = path or job.journal
    if path is None or job.trial is None or result.outcome is None or \
            not result_journal.journalled(result.outcome.status):
        return False
    if job.guard is not None and not job.guard.on_this_host():
        return False  # a worker on another host (MPI, Dask): the history's folder may not be there
    return result_journal.write(path, job.trial, job.task, job.params, result.outcome.to_json())


class Evaluator:
    """Runs ``objective(task, params)`` with repeats, aggregation and an optional per-run timeout.

    repeats: runs per evaluation (>= 1); aggregate: "min" | "median" | "mean";
    timeout: seconds per run, or None for no limit; outputs: the problem's named outputs
    (``problem.outputs``; None: the objective returns one number).

    ``evaluator(task, params)`` evaluates here. For an evaluation elsewhere (an executor's worker),
    :meth:`job` makes the :class:`Job` to send, :func:`run_job` runs it there, and :meth:`record`
    takes its :class:`JobResult` back: the noise policies' per-task state (iteration, history,
    incumbent) lives in this evaluator and is updated as results come back, in the order they come.
    """

    def __init__(
        self,
        objective: Callable[[dict, dict], float],
        repeats: int = 1,
        aggregate: str = "min",
        timeout: float | None = None,
        noise: Any = None,
        pruner: Any = None,
        outputs: Outputs | None = None,
    ) -> None:
        if not callable(objective):
            raise TypeError(f"objective must be callable, got {objective!r}")
        repeats = check_int("repeats", repeats, 1)
        check_aggregate(aggregate, "Evaluator")
        timeout = check_seconds("timeout", timeout)
        if noise is not None and not hasattr(noise, "evaluate"):
            raise TypeError(f"noise must be a gptask.evaluation.noise policy (StaticResampling, SEDR, Adaptive), got {noise!r}")
        if noise is not None and repeats != 1:
            raise ValueError(f"give either repeats={repeats} or a noise policy, not both")
        if pruner is not None and noise is None:
            raise ValueError("a pruner needs a noise policy (e.g. gptask.evaluation.noise.StaticResampling(k=1))")
        if outputs is not None and not isinstance(outputs, Outputs):
            raise TypeError(f"outputs must be a problem's gptask.problem.objectives.Outputs (problem.outputs), got {outputs!r}")
        if outputs is not None and noise is not None:
            raise ValueError(f"noise policies work on one number; this problem's objective returns "
                             f"{', '.join(outputs.names)}: use repeats= instead")
        self.outputs = outputs
        self.objective = objective
        self.repeats = repeats
        self.aggregate = aggregate
        self.timeout = timeout
        self.noise = noise
        self.pruner = pruner
        self._sessions: dict[tuple, Any] = {}

    def _session(self, task: Mapping[str, Any]) -> Session:
        key = point_key(task)
        if key not in self._sessions:
            self._sessions[key] = Session(self.noise, pruner=self.pruner)
        return self._sessions[key]

    def job(self, task: Mapping[str, Any], params: Mapping[str, Any], stop_at: float | None = None,
            guard: Guard | None = None, trial: int | None = None, journal: str | None = None) -> Job:
        """The :class:`Job` evaluating ``params`` on ``task`` now; ``stop_at``: a ``time.monotonic()``
        instant at which a forked run is stopped; guard, trial, journal: see :class:`Job`."""
        state = self._session(task).state() if self.noise is not None else None
        deadline = None if stop_at is None else time.time() + (stop_at - time.monotonic())
        return Job(self.objective, dict(task), dict(params), self.repeats, self.aggregate, self.timeout,
                   self.noise, self.pruner, state, deadline, guard, self.outputs, trial, journal)

    def record(self, job: Job, result: JobResult) -> Outcome:
        """The outcome of ``job``, its policy result folded into the task's session. Raises
        :class:`EvaluationInterrupted` when the job was stopped at its deadline."""
        if result.interrupted:
            raise EvaluationInterrupted(result.interrupted)
        assert result.outcome is not None
        if result.noisy is not None:
            self._session(job.task).record(result.noisy)
        return result.outcome

    def run_once(self, task: Mapping[str, Any], params: Mapping[str, Any], stop_at: float | None = None,
                 **kwargs: Any) -> float:
        """One run; returns a finite float or raises EvaluationFailed with the reason (or
        EvaluationInterrupted at ``stop_at``). ``kwargs`` (e.g. ``deadline``) go to the objective."""
        return _run_once(Job(self.objective, dict(task), dict(params), timeout=self.timeout, outputs=self.outputs),
                         stop_at, **kwargs)

    def __call__(self, task: Mapping[str, Any], params: Mapping[str, Any], stop_at: float | None = None) -> Outcome:
        """Evaluate ``repeats`` times (or as the noise policy decides); a failure of any run fails
        the evaluation. stop_at: a ``time.monotonic()`` instant at which a forked run is stopped
        (EvaluationInterrupted); runs in this process are never interrupted."""
        job = self.job(task, params, stop_at)
        return self.record(job, run_job(job))
