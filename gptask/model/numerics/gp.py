"""Single-output GP: the LCM with one task and one latent process (one code path).

Its signal variance is W^2 + kappa of that LCM (the split between the two is irrelevant here).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .arrays import as_inputs, as_outputs
from .lcm import LCM


class GP:
    """Exact GP with a unit-variance ARD kernel scaled by a fitted signal variance, plus noise.

    X: (n, d) in [0, 1]; y: (n,) used as given (zero prior mean: standardise first if needed).
    """

    def __init__(self, kernel: str = "rbf") -> None:
        self.lcm = LCM(n_latent=1, kernel=kernel, rank=1)

    def fit(self, X: np.ndarray, y: np.ndarray, restarts: int = 4, seed: int = 0,
            maxiter: int | None = None, prior: Any = "default") -> "GP":
        """Fit the hyperparameters (MAP under ``prior``, or maximum likelihood with ``prior=None``;
        see :meth:`gptask.model.numerics.LCM.fit`) by multi-start L-BFGS-B; returns self."""
        X = as_inputs(X, "X")
        y = as_outputs(y, "y", X.shape[0])
        self.lcm.fit([X], [y], restarts=restarts, seed=seed, maxiter=maxiter, prior=prior)
        return self

    def predict(self, X: np.ndarray, include_noise: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """Posterior mean (n,) and variance (n,) at X (n, d)."""
        return self.lcm.predict(0, X, include_noise=include_noise)

    def log_likelihood(self) -> float:
        return self.lcm.log_likelihood()

    @property
    def lengthscales(self) -> np.ndarray:
        """(d,) length scales."""
        return self.lcm.lengthscales[0]

    @property
    def variance(self) -> float:
        """Signal variance (prior variance of the latent function)."""
        return float(self.lcm.coregionalization()[0, 0, 0])

    @property
    def noise(self) -> float:
        return float(self.lcm.get_params()["noise"][0])
