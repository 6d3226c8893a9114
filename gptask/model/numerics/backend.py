"""Array backends: the handful of array operations the LCM numerics need, for numpy and torch.

The likelihood, its gradient, prediction and the block updates (:mod:`.lcm`, :mod:`.kernels`) are
written once against this small interface. Everything else they use is common to numpy arrays and
torch tensors: ``+ - * / @``, in-place ``+= -= *=``, slicing, ``.T``, ``x[:, None]`` and
``einsum``. Two backends:

* ``numpy`` (the default): numpy + scipy's LAPACK on the CPU. Its Cholesky factorisations go through
  :func:`gptask.model.numerics.linalg.robust_cholesky`.
* ``torch``: torch tensors in float64 on any torch device (``"cpu"``, ``"cuda"``, ``"cuda:1"``);
  torch is an optional dependency (``pip install gptask[gpu]``), imported only when this backend is
  asked for (:mod:`.torch_backend`).

All arrays are float64: results agree with the numpy backend to rounding (1e-8 relative is tested).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.linalg import solve_triangular
from threadpoolctl import threadpool_limits

from . import linalg as _la
from .defaults import LML_ROW_BLOCKS

BACKENDS = ("numpy", "torch")


class NumpyBackend:
    """numpy arrays on the CPU (float64). A ``segments`` handle is (start offsets, counts) of the
    tasks' rows."""

    name = "numpy"
    #: row blocks of the likelihood's upper triangle (lcm._RowBlock): on a CPU half the work
    row_blocks = LML_ROW_BLOCKS
    device = "cpu"

    # ---- conversion and creation ------------------------------------------------------------
    def asarray(self, a: Any) -> np.ndarray:
        """float64 array (no copy when a already is one)."""
        return np.asarray(a, dtype=float)

    def index(self, a: Any) -> np.ndarray:
        """Integer index array."""
        return np.asarray(a, dtype=np.intp)

    def to_numpy(self, a: Any) -> np.ndarray:
        return np.asarray(a)

    def zeros(self, shape: tuple[int, ...]) -> np.ndarray:
        return np.zeros(shape)

    def ones(self, shape: tuple[int, ...]) -> np.ndarray:
        return np.ones(shape)

    def concat(self, arrays: list, axis: int = 0) -> np.ndarray:
        return np.concatenate(arrays, axis=axis)

    def einsum(self, spec: str, *operands: np.ndarray) -> np.ndarray:
        return np.einsum(spec, *operands)

    def item(self, a: Any) -> float:
        """A 0-d array (or a one-element one) as a Python float."""
        return float(a)

    def limit_threads(self, n: int):
        """Context manager: at most n BLAS threads inside (process-wide, restored on exit)."""
        return threadpool_limits(limits=n, user_api="blas")

    # ---- elementwise, in place ------------------------------------------------------------
    def exp_(self, x: np.ndarray) -> np.ndarray:
        return np.exp(x, out=x)

    def sqrt_(self, x: np.ndarray) -> np.ndarray:
        return np.sqrt(x, out=x)

    def clamp_min_(self, x: np.ndarray, v: float) -> np.ndarray:
        return np.maximum(x, v, out=x)

    def fill_diagonal_(self, A: np.ndarray, v: float) -> None:
        np.fill_diagonal(A, v)

    def add_diagonal_(self, A: np.ndarray, v: Any) -> None:
        A[np.diag_indices(A.shape[0])] += v

    def diagonal(self, A: np.ndarray) -> np.ndarray:
        return np.diagonal(A)

    def keep_upper_half_(self, D: np.ndarray) -> None:
        """Square D, in place: zero below the diagonal, halve the diagonal, keep the rest."""
        D[...] = np.triu(D)
        i = np.arange(D.shape[0])
        D[i, i] *= 0.5

    # ---- task structure -----------------------------------------------------------------------
    def segments(self, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The handle expand and segment_sum take for N rows sorted by task, counts (T,) >= 1."""
        counts = np.asarray(counts, dtype=np.intp)
        return np.concatenate(([0], np.cumsum(counts)[:-1])).astype(np.intp), counts

    def expand(self, B: np.ndarray, seg: tuple[np.ndarray, np.ndarray],
               seg_cols: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
        """B[t_n, t_m] (N, M): a (T, T') matrix over tasks expanded to the rows (segments ``seg``)
        and columns (``seg_cols``, default ``seg``) sorted by task (block copies, several times
        faster than a gather)."""
        cols = seg[1] if seg_cols is None else seg_cols[1]
        return np.repeat(np.repeat(B, cols, axis=1), seg[1], axis=0)

    def segment_sum(self, M: np.ndarray, seg: tuple[np.ndarray, np.ndarray], axis: int = 0) -> np.ndarray:
        """Sums of M's rows (axis 0) or columns (axis 1) within each task: T along that axis."""
        return np.add.reduceat(M, seg[0], axis=axis)

    # ---- linear algebra -----------------------------------------------------------------------
    def cholesky(self, K: np.ndarray, what: str) -> tuple[np.ndarray, float]:
        """(L, jitter), L L^T = K + jitter I, with jitter escalation (linalg.robust_cholesky)."""
        return _la.robust_cholesky(K, what=what)

    def solve_lower(self, L: np.ndarray, B: np.ndarray) -> np.ndarray:
        """L^-1 B for lower-triangular L (n, n); B (n,) or (n, m)."""
        return solve_triangular(L, B, lower=True, check_finite=False)

    def solve_upper_t(self, L: np.ndarray, B: np.ndarray) -> np.ndarray:
        """L^-T B for lower-triangular L (n, n); B (n,) or (n, m)."""
        return solve_triangular(L, B, lower=True, trans="T", check_finite=False)

    def inverse_lower(self, L: np.ndarray, overwrite: bool = False) -> np.ndarray:
        """(L L^T)^-1 (n, n) on and below the diagonal, zero above it; with overwrite L is destroyed."""
        return _la.inverse_lower(L, overwrite=overwrite)

    def outer_minus_inverse(self, alpha: np.ndarray, L: np.ndarray, overwrite: bool = False) -> np.ndarray:
        """alpha alpha^T - (L L^T)^-1 (n, n); with overwrite L is destroyed (saves an n x n array)."""
        return _la.outer_minus_inverse(alpha, L, overwrite=overwrite)

    def sum_log_diag(self, L: np.ndarray) -> float:
        """sum_i log L_ii: half the log-determinant of L L^T."""
        return float(np.sum(np.log(np.diagonal(L))))

    def chol_extend(self, L11: np.ndarray, K12: np.ndarray, K22: np.ndarray, what: str):
        """(L21 (m, n), L22 (m, m), jitter): the factor of [[K11, K12], [K12^T, K22]] from L11."""
        return _la.chol_extend(L11, K12, K22, what=what)

    def stack_factor(self, L11: np.ndarray, L21: np.ndarray, L22: np.ndarray) -> np.ndarray:
        """The lower factor [[L11, 0], [L21, L22]] as one (n + m, n + m) array."""
        n, m = L11.shape[0], L22.shape[0]
        L = np.zeros((n + m, n + m))
        L[:n, :n] = L11
        L[n:, :n] = L21
        L[n:, n:] = L22
        return L


NUMPY = NumpyBackend()


def check_device(device: str | None) -> str | None:
    """``device`` of a tuner or fit, checked at the API boundary: None for numpy on the CPU
    (None or "cpu"), else the torch device string after the backend was created there once (so a
    missing torch or CUDA device is refused before any run, with :func:`get_backend`'s errors)."""
    if device is None or device == "cpu":
        return None
    get_backend("torch", device)
    return device


def get_backend(name: str = "numpy", device: str | None = None):
    """The backend object for ``name`` ("numpy" or "torch") on ``device``.

    numpy runs on the CPU only (device None or "cpu"). torch takes any torch device string
    (default "cpu"); torch must be installed (``pip install gptask[gpu]``) and is imported here,
    never by the numpy path. Raises ValueError for an unknown name or device, ImportError naming the
    extra when torch is missing.
    """
    if not isinstance(name, str) or name not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {name!r}")
    if device is not None and not isinstance(device, str):
        raise ValueError(f"device must be a string such as 'cpu' or 'cuda', got {device!r}")
    if name == "numpy":
        if device not in (None, "cpu"):
            raise ValueError(f"the numpy backend runs on the CPU only, got device={device!r}: "
                             "use backend='torch' for other devices")
        return NUMPY
    from .torch_backend import TorchBackend

    return TorchBackend(device or "cpu")
