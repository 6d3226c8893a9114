"""The failure model: the probability that a configuration fails, learnt from failed and finished runs.

A Gaussian-process classifier with a probit link, fitted by the Laplace approximation (Rasmussen &
Williams, *Gaussian Processes for Machine Learning*, algorithms 3.1 and 3.2), on every finished
trial of every task at once:

* **Inputs.** A trial's encoded configuration (the unit cube of the parameter space) next to its
  encoded task (the unit cube of the task space), so one model is shared over the tasks: a
  failure region learnt on some tasks (out of memory above some block size) is expected on the
  neighbouring tasks too, less so on distant ones.
* **Labels.** +1 for a COMPLETE or CENSORED trial, -1 for a FAILED one (whatever the reason).
* **Prior.** A latent ``f`` with constant mean ``Phi^-1((n_ok + 1) / (n + 2))`` (the smoothed
  success rate: far from every run the probability of failing is the base rate) and covariance
  ``s^2 k(x, x')``, ``k`` an RBF kernel with one length scale per input column (ARD). ``s`` and
  the length scales maximise the Laplace approximation of the marginal likelihood times a weak
  log-normal prior (:data:`LENGTH_PRIOR`, :data:`SCALE_PRIOR`), in log space within
  :data:`LENGTH_BOUNDS` and :data:`SCALE_BOUNDS`, by L-BFGS-B with the analytic gradient
  (algorithm 5.1, the implicit term of the mode included). The search starts from the best point
  of a small isotropic grid (one length scale over the parameter columns, one over the task
  columns: :data:`GRID_PARAMS`, :data:`GRID_TASKS`, :data:`GRID_SCALES`) and from the previous
  fit. One length scale per column is what lets the boundary be sharp along the inputs that decide
  a failure (the process count of an out-of-memory limit) and flat along the others (the thread
  count): with the isotropic grid alone, runs that failed at few processes kept a probability of
  success of 0.4-0.8 and the search went on spending runs there.
* **Prediction.** ``P(success | x) = Phi(m(x) / sqrt(1 + v(x)))`` with the Laplace posterior mean
  ``m`` and variance ``v`` of the latent function (algorithm 3.2), vectorised over candidates.
* **Many runs** (a history with thousands of imported measurements): above
  :data:`FIT_MAX_POINTS` finished trials the classifier fits on the failed ones and the successful
  ones nearest to them, with the prior mean still the base rate of every run; far from those the
  prediction is that base rate.

It is fitted only when the data hold a failed trial; without one there is no model and the factor
it puts on an acquisition is exactly 1 (a run without failures proposes what it proposed before).

**The factor on an acquisition** (:meth:`FailureModel.log_factor`): ``log P(success)``, plus a
penalty of :data:`BELOW_PENALTY` (in log units) where ``P(success) <`` :data:`SUCCESS_AT_LEAST`
(1/2): a probabilistic constraint (Gelbart, Snoek & Adams, 2014) on top of the expected
improvement of a run that may fail. Without it the search hugs the learnt boundary from the
failing side, because the objective's model, which no longer sees the failures there, expects
even better values beyond it: on a two-task family whose constrained optimum lies on the failure
boundary (tests/test_multiobjective.py's ``failing``; 6 seeds, 20 runs per task), the plain factor
spent 79 search runs on failures where imputing them as the worst value spent 22, and the
penalised factor 29, with 8 times less regret than imputing (0.0024 against 0.018 on the task
whose optimum is on the boundary). Where failures are a minority, unexplored regions have
``P(success)`` near the base rate, above 1/2, so the penalty never stops exploration there.

**Which failures the objective models stop seeing** (:meth:`FailureModel.explains`): a failed
trial is left out of the objectives' training data when the model, fitted with it, gives its own
configuration a failure probability of at least :data:`EXPLAINED` (0.5): it lies in a region the
classifier has learnt to fail, and the acquisition's factor keeps the search away from there. A
failure the classifier smooths over (an isolated crash among successes) keeps the old rule: it is
shown to the objective's model as the task's worst value (:mod:`gptask.model.surrogate.data`).

**Its fitted settings are kept** (:meth:`FailureModel.settings`, :meth:`FailureModel.restore`,
issue 46): the log length scales and log scale of the last fit, with the sha256 of the data it was
fitted on (the training inputs, labels and prior mean), as JSON in the run's history (and in the
``cache=`` folder of a tuned run with sources). A model restored from them on the same data refits
nothing: one Laplace fit at the stored point gives the same probabilities (the grid and the L-BFGS-B
search are skipped); on changed data they are one more start of the search, as the previous fit is
in a run that was not stopped.
"""

