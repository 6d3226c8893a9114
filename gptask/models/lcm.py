"""Linear coregionalisation model (LCM): an exact multi-output Gaussian process.

Model (GPTune paper, eqs. 7-13): task i's output at input x is
``f_i(x) = sum_q a_{i,q} u_q(x)`` plus Gaussian noise of variance ``noise[i]``, with independent
latent processes u_q of unit-variance ARD kernels k_q (see :mod:`.kernels`). Hence::

    cov(y_i(x), y_j(x')) = sum_q B_q[i, j] k_q(x, x') + [i == j, x is x'] noise[i]
    B_q = W_q W_q^T + diag(kappa_q)            W_q: (n_tasks, rank), kappa_q: (n_tasks,)

This is exactly GPy's ``GPy.util.multioutput.LCM`` + ``GPCoregionalizedRegression`` with every
kernel's variance fixed to 1 (B_q carries the scale) and zero prior mean. Data are heterotopic: each
task has its own inputs, and the covariance matrix is built over all N = sum_i n_i (task, x) pairs.

Hyperparameters (``get_params()``)::

    lengthscale (Q, d) > 0     W (Q, T, rank) real     kappa (Q, T) > 0     noise (T,) > 0

Fitting maximises, by default, the log posterior: the exact log marginal likelihood of the outputs
*as given* (no transformation; standardise or log-transform before calling ``fit`` if wanted) plus
the weakly informative log prior of :mod:`.priors` (maximum a posteriori; ``prior=None`` gives plain
maximum likelihood). Multi-start L-BFGS-B over log(lengthscale), W, log(kappa), log(noise), with
analytic gradients obtained from ``A = alpha alpha^T - K^-1`` contracted with each dK/dtheta without
forming an N x N matrix per hyperparameter. Every fit is checked afterwards (:meth:`LCM.diagnose`:
hyperparameters on a bound, noise on its floor, predictions far outside the observed values); a
fit that fails the check is retried from fresh random starts and the outcome is logged
(``LCM.fit_report``). All constants live in :mod:`.defaults`.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np
from scipy.optimize import minimize
from threadpoolctl import threadpool_limits

from scipy.stats import qmc

from . import linalg as _la
from .defaults import (BOUND_TOL_LOG, DEFAULT_BLAS_THREADS, DEFAULT_MAXITER, EXPLORE_RESTARTS, FAIL_VALUE,
                       KAPPA_BOUNDS_REL, LENGTHSCALE_BOUNDS, NOISE_BOUNDS_REL, PROBE_POINTS, STALL_NATS,
                       STALL_WINDOW, VAR_FLOOR_REL, WILD_RANGES)
from .kernels import check_kernel, gram, kernel as _kernel
from .priors import LCMPrior, resolve_prior

logger = logging.getLogger(__name__)

_LOG2PI = float(np.log(2.0 * np.pi))

_FORMAT = "gptask.models.LCM/1"


# --------------------------------------------------------------------------------------------
# input checking
# --------------------------------------------------------------------------------------------


def _as_X(X: Any, name: str, d: int | None = None) -> np.ndarray:
    try:
        A = np.array(X, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be a numeric (n, d) array: {exc}") from None
    if A.ndim != 2:
        raise ValueError(f"{name} must be a 2-D (n, d) array, got shape {A.shape}")
    if A.shape[0] < 1:
        raise ValueError(f"{name} must contain at least one point, got shape {A.shape}")
    if A.shape[1] < 1:
        raise ValueError(f"{name} must have at least one column, got shape {A.shape}")
    if d is not None and A.shape[1] != d:
        raise ValueError(f"{name} must have {d} columns (the input dimension), got {A.shape[1]}")
    if not np.all(np.isfinite(A)):
        raise ValueError(f"{name} contains NaN or inf")
    lo, hi = float(A.min()), float(A.max())
    if lo < 0.0 or hi > 1.0:
        raise ValueError(f"{name} must lie in the unit cube [0, 1], got values in [{lo:g}, {hi:g}]")
    return A


def _as_y(y: Any, name: str, n: int) -> np.ndarray:
    try:
        a = np.array(y, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be a numeric (n,) array: {exc}") from None
    if a.ndim == 2 and a.shape[1] == 1:
        a = a[:, 0]
    if a.ndim != 1:
        raise ValueError(f"{name} must be a 1-D (n,) array, got shape {a.shape}")
    if a.shape[0] != n:
        raise ValueError(f"{name} has {a.shape[0]} values but its X has {n} rows")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name} contains NaN or inf")
    return a


def _check_data(X_list: Any, y_list: Any) -> tuple[list[np.ndarray], list[np.ndarray]]:
    if isinstance(X_list, np.ndarray) or isinstance(y_list, np.ndarray):
        raise ValueError("X_list and y_list must be lists with one array per task, not arrays")
    try:
        X_list, y_list = list(X_list), list(y_list)
    except TypeError:
        raise ValueError("X_list and y_list must be lists with one array per task") from None
    if len(X_list) == 0:
        raise ValueError("X_list must contain at least one task")
    if len(X_list) != len(y_list):
        raise ValueError(
            f"X_list and y_list must have one entry per task, got {len(X_list)} and {len(y_list)}"
        )
    Xs, ys = [], []
    d = None
    for i, (X, y) in enumerate(zip(X_list, y_list)):
        Xi = _as_X(X, f"X_list[{i}]", d)
        d = Xi.shape[1]
        Xs.append(Xi)
        ys.append(_as_y(y, f"y_list[{i}]", Xi.shape[0]))
    return Xs, ys


def _check_int(value: Any, name: str, lo: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name} must be an integer >= {lo}, got {value!r}")
    if value < lo:
        raise ValueError(f"{name} must be an integer >= {lo}, got {value}")
    return int(value)


# --------------------------------------------------------------------------------------------
# parameter layout (the optimiser's vector theta)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Layout:
    """theta = [log lengthscale (Q*d), W (Q*T*r), log kappa (Q*T), log noise (T)]."""

    Q: int
    d: int
    T: int
    r: int

    @property
    def sizes(self) -> tuple[int, int, int, int]:
        return (self.Q * self.d, self.Q * self.T * self.r, self.Q * self.T, self.T)

    @property
    def size(self) -> int:
        return sum(self.sizes)

    def unpack(self, theta: np.ndarray):
        a, b, c, _ = self.sizes
        ls = np.exp(theta[:a]).reshape(self.Q, self.d)
        W = theta[a : a + b].reshape(self.Q, self.T, self.r)
        kappa = np.exp(theta[a + b : a + b + c]).reshape(self.Q, self.T)
        noise = np.exp(theta[a + b + c :])
        return ls, W, kappa, noise

    def pack(self, ls, W, kappa, noise) -> np.ndarray:
        return np.concatenate(
            [np.log(ls).ravel(), np.asarray(W, float).ravel(), np.log(kappa).ravel(),
             np.log(noise).ravel()]
        )

    def bounds(self, s2: float) -> list[tuple[float | None, float | None]]:
        a, b, c, e = self.sizes
        lb = [(np.log(LENGTHSCALE_BOUNDS[0]), np.log(LENGTHSCALE_BOUNDS[1]))] * a
        wb = [(None, None)] * b
        kb = [(np.log(KAPPA_BOUNDS_REL[0] * s2), np.log(KAPPA_BOUNDS_REL[1] * s2))] * c
        nb = [(np.log(NOISE_BOUNDS_REL[0] * s2), np.log(NOISE_BOUNDS_REL[1] * s2))] * e
        return lb + wb + kb + nb

    def random(self, rng: np.random.Generator, s2: float) -> np.ndarray:
        """A data-driven random start: total prior variance of each task ~ s2, length scales
        log-uniform in [0.25, 1.5] x sqrt(d) (the typical distance between points of the cube)."""
        root = np.sqrt(self.d)
        ls = np.exp(rng.uniform(np.log(0.25 * root), np.log(1.5 * root), size=(self.Q, self.d)))
        W = rng.standard_normal((self.Q, self.T, self.r)) * np.sqrt(s2 / (self.Q * self.r))
        kappa = s2 / self.Q * np.exp(rng.uniform(np.log(1e-2), np.log(0.3), size=(self.Q, self.T)))
        noise = s2 * np.exp(rng.uniform(np.log(1e-3), np.log(1e-1), size=self.T))
        return self.pack(ls, W, kappa, noise)


def _output_scale(y: np.ndarray) -> float:
    s2 = float(np.mean(y * y))
    return s2 if np.isfinite(s2) and s2 > 0.0 else 1.0


def _coreg(W: np.ndarray, kappa: np.ndarray) -> np.ndarray:
    """B (Q, T, T) from W (Q, T, r) and kappa (Q, T)."""
    B = np.einsum("qtr,qsr->qts", W, W)
    idx = np.arange(W.shape[1])
    B[:, idx, idx] += kappa
    return B


# --------------------------------------------------------------------------------------------
# likelihood and gradient
# --------------------------------------------------------------------------------------------


def _lml_core(X, y, counts, ls, W, kappa, noise, kern, want_grad):
    """Exact LML (and gradient) for data sorted by task; counts (T,) >= 1 points per task.

    Returns (ll, grads, L, z, alpha, jitter); grads is None or a tuple
    (d/d lengthscale (Q, d), d/dW (Q, T, r), d/dkappa (Q, T), d/dnoise (T,)).

    B_q expanded to the N x N data is never formed: its rank-r part acts as row/column scalings
    by a_{q,s}[n] = W[q, task(n), s], its kappa part only touches the T diagonal blocks.
    """
    N, d = X.shape
    Q, T, r = W.shape
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    blocks = [slice(int(s), int(s + c)) for s, c in zip(starts, counts)]
    t = np.repeat(np.arange(T), counts)
    a = W[:, t, :]  # (Q, N, r)
    K = np.zeros((N, N))
    tmp = np.empty((N, N))
    Ks, Fs = [], []
    for q in range(Q):
        Kq, Fq = gram(kern, X, ls[q], want_factor=True)
        for s in range(r):
            np.multiply(Kq, a[q, :, s][:, None], out=tmp)
            tmp *= a[q, :, s][None, :]
            K += tmp
        for i, bl in enumerate(blocks):
            K[bl, bl] += kappa[q, i] * Kq[bl, bl]
        if want_grad:
            Ks.append(Kq)
            Fs.append(Fq)
    K[np.diag_indices(N)] += noise[t]
    L, jitter = _la.robust_cholesky(K, what="LCM covariance matrix")
    del K
    z = _la.solve_lower(L, y)
    alpha = _la.solve_upper_t(L, z)
    ll = -0.5 * float(z @ z) - float(np.sum(np.log(np.diagonal(L)))) - 0.5 * N * _LOG2PI
    if not want_grad:
        return ll, None, L, z, alpha, jitter

    A = _la.outer_minus_inverse(alpha, L)  # alpha alpha^T - K^-1
    g_noise = 0.5 * np.add.reduceat(np.diagonal(A), starts)
    X2 = X * X
    X1 = np.hstack([X, np.ones((N, 1))])  # (N, d+1): the last column gives row sums
    g_ls = np.empty_like(ls)
    g_W = np.empty_like(W)
    g_kappa = np.empty_like(kappa)
    for q in range(Q):
        M = np.multiply(A, Ks[q], out=tmp)  # A o K_q
        S = np.add.reduceat(np.add.reduceat(M, starts, axis=0), starts, axis=1)  # (T, T) block sums
        # dLL/dB_q = S/2 entrywise; B = W W^T + diag(kappa) and S symmetric
        g_W[q] = S @ W[q]
        g_kappa[q] = 0.5 * np.diagonal(S)
        # length scales: dK/dl_d = Bexp o F_q o (x_d - x'_d)^2 / l_d^3. With H = A o F_q and
        # G = H o Bexp: sum(G o D_d^2) = 2 sum_n (G 1)_n x_nd^2 - 2 sum_n x_nd (G X)_nd.
        H = M if Fs[q] is Ks[q] else np.multiply(A, Fs[q], out=tmp)
        Z = np.concatenate([a[q, :, s][:, None] * X1 for s in range(r)], axis=1)
        HZ = H @ Z
        GX1 = sum(a[q, :, s][:, None] * HZ[:, s * (d + 1) : (s + 1) * (d + 1)] for s in range(r))
        for i, bl in enumerate(blocks):
            GX1[bl] += kappa[q, i] * (H[bl, bl] @ X1[bl])
        sq = 2.0 * (GX1[:, d] @ X2) - 2.0 * np.einsum("nd,nd->d", X, GX1[:, :d])
        g_ls[q] = 0.5 * sq / ls[q] ** 3
    return ll, (g_ls, g_W, g_kappa, g_noise), L, z, alpha, jitter


def _stall_callback():
    """L-BFGS-B callback stopping a start that has stalled (see STALL_WINDOW, STALL_NATS)."""
    history: list[float] = []

    def callback(intermediate_result) -> None:
        history.append(-float(intermediate_result.fun))
        if len(history) > STALL_WINDOW and history[-1] - history[-1 - STALL_WINDOW] < STALL_NATS:
            raise StopIteration

    return callback


def _sorted_data(X_list, y_list):
    counts = np.array([x.shape[0] for x in X_list], dtype=int)
    return np.vstack(X_list), np.concatenate(y_list), counts


def lml_and_grad(
    X_list: Sequence[np.ndarray],
    y_list: Sequence[np.ndarray],
    params: Mapping[str, np.ndarray],
    kernel: str = "rbf",
) -> tuple[float, dict[str, np.ndarray]]:
    """Log marginal likelihood of the data at ``params`` and its gradient in natural parameters.

    X_list[i]: (n_i, d) in [0, 1]; y_list[i]: (n_i,). params as returned by ``LCM.get_params``.
    Returns (ll, grads) with grads keyed like params and of the same shapes.
    """
    Xs, ys = _check_data(X_list, y_list)
    p = _check_params(params, None, Xs[0].shape[1], len(Xs), None)
    X, y, counts = _sorted_data(Xs, ys)
    ll, g, *_ = _lml_core(X, y, counts, p["lengthscale"], p["W"], p["kappa"], p["noise"],
                          check_kernel(kernel), True)
    return ll, dict(zip(("lengthscale", "W", "kappa", "noise"), g))


def _check_params(params, Q, d, T, r) -> dict[str, np.ndarray]:
    if not isinstance(params, Mapping):
        raise ValueError(f"params must be a dict of arrays, got {type(params).__name__}")
    missing = {"lengthscale", "W", "kappa", "noise"} - set(params)
    if missing:
        raise ValueError(f"params is missing {sorted(missing)}")
    out = {k: np.array(params[k], dtype=float) for k in ("lengthscale", "W", "kappa", "noise")}
    ls, W, kappa, noise = out["lengthscale"], out["W"], out["kappa"], out["noise"]
    if W.ndim != 3:
        raise ValueError(f"params['W'] must have shape (Q, T, rank), got {W.shape}")
    Q = W.shape[0] if Q is None else Q
    T = W.shape[1] if T is None else T
    r = W.shape[2] if r is None else r
    d = ls.shape[-1] if d is None else d
    for name, arr, shape in (("lengthscale", ls, (Q, d)), ("W", W, (Q, T, r)),
                             ("kappa", kappa, (Q, T)), ("noise", noise, (T,))):
        if arr.shape != shape:
            raise ValueError(f"params[{name!r}] must have shape {shape}, got {arr.shape}")
        if not np.all(np.isfinite(arr)):
            raise ValueError(f"params[{name!r}] contains NaN or inf")
    for name in ("lengthscale", "kappa", "noise"):
        if np.any(out[name] <= 0.0):
            raise ValueError(f"params[{name!r}] must be > 0, got min {out[name].min():g}")
    return out


# --------------------------------------------------------------------------------------------
# the model
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FitReport:
    """How a fit went. n_starts: L-BFGS-B starts run; objective: (n_starts,) value each start
    reached (log posterior under a prior, else log-likelihood; -inf where it failed); map: True
    when fitted under a prior; flags: what :meth:`LCM.diagnose` found on the first winner;
    explored: whether fresh starts were run because of them; flags_after: the final model's."""

    n_starts: int
    objective: np.ndarray
    map: bool
    flags: tuple[str, ...]
    explored: bool
    flags_after: tuple[str, ...]


