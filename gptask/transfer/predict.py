"""Run-free performance prediction: the objective of a configuration on a tuned or a new task.

For a tuned task: the LCM posterior at the configuration, mapped back to user units with the
output transform (under the log transform the mean is the predictive median, the std the
log-normal std). For a new task of a problem that declares ``features`` or a ``cost_model``: the
joint GP over (task, configuration, features) of :mod:`gptask.transfer.joint`. Otherwise, for a
new task no LCM route exists (the LCM correlates tasks by identity, not
by their features), so we use a TLA1-style GP *over tasks*: at each configuration, every tuned
task's LCM posterior mean is taken in log units (``mu_i + sigma_i * m_i(x)``, comparable across
tasks), and a single-output GP over the encoded tasks is fitted to those values and evaluated at
the new task. All configurations share that GP's hyperparameters (length scales over the task
coordinates and a nugget, fitted once per model by restricted maximum likelihood on the tuned
tasks' values at their observed configurations, all columns together, each column keeping its own
variance): one fit instead of one per configuration, hundreds of columns of data per
hyperparameter instead of T points, and a configuration's prediction independent of the others
predicted with it. Its mean is a linear
trend in the encoded task coordinates (universal kriging: generalised least squares per
configuration, the GP on the residuals, the trend's uncertainty in the variance) when there are
enough tasks (:data:`OVER_TASKS_TREND`), else a constant. The std is that of a new measurement:
the over-tasks variance (nugget included) plus the tuned tasks' mean LCM noise variance. When the
model was fitted without the log transform
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

from scipy.optimize import minimize
from scipy.stats import norm

from ..model.numerics import LCM, CholeskyError, LCMPrior, robust_cholesky
from ..model.numerics.defaults import (CALIBRATION_LEVEL, CALIBRATION_MAX, CALIBRATION_MIN_POINTS, FAIL_VALUE,
                                      LENGTHSCALE_BOUNDS, NOISE_BOUNDS_REL, VAR_FLOOR_REL)
from ..model.numerics.kernels import kernel
from ..model.numerics.linalg import solve_lower
from ..model.transforms import OutputTransform
from .joint import JointModel
from .model import (GP_MAXITER, OVER_TASKS_CALIBRATE, OVER_TASKS_FIT_POINTS, OVER_TASKS_KERNEL, OVER_TASKS_STARTS,
                    OVER_TASKS_TREND, TransferModel, as_transfer_model, joint_inputs)

__all__ = ["predict", "predict_encoded", "over_tasks_factor", "over_tasks_zscores"]

#: the two-sided normal quantile of CALIBRATION_LEVEL (1.96 for 95 %)
_Z_LEVEL = float(norm.ppf(0.5 + CALIBRATION_LEVEL / 2))


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


def _trend_design(task_X: np.ndarray, trend: bool) -> np.ndarray:
    """Mean-function design matrix (T, p) of the encoded tasks task_X (T, c): intercept, then (with
    ``trend``, when T >= p + 2 and the encodings span it) the c coordinates."""
    ones = np.ones((len(task_X), 1))
    if not trend or task_X.shape[1] == 0:
        return ones
    F = np.hstack([ones, task_X])
    if len(task_X) < F.shape[1] + 2 or np.linalg.matrix_rank(F) < F.shape[1]:
        return ones
    return F


class _Kriging:
    """The state of a fitted GP over tasks for fixed hyperparameters (see :func:`_over_tasks`).

    L (T, T): factor of the correlation matrix R = k(task_X) + g I; Ft (T, p), Wt (T, n): L^-1 F and
    L^-1 W; A (p, p) = F' R^-1 F; beta (p, n): the GLS trend coefficients; r (T, n): L^-1 (W - F beta);
    s2 (n,): each column's REML variance.
    """

    def __init__(self, task_X: np.ndarray, F: np.ndarray, W: np.ndarray, log_ls: np.ndarray, log_g: float) -> None:
        T = len(task_X)
        self.ls, self.g = np.exp(log_ls), float(np.exp(log_g))
        R = kernel(OVER_TASKS_KERNEL, task_X, task_X, self.ls)
        R[np.diag_indices(T)] += self.g
        self.L, _ = robust_cholesky(R, "over-tasks correlation matrix")
        self.Ft, self.Wt = solve_lower(self.L, F), solve_lower(self.L, W)
        self.A = self.Ft.T @ self.Ft
        self.beta = np.linalg.solve(self.A, self.Ft.T @ self.Wt)
        self.r = self.Wt - self.Ft @ self.beta
        self.dof = T - F.shape[1]
        self.q = np.einsum("tn,tn->n", self.r, self.r)

    def neg_reml(self) -> float:
        """Negative restricted log likelihood summed over columns, each variance profiled out."""
        n = self.q.shape[0]
        tiny = 1e-12 * max(float(np.mean(self.q)), 1e-300)
        logdet = 2.0 * np.sum(np.log(np.diag(self.L))) + np.linalg.slogdet(self.A)[1]
        return float(0.5 * self.dof * np.sum(np.log((self.q + tiny) / self.dof)) + 0.5 * n * logdet)

    def predict(self, task_X: np.ndarray, F: np.ndarray, x_new: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Mean (n,) and variance (n,) of every column at the encoded task x_new (c,), nugget included."""
        k = kernel(OVER_TASKS_KERNEL, x_new[None, :], task_X, self.ls)[0]
        kt = solve_lower(self.L, k)
        f = np.concatenate([[1.0], x_new]) if F.shape[1] > 1 else np.ones(1)
        mean = f @ self.beta + kt @ self.r
        u = f - self.Ft.T @ kt
        unit = 1.0 + self.g - kt @ kt + u @ np.linalg.solve(self.A, u)
        s2 = self.q / self.dof
        return mean, s2 * max(unit, VAR_FLOOR_REL)


