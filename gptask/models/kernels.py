"""Stationary ARD kernels with unit variance, vectorised over point sets.

Convention (the same as GPy's ``RBF`` and ``Matern52`` with ``variance=1``)::

    r^2(x, x') = sum_d ((x_d - x'_d) / l_d)^2
    rbf:       k = exp(-r^2 / 2)
    matern52:  k = (1 + sqrt(5) r + 5/3 r^2) exp(-sqrt(5) r)

The GPTune paper's eq. (5) writes the squared exponential as exp(-sum_d (x_d - x'_d)^2 / l'_d),
so its length scale maps to ours by ``l'_d = 2 l_d^2``. The kernel variance is fixed to 1: in the
LCM the coregionalisation matrices B_q carry the scale.

Every kernel also returns a "derivative factor" F with
``dk/dl_d = F * (x_d - x'_d)^2 / l_d^3`` (elementwise), which is all the length-scale gradient
needs; for Matern-5/2 this form has no division by r, so it is safe at r = 0.
"""

from __future__ import annotations

import numpy as np

KERNELS = ("rbf", "matern52")

_SQRT5 = np.sqrt(5.0)


def check_kernel(name: str) -> str:
    """Return ``name`` if it is a known kernel, else raise ValueError."""
    if not isinstance(name, str) or name not in KERNELS:
        raise ValueError(f"kernel must be one of {KERNELS}, got {name!r}")
    return name


def scaled_sqdist(X1: np.ndarray, X2: np.ndarray, lengthscale: np.ndarray) -> np.ndarray:
    """Squared distances after dividing each dimension by its length scale.

    X1: (n1, d), X2: (n2, d), lengthscale: (d,) positive. Returns (n1, n2), clipped at 0.
    """
    A = X1 / lengthscale
    Bm = A if X2 is X1 else X2 / lengthscale
    r2 = A @ Bm.T
    r2 *= -2.0
    r2 += np.einsum("ij,ij->i", A, A)[:, None]
    r2 += np.einsum("ij,ij->i", Bm, Bm)[None, :]
    np.maximum(r2, 0.0, out=r2)
    if X2 is X1:
        np.fill_diagonal(r2, 0.0)
    return r2


def from_sqdist(name: str, r2: np.ndarray, want_factor: bool = False):
    """Kernel values from scaled squared distances ``r2`` (overwritten for speed).

    Returns K (same shape as r2), and with ``want_factor`` also the derivative factor F
    (see module docstring; for rbf F is K itself, the same array object).
    """
    if name == "rbf":
        r2 *= -0.5
        K = np.exp(r2, out=r2)
        return (K, K) if want_factor else K
    if name == "matern52":
        r = np.sqrt(r2)
        e = np.exp(-_SQRT5 * r)
        # K = (1 + s r + 5/3 r^2) e ; F = 5/3 (1 + s r) e
        r *= _SQRT5
        r += 1.0
        r *= e
        if want_factor:
            F = r * (5.0 / 3.0)
        r2 *= 5.0 / 3.0
        r2 *= e
        r2 += r
        return (r2, F) if want_factor else r2
    raise ValueError(f"kernel must be one of {KERNELS}, got {name!r}")


def gram(name: str, X: np.ndarray, lengthscale: np.ndarray, want_factor: bool = False):
    """Symmetric kernel matrix k(X, X) (n, n), optionally with the derivative factor F.

    Same values as ``kernel(name, X, X, lengthscale)``; the rbf path fuses the distance and the
    exponential into fewer passes over the n x n array (the LCM's hot loop).
    """
    if name != "rbf":
        return from_sqdist(name, scaled_sqdist(X, X, lengthscale), want_factor)
    # E = a.b - |a|^2/2 - |b|^2/2 = -r^2/2 as ONE gemm of the augmented rows [a, -|a|^2/2, 1]
    # and [b, 1, -|b|^2/2]: no separate passes over the n x n array for the norms
    A = X / lengthscale
    h = 0.5 * np.einsum("ij,ij->i", A, A)[:, None]
    one = np.ones_like(h)
    E = np.hstack([A, -h, one]) @ np.hstack([A, one, -h]).T
    np.fill_diagonal(E, 0.0)
    K = np.exp(E, out=E)
    return (K, K) if want_factor else K


def kernel(name: str, X1: np.ndarray, X2: np.ndarray, lengthscale: np.ndarray) -> np.ndarray:
    """Kernel matrix k(X1, X2): X1 (n1, d), X2 (n2, d), lengthscale (d,). Returns (n1, n2)."""
    return from_sqdist(name, scaled_sqdist(X1, X2, lengthscale))