from __future__ import annotations

import hashlib
import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.linalg import cho_solve, solve_triangular
from scipy.optimize import minimize
from scipy.special import log_ndtr, ndtri

from ...space.dimensions import Space
from ...data.trials import Status, Trial

__all__ = ["FailureModel", "success_threshold", "GRID_PARAMS", "GRID_TASKS", "GRID_SCALES", "LENGTH_BOUNDS", "SCALE_BOUNDS",
           "LENGTH_PRIOR", "SCALE_PRIOR", "FIT_ITERS", "FIT_MAX_POINTS", "EXPLAINED", "SUCCESS_AT_LEAST", "BELOW_PENALTY",
           "SETTINGS_FORMAT"]

log = logging.getLogger(__name__)

#: candidate length scales over the parameter columns and the task columns (unit-cube units), and
#: candidate prior standard deviations of the latent function
GRID_PARAMS = (0.1, 0.2, 0.4)
GRID_TASKS = (0.3, 1.0)
GRID_SCALES = (1.0, 3.0)
#: bounds of the fitted length scales (unit-cube units) and of the latent standard deviation
LENGTH_BOUNDS, SCALE_BOUNDS = (0.02, 20.0), (0.3, 3.0)
#: log-normal priors (median, standard deviation of the log) of every length scale and of the
#: latent standard deviation: weak, they only keep an input that the data do not inform from
#: drifting to a bound
LENGTH_PRIOR, SCALE_PRIOR = (0.3, 1.5), (2.0, 1.0)
#: L-BFGS-B iterations of the hyperparameter fit
FIT_ITERS = 60
#: the classifier fits on at most this many finished trials (a fit costs about the cube of the
#: count: 0.2 s at 200 trials, 6 s at 800 on one core of the machine of BENCHMARKS.md, and it runs
#: whenever a result arrives); beyond, on the failures and the successes nearest to them
#: (``_training_rows``), so that a history holding thousands of imported runs stays cheap
FIT_MAX_POINTS = 500
#: a failed trial whose own failure probability is at least this is left to the failure model
EXPLAINED = 0.5
#: the acquisition's factor: configurations less likely than this to succeed are penalised by
#: BELOW_PENALTY in log units (a factor e^-50: chosen only where nothing else is left)
SUCCESS_AT_LEAST, BELOW_PENALTY = 0.5, 50.0
#: Newton iterations of the Laplace mode search, and its tolerance on the objective
NEWTON_ITERS, NEWTON_TOL = 30, 1e-8
#: the version of the kept settings (:meth:`FailureModel.settings`): part of their data key, so
#: settings kept by another version of the fit are a start of the search, never reused as they are
SETTINGS_FORMAT = 1
_LOG_2PI = math.log(2.0 * math.pi)


