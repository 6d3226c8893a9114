"""Run-free performance prediction: the objective of a configuration on a tuned or a new task.

For a tuned task: the LCM posterior at the configuration, mapped back to user units with the
output transform (under the log transform the mean is the predictive median, the std the
log-normal std). For a new task no LCM route exists (the LCM correlates tasks by identity, not
by their features), so we use a TLA1-style GP *over tasks*: at the configuration, every tuned
task's LCM posterior mean is taken in log units (``mu_i + sigma_i * m_i(x)``, comparable across
tasks), a single-output GP over the encoded tasks is fitted to those values and evaluated at the
new task (std including that GP's noise). When the model was fitted without the log transform
but every tuned task's best value and every posterior mean involved are positive (times, the
usual case), the values are interpolated over tasks in log space all the same: a positive
objective spanning orders of magnitude across tasks (message sizes from bytes to megabytes)
otherwise interpolates to negative or wildly wrong predictions. :func:`gptask.transfer_accuracy`
measures how far to trust it by leaving each tuned task out in turn.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..models import LCM
from ..transforms import OutputTransform
from .model import GP_RESTARTS, ScalarGP, TransferModel, as_transfer_model

__all__ = ["predict", "predict_encoded"]


def _to_user(transform_log: bool, w: np.ndarray, s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Log-unit (or raw-unit) mean/std -> user units (median and log-normal std under log)."""
    t = OutputTransform(transform_log, np.zeros(1), np.ones(1))
    return t.backward(0, w), t.backward_std(0, w, s)


def _log_units(model: LCM, transform: OutputTransform, tasks: Sequence[int], X: np.ndarray) -> np.ndarray:
    """(len(tasks), n): each task's LCM posterior mean at X (n, D) in log (or raw) user units."""
    out = np.empty((len(tasks), len(X)))
    for r, i in enumerate(tasks):
        m, _ = model.predict(i, X)
        out[r] = transform.mu[i] + transform.sigma[i] * m
    return out


def _over_tasks(task_X: np.ndarray, W: np.ndarray, x_new: np.ndarray, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """GP over tasks, one per column of W (T, n): mean and std (n,) at the encoded task x_new (c,)."""
    means, stds = np.empty(W.shape[1]), np.empty(W.shape[1])
    prev = None
    for k in range(W.shape[1]):
        gp = ScalarGP.fit(task_X, W[:, k], seed=seed, restarts=GP_RESTARTS if prev is None else 1, init=prev)
        m, s = gp.predict(x_new[None, :])
        means[k], stds[k] = m[0], s[0]
        prev = gp if gp.gp is not None else prev
    return means, stds


def _positive_objective(tm: TransferModel, tuned: Sequence[int]) -> bool:
    """True when every tuned task's best (smallest) observed value is positive."""
    bests = [tm.best[j] for j in tuned]
    return all(b is not None and b[1] > 0.0 for b in bests)


def predict_encoded(tm: TransferModel, task: dict, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Predicted objective (user units) of the encoded configurations X (n, D) on ``task`` (a
    validated dict): mean and std, (n,) each (see the module docstring for the two routes)."""
    i = tm.task_index(task)
    if i is not None and tm.model.n_points[i] > 0:
        m, v = tm.model.predict(i, X)
        return tm.transform.backward(i, m), tm.transform.backward_std(i, m, np.sqrt(np.maximum(v, 0.0)))
    tuned = [j for j in range(len(tm.tasks)) if tm.model.n_points[j] > 0]
    if len(tuned) < 2:
        raise ValueError("predicting a new task needs a model with at least 2 tuned tasks")
    W = _log_units(tm.model, tm.transform, tuned, X)
    use_log = tm.transform.use_log
    if not use_log and _positive_objective(tm, tuned) and np.all(W > 0.0):
        W, use_log = np.log(W), True
    tx = tm.task_space.encode([tm.tasks[j] for j in tuned])
    w, s = _over_tasks(tx, W, tm.task_space.encode([task])[0])
    return _to_user(use_log, w, s)


def predict(source: Any, task: Mapping[str, Any], params: Mapping[str, Any] | Sequence[Mapping[str, Any]]):
    """Run-free predicted objective of ``params`` on ``task``: ``(mean, std)`` in user units.

    source: a :class:`gptask.TuningResult` or a model from :func:`gptask.load_model`.
    params: one configuration (dict) -> two floats; a list of n dicts -> two (n,) arrays.
    A tuned task uses the LCM; a new task the GP over tasks (module docstring). The configuration
    is validated against the parameter space (not against the constraints).
    """
    tm = as_transfer_model(source)
    task = tm.validate_task(task)
    single = isinstance(params, Mapping)
    plist = [params] if single else list(params)
    if not plist:
        raise ValueError("params must be a configuration dict or a non-empty list of them")
    X = tm.param_space.encode([tm.param_space.validate(p, what="params") for p in plist])
    mean, std = predict_encoded(tm, task, X)
    if single:
        return float(mean[0]), float(std[0])
    return np.asarray(mean, float), np.asarray(std, float)
