"""Transfer to new problem instances: TLA1 (run-free prediction) and TLA2 (quick tuning).

GPTune paper (shared/seeds/004) sec. 5, in our words and with the choices below made explicit.

TLA1 -- :func:`predict_optimum`
    From the best configuration found for each tuned task, one single-output GP per *encoded column*
    of the parameter space maps the encoded task (``task_space.encode``) to that column of the
    encoded optimum (the paper's G_i). A single-output GP is the project's LCM with one task and one
    latent process (``LCM(n_latent=1).fit([X], [y])``), on the column standardised to mean 0 and
    std 1 (a column that is the same for every task is predicted as that constant, std 0).
    The raw prediction is clipped to the unit cube and snapped with ``Space.snap``: integers are
    rounded; a categorical has one GP per choice (each on its 0/1 indicator) and the choice with the
    largest predicted indicator wins. If the snapped point violates a constraint it is *projected*:
    the nearest feasible point in the encoded cube (Euclidean distance to the raw prediction) among
    candidates drawn around it (normal draws of spread 0.01 .. 1, uniform draws, the tuned tasks'
    best configurations), then refined by bisection on the segment from that point towards the raw
    prediction. ``Prediction.std`` is the GP predictive std of each parameter *in encoded units*
    (fractions of the unit interval the parameter is mapped to; log scale for log dimensions),
    including the GP's noise term, i.e. the scatter of the tuned tasks' best points around the
    smooth trend. For a categorical it is the std of the chosen choice's indicator.

Run-free performance -- :func:`predict`
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
    otherwise interpolates to negative or wildly wrong predictions. :func:`transfer_accuracy`
    measures how far to trust it by leaving each tuned task out in turn.

TLA2 -- :func:`tune_new_task`
    1. Centred sampling (paper sec. 5.2.1 with its per-dimension variant): the initial design is the
       TLA1 prediction itself plus ``n_initial - 1`` distinct feasible draws of
       ``N(centre, diag(sigma^2))`` in the encoded cube (out-of-cube or infeasible draws redrawn),
       with, per encoded column ``j``::

           ell_j   = (sum_q v_q / l_qj^2 / sum_q v_q) ** -1/2     (v_q = mean_i B_q[i, i])
           sigma_j = clip(max(ell_j / 2, s_j), 0.02, 1.0)

       ``l_qj`` are the LCM length scales, ``ell_j`` their variance-weighted effective value and
       ``s_j`` the TLA1 std of that column: within half a length scale the objective is strongly
       correlated (RBF correlation 0.88), so the design explores the basin the prediction points to,
       wider when TLA1 itself is unsure. A short length scale (a sensitive parameter) gives a narrow
       spread, as the paper proposes.
    2. ``LCM.extend`` adds the task: old hyperparameters and the old Cholesky factor are kept, only
       the new task's W rows, kappa and noise are learned.
    3. EI + PSO on the new task (``search.maximize`` with ``acquisition.log_ei``); each new point is
       added with ``LCM.append`` (block update, hyperparameters fixed), not a refit.

    The new task's output transform: log if the old tasks used log, then the per-task affine map
    *transferred* from the old tasks: its ``mu`` and ``log sigma`` are predicted at the new task by
    single-output GPs over the encoded tasks fitted to the old tasks' ``mu_i`` and ``log sigma_i``.
    It is not estimated from the new task's own data: the centred design samples near-optimal
    values, and standardising by them puts the GP's prior mean (0) at the near-optimal level, so EI
    would chase variance far from the prediction (observed on the sphere family before this choice).
    The transform is fixed for the whole TLA2 run, refits included.

    ``refit``: "never" (default: only block updates); an integer k (a full refit of every
    hyperparameter, warm-started, after every k-th new evaluation); "auto": a full refit when the
    model stops predicting the new task, judged by the one-step-ahead standardised error
    ``e = (z - mean) / std`` of each new observation *before* it is appended (a sequential
    leave-future-out check that costs nothing): when the mean of ``e^2`` over the last
    ``AUTO_WINDOW`` observations exceeds ``AUTO_E2`` (a calibrated model gives 1) and at least
    ``AUTO_WINDOW`` evaluations passed since the last refit. Also in "auto": when the model already
    holds ``AUTO_MAX_EXTENDED`` tasks added by extension since its last full fit (chained TLA2
    results), the new task's initial design triggers a full refit instead of an extension.
"""

from __future__ import annotations

