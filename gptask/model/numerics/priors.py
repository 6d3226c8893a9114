"""Priors on the LCM hyperparameters, for maximum a posteriori (MAP) fitting when data are scarce.

Why priors: an autotuner sees 5-20 runs per task. An LCM with Q latent processes over T tasks in d
inputs has Q*d length scales, Q*T*rank mixing weights, Q*T kappas and T noise variances -- often as
many hyperparameters as data points. Maximum likelihood then explains the data by interpolation:
length scales run to their bounds (tiny ones turn a latent process into white noise, huge ones
into a constant), the noise sinks to its floor, the posterior is confident where it knows nothing,
and Expected Improvement degenerates into random search. Box bounds were the only regulariser.
A weakly informative prior per hyperparameter keeps the fit where the data can support it and
costs nothing when the data are plentiful (the log-likelihood grows with N, the prior does not).

The priors (independent; in model units: inputs in the unit cube, outputs of scale
``s2 = mean(y^2)``, about 1 for the per-task standardised outputs the tuner gives the model):

* **length scales** ``log l_qj ~ N(sqrt(2) + log(d)/2, 3)``: the dimension-scaled prior of Hvarfner,
  Hellsten and Nardi (2024) that BoTorch uses by default. Its median ``4.1 sqrt(d)`` says "smooth,
  unless the data say otherwise"; the ``sqrt(d)`` follows the typical distance between points of
  the d-cube, so a 6-parameter space does not start out rougher than a 1-parameter one; the wide
  spread (a factor 5.7 per standard deviation) lets 10-20 points per task pull a length scale to
  0.05 when the function really varies that fast.
* **noise** ``log(noise_i / s2) ~ N(-5, 1.5^2)``: median 0.7 % of the output variance, 0.15-3 %
  within one standard deviation. Repeated launches of one HPC configuration scatter by 4-18 % in
  time (the 16-core PDGEQRF data), i.e. 1-3 % of the variance of standardised log times, while
  analytic test functions and cost models have no noise at all: the prior covers both, and it
  stops the noise from sinking to the floor (the signature of interpolation) unless many points
  agree on it. BoTorch's default, ``N(-4, 1)``, tuned the noise-free families worse (mean regret
  0.0185 against 0.0063 on ``sphere``, 6 tasks x 12 runs, 5 seeds) and predicted the PDGEQRF
  timings no better (cross-validated NLPD 0.54 either way).
* **kappa** ``log(kappa_qi / s2) ~ N(log 0.1, 4)``: the task-specific part of each latent process
  is a tenth of the output scale a priori, with a very wide spread: tasks may be independent, but
  the model must find evidence for it.
* **W** ``W_qis ~ N(0, s2 / (Q rank))``: the shared part of every task's variance is about s2
  in total, so a task's prior variance cannot grow without bound with a long length scale (the
  ridge of "a huge variance and a huge length scale" that extrapolates a linear trend far outside
  the observed values).

Densities are over the log of each positive hyperparameter (and over W itself), including their
normalising constants; gradients are returned with respect to the natural hyperparameters, like
:func:`gptask.model.numerics.lcm.lml_and_grad`.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Mapping

import numpy as np

from .defaults import (PRIOR_KAPPA_LOC, PRIOR_KAPPA_SCALE, PRIOR_LEVEL_LS, PRIOR_LS_LOC, PRIOR_LS_SCALE, PRIOR_NOISE_LOC,
                       PRIOR_NOISE_SCALE, PRIOR_W_SCALE)

__all__ = ["LCMPrior", "resolve_prior"]

_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


def _normal(u: np.ndarray, loc: float | np.ndarray, scale: float) -> tuple[float, np.ndarray]:
    """Sum of the N(loc, scale^2) log densities of the entries of u, and d/du (same shape as u)."""
    z = (u - loc) / scale
    return float(np.sum(-0.5 * z * z) - u.size * (math.log(scale) + _HALF_LOG_2PI)), -z / scale


@dataclass(frozen=True)
class LCMPrior:
    """Independent priors on the LCM hyperparameters (module docstring: which and why).

    lengthscale_loc, lengthscale_scale: log l ~ N(lengthscale_loc + log(d)/2, lengthscale_scale^2).
    noise_loc, noise_scale: log(noise / s2) ~ N(noise_loc, noise_scale^2).
    kappa_loc, kappa_scale: log(kappa / s2) ~ N(kappa_loc, kappa_scale^2).
    w_scale: W entries ~ N(0, w_scale^2 s2 / (Q rank)).
    level_lengthscale: with fidelity levels (``log_density(..., levels=True)``: the last length-scale column
    is the level's), log l ~ N(log level_lengthscale, lengthscale_scale^2) for that column.
    """

    lengthscale_loc: float = PRIOR_LS_LOC
    lengthscale_scale: float = PRIOR_LS_SCALE
    noise_loc: float = PRIOR_NOISE_LOC
    noise_scale: float = PRIOR_NOISE_SCALE
    kappa_loc: float = PRIOR_KAPPA_LOC
    kappa_scale: float = PRIOR_KAPPA_SCALE
    w_scale: float = PRIOR_W_SCALE
    level_lengthscale: float = PRIOR_LEVEL_LS
    #: the dimension the length-scale centre grows with (None: the number of input columns). A
    #: tuner passes its number of parameters: a categorical of k choices, or an ordinal with
    #: indicator columns, spans several columns but is one parameter, and counting its columns
    #: would make every length scale's prior longer (smoother) the more choices there are
    dimension: float | None = None

    def __post_init__(self) -> None:
        for name, value in asdict(self).items():
            if name == "dimension" and value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ValueError(f"LCMPrior.{name} must be a finite number, got {value!r}")
            if name.endswith("scale") and value <= 0.0:
                raise ValueError(f"LCMPrior.{name} must be > 0, got {value!r}")
            if name == "dimension" and value < 1.0:
                raise ValueError(f"LCMPrior.dimension must be >= 1 (or None), got {value!r}")

    def lengthscale_centre(self, d: int) -> float:
        """Prior mode of log l for a d-column input (``dimension`` in place of d when set)."""
        return self.lengthscale_loc + 0.5 * math.log(self.dimension if self.dimension is not None else d)

    def log_density(self, params: Mapping[str, np.ndarray], s2: float,
                    levels: bool = False) -> tuple[float, dict[str, np.ndarray]]:
        """Log prior density at ``params`` (lengthscale (Q, d), W (Q, T, r), kappa (Q, T), noise (T,))
        for outputs of scale ``s2``; returns (value, gradients keyed like params, natural units). levels:
        the last length-scale column is a fidelity level's (its own prior, ``level_lengthscale``)."""
        ls = np.asarray(params["lengthscale"], float)
        d = ls.shape[1] - bool(levels)
        v_ls, g_ls = _normal(np.log(ls[:, :d]), self.lengthscale_centre(d), self.lengthscale_scale)
        if levels:
            v_u, g_u = _normal(np.log(ls[:, d:]), math.log(self.level_lengthscale), self.lengthscale_scale)
            v_ls, g_ls = v_ls + v_u, np.hstack([g_ls, g_u])
        v_t, grads = self.task_log_density(params["W"], params["kappa"], params["noise"], s2)
        grads["lengthscale"] = g_ls / ls
        return v_ls + v_t, grads

    def task_log_density(self, W: np.ndarray, kappa: np.ndarray, noise: np.ndarray,
                         s2: float) -> tuple[float, dict[str, np.ndarray]]:
        """The per-task terms alone: W (Q, T, r), kappa (Q, T), noise (T,) of any T >= 1 tasks (what
        ``LCM.extend`` learns for a new task); returns (value, gradients for W, kappa, noise)."""
        W = np.asarray(W, float)
        kappa = np.asarray(kappa, float)
        noise = np.asarray(noise, float)
        Q, _, r = W.shape
        log_s2 = math.log(s2)
        v_k, g_k = _normal(np.log(kappa), self.kappa_loc + log_s2, self.kappa_scale)
        v_n, g_n = _normal(np.log(noise), self.noise_loc + log_s2, self.noise_scale)
        v_w, g_w = _normal(W, 0.0, self.w_scale * math.sqrt(s2 / (Q * r)))
        return v_w + v_k + v_n, {"W": g_w, "kappa": g_k / kappa, "noise": g_n / noise}

    def to_json(self) -> dict[str, float | None]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "LCMPrior":
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown LCMPrior fields {unknown}; known: {sorted(known)}")
        return cls(**{k: None if v is None else float(v) for k, v in data.items()})


def resolve_prior(prior: Any) -> LCMPrior | None:
    """``"default"`` -> the default :class:`LCMPrior`; ``None`` -> no prior (maximum likelihood);
    an :class:`LCMPrior` -> itself."""
    if prior is None:
        return None
    if isinstance(prior, LCMPrior):
        return prior
    if isinstance(prior, str) and prior == "default":
        return LCMPrior()
    raise ValueError(f"prior must be 'default', None (maximum likelihood) or an LCMPrior, got {prior!r}")