_PRIOR = LCMPrior()  # the LCM's default priors


def _neg_log_prior(theta: np.ndarray) -> float:
    """The LCM's default priors (up to a constant) on the log length scales and the log nugget."""
    c = len(theta) - 1
    ls = (theta[:c] - _PRIOR.lengthscale_centre(c)) / _PRIOR.lengthscale_scale
    g = (theta[c] - _PRIOR.noise_loc) / _PRIOR.noise_scale
    return float(0.5 * np.sum(ls * ls) + 0.5 * g * g)


def _fit_over_tasks(task_X: np.ndarray, W: np.ndarray, trend: bool = OVER_TASKS_TREND) -> np.ndarray:
    """Hyperparameters ``(log length scales (c,), log nugget)`` of the GP over tasks, fitted on the
    columns of W (T, n) together; task_X (T, c) the encoded tuned tasks.

    Model of column k: ``W[:, k] = F beta_k + e_k``, ``e_k ~ N(0, s2_k (k(task_X) + g I))`` with F
    the design of :func:`_trend_design`; the length scales and the nugget g are fitted by maximum a
    posteriori restricted likelihood (every column's s2_k profiled out; the default LCM priors on the
    log length scales and the log nugget), from the fixed starts OVER_TASKS_STARTS. Shifting or
    scaling W changes neither the fit nor the predictions.
    """
    task_X, W = np.asarray(task_X, float), np.asarray(W, float)
    c = task_X.shape[1]
    Ws = (W - np.mean(W)) / max(float(np.std(W)), 1e-300)
    F = _trend_design(task_X, trend)
    bounds = [tuple(np.log(LENGTHSCALE_BOUNDS))] * c + [tuple(np.log(NOISE_BOUNDS_REL))]

    def objective(theta: np.ndarray) -> float:
        try:
            return _Kriging(task_X, F, Ws, theta[:c], theta[c]).neg_reml() + _neg_log_prior(theta)
        except (CholeskyError, np.linalg.LinAlgError):
            return FAIL_VALUE

    best = None
    for ls0, g0 in OVER_TASKS_STARTS:
        res = minimize(objective, np.array([ls0] * c + [g0]), method="L-BFGS-B", bounds=bounds,
                       options={"maxiter": GP_MAXITER})
        if best is None or res.fun < best.fun:
            best = res
    return np.asarray(best.x, float)