def _probit_derivatives(f: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``log Phi(y f)``, its gradient and minus its second derivative in ``f`` (stable ratios)."""
    yf = y * f
    log_lik = log_ndtr(yf)
    ratio = np.exp(-0.5 * f * f - 0.5 * _LOG_2PI - log_lik)  # N(f) / Phi(y f)
    grad = y * ratio
    W = ratio * ratio + yf * ratio
    return log_lik, grad, W


def _probit_third(f: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Third derivative of ``log Phi(y f)`` in ``f`` (what moves the mode's W when ``f`` moves)."""
    ratio = np.exp(-0.5 * f * f - 0.5 * _LOG_2PI - log_ndtr(y * f))
    return 3.0 * f * ratio ** 2 + 2.0 * y * ratio ** 3 + y * ratio * (f * f - 1.0)


@dataclass(frozen=True)
class _Laplace:
    """One fitted classifier: inputs X (n, c), the kernel's scales, the prior mean, the mode's
    gradient term and the factor of B = I + W^1/2 K W^1/2."""

    X: np.ndarray
    inv_ls: np.ndarray
    scale: float
    mean: float
    grad: np.ndarray
    sqrt_W: np.ndarray
    L: np.ndarray
    log_evidence: float

    def kernel(self, A: np.ndarray, B: np.ndarray) -> np.ndarray:
        a, b = A * self.inv_ls, B * self.inv_ls
        d2 = np.maximum((a * a).sum(1)[:, None] + (b * b).sum(1)[None, :] - 2.0 * a @ b.T, 0.0)
        return self.scale ** 2 * np.exp(-0.5 * d2)

    def latent(self, Xs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(m,) Laplace posterior mean and variance of the latent function at inputs Xs (m, c)."""
        Ks = self.kernel(Xs, self.X)  # (m, n)
        mu = self.mean + Ks @ self.grad
        v = solve_triangular(self.L, (self.sqrt_W[:, None] * Ks.T), lower=True, check_finite=False)
        return mu, np.maximum(self.scale ** 2 - np.sum(v * v, axis=0), 0.0)

    def log_prob_success(self, Xs: np.ndarray) -> np.ndarray:
        """(m,) log P(success) at inputs Xs (m, c) (algorithm 3.2 with the probit average)."""
        mu, var = self.latent(Xs)
        return log_ndtr(mu / np.sqrt(1.0 + var))


def _fit_laplace(X: np.ndarray, y: np.ndarray, inv_ls: np.ndarray, scale: float, mean: float) -> _Laplace:
    n = len(y)
    probe = _Laplace(X, inv_ls, scale, mean, np.zeros(n), np.zeros(n), np.eye(n), 0.0)
    K = probe.kernel(X, X) + 1e-8 * scale ** 2 * np.eye(n)
    f = np.full(n, mean)
    a = np.zeros(n)
    old = -np.inf
    for _ in range(NEWTON_ITERS):
        log_lik, grad, W = _probit_derivatives(f, y)
        sW = np.sqrt(W)
        B = np.eye(n) + sW[:, None] * K * sW[None, :]
        L = np.linalg.cholesky(B)
        b = W * (f - mean) + grad
        c = cho_solve((L, True), sW * (K @ b), check_finite=False)
        a = b - sW * c
        f = K @ a + mean
        obj = -0.5 * a @ (f - mean) + float(np.sum(log_ndtr(y * f)))
        if abs(obj - old) < NEWTON_TOL * max(1.0, abs(obj)):
            break
        old = obj
    log_lik, grad, W = _probit_derivatives(f, y)
    sW = np.sqrt(W)
    L = np.linalg.cholesky(np.eye(n) + sW[:, None] * K * sW[None, :])
    evidence = -0.5 * a @ (f - mean) + float(np.sum(log_lik)) - float(np.sum(np.log(np.diag(L))))
    return _Laplace(X, inv_ls, scale, mean, grad, sW, L, evidence)


def _evidence_gradient(fit: _Laplace, y: np.ndarray) -> np.ndarray:
    """Gradient of ``fit.log_evidence`` in (log length scale of every column, log scale), the mode
    held at its optimum (Rasmussen & Williams, algorithm 5.1: the explicit term and the implicit
    one through W at the mode)."""
    X, n = fit.X, len(y)
    K = fit.kernel(X, X) + 1e-8 * fit.scale ** 2 * np.eye(n)
    sW, L = fit.sqrt_W, fit.L
    a = fit.grad  # at the mode, K^-1 (f - m) equals the gradient of the log likelihood
    f = fit.mean + K @ a
    R = sW[:, None] * cho_solve((L, True), np.diag(sW), check_finite=False)  # (W^-1 + K)^-1
    C = solve_triangular(L, sW[:, None] * K, lower=True, check_finite=False)
    # d(-1/2 log|B|)/d f_i = -1/2 [(K^-1 + W)^-1]_ii dW_ii/df_i, and dW/df = -(third derivative)
    s2 = 0.5 * (np.diag(K) - np.sum(C * C, axis=0)) * _probit_third(f, y)
    out = np.empty(X.shape[1] + 1)
    for j in range(X.shape[1] + 1):  # dK/d(log length scale j), then dK/d(log scale); one at a time
        Cj = 2.0 * K if j == X.shape[1] else K * (np.subtract.outer(X[:, j], X[:, j]) * fit.inv_ls[j]) ** 2
        b = Cj @ a
        explicit = 0.5 * a @ b - 0.5 * float(np.sum(R * Cj))
        out[j] = explicit + s2 @ (b - K @ (R @ b))
    return out


def _log_prior(theta: np.ndarray) -> tuple[float, np.ndarray]:
    """The log-normal priors of :data:`LENGTH_PRIOR` and :data:`SCALE_PRIOR` at ``theta`` (log
    length scales, then the log scale), up to a constant, and their gradient."""
    centre = np.append(np.full(theta.size - 1, math.log(LENGTH_PRIOR[0])), math.log(SCALE_PRIOR[0]))
    sd = np.append(np.full(theta.size - 1, LENGTH_PRIOR[1]), SCALE_PRIOR[1])
    z = (theta - centre) / sd
    return -0.5 * float(z @ z), -z / sd


def _fit_ard(X: np.ndarray, y: np.ndarray, mean: float, starts: Sequence[np.ndarray]) -> _Laplace | None:
    """The classifier maximising evidence times prior over per-column length scales and the
    scale (module docstring), from the best of ``starts`` (each: log length scales, log scale)."""
    fits: dict[bytes, _Laplace] = {}

    def fitted(theta: np.ndarray) -> _Laplace:
        key = theta.tobytes()
        if key not in fits:
            fits.clear()
            fits[key] = _fit_laplace(X, y, np.exp(-theta[:-1]), float(math.exp(theta[-1])), mean)
        return fits[key]

    def value(theta: np.ndarray) -> float:
        """Minus (log evidence + log prior); 1e10 where the Laplace fit fails."""
        try:
            return -(fitted(theta).log_evidence + _log_prior(theta)[0])
        except np.linalg.LinAlgError:
            return 1e10

    def negative(theta: np.ndarray) -> tuple[float, np.ndarray]:
        v = value(theta)
        if v >= 1e10:
            return v, np.zeros_like(theta)
        return v, -(_evidence_gradient(fitted(theta), y) + _log_prior(theta)[1])

    size = len(starts[0])
    bounds = [tuple(math.log(v) for v in LENGTH_BOUNDS)] * (size - 1) + [tuple(math.log(v) for v in SCALE_BOUNDS)]
    lo, hi = [b[0] for b in bounds], [b[1] for b in bounds]
    clipped = [np.clip(np.asarray(t, float), lo, hi) for t in starts]
    values = [value(t) for t in clipped]
    theta0, value0 = clipped[int(np.argmin(values))], min(values)
    res = minimize(negative, theta0, jac=True, method="L-BFGS-B", bounds=bounds, options={"maxiter": FIT_ITERS})
    theta = res.x if np.isfinite(res.fun) and res.fun <= value0 else theta0
    try:
        return fitted(np.asarray(theta, float))
    except np.linalg.LinAlgError:
        return None


def _data_key(X: np.ndarray, y: np.ndarray, mean: float) -> str:
    """The sha256 (hex) of a fit's data: inputs X (n, c), labels y (n,), prior mean, with the
    fit's constants (a change of them is a change of what the same data give)."""
    h = hashlib.sha256(repr((SETTINGS_FORMAT, X.shape, float(mean), GRID_PARAMS, GRID_TASKS, GRID_SCALES,
                             LENGTH_BOUNDS, SCALE_BOUNDS, LENGTH_PRIOR, SCALE_PRIOR, FIT_ITERS)).encode())
    h.update(np.ascontiguousarray(X, dtype=float).tobytes())
    h.update(np.ascontiguousarray(y, dtype=float).tobytes())
    return h.hexdigest()


def success_threshold(failure_model: bool | float) -> float | None:
    """The least probability of success a proposal needs under ``failure_model`` (a tuner's
    option): True, :data:`SUCCESS_AT_LEAST`; a number p with 1/2 <= p < 1, p; False, None (no
    failure model: failures are imputed). Raises ValueError naming the option otherwise."""
    if isinstance(failure_model, (bool, np.bool_)):
        return SUCCESS_AT_LEAST if failure_model else None
    if isinstance(failure_model, (int, float, np.integer, np.floating)) and 0.5 <= float(failure_model) < 1.0:
        return float(failure_model)
    raise ValueError("failure_model must be True, False or a probability of success p with 0.5 <= p < 1, "
                     f"got {failure_model!r}")


def _training_rows(X: np.ndarray, y: np.ndarray, limit: int) -> np.ndarray:
    """Sorted indices of at most ``limit`` rows of inputs ``X`` (n, c) with labels ``y`` (n,) to fit
    on (all of them up to ``limit``): the failed rows (``limit // 2`` evenly spaced over them when
    more), then the successful rows nearest to a kept failure in the classifier's inputs, which
    are what place the boundary. Far from every kept row the fitted model predicts the base rate of
    all rows (its prior mean)."""
    if len(y) <= limit:
        return np.arange(len(y))
    fail = np.flatnonzero(y < 0)
    if len(fail) > limit // 2:  # evenly spaced over the trials, so every task and period keeps some
        fail = fail[np.unique(np.linspace(0, len(fail) - 1, limit // 2).round().astype(int))]
    ok = np.flatnonzero(y > 0)
    room = limit - len(fail)
    if len(ok) > room:
        nearest = np.full(len(ok), np.inf)
        for f in fail:  # at most limit // 2 passes, each vectorised over the successful rows
            nearest = np.minimum(nearest, np.sum((X[ok] - X[f]) ** 2, axis=1))
        ok = ok[np.argsort(nearest, kind="stable")[:room]]
    return np.sort(np.concatenate([fail, ok]))


class FailureModel:
    """P(success) of configurations of a problem's tasks (module docstring).

    params, tasks: the parameter and task spaces (their encodings are the inputs). at_least: the
    probability of success below which the acquisition's factor penalises (:meth:`log_factor`).
    """

    def __init__(self, params: Space, tasks: Space, at_least: float = SUCCESS_AT_LEAST) -> None:
        self.params, self.tasks = params, tasks
        self.at_least = float(at_least)
        self.fitted: _Laplace | None = None
        self._key: tuple | None = None
        self._explained: set[int] = set()
        self._labels: np.ndarray | None = None
        self._theta: np.ndarray | None = None  # log length scales, then log scale, of the last fit
        self._data: str | None = None  # the data key of the last fit
        self._stored: tuple[str, np.ndarray] | None = None  # restored settings: (data key, theta)
        #: how the last fit was made: "reused" (restored settings, same data), "fitted", or None
        self.last_fit: str | None = None

    def settings(self) -> dict | None:
        """The last fit's settings as JSON values ({"data_key", "log_length_scales", "log_scale"}:
        the data's sha256, the log of each input column's length scale in unit-cube units, the log
        of the latent standard deviation), or None without a fit."""
        if self.fitted is None or self._theta is None or self._data is None:
            return None
        return {"data_key": self._data, "log_length_scales": [float(v) for v in self._theta[:-1]],
                "log_scale": float(self._theta[-1])}

    def restore(self, settings: Mapping | None) -> bool:
        """Keep ``settings`` (from :meth:`settings`, e.g. read back from a history) for the next
        :meth:`update`: reused when its data are those they were fitted on, a start of the search
        otherwise. Settings that do not read (edited, another version) are ignored with a warning;
        returns whether they were kept."""
        if settings is None:
            return False
        try:
            theta = np.array([*settings["log_length_scales"], settings["log_scale"]], dtype=float)
            key = str(settings["data_key"])
            if theta.ndim != 1 or theta.size < 2 or not np.all(np.isfinite(theta)):
                raise ValueError(f"log_length_scales and log_scale must be finite numbers, got {theta.tolist()}")
        except (KeyError, TypeError, ValueError) as exc:
            log.warning("the failure model's stored settings do not read (%s); it is fitted afresh", exc)
            return False
        self._stored = (key, theta)
        return True

    @property
    def active(self) -> bool:
        """Whether a classifier is fitted (the data hold a failed trial)."""
        return self.fitted is not None

    def inputs(self, task: dict, X: np.ndarray) -> np.ndarray:
        """(m, c) classifier inputs of configurations ``X`` (m, D) encoded, of ``task`` (a dict)."""
        t = self.tasks.encode([task])[0]
        X = np.atleast_2d(np.asarray(X, dtype=float))
        return np.hstack([X, np.broadcast_to(t, (len(X), t.size))])

    def update(self, trials: Sequence[Trial]) -> None:
        """Fit on the finished ``trials`` (every task) when they hold a failed one; drop the model
        otherwise. Nothing is done when the trials and their states are those of the last fit."""
        finished = [t for t in trials if t.status.finished]
        key = tuple((t.id, t.status is Status.FAILED) for t in finished)
        if key == self._key:
            return
        self._key = key
        failed = [t for t in finished if t.status is Status.FAILED]
        if not failed:
            self.fitted, self._explained = None, set()
            return
        X_all = np.hstack([self.params.encode([t.params for t in finished]),
                           self.tasks.encode([t.task for t in finished])])
        y_all = np.array([-1.0 if t.status is Status.FAILED else 1.0 for t in finished])
        n_ok = int(np.sum(y_all > 0))
        mean = float(ndtri((n_ok + 1.0) / (len(y_all) + 2.0)))  # the base rate of every run, not the subset's
        rows = _training_rows(X_all, y_all, FIT_MAX_POINTS)
        X, y = X_all[rows], y_all[rows]
        data = _data_key(X, y, mean)
        best = self._reuse(X, y, mean, data)
        if best is None:
            best = self._fit(X, y, mean)
        self.fitted, self._labels = best, y
        if best is None:
            log.warning("the failure model could not be fitted on %d trials; failures are imputed as before", len(y))
            self._explained, self._theta, self._data = set(), None, None
            return
        self._theta, self._data = np.append(-np.log(best.inv_ls), math.log(best.scale)), data
        p_fail = -np.expm1(best.log_prob_success(X_all[y_all < 0]))
        self._explained = {t.id for t, p in zip(failed, p_fail) if p >= EXPLAINED}
        log.info("failure model: %d failed of %d runs%s, length scales %s (parameters, then tasks), scale %.2g; "
                 "%d failure(s) left to it%s", len(failed), len(y_all),
                 f" (fitted on {len(y)} of them)" if len(y) < len(y_all) else "",
                 " ".join(f"{v:.2g}" for v in 1.0 / best.inv_ls), best.scale, len(self._explained),
                 "; its stored settings reused" if self.last_fit == "reused" else "")

    def _reuse(self, X: np.ndarray, y: np.ndarray, mean: float, data: str) -> _Laplace | None:
        """The classifier at the restored settings when they were fitted on these data (key
        ``data``), by one Laplace fit; None otherwise (or when that fit fails)."""
        stored = self._stored
        if stored is None or stored[0] != data or stored[1].size != X.shape[1] + 1:
            return None
        theta = stored[1]
        try:
            fit = _fit_laplace(X, y, np.exp(-theta[:-1]), float(math.exp(theta[-1])), mean)
        except np.linalg.LinAlgError:
            return None
        self.last_fit = "reused"
        return fit

    def _fit(self, X: np.ndarray, y: np.ndarray, mean: float) -> _Laplace | None:
        """The classifier fitted on inputs X (n, c), labels y (n,) with prior mean ``mean``: the
        best of the isotropic grid, then the ARD search from it, the previous fit and the restored
        settings (module docstring); None when no Laplace fit succeeds."""
        self.last_fit = "fitted"
        d = self.params.n_columns
        best = None
        for lp in GRID_PARAMS:
            for lt in GRID_TASKS:
                inv = np.concatenate([np.full(d, 1.0 / lp), np.full(X.shape[1] - d, 1.0 / lt)])
                for s in GRID_SCALES:
                    try:
                        fit = _fit_laplace(X, y, inv, s, mean)
                    except np.linalg.LinAlgError:
                        continue
                    if best is None or fit.log_evidence > best.log_evidence:
                        best = fit
        if best is not None:
            starts = [np.append(-np.log(best.inv_ls), math.log(best.scale))]
            if self.fitted is not None and self.fitted.X.shape[1] == X.shape[1]:
                starts.append(np.append(-np.log(self.fitted.inv_ls), math.log(self.fitted.scale)))
            elif self._stored is not None and self._stored[1].size == X.shape[1] + 1:
                starts.append(self._stored[1])
            best = _fit_ard(X, y, mean, starts) or best
        return best

    def evidence_drop(self, columns: slice) -> float:
        """How much the fitted classifier's log evidence (Laplace approximation) falls when the
        parameter columns ``columns`` are ignored (their length scales made infinite, the other
        hyperparameters kept): how strongly the finished runs say that those inputs decide a
        failure (a drop of ``log 20``, 3.0, is a Bayes factor of 20). 0.0 without a fit; a drop can
        be slightly negative where ignoring the inputs fits as well."""
        if self.fitted is None or self._labels is None:
            return 0.0
        fit = self.fitted
        inv = fit.inv_ls.copy()
        inv[columns] = 0.0
        try:
            ablated = _fit_laplace(fit.X, self._labels, inv, fit.scale, fit.mean)
        except np.linalg.LinAlgError:
            return 0.0
        return float(fit.log_evidence - ablated.log_evidence)

    def explains(self, trial: Trial) -> bool:
        """Whether failed ``trial`` lies where the model predicts failure (left out of the
        objectives' data; module docstring)."""
        return trial.id in self._explained

    def prob_success(self, task: dict, X: np.ndarray) -> np.ndarray:
        """(m,) probability that configurations ``X`` (m, D) encoded of ``task`` do not fail (all
        ones without a fitted model)."""
        return np.exp(self.log_prob_success(task, X))

    def log_prob_success(self, task: dict, X: np.ndarray) -> np.ndarray:
        """(m,) log of :meth:`prob_success` (zeros without a fitted model)."""
        X = np.atleast_2d(np.asarray(X, dtype=float))
        if self.fitted is None:
            return np.zeros(len(X))
        return self.fitted.log_prob_success(self.inputs(task, X))

    def log_factor(self, task: dict, X: np.ndarray) -> np.ndarray:
        """(m,) what the failure model adds to a log acquisition at configurations ``X`` (m, D) of
        ``task``: log P(success), less BELOW_PENALTY where P(success) < ``at_least`` (module
        docstring); zeros without a fitted model."""
        lp = self.log_prob_success(task, X)
        return np.where(lp < math.log(self.at_least), lp - BELOW_PENALTY, lp)
