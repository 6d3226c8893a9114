"""How far to trust a fitted model's run-free predictions: within-task K-fold and leave-one-task-out.

Both checks keep the fitted hyperparameters and re-condition the model on the data of each fold
(:meth:`gptask.model.numerics.LCM.subset`: one factorisation per fold, no refit), then score the
predictions of every held-out COMPLETE trial against its measured value. The hyperparameters did see
the held-out points, so the figures are slightly optimistic; ``bench/run_free.py`` measures the
same with a full refit per fold. The units did not see them: within a task, a fold puts a per-task
standardised task (:meth:`~gptask.model.numerics.LCM.standardized_tasks`, the tuner's output
transform) in the units of its remaining points (:meth:`~gptask.model.numerics.LCM.task_fold_units`: with
fidelity levels every level of a base task in its cheapest level's units, as the tuner puts them), as
the tuner would see a new point (issue 45: with the held-out point inside the sample that set its
units, its standardised value is bounded by (n-1)/sqrt(n), and small tasks covered too much). Failed and censored trials are never held out (they stay in the
data of every fold, as the model sees them).

* :func:`within_task_cv`: each task's complete trials are split at random (seeded) into ``folds``
  parts; fold k of every task is held out at once. A task with a single trial in the model (a
  fidelity level or an auxiliary task run once) is not held out: no fold can leave a task empty. With
  fidelity levels, a configuration is held out at every level at once
  (:meth:`gptask.model.numerics.LCM.fold_parts`): a target run promoted from a cheap one is otherwise
  predicted from its cheap twin, which a new configuration does not have. A prediction is the model's
  posterior for that task *with its noise* (a new measurement), in the fold's units (above), mapped
  back to the model's units of all data and to user units through the output transform.
* :func:`leave_one_task_out`: task i is removed from the model altogether (its data, its rows of the
  task covariance, its output transform) and its trials are predicted with :func:`gptask.predict`
  as for a task never seen: the run-free path a user gets for a new problem instance.

Scores (:meth:`CVReport.summary`): ``mape``, the mean over held-out points of
``|predicted - measured| / |measured|`` (None when a measured value is 0); ``spearman``, the mean over tasks (with 3 or more held-out
points) of the rank correlation between predicted and measured values; ``coverage``, the fraction of
measurements inside the central 95 % predictive interval (``Z95`` standard deviations either side,
on the log scale when values are modelled there), and ``coverage_latent``, the fraction inside the
interval of the latent function alone (no noise; within-task only, None for leave-one-task-out):
calibration, latent against with noise (issue 45). A calibrated model covers about 95 % with noise;
the latent interval covers fewer measurements the noisier they are. Leave-one-task-out also ranks each task's
configurations by predicted value (:meth:`CVReport.ranking`): the measured value of the top-ranked
one and of the problem's default, each relative to the best measured value of the task.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.stats import spearmanr

from ..results.result import TuningResult
from . import predict
from ..model.transforms import OutputTransform
from ..data.trials import Status

__all__ = ["HeldOut", "CVReport", "within_task_cv", "leave_one_task_out", "interval95", "Z95", "MIN_RANK_POINTS"]

#: half-width of the central 95 % interval of a normal distribution, in standard deviations
Z95 = 1.959963984540054
#: fewest held-out points of a task for its rank correlation to count
MIN_RANK_POINTS = 3


@dataclass(frozen=True)
class HeldOut:
    """One held-out trial: its task index and params, the measured value, the prediction and the
    central 95 % predictive interval (user units), and the fold that held it out (within-task: the
    fold number; leave-one-task-out: the task index); lower_latent, upper_latent: the central 95 %
    interval of the latent function (no noise; None where not computed)."""

    task_index: int
    params: dict
    measured: float
    predicted: float
    lower: float
    upper: float
    fold: int
    lower_latent: float | None = None
    upper_latent: float | None = None


@dataclass
class CVReport:
    """The held-out predictions of one check. method: "within-task k-fold" or
    "leave-one-task-out"; points: every :class:`HeldOut`; defaults: per task, the measured value of
    the problem's default configuration (None: none)."""

    method: str
    points: list[HeldOut] = field(default_factory=list)
    defaults: list[float | None] = field(default_factory=list)

    def tasks(self) -> list[int]:
        return sorted({p.task_index for p in self.points})

    def _of(self, i: int) -> list[HeldOut]:
        return [p for p in self.points if p.task_index == i]

    @staticmethod
    def _scores(points: Sequence[HeldOut]) -> dict[str, Any]:
        meas = np.array([p.measured for p in points])
        pred = np.array([p.predicted for p in points])
        inside = [p.lower <= p.measured <= p.upper for p in points]
        latent = [p.lower_latent <= p.measured <= p.upper_latent for p in points
                  if p.lower_latent is not None and p.upper_latent is not None]
        rho = float(spearmanr(pred, meas).statistic) if len(points) >= MIN_RANK_POINTS else None
        # a relative error has no meaning for a measured 0 (an objective crossing zero): None, not inf
        mape = float(np.mean(np.abs(pred - meas) / np.abs(meas))) if np.all(meas != 0) else None
        return {"n": len(points), "mape": mape,
                "spearman": None if rho is None or not math.isfinite(rho) else rho,
                "coverage": float(np.mean(inside)),
                "coverage_latent": float(np.mean(latent)) if latent else None}

    def by_task(self) -> list[dict[str, Any]]:
        """Per task: task_index, n (held-out points), mape, spearman, coverage, coverage_latent."""
        return [{"task_index": i, **self._scores(self._of(i))} for i in self.tasks()]

    def summary(self) -> dict[str, Any]:
        """method, n_points, n_tasks, mape (pooled over points), spearman (mean over tasks), coverage,
        coverage_latent (pooled; None when no point has a latent interval)."""
        if not self.points:
            raise ValueError(f"{self.method}: no held-out point")
        rhos = [r["spearman"] for r in self.by_task() if r["spearman"] is not None]
        pooled = self._scores(self.points)
        return {"method": self.method, "n_points": len(self.points), "n_tasks": len(self.tasks()),
                "mape": pooled["mape"], "spearman": float(np.mean(rhos)) if rhos else None,
                "coverage": pooled["coverage"], "coverage_latent": pooled["coverage_latent"]}

    def ranking(self) -> list[dict[str, Any]]:
        """Per task: ``best`` (the best measured value), ``top`` (the measured value of the
        configuration predicted best), ``top_over_best`` and, with a measured default,
        ``default_over_best`` and ``top_gain`` (the top-ranked configuration's gain over the
        default, ``(default - top) / default``)."""
        out = []
        for i in self.tasks():
            pts = self._of(i)
            best = min(p.measured for p in pts)
            top = min(pts, key=lambda p: p.predicted)
            row: dict[str, Any] = {"task_index": i, "best": best, "top": top.measured, "top_params": top.params,
                                   "top_over_best": top.measured / best}
            d = self.defaults[i] if i < len(self.defaults) else None
            row["default_over_best"] = None if d is None else d / best
            row["top_gain"] = None if d is None else (d - top.measured) / d
            out.append(row)
        return out