import logging
import numbers
import os
import time
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .acquisition import log_ei
from .evaluate import Evaluator
from .models import LCM
from .problem import Problem
from .result import TuningResult
from .sampling import NoFeasiblePoint, centred_normal_points, point_key
from .search import maximize
from .space import Categorical, Space
from .storage import HistoryMismatch, Owner, open_storage
from .transforms import OutputTransform
from .trials import Proposal, Trial

__all__ = ["Prediction", "OptimaModel", "TransferModel", "TransferResult", "AccuracyReport",
           "predict_optimum", "predict", "transfer_accuracy", "tune_new_task", "sampling_spread"]

log = logging.getLogger(__name__)

#: restarts of the small single-output GP fits (TLA1 G_j and the over-tasks value GP)
GP_RESTARTS = 2
#: L-BFGS-B iteration cap of those fits
GP_MAXITER = 300
#: centred sampling: spread = clip(max(ell / 2, tla1 std), SPREAD_MIN, SPREAD_MAX) per column
SPREAD_MIN, SPREAD_MAX = 0.02, 1.0
#: "auto" refit rule (see module docstring)
AUTO_WINDOW = 3
AUTO_E2 = 4.0
AUTO_MAX_EXTENDED = 3

_STAGE_CENTRED, _STAGE_SEARCH, _STAGE_EXTEND, _STAGE_REFIT, _STAGE_PROJECT = 20, 21, 22, 23, 24


def _int_seed(seed: int, *keys: int) -> int:
    return int(np.random.SeedSequence([int(seed), *map(int, keys)]).generate_state(1)[0])


def _rng(seed: int, *keys: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence([int(seed), *map(int, keys)]))


# ------------------------------------------------------------------------------------------------
# single-output GP helpers (the LCM with one task)
# ------------------------------------------------------------------------------------------------


