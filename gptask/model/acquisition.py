"""Acquisition functions for minimisation, in plain and numerically safe log form.

Plain vectorised functions of predictive means and standard deviations: they know nothing about
the model. Expected Improvement (one objective), the expected hypervolume improvement (several
objectives, :func:`log_ehvi`) and the probability of staying below a bound (an output limit, or
"not failing", :func:`log_prob_below`).
For minimisation with ``z = (best - mean) / std``:

    EI = std * h(z),   h(z) = phi(z) + z * Phi(z)

``log_ei`` evaluates ``log EI`` without underflow for very negative ``z`` (where EI itself is 0 in
floating point) using two branches, following the log-EI construction popularised by BoTorch:
``log h(z)`` directly for ``z > -1``; otherwise ``log phi(z) + log1mexp(log(|z| * erfcx(-z/sqrt 2)) +
log(pi/2)/2)``, with the asymptote ``log phi(z) - 2 log|z|`` beyond ``|z| > 1/sqrt(eps)``.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import erfcx, log_ndtr, ndtr

__all__ = ["expected_improvement", "log_ei", "log_ei_averaged", "log_h", "log_ehvi", "log_prob_below", "log_probability_of_improvement"]

#: smallest predictive standard deviation used (a variance floor keeps z finite)
STD_FLOOR = 1e-12
_LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)
_HALF_LOG_PI_OVER_2 = 0.5 * math.log(math.pi / 2)
_INV_SQRT_EPS = 1.0 / math.sqrt(np.finfo(float).eps)


def _log1mexp(x: np.ndarray) -> np.ndarray:
    """``log(1 - exp(x))`` for ``x < 0``, accurate on both sides of ``-log 2``."""
    return np.where(x > -math.log(2.0), np.log(-np.expm1(x)), np.log1p(-np.exp(x)))


def log_h(z: np.ndarray) -> np.ndarray:
    """``log(phi(z) + z Phi(z))``, finite for every finite ``z``; same shape as ``z``."""
    z = np.asarray(z, dtype=float)
    out = np.empty_like(z)
    upper = z > -1.0
    zu = z[upper]
    out[upper] = np.log(np.exp(-0.5 * zu * zu - _LOG_SQRT_2PI) + zu * ndtr(zu))
    zl = z[~upper]
    log_phi = -0.5 * zl * zl - _LOG_SQRT_2PI
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        mid = log_phi + _log1mexp(np.log(erfcx(-zl / math.sqrt(2.0)) * np.abs(zl)) + _HALF_LOG_PI_OVER_2)
    far = log_phi - 2.0 * np.log(np.abs(zl))
    out[~upper] = np.where(zl < -_INV_SQRT_EPS, far, mid)
    return out


def log_ei(mean: np.ndarray, std: np.ndarray, best: float) -> np.ndarray:
    """``log EI`` of minimisation at points with predictive ``mean`` and ``std`` (arrays, shape (n,)).

    ``best`` is the incumbent (lowest observed value) in the same units as ``mean``.
    """
    mean = np.asarray(mean, dtype=float)
    std = np.maximum(np.asarray(std, dtype=float), STD_FLOOR)
    z = (best - mean) / std
    return np.log(std) + log_h(z)


def log_ei_averaged(means: np.ndarray, stds: np.ndarray, best: float) -> np.ndarray:
    """``log`` of the mean EI over M models: means, stds (M, n) predictions of each model at the same n
    points (minimisation, incumbent ``best`` in their common units); (n,). The models weigh alike (draws
    of the hyperparameters' posterior, :meth:`gptask.model.numerics.LCM.laplace_draws`)."""
    logs = log_ei(np.asarray(means, dtype=float), np.asarray(stds, dtype=float), best)
    top = np.max(logs, axis=0)
    return top + np.log(np.mean(np.exp(logs - top), axis=0))


def expected_improvement(mean: np.ndarray, std: np.ndarray, best: float) -> np.ndarray:
    """Plain EI of minimisation, ``std * (phi(z) + z Phi(z))``; underflows to 0 far from ``best``."""
    mean = np.asarray(mean, dtype=float)
    std = np.maximum(np.asarray(std, dtype=float), STD_FLOOR)
    z = (best - mean) / std
    return std * (np.exp(-0.5 * z * z - _LOG_SQRT_2PI) + z * ndtr(z))


def log_probability_of_improvement(mean: np.ndarray, std: np.ndarray, best: float) -> np.ndarray:
    """``log P(y < best)``, for reporting."""
    std = np.maximum(np.asarray(std, dtype=float), STD_FLOOR)
    return log_ndtr((best - np.asarray(mean, dtype=float)) / std)


def log_prob_below(mean: np.ndarray, std: np.ndarray, bound: float | np.ndarray) -> np.ndarray:
    """``log P(Y <= bound)`` for ``Y ~ N(mean, std^2)``: the log probability of meeting an upper
    limit (for a lower limit ``Y >= b`` pass ``-mean`` and ``-b``). Same shape as ``mean``."""
    std = np.maximum(np.asarray(std, dtype=float), STD_FLOOR)
    return log_ndtr((np.asarray(bound, dtype=float) - np.asarray(mean, dtype=float)) / std)


def _log_side(mean: np.ndarray, std: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> np.ndarray:
    """``log E[(upper - max(Y, lower))^+]`` for ``Y ~ N(mean, std^2)``, broadcast.

    ``(u - max(Y, l))^+ = (u - Y)^+ - (l - Y)^+`` for ``l <= u``, and ``E[(u - Y)^+] = std h((u - mean)/std)``,
    so the log is ``log std + log h(a) + log(1 - h(b)/h(a))`` with ``a = (u - mean)/std``,
    ``b = (l - mean)/std`` (``h(-inf) = 0``; ``-inf`` where the side has no width)."""
    a = (upper - mean) / std
    la = log_h(a)
    finite = np.isfinite(lower)
    with np.errstate(invalid="ignore", divide="ignore"):
        b = np.where(finite, (lower - mean) / std, 0.0)
        lb = np.where(finite, log_h(b), -np.inf)
        diff = np.minimum(lb - la, 0.0)
        tail = np.where(finite, np.where(diff < 0.0, _log1mexp(np.minimum(diff, -1e-300)), -np.inf), 0.0)
    return np.log(std) + la + tail


def log_ehvi(mean: np.ndarray, std: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> np.ndarray:
    """``log`` of the expected hypervolume improvement of points with independent Gaussian
    predictions ``mean``, ``std`` (n, d) over a front whose free region below the reference point
    is the boxes ``lower``, ``upper`` (m, d) of :func:`gptask.model.pareto.nondominated_boxes`.

    The improvement of a value ``y`` is ``sum over boxes of prod_k (upper_k - max(y_k, lower_k))^+``;
    with independent objectives the expectation of each product is the product of one-dimensional
    expectations (:func:`_log_side`), so the EHVI is exact: a sum of ``m`` products, computed as a
    log-sum-exp (finite wherever a box lies below the point's mean by many standard deviations).
    Returns (n,); ``-inf`` only when there is no box (the front dominates everything below the
    reference point). Memory: blocks of candidates so that candidates x boxes stays bounded.
    """
    mean = np.atleast_2d(np.asarray(mean, dtype=float))
    std = np.maximum(np.atleast_2d(np.asarray(std, dtype=float)), STD_FLOOR)
    lower, upper = np.asarray(lower, dtype=float), np.asarray(upper, dtype=float)
    if mean.shape != std.shape or lower.shape != upper.shape or (lower.size and lower.shape[1] != mean.shape[1]):
        raise ValueError(f"log_ehvi: mean {mean.shape}, std {std.shape}, boxes {lower.shape}/{upper.shape} "
                         "must agree on the number of objectives")
    out = np.full(len(mean), -np.inf)
    if not len(lower):
        return out
    step = max(1, _EHVI_BLOCK // len(lower))
    for s in range(0, len(mean), step):
        mu, sd = mean[s:s + step, None, :], std[s:s + step, None, :]
        terms = _log_side(mu, sd, lower[None], upper[None]).sum(axis=2)  # (block, m)
        top = np.max(terms, axis=1)
        safe = np.where(np.isfinite(top), top, 0.0)
        with np.errstate(divide="ignore"):
            out[s:s + step] = np.where(np.isfinite(top),
                                       safe + np.log(np.sum(np.exp(terms - safe[:, None]), axis=1)), -np.inf)
    return out


#: candidates x boxes per block in log_ehvi
_EHVI_BLOCK = 100_000
