"""Expected Improvement for minimisation, in plain and numerically safe log form.

Plain vectorised functions of ``(mean, std, best)``: they know nothing about the model.
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

__all__ = ["expected_improvement", "log_ei", "log_h"]

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
