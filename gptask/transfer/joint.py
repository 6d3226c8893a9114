"""The joint route of new-task prediction: one GP over (task, configuration, problem features).

Used when the problem declares ``features`` or a ``cost_model`` (:class:`gptask.Problem`). One
single-output GP is fitted on every tuned task's observations together (the LCM's data, failed runs
as the LCM imputes them; at most :data:`JOINT_MAX_POINTS`, evenly spaced):

* inputs: the encoded task, the encoded configuration and the problem's features, each feature
  mapped linearly so that the tuned data's range lands in the middle of [0, 1] (a margin of
  :data:`JOINT_FEATURE_MARGIN` times the range on either side, values further out clipped);
* target: the log objective minus the log of the cost model (nothing without one), standardised;
* kernel :data:`JOINT_KERNEL` with one length scale per input, :data:`JOINT_RESTARTS` restarts.

A new task's prediction is that GP's posterior at its configurations: median ``exp(mean)`` times the
cost model, and the std of a new measurement (the GP's noise included). Unlike the over-tasks route
(:mod:`gptask.transfer.predict`), which interpolates each configuration's value between the tuned
tasks, this route learns how the objective depends on quantities such as blocks per process or
flops per core, which the task and parameter coordinates carry only through their interactions;
it extrapolates to task shapes between and beyond the tuned ones through them. Measured on the
16-core PDGEQRF timings, leave-one-size-out (``bench/run_free.py loto``, BENCHMARKS.md).

Imports: the model layer only.
"""

from __future__ import annotations

import numpy as np

from ..model.numerics import LCM

__all__ = ["JointModel", "JOINT_KERNEL", "JOINT_RESTARTS", "JOINT_FEATURE_MARGIN", "JOINT_MAX_POINTS"]

#: kernel of the joint GP
JOINT_KERNEL = "matern52"
#: restarts of its fit (seeded, deterministic)
JOINT_RESTARTS = 2
#: each feature's tuned range is widened by this fraction of its width on both sides before it is
#: mapped onto [0, 1], so a new task's features may lie that far outside the tuned ones unclipped
#: (1.0: the tuned range is the middle third)
JOINT_FEATURE_MARGIN = 1.0
#: the joint GP is fitted on at most this many observations (evenly spaced over the tuned tasks):
#: its fit grows as the cube of the points, and leave-one-task-out checks refit it per task
JOINT_MAX_POINTS = 1000


class JointModel:
    """A fitted joint GP.

    names: the feature names (the problem's, in its order); lo, hi: (k,) the raw feature values
    mapped to 0 and 1; use_cost: whether the target is relative to the cost model; mu, sd: the
    standardisation of the target (log units); gp: the one-task LCM over the
    ``d_task + d_param + k`` input columns.
    """

    def __init__(self, names: list[str], lo: np.ndarray, hi: np.ndarray, use_cost: bool, mu: float, sd: float,
                 gp: LCM) -> None:
        self.names, self.use_cost = list(names), bool(use_cost)
        self.lo, self.hi = np.asarray(lo, float).reshape(-1), np.asarray(hi, float).reshape(-1)
        if len(self.lo) != len(self.names) or len(self.hi) != len(self.names) or not np.all(self.hi > self.lo):
            raise ValueError(f"joint model: feature bounds do not match the {len(self.names)} features")
        self.mu, self.sd, self.gp = float(mu), float(sd), gp

    def inputs(self, task_X: np.ndarray, param_X: np.ndarray, F: np.ndarray) -> np.ndarray:
        """The GP's (n, d_task + d_param + k) inputs from the encoded tasks (n, d_task), the encoded
        configurations (n, d_param) and the raw features (n, k)."""
        scaled = np.clip((F - self.lo) / (self.hi - self.lo), 0.0, 1.0)
        return np.hstack([task_X, param_X, scaled])

    @classmethod
    def fit(cls, names: list[str], task_X: np.ndarray, param_X: np.ndarray, F: np.ndarray,
            log_cost: np.ndarray | None, log_value: np.ndarray, seed: int = 0) -> "JointModel":
        """Fit on n observations: encoded tasks (n, d_task), encoded configurations (n, d_param),
        raw features (n, k), the log cost model (n,) or None, and the log objective (n,)."""
        n = len(log_value)
        if n < 3:
            raise ValueError(f"the joint model needs at least 3 observations, got {n}")
        if n > JOINT_MAX_POINTS:
            keep = np.unique(np.linspace(0, n - 1, JOINT_MAX_POINTS).round().astype(int))
            task_X, param_X, F, log_value = task_X[keep], param_X[keep], F[keep], log_value[keep]
            log_cost = None if log_cost is None else log_cost[keep]
        lo, hi = (F.min(axis=0), F.max(axis=0)) if F.shape[1] else (np.empty(0), np.empty(0))
        width = np.where(hi - lo > 0.0, hi - lo, 1.0)
        lo, hi = lo - JOINT_FEATURE_MARGIN * width, hi + JOINT_FEATURE_MARGIN * width
        z = log_value - (0.0 if log_cost is None else log_cost)
        mu, sd = float(np.mean(z)), float(np.std(z))
        sd = sd if sd > 0.0 else 1.0
        model = cls(names, lo, hi, log_cost is not None, mu, sd, LCM(1, JOINT_KERNEL))
        model.gp.fit([model.inputs(task_X, param_X, F)], [(z - mu) / sd], restarts=JOINT_RESTARTS, seed=seed)
        return model

    def predict(self, task_X: np.ndarray, param_X: np.ndarray, F: np.ndarray,
                log_cost: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        """Log objective of n configurations: mean and std of a new measurement, (n,) each."""
        if self.use_cost and log_cost is None:
            raise ValueError("the joint model was fitted relative to a cost model, and the problem declares none")
        m, v = self.gp.predict(0, self.inputs(task_X, param_X, F), include_noise=True)
        mean = self.mu + self.sd * m + (log_cost if self.use_cost else 0.0)
        return mean, self.sd * np.sqrt(np.maximum(v, 0.0))
