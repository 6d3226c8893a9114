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

Fidelity levels (``LCM(levels=TaskLevels(group, level))``): task i is base task ``group[i]`` at the
fidelity coordinate ``level[i]`` (e.g. 1 - s). The coregionalisation is over the G base tasks and the
coordinate is one more kernel input, fixed per task, with a length scale of its own::

    cov(y_i(x), y_j(x')) = sum_q C_q[g_i, g_j] k_q((x, l_i), (x', l_j)) + [i == j, x is x'] noise[i]

W (Q, G, rank) and kappa (Q, G) are then per base task, noise (T,) and everything a caller sees
(task indices, inputs of d columns, predictions) per task; ``lengthscale`` is (Q, d + 1), the last
column the coordinate's. A task x fidelity product (bench/results/fidelity_kernel.md, section 5).

Fitting maximises, by default, the log posterior: the exact log marginal likelihood of the outputs
*as given* (no transformation; standardise or log-transform before calling ``fit`` if wanted) plus
the weakly informative log prior of :mod:`.priors` (maximum a posteriori; ``prior=None`` gives plain
maximum likelihood). Multi-start L-BFGS-B over log(lengthscale), W, log(kappa), log(noise), with
analytic gradients obtained from ``A = alpha alpha^T - K^-1`` contracted with each dK/dtheta without
forming an N x N matrix per hyperparameter. Every fit is checked afterwards (:meth:`LCM.diagnose`:
hyperparameters on a bound, noise on its floor, predictions far outside the observed values); a
fit that fails the check is retried from fresh random starts and the outcome is logged
(``LCM.fit_report``). All constants live in :mod:`.defaults`.

The numerics are written once against a small array backend (:mod:`.backend`): numpy on the CPU
by default, or torch float64 tensors on any device (``LCM(..., backend="torch", device="cuda")``).
On the CPU the likelihood forms only the upper triangle of its symmetric N x N matrices, in row
blocks (:class:`_RowBlock`), and factorises through LAPACK calls that release the GIL
(:mod:`.lapack_nogil`), so a fit's starts on worker threads run side by side.

Over 500 lines on purpose: the likelihood, its analytic gradient, the fit, the prediction and the
Cholesky extension of one model share its parameter layout, and are tested together against GPy and
finite differences.
"""

from __future__ import annotations

import json
import logging
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np
from scipy.optimize import minimize

from scipy.stats import qmc

from . import linalg as _la
from .arrays import as_inputs, as_outputs
from .defaults import (BOUND_TOL_LOG, DEFAULT_BLAS_THREADS, DEFAULT_MAXITER, EXPLORE_RESTARTS, FAIL_VALUE,
                       KAPPA_BOUNDS_REL, LENGTHSCALE_BOUNDS, NOISE_BOUNDS_REL, PROBE_POINTS, STALL_NATS,
                       STALL_WINDOW, VAR_FLOOR_REL, WILD_RANGES, KERNEL_CACHE_BYTES, BLAS_THREADS_MIN_N,
                       LML_BLOCK_MIN_ROWS, CALIBRATE_VARIANCE, VARIANCE_SCALE_MAX, VARIANCE_SCALE_POWER, COLLAPSE_GAP_FRACTION,
                       CALIBRATION_FOLDS,
                       CALIBRATION_STANDARD_TOL, CALIBRATION_FRESH_BELOW, CALIBRATION_FRESH_STARTS, CALIBRATION_REFIT_MAX_POINTS, CALIBRATION_UNEQUAL_TASKS,
                       LAPLACE_STEP, LAPLACE_MAX_SD, LENGTHSCALE_GAP_FLOOR, COLLAPSE_KEEP_NATS,
                       COLLAPSE_REFIT_EVERY_START, COLLAPSE_LOO_NATS)
from .backend import get_backend
from .calibration import HeldOut, TaskCalibration, VarianceShape
from .kernels import check_kernel, from_sqdist, gram, kernel as _kernel, scaled_sqdist
from .priors import LCMPrior, resolve_prior

logger = logging.getLogger(__name__)

_LOG2PI = float(np.log(2.0 * np.pi))

_FORMAT = "gptask.models.LCM/1"


# --------------------------------------------------------------------------------------------
# input checking
# --------------------------------------------------------------------------------------------


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
        Xi = as_inputs(X, f"X_list[{i}]", d)
        d = Xi.shape[1]
        Xs.append(Xi)
        ys.append(as_outputs(y, f"y_list[{i}]", Xi.shape[0]))
    return Xs, ys


def input_gaps(X_list: Sequence[np.ndarray]) -> np.ndarray:
    """(d,) the typical gap between the distinct values of each input within a task: range / (distinct
    values - 1), median over the tasks (X_list[i]: (n_i, d)) with at least three distinct values; 0 for
    an input no task has three distinct values of (not checked for collapse, not floored)."""
    d = X_list[0].shape[1]
    gaps = np.zeros(d)
    for j in range(d):
        per = []
        for X in X_list:
            v = np.unique(X[:, j])
            if v.size >= 3:
                per.append((v[-1] - v[0]) / (v.size - 1))
        if per:
            gaps[j] = float(np.median(per))
    return gaps


@dataclass(frozen=True)
class TaskLevels:
    """Tasks as fidelity levels of fewer base tasks (module docstring): ``group`` (T,) the base task of
    each task, 0 .. G - 1, every one used; ``level`` (T,) its fidelity coordinate (a finite number, the
    same scale for every task: 0 at the target, e.g. 1 - s)."""

    group: tuple[int, ...]
    level: tuple[float, ...]

    def __post_init__(self) -> None:
        g, u = tuple(int(v) for v in self.group), tuple(float(v) for v in self.level)
        if len(g) == 0 or len(g) != len(u):
            raise ValueError(f"TaskLevels needs one group and one level per task, got {len(g)} and {len(u)}")
        if sorted(set(g)) != list(range(max(g) + 1)):
            raise ValueError(f"TaskLevels.group must use every base task 0 .. G - 1, got {sorted(set(g))}")
        if not all(np.isfinite(u)):
            raise ValueError("TaskLevels.level must be finite numbers")
        object.__setattr__(self, "group", g)
        object.__setattr__(self, "level", u)

    @property
    def n_groups(self) -> int:
        return max(self.group) + 1

    @property
    def targets(self) -> tuple[int, ...]:
        """The tasks at the target fidelity (level coordinate 0): the ones users read."""
        return tuple(i for i, u in enumerate(self.level) if u == 0.0)

    def to_json(self) -> dict:
        return {"group": list(self.group), "level": list(self.level)}


def _expand(B: np.ndarray, levels: "TaskLevels | None") -> np.ndarray:
    """B (Q, G, G) over base tasks -> (Q, T, T) over tasks (unchanged without levels)."""
    if levels is None:
        return B
    g = np.asarray(levels.group)
    return B[:, g][:, :, g]


def _gather(S: np.ndarray, levels: "TaskLevels | None") -> np.ndarray:
    """The transpose of :func:`_expand` on a (T, T) gradient: summed into (G, G)."""
    if levels is None:
        return S
    P = np.zeros((len(levels.group), levels.n_groups))
    P[np.arange(len(levels.group)), levels.group] = 1.0
    return P.T @ S @ P


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
    """theta = [log lengthscale (Q*d), W (Q*G*r), log kappa (Q*G), log noise (T)]; G, the coregionalised
    groups: T but with :class:`TaskLevels` (:func:`_groups`)."""

    Q: int
    d: int
    T: int
    r: int
    G: int

    @property
    def sizes(self) -> tuple[int, int, int, int]:
        return (self.Q * self.d, self.Q * self.G * self.r, self.Q * self.G, self.T)

    @property
    def size(self) -> int:
        return sum(self.sizes)

    def unpack(self, theta: np.ndarray):
        a, b, c, _ = self.sizes
        ls = np.exp(theta[:a]).reshape(self.Q, self.d)
        W = theta[a : a + b].reshape(self.Q, self.G, self.r)
        kappa = np.exp(theta[a + b : a + b + c]).reshape(self.Q, self.G)
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
        W = rng.standard_normal((self.Q, self.G, self.r)) * np.sqrt(s2 / (self.Q * self.r))
        kappa = s2 / self.Q * np.exp(rng.uniform(np.log(1e-2), np.log(0.3), size=(self.Q, self.G)))
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


def _cache_kernels(kern: str, Q: int, N: int) -> bool:
    """Whether the gradient pass may keep the Q kernel matrices of the forward pass (they take at
    most KERNEL_CACHE_BYTES) instead of recomputing each K_q."""
    per = 8 * N * N * (1 if kern == "rbf" else 2)
    return Q * per <= KERNEL_CACHE_BYTES


def _block_kernel(kern, data, blk, ls_q, want_factor, bk):
    """k_q on one row block, rows [i0, i1) x columns [i0, N): K (and the derivative factor F), with
    the exact zero distance on the diagonal that the symmetric gram() gives (gram() itself for a
    block of every row)."""
    if blk.i0 == 0 and blk.i1 == data.X.shape[0]:
        return gram(kern, data.Xd, ls_q, want_factor, bk)
    r2 = scaled_sqdist(data.Xd[blk.i0:blk.i1], data.Xd[blk.i0:], ls_q, bk)
    bk.fill_diagonal_(r2[:, :blk.i1 - blk.i0], 0.0)
    return from_sqdist(kern, r2, want_factor, bk)


def _lml_core(bk, data, ls, W, kappa, noise, kern, want_grad, levels=None):
    """Exact LML (and gradient) for data sorted by task, on the array backend ``bk``.

    data: a :class:`_Sorted` on ``bk``. Hyperparameters ls (Q, d), W (Q, T, r), kappa (Q, T),
    noise (T,) are numpy arrays; with ``levels`` (:class:`TaskLevels`) W and kappa are per base task,
    (Q, G, r) and (Q, G), and data.X holds each task's level as its last column.
    Returns (ll, grads, L, z, alpha, jitter): grads is None or a tuple of numpy arrays
    (d/d lengthscale (Q, d), d/dW (Q, T, r), d/dkappa (Q, T), d/dnoise (T,)); L, z, alpha are
    backend arrays, L is None with want_grad (its memory then holds K^-1).

    Symmetry: K and A = alpha alpha^T - K^-1 are symmetric, so only their upper triangle is
    formed, in the row blocks of :class:`_RowBlock` ([i0, i1) x [i0, N), about 56 % of the entries
    with 8 blocks). The factorisation reads the upper triangle of K (the lower one of its
    transpose); every gradient is a sum over all (n, m) of a symmetric matrix, i.e. twice the sum
    over the strict upper triangle plus the diagonal: the blocks weight the entries below the
    diagonal of their diagonal square 0 and the diagonal 1/2, and the sums are symmetrised
    (S + S^T, rows and columns of the length-scale contraction). With one block (small N, or the
    torch backend, where launches rather than flops dominate) the whole matrices are formed and
    nothing is halved.

    Memory: the expanded B_q[t_n, t_m] is built one block at a time; the gradient pass recomputes
    each block of K_q (or reuses the forward pass's when all Q fit in KERNEL_CACHE_BYTES), so with
    several blocks the peak is about 2.25 N x N arrays (K, then its factor and inverse, and a few
    blocks) plus the cache, whatever Q; with one, 3 (rbf) or 4 (Matern-5/2).
    """
    y, t = data.yd, data.td
    N, d = data.X.shape
    Q, T = W.shape[0], noise.shape[0]
    B = bk.asarray(_expand(_coreg(W, kappa), levels))  # (Q, T, T)
    lsd = bk.asarray(ls)
    cache = want_grad and _cache_kernels(kern, Q, N)
    full = len(data.blocks) == 1
    kept = []
    K = bk.zeros((N, N))  # its upper triangle (row <= column; all of it with one block) receives the covariance
    for blk in data.blocks:
        rows = K[blk.i0:blk.i1, blk.i0:]
        for q in range(Q):
            Kq, Fq = _block_kernel(kern, data, blk, lsd[q], True, bk) if cache else \
                (_block_kernel(kern, data, blk, lsd[q], False, bk), None)
            C = bk.expand(B[q][blk.a:blk.b, blk.a:], blk.seg_rows, blk.seg_cols)
            C *= Kq
            rows += C
            del C
            if cache:
                kept.append((Kq, Fq))
            del Kq, Fq
        del rows
    bk.add_diagonal_(K, bk.asarray(noise)[t])
    L, jitter = bk.cholesky(K if full else K.T, "LCM covariance matrix")  # K^T's lower triangle: K's upper
    del K
    z = bk.solve_lower(L, y)
    alpha = bk.solve_upper_t(L, z)
    ll = -0.5 * bk.item(z @ z) - bk.sum_log_diag(L) - 0.5 * N * _LOG2PI
    if not want_grad:
        return ll, None, L, z, alpha, jitter

    if full:
        A_full = bk.outer_minus_inverse(alpha, L, overwrite=True)  # alpha alpha^T - K^-1
        g_noise = 0.5 * bk.to_numpy(bk.segment_sum(bk.diagonal(A_full), data.seg))
    else:
        inv_upper = bk.inverse_lower(L, overwrite=True).T  # K^-1, valid on and above the diagonal
        g_noise = 0.5 * bk.to_numpy(bk.segment_sum(alpha * alpha - bk.diagonal(inv_upper), data.seg))
    del L
    X1 = bk.concat([data.Xd, bk.ones((N, 1))], axis=1)  # (N, d+1): the last column gives row sums
    X2 = data.Xd * data.Xd
    S = np.zeros((Q, T, T))  # block sums of the (halved) A o K_q: (S + S^T) the full ones
    sq = np.zeros((Q, d))  # sum_nm (A o F_q o Bexp)_nm (x_nd - x_md)^2 over the formed (halved) part
    for k, blk in enumerate(data.blocks):
        i0, i1, w = blk.i0, blk.i1, blk.i1 - blk.i0
        if full:
            A = A_full
        else:
            A = alpha[i0:i1, None] * alpha[None, i0:]
            A -= inv_upper[i0:i1, i0:]
            bk.keep_upper_half_(A[:, :w])  # below the diagonal 0, on it 1/2
        for q in range(Q):
            if cache:
                Kq, Fq = kept[k * Q + q]
                kept[k * Q + q] = None
            else:
                Kq, Fq = _block_kernel(kern, data, blk, lsd[q], True, bk)
            rbf = Fq is Kq
            Kq *= A  # M = A o K_q on the block
            S[q, blk.a:blk.b, blk.a:] += bk.to_numpy(
                bk.segment_sum(bk.segment_sum(Kq, blk.seg_rows, 0), blk.seg_cols, 1))
            # length scales: dK/dl_d = Bexp o F_q o (x_d - x'_d)^2 / l_d^3; with G = A o F_q o Bexp,
            # sum(G o D_d^2) = sum_n (G 1)_n x_nd^2 + sum_m (1^T G)_m x_md^2 - 2 sum_n x_nd (G X)_nd
            if rbf:
                G = Kq  # A o F_q = A o K_q for rbf
            else:
                Kq = None
                G = Fq
                G *= A
            Kq = Fq = None
            G *= bk.expand(B[q][blk.a:blk.b, blk.a:], blk.seg_rows, blk.seg_cols)
            GX = G @ X1[i0:]  # (w, d+1)
            GtX = G.T @ X1[i0:i1]  # (N - i0, d+1)
            del G
            part = GX[:, d] @ X2[i0:i1] + GtX[:, d] @ X2[i0:] - 2.0 * bk.einsum("nd,nd->d", data.Xd[i0:i1], GX[:, :d])
            sq[q] += bk.to_numpy(part)
        del A
    g_ls = np.empty_like(ls)
    g_W = np.empty_like(W)
    g_kappa = np.empty_like(kappa)
    for q in range(Q):
        # dLL/dB_q = S_full / 2 entrywise, B = W W^T + diag(kappa), S_full symmetric
        S_full = _gather(S[q] if full else S[q] + S[q].T, levels)
        g_W[q] = S_full @ W[q]
        g_kappa[q] = 0.5 * np.diagonal(S_full)
        g_ls[q] = (0.5 if full else 1.0) * sq[q] / ls[q] ** 3  # 0.5 x the full sum (twice a halved one)
    return ll, (g_ls, g_W, g_kappa, g_noise), None, z, alpha, jitter


def _neg_log_posterior(bk, data, lay: "_Layout", kern: str, prior_obj, s2: float, theta: np.ndarray,
                       levels: "TaskLevels | None" = None):
    """(-log posterior, its gradient (P,)) at theta (P,) of layout ``lay`` (minus the log-likelihood
    without a prior); (FAIL_VALUE, zeros) where the covariance does not factorise or a value is not finite."""
    ls, W, kappa, noise = lay.unpack(theta)
    try:
        ll, g, *_ = _lml_core(bk, data, ls, W, kappa, noise, kern, True, levels)
    except np.linalg.LinAlgError:
        return FAIL_VALUE, np.zeros_like(theta)
    g_ls, g_W, g_k, g_n = g
    if prior_obj is not None:
        lp, gp = prior_obj.log_density(
            {"lengthscale": ls, "W": W, "kappa": kappa, "noise": noise}, s2, levels=levels is not None)
        ll += lp
        g_ls, g_W = g_ls + gp["lengthscale"], g_W + gp["W"]
        g_k, g_n = g_k + gp["kappa"], g_n + gp["noise"]
    grad = np.concatenate([(g_ls * ls).ravel(), g_W.ravel(), (g_k * kappa).ravel(), g_n * noise])
    if not (np.isfinite(ll) and np.all(np.isfinite(grad))):
        return FAIL_VALUE, np.zeros_like(theta)
    return -ll, -grad


def _thread_cap(threads: Any, n_points: int) -> int | None:
    """The thread count fit/extend impose for ``threads`` (see LCM.fit) on n_points data points:
    an int >= 1, or None to leave the threads as they are."""
    if threads is None:
        return None
    if isinstance(threads, str):
        if threads != "auto":
            raise ValueError(f"threads must be an integer >= 1, None or 'auto', got {threads!r}")
        return 1 if n_points < BLAS_THREADS_MIN_N else None
    return _check_int(threads, "threads", 1)


def _usable_cores() -> int:
    """CPU cores this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def _stall_callback():
    """L-BFGS-B callback stopping a start that has stalled (see STALL_WINDOW, STALL_NATS)."""
    history: list[float] = []

    def callback(intermediate_result) -> None:
        history.append(-float(intermediate_result.fun))
        if len(history) > STALL_WINDOW and history[-1] - history[-1 - STALL_WINDOW] < STALL_NATS:
            raise StopIteration

    return callback


@dataclass(frozen=True)
class _Sorted:
    """The data sorted by task: on the host (X (N, d), y (N,), t (N,) task of each row, counts (T,))
    and as arrays of the backend (Xd, yd, td, and seg, the backend's handle of the task segments);
    blocks: the row blocks (:class:`_RowBlock`) the likelihood forms the upper triangle in."""

    X: np.ndarray
    y: np.ndarray
    t: np.ndarray
    counts: np.ndarray
    Xd: Any
    yd: Any
    td: Any
    seg: Any
    blocks: tuple

    @classmethod
    def build(cls, bk, X: np.ndarray, y: np.ndarray, counts: np.ndarray) -> "_Sorted":
        t = np.repeat(np.arange(counts.shape[0]), counts)
        return cls(X, y, t, counts, bk.asarray(X), bk.asarray(y), bk.index(t), bk.segments(counts),
                   _RowBlock.split(bk, counts))


@dataclass(frozen=True)
class _RowBlock:
    """Rows [i0, i1) x columns [i0, N) of an N x N matrix over points sorted by task: the rows cover
    tasks [a, b), the columns tasks [a, T), each possibly in part. seg_rows / seg_cols: the
    backend's segment handles of the rows' and the columns' task pieces."""

    i0: int
    i1: int
    a: int
    b: int
    seg_rows: Any
    seg_cols: Any

    @staticmethod
    def split(bk, counts: np.ndarray) -> tuple["_RowBlock", ...]:
        """At most ``bk.row_blocks`` blocks (LML_ROW_BLOCKS on the CPU) of about equal rows, at
        least LML_BLOCK_MIN_ROWS each."""
        N = int(np.sum(counts))
        ends = np.cumsum(counts)
        starts = ends - counts
        n_blocks = max(1, min(bk.row_blocks, N // LML_BLOCK_MIN_ROWS))
        edges = np.linspace(0, N, n_blocks + 1).round().astype(int)
        out = []
        for i0, i1 in zip(edges[:-1], edges[1:]):
            a, b = int(np.searchsorted(ends, i0, side="right")), int(np.searchsorted(starts, i1, side="left"))
            rows = np.minimum(ends[a:b], i1) - np.maximum(starts[a:b], i0)
            cols = np.minimum(ends[a:], N) - np.maximum(starts[a:], i0)
            out.append(_RowBlock(int(i0), int(i1), a, b, bk.segments(rows), bk.segments(cols)))
        return tuple(out)


def _sorted_data(X_list, y_list, bk) -> _Sorted:
    counts = np.array([x.shape[0] for x in X_list], dtype=int)
    return _Sorted.build(bk, np.vstack(X_list), np.concatenate(y_list), counts)


def lml_and_grad(
    X_list: Sequence[np.ndarray],
    y_list: Sequence[np.ndarray],
    params: Mapping[str, np.ndarray],
    kernel: str = "rbf",
    backend: str | None = None,
    device: str | None = None,
    levels: "TaskLevels | None" = None,
) -> tuple[float, dict[str, np.ndarray]]:
    """Log marginal likelihood of the data at ``params`` and its gradient in natural parameters.

    X_list[i]: (n_i, d) in [0, 1]; y_list[i]: (n_i,). params as returned by ``LCM.get_params``.
    backend, device: where to compute, as for :class:`LCM`; levels: as for :class:`LCM` (X_list then
    without the level column). Returns (ll, grads) with grads keyed like params and of the same
    shapes (numpy arrays whatever the backend).
    """
    bk = _resolve_backend(backend, device)
    Xs, ys = _check_data(X_list, y_list)
    Xs = _with_levels(Xs, levels)
    p = _check_params(params, None, Xs[0].shape[1], len(Xs), None, _groups(levels, len(Xs)))
    ll, g, *_ = _lml_core(bk, _sorted_data(Xs, ys, bk), p["lengthscale"], p["W"], p["kappa"],
                          p["noise"], check_kernel(kernel), True, levels)
    return ll, dict(zip(("lengthscale", "W", "kappa", "noise"), g))


def _resolve_backend(backend: str | None, device: str | None):
    """The array backend for LCM(backend=, device=): torch when a non-CPU device is named."""
    if backend is None:
        backend = "numpy" if device in (None, "cpu") else "torch"
    return get_backend(backend, device)


def _groups(levels: "TaskLevels | None", T: int) -> int:
    """The number of coregionalised groups: T tasks, or the base tasks of ``levels`` (which must have T)."""
    if levels is None:
        return T
    if len(levels.group) != T:
        raise ValueError(f"the data have {T} tasks but the model's TaskLevels {len(levels.group)}")
    return levels.n_groups


def _config_means(X: np.ndarray, y: np.ndarray) -> dict[bytes, float]:
    """The mean of the values y (n,) of each distinct configuration (row of X (n, d)), keyed by the row's bytes."""
    out: dict[bytes, list[float]] = {}
    for row, v in zip(X, y):
        out.setdefault(row.tobytes(), []).append(float(v))
    return {c: float(np.mean(v)) for c, v in out.items()}


def _with_levels(Xs: Sequence[np.ndarray], levels: "TaskLevels | None") -> list[np.ndarray]:
    """Each task's inputs (n_i, d) with its level as a last column (n_i, d + 1); as given without levels."""
    if levels is None:
        return list(Xs)
    _groups(levels, len(Xs))
    return [np.hstack([X, np.full((X.shape[0], 1), u)]) for X, u in zip(Xs, levels.level)]


def _check_params(params, Q, d, T, r, G=None) -> dict[str, np.ndarray]:
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
    G = W.shape[1] if G is None else G
    T = noise.shape[0] if T is None else T
    r = W.shape[2] if r is None else r
    d = ls.shape[-1] if d is None else d
    for name, arr, shape in (("lengthscale", ls, (Q, d)), ("W", W, (Q, G, r)),
                             ("kappa", kappa, (Q, G)), ("noise", noise, (T,))):
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


#: how :meth:`LCM.diagnose` ends the flag of a noise on its floor (what a deterministic objective gives)
NOISE_FLOOR_FLAG = "on the floor"
#: whether a noise on its floor alone (and no other flag) runs EXPLORE_RESTARTS fresh starts; a bench
#: switch (bench/proposers/no_floor_restarts.py sets it False to measure what those starts buy)
EXPLORE_ON_NOISE_FLOOR = True


@dataclass(frozen=True)
class FitReport:
    """How a fit went. n_starts: L-BFGS-B starts run; objective: (n_starts,) value each start
    reached (log posterior under a prior, else log-likelihood; -inf where it failed); map: True
    when fitted under a prior; flags: what :meth:`LCM.diagnose` found on the first winner;
    explored: whether fresh starts were run because of them; flags_after: the final model's.
    collapsed: the length scales the data did not support (:meth:`LCM.collapsed_lengthscales`) on the
    winner; collapse_refit: whether it was refitted with every length scale bounded below by its input's gap
    (and that fit kept); collapsed_after: the final model's (none after a refit); variance_scale: the factor
    the predictive variances were widened by (1: none; see defaults.CALIBRATE_VARIANCE); lengthscale_floor:
    (d,) the lower bound of each input's length scales in the refit (empty: no refit); at_floor: the length
    scales of the refitted model that ended on that floor, as readable strings (the data alone would have
    made them shorter than the gaps between their values let them resolve); collapse_loo: when the leave-one-out
    check decided (defaults.COLLAPSE_LOO_NATS), the collapsed fit's and the floored fit's mean leave-one-out log
    predictive density per point (nats) and the standard error of their difference (empty: not checked)."""

    n_starts: int
    objective: np.ndarray
    map: bool
    flags: tuple[str, ...]
    explored: bool
    flags_after: tuple[str, ...]
    collapsed: tuple[str, ...] = ()
    collapse_refit: bool = False
    collapsed_after: tuple[str, ...] = ()
    variance_scale: float = 1.0
    lengthscale_floor: tuple[float, ...] = ()
    at_floor: tuple[str, ...] = ()
    collapse_loo: tuple[float, ...] = ()


class LCM:
    """Linear coregionalisation model with Q latent ARD kernels (see module docstring).

    Parameters
    ----------
    n_latent: number Q >= 1 of latent processes.
    kernel: "rbf" or "matern52" (unit variance; convention in :mod:`gptask.model.numerics.kernels`).
    rank: rank r >= 1 of each W_q.
    backend: "numpy" (the default: CPU, no torch import) or "torch" (float64 tensors; needs the
    optional extra ``pip install gptask[gpu]``). None picks torch when ``device`` names a non-CPU
    device, else numpy.
    device: the torch device ("cpu", "cuda", "cuda:1", ...); numpy runs on the CPU only.
    levels: a :class:`TaskLevels`: the tasks are fidelity levels of fewer base tasks (module
    docstring); None: every task its own.

    The likelihood, gradient, factor, predictions and block updates run on the backend (the
    Cholesky factor stays on the device); every public input and output is a numpy array, so the
    backends are interchangeable and agree to rounding. See :mod:`gptask.model.numerics.backend`.
    """

    def __init__(self, n_latent: int = 1, kernel: str = "rbf", rank: int = 1,
                 backend: str | None = None, device: str | None = None,
                 levels: TaskLevels | None = None) -> None:
        self._Q = _check_int(n_latent, "n_latent", 1)
        if levels is not None and not isinstance(levels, TaskLevels):
            raise ValueError(f"levels must be a TaskLevels or None, got {type(levels).__name__}")
        self._levels = levels
        self._kernel = check_kernel(kernel)
        self._rank = _check_int(rank, "rank", 1)
        self._bk = _resolve_backend(backend, device)
        self._params: dict[str, np.ndarray] | None = None
        self._X: np.ndarray | None = None  # (N, d), in factor order (N, d + 1) with levels: the task's level last
        self._t: np.ndarray | None = None  # (N,) task of each row
        self._y: np.ndarray | None = None  # (N,)
        self._Xd: Any = None  # _X as a backend array
        self._td: Any = None  # _t as a backend index array
        self._L: Any = None  # (N, N) backend array, lower, L L^T = K + jitter
        self._z: Any = None  # (N,) backend array, L^-1 y
        self._alpha: Any = None  # (N,) backend array, K^-1 y
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
        #: the last calibration computed (per task calibrations, the shapes pooled over every task), with the
        #: state it was computed on (see _calibrated)
        self._calibration: tuple[tuple, tuple[tuple[TaskCalibration, ...],
                                              tuple[VarianceShape, VarianceShape]]] | None = None
        #: what :meth:`fit_record` gave when the hyperparameters were fitted, as stored in a history (a
        #: model rebuilt from one: gptask.results.rebuild); None for a model fitted here or never stored
        self.recorded_fit: dict[str, Any] | None = None

    # ---- basic properties ------------------------------------------------------------------
    @property
    def n_latent(self) -> int:
        return self._Q

    @property
    def kernel(self) -> str:
        return self._kernel

    @property
    def backend(self) -> str:
        """The array backend: "numpy" or "torch"."""
        return self._bk.name

    @property
    def device(self) -> str:
        """The device the numerics run on ("cpu" for numpy; a torch device string for torch)."""
        return self._bk.device

    def _like(self) -> "LCM":
        """An empty model with this one's settings and backend."""
        new = LCM(self._Q, self._kernel, self._rank, backend=self.backend, device=self.device, levels=self._levels)
        new._bk = self._bk
        return new

    @property
    def levels(self) -> TaskLevels | None:
        """The tasks' fidelity levels (:class:`TaskLevels`), or None."""
        return self._levels

    @property
    def rank(self) -> int:
        return self._rank

    @property
    def n_tasks(self) -> int:
        self._require_params()
        return int(self._params["noise"].shape[0])

    @property
    def input_dim(self) -> int:
        """d, the columns of a caller's inputs (without the level column of :class:`TaskLevels`)."""
        self._require_params()
        return int(self._params["lengthscale"].shape[1]) - (self._levels is not None)

    @property
    def lengthscales(self) -> np.ndarray:
        """(Q, d) length scales (GPy convention, see kernels.py); (Q, d + 1) with levels, the level's last."""
        self._require_params()
        return self._params["lengthscale"].copy()

    @property
    def n_points(self) -> np.ndarray:
        """(T,) number of data points of each task."""
        self._require_data()
        return np.bincount(self._t, minlength=self.n_tasks)

    def coregionalization(self) -> np.ndarray:
        """B (Q, T, T) = W_q W_q^T + diag(kappa_q); with levels C_q[g_i, g_j] of the base tasks (the
        covariance at one configuration is then :meth:`task_covariance`)."""
        self._require_params()
        return _expand(_coreg(self._params["W"], self._params["kappa"]), self._levels)

    def _level_kernel(self) -> np.ndarray:
        """(Q, T, T) k_q between the tasks' levels at one configuration (ones without levels)."""
        T = self.n_tasks
        if self._levels is None:
            return np.ones((self._Q, T, T))
        u = np.asarray(self._levels.level)[:, None]
        ls = self._params["lengthscale"][:, -1:]
        return np.stack([_kernel(self._kernel, u, u, ls[q]) for q in range(self._Q)])

    def task_covariance(self) -> np.ndarray:
        """(T, T) the prior covariance of the tasks' latent outputs at one configuration:
        sum_q B_q[i, j] k_q(level_i, level_j) (sum_q B_q without levels)."""
        return np.sum(self.coregionalization() * self._level_kernel(), axis=0)

    def data(self) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """The conditioning data as (X_list, y_list), one entry per task (inputs (n_i, d))."""
        Xs, ys = self._stored_data()
        return ([X[:, :self.input_dim] for X in Xs] if self._levels is not None else Xs), ys

    def _stored_data(self) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """:meth:`data` as stored: with levels, each task's level as a last column."""
        self._require_data()
        T = self.n_tasks
        return ([self._X[self._t == i].copy() for i in range(T)],
                [self._y[self._t == i].copy() for i in range(T)])

    def _at_level(self, i: int, X: np.ndarray) -> np.ndarray:
        """A caller's inputs X (n, d) of task i as the kernel sees them: (n, d + 1) with levels."""
        if self._levels is None:
            return X
        return np.hstack([X, np.full((X.shape[0], 1), self._levels.level[i])])

    def _require_params(self) -> None:
        if self._params is None:
            raise RuntimeError("the LCM has no hyperparameters yet: call fit() or set_params()")

    def _require_data(self) -> None:
        if self._L is None:
            raise RuntimeError("the LCM has no data: call fit() or condition() first")

    # ---- parameters --------------------------------------------------------------------------
    def get_params(self) -> dict[str, np.ndarray]:
        """Copies of lengthscale (Q, d), W (Q, T, rank), kappa (Q, T), noise (T,); with levels
        lengthscale (Q, d + 1), W (Q, G, rank), kappa (Q, G)."""
        self._require_params()
        return {k: v.copy() for k, v in self._params.items()}

    def set_params(self, params: Mapping[str, np.ndarray]) -> "LCM":
        """Set all hyperparameters; if the model holds data, it is re-conditioned on it."""
        d = T = G = None
        if self._X is not None:
            d, T = self._X.shape[1], self.n_tasks
            G = _groups(self._levels, T)
        self._params = _check_params(params, self._Q, d, T, self._rank, G)
        if self._X is not None:
            self._condition_sorted(*self._stored_data())
        return self

    def condition(self, X_list, y_list, params: Mapping[str, np.ndarray] | None = None) -> "LCM":
        """Condition on data with fixed hyperparameters (``params`` or the current ones).

        X_list[i]: (n_i, d) in [0, 1], y_list[i]: (n_i,). Returns self. One full factorisation.
        """
        Xs, ys = _check_data(X_list, y_list)
        Xs = _with_levels(Xs, self._levels)
        p = params if params is not None else self._params
        if p is None:
            raise RuntimeError("condition() needs params: pass them or call set_params() first")
        self._params = _check_params(p, self._Q, Xs[0].shape[1], len(Xs), self._rank, _groups(self._levels, len(Xs)))
        self._condition_sorted(Xs, ys)
        return self

    def _condition_sorted(self, Xs, ys) -> None:
        data = _sorted_data(Xs, ys, self._bk)
        p = self._params
        ll, _, L, z, alpha, jitter = _lml_core(
            self._bk, data, p["lengthscale"], p["W"], p["kappa"], p["noise"], self._kernel, False, self._levels)
        self._X, self._y, self._t, self._Xd, self._td = data.X, data.y, data.t, data.Xd, data.td
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
        threads: int | str | None = DEFAULT_BLAS_THREADS,
        prior: "str | LCMPrior | None" = "default",
        explore: bool = True,
        calibrate: bool | None = None,
    ) -> "LCM":
        """Fit every hyperparameter (maximum a posteriori by default); returns self.

        X_list[i]: (n_i, d) array in [0, 1]; y_list[i]: (n_i,) outputs of task i (used as given).
        prior: "default" (the priors of :mod:`gptask.model.numerics.priors`), an ``LCMPrior``, or None for
        plain maximum likelihood. Starts are compared by the objective they maximise (the log
        posterior, or the log-likelihood without a prior).
        restarts: number of L-BFGS-B starts; start k draws its initial point from
        ``np.random.SeedSequence([seed, k])``, except start 0 which begins at ``init`` (an LCM or
        a params dict of matching shapes) when given. The best start wins (ties: lowest k).
        explore: check the winner with :meth:`diagnose`; when it has a length scale or kappa on a
        bound, a noise on its floor, or wild predictions, run EXPLORE_RESTARTS more random starts
        (k = restarts, restarts + 1, ...) and keep the best of all; the outcome is logged and kept
        in ``fit_report``. With ``explore``, a winner with a length scale shorter than its input's gap
        (:meth:`collapsed_lengthscales`) is refitted from itself and from every start so far with each length
        scale bounded below by defaults.LENGTHSCALE_GAP_FLOOR x its input's gap (:func:`input_gaps`), and the
        best such fit replaces it unless the data overrule the floor: it must predict the held-out points
        (:meth:`loo_log_density`) better than the collapsed fit by more than defaults.COLLAPSE_LOO_NATS per point.
        calibrate: widen the predictive variances by the hyperparameter-count factor of
        defaults.CALIBRATE_VARIANCE (None: CALIBRATE_VARIANCE under a prior, never without one);
        the factor is ``fit_report.variance_scale``.
        comm: optional mpi4py communicator; start k runs on rank ``k % size`` and the results are
        exchanged with ``comm.Allgather`` on numpy buffers, so every rank ends with the same model,
        whatever the number of ranks.
        maxiter: L-BFGS-B iteration cap per start (default DEFAULT_MAXITER). A start also stops
        when its objective gained less than STALL_NATS over STALL_WINDOW iterations.
        threads: CPU threads used during the fit: BLAS threads (threadpoolctl), and torch's CPU
        threads on the torch backend; an integer >= 1, None (leave them as they are), or "auto"
        (the default): 1 thread below BLAS_THREADS_MIN_N data points, as they are from there on (all
        the cores, or the cap a caller set, e.g. one share per MPI rank). One thread for small
        problems is deliberate: on a loaded or MPI-shared node OpenBLAS threads spin and made a
        400 x 400 Cholesky 16x slower with 2 threads than with 1 (bench/results_lcm.md); from a few
        thousand points each factorisation is long enough for the cores to pay. Under "auto" below
        BLAS_THREADS_MIN_N points and without ``comm``, the starts themselves run in parallel, one
        thread each, on the cores this process may use: the same model, sooner.
        """
        Xs, ys = _check_data(X_list, y_list)
        Xs = _with_levels(Xs, self._levels)
        n_points = sum(x.shape[0] for x in Xs)
        workers = 1
        if threads == "auto" and comm is None and n_points < BLAS_THREADS_MIN_N:
            workers = _usable_cores()
        threads = _thread_cap(threads, n_points)
        if threads is None:
            return self._fit(Xs, ys, restarts, seed, comm, init, maxiter, prior, explore, workers, calibrate)
        with self._bk.limit_threads(threads):
            return self._fit(Xs, ys, restarts, seed, comm, init, maxiter, prior, explore, workers, calibrate)

    def _fit(self, Xs, ys, restarts, seed, comm, init, maxiter, prior, explore, workers: int,
             calibrate: bool | None = None) -> "LCM":
        """fit() on checked data, inside its thread cap; ``workers`` threads run the starts."""
        restarts = _check_int(restarts, "restarts", 1)
        seed = _check_int(seed, "seed", 0)
        maxiter = DEFAULT_MAXITER if maxiter is None else _check_int(maxiter, "maxiter", 1)
        prior_obj = resolve_prior(prior)
        T, d = len(Xs), Xs[0].shape[1]
        lay = _Layout(self._Q, d, T, self._rank, _groups(self._levels, T))
        data = _sorted_data(Xs, ys, self._bk)
        y = data.y
        s2 = _output_scale(y)
        bounds = lay.bounds(s2)
        lo = np.array([-np.inf if b[0] is None else b[0] for b in bounds])
        hi = np.array([np.inf if b[1] is None else b[1] for b in bounds])
        theta_init = None
        if init is not None:
            ip = init.get_params() if isinstance(init, LCM) else init
            ip = _check_params(ip, self._Q, d, T, self._rank, lay.G)
            theta_init = np.clip(lay.pack(ip["lengthscale"], ip["W"], ip["kappa"], ip["noise"]), lo, hi)

        def objective(theta):
            return _neg_log_posterior(self._bk, data, lay, self._kernel, prior_obj, s2, theta, self._levels)

        rank, size = (0, 1) if comm is None else (int(comm.Get_rank()), int(comm.Get_size()))

        def run_start(k: int, low: np.ndarray | None = None) -> np.ndarray:
            """(size + 1,): start k's optimum theta and its objective value; ``low``: lower bounds (size,)
            other than the box's (the floored refit), the start clipped into them; k = -1 starts at the
            current winner."""
            if k == -1:
                p = self._params
                x0 = lay.pack(p["lengthscale"], p["W"], p["kappa"], p["noise"])
            elif k == 0 and theta_init is not None:
                x0 = theta_init
            else:
                x0 = lay.random(np.random.default_rng(np.random.SeedSequence([seed, k])), s2)
            box = bounds
            if low is not None:
                x0, box = np.clip(x0, low, hi), [(float(a), b[1]) for a, b in zip(low, bounds)]
            res = minimize(objective, x0, jac=True, method="L-BFGS-B", bounds=box,
                           options={"maxiter": maxiter}, callback=_stall_callback())
            f = float(res.fun)
            ok = np.isfinite(f) and f < FAIL_VALUE
            logger.debug("LCM start %d: objective %.6g (%s)", k, -f, res.message)
            return np.append(res.x, -f if ok else -np.inf)

        def run_starts(keys: list[int], low: np.ndarray | None = None) -> np.ndarray:
            """(len(keys), size + 1): the optimum theta of each start and its objective value."""
            out = np.full((len(keys), lay.size + 1), np.nan)
            mine = list(range(rank, len(keys), size))
            if workers > 1 and len(mine) > 1:
                with ThreadPoolExecutor(max_workers=min(workers, len(mine))) as pool:
                    for j, row in zip(mine, pool.map(lambda k: run_start(k, low), [keys[j] for j in mine])):
                        out[j] = row
            else:
                for j in mine:
                    out[j] = run_start(keys[j], low)
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
        explored = bool(flags) and (EXPLORE_ON_NOISE_FLOOR or any(not f.endswith(NOISE_FLOOR_FLAG) for f in flags))
        if explored:
            more = run_starts(list(range(restarts, restarts + EXPLORE_RESTARTS)))
            results = np.vstack([results, more])
            winner = self._adopt_best(lay, results, Xs, ys)
            flags_after = self.diagnose()
            # a deterministic objective's noise belongs on its floor: that alone is no warning
            log = logger.warning if any(not f.endswith(NOISE_FLOOR_FLAG) for f in flags_after) else logger.info
            log("LCM fit (%d tasks, %d points): %s; %d fresh starts %s%s", T, len(y), "; ".join(flags),
                EXPLORE_RESTARTS, f"found a better fit (start {winner})" if winner >= restarts
                else "kept the first fit", f", which still has: {'; '.join(flags_after)}" if flags_after else "")
        collapsed = self.collapsed_lengthscales() if explore else []
        collapsed_after, refit, floor, at_floor, loo = collapsed, False, np.zeros(0), [], ()
        if collapsed and LENGTHSCALE_GAP_FLOOR is not None:
            # refit from the collapsed winner (and with COLLAPSE_REFIT_EVERY_START every start of the first round and
            # of exploring), each length scale bounded below by its input's gap; the best floored fit is kept within
            # COLLAPSE_KEEP_NATS of the collapsed one, and when it predicts held-out points better by more than
            # COLLAPSE_LOO_NATS per point (defaults.LENGTHSCALE_GAP_FLOOR)
            floor = np.maximum(LENGTHSCALE_GAP_FLOOR * input_gaps(Xs), LENGTHSCALE_BOUNDS[0])
            low = lo.copy()
            low[: lay.Q * d] = np.maximum(lo[: lay.Q * d], np.tile(np.log(floor), lay.Q))
            floored = run_starts([-1] + (list(range(restarts + EXPLORE_RESTARTS)) if COLLAPSE_REFIT_EVERY_START else []),
                                 low)
            lp = results[:, -1]
            winner_lp = float(np.max(np.where(np.isfinite(lp), lp, -np.inf)))
            floored_lp = floored[:, -1]
            best_floored = float(np.max(np.where(np.isfinite(floored_lp), floored_lp, -np.inf)))
            keep = np.isfinite(best_floored) and (COLLAPSE_KEEP_NATS is None
                                                  or best_floored >= winner_lp - COLLAPSE_KEEP_NATS)
            if keep:
                collapsed_params = self._params
                loo_collapsed = None if COLLAPSE_LOO_NATS is None else self.loo_log_density()
                self._adopt_best(lay, floored, Xs, ys)
                if loo_collapsed is not None:
                    # the data can overrule the floor: the floored fit replaces the collapsed one only when it
                    # predicts the held-out points (leave-one-out, hyperparameters fixed) better by more than
                    # COLLAPSE_LOO_NATS per point
                    gain = self.loo_log_density() - loo_collapsed  # (N,) per held-out point
                    loo = (float(np.mean(loo_collapsed)), float(np.mean(loo_collapsed + gain)),
                           float(np.std(gain, ddof=1) / np.sqrt(gain.size)) if gain.size > 1 else 0.0)
                    keep = loo[1] - loo[0] > COLLAPSE_LOO_NATS
                    if not keep:
                        self._params = collapsed_params
                        self._condition_sorted(Xs, ys)
            if keep:
                results, refit = np.vstack([results, floored]), True
                at_floor = self._at_floor(floor)
            collapsed_after = self.collapsed_lengthscales()
            logger.info("LCM fit (%d tasks, %d points): %s; %s", T, len(y), "; ".join(collapsed),
                        "refitted with every length scale at least its input's gap" + (
                            f" ({'; '.join(at_floor)})" if at_floor else "") if refit
                        else "the floored refit failed or the data prefer the collapsed fit" + (
                            f" (leave-one-out log density per point {loo[0]:.3f} against {loo[1]:.3f} floored)"
                            if loo else ""))
        scale = 1.0
        if calibrate if calibrate is not None else (CALIBRATE_VARIANCE and prior_obj is not None):
            scale = self._widen(lay.size, Xs, ys)
        objective_values = results[:, -1].copy()
        self.fit_report = FitReport(n_starts=len(results), explored=explored, flags=tuple(flags),
                                    flags_after=tuple(flags_after), objective=objective_values,
                                    map=prior_obj is not None, collapsed=tuple(collapsed), collapse_refit=refit,
                                    collapsed_after=tuple(collapsed_after), variance_scale=scale,
                                    lengthscale_floor=tuple(float(v) for v in floor), at_floor=tuple(at_floor),
                                    collapse_loo=tuple(float(v) for v in loo))
        return self

    def collapsed_lengthscales(self) -> list[str]:
        """The length scales the data do not support, as readable strings (empty when none): a length
        scale l_qj shorter than COLLAPSE_GAP_FRACTION x the typical gap of input j within a task
        (:meth:`input_gaps`), by more than BOUND_TOL_LOG in log (a fit bounded at the gap is not
        flagged); inputs with at most two distinct values are not checked."""
        self._require_data()
        gaps = self.input_gaps()
        ls = self._params["lengthscale"]
        out = []
        short = np.log(ls) < np.log(np.maximum(COLLAPSE_GAP_FRACTION * gaps, 1e-300))[None, :] - BOUND_TOL_LOG
        for q, j in zip(*np.nonzero(short)):
            out.append(f"length scale {ls[q, j]:.3g} of input {j} (latent {q}) shorter than the gap "
                       f"{gaps[j]:.3g} between its values: collapsed")
        return out

    def input_gaps(self) -> np.ndarray:
        """(d,) the typical gap between the distinct values of each input within a task (:func:`input_gaps` of
        this model's data)."""
        self._require_data()
        return input_gaps([self._X[self._t == i] for i in range(self.n_tasks)])

    def _at_floor(self, floor: np.ndarray) -> list[str]:
        """The length scales l_qj within BOUND_TOL_LOG (in log) of their floor ``floor[j]`` (d,), where that floor
        is above LENGTHSCALE_BOUNDS, as readable strings (empty when none)."""
        ls = self._params["lengthscale"]
        on = (np.log(ls) <= np.log(floor)[None, :] + BOUND_TOL_LOG) & (floor > LENGTHSCALE_BOUNDS[0])[None, :]
        return [f"length scale {ls[q, j]:.3g} of input {j} (latent {q}) held at its floor, the gap {floor[j]:.3g} "
                "between the input's values" for q, j in zip(*np.nonzero(on))]

    def _widen(self, n_hyper: int, Xs, ys) -> float:
        """Scale B_q and the noises by min(VARIANCE_SCALE_MAX, (N / (N - n_hyper))^VARIANCE_SCALE_POWER) and
        re-condition:
        every predictive variance grows by that factor, the posterior mean stays. Returns the factor."""
        N = int(self._X.shape[0])
        scale = VARIANCE_SCALE_MAX if N <= n_hyper else min(VARIANCE_SCALE_MAX, (N / (N - n_hyper)) ** VARIANCE_SCALE_POWER)
        if scale == 1.0:
            return scale
        p = self._params
        self._params = {"lengthscale": p["lengthscale"], "W": p["W"] * np.sqrt(scale), "kappa": p["kappa"] * scale,
                        "noise": p["noise"] * scale}
        self._condition_sorted(Xs, ys)
        return float(scale)

    def laplace_draws(self, n: int, seed: int = 0) -> list[dict[str, np.ndarray]]:
        """``n`` hyperparameter sets drawn from the Laplace approximation of the posterior at this fit:
        theta = [log lengthscale, W, log kappa, log noise] ~ N(theta_fit, H^-1), H the Hessian of the
        negative log posterior (this model's prior; the log-likelihood without one) by forward differences
        of its analytic gradient (P + 1 gradients, P hyperparameters), its eigenvalues floored at
        1 / LAPLACE_MAX_SD^2, each draw clipped to the fit's bounds. A fit widened for calibration
        (``fit_report.variance_scale``) is unwidened for the Hessian and each draw widened alike.
        Returns a list of params dicts (lengthscale (Q, d), W (Q, T, rank), kappa (Q, T), noise (T,)) for
        :meth:`condition`; empty when the Hessian cannot be computed (a gradient that fails)."""
        self._require_params()
        self._require_data()
        n = _check_int(n, "n", 0)
        if n == 0:
            return []
        Xs, ys = self._stored_data()
        T, d = len(Xs), Xs[0].shape[1]
        lay = _Layout(self._Q, d, T, self._rank, _groups(self._levels, T))
        data = _sorted_data(Xs, ys, self._bk)
        s2 = self._s2 if self._s2 is not None else _output_scale(data.y)
        scale = 1.0 if self.fit_report is None else float(self.fit_report.variance_scale)
        p = self._params
        theta0 = lay.pack(p["lengthscale"], p["W"] / np.sqrt(scale), p["kappa"] / scale, p["noise"] / scale)
        bounds = lay.bounds(s2)
        lo = np.array([-np.inf if b[0] is None else b[0] for b in bounds])
        hi = np.array([np.inf if b[1] is None else b[1] for b in bounds])
        f0, g0 = _neg_log_posterior(self._bk, data, lay, self._kernel, self.prior, s2, theta0, self._levels)
        if f0 >= FAIL_VALUE:
            return []
        P = theta0.size
        H = np.empty((P, P))
        for k in range(P):
            step = np.zeros(P)
            step[k] = LAPLACE_STEP
            f, g = _neg_log_posterior(self._bk, data, lay, self._kernel, self.prior, s2, theta0 + step, self._levels)
            if f >= FAIL_VALUE:
                return []
            H[:, k] = (g - g0) / LAPLACE_STEP
        evals, evecs = np.linalg.eigh(0.5 * (H + H.T))
        evals = np.maximum(evals, 1.0 / LAPLACE_MAX_SD ** 2)
        z = np.random.default_rng(_check_int(seed, "seed", 0)).standard_normal((n, P))
        thetas = np.clip(theta0 + (z / np.sqrt(evals)) @ evecs.T, lo, hi)
        out = []
        for theta in thetas:
            ls, W, kappa, noise = lay.unpack(theta)
            out.append({"lengthscale": ls, "W": W * np.sqrt(scale), "kappa": kappa * scale, "noise": noise * scale})
        return out

    def crossval_zscores(self, folds: int = CALIBRATION_FOLDS, seed: int = 0, restandardize: bool | None = None,
                         fresh: bool | None = None) -> np.ndarray:
        """The z-scores (y - mean) / sd (with noise) of every held-out observation of a ``folds``-fold
        cross-validation (:meth:`crossval_residuals`, same arguments): (n_held,) in fold order."""
        r, v, n = self.crossval_residuals(folds, seed, restandardize, fresh)
        return r / np.sqrt(v + n)

    def crossval_residuals(self, folds: int = CALIBRATION_FOLDS, seed: int = 0, restandardize: bool | None = None,
                           fresh: bool | None = None, refit: bool | None = None, explore: bool = False
                           ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The residuals y - mean of every held-out observation of a ``folds``-fold cross-validation, each
        fold's model refitted on the others (this model's prior, no exploration), with the fold model's
        latent variance and noise variance there: three (n_held,) arrays in fold order, in the fold's
        units. Every task with at least two points is split at random
        (``np.random.default_rng(seed)``) into ``folds`` parts of its own, so every fold keeps a point of
        every task; tasks of one point are never held out. A model of levels holds out each configuration
        of a base task at every level at once (:meth:`held_out`).

        restandardize: each fold puts every task whose points have mean 0 and sd 1 (the tuner's per-task
        standardisation; None: detected, :meth:`standardized_tasks`) in the units of its remaining points
        (their mean and sd), fits and scores the held-out points in those units, as the tuner would see a
        new point; other tasks are used as given. fresh: each fold refitted from CALIBRATION_FRESH_STARTS
        random starts (None: when the median task has fewer than CALIBRATION_FRESH_BELOW points), else
        from one start at this model's hyperparameters. Why both: defaults.CALIBRATION_STANDARD_TOL.
        refit: False conditions each fold on this model's hyperparameters (one factorisation per fold, no
        fit; ``fresh`` is then ignored); None: refitted up to CALIBRATION_REFIT_MAX_POINTS points or when
        the median task has fewer than CALIBRATION_FRESH_BELOW points (the leak the refits close), else
        conditioned (defaults.CALIBRATION_REFIT_MAX_POINTS: the refits cost many factorisations each, and
        on many points they widened the intervals past 99 %). explore: the refits' ``fit(explore=...)`` (its
        diagnosis and collapse check; off: the folds as measured in bench/results/calibrated.md)."""
        return self.fold_residuals(folds, seed, restandardize, fresh, refit, explore)[:3]

    def fold_residuals(self, folds: int = CALIBRATION_FOLDS, seed: int = 0, restandardize: bool | None = None,
                       fresh: bool | None = None, refit: bool | None = None, explore: bool = False
                       ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """:meth:`crossval_residuals` (same arguments) and the task of each held-out observation: four
        (n_held,) arrays, the last of task indices."""
        held = self.held_out(folds, seed, restandardize, fresh, refit, explore)
        return held.r, held.v, held.noise, held.task

    def held_out(self, folds: int = CALIBRATION_FOLDS, seed: int = 0, restandardize: bool | None = None,
                 fresh: bool | None = None, refit: bool | None = None, explore: bool = False,
                 grouped: bool | None = None) -> HeldOut:
        """:meth:`fold_residuals` (same arguments) with each fold's prior variance of the held-out point's task
        (:class:`~gptask.model.numerics.calibration.HeldOut`), what the calibration's shape is fitted to.

        grouped (a model of levels; None: whenever the model has levels): every configuration of a base task
        held out at all its levels at once (:meth:`fold_parts`). A target run is mostly a configuration
        promoted from cheap runs; held out alone, it is predicted with its own cheap runs at the same
        configuration in the data, which a point users ask about does not have. Grouped, the target's
        calibrated intervals covered 85-99 % on 48 of 75 tuned task-seeds and under 85 % on 5, against 40 and
        7 (bench/results/calibrated.md, session 41)."""
        part = self.fold_parts(folds, seed, grouped)
        folds = _check_int(folds, "folds", 2)
        Xs, ys = self.data()
        std = self.standardized_tasks() if restandardize is None else np.full(len(ys), bool(restandardize))
        fresh = self._scarce_tasks() if fresh is None else fresh
        refit = self.refits_folds() if refit is None else refit
        out = []
        for k in range(folds):
            held = [p == k for p in part]
            if not any(h.any() for h in held):
                continue
            keep = [y[~h] for y, h in zip(ys, held)]
            units = self.task_fold_units([~h for h in held], std)
            sub = self._like()
            fold_X, fold_y = [x[~h] for x, h in zip(Xs, held)], [(y - a) / b for y, (a, b) in zip(keep, units)]
            if not refit:
                sub.condition(fold_X, fold_y, self._params)
            else:
                start = dict(restarts=CALIBRATION_FRESH_STARTS, seed=_check_int(seed, "seed", 0) + 1 + k) if fresh \
                    else dict(restarts=1, seed=seed, init=self._params)
                sub.fit(fold_X, fold_y, prior=self.prior, explore=explore, calibrate=False, threads=1, **start)
            for i, h in enumerate(held):
                if h.any():
                    m, v = sub.predict(i, Xs[i][h])
                    a, b = units[i]
                    out.append(((ys[i][h] - a) / b - m, v, np.full(len(m), float(sub._params["noise"][i])),
                                np.full(len(m), i), np.full(len(m), float(sub.task_covariance()[i, i]))))
        if not out:
            return HeldOut(np.zeros(0), np.zeros(0), np.zeros(0), np.zeros(0, dtype=int), np.zeros(0))
        return HeldOut(*(np.concatenate(c) for c in zip(*out)))

    def fold_parts(self, folds: int = CALIBRATION_FOLDS, seed: int = 0, grouped: bool | None = None
                   ) -> list[np.ndarray]:
        """The folds of :meth:`held_out` (same arguments): per task, each point's fold (n_i,) ints in 0 ..
        folds - 1, -1 for a point never held out (a task of one point). Each task's points in a random order
        (``np.random.default_rng(seed)``) cycled over the folds; on a model of levels (``grouped`` None or
        True) each distinct configuration of a base task instead, its runs at every level in one fold (a task
        whose points would then all fall in one fold has its last point moved to the next fold)."""
        self._require_data()
        folds = _check_int(folds, "folds", 2)
        Xs, ys = self.data()
        rng = np.random.default_rng(_check_int(seed, "seed", 0))
        if self._levels is not None and grouped is not False:
            return self._grouped_parts(Xs, folds, rng)
        return [rng.permutation(len(y)) % folds if len(y) >= 2 else np.full(len(y), -1) for y in ys]

    def _grouped_parts(self, Xs: Sequence[np.ndarray], folds: int, rng: np.random.Generator) -> list[np.ndarray]:
        """:meth:`fold_parts` of a model of levels: a configuration of a base task in one fold at every level
        (the distinct configurations of each base task in a seeded random order, cycled over the folds)."""
        group = np.asarray(self._levels.group)
        fold_of: dict[tuple[int, bytes], int] = {}
        for g in range(int(group.max()) + 1):
            rows = np.unique(np.vstack([Xs[i] for i in np.flatnonzero(group == g)]), axis=0)
            for row, f in zip(rows, rng.permutation(len(rows)) % folds):
                fold_of[(g, row.tobytes())] = int(f)
        out = []
        for i, X in enumerate(Xs):
            p = np.array([fold_of[(int(group[i]), row.tobytes())] for row in X], dtype=int)
            if len(p) < 2:
                p = np.full(len(p), -1)
            elif len(set(p.tolist())) < 2:  # every point in one fold would leave the task empty: move its last
                p[-1] = (p[-1] + 1) % folds
            out.append(p)
        return out

    def standardized_tasks(self) -> np.ndarray:
        """(T,) bool: the tasks of at least three points whose outputs have mean 0 and sd 1 (numpy's
        ``std``, within defaults.CALIBRATION_STANDARD_TOL): the per-task standardisation of the tuner's
        output transform, which :meth:`crossval_zscores` redoes on each fold."""
        self._require_data()
        _, ys = self.data()
        return np.array([len(y) >= 3 and abs(float(np.mean(y))) <= CALIBRATION_STANDARD_TOL
                         and abs(float(np.std(y)) - 1.0) <= CALIBRATION_STANDARD_TOL for y in ys])

    @staticmethod
    def fold_units(kept: Sequence[np.ndarray], standardized: Sequence[bool]) -> list[tuple[float, float]]:
        """Per task, the units (mean, sd) of a cross-validation fold: the mean and numpy ``std`` of the
        task's remaining points ``kept[i]`` (n_i,) where ``standardized[i]`` (:meth:`standardized_tasks`)
        and they have at least two distinct values, else (0.0, 1.0) (the task used as given). A fold fits
        on ``(kept[i] - mean) / sd`` and scores its held-out points in those units, as the tuner would see
        a new point (:meth:`crossval_zscores`, :func:`gptask.transfer.crossval.within_task_cv`)."""
        return [(float(np.mean(y)), float(np.std(y))) if s and len(y) >= 2 and np.std(y) > 0 else (0.0, 1.0)
                for y, s in zip(kept, standardized)]

    def task_fold_units(self, keep: Sequence[np.ndarray], standardized: Sequence[bool]) -> list[tuple[float, float]]:
        """Per task, the units (mean, sd) of a cross-validation fold that keeps the points ``keep[i]`` ((n_i,)
        bool) of each task: :meth:`fold_units` of the kept points, as this model's tasks share units. On a model
        of levels the tuner puts every level of a base task on its cheapest level's scale, that level's mean
        moved by the mean difference of the two at the configurations both ran
        (:func:`gptask.model.surrogate.data.shared_scales`), and a fold re-standardises them as the tuner would
        on the fold's runs: the base task's standardised level r (the one with the most kept points where
        several are) by its kept points' (a, b), each other level i by (a + m, b), m the mean over the
        configurations both kept of i's value less r's (each configuration's values averaged; the mean of i's
        kept points where they share none). Each level re-standardised on its own shifted the levels against
        each other by the fold's change of mean, which the model, relating the levels closely, carried into the
        target's predictions: on multi-fidelity Hartmann-3 the target's held-out runs missed by 5-20 of their
        sd, and the report's within-task check covered 15-36 % of them (70-82 % now; bench/results/calibrated.md,
        session 42)."""
        Xs, ys = self.data()
        kept = [y[k] for y, k in zip(ys, keep)]
        units = self.fold_units(kept, standardized)
        if self._levels is None:
            return units
        group = np.asarray(self._levels.group)
        for g in np.unique(group):
            members = np.flatnonzero(group == g)
            ref = [int(i) for i in members if standardized[i] and len(kept[i]) >= 2]
            if not ref:
                continue
            r = max(ref, key=lambda i: len(kept[i]))
            a, b = units[r]
            theirs = _config_means(Xs[r][keep[r]], kept[r])
            for i in members:
                if i == r or not len(kept[i]):
                    continue
                mine = _config_means(Xs[i][keep[i]], kept[i])
                shared = [v - theirs[c] for c, v in mine.items() if c in theirs]
                units[i] = (a + float(np.mean(shared)) if shared else float(np.mean(kept[i])), b)
        return units

    def calibration_factors(self, folds: int = CALIBRATION_FOLDS, seed: int = 0,
                            refit: bool | None = None, explore: bool = False) -> tuple[float, float]:
        """The factors (latent, noisy) the intervals users see multiply this model's variances by where the
        model knows nothing of a point (its variance at the prior's; nearer the data the factor grows, see
        :meth:`task_calibrations`; the search keeps the raw model), from the residuals r of
        :meth:`held_out` (fold latent variance v, noise variance n, prior variance P):

        * noisy: the shape (:func:`gptask.model.numerics.calibration.fit_shape`) of r against v + n: r^2 / P
          ~ a u^p with u = (v + n) / P, p in [CALIBRATION_POWER_MIN, 1] by maximum likelihood, widened by a
          one-sided CALIBRATION_CONFIDENCE upper confidence bound sum(r^2 / (P u^p)) / chi2.ppf(1 -
          CALIBRATION_CONFIDENCE, N) over the N held-out points (wider when few points are held out); the
          factor at u is that bound times u^(p - 1) (p = 1: one factor everywhere);
        * latent: the same on r against v alone: a measurement cannot tell the noise from roughness of the
          function on scales finer than the data, so the latent interval is held to cover what the folds
          measure; :meth:`predict_calibrated` caps the latent variance at the noisy one.

        Factors are clipped to [CALIBRATION_MIN, CALIBRATION_MAX] (below 1: the folds say the intervals are too
        wide; CALIBRATION_MIN only with at least CALIBRATION_SHRINK_MIN_POINTS held-out points, else 1);
        (1, 1) with fewer than CALIBRATION_MIN_POINTS held-out points. The folds re-standardise per-task
        standardised tasks and, when data are scarce, start afresh (:meth:`crossval_residuals`). Costs a few
        fits (above CALIBRATION_REFIT_MAX_POINTS points a factorisation per fold; ``refit`` and ``explore``
        as there); cached for this model's state (data and hyperparameters)."""
        return TaskCalibration(self._calibrated(folds, seed, refit, explore)[1]).at_prior()

    def task_calibration_factors(self, folds: int = CALIBRATION_FOLDS, seed: int = 0,
                                 refit: bool | None = None, explore: bool = False) -> np.ndarray:
        """(T, 2): each task's factors (latent, noisy) where the model knows nothing of a point, from
        :meth:`task_calibrations`, what :meth:`predict_calibrated` uses. Where the folds are refitted
        (:meth:`crossval_residuals`; at most CALIBRATION_REFIT_MAX_POINTS points, or scarce tasks) every task
        has the pooled calibration of :meth:`calibration_factors`, unless the tasks are of unequal size
        (:meth:`unequal_tasks`): then a task with at least CALIBRATION_MIN_POINTS held-out points has the
        smaller of those and the same fit to its own held-out points (one task's exploding fold no longer
        widens every task's intervals; defaults.CALIBRATION_UNEQUAL_TASKS). Where they are conditioned (many
        points), such a task has the larger of the two (clipped to CALIBRATION_MAX): there the pooled factor
        is set by the tasks of many points (sources of hundreds of measurements), and a task of a few runs
        beside them (the one being tuned) would get intervals its own folds do not bear out
        (bench/calibration_large.py: 64-75 % of a held-out GPU's measurements covered on 3 of 18 cases,
        94-100 % with its own bound)."""
        return np.array([c.at_prior() for c in self._calibrated(folds, seed, refit, explore)[0]])

    def task_calibrations(self, folds: int = CALIBRATION_FOLDS, seed: int = 0, refit: bool | None = None,
                          explore: bool = False) -> list[TaskCalibration]:
        """(T,) each task's :class:`~gptask.model.numerics.calibration.TaskCalibration`: the factor of its
        latent and noisy variances as a function of their size relative to the task's prior variance
        (:meth:`task_calibration_factors` gives them where the model knows nothing). With levels, the tasks at
        the target (level coordinate 0; a subset without them keeps the rule without levels) share the shapes
        of their own held-out points alone (:meth:`~gptask.model.numerics.calibration.HeldOut.for_targets`)
        when those number at least CALIBRATION_MIN_POINTS; :meth:`calibration_factors` stays pooled over every
        task."""
        return list(self._calibrated(folds, seed, refit, explore)[0])

    def _calibrated(self, folds: int, seed: int, refit: bool | None, explore: bool = False
                    ) -> tuple[tuple[TaskCalibration, ...], tuple[VarianceShape, VarianceShape]]:
        """(:meth:`task_calibrations`, the (latent, noisy) shapes pooled over every task, whose factors are
        :meth:`calibration_factors`), computed once per model state."""
        self._require_data()
        key = (int(self._X.shape[0]), float(self._ll), folds, seed, refit, explore)
        if self._calibration is not None and self._calibration[0] == key:
            return self._calibration[1]
        conditioned = refit is False or (refit is None and not self.refits_folds())
        held = self.held_out(folds, seed, refit=not conditioned, explore=explore)
        own = "larger" if conditioned else "smaller" if self.unequal_tasks() else None
        cals = held.task_calibrations(self.n_tasks, own)
        pooled = cals[0].pooled
        if self._levels is not None:  # the target level's intervals from its own held-out points
            cals = held.for_targets(cals, np.array(self._levels.targets, dtype=int))
        out = (cals, pooled)
        self._calibration = (key, out)
        return out

    def refits_folds(self) -> bool:
        """Whether :meth:`crossval_residuals` refits its folds by default (None): at most
        CALIBRATION_REFIT_MAX_POINTS points, or a median task under CALIBRATION_FRESH_BELOW points."""
        self._require_data()
        return self._scarce_tasks() or int(self._X.shape[0]) <= CALIBRATION_REFIT_MAX_POINTS

    def unequal_tasks(self) -> bool:
        """Whether the task with the most points has at least CALIBRATION_UNEQUAL_TASKS times the points of
        the one with the fewest (sources or imported runs beside a tuned task; :meth:`task_calibration_factors`)."""
        self._require_data()
        counts = np.asarray(self.n_points, dtype=float)
        return bool(counts.max() >= CALIBRATION_UNEQUAL_TASKS * counts.min())

    def _scarce_tasks(self) -> bool:
        """Whether the median task has fewer than CALIBRATION_FRESH_BELOW points (the folds' leak)."""
        return float(np.median(self.n_points)) < CALIBRATION_FRESH_BELOW

    def calibration_factor(self, folds: int = CALIBRATION_FOLDS, seed: int = 0) -> float:
        """The noisy factor of :meth:`calibration_factors`: what a new measurement's variance is multiplied by."""
        return self.calibration_factors(folds, seed)[1]

    def predict_calibrated(self, i: int, X: np.ndarray, include_noise: bool = False):
        """:meth:`predict` with the variances of task i's :meth:`task_calibrations`: the posterior mean (n,)
        and the calibrated variance (n,) of task i at X (n, d), for the intervals users see. With
        include_noise (a new measurement): (latent variance + noise) x the noisy factor at that variance over
        the task's prior variance; without: the latent variance x the latent factor at its own, capped at the
        former."""
        i = self._check_task(i)
        mean, var = self.predict(i, X)
        cal = self._calibrated(CALIBRATION_FOLDS, 0, None)[0][i]
        latent, noisy = cal.variances(var, self._params["noise"][i], float(self.task_covariance()[i, i]))
        return mean, noisy if include_noise else latent

    def fit_record(self) -> dict[str, Any]:
        """The fit's diagnostics to store with its hyperparameters (JSON types, no computation beyond a
        look at the data): lengthscales (Q, d) lists, noise (T,) relative to the output scale, collapsed
        (:meth:`collapsed_lengthscales`), collapse_refit, at_floor, collapse_loo (``fit_report``'s), flags
        (:meth:`diagnose`'s after the fit) and
        variance_scale; the fit's own record when the model was rebuilt from a stored one."""
        self._require_data()
        rep = self.fit_report
        if rep is None and self.recorded_fit is not None:
            return dict(self.recorded_fit)
        s2 = self._s2 if self._s2 is not None else _output_scale(self._y)
        return {"lengthscales": self._params["lengthscale"].tolist(),
                "noise": (self._params["noise"] / s2).tolist(),
                "collapsed": self.collapsed_lengthscales(),
                "collapse_refit": False if rep is None else bool(rep.collapse_refit),
                "at_floor": [] if rep is None else list(rep.at_floor),
                "collapse_loo": [] if rep is None else list(rep.collapse_loo),
                "flags": [] if rep is None else list(rep.flags_after),
                "variance_scale": None if rep is None else float(rep.variance_scale)}

    def diagnostics(self) -> dict[str, Any]:
        """What to show of the fit: lengthscales (Q, d) as lists, noise (T,) relative to the output
        scale, variance_scale (None for a model conditioned on given hyperparameters, not fitted: a fitted
        model's widening is part of its stored hyperparameters), collapsed (the strings of :meth:`collapsed_lengthscales` on the final
        model), collapse_refit, and the leave-one-out coverage of the 95 % intervals of the observed
        values, with noise (loo_coverage) and of the latent alone (loo_coverage_latent), calibration_factor
        and calibration_factor_latent (:meth:`calibration_factors`: a few fits, the factors where the model
        knows nothing of a point), calibration_factor_tasks (the noisy factors of
        :meth:`task_calibration_factors`, (T,) list), calibration_power and calibration_power_latent (the pooled
        shapes' powers, :meth:`task_calibrations`: under 1 the factor grows nearer the data), and recorded:
        :meth:`fit_record` (what the fit found, also when the model was rebuilt from a history)."""
        self._require_data()
        ys, ms, vs = self.loo()
        y, m, v = np.concatenate(ys), np.concatenate(ms), np.concatenate(vs)
        noise = self._params["noise"][self._t]
        z = 1.959963984540054
        rep = self.fit_report
        s2 = self._s2 if self._s2 is not None else _output_scale(self._y)
        recorded = self.fit_record()
        pooled = self._calibrated(CALIBRATION_FOLDS, 0, None)[1]
        return {"lengthscales": self._params["lengthscale"].tolist(),
                "noise": (self._params["noise"] / s2).tolist(),
                "variance_scale": recorded.get("variance_scale") if rep is None else rep.variance_scale,
                "calibration_factor": self.calibration_factor(),
                "calibration_factor_latent": self.calibration_factors()[0],
                "calibration_factor_tasks": self.task_calibration_factors()[:, 1].tolist(),
                "calibration_power": pooled[1].power,
                "calibration_power_latent": pooled[0].power,
                "recorded": recorded,
                "collapsed": self.collapsed_lengthscales(),
                "collapse_refit": bool(recorded.get("collapse_refit", False)) if rep is None else rep.collapse_refit,
                "loo_coverage": float(np.mean(np.abs(y - m) <= z * np.sqrt(v))),
                "loo_coverage_latent": float(np.mean(np.abs(y - m) <= z * np.sqrt(np.maximum(v - noise, 0.0))))}

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
        log_ls = np.log(p["lengthscale"][:, :self.input_dim])  # a level's at its upper bound: levels alike
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
            out.append(f"noise of task(s) {np.flatnonzero(floor).tolist()} {NOISE_FLOOR_FLAG}")
        wild = self._wild_tasks()
        if wild:
            out.append(f"predictions of task(s) {wild} more than {WILD_RANGES:g} observed ranges "
                       "outside the observed values")
        return out

    def _wild_tasks(self) -> list[int]:
        """Tasks whose posterior mean at the probe points leaves their observed range widened by
        WILD_RANGES ranges on each side (means only: K(X, P)^T alpha, no solve). With levels, a task's
        observed range is that of every level of its base task (on their shared scale): a target of two
        runs rightly predicts the spread its cheap level shows."""
        P = qmc.Halton(d=self.input_dim, scramble=True, seed=0).random(PROBE_POINTS)
        bk = self._bk
        B = bk.asarray(self.coregionalization())  # (Q, T, T)
        ls = bk.asarray(self._params["lengthscale"])
        mean = np.zeros((self.n_tasks, PROBE_POINTS))
        at = [list(range(self.n_tasks))] if self._levels is None else \
            [[i for i, v in enumerate(self._levels.level) if v == u] for u in sorted(set(self._levels.level))]
        for tasks in at:  # the tasks at one level share the probe points' kernel rows
            Pd = bk.asarray(self._at_level(tasks[0], P))
            part = bk.zeros((self.n_tasks, PROBE_POINTS))
            for q in range(self._Q):
                Kq = _kernel(self._kernel, self._Xd, Pd, ls[q], bk)  # (N, P)
                part += (B[q][self._td, :] * self._alpha[:, None]).T @ Kq
            mean[tasks] = bk.to_numpy(part)[tasks]
        wild = []
        group = None if self._levels is None else np.asarray(self._levels.group)
        for i in range(self.n_tasks):
            yi = self._y[self._t == i if group is None else group[self._t] == group[i]]
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
        return float(self.prior.log_density(self._params, s2, levels=self._levels is not None)[0])

    def log_posterior(self) -> float:
        """log_likelihood() + log_prior(): what a MAP fit maximises (up to a constant)."""
        return self.log_likelihood() + self.log_prior()

    def log_likelihood(self) -> float:
        """Exact log marginal likelihood log p(y | X, hyperparameters) of the outputs as given
        to fit/condition/extend/append (no transformation), including any jitter used."""
        self._require_data()
        return float(self._ll)

    def _cross(self, i: int, X: np.ndarray):
        """K(data, (task i, X)) for X (n, d) numpy: an (N, n) backend array."""
        bk = self._bk
        B = bk.asarray(self.coregionalization())
        ls, Xn = bk.asarray(self._params["lengthscale"]), bk.asarray(X)
        Kx = bk.zeros((self._X.shape[0], X.shape[0]))
        for q in range(self._Q):
            Kx += B[q][self._td, i][:, None] * _kernel(self._kernel, self._Xd, Xn, ls[q], bk)
        return Kx

    def _prior_cov(self, i: int, X: np.ndarray):
        """Prior covariance of task i's latent output at X (n, d) numpy: an (n, n) backend array."""
        bk = self._bk
        B = self.coregionalization()
        ls, Xn = bk.asarray(self._params["lengthscale"]), bk.asarray(X)
        C = bk.zeros((X.shape[0], X.shape[0]))
        for q in range(self._Q):
            C += float(B[q, i, i]) * _kernel(self._kernel, Xn, Xn, ls[q], bk)
        return C

    def _check_task(self, i: Any) -> int:
        if isinstance(i, bool) or not isinstance(i, (int, np.integer)):
            raise ValueError(f"task index must be an integer, got {i!r}")
        if not 0 <= i < self.n_tasks:
            raise ValueError(f"task index must be in [0, {self.n_tasks - 1}], got {i}")
        return int(i)

    def _posterior_parts(self, i: int, X: np.ndarray):
        """Checked (i, X) (X as the kernel sees it: :meth:`_at_level`), the posterior mean (n,) numpy and
        v = L^-1 K(data, X) (N, n) (backend) for task i."""
        self._require_data()
        i = self._check_task(i)
        X = self._at_level(i, as_inputs(X, "X", self.input_dim))
        Kx = self._cross(i, X)
        return i, X, self._bk.to_numpy(Kx.T @ self._alpha), self._bk.solve_lower(self._L, Kx)

    def predict(self, i: int, X: np.ndarray, include_noise: bool = False):
        """Posterior mean (n,) and variance (n,) of task i's latent output at X (n, d) in [0, 1].

        With include_noise the task's noise variance is added (prediction of a new observation).
        Variances are floored at VAR_FLOOR_REL times the prior variance.
        """
        i, X, mean, v = self._posterior_parts(i, X)
        prior = float(np.sum(self.coregionalization()[:, i, i]))
        var = prior - self._bk.to_numpy(self._bk.einsum("nm,nm->m", v, v))
        var = np.maximum(var, VAR_FLOOR_REL * prior)
        if include_noise:
            var = var + self._params["noise"][i]
        return mean, var

    def posterior_cross(self, i: int, j: int, X: np.ndarray) -> np.ndarray:
        """Posterior covariance (n,) of task i's and task j's latent outputs at the same points X
        (n, d) in [0, 1] (no noise; i == j: the variance, unfloored). What a run of task j at x
        says of task i there: a multi-fidelity rule's value of information."""
        i, _, _, vi = self._posterior_parts(i, X)
        j = self._check_task(j)
        vj = self._posterior_parts(j, X)[3]
        prior = float(self.task_covariance()[i, j])
        return prior - self._bk.to_numpy(self._bk.einsum("nm,nm->m", vi, vj))

    def loo(self) -> tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray]]:
        """Leave-one-out predictions of every observation, hyperparameters fixed: per task, the
        observed values (n_i,), and the mean and variance (n_i,) of each one predicted from all
        the others (noise included), from the closed form ``mean_k = y_k - alpha_k / [K^-1]_kk``,
        ``var_k = 1 / [K^-1]_kk`` (one inverse of the factor, O(N^3))."""
        self._require_data()
        bk = self._bk
        kinv_diag = np.diagonal(bk.to_numpy(bk.inverse_lower(self._L))).copy()  # diag of (L L^T)^-1
        var = 1.0 / kinv_diag
        mean = self._y - bk.to_numpy(self._alpha) * var
        T = self.n_tasks
        return ([self._y[self._t == i].copy() for i in range(T)], [mean[self._t == i] for i in range(T)],
                [var[self._t == i] for i in range(T)])

    def loo_log_density(self) -> np.ndarray:
        """(N,) the leave-one-out log predictive density ``log N(y_k; mean_k, var_k)`` of each observation, in the
        order of :meth:`loo` (task by task), hyperparameters fixed (Rasmussen & Williams eq. 5.10-5.12), in nats,
        in the units of the outputs as given (a rescaling of y shifts every value by the same constant)."""
        ys, ms, vs = self.loo()
        y, m, v = np.concatenate(ys), np.concatenate(ms), np.concatenate(vs)
        v = np.maximum(v, np.finfo(float).tiny)
        return -0.5 * np.log(2 * np.pi * v) - 0.5 * (y - m) ** 2 / v

    def loo_task(self, i: int, at_most: int | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """:meth:`loo` for task ``i`` alone: its observed values (n_i,) and the leave-one-out
        means and variances (n_i,), from one triangular solve with n_i right-hand sides,
        O(N^2 n_i) instead of the whole inverse's O(N^3) (a model of tens of thousands of points).
        at_most: where the task has more points, only that many of them, evenly spaced in data
        order (the solve's right-hand sides are an N x n_i array)."""
        self._require_data()
        i = self._check_task(i)
        bk = self._bk
        rows = np.flatnonzero(self._t == i)
        if at_most is not None and len(rows) > _check_int(at_most, "at_most", 1):
            rows = rows[np.unique(np.linspace(0, len(rows) - 1, at_most).round().astype(int))]
        unit = np.zeros((len(self._t), len(rows)))
        unit[rows, np.arange(len(rows))] = 1.0
        columns = bk.to_numpy(bk.solve_lower(self._L, bk.asarray(unit)))  # L^-1 e_k for each row k
        var = 1.0 / np.einsum("nk,nk->k", columns, columns)  # 1 / [K^-1]_kk
        alpha = bk.to_numpy(self._alpha)
        return self._y[rows].copy(), self._y[rows] - alpha[rows] * var, var

    def predict_cov(self, i: int, X: np.ndarray, include_noise: bool = False):
        """Posterior mean (n,) and full covariance (n, n) of task i's latent output at X."""
        i, X, mean, v = self._posterior_parts(i, X)
        cov = self._bk.to_numpy(self._prior_cov(i, X) - v.T @ v)
        if include_noise:
            cov[np.diag_indices(X.shape[0])] += self._params["noise"][i]
        return mean, cov

    # ---- block updates (TLA2) ----------------------------------------------------------------
    def _with_block(self, X_add, t_add, y_add, L21, L22, jitter, z2, ll2, params) -> "LCM":
        """A new model whose factor is [[L, 0], [L21, L22]] (the old L reused as is)."""
        bk = self._bk
        m = X_add.shape[0]
        new = self._like()
        new._params = params
        new._X = np.vstack([self._X, X_add])
        new._t = np.concatenate([self._t, np.full(m, t_add, dtype=int)])
        new._y = np.concatenate([self._y, y_add])
        new._Xd, new._td = bk.asarray(new._X), bk.index(new._t)
        new._L = bk.stack_factor(self._L, bk.asarray(L21), bk.asarray(L22))
        new._z = bk.concat([self._z, bk.asarray(z2)])
        new._alpha = bk.solve_upper_t(new._L, new._z)
        new._ll = self._ll + ll2
        new.jitter = max(self.jitter, jitter)
        new.n_factorizations = self.n_factorizations
        new.n_block_updates = self.n_block_updates + 1
        new.prior, new._s2 = self.prior, self._s2
        return new

    def append(self, i: int, X_add: np.ndarray, y_add: np.ndarray, noise_free: bool = False) -> "LCM":
        """A new model with extra points (X_add (m, d), y_add (m,)) on existing task i.

        Hyperparameters stay fixed; the old Cholesky factor is reused and only the m new rows
        are computed (cost O(N^2 m)). The original model is not modified.
        noise_free: condition on the latent values f(X_add) = y_add (no observation noise, only the
        jitter a factorisation needs) instead of noisy observations. Used for *fantasies*, results
        still being measured that a search must treat as known; such a model is for prediction
        only: re-conditioning it (``set_params``, ``condition`` on ``data()``) adds the task's noise.
        """
        self._require_data()
        i = self._check_task(i)
        X_add = self._at_level(i, as_inputs(X_add, "X_add", self.input_dim))
        y_add = as_outputs(y_add, "y_add", X_add.shape[0])
        bk = self._bk
        K12 = self._cross(i, X_add)
        K22 = self._prior_cov(i, X_add)
        if not noise_free:
            bk.add_diagonal_(K22, float(self._params["noise"][i]))
        L21, L22, jitter = bk.chol_extend(self._L, K12, K22, what="appended block")
        z2 = bk.solve_lower(L22, bk.asarray(y_add) - L21 @ self._z)
        ll2 = -0.5 * bk.item(z2 @ z2) - bk.sum_log_diag(L22) - 0.5 * X_add.shape[0] * _LOG2PI
        return self._with_block(X_add, i, y_add, L21, L22, jitter, z2, ll2, self.get_params())

    def extend(
        self,
        X_new: np.ndarray,
        y_new: np.ndarray,
        restarts: int = 4,
        seed: int = 0,
        maxiter: int | None = None,
        threads: int | str | None = DEFAULT_BLAS_THREADS,
    ) -> "LCM":
        """A new model with one more task (X_new (m, d) in [0, 1], y_new (m,)).

        All old hyperparameters are kept; only the new task's W rows (Q, rank), kappa (Q) and
        noise are learned, by maximising log p(y_new | old data) (plus the log prior of those
        hyperparameters when the model was fitted under a prior) with multi-start L-BFGS-B
        (start k seeded by SeedSequence([seed, k])). The old Cholesky factor is reused:
        L21 = (L^-1 K12)^T, L22 = chol(K22 - L21 L21^T); nothing of size N is refactorised.
        threads: CPU threads, as in :meth:`fit`.
        """
        self._require_data()
        if self._levels is not None:
            raise ValueError("extend() adds a task of its own; a model of fidelity levels (TaskLevels) cannot")
        X_new = as_inputs(X_new, "X_new", self.input_dim)
        threads = _thread_cap(threads, self._X.shape[0] + X_new.shape[0])
        if threads is not None:
            with self._bk.limit_threads(threads):
                return self.extend(X_new, y_new, restarts=restarts, seed=seed, maxiter=maxiter,
                                   threads=None)
        y_new = as_outputs(y_new, "y_new", X_new.shape[0])
        restarts = _check_int(restarts, "restarts", 1)
        seed = _check_int(seed, "seed", 0)
        maxiter = DEFAULT_MAXITER if maxiter is None else _check_int(maxiter, "maxiter", 1)
        Q, r, T = self._Q, self._rank, self.n_tasks
        N, m = self._X.shape[0], X_new.shape[0]
        p = self._params
        ls = p["lengthscale"]
        # P[(q, s)] = L^-1 (W_q[t, s] o k_q(X, X_new)): (Q*r, N, m), one solve with Q*r*m columns
        # on the backend; the small per-evaluation algebra below (O(N m Q r)) runs in numpy
        bk = self._bk
        lsd, Xn, Wd = bk.asarray(ls), bk.asarray(X_new), bk.asarray(p["W"])
        cols = []
        C = np.empty((Q, m, m))
        for q in range(Q):
            Kc = _kernel(self._kernel, self._Xd, Xn, lsd[q], bk)
            cols += [Wd[q, self._td, s][:, None] * Kc for s in range(r)]
            C[q] = _kernel(self._kernel, X_new, X_new, ls[q])
        P = bk.to_numpy(bk.solve_lower(self._L, bk.concat(cols, axis=1))).reshape(N, Q * r, m)
        P = np.ascontiguousarray(P.transpose(1, 0, 2))
        z1 = bk.to_numpy(self._z)
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

    # ---- held-out checks ---------------------------------------------------------------------
    def subset(self, tasks: Sequence[int], X_list: Sequence[np.ndarray] | None = None,
               y_list: Sequence[np.ndarray] | None = None) -> "LCM":
        """A new model of the tasks ``tasks`` only (indices, in that order: new task k is old task
        ``tasks[k]``), with these hyperparameters fixed (each kept task's rows of W, kappa and noise)
        and conditioned on the kept tasks' data, or on ``X_list[k]`` (n_k, d), ``y_list[k]`` (n_k,)
        when given (a fold of a cross-validation). One factorisation, no fit."""
        self._require_data()
        keep = [self._check_task(i) for i in tasks]
        if not keep:
            raise ValueError("subset needs at least one task")
        if (X_list is None) != (y_list is None):
            raise ValueError("give both X_list and y_list, or neither")
        if X_list is None:
            Xs, ys = self.data()
            X_list, y_list = [Xs[i] for i in keep], [ys[i] for i in keep]
        elif len(X_list) != len(keep) or len(y_list) != len(keep):
            raise ValueError(f"X_list and y_list need one entry per kept task ({len(keep)}), "
                             f"got {len(X_list)} and {len(y_list)}")
        p = self._params
        levels = None
        if self._levels is None:
            params = {"lengthscale": p["lengthscale"], "W": p["W"][:, keep], "kappa": p["kappa"][:, keep],
                      "noise": p["noise"][keep]}
        else:  # the kept tasks' base tasks, renumbered in order of first appearance
            old = [self._levels.group[i] for i in keep]
            groups = list(dict.fromkeys(old))
            levels = TaskLevels(tuple(groups.index(g) for g in old), tuple(self._levels.level[i] for i in keep))
            params = {"lengthscale": p["lengthscale"], "W": p["W"][:, groups], "kappa": p["kappa"][:, groups],
                      "noise": p["noise"][keep]}
        new = LCM(self._Q, self._kernel, self._rank, levels=levels)
        new.prior, new._s2 = self.prior, self._s2
        return new.condition(list(X_list), list(y_list), params)

    # ---- persistence -------------------------------------------------------------------------
    def save(self, path: str | os.PathLike) -> None:
        """Write the model (hyperparameters, data and factor) to an ``.npz`` file, no pickle."""
        self._require_data()
        meta = {"format": _FORMAT, "n_latent": self._Q, "kernel": self._kernel, "rank": self._rank,
                "jitter": self.jitter, "log_likelihood": self._ll,
                "n_factorizations": self.n_factorizations, "n_block_updates": self.n_block_updates,
                "prior": None if self.prior is None else self.prior.to_json(), "s2": self._s2,
                "levels": None if self._levels is None else self._levels.to_json()}
        with open(path, "wb") as fh:
            bk = self._bk
            np.savez(fh, meta=np.array(json.dumps(meta)), X=self._X, t=self._t, y=self._y,
                     L=bk.to_numpy(self._L), z=bk.to_numpy(self._z), alpha=bk.to_numpy(self._alpha),
                     **self._params)

    @classmethod
    def load(cls, path: str | os.PathLike, backend: str | None = None, device: str | None = None) -> "LCM":
        """Read a model written by :meth:`save` (by any backend) onto ``backend``/``device`` (as
        in the constructor; numpy by default); on the backend that saved it, predictions are
        bitwise identical."""
        with np.load(path, allow_pickle=False) as f:
            meta = json.loads(str(f["meta"]))
            if meta.get("format") != _FORMAT:
                raise ValueError(f"{path}: not a gptask LCM file (format {meta.get('format')!r})")
            levels = meta.get("levels")
            m = cls(meta["n_latent"], meta["kernel"], meta["rank"], backend=backend, device=device,
                    levels=None if levels is None else TaskLevels(levels["group"], levels["level"]))
            bk = m._bk
            m._params = _check_params({k: f[k] for k in ("lengthscale", "W", "kappa", "noise")},
                                      m._Q, None, None, m._rank)
            m._X, m._t, m._y = f["X"].copy(), f["t"].astype(int), f["y"].copy()
            m._Xd, m._td = bk.asarray(m._X), bk.index(m._t)
            # numpy: the order fit leaves L in (Fortran), for identical BLAS results
            m._L = bk.asarray(np.asfortranarray(f["L"]) if bk.name == "numpy" else f["L"])
            m._z, m._alpha = bk.asarray(f["z"].copy()), bk.asarray(f["alpha"].copy())
        m._ll = float(meta["log_likelihood"])
        m.jitter = float(meta["jitter"])
        m.n_factorizations = int(meta["n_factorizations"])
        m.n_block_updates = int(meta["n_block_updates"])
        m.prior = None if meta.get("prior") is None else LCMPrior.from_json(meta["prior"])
        m._s2 = None if meta.get("s2") is None else float(meta["s2"])
        return m

    def __repr__(self) -> str:
        state = "unfitted" if self._params is None else f"n_tasks={self.n_tasks}"
        if self._levels is not None:
            state += f", {self._levels.n_groups} base tasks"
        where = "" if self.backend == "numpy" else f"backend={self.backend!r}, device={self.device!r}, "
        return f"LCM(n_latent={self._Q}, kernel={self._kernel!r}, rank={self._rank}, {where}{state})"
