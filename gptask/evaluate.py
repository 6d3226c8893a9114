"""Running the objective: repeats, aggregation, timeouts and failure capture.

An evaluation of ``objective(task, params)`` is *failed* (never raised to the tuner) when the
objective raises, returns something that is not a finite real number, or runs past ``timeout``
seconds. With ``repeats=k`` the objective runs ``k`` times and the finite samples are aggregated
(``min`` by default: for run times the minimum is the least noisy estimate of the achievable time,
shared/seeds/000); the raw samples are kept in the outcome.

Values: a finite float is the value, stored exactly as given (what the model makes of a huge or
tiny one is the tuner's rule, :mod:`gptask.tuning.data`); NaN, inf and non-numbers fail the
evaluation with that reason (:func:`gptask.trials.check_value`).

Timeouts: when ``timeout`` is set, each run happens in a forked child process group that sends its
result back as JSON through a pipe and is killed at the deadline, so a hung objective cannot hang
the tuner; the group dies with the tuner too (:mod:`gptask.child`). Without a timeout the
objective runs in this process. ``stop_at`` (a ``time.monotonic()`` instant, e.g. the end of a
run's ``max_time``) stops a forked run when it comes first, raising :class:`EvaluationInterrupted`:
that is not a failure of the configuration, and its trial stays PENDING.

Noise reduction: with ``noise=`` a policy of :mod:`gptask.noise` (``StaticResampling``, ``SEDR``,
``Adaptive``) decides how many runs each evaluation gets, instead of a fixed ``repeats``; a
``pruner=`` (:class:`gptask.noise.Pruner`) stops runs already slower than a bound derived from the
task's incumbent. Policies keep their state (iteration, history, incumbent) per task. An
objective that accepts a ``deadline=`` keyword receives the bound in seconds and may stop itself
by raising :class:`gptask.noise.RunCensored`; a censored or pruned evaluation has status
CENSORED, its censoring time (a lower bound of its true value) or its partial aggregate as
value, and the reason "censored: ..." or "pruned: ...". ``Outcome.extra`` carries the policy's
decision (``{"noise": reason, "n_samples": k}``) into the trial record.
"""

from __future__ import annotations

import logging
import numbers
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .child import ChildDied, ChildTimeout, run_in_process_group
from .noise import AGGREGATES, RunCensored, Session, accepts_deadline, check_aggregate
from .trials import Status, check_value, point_key

