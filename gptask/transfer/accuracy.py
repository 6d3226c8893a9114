"""How far to trust run-free prediction for new tasks: a leave-one-task-out report."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..model.transforms import OutputTransform
from .model import OptimaModel, TransferModel, as_transfer_model
from .predict import predict_encoded
from .tla1 import predict_optimum

__all__ = ["AccuracyReport", "transfer_accuracy"]


@dataclass
class AccuracyReport:
    """Leave-one-task-out accuracy of run-free prediction (:func:`transfer_accuracy`).

    rows: one dict per held-out task: task_index, task, observed_best (best value observed),
    predicted_best (TLA1's predicted value for the held-out task, from the other tasks),
    best_ape (|predicted_best - observed_best| / |observed_best|), value_mape (mean absolute
    percentage error of :func:`gptask.predict` on the task's observations), value_range_error (mean
    |error| / range of the task's observed values), coverage_2std (fraction of observations within
    2 predicted std), param_distance (Euclidean distance in the encoded cube between TLA1's
    configuration and the observed best one).
    """

    rows: list[dict] = field(default_factory=list)

    def summary(self) -> dict[str, float | int]:
        def med(key: str) -> float | None:
            v = [r[key] for r in self.rows if r.get(key) is not None and np.isfinite(r[key])]
            return float(np.median(v)) if v else None

        return {"n_tasks": len(self.rows), "median_best_ape": med("best_ape"),
                "median_value_mape": med("value_mape"), "median_value_range_error": med("value_range_error"),
                "median_coverage_2std": med("coverage_2std"), "median_param_distance": med("param_distance")}


def _finite(v: float) -> float | None:
    return float(v) if v is not None and np.isfinite(v) else None


def transfer_accuracy(source: Any, max_points: int = 20) -> AccuracyReport:
    """Leave-one-task-out check of run-free prediction for new tasks.

    source: a :class:`gptask.TuningResult` or a model from :func:`gptask.load_model`.
    For each tuned task i: the LCM is re-conditioned on the other tasks only (same hyperparameters,
    task i's rows removed: one factorisation, no fit -- the hyperparameters did see task i, so this
    is slightly optimistic), TLA1 is refitted on the other tasks' optima, and both are scored
    against what was observed on task i (up to ``max_points`` of its observations, evenly spaced;
    observations are the model's data, failed runs imputed). Needs at least 3 tuned tasks.
    """
    tm = as_transfer_model(source)
    model, tr = tm.model, tm.transform
    tuned = [i for i in range(len(tm.tasks)) if model.n_points[i] > 0 and tm.best[i] is not None]
    if len(tuned) < 3:
        raise ValueError(f"a leave-one-task-out report needs at least 3 tuned tasks, got {len(tuned)}")
    Xs, ys = model.data()
    report = AccuracyReport()
    for i in tuned:
        keep = [j for j in range(len(tm.tasks)) if j != i and model.n_points[j] > 0]
        sub = model.subset(keep)  # the kept tasks' hyperparameters, conditioned on their data
        sub_tr = OutputTransform(tr.use_log, tr.mu[keep], tr.sigma[keep])
        idx = [j for j in keep if tm.best[j] is not None]
        optima = OptimaModel.fit(tm.task_space.encode([tm.tasks[j] for j in idx]),
                                 tm.param_space.encode([tm.best[j][0] for j in idx]), init=tm.optima)
        sub_tm = TransferModel(tm.task_space, tm.param_space, tm.signature, [tm.tasks[j] for j in keep],
                               [tm.best[j] for j in keep], sub, sub_tr, tm.problem, optima=optima)
        task = tm.tasks[i]
        pred = predict_optimum(sub_tm, task)
        obs_best_params, obs_best = tm.best[i]
        sel = np.unique(np.linspace(0, len(ys[i]) - 1, min(max_points, len(ys[i]))).round().astype(int))
        X_obs = Xs[i][sel]
        y_obs = tr.backward(i, ys[i][sel])
        mean, std = predict_encoded(sub_tm, task, X_obs)
        err = np.abs(mean - y_obs)
        rng_obs = float(np.ptp(tr.backward(i, ys[i])))
        with np.errstate(divide="ignore", invalid="ignore"):
            ape = err / np.abs(y_obs)
        enc_best = tm.param_space.encode([obs_best_params])[0]
        report.rows.append({
            "task_index": i, "task": task, "observed_best": obs_best, "predicted_best": pred.value,
            "best_ape": _finite(abs(pred.value - obs_best) / abs(obs_best)) if obs_best != 0 else None,
            "value_mape": _finite(float(np.mean(ape))),
            "value_range_error": _finite(float(np.mean(err)) / rng_obs) if rng_obs > 0 else None,
            "coverage_2std": float(np.mean(err <= 2.0 * std)),
            "param_distance": float(np.linalg.norm(pred.encoded - enc_best)),
        })
    return report
