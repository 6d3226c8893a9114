"""Leaving a stalled basin on a listed domain (issue 45, the convolution campaign's worst seeds).

On a listed or enumerated domain, once a task's best has not improved over its last
:data:`STALL_AFTER` searched runs, its next search (when it is not a cross-task pick) maximises the
acquisition, exactly, only over the configurations that differ from the task's incumbent in more
than :data:`STALL_RADIUS` parameters; never two such runs in a row (the proposer,
:class:`gptask.tuning.proposer.Proposer`, gives the next search back to the whole domain, so that
an optimum within the radius of a stalled incumbent stays reachable). One improvement ends the stall.

Why: traced on the worst seeds of the recorded convolution campaign
(``bench/archive/stall_trace.py``), EI was maximised exactly over every configuration not yet run,
with the task's best measured value as the incumbent, and did not vanish (log EI about -1.5 to
-3.7 in model units); but after the design it kept proposing the incumbent's neighbours, one or two
parameters away, predicted about as good as the incumbent with a small std and measured far worse
(the landscape is a needle: on MI250X 17 of 4,362 configurations are within 0.75 of the optimum),
while the optimum ranked below 3,000 of the remaining configurations under the model's mean, std
and EI. Random exploration on a stall was measured before and cost more runs than it rescued
(BENCHMARKS.md, issue 23); here the run still goes to the acquisition's best, taken from another
basin. Off by default (``STALL_AFTER`` None): with ``STALL_AFTER`` = 3 the campaign's 32 seeds at 40
runs per GPU moved -0.018 in mean (standard error 0.016) and its worst seed 0.678 -> 0.689: like
averaging EI over the hyperparameters it changes which seeds are bad, not how bad the worst is.
Figures: ``bench/results/convolution_worst.md``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..data.trials import Status, Trial
from ..problem.definition import Problem
from ..space.domain import Domain
from .settings import SOURCE_SEARCH, STALL_AFTER, STALL_RADIUS

__all__ = ["searched_since_best", "far_rows", "stall_escape"]


def _better(a: float, b: float, sign: float) -> bool:
    return a < b if sign > 0 else a > b


def searched_since_best(trials: Sequence[Trial], problem: Problem) -> tuple[int, Trial | None]:
    """(searched runs finished after the task's best, the best) over one task's ``trials`` in the
    order run: the best is the best COMPLETE value in the objective's direction among the runs meeting
    every limit (as :meth:`gptask.tuning.tuner.Tuner.best_value`); (0, None) when there is none."""
    spec = problem.outputs
    sign = -1.0 if spec is not None and spec.sign(spec.primary) < 0 else 1.0
    best: Trial | None = None
    since = 0
    for t in trials:
        if not t.status.finished:
            continue
        ok = (t.status is Status.COMPLETE and t.value is not None
              and (spec is None or spec.meets_limits(t.values)))
        if ok and (best is None or _better(float(t.value), float(best.value), sign)):
            best, since = t, 0
        elif best is not None and t.source == SOURCE_SEARCH:
            since += 1
    return (since, best) if best is not None else (0, None)


def far_rows(domain: Domain, incumbent: np.ndarray, claimed: np.ndarray | None, radius: int) -> np.ndarray:
    """Row numbers (m,) of ``domain``'s configurations not in ``claimed`` ((k, D) encoded) that
    differ from ``incumbent`` ((D,) encoded) in more than ``radius`` parameters."""
    inc = domain.indices_of(np.asarray(incumbent, dtype=float)[None, :])[0]
    far = np.flatnonzero((domain.index != inc).sum(axis=1) > radius)
    return np.intersect1d(far, domain.available(claimed))


def stall_escape(problem: Problem, task: Any, trials: Sequence[Trial], domain: Domain | None,
                 after: int | None = None, radius: int | None = None) -> np.ndarray | None:
    """Encoded configurations (m, D) that a stalled task's next search chooses from (module
    docstring), or None: no listed domain, not stalled (fewer than ``after`` searched runs since its
    best), or nothing left that far from its incumbent. trials: the task's trials in the order run;
    after, radius: None for STALL_AFTER and STALL_RADIUS (STALL_AFTER None: the rule is off)."""
    after = STALL_AFTER if after is None else after
    radius = STALL_RADIUS if radius is None else radius
    if domain is None or after is None:
        return None
    since, best = searched_since_best(trials, problem)
    if best is None or since < after:
        return None
    space = problem.param_space
    claimed = space.encode([t.params for t in trials])
    rows = far_rows(domain, space.encode([best.params])[0], claimed, radius)
    return domain.encode(rows) if len(rows) else None
