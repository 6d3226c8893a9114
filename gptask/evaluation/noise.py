"""Noise reduction for noisy objectives: resampling policies and pruning.

A standalone module (numpy/scipy only, nothing else from gptask) so that any application or the
evaluation layer can use it. The ideas follow the thesis in ``shared/seeds/001`` (ch. 5 and 6):
static resampling, standard-error dynamic resampling (SEDR), the adaptive method (bounded
resamples, a confidence-interval width that tightens with the iteration, and a performance filter),
and pruning of runs that are already slower than a bound derived from earlier results.

Interface
---------
*The sample callable.* One run of the objective at one fixed configuration::

    sample() -> float                       # smaller is better (e.g. seconds)
    sample(deadline=seconds) -> float       # optional: may stop itself once `deadline` has passed

A callable whose signature accepts a ``deadline`` keyword (or ``**kwargs``) receives the pruning
bound in seconds of its own elapsed time (``None`` when there is no bound). When it stops itself
early it raises :class:`RunCensored` with the elapsed time; the policy records that sample as
censored (the true value is only known to be larger than ``elapsed``) and stops resampling. A
callable without a ``deadline`` parameter is never interrupted; if its finished value exceeds the
bound, the policy stops resampling and says so in ``reason`` (the value is exact, so it is not
censored). Values must be finite and positive-or-zero floats; anything else raises ``ValueError``
(the evaluation layer records that as a failed evaluation).

*A policy.* ``policy.evaluate(sample, iteration=0, history=(), incumbent=None, pruner=None)``
returns a frozen :class:`NoisyResult`:

``value``      the aggregated estimate (min/median/mean of the complete samples; for a censored
               result without a complete sample, the censoring time, a lower bound)
``samples``    tuple of all measured values in order (a censored one holds its elapsed time)
``n_samples``  ``len(samples)``
``censored``   True when the last sample was stopped by the pruning deadline
``pruned``     True when the last sample finished above the pruning bound, so resampling stopped
``reason``     why resampling stopped ("k samples", "ci narrow enough", "max_samples",
               "filtered: ...", "pruned: ...", "censored: ...")
``complete``   the samples that ran to completion (all but a censored last one)

``iteration`` is the index of this evaluation in the tuning run (0-based; the adaptive method's
thresholds tighten with it), ``history`` the values already measured in the run (all samples of
earlier configurations, used by the performance filter), ``incumbent`` the best aggregated value so
far (used by pruning and, optionally, by the filter).

*Pruning.* :class:`Pruner` turns ``(incumbent, history)`` into a deadline in seconds, e.g.
``Pruner(factor=2.0)`` stops any run longer than twice the incumbent; ``Pruner(estimator="median")``
stops runs longer than the median of the history (the thesis's "estimator based" pruning);
``Pruner(fixed=5.0)`` a constant bound (e.g. the default configuration's time).

*A session.* :class:`Session` keeps ``iteration``, ``history`` and ``incumbent`` between calls, so
``Session(Adaptive(max_samples=5), pruner=Pruner(3.0)).evaluate(sample)`` is all a tuning loop needs.

Wiring into gptask's evaluation layer (suggested): wrap ``lambda **kw: objective(task, params, **kw)``
as the sample callable, call ``session.evaluate``, store ``result.value`` as the evaluation value,
``result.samples`` as its repeats and mark ``result.censored`` evaluations with status "pruned".

Over 500 lines on purpose: the resampling policies and the pruning rules share their statistics
(confidence bounds of repeated launches); a standalone numpy/scipy module.
"""

from __future__ import annotations

import inspect
import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

__all__ = [
    "RunCensored",
    "NoisyResult",
    "Pruner",
    "StaticResampling",
    "SEDR",
    "Adaptive",
    "Session",
    "aggregate",
    "AGGREGATES",
    "check_aggregate",
    "ci_width",
    "accepts_deadline",
    "evaluate_with_state",
]

log = logging.getLogger(__name__)

Z95 = 1.96  # the thesis's normal quantile for a 95 % confidence interval
#: how repeated samples of one configuration are combined into its value
AGGREGATES: dict[str, Callable[[np.ndarray], float]] = {
    "min": lambda a: float(np.min(a)),
    "median": lambda a: float(np.median(a)),
    "mean": lambda a: float(np.mean(a)),
}


