"""Model updates between full fits: block appends under a frozen output transform, and when to refit.

A full fit fixes the model's hyperparameters and its output transform (log or not, each task's
mean and std). Trials finished after it enter the model by ``LCM.append``: hyperparameters fixed,
the old Cholesky factor kept, only the new rows computed (O(N^2) per point, no optimisation).
Their values go through the *frozen* transform, so all points of a task share one affine map and
the model stays consistent; a failed trial, or a value beyond VALUE_LIMIT, is shown as the task's
worst measured model value (else the worst of any task, else 1.0: rule 3 of :mod:`.data` under the
frozen map). Under a log transform a value <= 0 is clamped to half the task's smallest positive
value (with a warning); the MLA tuner refits without the log before it gets here.

:class:`RefitPolicy` says when appending is no longer good enough:

* ``every``: once that many finished trials were added since the last full fit (1: a full fit
  for every change, the synchronous loop's behaviour; None: never for this reason);
* ``drift``: when the model stops predicting what arrives: the one-step-ahead standardised error
  ``e = (z - mean) / sqrt(var + noise)`` of each measured point, computed with the model *before*
  the point is appended (a leave-future-out check that costs one prediction), has a mean ``e^2``
  over the last DRIFT_WINDOW such points above DRIFT_E2, at least DRIFT_WINDOW points after the
  last full fit.

The tuner adds reasons of its own (a task's first measured value, the log transform switched
off): see ``Surrogate.transform_stale``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..numerics import LCM
from ...space.dimensions import Space
from ..transforms import OutputTransform
from ...data.trials import Trial
from .data import usable
from .settings import DRIFT_E2, DRIFT_WINDOW

__all__ = ["RefitPolicy", "ModelState"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RefitPolicy:
    """When a full refit replaces block appends (see the module docstring).

    every: finished trials added since the last full fit that make a refit due (None: never);
    drift: refit when the one-step-ahead errors say the model no longer predicts new results.
    """

    every: int | None = 1
    drift: bool = False

    def __post_init__(self) -> None:
        if self.every is not None and (isinstance(self.every, bool) or not isinstance(self.every, int)
                                       or self.every < 1):
            raise ValueError(f"refit_every must be an integer >= 1 or None, got {self.every!r}")


class ModelState:
    """The model a tuner searches on, and what it holds.

    model: the LCM; transform: the output transform frozen at the last full fit; ids: the trial ids
    in the model; measured: per task, the model values (z) of its measured points, (k_i,) arrays;
    positive: per task, the smallest positive measured value in user units (the clamp under log),
    or None; since_fit: trials added by appends since the last full fit; errors: the squared
    one-step-ahead errors of those appended points that were measured.
    """

    def __init__(self, model: LCM, transform: OutputTransform, trials: Sequence[Trial],
                 measured: Sequence[np.ndarray]) -> None:
        self.model, self.transform = model, transform
        self.ids = {t.id for t in trials}
        self.measured = [np.asarray(m, dtype=float) for m in measured]
        self.positive: list[float | None] = [None] * len(self.measured)
        for t in trials:
            if usable(t) and t.value > 0:
                p = self.positive[t.task_index]
                self.positive[t.task_index] = t.value if p is None else min(p, t.value)
        self.since_fit = 0
        self.errors: list[float] = []

    def best_z(self, i: int) -> float | None:
        """The smallest measured model value of task ``i`` (None when it has none)."""
        return float(np.min(self.measured[i])) if self.measured[i].size else None

    def _z(self, trial: Trial) -> float | None:
        """The model value of a finished trial under the frozen transform, or None (to impute)."""
        if not usable(trial):
            return None
        i, v = trial.task_index, float(trial.value)
        if self.transform.use_log and v <= 0:
            floor = 0.5 * self.positive[i] if self.positive[i] is not None else 1e-300
            log.warning("task %d: value %g <= 0 under the log transform is clamped to %g", i, v, floor)
            v = floor
        return float(self.transform.forward(i, np.array([v]))[0])

    def _imputed(self, i: int) -> float:
        if self.measured[i].size:
            return float(np.max(self.measured[i]))
        worst = [float(np.max(m)) for m in self.measured if m.size]
        return max(worst) if worst else 1.0

    def absorb(self, new: Sequence[Trial], policy: RefitPolicy, space: Space) -> str | None:
        """Append the finished trials ``new`` (not yet in the model) unless ``policy`` makes a full
        refit due: then nothing changes and the reason is returned."""
        n_after = self.since_fit + len(new)
        if policy.every is not None and n_after >= policy.every:
            return f"{n_after} new result(s) since the last full fit (refit every {policy.every})"
        rows = [(t, self._z(t), space.encode([t.params])) for t in new]
        errors = list(self.errors)
        for t, z, x in rows:
            if z is not None:
                mean, var = self.model.predict(t.task_index, x, include_noise=True)
                errors.append(float((z - mean[0]) ** 2 / var[0]))
        if policy.drift and n_after >= DRIFT_WINDOW and len(errors) >= DRIFT_WINDOW:
            e2 = float(np.mean(errors[-DRIFT_WINDOW:]))
            if e2 > DRIFT_E2:
                return f"the model stopped predicting new results (mean squared standardised error {e2:.3g})"
        model = self.model
        for i in sorted({t.task_index for t in new}):
            mine = [(t, z, x) for t, z, x in rows if t.task_index == i]
            for t, z, _ in mine:
                if z is not None:
                    self.measured[i] = np.append(self.measured[i], z)
                    if t.value > 0 and (self.positive[i] is None or t.value < self.positive[i]):
                        self.positive[i] = float(t.value)
            zs = np.array([self._imputed(i) if z is None else z for _, z, _ in mine])
            model = model.append(i, np.vstack([x for _, _, x in mine]), zs)
        self.model = model
        self.ids |= {t.id for t in new}
        self.since_fit, self.errors = n_after, errors
        return None
