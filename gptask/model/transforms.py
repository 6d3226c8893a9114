"""Output transform applied before the LCM: log for positive objectives, then per-task standardisation.

Run times are positive and span orders of magnitude across tasks, so the model sees
``z = (log y - mu_i) / sigma_i`` for task ``i`` (``log`` only when every observed value is > 0).
Failed evaluations are imputed with the worst (largest) transformed value observed for that task,
so the GP learns that a failing region is bad without ever seeing NaN, inf or a huge penalty.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["OutputTransform"]


@dataclass(frozen=True)
class OutputTransform:
    """Per-task affine map after an optional log. ``mu``, ``sigma``: shape (n_tasks,)."""

    use_log: bool
    mu: np.ndarray
    sigma: np.ndarray

    @classmethod
    def fit(cls, values: Sequence[np.ndarray], use_log: bool | None = None) -> "OutputTransform":
        """Fit on per-task arrays of finite observed values (a task may have none)."""
        values = [np.asarray(v, dtype=float).reshape(-1) for v in values]
        every = np.concatenate(values) if values else np.empty(0)
        if use_log is None:
            use_log = bool(every.size) and bool(np.all(every > 0))
        mus, sigmas = [], []
        for v in values:
            w = np.log(v) if use_log else v
            if w.size == 0:
                mus.append(0.0)
                sigmas.append(1.0)
                continue
            s = float(np.std(w))
            mus.append(float(np.mean(w)))
            sigmas.append(s if s > 1e-12 * max(1.0, abs(float(np.mean(w)))) else 1.0)
        return cls(bool(use_log), np.asarray(mus), np.asarray(sigmas))

    def forward(self, task: int, y: np.ndarray) -> np.ndarray:
        """User units -> model units for task ``task``; ``y`` of any shape."""
        y = np.asarray(y, dtype=float)
        w = np.log(y) if self.use_log else y
        return (w - self.mu[task]) / self.sigma[task]

    def backward(self, task: int, z: np.ndarray) -> np.ndarray:
        """Model units -> user units (the median of the predictive distribution under log)."""
        w = np.asarray(z, dtype=float) * self.sigma[task] + self.mu[task]
        return np.exp(w) if self.use_log else w

    def backward_std(self, task: int, z_mean: np.ndarray, z_std: np.ndarray) -> np.ndarray:
        """Predictive std in user units (log-normal std under log, scaled std otherwise)."""
        z_mean, z_std = np.asarray(z_mean, float), np.asarray(z_std, float)
        s = z_std * self.sigma[task]
        if not self.use_log:
            return s
        m = z_mean * self.sigma[task] + self.mu[task]
        return np.sqrt(np.expm1(s * s)) * np.exp(m + 0.5 * s * s)

    def to_json(self) -> dict:
        return {"use_log": self.use_log, "mu": self.mu.tolist(), "sigma": self.sigma.tolist()}

    @classmethod
    def from_json(cls, d: dict) -> "OutputTransform":
        return cls(bool(d["use_log"]), np.asarray(d["mu"], float), np.asarray(d["sigma"], float))