def _trials_by_task(result: TuningResult) -> list[list]:
    """Per task, its finished trials in the order of the model's data rows (checked)."""
    Xs, _ = result.model.data()
    out = []
    for i in range(len(result.tasks)):
        mine = [t for t in result.history if t["task_index"] == i and t["status"] != Status.PENDING]
        X = result.problem.param_space.encode([t["params"] for t in mine]) if mine else np.empty((0, Xs[i].shape[1]))
        if X.shape != Xs[i].shape or not np.allclose(X, Xs[i]):
            raise ValueError(f"task {i}: the result's history does not match its model's data "
                             "(a result whose model was not fitted on its history)")
        out.append(mine)
    return out


def _defaults(result: TuningResult) -> list[float | None]:
    if result.problem.default is None:
        return [None] * len(result.tasks)
    return [None if (d := result.default(i)) is None else d[1] for i in range(len(result.tasks))]


def interval95(use_log: bool, median: np.ndarray, sd: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Central 95 % interval from a prediction in user units: the median and std of a log-normal
    (``use_log``: the std is converted back to the log scale exactly) or a normal's mean and std."""
    median, sd = np.asarray(median, float), np.asarray(sd, float)
    if not use_log:
        return median - Z95 * sd, median + Z95 * sd
    ratio2 = (sd / median) ** 2  # = (e^{s^2} - 1) e^{s^2} for a log-normal with median `median`
    s = np.sqrt(np.log((1.0 + np.sqrt(1.0 + 4.0 * ratio2)) / 2.0))
    return median * np.exp(-Z95 * s), median * np.exp(Z95 * s)


def within_task_cv(result: TuningResult, folds: int = 5, seed: int = 0) -> CVReport:
    """K-fold cross-validation within every task (module docstring); returns a :class:`CVReport`."""
    if isinstance(folds, bool) or not isinstance(folds, int) or folds < 2:
        raise ValueError(f"folds must be an integer >= 2, got {folds!r}")
    model, tr = result.model, result.transform
    if model is None or tr is None:
        raise ValueError("the result has no fitted model")
    trials = _trials_by_task(result)
    Xs, ys = model.data()
    rng = np.random.default_rng(seed)
    level_parts = model.fold_parts(folds, seed) if getattr(model, "levels", None) is not None else None
    fold_of = []
    for i, mine in enumerate(trials):
        ok = np.array([t["status"] == Status.COMPLETE for t in mine], dtype=bool)
        f = np.full(len(mine), -1)
        if level_parts is not None:  # fidelity levels: a configuration held out at every level at once
            f[ok] = level_parts[i][ok]
        elif len(mine) >= 2:  # a task of one point keeps it in every fold (a fold cannot leave a task empty)
            f[ok] = rng.permutation(int(ok.sum())) % folds
        fold_of.append(f)
    report = CVReport(f"within-task {folds}-fold", defaults=_defaults(result))
    T = len(result.tasks)
    standardized = model.standardized_tasks()
    for k in range(folds):
        keep = [fold_of[i] != k for i in range(T)]
        # a per-task standardised task is re-standardised on the fold's remaining points (its held-out
        # points must not set the units they are scored in: issue 45)
        units = model.task_fold_units(keep, standardized)
        sub = model.subset(range(T), [Xs[i][keep[i]] for i in range(T)],
                           [(ys[i][keep[i]] - units[i][0]) / units[i][1] for i in range(T)])
        for i in range(T):
            held = np.flatnonzero(fold_of[i] == k)
            if not held.size:
                continue
            # the calibrated predictive (LCM.calibration_factor, from the fold's own points), back in
            # the model's units of all data
            a, b = units[i]
            m, v = sub.predict_calibrated(i, Xs[i][held], include_noise=True)
            _, v_latent = sub.predict_calibrated(i, Xs[i][held])
            m, v, v_latent = a + b * m, b * b * v, b * b * v_latent
            s = np.sqrt(np.maximum(v, 0.0))
            s_latent = np.sqrt(np.maximum(v_latent, 0.0))
            lo = tr.backward(i, m - Z95 * s)
            hi = tr.backward(i, m + Z95 * s)
            lo_latent = tr.backward(i, m - Z95 * s_latent)
            hi_latent = tr.backward(i, m + Z95 * s_latent)
            pred = tr.backward(i, m)
            for j, h in enumerate(held):
                t = trials[i][h]
                report.points.append(HeldOut(i, dict(t["params"]), float(t["value"]), float(pred[j]),
                                             float(lo[j]), float(hi[j]), k, float(lo_latent[j]),
                                             float(hi_latent[j])))
    return report


def leave_one_task_out(result: TuningResult, max_points: int | None = None,
                       tasks: Sequence[int] | None = None) -> CVReport:
    """Each task predicted by a model of the other tasks only, through :func:`gptask.predict`
    (module docstring); needs 3 or more tasks with complete trials. Returns a :class:`CVReport`.

    max_points: score at most this many complete trials per held-out task, evenly spaced in trial
    order (None: all; each held-out task refits the new-task model, the GP over the tasks or the
    joint GP of a problem with features, so large data sets are scored on a sample). tasks: hold
    out only these task indices (None: every task).

    A run with fidelity levels (a model of levels): a new problem instance has no run at any level, so the
    tuned tasks at the target are the ones held out, each with every level of its base task (the cheap
    levels of the same instance would otherwise give it away); needs 3 or more such tasks.
    """
    model, tr = result.model, result.transform
    if model is None or tr is None:
        raise ValueError("the result has no fitted model")
    trials = _trials_by_task(result)
    tuned = [i for i, mine in enumerate(trials) if any(t["status"] == Status.COMPLETE for t in mine)]
    levels = getattr(model, "levels", None)
    if levels is not None:  # hold out a tuned task at the target with its base task's every level
        tuned = [i for i in tuned if i in levels.targets and not result.is_low_fidelity(i)]
        if len(tuned) < 3:
            raise ValueError("leave-one-task-out of a run with fidelity holds out a tuned task at every level; it "
                             f"needs at least 3 tuned tasks with complete trials at the target, got {len(tuned)}")
    if len(tuned) < 3:
        raise ValueError(f"leave-one-task-out needs at least 3 tasks with complete trials, got {len(tuned)}")
    values = [t["value"] for mine in trials for t in mine if t["status"] != Status.FAILED]
    log_scale = tr.use_log or all(v > 0 for v in values)  # new-task predictions of positive values are log-normal
    if max_points is not None and (isinstance(max_points, bool) or not isinstance(max_points, int) or max_points < 2):
        raise ValueError(f"max_points must be an integer >= 2 or None, got {max_points!r}")
    if tasks is not None:
        unknown = sorted(set(tasks) - set(tuned))
        if unknown:
            raise ValueError(f"tasks {unknown} are not tasks of the result with complete trials ({tuned})")
    report = CVReport("leave-one-task-out", defaults=_defaults(result))
    for i in tuned if tasks is None else sorted(set(tasks)):
        left_out = {i} if levels is None else {j for j, g in enumerate(levels.group) if g == levels.group[i]}
        keep = [j for j in range(len(result.tasks)) if j not in left_out and trials[j]]
        index = {j: k for k, j in enumerate(keep)}
        history = [t.replace(task_index=index[t["task_index"]]) for j in keep for t in trials[j]]
        sub = TuningResult(result.problem, [result.tasks[j] for j in keep], history, model.subset(keep),
                           OutputTransform(tr.use_log, tr.mu[keep], tr.sigma[keep]))
        held = [t for t in trials[i] if t["status"] == Status.COMPLETE]
        if max_points is not None and len(held) > max_points:
            held = [held[k] for k in np.unique(np.linspace(0, len(held) - 1, max_points).round().astype(int))]
        pred, sd = predict(sub, result.tasks[i], [dict(t["params"]) for t in held])
        lo, hi = interval95(log_scale, pred, sd)
        for j, t in enumerate(held):
            report.points.append(HeldOut(i, dict(t["params"]), float(t["value"]), float(pred[j]), float(lo[j]),
                                         float(hi[j]), i))
    return report