def check_aggregate(how: str, owner: str = "aggregate") -> str:
    """Return ``how`` if it names an entry of :data:`AGGREGATES`, else raise a ValueError naming ``owner``."""
    if how not in AGGREGATES:
        raise ValueError(f"{owner}: aggregate must be one of {sorted(AGGREGATES)}, got {how!r}")
    return how


class RunCensored(Exception):
    """Raised by a sample callable that stopped itself at its deadline.

    ``elapsed`` (seconds) is how long it ran: the true value is known to be at least that.
    """

    def __init__(self, elapsed: float, message: str = "") -> None:
        self.elapsed = float(elapsed)
        super().__init__(message or f"run stopped at its deadline after {self.elapsed:.4g} s")


@dataclass(frozen=True)
class NoisyResult:
    """The outcome of evaluating one configuration under a noise policy (read-only)."""

    value: float
    samples: tuple[float, ...]
    n_samples: int
    censored: bool
    reason: str
    complete: tuple[float, ...] = field(default=())
    pruned: bool = False

    def to_dict(self) -> dict:
        return {
            "value": self.value,
            "samples": list(self.samples),
            "n_samples": self.n_samples,
            "censored": self.censored,
            "pruned": self.pruned,
            "reason": self.reason,
        }


def aggregate(values: Sequence[float], how: str) -> float:
    """Aggregate samples: ``"min"``, ``"median"`` or ``"mean"``."""
    check_aggregate(how)
    if len(values) == 0:
        raise ValueError("aggregate: no values")
    return AGGREGATES[how](np.asarray(values, dtype=float))


def ci_width(values: Sequence[float], z: float = Z95) -> float:
    """Full width of the normal confidence interval of the mean: ``2 z s / sqrt(n)``.

    ``s`` is the sample standard deviation (ddof=1). Infinite for fewer than two values.
    """
    n = len(values)
    if n < 2:
        return math.inf
    s = float(np.std(np.asarray(values, dtype=float), ddof=1))
    return 2.0 * z * s / math.sqrt(n)


