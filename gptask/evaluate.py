"""Running the objective: repeats, aggregation, timeouts and failure capture.

An evaluation of ``objective(task, params)`` is *failed* (never raised to the tuner) when the
objective raises, returns something that is not a finite real number, or runs past ``timeout``
seconds. With ``repeats=k`` the objective runs ``k`` times and the finite samples are aggregated
(``min`` by default: for run times the minimum is the least noisy estimate of the achievable time,
shared/seeds/000); the raw samples are kept in the outcome.

Timeouts: when ``timeout`` is set, each run happens in a forked child process that sends its
result back as JSON through a pipe and is killed at the deadline, so a hung objective cannot hang
the tuner. Without a timeout the objective runs in this process.

Noise reduction: with ``noise=`` a policy of :mod:`gptask.noise` (``StaticResampling``, ``SEDR``,
``Adaptive``) decides how many runs each evaluation gets, instead of a fixed ``repeats``; a
``pruner=`` (:class:`gptask.noise.Pruner`) stops runs already slower than a bound derived from the
task's incumbent. Policies keep their state (iteration, history, incumbent) per task. An
objective that accepts a ``deadline=`` keyword receives the bound in seconds and may stop itself
by raising :class:`gptask.noise.RunCensored`; a censored or pruned evaluation is stored as
complete, with its censoring time (a lower bound of its true value) as value and the reason
"censored: ..." or "pruned: ...".
"""

from __future__ import annotations

import json
import logging
import math
import multiprocessing as mp
import numbers
import os
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .noise import AGGREGATES, RunCensored, Session, accepts_deadline, check_aggregate
from .sampling import point_key

__all__ = ["EvaluationFailed", "Outcome", "Evaluator", "AGGREGATES"]

log = logging.getLogger(__name__)


class EvaluationFailed(Exception):
    """An objective may raise this to report a failed run with a reason (e.g. a crashed job)."""


@dataclass(frozen=True)
class Outcome:
    """The result of one evaluation (possibly several repeats).

    value: the aggregated objective (None when failed); samples: every finite sample, in run order;
    status: "complete" or "failed"; reason: why it failed ("" when complete); duration: wall seconds.
    """

    value: float | None
    samples: tuple[float, ...] = ()
    status: str = "complete"
    reason: str = ""
    duration: float = 0.0
    extra: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status == "complete"


def _as_finite(result: Any) -> float:
    """The objective's return value as a finite float, or raise EvaluationFailed saying why."""
    if isinstance(result, bool) or not isinstance(result, (numbers.Real, np.ndarray, np.generic)):
        raise EvaluationFailed(f"objective returned {type(result).__name__} {result!r}, not a number")
    arr = np.asarray(result, dtype=float)
    if arr.size != 1:
        raise EvaluationFailed(f"objective returned an array of shape {arr.shape}, not a number")
    value = float(arr.reshape(()))
    if math.isnan(value):
        raise EvaluationFailed("objective returned NaN")
    if math.isinf(value):
        raise EvaluationFailed(f"objective returned {value}")
    return value


def _describe(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    first = text[0] if text else ""
    if isinstance(exc, EvaluationFailed):
        return first or "objective reported a failure"
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


def _child(objective: Callable, task: dict, params: dict, kwargs: dict, conn: Any) -> None:  # pragma: no cover - runs in the fork
    try:
        value = _as_finite(objective(task, params, **kwargs))
        msg = {"value": value}
    except RunCensored as exc:
        msg = {"censored": exc.elapsed}
    except BaseException as exc:  # noqa: BLE001 - everything becomes a reason
        msg = {"error": _describe(exc), "trace": traceback.format_exc(limit=5)}
    try:
        conn.send_bytes(json.dumps(msg).encode())
    finally:
        conn.close()
        os._exit(0)


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

    def run_once(self, task: Mapping[str, Any], params: Mapping[str, Any], **kwargs: Any) -> float:
        """One run; returns a finite float or raises EvaluationFailed with the reason.
        ``kwargs`` (e.g. ``deadline``) are passed to the objective."""
        if self.timeout is None:
            try:
                return _as_finite(self.objective(dict(task), dict(params), **kwargs))
            except EvaluationFailed:
                raise
            except RunCensored:
                raise
            except Exception as exc:  # noqa: BLE001 - a failing objective is data, not a crash
                raise EvaluationFailed(_describe(exc)) from exc
        return self._run_forked(dict(task), dict(params), kwargs)

    def _run_forked(self, task: dict, params: dict, kwargs: dict) -> float:
        ctx = mp.get_context("fork")
        recv, send = ctx.Pipe(duplex=False)
        proc = ctx.Process(target=_child, args=(self.objective, task, params, kwargs, send), daemon=True)
        proc.start()
        send.close()
        try:
            if not recv.poll(self.timeout):
                raise EvaluationFailed(f"timeout after {self.timeout:g} s")
            try:
                msg = json.loads(recv.recv_bytes().decode())
            except (EOFError, OSError, ValueError):
                proc.join(1.0)
                raise EvaluationFailed(f"objective process died (exit code {proc.exitcode})") from None
        finally:
            if proc.is_alive():
                proc.kill()
            proc.join(5.0)
            recv.close()
        if "error" in msg:
            raise EvaluationFailed(msg["error"])
        if "censored" in msg:
            raise RunCensored(float(msg["censored"]))
        return float(msg["value"])

    def __call__(self, task: Mapping[str, Any], params: Mapping[str, Any]) -> Outcome:
        """Evaluate ``repeats`` times (or as the noise policy decides); a failure of any run fails
        the evaluation."""
        if self.noise is not None:
            return self._call_with_policy(task, params)
        start = time.perf_counter()
        samples: list[float] = []
        for _ in range(self.repeats):
            try:
                samples.append(self.run_once(task, params))
            except EvaluationFailed as exc:
                reason = str(exc)
                log.info("evaluation failed for task=%s params=%s: %s", dict(task), dict(params), reason)
                return Outcome(None, tuple(samples), "failed", reason, time.perf_counter() - start)
        value = AGGREGATES[self.aggregate](np.asarray(samples))
        return Outcome(value, tuple(samples), "complete", "", time.perf_counter() - start)

    def _call_with_policy(self, task: Mapping[str, Any], params: Mapping[str, Any]) -> Outcome:
        start = time.perf_counter()
        key = point_key(task)
        if key not in self._sessions:
            self._sessions[key] = Session(self.noise, pruner=self.pruner)
        pass_deadline = accepts_deadline(self.objective)

        def sample(deadline: float | None = None) -> float:
            if deadline is not None and pass_deadline:
                return self.run_once(task, params, deadline=deadline)
            return self.run_once(task, params)

        try:
            res = self._sessions[key].evaluate(sample)
        except (EvaluationFailed, ValueError) as exc:
            reason = str(exc) or type(exc).__name__
            log.info("evaluation failed for task=%s params=%s: %s", dict(task), dict(params), reason)
            return Outcome(None, (), "failed", reason, time.perf_counter() - start)
        reason = res.reason if res.reason.startswith(("censored", "pruned")) else ""
        return Outcome(float(res.value), tuple(res.samples), "complete", reason, time.perf_counter() - start,
                       extra={"noise": res.reason, "n_samples": res.n_samples})
