"""Training data: the finished trials of a run, as the LCM sees them.

The rule, one place for every fit, refit and final model update:

1. *Usable values.* A trial's value is a measurement for the model when the trial is COMPLETE or
   CENSORED (a censored value is where the run was stopped, already worse than the pruning bound)
   and ``|value| <= VALUE_LIMIT`` (1e150, :mod:`gptask.model.surrogate.settings`). The stored value is never
   changed: 1e308 stays 1e308 in the history and in ``result.history``.
2. *Transform.* ``w = log(y)`` under the log transform, else ``w = y``; then per task
   ``z = (w - mu_i) / sigma_i`` with the mean and std of the task's usable ``w``
   (:class:`gptask.model.transforms.OutputTransform`). The log needs every usable value > 0
   (:func:`log_possible`); the tuner switches it off for good when a value <= 0 arrives.
3. *Imputation.* A FAILED trial, or a value beyond the limit, is shown to the model as the task's
   worst (largest) usable ``z``: the search learns to stay away without a huge number wrecking
   the scale. A task with no usable value gets the largest ``z`` of all tasks (1.0 if none has any).

Bounds: every ``z`` is finite. With ``n_i`` usable points a task's ``z`` lies within
``sqrt(n_i)`` of 0 (a standardised sample cannot stretch further), whatever values were returned.

PENDING trials are listed separately (``pending``): they never enter a fit; a search sees them as
fantasies (:mod:`.fantasy`). Trials finished after a full fit enter the model by block appends
under the transform frozen at that fit (:mod:`.updates`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..numerics import defaults
from ...space.dimensions import Space
from ..transforms import OutputTransform
from ...data.trials import Status, Trial, params_key
from .settings import VALUE_LIMIT

__all__ = ["TrainingData", "training_data", "usable", "usable_values", "log_possible", "check_fit_size",
           "shared_scales"]


def check_fit_size(n_points: int, what: str = "") -> None:
    """ValueError when ``n_points`` are more than the exact model fits
    (:data:`gptask.model.numerics.defaults.EXACT_FIT_MAX_POINTS`, read at call time), before anything is built.
    what: how the points came about (default: "N finished trials")."""
    limit = defaults.EXACT_FIT_MAX_POINTS
    if n_points > limit:
        raise ValueError(f"{what or f'{n_points:,} finished trials'}: more points than the exact model fits (at most "
                         f"{limit:,}: its memory grows as N^2 and its time as N^3, one likelihood evaluation at 5,000 "
                         "points takes about 14 s on 2 cores); tune fewer tasks or a smaller budget, or raise "
                         "gptask.model.numerics.defaults.EXACT_FIT_MAX_POINTS if you can wait")


def usable(trial: Trial) -> bool:
    """Whether ``trial``'s value is a measurement the model takes (rule 1 of the module docstring)."""
    return (trial.status in (Status.COMPLETE, Status.CENSORED) and trial.value is not None
            and abs(trial.value) <= VALUE_LIMIT)


def usable_values(trials: Sequence[Trial], n_tasks: int) -> list[np.ndarray]:
    """Per task, the usable values in trial order: ``n_tasks`` arrays of shape (k_i,)."""
    out: list[list[float]] = [[] for _ in range(n_tasks)]
    for t in trials:
        if usable(t):
            out[t.task_index].append(float(t.value))
    return [np.asarray(v, dtype=float) for v in out]


def log_possible(values: Sequence[np.ndarray]) -> bool:
    """True when there is a usable value and every one is > 0."""
    return any(v.size for v in values) and all(bool(np.all(v > 0)) for v in values)


@dataclass(frozen=True)
class TrainingData:
    """What one fit sees.

    X: per task, (n_i, D) encoded finished trials; y: per task, (n_i,) values in model units;
    measured: per task, (n_i,) True where y is a usable value (False: imputed);
    values: per task, the usable values in user units; transform: user -> model units;
    pending: per task, (p_i, D) encoded PENDING trials; key: identifies the data and the model
    settings (equal keys: a fit would see exactly the same thing).
    """

    X: list[np.ndarray]
    y: list[np.ndarray]
    measured: list[np.ndarray]
    values: list[np.ndarray]
    transform: OutputTransform
    pending: list[np.ndarray]
    key: str

    @property
    def n_points(self) -> int:
        return int(sum(len(x) for x in self.X))

    def best_z(self, i: int) -> float | None:
        """The smallest measured model-unit value of task ``i``, or None when it has none."""
        z = self.y[i][self.measured[i]]
        return float(np.min(z)) if z.size else None