def accepts_deadline(fn: Callable) -> bool:
    """True when ``fn`` can be called with a ``deadline=`` keyword."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return False
    for p in sig.parameters.values():
        if p.kind is inspect.Parameter.VAR_KEYWORD:
            return True
        if p.name == "deadline" and p.kind in (
            inspect.Parameter.KEYWORD_ONLY,
            inspect.Parameter.POSITIONAL_OR_KEYWORD,
        ):
            return True
    return False


def _check_int(name: str, v: object, lo: int) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise TypeError(f"{name} must be an integer, got {v!r}")
    if int(v) < lo:
        raise ValueError(f"{name} must be >= {lo}, got {v}")
    return int(v)


def _check_pos(name: str, v: object, strict: bool = True) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float, np.floating, np.integer)):
        raise TypeError(f"{name} must be a number, got {v!r}")
    v = float(v)
    if not math.isfinite(v) or (v <= 0 if strict else v < 0):
        raise ValueError(f"{name} must be {'> 0' if strict else '>= 0'} and finite, got {v}")
    return v


class Pruner:
    """A deadline for the next run, derived from what is already known.

    Exactly one rule: ``factor`` (deadline = factor x incumbent), ``estimator`` ("median" or
    "mean" of the history, times ``factor`` when given) or ``fixed`` (a constant in seconds).
    ``min_history`` complete values are required before any deadline is set (the thesis does not
    prune its initial samples).
    """

    def __init__(
        self,
        factor: float | None = 2.0,
        estimator: str | None = None,
        fixed: float | None = None,
        min_history: int = 1,
    ) -> None:
        if estimator is not None and estimator not in ("median", "mean"):
            raise ValueError(f"Pruner: estimator must be 'median', 'mean' or None, got {estimator!r}")
        if fixed is not None:
            self.fixed: float | None = _check_pos("Pruner fixed", fixed)
        else:
            self.fixed = None
        self.factor = None if factor is None else _check_pos("Pruner factor", factor)
        if self.fixed is None and estimator is None and self.factor is None:
            raise ValueError("Pruner: give factor, estimator or fixed")
        self.estimator = estimator
        self.min_history = _check_int("Pruner min_history", min_history, 0)

    def deadline(self, incumbent: float | None, history: Sequence[float]) -> float | None:
        """Seconds after which the next run is stopped, or ``None`` for no bound."""
        if self.fixed is not None:
            return self.fixed
        if len(history) < self.min_history:
            return None
        if self.estimator is not None:
            ref = aggregate(history, self.estimator)
            return ref * (self.factor if self.factor is not None else 1.0)
        if incumbent is None or not math.isfinite(incumbent):
            return None
        return float(incumbent) * float(self.factor)

    def __repr__(self) -> str:
        return f"Pruner(factor={self.factor}, estimator={self.estimator}, fixed={self.fixed})"


class _Run:
    """Draws samples for one configuration, applying the deadline; shared by all policies."""

    def __init__(self, sample: Callable, deadline: float | None) -> None:
        if not callable(sample):
            raise TypeError(f"sample must be callable, got {sample!r}")
        self.sample = sample
        self.deadline = deadline
        self.pass_deadline = deadline is not None and accepts_deadline(sample)
        self.samples: list[float] = []
        self.complete: list[float] = []
        self.censored = False
        self.over_bound = False

    def draw(self) -> bool:
        """One sample; False when resampling must stop (censored or over the bound)."""
        try:
            v = self.sample(deadline=self.deadline) if self.pass_deadline else self.sample()
        except RunCensored as e:
            self.samples.append(e.elapsed)
            self.censored = True
            return False
        if isinstance(v, bool) or not isinstance(v, (int, float, np.floating, np.integer)):
            raise ValueError(f"sample() must return a number, got {v!r}")
        v = float(v)
        if not math.isfinite(v) or v < 0:
            raise ValueError(f"sample() must return a finite value >= 0, got {v}")
        self.samples.append(v)
        self.complete.append(v)
        if self.deadline is not None and v > self.deadline:
            self.over_bound = True
            return False
        return True

    def result(self, how: str, reason: str) -> NoisyResult:
        if self.censored:
            reason = f"censored: stopped at the deadline {self.deadline:.4g} s"
        elif self.over_bound:
            reason = f"pruned: {self.complete[-1]:.4g} s exceeds the bound {self.deadline:.4g} s"
        if self.complete:
            value = aggregate(self.complete, how)
            if self.censored:
                # a censored run is slower than the deadline: never report less than that
                value = max(value, float(self.deadline))
        else:
            value = float(self.samples[-1])
        return NoisyResult(
            value=value,
            samples=tuple(self.samples),
            n_samples=len(self.samples),
            censored=self.censored,
            reason=reason,
            complete=tuple(self.complete),
            pruned=self.over_bound,
        )


def _deadline(pruner: Pruner | None, incumbent: float | None, history: Sequence[float]):
    if pruner is None:
        return None
    if not isinstance(pruner, Pruner):
        raise TypeError(f"pruner must be a Pruner or None, got {pruner!r}")
    return pruner.deadline(incumbent, history)


class StaticResampling:
    """Run each configuration ``k`` times and aggregate (min, median or mean)."""

    def __init__(self, k: int = 3, aggregate: str = "min") -> None:
        self.k = _check_int("StaticResampling k", k, 1)
        self.aggregate = check_aggregate(aggregate, "StaticResampling")

    def evaluate(
        self,
        sample: Callable,
        iteration: int = 0,
        history: Sequence[float] = (),
        incumbent: float | None = None,
        pruner: Pruner | None = None,
    ) -> NoisyResult:
        run = _Run(sample, _deadline(pruner, incumbent, history))
        for _ in range(self.k):
            if not run.draw():
                break
        return run.result(self.aggregate, f"{self.k} samples")

    def __repr__(self) -> str:
        return f"StaticResampling(k={self.k}, aggregate={self.aggregate!r})"


class SEDR:
    """Standard-error dynamic resampling, with the interval width relative to the mean.

    Resample until ``2 z s / sqrt(n) <= rel_width * mean`` (z = 1.96) or ``max_samples`` samples,
    with at least ``min_samples`` (>= 2, needed to estimate the spread).
    """

    def __init__(
        self,
        rel_width: float = 0.1,
        min_samples: int = 2,
        max_samples: int = 10,
        aggregate: str = "mean",
        z: float = Z95,
    ) -> None:
        self.rel_width = _check_pos("SEDR rel_width", rel_width)
        self.min_samples = _check_int("SEDR min_samples", min_samples, 2)
        self.max_samples = _check_int("SEDR max_samples", max_samples, self.min_samples)
        self.aggregate = check_aggregate(aggregate, "SEDR")
        self.z = _check_pos("SEDR z", z)

    def _narrow(self, values: Sequence[float], rel: float) -> bool:
        return ci_width(values, self.z) <= rel * abs(float(np.mean(values)))

    def evaluate(
        self,
        sample: Callable,
        iteration: int = 0,
        history: Sequence[float] = (),
        incumbent: float | None = None,
        pruner: Pruner | None = None,
    ) -> NoisyResult:
        run = _Run(sample, _deadline(pruner, incumbent, history))
        reason = "max_samples"
        while len(run.samples) < self.max_samples:
            if not run.draw():
                break
            if len(run.complete) >= self.min_samples and self._narrow(run.complete, self.rel_width):
                reason = "ci narrow enough"
                break
        return run.result(self.aggregate, reason)

    def __repr__(self) -> str:
        return f"SEDR(rel_width={self.rel_width}, max_samples={self.max_samples})"


class Adaptive:
    """The thesis's adaptive resampling: bounded, iteration-dependent interval, performance filter.

    At iteration ``n`` (0-based count of configurations already evaluated in the run):

    * draw ``min_samples`` (2) samples;
    * performance filter: keep resampling only if ``median(samples) <= FC_f(n) * reference``, where
      ``reference`` is the median of ``history`` (the thesis) or, with ``filter_reference=
      "incumbent"``, ``incumbent / FC_f(n)`` is the allowed value (i.e. the ratio is applied to the
      best value so far); ``FC_f(n) = max(filter_decay ** n, filter_floor)`` (0.99, 0.5);
    * otherwise resample until ``2 z s / sqrt(k) <= FC_ci(n) * mean`` with
      ``FC_ci(n) = max(ci_decay ** n, ci_floor)`` (0.99, 0.1), at most ``max_samples`` in all (the
      thesis uses 10 % of the total budget).

    Without history the filter is skipped.
    """

    def __init__(
        self,
        max_samples: int = 5,
        min_samples: int = 2,
        ci_decay: float = 0.99,
        ci_floor: float = 0.1,
        filter_decay: float = 0.99,
        filter_floor: float = 0.5,
        filter_reference: str = "median",
        aggregate: str = "mean",
        z: float = Z95,
    ) -> None:
        self.min_samples = _check_int("Adaptive min_samples", min_samples, 1)
        self.max_samples = _check_int("Adaptive max_samples", max_samples, self.min_samples)
        for name, v in (("ci_decay", ci_decay), ("filter_decay", filter_decay)):
            if not 0 < _check_pos(f"Adaptive {name}", v) <= 1:
                raise ValueError(f"Adaptive: {name} must lie in (0, 1], got {v}")
        self.ci_decay, self.filter_decay = float(ci_decay), float(filter_decay)
        self.ci_floor = _check_pos("Adaptive ci_floor", ci_floor)
        self.filter_floor = _check_pos("Adaptive filter_floor", filter_floor)
        if filter_reference not in ("median", "incumbent"):
            raise ValueError(f"Adaptive: filter_reference must be 'median' or 'incumbent', got {filter_reference!r}")
        self.filter_reference = filter_reference
        self.aggregate = check_aggregate(aggregate, "Adaptive")
        self.z = _check_pos("Adaptive z", z)

    def ci_ratio(self, iteration: int) -> float:
        """FC_ci(n): the allowed interval width relative to the mean at iteration n."""
        return max(self.ci_decay ** max(int(iteration), 0), self.ci_floor)

    def filter_ratio(self, iteration: int) -> float:
        """FC_f(n): the performance filter's ratio at iteration n."""
        return max(self.filter_decay ** max(int(iteration), 0), self.filter_floor)

    def _promising(self, med: float, iteration: int, history: Sequence[float], incumbent: float | None) -> bool:
        r = self.filter_ratio(iteration)
        if self.filter_reference == "median":
            if len(history) == 0:
                return True
            return med <= r * float(np.median(np.asarray(history, dtype=float)))
        if incumbent is None or not math.isfinite(incumbent):
            return True
        return med <= float(incumbent) / r

    def evaluate(
        self,
        sample: Callable,
        iteration: int = 0,
        history: Sequence[float] = (),
        incumbent: float | None = None,
        pruner: Pruner | None = None,
    ) -> NoisyResult:
        _check_int("iteration", iteration, 0)
        run = _Run(sample, _deadline(pruner, incumbent, history))
        while len(run.samples) < self.min_samples:
            if not run.draw():
                return run.result(self.aggregate, "")
        med = float(np.median(run.complete))
        if not self._promising(med, iteration, history, incumbent):
            return run.result(
                self.aggregate,
                f"filtered: median {med:.4g} not within ratio {self.filter_ratio(iteration):.3g} of the "
                f"{self.filter_reference}",
            )
        rel = self.ci_ratio(iteration)
        reason = "max_samples"
        while True:
            if len(run.complete) >= 2 and ci_width(run.complete, self.z) <= rel * abs(float(np.mean(run.complete))):
                reason = "ci narrow enough"
                break
            if len(run.samples) >= self.max_samples or not run.draw():
                break
        return run.result(self.aggregate, reason)

    def __repr__(self) -> str:
        return f"Adaptive(max_samples={self.max_samples}, filter_reference={self.filter_reference!r})"


