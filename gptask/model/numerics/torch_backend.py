"""The torch array backend (float64 tensors on a CPU or CUDA device); see :mod:`.backend`.

Imported only when ``backend="torch"`` is asked for: torch is an optional extra
(``pip install gptask[gpu]``). Same operations and contracts as :class:`.backend.NumpyBackend`;
a ``segments`` handle is (the task index of every row, T).
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator

import numpy as np
from threadpoolctl import threadpool_limits

from . import linalg as _la

try:
    import torch
except ImportError as exc:  # pragma: no cover - exercised only where torch is absent
    raise ImportError("backend='torch' needs PyTorch: pip install 'gptask[gpu]' (or a torch build "
                      "for your CUDA version)") from exc


def _load_cuda_linalg(dev: "torch.device") -> None:
    """Make torch load its CUDA linear-algebra library now, in this thread. torch loads it lazily at
    the first CUDA factorisation and raises "lazy wrapper should be called at most once" when two
    threads get there together (pytorch issue 90613), which is what the fit's starts on worker
    threads did on an H100. One tiny Cholesky here is enough; later calls cost nothing."""
    torch.linalg.cholesky(torch.ones((1, 1), dtype=torch.float64, device=dev))


class TorchBackend:
    """torch float64 tensors on one device."""

    name = "torch"
    #: one row block (the whole matrix): on an H100 8 blocks made an evaluation 1.5-2.5x slower
    #: (kernel launches and gathers, not flops, dominate there; bench/results_lcm_scale_gpu.md)
    row_blocks = 1

    def __init__(self, device: str = "cpu") -> None:
        try:
            dev = torch.device(device)
        except (RuntimeError, TypeError) as exc:
            raise ValueError(f"device must be a torch device such as 'cpu' or 'cuda', got {device!r}: "
                             f"{exc}") from None
        if dev.type == "cuda" and not torch.cuda.is_available():
            raise ValueError(f"device {device!r} asked for, but torch {torch.__version__} sees no CUDA "
                             "device (a CPU-only build, or no GPU on this node)")
        self.device = str(dev)
        self._dev = dev
        self._f = dict(dtype=torch.float64, device=dev)
        if dev.type == "cuda":
            _load_cuda_linalg(dev)

    # ---- conversion and creation ------------------------------------------------------------
    def asarray(self, a: Any) -> "torch.Tensor":
        if isinstance(a, torch.Tensor):
            return a.to(**self._f)
        return torch.as_tensor(np.asarray(a, dtype=float), **self._f)

    def index(self, a: Any) -> "torch.Tensor":
        if isinstance(a, torch.Tensor):
            return a.to(dtype=torch.long, device=self._dev)
        return torch.as_tensor(np.asarray(a, dtype=np.int64), device=self._dev)

    def to_numpy(self, a: Any) -> np.ndarray:
        if isinstance(a, torch.Tensor):
            return a.detach().cpu().numpy()
        return np.asarray(a)

    def zeros(self, shape: tuple[int, ...]) -> "torch.Tensor":
        return torch.zeros(shape, **self._f)

    def ones(self, shape: tuple[int, ...]) -> "torch.Tensor":
        return torch.ones(shape, **self._f)

    def concat(self, arrays: list, axis: int = 0) -> "torch.Tensor":
        return torch.cat(arrays, dim=axis)

    def einsum(self, spec: str, *operands: "torch.Tensor") -> "torch.Tensor":
        return torch.einsum(spec, *operands)

    def item(self, a: Any) -> float:
        return float(a.item()) if isinstance(a, torch.Tensor) else float(a)

    @contextmanager
    def limit_threads(self, n: int) -> Iterator[None]:
        """At most n torch CPU threads (and BLAS threads) inside; restored on exit. torch's thread
        pool spins like OpenBLAS's: on a loaded 2-core machine a small fit ran 25x slower with 2
        threads than with 1."""
        old = torch.get_num_threads()
        torch.set_num_threads(n)
        try:
            with threadpool_limits(limits=n, user_api="blas"):
                yield
        finally:
            torch.set_num_threads(old)

    # ---- elementwise, in place ------------------------------------------------------------
    def exp_(self, x: "torch.Tensor") -> "torch.Tensor":
        return x.exp_()

    def sqrt_(self, x: "torch.Tensor") -> "torch.Tensor":
        return x.sqrt_()

    def clamp_min_(self, x: "torch.Tensor", v: float) -> "torch.Tensor":
        return x.clamp_min_(v)

    def fill_diagonal_(self, A: "torch.Tensor", v: float) -> None:
        A.diagonal().fill_(v)

    def add_diagonal_(self, A: "torch.Tensor", v: Any) -> None:
        A.diagonal().add_(v)

    def diagonal(self, A: "torch.Tensor") -> "torch.Tensor":
        return A.diagonal()

    def keep_upper_half_(self, D: "torch.Tensor") -> None:
        D.copy_(D.triu())
        D.diagonal().mul_(0.5)

    # ---- task structure -----------------------------------------------------------------------
    def expand(self, B: "torch.Tensor", seg: tuple["torch.Tensor", int],
               seg_cols: tuple["torch.Tensor", int] | None = None) -> "torch.Tensor":
        cols = seg[0] if seg_cols is None else seg_cols[0]
        return B[seg[0]][:, cols]

    def segments(self, counts: np.ndarray) -> tuple["torch.Tensor", int]:
        counts = np.asarray(counts, dtype=np.int64)
        return self.index(np.repeat(np.arange(counts.shape[0]), counts)), int(counts.shape[0])

    def segment_sum(self, M: "torch.Tensor", seg: tuple["torch.Tensor", int], axis: int = 0) -> "torch.Tensor":
        t, T = seg
        shape = (T,) + tuple(M.shape[1:]) if axis == 0 else (M.shape[0], T)
        return torch.zeros(shape, **self._f).index_add_(axis, t, M)

    # ---- linear algebra -----------------------------------------------------------------------
    def cholesky(self, K: "torch.Tensor", what: str) -> tuple["torch.Tensor", float]:
        """(L, jitter) with the jitter escalation of linalg.factor_with_jitter; K is not modified."""
        n = K.shape[0]
        if n == 0:
            return torch.zeros((0, 0), **self._f), 0.0
        diag = K.diagonal()
        if not bool(torch.isfinite(K).all()):
            raise _la.nonfinite_error(what)

        def try_factor(jitter: float):
            Kj = K
            if jitter != 0.0:
                Kj = K.clone()
                Kj.diagonal().add_(jitter)
            L, info = torch.linalg.cholesky_ex(Kj)
            return L if int(info) == 0 else None

        return _la.factor_with_jitter(try_factor, n, float(diag.abs().mean()), what)

    def solve_lower(self, L: "torch.Tensor", B: "torch.Tensor") -> "torch.Tensor":
        if B.ndim == 1:
            return torch.linalg.solve_triangular(L, B[:, None], upper=False)[:, 0]
        return torch.linalg.solve_triangular(L, B, upper=False)

    def solve_upper_t(self, L: "torch.Tensor", B: "torch.Tensor") -> "torch.Tensor":
        if B.ndim == 1:
            return torch.linalg.solve_triangular(L.mT, B[:, None], upper=True)[:, 0]
        return torch.linalg.solve_triangular(L.mT, B, upper=True)

    def inverse_lower(self, L: "torch.Tensor", overwrite: bool = False) -> "torch.Tensor":
        return torch.cholesky_inverse(L).tril_()

    def outer_minus_inverse(self, alpha: "torch.Tensor", L: "torch.Tensor",
                            overwrite: bool = False) -> "torch.Tensor":
        A = torch.cholesky_inverse(L)  # (L L^T)^-1, both triangles
        A.neg_()
        A.addr_(alpha, alpha)
        return A

    def sum_log_diag(self, L: "torch.Tensor") -> float:
        return float(L.diagonal().log().sum().item())

    def chol_extend(self, L11: "torch.Tensor", K12: "torch.Tensor", K22: "torch.Tensor", what: str):
        L21 = self.solve_lower(L11, K12).T
        L22, jitter = self.cholesky(K22 - L21 @ L21.T, what)
        return L21, L22, jitter

    def stack_factor(self, L11: "torch.Tensor", L21: "torch.Tensor", L22: "torch.Tensor") -> "torch.Tensor":
        n, m = L11.shape[0], L22.shape[0]
        L = torch.zeros((n + m, n + m), **self._f)
        L[:n, :n] = L11
        L[n:, :n] = L21
        L[n:, n:] = L22
        return L