def _key(finished: Sequence[Trial], use_log: bool, model_settings: Sequence) -> str:
    rows = [[t.id, t.status.value, t.value] for t in finished]
    text = json.dumps([rows, bool(use_log), list(model_settings)], separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def shared_scales(transform: OutputTransform, finished: Sequence[Trial],
                  scale_from: Sequence[int | None]) -> OutputTransform:
    """``transform`` with each task ``i`` whose ``scale_from[i]`` is a task ``r`` put on ``r``'s
    scale: ``r``'s spread, and ``r``'s mean moved by the mean difference of ``i``'s usable values
    from ``r``'s at the configurations both measured (in the transform's units: log or not); ``i``'s
    own mean where they share none. A task keeps its own scale where ``scale_from[i]`` is None or
    ``r`` has fewer than two usable values. For the fidelity levels of one task (the same objective
    at another cost): a level of two runs standardised on its own loses how its values sit
    against the cheaper level's, which is what the model should carry over (bench/fidelity_kernel.py).
    """
    n = len(transform.mu)
    mu, sigma = transform.mu.copy(), transform.sigma.copy()
    by_task: list[dict[str, list[float]]] = [{} for _ in range(n)]
    for t in finished:
        if usable(t) and t.task_index < n:
            w = float(np.log(t.value)) if transform.use_log else float(t.value)
            by_task[t.task_index].setdefault(params_key(t.params), []).append(w)
    for i, r in enumerate(scale_from):
        if r is None or r == i or sum(len(v) for v in by_task[r].values()) < 2:
            continue
        own = [w for ws in by_task[i].values() for w in ws]
        shared = [float(np.mean(ws)) - float(np.mean(by_task[r][k])) for k, ws in by_task[i].items() if k in by_task[r]]
        if shared:
            mu[i] = transform.mu[r] + float(np.mean(shared))
        elif own:
            mu[i] = float(np.mean(own))
        else:
            mu[i] = transform.mu[r]
        sigma[i] = transform.sigma[r]
    return OutputTransform(transform.use_log, mu, sigma)


def training_data(trials: Sequence[Trial], n_tasks: int, space: Space, use_log: bool,
                  model_settings: Sequence = (), scale_from: Sequence[int | None] = ()) -> TrainingData:
    """The :class:`TrainingData` of ``trials`` under the rule of the module docstring.

    use_log: the log transform (the caller checks :func:`log_possible` first; a value <= 0 under
    it raises ValueError). model_settings: JSON values that change what a fit produces (number of
    latent processes, kernel), folded into the key. scale_from: per task, the task whose scale it
    takes (:func:`shared_scales`; empty: each its own).
    """
    finished = [t for t in trials if t.status.finished]
    check_fit_size(len(finished))
    values = usable_values(finished, n_tasks)
    if use_log and not log_possible(values):
        raise ValueError("the log transform needs every usable value > 0")
    transform = OutputTransform.fit(values, use_log=use_log)
    if any(r is not None for r in scale_from):
        transform = shared_scales(transform, finished, scale_from)
    worst_all = max((float(np.max(transform.forward(i, v))) for i, v in enumerate(values) if v.size), default=1.0)
    X, Y, measured, pending = [], [], [], []
    for i in range(n_tasks):
        mine = [t for t in finished if t.task_index == i]
        ok = np.array([usable(t) for t in mine], dtype=bool)
        z = np.empty(len(mine))
        z_ok = transform.forward(i, values[i])
        z[ok] = z_ok
        z[~ok] = float(np.max(z_ok)) if z_ok.size else worst_all
        X.append(space.encode([t.params for t in mine]) if mine else np.empty((0, space.n_columns)))
        Y.append(z)
        measured.append(ok)
        waiting = [t.params for t in trials if t.task_index == i and t.status is Status.PENDING]
        pending.append(space.encode(waiting) if waiting else np.empty((0, space.n_columns)))
    return TrainingData(X, Y, measured, values, transform, pending, _key(finished, use_log, model_settings))