__all__ = ["EvaluationFailed", "EvaluationInterrupted", "Outcome", "Evaluator", "AGGREGATES"]

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
    status: a :class:`~gptask.trials.Status` (text accepted): COMPLETE, FAILED or CENSORED;
    reason: why it failed or was censored ("" when complete); duration: wall seconds; extra: what
    else the evaluation reports, kept in the trial record (JSON values).
    """

    value: float | None
    samples: tuple[float, ...] = ()
    status: Status = Status.COMPLETE
    reason: str = ""
    duration: float = 0.0
    extra: dict = field(default_factory=dict)

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
                "reason": self.reason, "duration": self.duration, "extra": dict(self.extra)}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "Outcome":
        return cls(d["value"], tuple(d["samples"]), d["status"], d["reason"], float(d["duration"]), dict(d["extra"]))

    @classmethod
    def of(cls, result: Any, reason: str = "") -> "Outcome":
        """An Outcome from what a user reports: an Outcome as is; None as failed (``reason``);
        a finite number as complete; anything else (NaN, inf, text) as failed saying why."""
        if isinstance(result, Outcome):
            return result
        if result is None:
            return cls(None, (), Status.FAILED, reason or "reported as failed")
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
    text = str(exc).strip().splitlines()
    first = text[0] if text else ""
    if isinstance(exc, EvaluationFailed):
        return first or "objective reported a failure"
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


def _run_message(objective: Callable, task: dict, params: dict, kwargs: dict) -> dict:
    """One run as the JSON message a forked worker sends back."""
    try:
        return {"value": _as_finite(objective(task, params, **kwargs))}
    except RunCensored as exc:
        return {"censored": exc.elapsed}
    except BaseException as exc:  # noqa: BLE001 - everything becomes a reason
        return {"error": _describe(exc)}


class Evaluator:
    """Runs ``objective(task, params)`` with repeats, aggregation and an optional per-run timeout.

    repeats: runs per evaluation (>= 1); aggregate: "min" | "median" | "mean";
    timeout: seconds per run, or None for no limit.
    """

    def __init__(
        self,
        objective: Callable[[dict, dict], float],
        repeats: int = 1,
        aggregate: str = "min",
        timeout: float | None = None,
        noise: Any = None,
        pruner: Any = None,
    ) -> None:
        if not callable(objective):
            raise TypeError(f"objective must be callable, got {objective!r}")
        if isinstance(repeats, bool) or not isinstance(repeats, numbers.Integral) or repeats < 1:
            raise ValueError(f"repeats must be an integer >= 1, got {repeats!r}")
        check_aggregate(aggregate, "Evaluator")
        if timeout is not None and (not isinstance(timeout, numbers.Real) or not timeout > 0):
            raise ValueError(f"timeout must be a positive number of seconds or None, got {timeout!r}")
        if noise is not None and not hasattr(noise, "evaluate"):
            raise TypeError(f"noise must be a gptask.noise policy (StaticResampling, SEDR, Adaptive), got {noise!r}")
        if noise is not None and repeats != 1:
            raise ValueError(f"give either repeats={repeats} or a noise policy, not both")
        if pruner is not None and noise is None:
            raise ValueError("a pruner needs a noise policy (e.g. gptask.noise.StaticResampling(k=1))")
        self.objective = objective
        self.repeats = int(repeats)
        self.aggregate = aggregate
        self.timeout = None if timeout is None else float(timeout)
        self.noise = noise
        self.pruner = pruner
        self._sessions: dict[tuple, Any] = {}

    def run_once(self, task: Mapping[str, Any], params: Mapping[str, Any], stop_at: float | None = None,
                 **kwargs: Any) -> float:
        """One run; returns a finite float or raises EvaluationFailed with the reason (or
        EvaluationInterrupted at ``stop_at``). ``kwargs`` (e.g. ``deadline``) go to the objective."""
        if self.timeout is None:
            try:
                return _as_finite(self.objective(dict(task), dict(params), **kwargs))
            except (EvaluationFailed, RunCensored):
                raise
            except Exception as exc:  # noqa: BLE001 - a failing objective is data, not a crash
                raise EvaluationFailed(_describe(exc)) from exc
        return self._run_forked(dict(task), dict(params), kwargs, stop_at)

    def _run_forked(self, task: dict, params: dict, kwargs: dict, stop_at: float | None) -> float:
        limit, interrupted = self.timeout, False
        if stop_at is not None:
            left = max(0.0, stop_at - time.monotonic())
            if limit is None or left < limit:
                limit, interrupted = left, True
        try:
            msg = run_in_process_group(lambda: _run_message(self.objective, task, params, kwargs), limit)
        except ChildTimeout:
            if interrupted:
                raise EvaluationInterrupted(f"stopped after {limit:.3g} s: the run's time is up") from None
            raise EvaluationFailed(f"timeout after {self.timeout:g} s") from None
        except ChildDied as exc:
            raise EvaluationFailed(f"objective process died ({exc})") from None
        if "error" in msg:
            raise EvaluationFailed(msg["error"])
        if "censored" in msg:
            raise RunCensored(float(msg["censored"]))
        return float(msg["value"])

    def __call__(self, task: Mapping[str, Any], params: Mapping[str, Any], stop_at: float | None = None) -> Outcome:
        """Evaluate ``repeats`` times (or as the noise policy decides); a failure of any run fails
        the evaluation. stop_at: a ``time.monotonic()`` instant at which a forked run is stopped
        (EvaluationInterrupted); runs in this process are never interrupted."""
        if self.noise is not None:
            return self._call_with_policy(task, params, stop_at)
        start = time.perf_counter()
        samples: list[float] = []
        for _ in range(self.repeats):
            try:
                samples.append(self.run_once(task, params, stop_at))
            except EvaluationFailed as exc:
                reason = str(exc)
                log.info("evaluation failed for task=%s params=%s: %s", dict(task), dict(params), reason)
                return Outcome(None, tuple(samples), Status.FAILED, reason, time.perf_counter() - start)
        value = AGGREGATES[self.aggregate](np.asarray(samples))
        return Outcome(value, tuple(samples), Status.COMPLETE, "", time.perf_counter() - start)

    def _call_with_policy(self, task: Mapping[str, Any], params: Mapping[str, Any], stop_at: float | None) -> Outcome:
        start = time.perf_counter()
        key = point_key(task)
        if key not in self._sessions:
            self._sessions[key] = Session(self.noise, pruner=self.pruner)
        pass_deadline = accepts_deadline(self.objective)

        def sample(deadline: float | None = None) -> float:
            if deadline is not None and pass_deadline:
                return self.run_once(task, params, stop_at, deadline=deadline)
            return self.run_once(task, params, stop_at)

        try:
            res = self._sessions[key].evaluate(sample)
        except (EvaluationFailed, ValueError) as exc:
            reason = str(exc) or type(exc).__name__
            log.info("evaluation failed for task=%s params=%s: %s", dict(task), dict(params), reason)
            return Outcome(None, (), Status.FAILED, reason, time.perf_counter() - start)
        stopped = res.censored or res.pruned
        return Outcome(float(res.value), tuple(res.samples), Status.CENSORED if stopped else Status.COMPLETE,
                       res.reason if stopped else "", time.perf_counter() - start,
                       extra={"noise": res.reason, "n_samples": res.n_samples})