class LCM:
    """Linear coregionalisation model with Q latent ARD kernels (see module docstring).

    Parameters
    ----------
    n_latent: number Q >= 1 of latent processes.
    kernel: "rbf" or "matern52" (unit variance; convention in :mod:`gptask.models.kernels`).
    rank: rank r >= 1 of each W_q.
    """

    def __init__(self, n_latent: int = 1, kernel: str = "rbf", rank: int = 1) -> None:
        self._Q = _check_int(n_latent, "n_latent", 1)
        self._kernel = check_kernel(kernel)
        self._rank = _check_int(rank, "rank", 1)
        self._params: dict[str, np.ndarray] | None = None
        self._X: np.ndarray | None = None  # (N, d), in factor order
        self._t: np.ndarray | None = None  # (N,) task of each row
        self._y: np.ndarray | None = None  # (N,)
        self._L: np.ndarray | None = None  # (N, N) lower, L L^T = K + jitter
        self._z: np.ndarray | None = None  # L^-1 y
        self._alpha: np.ndarray | None = None  # K^-1 y
        self._ll: float | None = None
        self.jitter: float = 0.0
        #: full factorisations of the whole covariance matrix that produced this model's state
        self.n_factorizations: int = 0
        #: block (Cholesky-extension) updates applied since the last full factorisation
        self.n_block_updates: int = 0
        #: the prior the hyperparameters were fitted under (None: maximum likelihood)
        self.prior: LCMPrior | None = None
        #: the output scale s2 the last fit's bounds and prior were relative to
        self._s2: float | None = None
        #: how the last fit went (starts, objective per start, post-fit check)
        self.fit_report: FitReport | None = None

    # ---- basic properties ------------------------------------------------------------------
    @property
    def n_latent(self) -> int:
        return self._Q

    @property
    def kernel(self) -> str:
        return self._kernel

    @property
    def rank(self) -> int:
        return self._rank

    @property
    def n_tasks(self) -> int:
        self._require_params()
        return int(self._params["W"].shape[1])

    @property
    def input_dim(self) -> int:
        self._require_params()
        return int(self._params["lengthscale"].shape[1])

    @property
    def lengthscales(self) -> np.ndarray:
        """(Q, d) length scales (GPy convention, see kernels.py)."""
        self._require_params()
        return self._params["lengthscale"].copy()

    @property
    def n_points(self) -> np.ndarray:
        """(T,) number of data points of each task."""
        self._require_data()
        return np.bincount(self._t, minlength=self.n_tasks)

    def coregionalization(self) -> np.ndarray:
        """B (Q, T, T) = W_q W_q^T + diag(kappa_q)."""
        self._require_params()
        return _coreg(self._params["W"], self._params["kappa"])

    def data(self) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """The conditioning data as (X_list, y_list), one entry per task."""
        self._require_data()
        T = self.n_tasks
        return ([self._X[self._t == i].copy() for i in range(T)],
                [self._y[self._t == i].copy() for i in range(T)])

    def _require_params(self) -> None:
        if self._params is None:
            raise RuntimeError("the LCM has no hyperparameters yet: call fit() or set_params()")

    def _require_data(self) -> None:
        if self._L is None:
            raise RuntimeError("the LCM has no data: call fit() or condition() first")

    # ---- parameters --------------------------------------------------------------------------
    def get_params(self) -> dict[str, np.ndarray]:
        """Copies of lengthscale (Q, d), W (Q, T, rank), kappa (Q, T), noise (T,)."""
        self._require_params()
        return {k: v.copy() for k, v in self._params.items()}

    def set_params(self, params: Mapping[str, np.ndarray]) -> "LCM":
        """Set all hyperparameters; if the model holds data, it is re-conditioned on it."""
        d = T = None
        if self._X is not None:
            d, T = self._X.shape[1], int(self._params["W"].shape[1])
        self._params = _check_params(params, self._Q, d, T, self._rank)
        if self._X is not None:
            self._condition_sorted(*self.data())
        return self

    def condition(self, X_list, y_list, params: Mapping[str, np.ndarray] | None = None) -> "LCM":
        """Condition on data with fixed hyperparameters (``params`` or the current ones).

        X_list[i]: (n_i, d) in [0, 1], y_list[i]: (n_i,). Returns self. One full factorisation.
        """
        Xs, ys = _check_data(X_list, y_list)
        p = params if params is not None else self._params
        if p is None:
            raise RuntimeError("condition() needs params: pass them or call set_params() first")
        self._params = _check_params(p, self._Q, Xs[0].shape[1], len(Xs), self._rank)
        self._condition_sorted(Xs, ys)
        return self

    def _condition_sorted(self, Xs, ys) -> None:
        X, y, counts = _sorted_data(Xs, ys)
        p = self._params
        ll, _, L, z, alpha, jitter = _lml_core(
            X, y, counts, p["lengthscale"], p["W"], p["kappa"], p["noise"], self._kernel, False)
        self._X, self._y = X, y
        self._t = np.repeat(np.arange(counts.shape[0]), counts)
        self._L, self._z, self._alpha, self._ll, self.jitter = L, z, alpha, ll, jitter
        self.n_factorizations += 1
        self.n_block_updates = 0

    # ---- fitting -----------------------------------------------------------------------------
    def fit(
        self,
        X_list: Sequence[np.ndarray],
        y_list: Sequence[np.ndarray],
        restarts: int = 4,
        seed: int = 0,
        comm: Any = None,
        init: "LCM | Mapping[str, np.ndarray] | None" = None,
        maxiter: int | None = None,
        threads: int | None = DEFAULT_BLAS_THREADS,
        prior: "str | LCMPrior | None" = "default",
        explore: bool = True,
    ) -> "LCM":
        """Fit every hyperparameter (maximum a posteriori by default); returns self.

        X_list[i]: (n_i, d) array in [0, 1]; y_list[i]: (n_i,) outputs of task i (used as given).
        prior: "default" (the priors of :mod:`gptask.models.priors`), an ``LCMPrior``, or None for
        plain maximum likelihood. Starts are compared by the objective they maximise (the log
        posterior, or the log-likelihood without a prior).
        restarts: number of L-BFGS-B starts; start k draws its initial point from
        ``np.random.SeedSequence([seed, k])``, except start 0 which begins at ``init`` (an LCM or
        a params dict of matching shapes) when given. The best start wins (ties: lowest k).
        explore: check the winner with :meth:`diagnose`; when it has a length scale or kappa on a
        bound, a noise on its floor, or wild predictions, run EXPLORE_RESTARTS more random starts
        (k = restarts, restarts + 1, ...) and keep the best of all; the outcome is logged and kept
        in ``fit_report``.
        comm: optional mpi4py communicator; start k runs on rank ``k % size`` and the results are
        exchanged with ``comm.Allgather`` on numpy buffers, so every rank ends with the same model,
        whatever the number of ranks.
        maxiter: L-BFGS-B iteration cap per start (default DEFAULT_MAXITER). A start also stops
        when its objective gained less than STALL_NATS over STALL_WINDOW iterations.
        threads: BLAS threads used during the fit (threadpoolctl); None leaves BLAS as it is.
        The default 1 is deliberate: on a loaded or MPI-shared node OpenBLAS threads spin and
        made a 400 x 400 Cholesky 16x slower with 2 threads than with 1 (bench/results_lcm.md).
        """
        Xs, ys = _check_data(X_list, y_list)
        if threads is not None:
            threads = _check_int(threads, "threads", 1)
            with threadpool_limits(limits=threads, user_api="blas"):
                return self.fit(Xs, ys, restarts=restarts, seed=seed, comm=comm, init=init,
                                maxiter=maxiter, threads=None, prior=prior, explore=explore)
        restarts = _check_int(restarts, "restarts", 1)
        seed = _check_int(seed, "seed", 0)
        maxiter = DEFAULT_MAXITER if maxiter is None else _check_int(maxiter, "maxiter", 1)
        prior_obj = resolve_prior(prior)
        T, d = len(Xs), Xs[0].shape[1]
        lay = _Layout(self._Q, d, T, self._rank)
        X, y, counts = _sorted_data(Xs, ys)
        s2 = _output_scale(y)
        bounds = lay.bounds(s2)
        lo = np.array([-np.inf if b[0] is None else b[0] for b in bounds])
        hi = np.array([np.inf if b[1] is None else b[1] for b in bounds])
        theta_init = None
        if init is not None:
            ip = init.get_params() if isinstance(init, LCM) else init
            ip = _check_params(ip, self._Q, d, T, self._rank)
            theta_init = np.clip(lay.pack(ip["lengthscale"], ip["W"], ip["kappa"], ip["noise"]), lo, hi)

        def objective(theta):
            ls, W, kappa, noise = lay.unpack(theta)
            try:
                ll, g, *_ = _lml_core(X, y, counts, ls, W, kappa, noise, self._kernel, True)
            except np.linalg.LinAlgError:
                return FAIL_VALUE, np.zeros_like(theta)
            g_ls, g_W, g_k, g_n = g
            if prior_obj is not None:
                lp, gp = prior_obj.log_density(
                    {"lengthscale": ls, "W": W, "kappa": kappa, "noise": noise}, s2)
                ll += lp
                g_ls, g_W = g_ls + gp["lengthscale"], g_W + gp["W"]
                g_k, g_n = g_k + gp["kappa"], g_n + gp["noise"]
            grad = np.concatenate([(g_ls * ls).ravel(), g_W.ravel(), (g_k * kappa).ravel(), g_n * noise])
            if not (np.isfinite(ll) and np.all(np.isfinite(grad))):
                return FAIL_VALUE, np.zeros_like(theta)
            return -ll, -grad

        rank, size = (0, 1) if comm is None else (int(comm.Get_rank()), int(comm.Get_size()))

        def run_starts(keys: list[int]) -> np.ndarray:
            """(len(keys), size + 1): the optimum theta of each start and its objective value."""
            out = np.full((len(keys), lay.size + 1), np.nan)
            for j in range(rank, len(keys), size):
                k = keys[j]
                if k == 0 and theta_init is not None:
                    x0 = theta_init
                else:
                    x0 = lay.random(np.random.default_rng(np.random.SeedSequence([seed, k])), s2)
                res = minimize(objective, x0, jac=True, method="L-BFGS-B", bounds=bounds,
                               options={"maxiter": maxiter}, callback=_stall_callback())
                f = float(res.fun)
                ok = np.isfinite(f) and f < FAIL_VALUE
                out[j, :-1] = res.x
                out[j, -1] = -f if ok else -np.inf
                logger.debug("LCM start %d: objective %.6g (%s)", k, -f, res.message)
            if comm is not None and size > 1:
                gathered = np.empty((size,) + out.shape)
                comm.Allgather(out, gathered)
                out = np.array([gathered[j % size, j] for j in range(len(keys))])
            return out

        results = run_starts(list(range(restarts)))
        if not np.any(np.isfinite(results[:, -1])):
            raise _la.CholeskyError(
                "every LCM restart failed to factorise the covariance matrix: check for duplicated "
                "inputs with identical task and very different outputs, or rescale y")
        self.prior, self._s2 = prior_obj, s2
        self._adopt_best(lay, results, Xs, ys)
        flags = self.diagnose() if explore else []
        flags_after = flags
        if flags:
            more = run_starts(list(range(restarts, restarts + EXPLORE_RESTARTS)))
            results = np.vstack([results, more])
            winner = self._adopt_best(lay, results, Xs, ys)
            flags_after = self.diagnose()
            log = logger.warning if flags_after else logger.info
            log("LCM fit (%d tasks, %d points): %s; %d fresh starts %s%s", T, len(y), "; ".join(flags),
                EXPLORE_RESTARTS, f"found a better fit (start {winner})" if winner >= restarts
                else "kept the first fit", f", which still has: {'; '.join(flags_after)}" if flags_after else "")
        objective_values = results[:, -1].copy()
        self.fit_report = FitReport(n_starts=len(results), explored=bool(flags), flags=tuple(flags),
                                    flags_after=tuple(flags_after), objective=objective_values,
                                    map=prior_obj is not None)
        return self

    def _adopt_best(self, lay: "_Layout", results: np.ndarray, Xs, ys) -> int:
        """Take the best start's hyperparameters (ties: lowest index), condition; returns its index."""
        values = results[:, -1]
        best = int(np.argmax(np.where(np.isfinite(values), values, -np.inf)))
        ls, W, kappa, noise = lay.unpack(results[best, :-1])
        self._params = {"lengthscale": ls, "W": W.copy(), "kappa": kappa, "noise": noise}
        self._condition_sorted(Xs, ys)
        return best

    def diagnose(self) -> list[str]:
        """Signs of a degenerate fit, as readable strings (empty when the fit looks healthy).

        Checked: a length scale within BOUND_TOL_LOG (in log) of LENGTHSCALE_BOUNDS, a kappa on its
        upper bound, a task's noise on its floor (NOISE_BOUNDS_REL), and posterior means at
        PROBE_POINTS Halton points of the unit cube more than WILD_RANGES observed ranges outside
        the task's observed outputs. Bounds are relative to the output scale of the last fit.
        """
        self._require_data()
        p = self._params
        s2 = self._s2 if self._s2 is not None else _output_scale(self._y)
        out = []
        log_ls = np.log(p["lengthscale"])
        for side, bound, hit in (("lower", LENGTHSCALE_BOUNDS[0], log_ls - np.log(LENGTHSCALE_BOUNDS[0])),
                                 ("upper", LENGTHSCALE_BOUNDS[1], np.log(LENGTHSCALE_BOUNDS[1]) - log_ls)):
            n = int(np.sum(hit < BOUND_TOL_LOG))
            if n:
                out.append(f"{n} length scale(s) on the {side} bound {bound:g}")
        n = int(np.sum(np.log(KAPPA_BOUNDS_REL[1] * s2) - np.log(p["kappa"]) < BOUND_TOL_LOG))
        if n:
            out.append(f"{n} kappa(s) on the upper bound")
        floor = np.log(p["noise"]) - np.log(NOISE_BOUNDS_REL[0] * s2) < BOUND_TOL_LOG
        if np.any(floor):
            out.append(f"noise of task(s) {np.flatnonzero(floor).tolist()} on the floor")
        wild = self._wild_tasks()
        if wild:
            out.append(f"predictions of task(s) {wild} more than {WILD_RANGES:g} observed ranges "
                       "outside the observed values")
        return out

    def _wild_tasks(self) -> list[int]:
        """Tasks whose posterior mean at the probe points leaves their observed range widened by
        WILD_RANGES ranges on each side (means only: K(X, P)^T alpha, no solve)."""
        d = self._X.shape[1]
        P = qmc.Halton(d=d, scramble=True, seed=0).random(PROBE_POINTS)
        B = self.coregionalization()  # (Q, T, T)
        mean = np.zeros((self.n_tasks, PROBE_POINTS))
        for q in range(self._Q):
            Kq = _kernel(self._kernel, self._X, P, self._params["lengthscale"][q])  # (N, P)
            mean += (B[q][self._t, :] * self._alpha[:, None]).T @ Kq
        wild = []
        for i in range(self.n_tasks):
            yi = self._y[self._t == i]
            if yi.size == 0:
                continue
            lo, hi = float(yi.min()), float(yi.max())
            span = max(hi - lo, 1e-12 * max(1.0, abs(hi)))
            if np.any(mean[i] < lo - WILD_RANGES * span) or np.any(mean[i] > hi + WILD_RANGES * span):
                wild.append(i)
        return wild

    # ---- likelihood and prediction -----------------------------------------------------------
    def log_prior(self) -> float:
        """Log prior density of the current hyperparameters (0.0 when fitted without a prior)."""
        self._require_params()
        if self.prior is None:
            return 0.0
        s2 = self._s2 if self._s2 is not None else _output_scale(self._y)
        return float(self.prior.log_density(self._params, s2)[0])

    def log_posterior(self) -> float:
        """log_likelihood() + log_prior(): what a MAP fit maximises (up to a constant)."""
        return self.log_likelihood() + self.log_prior()

    def log_likelihood(self) -> float:
        """Exact log marginal likelihood log p(y | X, hyperparameters) of the outputs as given
        to fit/condition/extend/append (no transformation), including any jitter used."""
        self._require_data()
        return float(self._ll)

    def _cross(self, i: int, X: np.ndarray) -> np.ndarray:
        """K(data, (task i, X)): (N, n)."""
        p = self._params
        B = self.coregionalization()
        Kx = np.zeros((self._X.shape[0], X.shape[0]))
        for q in range(self._Q):
            Kx += B[q][self._t, i][:, None] * _kernel(self._kernel, self._X, X, p["lengthscale"][q])
        return Kx

    def _check_task(self, i: Any) -> int:
        if isinstance(i, bool) or not isinstance(i, (int, np.integer)):
            raise ValueError(f"task index must be an integer, got {i!r}")
        if not 0 <= i < self.n_tasks:
            raise ValueError(f"task index must be in [0, {self.n_tasks - 1}], got {i}")
        return int(i)

    def _posterior_parts(self, i: int, X: np.ndarray):
        """Checked (i, X), the posterior mean (n,) and v = L^-1 K(data, X) (N, n) for task i."""
        self._require_data()
        i = self._check_task(i)
        X = _as_X(X, "X", self.input_dim)
        Kx = self._cross(i, X)
        return i, X, Kx.T @ self._alpha, _la.solve_lower(self._L, Kx)

    def predict(self, i: int, X: np.ndarray, include_noise: bool = False):
        """Posterior mean (n,) and variance (n,) of task i's latent output at X (n, d) in [0, 1].

        With include_noise the task's noise variance is added (prediction of a new observation).
        Variances are floored at VAR_FLOOR_REL times the prior variance.
        """
        i, X, mean, v = self._posterior_parts(i, X)
        prior = float(np.sum(self.coregionalization()[:, i, i]))
        var = prior - np.einsum("nm,nm->m", v, v)
        var = np.maximum(var, VAR_FLOOR_REL * prior)
        if include_noise:
            var = var + self._params["noise"][i]
        return mean, var

    def predict_cov(self, i: int, X: np.ndarray, include_noise: bool = False):
        """Posterior mean (n,) and full covariance (n, n) of task i's latent output at X."""
        i, X, mean, v = self._posterior_parts(i, X)
        B = self.coregionalization()
        prior = sum(B[q, i, i] * _kernel(self._kernel, X, X, self._params["lengthscale"][q])
                    for q in range(self._Q))
        cov = prior - v.T @ v
        if include_noise:
            cov[np.diag_indices(X.shape[0])] += self._params["noise"][i]
        return mean, cov

    # ---- block updates (TLA2) ----------------------------------------------------------------
    def _with_block(self, X_add, t_add, y_add, L21, L22, jitter, z2, ll2, params) -> "LCM":
        """A new model whose factor is [[L, 0], [L21, L22]] (the old L reused as is)."""
        N, m = self._X.shape[0], X_add.shape[0]
        new = LCM(self._Q, self._kernel, self._rank)
        new._params = params
        new._X = np.vstack([self._X, X_add])
        new._t = np.concatenate([self._t, np.full(m, t_add, dtype=int)])
        new._y = np.concatenate([self._y, y_add])
        L = np.zeros((N + m, N + m))
        L[:N, :N] = self._L
        L[N:, :N] = L21
        L[N:, N:] = L22
        new._L = L
        new._z = np.concatenate([self._z, z2])
        new._alpha = _la.solve_upper_t(L, new._z)
        new._ll = self._ll + ll2
        new.jitter = max(self.jitter, jitter)
        new.n_factorizations = self.n_factorizations
        new.n_block_updates = self.n_block_updates + 1
        new.prior, new._s2 = self.prior, self._s2
        return new

    def append(self, i: int, X_add: np.ndarray, y_add: np.ndarray) -> "LCM":
        """A new model with extra points (X_add (m, d), y_add (m,)) on existing task i.

        Hyperparameters stay fixed; the old Cholesky factor is reused and only the m new rows
        are computed (cost O(N^2 m)). The original model is not modified.
        """
        self._require_data()
        i = self._check_task(i)
        X_add = _as_X(X_add, "X_add", self.input_dim)
        y_add = _as_y(y_add, "y_add", X_add.shape[0])
        p = self._params
        B = self.coregionalization()
        K12 = self._cross(i, X_add)
        K22 = sum(B[q, i, i] * _kernel(self._kernel, X_add, X_add, p["lengthscale"][q])
                  for q in range(self._Q))
        K22[np.diag_indices(X_add.shape[0])] += p["noise"][i]
        L21, L22, jitter = _la.chol_extend(self._L, K12, K22, what="appended block")
        z2 = _la.solve_lower(L22, y_add - L21 @ self._z)
        ll2 = (-0.5 * float(z2 @ z2) - float(np.sum(np.log(np.diagonal(L22))))
               - 0.5 * X_add.shape[0] * _LOG2PI)
        return self._with_block(X_add, i, y_add, L21, L22, jitter, z2, ll2, self.get_params())

    def extend(
        self,
        X_new: np.ndarray,
        y_new: np.ndarray,
        restarts: int = 4,
        seed: int = 0,
        maxiter: int | None = None,
        threads: int | None = DEFAULT_BLAS_THREADS,
    ) -> "LCM":
        """A new model with one more task (X_new (m, d) in [0, 1], y_new (m,)).

        All old hyperparameters are kept; only the new task's W rows (Q, rank), kappa (Q) and
        noise are learned, by maximising log p(y_new | old data) (plus the log prior of those
        hyperparameters when the model was fitted under a prior) with multi-start L-BFGS-B
        (start k seeded by SeedSequence([seed, k])). The old Cholesky factor is reused:
        L21 = (L^-1 K12)^T, L22 = chol(K22 - L21 L21^T); nothing of size N is refactorised.
        threads: BLAS threads, as in :meth:`fit`.
        """
        if threads is not None:
            threads = _check_int(threads, "threads", 1)
            with threadpool_limits(limits=threads, user_api="blas"):
                return self.extend(X_new, y_new, restarts=restarts, seed=seed, maxiter=maxiter,
                                   threads=None)
        self._require_data()
        X_new = _as_X(X_new, "X_new", self.input_dim)
        y_new = _as_y(y_new, "y_new", X_new.shape[0])
        restarts = _check_int(restarts, "restarts", 1)
        seed = _check_int(seed, "seed", 0)
        maxiter = DEFAULT_MAXITER if maxiter is None else _check_int(maxiter, "maxiter", 1)
        Q, r, T = self._Q, self._rank, self.n_tasks
        N, m = self._X.shape[0], X_new.shape[0]
        p = self._params
        ls = p["lengthscale"]
        # P[(q, s)] = L^-1 (W_q[t, s] o k_q(X, X_new)): (Q*r, N, m), one solve with Q*r*m columns
        rhs = np.empty((N, Q * r, m))
        C = np.empty((Q, m, m))
        for q in range(Q):
            Kc = _kernel(self._kernel, self._X, X_new, ls[q])
            for s in range(r):
                rhs[:, q * r + s, :] = p["W"][q, self._t, s][:, None] * Kc
            C[q] = _kernel(self._kernel, X_new, X_new, ls[q])
        P = _la.solve_lower(self._L, rhs.reshape(N, Q * r * m)).reshape(N, Q * r, m)
        P = np.ascontiguousarray(P.transpose(1, 0, 2))
        z1 = self._z
        Pz = np.einsum("n,knm->km", z1, P)  # (Q*r, m): P_k^T z1
        eye = np.eye(m)

        def block(theta):
            w = theta[: Q * r]
            kap = np.exp(theta[Q * r : Q * r + Q])
            sig = float(np.exp(theta[-1]))
            V = np.tensordot(w, P, axes=1)  # (N, m) = L21^T
            S = np.tensordot((w.reshape(Q, r) ** 2).sum(axis=1) + kap, C, axes=1) + sig * eye
            S -= V.T @ V
            L22, jit = _la.robust_cholesky(S, what="new task block")
            resid = y_new - w @ Pz
            z2 = _la.solve_lower(L22, resid)
            ll2 = (-0.5 * float(z2 @ z2) - float(np.sum(np.log(np.diagonal(L22))))
                   - 0.5 * m * _LOG2PI)
            return ll2, V, S, L22, jit, z2, kap, sig

        def objective(theta):
            try:
                ll2, V, S, L22, _, z2, kap, sig = block(theta)
            except np.linalg.LinAlgError:
                return FAIL_VALUE, np.zeros_like(theta)
            beta = _la.solve_upper_t(L22, z2)
            Ab = _la.outer_minus_inverse(beta, L22)
            c = np.tensordot(C, Ab, axes=([1, 2], [0, 1]))  # (Q,) sum(Ab o C_q)
            U = V @ Ab
            w = theta[: Q * r]
            gw = (w.reshape(Q, r) * c[:, None]).ravel() - np.tensordot(P, U, axes=([1, 2], [0, 1]))
            gw += Pz @ beta
            grad = np.concatenate([gw, 0.5 * c * kap, [0.5 * np.trace(Ab) * sig]])
            if self.prior is not None:
                lp, gp = self.prior.task_log_density(w.reshape(Q, 1, r), kap[:, None], np.array([sig]), s2)
                ll2 += lp
                grad += np.concatenate([gp["W"].ravel(), gp["kappa"][:, 0] * kap, gp["noise"] * sig])
            if not (np.isfinite(ll2) and np.all(np.isfinite(grad))):
                return FAIL_VALUE, np.zeros_like(theta)
            return -ll2, -grad

        s2 = self._s2 if self._s2 is not None else _output_scale(np.concatenate([self._y, y_new]))
        bounds = ([(None, None)] * (Q * r)
                  + [(np.log(KAPPA_BOUNDS_REL[0] * s2), np.log(KAPPA_BOUNDS_REL[1] * s2))] * Q
                  + [(np.log(NOISE_BOUNDS_REL[0] * s2), np.log(NOISE_BOUNDS_REL[1] * s2))])
        best_theta, best_ll = None, -np.inf
        for k in range(restarts):
            rng = np.random.default_rng(np.random.SeedSequence([seed, k]))
            x0 = np.concatenate([
                rng.standard_normal(Q * r) * np.sqrt(s2 / (Q * r)),
                np.log(s2 / Q * np.exp(rng.uniform(np.log(1e-2), np.log(0.3), size=Q))),
                [np.log(s2 * np.exp(rng.uniform(np.log(1e-3), np.log(1e-1))))],
            ])
            res = minimize(objective, x0, jac=True, method="L-BFGS-B", bounds=bounds,
                           options={"maxiter": maxiter})
            f = float(res.fun)
            if np.isfinite(f) and f < FAIL_VALUE and -f > best_ll:
                best_theta, best_ll = res.x, -f
        if best_theta is None:
            raise _la.CholeskyError("every extend() restart failed to factorise the new task block")
        ll2, V, S, L22, jit, z2, kap, sig = block(best_theta)
        params = self.get_params()
        w_new = best_theta[: Q * r].reshape(Q, 1, r)
        params["W"] = np.concatenate([params["W"], w_new], axis=1)
        params["kappa"] = np.concatenate([params["kappa"], kap[:, None]], axis=1)
        params["noise"] = np.concatenate([params["noise"], [sig]])
        return self._with_block(X_new, T, y_new, V.T, L22, jit, z2, ll2, params)

    # ---- persistence -------------------------------------------------------------------------
    def save(self, path: str | os.PathLike) -> None:
        """Write the model (hyperparameters, data and factor) to an ``.npz`` file, no pickle."""
        self._require_data()
        meta = {"format": _FORMAT, "n_latent": self._Q, "kernel": self._kernel, "rank": self._rank,
                "jitter": self.jitter, "log_likelihood": self._ll,
                "n_factorizations": self.n_factorizations, "n_block_updates": self.n_block_updates,
                "prior": None if self.prior is None else self.prior.to_json(), "s2": self._s2}
        with open(path, "wb") as fh:
            np.savez(fh, meta=np.array(json.dumps(meta)), X=self._X, t=self._t, y=self._y,
                     L=self._L, z=self._z, alpha=self._alpha, **self._params)

    @classmethod
    def load(cls, path: str | os.PathLike) -> "LCM":
        """Read a model written by :meth:`save`; predictions are bitwise identical."""
        with np.load(path, allow_pickle=False) as f:
            meta = json.loads(str(f["meta"]))
            if meta.get("format") != _FORMAT:
                raise ValueError(f"{path}: not a gptask LCM file (format {meta.get('format')!r})")
            m = cls(meta["n_latent"], meta["kernel"], meta["rank"])
            m._params = _check_params({k: f[k] for k in ("lengthscale", "W", "kappa", "noise")},
                                      m._Q, None, None, m._rank)
            m._X, m._t, m._y = f["X"].copy(), f["t"].astype(int), f["y"].copy()
            m._L = np.asfortranarray(f["L"])  # the order fit leaves it in: identical BLAS results
            m._z, m._alpha = f["z"].copy(), f["alpha"].copy()
        m._ll = float(meta["log_likelihood"])
        m.jitter = float(meta["jitter"])
        m.n_factorizations = int(meta["n_factorizations"])
        m.n_block_updates = int(meta["n_block_updates"])
        m.prior = None if meta.get("prior") is None else LCMPrior.from_json(meta["prior"])
        m._s2 = None if meta.get("s2") is None else float(meta["s2"])
        return m

    def __repr__(self) -> str:
        state = "unfitted" if self._params is None else f"n_tasks={self.n_tasks}"
        return f"LCM(n_latent={self._Q}, kernel={self._kernel!r}, rank={self._rank}, {state})"
