"""The variance factor of the intervals users see, as a function of where a point lies (issue 45).

The folds of a cross-validation (``LCM.held_out``: :class:`HeldOut`) give held-out residuals r (N,) with the
fold model's variances w (N,) (latent, or latent plus noise) and its prior variance P (N,) of the held-out
point's task at one configuration. In relative units, z^2 = r^2 / P and u = w / P (u near 1 far from the
data, near 0 at a data point), the residuals are modelled as r^2 / P ~ a u^p chi^2_1: a variance that shrinks
with the model's own variance like a power p of it. :func:`fit_shape` fits p in [CALIBRATION_POWER_MIN, 1] by
maximum likelihood (a in closed form given p), keeps p = 1 unless the fit gains more than
CALIBRATION_POWER_NATS on it, and widens by the one-sided CALIBRATION_CONFIDENCE upper confidence bound of the
variance ratio, sum(z^2 / u^p) / chi2.ppf(1 - CALIBRATION_CONFIDENCE, N). The calibrated variance at a point
of relative variance u is then the raw variance times ``scale * u^(p - 1)`` (:meth:`VarianceShape.factor`),
held to [lower, CALIBRATION_MAX].

p = 1 is one factor for the whole space (the rule before, which CALIBRATION_POWER_MIN = 1 restores). After
a tuning the folds' held-out points sit close to other points; they miss by more of their own (small) sd than
uniform points do, and one factor set by them made the intervals far from the data 2.5-8 times too wide in
sd (bench/results/calibrated.md, session 39). A power under 1 widens near the data more than far from it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize_scalar
from scipy.stats import chi2

from .defaults import (CALIBRATION_CONFIDENCE, CALIBRATION_MAX, CALIBRATION_MIN, CALIBRATION_MIN_POINTS,
                       CALIBRATION_POWER_MIN, CALIBRATION_POWER_NATS, CALIBRATION_SHRINK_MIN_POINTS)

#: relative variances are floored here before their logarithm (a noise-free data point has u = 0)
U_FLOOR = 1e-12


@dataclass(frozen=True)
class VarianceShape:
    """The calibrated variance is the raw one times :meth:`factor` of its relative variance u (module
    docstring): ``scale`` the factor at u = 1, ``power`` p, ``lower`` the smallest factor allowed."""

    scale: float = 1.0
    power: float = 1.0
    lower: float = 1.0

    def factor(self, u: np.ndarray) -> np.ndarray:
        """(n,) factors at relative variances u (n,): scale * u^(p - 1) held to [lower, CALIBRATION_MAX]."""
        u = np.maximum(np.asarray(u, dtype=float), U_FLOOR)
        return np.clip(self.scale * u ** (self.power - 1.0), self.lower, CALIBRATION_MAX)

    def at_prior(self) -> float:
        """The factor where the model knows nothing of a point (u = 1)."""
        return float(self.factor(np.ones(1))[0])


#: fewer than CALIBRATION_MIN_POINTS held-out points: the raw variances
IDENTITY = VarianceShape()


def fit_shape(r: np.ndarray, w: np.ndarray, prior: np.ndarray, power_min: float | None = None,
              nats: float | None = None) -> VarianceShape:
    """The :class:`VarianceShape` of held-out residuals r (N,) with fold variances w (N,) and fold prior
    variances prior (N,) (module docstring); :data:`IDENTITY` under CALIBRATION_MIN_POINTS points. The
    factor may go under 1 (to CALIBRATION_MIN) only from CALIBRATION_SHRINK_MIN_POINTS points. power_min and
    nats: CALIBRATION_POWER_MIN and CALIBRATION_POWER_NATS when None (read at the call)."""
    power_min = CALIBRATION_POWER_MIN if power_min is None else float(power_min)
    nats = CALIBRATION_POWER_NATS if nats is None else float(nats)
    r, w, prior = (np.asarray(a, dtype=float) for a in (r, w, prior))
    n = r.size
    if n < CALIBRATION_MIN_POINTS:
        return IDENTITY
    z2 = r ** 2 / prior
    log_u = np.log(np.maximum(w / prior, U_FLOOR))

    def nll(p: float) -> float:  # profile: a(p) = mean(z^2 / u^p)
        return float(n * np.log(max(np.mean(z2 * np.exp(-p * log_u)), 1e-300)) + p * np.sum(log_u))

    candidates = [1.0, power_min]
    if power_min < 1.0:
        candidates.append(float(minimize_scalar(nll, bounds=(power_min, 1.0), method="bounded").x))
    p = min(candidates, key=nll)
    if nll(1.0) - nll(p) <= nats:  # the folds do not bear out a power under 1
        p = 1.0
    scale = float(np.sum(z2 * np.exp(-p * log_u)) / chi2.ppf(1.0 - CALIBRATION_CONFIDENCE, n))
    lower = CALIBRATION_MIN if n >= CALIBRATION_SHRINK_MIN_POINTS else 1.0
    return VarianceShape(scale, float(p), lower)


@dataclass(frozen=True)
class HeldOut:
    """The held-out observations of a cross-validation (``LCM.held_out``), in fold order, each (N,):
    residual r (in the fold's units), the fold's latent variance v and noise variance at the point, the
    task index, and the fold's prior variance of that task at one configuration (``LCM.task_covariance``)."""

    r: np.ndarray
    v: np.ndarray
    noise: np.ndarray
    task: np.ndarray
    prior: np.ndarray

    def shapes(self, mask: np.ndarray | None = None, **fit: float | None) -> tuple[VarianceShape, VarianceShape]:
        """(latent, noisy) shapes of the points ``mask`` selects (all by default): the latent on r against v
        alone (the noise cannot be told from roughness finer than the data), the noisy against v + noise;
        ``fit``: :func:`fit_shape`'s power_min and nats."""
        k = slice(None) if mask is None else mask
        return (fit_shape(self.r[k], self.v[k], self.prior[k], **fit),
                fit_shape(self.r[k], self.v[k] + self.noise[k], self.prior[k], **fit))

    def task_calibrations(self, n_tasks: int, own: str | None = None, **fit: float | None
                          ) -> tuple["TaskCalibration", ...]:
        """(n_tasks,) each task's :class:`TaskCalibration`: the pooled shapes of all held-out points and,
        with ``own`` "smaller" or "larger", for a task of at least CALIBRATION_MIN_POINTS held-out points the
        smaller or larger of those and the shapes of its own (``LCM.task_calibrations``); ``fit`` as
        :meth:`shapes`."""
        pooled = self.shapes(**fit)
        out = [TaskCalibration(pooled)] * n_tasks
        if own is not None:
            for i in range(n_tasks):
                mine = self.task == i
                if mine.sum() >= CALIBRATION_MIN_POINTS:
                    out[i] = TaskCalibration(pooled, self.shapes(mine, **fit), larger=own == "larger")
        return tuple(out)

    def for_targets(self, cals: tuple["TaskCalibration", ...], targets: np.ndarray, **fit: float | None
                    ) -> tuple["TaskCalibration", ...]:
        """``cals`` (T,) with each task of ``targets`` (indices) given the shapes of the held-out points of
        ``targets`` alone, pooled over them, when they number at least CALIBRATION_MIN_POINTS (else ``cals``
        as given); ``fit`` as :meth:`shapes`.

        For the target fidelity of a model of levels (``LCM(levels=...)``): its intervals are the ones users
        read, and its points are predicted across levels from cheap runs, which the cheap levels' own held-out
        points (most of the folds) do not measure. Pooled over all levels, the shapes gave intervals covering
        under 85 % on 17 of 75 tuned task-seeds; over the target level's points alone, on 7, and on 5 with the
        folds grouped by configuration (``LCM.held_out``; bench/results/calibrated.md, session 41)."""
        targets = np.asarray(targets, dtype=int)
        mine = np.isin(self.task, targets)
        if mine.sum() < CALIBRATION_MIN_POINTS:
            return tuple(cals)
        target, chosen = TaskCalibration(self.shapes(mine, **fit)), set(targets.tolist())
        return tuple(target if i in chosen else c for i, c in enumerate(cals))


@dataclass(frozen=True)
class TaskCalibration:
    """One task's calibration: ``pooled`` (latent, noisy) shapes of all tasks' held-out points and, where the
    task's own held-out points count (``LCM.task_calibration_factors``), ``own`` shapes of them alone; the
    factor at a point is then the larger of the two (``larger``) or the smaller."""

    pooled: tuple[VarianceShape, VarianceShape] = (IDENTITY, IDENTITY)
    own: tuple[VarianceShape, VarianceShape] | None = None
    larger: bool = False

    def factor(self, u: np.ndarray, noisy: bool = False) -> np.ndarray:
        """(n,) factors of the latent (or the noisy) variance at relative variances u (n,)."""
        k = int(noisy)
        f = self.pooled[k].factor(u)
        if self.own is None:
            return f
        return (np.maximum if self.larger else np.minimum)(f, self.own[k].factor(u))

    def at_prior(self) -> tuple[float, float]:
        """(latent, noisy) factors where the model knows nothing of a point (u = 1)."""
        return float(self.factor(np.ones(1))[0]), float(self.factor(np.ones(1), True)[0])

    def variances(self, v: np.ndarray, noise: np.ndarray | float, prior: np.ndarray | float
                  ) -> tuple[np.ndarray, np.ndarray]:
        """The calibrated (latent, noisy) variances (n,) of raw latent variances v (n,) with the noise
        variance and the task's prior variance there: (v + noise) x the noisy factor at (v + noise) / prior;
        v x the latent factor at v / prior, capped at the former."""
        noisy = v + noise
        var_noisy = noisy * self.factor(noisy / prior, noisy=True)
        return np.minimum(v * self.factor(v / prior), var_noisy), var_noisy