def _over_tasks(task_X: np.ndarray, W: np.ndarray, x_new: np.ndarray, trend: bool = OVER_TASKS_TREND,
                theta: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """GP over tasks, one column of W (T, n) per configuration, with shared hyperparameters.

    task_X: (T, c) encoded tuned tasks; x_new: (c,) the encoded new task; theta: the hyperparameters
    from :func:`_fit_over_tasks` (None: fitted on W itself). Returns the universal-kriging mean and
    std (n,) each at x_new, the std including the nugget and the trend's uncertainty; each column's
    trend and variance are its own, so a column's prediction does not depend on the other columns
    once theta is given.
    """
    task_X, W, x_new = np.asarray(task_X, float), np.asarray(W, float), np.asarray(x_new, float)
    c = task_X.shape[1]
    mu, sd = float(np.mean(W)), float(np.std(W))
    if sd <= 1e-12 * max(1.0, abs(mu)) and np.all(np.ptp(W, axis=0) == 0.0):
        return W[0].copy(), np.zeros(W.shape[1])
    if theta is None:
        theta = _fit_over_tasks(task_X, W, trend)
    F = _trend_design(task_X, trend)
    fit = _Kriging(task_X, F, (W - mu) / sd, theta[:c], theta[c])
    m, v = fit.predict(task_X, F, x_new)
    return mu + sd * m, sd * np.sqrt(v)


def _reference_values(tm: TransferModel, tuned: Sequence[int], use_log: bool) -> np.ndarray | None:
    """(len(tuned), n_ref): the tuned tasks' values at (at most OVER_TASKS_FIT_POINTS, evenly spaced) of
    their own observed configurations, in the units of the prediction; None when they cannot be put in
    those units (non-positive values on the log route)."""
    Xs, _ = tm.model.data()
    X_ref = np.vstack([Xs[j] for j in tuned])
    if len(X_ref) > OVER_TASKS_FIT_POINTS:
        X_ref = X_ref[np.unique(np.linspace(0, len(X_ref) - 1, OVER_TASKS_FIT_POINTS).round().astype(int))]
    W_ref = _log_units(tm.model, tm.transform, tuned, X_ref)
    if use_log and not tm.transform.use_log:
        W_ref = np.log(W_ref) if np.all(W_ref > 0.0) else None
    return W_ref


def _shared_theta(tm: TransferModel, tuned: Sequence[int], use_log: bool, tx: np.ndarray) -> np.ndarray | None:
    """The over-tasks hyperparameters of ``tm``'s tuned tasks, fitted once per model (cached on it)
    on the tuned tasks' values at their own observed configurations (:func:`_reference_values`), so
    that a configuration's prediction does not depend on what it is predicted with. None when those
    values cannot be put in the units of the prediction (non-positive values on the log route): the
    caller then fits on its own columns."""
    cache = tm.__dict__.setdefault("_over_tasks_theta", {})
    key = (tuple(tuned), use_log)
    if key not in cache:
        W_ref = _reference_values(tm, tuned, use_log)
        cache[key] = None if W_ref is None else _fit_over_tasks(tx, W_ref)
    return cache[key]


def over_tasks_zscores(task_X: np.ndarray, W: np.ndarray, trend: bool = OVER_TASKS_TREND) -> np.ndarray:
    """Leave-one-task-out z-scores of the GP over tasks: each task of task_X (T, c) left out in turn, the
    hyperparameters refitted (:func:`_fit_over_tasks`) on the other tasks' rows of W (T, n) and the left-out
    row predicted at its encoding; (T * n,) values (W - mean) / std, task by task (empty for T < 3)."""
    task_X, W = np.asarray(task_X, float), np.asarray(W, float)
    T = len(task_X)
    out = []
    for j in range(T if T >= 3 else 0):
        keep = np.arange(T) != j
        m, sd = _over_tasks(task_X[keep], W[keep], task_X[j], trend=trend)
        ok = sd > 0.0
        out.append((W[j][ok] - m[ok]) / sd[ok])
    return np.concatenate(out) if out else np.zeros(0)


def over_tasks_factor(task_X: np.ndarray, W: np.ndarray, trend: bool = OVER_TASKS_TREND) -> float:
    """The factor s >= 1 the over-tasks variance of a new task's prediction is multiplied by, as the LCM's
    calibrated predictive (LCM.calibration_factor): s = (q / 1.96)^2 for q the empirical
    CALIBRATION_LEVEL quantile of |z| over :func:`over_tasks_zscores`, clipped to [1, CALIBRATION_MAX];
    1 with fewer than CALIBRATION_MIN_POINTS z-scores (fewer than 3 tuned tasks)."""
    z = over_tasks_zscores(task_X, W, trend)
    if z.size < CALIBRATION_MIN_POINTS:
        return 1.0
    q = float(np.quantile(np.abs(z), CALIBRATION_LEVEL))
    return float(np.clip((q / _Z_LEVEL) ** 2, 1.0, CALIBRATION_MAX))


def _shared_factor(tm: TransferModel, tuned: Sequence[int], use_log: bool, tx: np.ndarray) -> float:
    """:func:`over_tasks_factor` on the tuned tasks' reference values, once per model (cached on it); 1 when
    they cannot be put in the units of the prediction."""
    cache = tm.__dict__.setdefault("_over_tasks_factor", {})
    key = (tuple(tuned), use_log)
    if key not in cache:
        W_ref = _reference_values(tm, tuned, use_log)
        cache[key] = 1.0 if W_ref is None else over_tasks_factor(tx, W_ref)
    return cache[key]


def _positive_objective(tm: TransferModel, tuned: Sequence[int]) -> bool:
    """True when every tuned task's best (smallest) observed value is positive."""
    bests = [tm.best[j] for j in tuned]
    return all(b is not None and b[1] > 0.0 for b in bests)


def _predict_joint(tm: TransferModel, joint: JointModel, task: dict, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The joint route (:mod:`gptask.transfer.joint`) for the encoded configurations X (n, D) of a
    new task: median and log-normal std in user units."""
    names, *inputs = joint_inputs(tm.problem, [task] * len(X), X)
    if names != joint.names:
        raise ValueError(f"the problem's features {names} are not those the model was fitted with {joint.names}")
    w, s = joint.predict(*inputs)  # a ValueError too when it was fitted relative to a cost model the problem lacks
    return _to_user(True, w, s)


def predict_encoded(tm: TransferModel, task: dict, X: np.ndarray,
                    calibrated: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Predicted objective (user units) of the encoded configurations X (n, D) on ``task`` (a
    validated dict): mean and std, (n,) each (see the module docstring for the two routes).
    calibrated: a tuned task's std from the calibrated predictive (LCM.predict_calibrated: about one
    fit more, once per model), a new task's over-tasks variance times :func:`over_tasks_factor` when
    OVER_TASKS_CALIBRATE; False where only the mean is used."""
    i = tm.task_index(task)
    if i is not None and tm.model.n_points[i] > 0:
        m, v = tm.model.predict_calibrated(i, X) if calibrated else tm.model.predict(i, X)
        return tm.transform.backward(i, m), tm.transform.backward_std(i, m, np.sqrt(np.maximum(v, 0.0)))
    tuned = [j for j in range(len(tm.tasks)) if tm.model.n_points[j] > 0]
    if len(tuned) < 2:
        raise ValueError("predicting a new task needs a model with at least 2 tuned tasks")
    joint = tm.joint()
    if joint is not None:
        return _predict_joint(tm, joint, task, X)
    W = _log_units(tm.model, tm.transform, tuned, X)
    # the noise variance of one new measurement, (T, 1) in the units of W
    noise = (tm.model.get_params()["noise"][tuned] * tm.transform.sigma[tuned] ** 2)[:, None]
    use_log = tm.transform.use_log
    if not use_log and _positive_objective(tm, tuned) and np.all(W > 0.0):
        W, use_log, noise = np.log(W), True, noise / W ** 2  # delta method: raw variance -> log units
    tx = tm.task_space.encode([tm.tasks[j] for j in tuned])
    w, s = _over_tasks(tx, W, tm.task_space.encode([task])[0], theta=_shared_theta(tm, tuned, use_log, tx))
    if calibrated and OVER_TASKS_CALIBRATE:  # leave-one-task-out (over_tasks_factor): off, see OVER_TASKS_CALIBRATE
        s = s * np.sqrt(_shared_factor(tm, tuned, use_log, tx))
    return _to_user(use_log, w, np.sqrt(s ** 2 + np.mean(noise, axis=0)))


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
