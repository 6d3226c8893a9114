"""Two more model classes for bench/archive/model_ranking.py (issue 23): an intrinsic
coregionalisation model with a free-form task covariance, with a product or an additive kernel.

* task covariance ``B = L L^T`` with ``L`` lower-triangular and free (T x T): any correlation
  between the GPUs, two families included, where the tuner's LCM has a rank-1 ``W W^T`` plus a
  diagonal;
* ``product``: one Matérn 5/2 kernel with a length scale per encoded column, as the tuner's;
* ``additive``: a convex mix (softmax weights) of that kernel and one Matérn 5/2 kernel per
  parameter on its own columns (the main effects a few runs can estimate, CoCaBO's mix of sum and
  product kernels).

Fitted by maximum likelihood with a weak log-normal prior on the length scales (400 Adam steps,
torch, float64). Needs torch (the project's optional backend); a prototype, not the tuner's model.
"""

from __future__ import annotations

import numpy as np
import torch

STEPS = 400
LEARNING_RATE = 0.05
LENGTH_PRIOR_VAR = 4.0  # variance of log length scale (encoded columns in [0, 1])


def _matern52(X1: torch.Tensor, X2: torch.Tensor, ls: torch.Tensor) -> torch.Tensor:
    s5 = np.sqrt(5.0) * torch.cdist(X1 / ls, X2 / ls)
    return (1 + s5 + s5 ** 2 / 3) * torch.exp(-s5)


class FreeICM:
    """ICM over T tasks; ``groups``: each parameter's column slice (used by ``kind="additive"``)."""

    def __init__(self, kind: str, n_tasks: int, n_columns: int, groups: list[slice]) -> None:
        if kind not in ("product", "additive"):
            raise ValueError(f"kind must be 'product' or 'additive', got {kind!r}")
        self.kind, self.groups = kind, groups
        dt = torch.float64
        self.p = {"log_ls": torch.zeros(n_columns, dtype=dt, requires_grad=True),
                  "L": torch.eye(n_tasks, dtype=dt).requires_grad_(True),
                  "log_noise": torch.full((n_tasks,), -3.0, dtype=dt, requires_grad=True)}
        if kind == "additive":
            self.p["log_ls_main"] = torch.zeros(n_columns, dtype=dt, requires_grad=True)
            self.p["mix"] = torch.zeros(len(groups) + 1, dtype=dt, requires_grad=True)

    def _kx(self, X1: torch.Tensor, X2: torch.Tensor) -> torch.Tensor:
        K = _matern52(X1, X2, torch.exp(self.p["log_ls"]))
        if self.kind == "product":
            return K
        w = torch.softmax(self.p["mix"], 0)
        ls = torch.exp(self.p["log_ls_main"])
        K = w[0] * K
        for g, sl in enumerate(self.groups):
            K = K + w[g + 1] * _matern52(X1[:, sl], X2[:, sl], ls[sl])
        return K

    def task_covariance(self) -> torch.Tensor:
        L = torch.tril(self.p["L"])
        return L @ L.T

    def _k(self, X1, t1, X2, t2):
        return self.task_covariance()[t1][:, t2] * self._kx(X1, X2)

    def _chol(self):
        K = self._k(self.X, self.t, self.X, self.t) + torch.diag(torch.exp(self.p["log_noise"])[self.t] + 1e-6)
        return torch.linalg.cholesky(K)

    def fit(self, X: np.ndarray, t: np.ndarray, y: np.ndarray, seed: int = 0) -> "FreeICM":
        """X (n, n_columns) encoded, t (n,) task numbers, y (n,) standardised outputs."""
        torch.manual_seed(seed)
        self.X, self.t, self.y = torch.as_tensor(X), torch.as_tensor(t), torch.as_tensor(y)[:, None]
        opt = torch.optim.Adam(list(self.p.values()), lr=LEARNING_RATE)
        for _ in range(STEPS):
            opt.zero_grad()
            Lc = self._chol()
            a = torch.cholesky_solve(self.y, Lc)
            loss = 0.5 * (self.y * a).sum() + torch.log(torch.diag(Lc)).sum()
            for name in ("log_ls", "log_ls_main"):
                if name in self.p:
                    loss = loss + 0.5 * (self.p[name] ** 2).sum() / LENGTH_PRIOR_VAR
            loss.backward()
            opt.step()
        with torch.no_grad():
            self.alpha = torch.cholesky_solve(self.y, self._chol())
        return self

    def predict(self, i: int, Xs: np.ndarray) -> np.ndarray:
        """Posterior mean (m,) of task ``i`` at Xs (m, n_columns)."""
        with torch.no_grad():
            Xs = torch.as_tensor(Xs)
            return (self._k(Xs, torch.full((len(Xs),), i), self.X, self.t) @ self.alpha)[:, 0].numpy()