Policy = StaticResampling | SEDR | Adaptive


class Session:
    """A policy plus the state of one tuning run: iteration count, history, incumbent.

    ``start_iteration`` sets the iteration count of the first evaluation (e.g. when resuming a run,
    or to place a short experiment late in a long run's schedule).

    ``evaluate(sample)`` evaluates one configuration, then appends its complete samples to the
    history, updates the incumbent (best non-censored aggregated value) and the iteration.
    """

    def __init__(self, policy: Policy, pruner: Pruner | None = None, start_iteration: int = 0) -> None:
        if not hasattr(policy, "evaluate"):
            raise TypeError(f"Session: policy must have an evaluate(...) method, got {policy!r}")
        if pruner is not None and not isinstance(pruner, Pruner):
            raise TypeError(f"Session: pruner must be a Pruner or None, got {pruner!r}")
        self.policy = policy
        self.pruner = pruner
        self.iteration = _check_int("Session start_iteration", start_iteration, 0)
        self.history: list[float] = []
        self.incumbent: float | None = None
        self.results: list[NoisyResult] = []

    @property
    def total_samples(self) -> int:
        return sum(r.n_samples for r in self.results)

    def state(self) -> dict:
        """What the policy is given for the next evaluation: ``{"iteration", "history", "incumbent"}``
        (plain values: it can be sent to another process, which calls :func:`evaluate_with_state`)."""
        return {"iteration": self.iteration, "history": tuple(self.history), "incumbent": self.incumbent}

    def record(self, res: NoisyResult) -> None:
        """Fold an evaluation's result into the session (its samples, incumbent and iteration)."""
        self.history.extend(res.complete)
        if not res.censored and (self.incumbent is None or res.value < self.incumbent):
            self.incumbent = res.value
        self.iteration += 1
        self.results.append(res)
        log.debug("noise session: iteration %d -> %s", self.iteration, res)

    def evaluate(self, sample: Callable) -> NoisyResult:
        res = evaluate_with_state(self.policy, self.pruner, self.state(), sample)
        self.record(res)
        return res


def evaluate_with_state(policy: Policy, pruner: Pruner | None, state: dict, sample: Callable) -> NoisyResult:
    """One evaluation by ``policy`` given a session's :meth:`Session.state`: what
    :meth:`Session.evaluate` does, split so that the evaluation may run in a worker process and its
    result be recorded by the session in the tuner (:meth:`Session.record`)."""
    return policy.evaluate(sample, iteration=state["iteration"], history=tuple(state["history"]),
                           incumbent=state["incumbent"], pruner=pruner)
