"""Fantasies: trials still running enter the model as if their results were known (kriging believer).

A PENDING trial has no value yet. Before an acquisition search the tuner conditions a *copy* of its
model on every pending configuration, each believed to take the model's own posterior mean there
(``LCM.append``: hyperparameters fixed, the Cholesky factor extended by one block per task, the
tuner's model untouched). The incumbent a task's EI improves on includes these believed values.

Fantasies are noise-free (``append(..., noise_free=True)``): the latent value at a pending point is
taken as known. A noisy fantasy only shrinks the latent variance there to ``v n / (v + n)`` (v the
posterior variance, n the task's noise variance, often of the same size after a few points), so EI
keeps its maximum on the pending point and the next proposal lands beside it (measured: three
proposals of one task within 0.004 of each other on a 1-D bowl). The pending run *will* measure f
there; no configuration is ever run twice; what the search must learn is "not here again".

Why the kriging believer rather than a constant liar
----------------------------------------------------
* Conditioning on ``y = mean(x)`` leaves the posterior mean unchanged everywhere, in every task
  (the innovation ``y - mean`` is zero); only the variances shrink: around the pending points of
  their own task and, through the coregionalisation ``B_q[i, j]``, around them in correlated
  tasks. The search sees exactly "this region is being measured already" and no invented trend.
  A constant liar (the task's best, worst or mean value as the lie) moves the posterior mean
  around every pending point, and in an LCM the lie leaks into each correlated task's mean as well;
  a pessimistic lie near the incumbent pushes later proposals out of the good basin, an optimistic
  one pulls them in.
* At and around a pending point the believed value is known (variance about zero) and no better
  than the incumbent, which counts the believed values less the task's noise std
  (:func:`believed_best`), so EI there is about zero: the k+1-th proposal of a task with k trials
  in flight goes somewhere else instead of next to one of them (what a search without fantasies
  does: its EI maximiser has not moved).
* It costs one block append per task with pending trials, O(N^2 p) for p pending points on N
  data, and no fit. (Believed means are taken from the model before any fantasy: since each
  fantasy leaves every mean unchanged, that is the same as believing them one after another.)

Known weakness: the believer trusts the mean, so a wrong mean is not questioned until real results
arrive; they replace the fantasies at the next ask.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np

from ..numerics import LCM

__all__ = ["with_fantasies", "believed_best"]

log = logging.getLogger(__name__)


def with_fantasies(model: LCM, pending: Sequence[np.ndarray]) -> tuple[LCM, list[np.ndarray]]:
    """``model`` conditioned on ``pending[i]`` ((p_i, D) encoded configurations of task i, in the unit
    cube) at its own posterior means, and those means per task ((p_i,) each, in model units).

    Returns ``model`` itself when nothing is pending. A task whose block cannot be factorised (a
    pending point on top of data with a tiny noise) is left out with a warning: its proposals then
    only avoid the exact pending configurations."""
    out, means = model, []
    for i, X in enumerate(pending):
        X = np.asarray(X, dtype=float)
        if X.shape[0] == 0:
            means.append(np.empty(0))
            continue
        mu, _ = model.predict(i, X)
        try:
            out = out.append(i, X, mu, noise_free=True)
        except np.linalg.LinAlgError as exc:  # CholeskyError included
            log.warning("task %d: %d pending trial(s) could not enter the model as fantasies (%s)", i, len(X), exc)
            means.append(np.empty(0))
            continue
        means.append(mu)
    return out, means


def believed_best(best_z: float | None, believed: np.ndarray, margin: float) -> float | None:
    """The incumbent of a task with pending trials: ``min(best_z, min(believed) - margin)``, None
    when the task has neither a measured nor a believed value.

    margin: the noise std of the task in model units. A believed value is what the pending run is
    expected to measure, give or take that noise; an improvement on it counts only beyond the noise
    the measurement will carry. Without the margin, a noise-free fantasy next to the minimum of the
    posterior mean gives "improvements" of 1e-7 with zero variance, and EI prefers those to real
    exploration (measured: the next proposal 5e-4 from a pending one).
    """
    values = [float(v) - float(margin) for v in np.asarray(believed).reshape(-1)]
    values += [] if best_z is None else [float(best_z)]
    return min(values) if values else None