class _ScalarGP:
    """A standardised single-output GP ``task encoding (n, c) -> value (n,)`` on the LCM engine.

    A constant target (std ~ 0) is kept as that constant with zero std and no GP.
    """

    def __init__(self, mu: float, sd: float, gp: LCM | None) -> None:
        self.mu, self.sd, self.gp = float(mu), float(sd), gp

    @classmethod
    def fit(cls, X: np.ndarray, y: np.ndarray, seed: int = 0, restarts: int = GP_RESTARTS,
            init: "_ScalarGP | None" = None) -> "_ScalarGP":
        y = np.asarray(y, dtype=float)
        mu, sd = float(np.mean(y)), float(np.std(y))
        if len(y) < 2 or sd <= 1e-9 * max(1.0, abs(mu)):
            return cls(mu, 0.0, None)
        gp = LCM(n_latent=1, kernel="rbf")
        start = init.gp if init is not None and init.gp is not None else None
        gp.fit([X], [(y - mu) / sd], restarts=restarts, seed=seed, init=start, maxiter=GP_MAXITER)
        return cls(mu, sd, gp)

    def predict(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Mean and std (n,) at X (n, c), the std including the GP's noise term."""
        X = np.atleast_2d(X)
        if self.gp is None:
            return np.full(len(X), self.mu), np.zeros(len(X))
        m, v = self.gp.predict(0, X, include_noise=True)
        return self.mu + self.sd * m, self.sd * np.sqrt(np.maximum(v, 0.0))


class OptimaModel:
    """TLA1's G_j: one :class:`_ScalarGP` per encoded parameter column.

    task_X: (n, c) encoded tasks; optima: (n, D) encoded best configurations of those tasks.
    """

    def __init__(self, task_X: np.ndarray, optima: np.ndarray, gps: list[_ScalarGP]) -> None:
        self.task_X, self.optima, self.gps = task_X, optima, gps

    @classmethod
    def fit(cls, task_X: np.ndarray, optima: np.ndarray, seed: int = 0,
            init: "OptimaModel | None" = None) -> "OptimaModel":
        """init: a fitted OptimaModel of the same space whose GPs warm-start these (1 restart each)."""
        task_X = np.asarray(task_X, dtype=float)
        optima = np.asarray(optima, dtype=float)
        if len(task_X) < 2:
            raise ValueError(f"TLA1 needs the best configurations of at least 2 tuned tasks, got {len(task_X)}")
        gps = [_ScalarGP.fit(task_X, optima[:, j], seed=_int_seed(seed, j),
                             restarts=GP_RESTARTS if init is None else 1,
                             init=None if init is None else init.gps[j]) for j in range(optima.shape[1])]
        return cls(task_X, optima, gps)

    def predict(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Raw encoded optimum (D,) and its std (D,) at one encoded task x (c,)."""
        out = [g.predict(np.asarray(x, float).reshape(1, -1)) for g in self.gps]
        return np.array([m[0] for m, _ in out]), np.array([s[0] for _, s in out])


# ------------------------------------------------------------------------------------------------
# the transferable model: a tuning result or a saved model file
# ------------------------------------------------------------------------------------------------


class TransferModel:
    """Everything transfer needs, from a :class:`TuningResult` or a model file (``load_model``).

    task_space, param_space: the spaces; signature: the problem signature (dict); tasks: tuned task
    dicts; best: per task ``(params, value)`` or None; model: the LCM (task i = tasks[i]);
    transform: its output transform; problem: the :class:`Problem` when known (a loaded model
    without ``problem=`` has no constraints and no objective); accuracy: a stored held-out report
    summary (dict) or None; extended_since_fit: tasks added by ``LCM.extend`` since the model's
    last full fit.
    """

    def __init__(self, task_space: Space, param_space: Space, signature: dict, tasks: list[dict],
                 best: list[tuple[dict, float] | None], model: LCM, transform: OutputTransform,
                 problem: Problem | None = None, optima: OptimaModel | None = None,
                 accuracy: dict | None = None, extended_since_fit: int = 0) -> None:
        if not isinstance(model, LCM):
            raise ValueError("the result has no fitted model (no evaluation completed?)")
        if model.n_tasks != len(tasks):
            raise ValueError(f"the model has {model.n_tasks} tasks but {len(tasks)} tasks are listed")
        if transform is None or len(transform.mu) != len(tasks):
            raise ValueError("the result has no output transform matching its tasks")
        self.task_space, self.param_space = task_space, param_space
        self.signature, self.tasks, self.best = signature, tasks, best
        self.model, self.transform, self.problem = model, transform, problem
        self._optima = optima
        self.accuracy = accuracy
        self.extended_since_fit = int(extended_since_fit)
        self._keys = {point_key(t): i for i, t in enumerate(tasks)}

    @classmethod
    def from_result(cls, result: TuningResult) -> "TransferModel":
        best: list[tuple[dict, float] | None] = []
        known = getattr(result, "known_best", None) or []
        for i in range(len(result.tasks)):
            try:
                best.append(result.best(i))
            except ValueError:
                best.append(known[i] if i < len(known) else None)
        return cls(result.problem.task_space, result.problem.param_space, result.problem.signature(),
                   [dict(t) for t in result.tasks], best, result.model, result.transform, result.problem,
                   extended_since_fit=getattr(result, "extended_since_fit", 0))

    @property
    def optima(self) -> OptimaModel:
        """The TLA1 GPs (fitted on first use)."""
        if self._optima is None:
            idx = [i for i, b in enumerate(self.best) if b is not None]
            tx = self.task_space.encode([self.tasks[i] for i in idx]) if idx else np.empty((0, 1))
            opt = self.param_space.encode([self.best[i][0] for i in idx]) if idx else np.empty((0, 1))
            self._optima = OptimaModel.fit(tx, opt)
        return self._optima

    def task_index(self, task: Mapping[str, Any]) -> int | None:
        """Index of ``task`` among the tuned tasks, or None for a new task."""
        return self._keys.get(point_key(task))

    def validate_task(self, task: Any) -> dict:
        return self.task_space.validate(task, what="task")

    def is_feasible(self, task: Mapping[str, Any]):
        """A feasibility judge for configurations of ``task``, or None when constraints are unknown."""
        if self.problem is None:
            return None
        return lambda p: self.problem.is_feasible(task, p)

    def save(self, path: str | os.PathLike, accuracy: bool = True) -> None:
        from .model_io import save_model

        save_model(self, path, accuracy=accuracy)

    def __repr__(self) -> str:
        return (f"TransferModel(problem={self.signature.get('name')!r}, tasks={len(self.tasks)}, "
                f"params={self.param_space.names})")


_CACHE: dict[int, tuple[Any, tuple, TransferModel]] = {}


def as_transfer_model(source: Any) -> TransferModel:
    """A :class:`TransferModel` from a TuningResult (cached per result), a TransferModel, or a path."""
    if isinstance(source, TransferModel):
        return source
    if isinstance(source, (str, os.PathLike)):
        from .model_io import load_model

        return load_model(source)
    if not isinstance(source, TuningResult):
        raise TypeError(f"expected a TuningResult, a model loaded with load_model, or a model file path, "
                        f"got {type(source).__name__}")
    key = (id(source.model), id(source.transform), len(source.history), len(source.tasks))
    hit = _CACHE.get(id(source))
    if hit is not None and hit[0]() is source and hit[1] == key:
        return hit[2]
    tm = TransferModel.from_result(source)
    if len(_CACHE) > 16:
        _CACHE.clear()
    _CACHE[id(source)] = (weakref.ref(source), key, tm)
    return tm


# ------------------------------------------------------------------------------------------------
# TLA1
# ------------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class Prediction:
    """A run-free prediction of a task's optimum (TLA1).

    params: a valid configuration in user units (feasible when the constraints are known);
    std: per parameter name, the predictive std in *encoded* units (see the module docstring);
    value, value_std: the predicted objective at ``params`` and its std, in user units (see
    :func:`predict`); encoded: (D,) encoding of ``params``; raw: (D,) the GPs' raw mean before
    snapping and projection; projected: True when a constraint forced a move away from the snapped
    prediction; feasible: True/False, or None when the constraints are unknown (loaded model
    without ``problem=``); task: the task.
    """

    task: dict
    params: dict
    std: dict
    value: float
    value_std: float
    encoded: np.ndarray
    raw: np.ndarray
    projected: bool
    feasible: bool | None

    def __repr__(self) -> str:
        return (f"Prediction(params={self.params}, std={ {k: round(v, 4) for k, v in self.std.items()} }, "
                f"value={self.value:.6g} +- {self.value_std:.3g})")


def _project(space: Space, raw: np.ndarray, is_feasible, rng: np.random.Generator,
             anchors: np.ndarray | None = None, describe: str = "the constraints") -> tuple[np.ndarray, bool]:
    """The snapped raw point if feasible, else the nearest feasible candidate (see module docstring).

    Returns (encoded (D,), projected)."""
    raw = np.clip(raw, 0.0, 1.0)
    snapped = space.snap(raw[None, :])[0]
    if is_feasible is None or is_feasible(space.decode(snapped[None, :])[0]):
        return snapped, False
    D = raw.size
    cands = [raw + s * rng.standard_normal((200, D)) for s in (0.01, 0.03, 0.1, 0.3, 1.0)]
    cands.append(rng.random((1000, D)))
    if anchors is not None and len(anchors):
        cands.append(np.asarray(anchors, float))
    C = space.snap(np.clip(np.vstack(cands), 0.0, 1.0))
    order = np.argsort(np.linalg.norm(C - raw, axis=1))
    best = None
    for k in order:  # nearest first: stop at the first feasible one
        if is_feasible(space.decode(C[k][None, :])[0]):
            best = C[k]
            break
    if best is None:
        raise NoFeasiblePoint(f"no configuration satisfying {describe} was found near the TLA1 prediction "
                              f"or among {len(C)} random candidates")
    lo, hi, base = 0.0, 1.0, best.copy()
    for _ in range(25):  # bisection from the feasible point towards the raw prediction
        mid = 0.5 * (lo + hi)
        p = space.snap((base + mid * (raw - base))[None, :])[0]
        if is_feasible(space.decode(p[None, :])[0]):
            lo = mid
            if np.linalg.norm(p - raw) < np.linalg.norm(best - raw):
                best = p
        else:
            hi = mid
    return best, True


def _param_std(space: Space, std_cols: np.ndarray, encoded: np.ndarray) -> dict[str, float]:
    out = {}
    for d, sl in zip(space.dimensions, space.column_slices()):
        if isinstance(d, Categorical):
            out[d.name] = float(std_cols[sl][int(np.argmax(encoded[sl]))])
        else:
            out[d.name] = float(std_cols[sl][0])
    return out


def _constraint_text(tm: TransferModel, task: dict) -> str:
    if tm.problem is None:
        return "the constraints"
    names = ", ".join(tm.problem.constraint_names()) or "no constraints"
    return f"{names} for task {task}"


def predict_optimum(source: Any, task: Mapping[str, Any]) -> Prediction:
    """TLA1: predict a good configuration for ``task`` without running anything.

    source: a :class:`TuningResult`, a model from :func:`gptask.load_model`, or a model file path.
    task: a dict of the task space (a new or a tuned task). Returns a :class:`Prediction`.
    """
    tm = as_transfer_model(source)
    task = tm.validate_task(task)
    space = tm.param_space
    raw, std_cols = tm.optima.predict(tm.task_space.encode([task])[0])
    feas = tm.is_feasible(task)
    if feas is None and tm.signature.get("n_constraints", 0):
        log.warning("the model's problem has %d constraints but they are unknown here (load the model "
                    "with problem=...); the prediction is not checked against them",
                    tm.signature["n_constraints"])
    anchors = space.encode([b[0] for b in tm.best if b is not None])
    enc, projected = _project(space, raw, feas, _rng(0, _STAGE_PROJECT), anchors, _constraint_text(tm, task))
    params = space.decode(enc[None, :])[0]
    mean, sd = predict(tm, task, params)
    return Prediction(task=task, params=params, std=_param_std(space, std_cols, enc), value=float(mean),
                      value_std=float(sd), encoded=enc, raw=raw, projected=projected,
                      feasible=None if feas is None else bool(feas(params)))


# ------------------------------------------------------------------------------------------------
# run-free performance prediction
# ------------------------------------------------------------------------------------------------


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
        gp = _ScalarGP.fit(task_X, W[:, k], seed=seed, restarts=GP_RESTARTS if prev is None else 1, init=prev)
        m, s = gp.predict(x_new[None, :])
        means[k], stds[k] = m[0], s[0]
        prev = gp if gp.gp is not None else prev
    return means, stds


def _predict_encoded(tm: TransferModel, task: dict, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
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


def _positive_objective(tm: TransferModel, tuned: Sequence[int]) -> bool:
    """True when every tuned task's best (smallest) observed value is positive."""
    bests = [tm.best[j] for j in tuned]
    return all(b is not None and b[1] > 0.0 for b in bests)


def predict(source: Any, task: Mapping[str, Any], params: Mapping[str, Any] | Sequence[Mapping[str, Any]]):
    """Run-free predicted objective of ``params`` on ``task``: ``(mean, std)`` in user units.

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
    mean, std = _predict_encoded(tm, task, X)
    if single:
        return float(mean[0]), float(std[0])
    return np.asarray(mean, float), np.asarray(std, float)


@dataclass
class AccuracyReport:
    """Leave-one-task-out accuracy of run-free prediction (:func:`transfer_accuracy`).

    rows: one dict per held-out task: task_index, task, observed_best (best value observed),
    predicted_best (TLA1's predicted value for the held-out task, from the other tasks),
    best_ape (|predicted_best - observed_best| / |observed_best|), value_mape (mean absolute
    percentage error of :func:`predict` on the task's observations), value_range_error (mean
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
    p = model.get_params()
    report = AccuracyReport()
    for i in tuned:
        keep = [j for j in range(len(tm.tasks)) if j != i and model.n_points[j] > 0]
        sub_p = {"lengthscale": p["lengthscale"], "W": p["W"][:, keep], "kappa": p["kappa"][:, keep],
                 "noise": p["noise"][keep]}
        sub = LCM(model.n_latent, model.kernel, model.rank).condition([Xs[j] for j in keep],
                                                                      [ys[j] for j in keep], sub_p)
        sub_tr = OutputTransform(tr.use_log, tr.mu[keep], tr.sigma[keep])
        sub_best = [tm.best[j] for j in keep]
        sub_tm = TransferModel(tm.task_space, tm.param_space, tm.signature, [tm.tasks[j] for j in keep],
                               sub_best, sub, sub_tr, tm.problem)
        idx = [j for j in keep if tm.best[j] is not None]
        sub_tm._optima = OptimaModel.fit(tm.task_space.encode([tm.tasks[j] for j in idx]),
                                         tm.param_space.encode([tm.best[j][0] for j in idx]), init=tm.optima)
        task = tm.tasks[i]
        pred = predict_optimum(sub_tm, task)
        obs_best_params, obs_best = tm.best[i]
        sel = np.unique(np.linspace(0, len(ys[i]) - 1, min(max_points, len(ys[i]))).round().astype(int))
        X_obs = Xs[i][sel]
        y_obs = tr.backward(i, ys[i][sel])
        mean, std = _predict_encoded(sub_tm, task, X_obs)
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


# ------------------------------------------------------------------------------------------------
# TLA2
# ------------------------------------------------------------------------------------------------


def sampling_spread(model: LCM, tla1_std: np.ndarray) -> np.ndarray:
    """Per encoded column spread of TLA2's centred sampling (module docstring formula): (D,)."""
    ls = model.lengthscales  # (Q, D)
    B = model.coregionalization()
    v = np.array([float(np.mean(np.diagonal(B[q]))) for q in range(B.shape[0])])
    v = np.maximum(v, 1e-300)
    ell = (np.sum(v[:, None] / ls**2, axis=0) / np.sum(v)) ** -0.5
    return np.clip(np.maximum(ell / 2.0, np.asarray(tla1_std, float)), SPREAD_MIN, SPREAD_MAX)


@dataclass
class TransferResult(TuningResult):
    """A :class:`TuningResult` after TLA2: ``tasks`` are the tuned tasks plus the new one (last,
    index ``task_index``); ``model``/``transform`` cover all of them (the new task extended in).

    prediction: the TLA1 prediction the search started from; updates: one dict per model update
    ({"kind": "extend"|"append"|"refit", "seconds", "n_points"}); refits: how many full refits
    happened; known_best: best (params, value) per task, kept for tasks whose records are not in
    ``history`` (a model loaded from a file); extended_since_fit: tasks added by extension since
    the model's last full fit.
    """

    task_index: int = -1
    prediction: Prediction | None = None
    updates: list = field(default_factory=list)
    refits: int = 0
    known_best: list = field(default_factory=list)
    extended_since_fit: int = 0

    @property
    def task(self) -> dict:
        return self.tasks[self.task_index]

    def best_new(self) -> tuple[dict, float]:
        """(params, value) of the best complete evaluation of the new task."""
        return self.best(self.task_index)


def _check_refit(refit: Any) -> str | int:
    if refit in ("never", "auto"):
        return refit
    if isinstance(refit, numbers.Integral) and not isinstance(refit, bool) and refit >= 1:
        return int(refit)
    raise ValueError(f"refit must be 'never', 'auto' or an integer >= 1, got {refit!r}")


def _check_count(name: str, value: Any, lo: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, got {value!r}")
    if value < lo:
        raise ValueError(f"{name} must be >= {lo}, got {value}")
    return int(value)


class _NewTaskData:
    """The new task's observations and its output transform (see module docstring).

    The transform is transferred, not estimated: ``mu`` and ``log sigma`` of the new task are
    predicted by GPs over the encoded tasks from the old tasks' transforms. (Standardising by the
    new task's own centred design would put the model's prior mean at the level of near-optimal
    values, and EI would then chase variance far from the prediction.)
    """

    def __init__(self, old: OutputTransform, task_X: np.ndarray, x_new: np.ndarray) -> None:
        self.old = old
        self.X: list[np.ndarray] = []
        self.values: list[float | None] = []
        mu, _ = _ScalarGP.fit(task_X, old.mu, seed=1).predict(x_new[None, :])
        ls, _ = _ScalarGP.fit(task_X, np.log(old.sigma), seed=2).predict(x_new[None, :])
        self.mu, self.sigma = float(mu[0]), float(max(np.exp(ls[0]), 1e-12))

    def _w(self, v: np.ndarray) -> np.ndarray:
        if self.old.use_log:
            pos = v[v > 0]
            floor = 0.5 * float(pos.min()) if pos.size else 1e-300
            if np.any(v <= 0):
                log.warning("a non-positive objective value under the log transform was clamped to %g", floor)
            return np.log(np.maximum(v, floor))
        return v

    def z(self, values: Sequence[float | None]) -> np.ndarray:
        """Model units for ``values`` (None = failed: the worst observed z, else +2)."""
        ok = np.array([v for v in self.values if v is not None], dtype=float)
        worst = float(np.max((self._w(ok) - self.mu) / self.sigma)) if ok.size else 2.0
        out = []
        for v in values:
            out.append(worst if v is None else float((self._w(np.array([v]))[0] - self.mu) / self.sigma))
        return np.array(out)

    def transform(self) -> OutputTransform:
        return OutputTransform(self.old.use_log, np.append(self.old.mu, self.mu), np.append(self.old.sigma, self.sigma))


class _NewTaskHistory:
    """TLA2's trials of the new task (index ``index``) in the history: each written as PENDING before
    its evaluation and finished after it, by rank 0 (``root``); every rank reads the finished ones
    (``stored``, in order) to resume a killed run."""

    def __init__(self, path: Any, problem: Problem, tasks: list[dict], index: int, root: bool) -> None:
        self.store = open_storage(path, problem.signature())
        self.store.set_tasks(tasks)
        self.index, self.root = index, root
        self.owner = Owner.this_process("tla2")
        self.stored = [t for t in self.store.trials(task_index=index) if t.status.finished]

    def run(self, task: dict, params: dict, source: str, evaluate: Any) -> Trial:
        """Claim, evaluate (``evaluate()`` -> Outcome) and record one configuration of the new task."""
        if not self.root:
            out = evaluate()
            return Trial(0, self.index, task, params, out.status, out.value, out.samples, out.reason, out.extra,
                         source, duration=out.duration)
        trial = self.store.add_trials([Proposal(self.index, task, params, source)], self.owner)[0]
        if trial is None:
            raise HistoryMismatch(f"history {self.store.path} already holds {params} for the new task {task} as a "
                                  "pending trial of a live process: is another TLA2 run using this history?")
        try:
            out = evaluate()
        except BaseException:
            self.store.release(self.owner)  # stays pending for the next run
            raise
        return self.store.finish(trial.id, out.status, out.value, out.samples, out.reason, out.extra, out.duration)

    def close(self) -> None:
        self.store.close()


def _full_fit(model: LCM, X_old: list, y_old: list, data: _NewTaskData, init_params: dict, restarts: int,
              seed: int, comm: Any) -> LCM:
    Xs = X_old + [np.vstack(data.X)]
    ys = y_old + [data.z(data.values)]
    new = LCM(model.n_latent, model.kernel, model.rank)
    try:
        return new.fit(Xs, ys, restarts=restarts, seed=seed, init=init_params, comm=comm)
    except Exception as exc:  # noqa: BLE001 - a failed warm start: retry cold with more restarts
        log.warning("warm-started refit failed (%s); refitting from scratch", exc)
        return LCM(model.n_latent, model.kernel, model.rank).fit(Xs, ys, restarts=max(restarts, 3), seed=seed,
                                                                  comm=comm)


def tune_new_task(
    result: Any,
    task: Mapping[str, Any],
    budget: int = 20,
    n_initial: int | None = None,
    history: str | os.PathLike | None = None,
    refit: str | int = "never",
    seed: int = 0,
    comm: Any = None,
    *,
    repeats: int = 1,
    aggregate: str = "min",
    timeout: float | None = None,
    extend_restarts: int = 4,
    refit_restarts: int = 1,
    pso_particles: int = 40,
    pso_iters: int = 40,
) -> TransferResult:
    """TLA2: tune one new task starting from a tuned model; returns a :class:`TransferResult`.

    result: a TuningResult (or TransferResult, to chain new tasks), or a model loaded with
    ``load_model(path, problem=...)`` (the objective is needed). task: the new task (dict).
    budget: evaluations of the new task, initial design included; n_initial: centred initial
    design size (default ``max(1, round(0.3 * budget))``; the first point is the TLA1 prediction).
    history: SQLite file receiving the evaluations (its task list is the tuned tasks followed by
    the new one: pass the MLA history to keep everything in one file; the same call resumes a
    killed run). refit: "never" | "auto" | k (module docstring). repeats, aggregate, timeout: as in
    :func:`gptask.tune`. extend_restarts: restarts of ``LCM.extend``; refit_restarts: of a full
    refit; pso_particles, pso_iters: the acquisition search. comm: an mpi4py communicator: every
    rank runs the same loop (same seeds, same proposals, each rank evaluates), full refits spread
    their restarts over the ranks, and only rank 0 writes the history.
    """
    tm = as_transfer_model(result)
    problem = tm.problem
    if problem is None:
        raise TypeError("tune_new_task needs the objective: load the model with load_model(path, problem=...)")
    task = tm.validate_task(task)
    if tm.task_index(task) is not None:
        raise ValueError(f"task {task} is already tuned in this model; resume its tuning with gt.tune and its history")
    budget = _check_count("budget", budget, 1)
    n_initial = max(1, min(budget, int(round(0.3 * budget)))) if n_initial is None else _check_count(
        "n_initial", n_initial, 1)
    if n_initial > budget:
        raise ValueError(f"`n_initial <= budget` must hold, got n_initial={n_initial}, budget={budget}")
    refit = _check_refit(refit)
    seed = _check_count("seed", seed, 0)
    evaluator = Evaluator(problem.objective, repeats=repeats, aggregate=aggregate, timeout=timeout)
    space = problem.param_space
    feasible = tm.is_feasible(task)
    describe = _constraint_text(tm, task)
    T = len(tm.tasks)
    root = comm is None or comm.Get_rank() == 0

    hist = _NewTaskHistory(history, problem, tm.tasks + [task], T, root)
    stored = list(hist.stored)
    old_records = list(result.history) if isinstance(result, TuningResult) else []
    new_records: list[Trial] = []

    def run(params: dict, source: str) -> dict:
        if stored:
            rec = stored.pop(0)
            if point_key(rec["params"]) != point_key(params) and source == "initial":
                log.info("resumed history differs from the design at %s; using the stored run", rec["params"])
            new_records.append(rec)
            return rec
        rec = hist.run(task, params, source, lambda: evaluator(task, params))
        new_records.append(rec)
        return rec

    # 1. TLA1 prediction and centred initial design
    pred = predict_optimum(tm, task)
    spread = sampling_spread(tm.model, np.array([pred.std[d.name] for d in space.dimensions
                                                 for _ in range(d.n_columns)]))
    design = [pred.params]
    if n_initial > 1:
        design += centred_normal_points(space, pred.encoded, spread, n_initial - 1, _rng(seed, _STAGE_CENTRED, T),
                                        feasible, exclude={point_key(pred.params)}, describe=describe)
    data = _NewTaskData(tm.transform, tm.task_space.encode(tm.tasks), tm.task_space.encode([task])[0])
    for p in design:
        rec = run(p, "initial")
        data.X.append(space.encode([rec["params"]]))
        data.values.append(rec["value"] if rec["status"] == "complete" else None)

    # 2. extend the model by the new task (or refit everything, see "auto")
    X_old, y_old = tm.model.data()
    updates: list[dict] = []
    refits = 0
    extended = tm.extended_since_fit
    t0 = time.perf_counter()
    if refit == "auto" and extended >= AUTO_MAX_EXTENDED:
        tmp = tm.model.extend(np.vstack(data.X), data.z(data.values), restarts=1, seed=_int_seed(seed, _STAGE_EXTEND))
        model = _full_fit(tm.model, X_old, y_old, data, tmp.get_params(), refit_restarts,
                          _int_seed(seed, _STAGE_REFIT, 0), comm)
        refits, extended, kind = 1, 0, "refit"
    else:
        model = tm.model.extend(np.vstack(data.X), data.z(data.values), restarts=extend_restarts,
                                seed=_int_seed(seed, _STAGE_EXTEND))
        extended, kind = extended + 1, "extend"
    updates.append({"kind": kind, "seconds": time.perf_counter() - t0, "n_points": int(model.n_points.sum())})

    # 3. EI + PSO on the new task, block updates between refits
    errors: list[float] = []
    since_refit = 0
    old_best = [b for b in tm.best if b is not None]
    anchors = space.encode([b[0] for b in sorted(old_best, key=lambda b: b[1])][: max(1, pso_particles // 4)]) \
        if old_best else None
    while len(data.values) < budget:
        X_seen = np.vstack(data.X)
        z_seen = data.z(data.values)
        ok = [k for k, v in enumerate(data.values) if v is not None]
        best_z = float(np.min(z_seen[ok])) if ok else float(np.min(model.predict(T, X_seen)[0]))
        if stored:
            params = stored[0]["params"]
        else:
            m_ = model

            def acquisition(x: np.ndarray, m_=m_, best_z=best_z) -> np.ndarray:
                mean, var = m_.predict(T, x)
                return log_ei(mean, np.sqrt(np.maximum(var, 0.0)), best_z)

            inc = [X_seen[ok[int(np.argmin(z_seen[ok]))]]] if ok else []
            init = np.vstack([*inc, pred.encoded[None, :]] + ([anchors] if anchors is not None else []))
            res = maximize(acquisition, space, seed=_int_seed(seed, _STAGE_SEARCH, T, len(data.values)),
                           is_feasible=feasible, exclude=X_seen, init=init, n_particles=pso_particles,
                           iters=pso_iters)
            params = res.params
        x = space.encode([params])
        mean, var = model.predict(T, x, include_noise=True)
        rec = run(params, "search")
        x = space.encode([rec["params"]])
        data.X.append(x)
        data.values.append(rec["value"] if rec["status"] == "complete" else None)
        z_new = float(data.z([data.values[-1]])[0])
        errors.append((z_new - float(mean[0])) ** 2 / float(var[0]))
        since_refit += 1
        due = (isinstance(refit, int) and since_refit >= refit) or (
            refit == "auto" and since_refit >= AUTO_WINDOW and float(np.mean(errors[-AUTO_WINDOW:])) > AUTO_E2)
        t0 = time.perf_counter()
        if due:
            model = _full_fit(model, X_old, y_old, data, model.get_params(), refit_restarts,
                              _int_seed(seed, _STAGE_REFIT, len(data.values)), comm)
            refits += 1
            since_refit = 0
            extended = 0
            kind = "refit"
            log.info("TLA2: full refit after %d new-task evaluations", len(data.values))
        else:
            model = model.append(T, x, np.array([z_new]))
            kind = "append"
        updates.append({"kind": kind, "seconds": time.perf_counter() - t0, "n_points": int(model.n_points.sum())})

    hist.close()
    new_tr = data.transform()
    known = list(tm.best)
    ok_new = [r for r in new_records if r["status"] == "complete"]
    known.append((dict(min(ok_new, key=lambda r: r["value"])["params"]),
                  float(min(r["value"] for r in ok_new))) if ok_new else None)
    return TransferResult(problem, tm.tasks + [task], old_records + new_records, model, new_tr, task_index=T,
                          prediction=pred, updates=updates, refits=refits, known_best=known,
                          extended_since_fit=extended)
