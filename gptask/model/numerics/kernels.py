"""Stationary ARD kernels with unit variance, vectorised over point sets.

Convention (the same as GPy's ``RBF`` and ``Matern52`` with ``variance=1``)::

    r^2(x, x') = sum_d ((x_d - x'_d) / l_d)^2
    rbf:       k = exp(-r^2 / 2)
    matern52:  k = (1 + sqrt(5) r + 5/3 r^2) exp(-sqrt(5) r)

The GPTune paper's eq. (5) writes the squared exponential as exp(-sum_d (x_d - x'_d)^2 / l'_d),
so its length scale maps to ours by ``l'_d = 2 l_d^2``. The kernel variance is fixed to 1: in the
LCM the coregionalisation matrices B_q carry the scale.

Every function takes the array backend ``bk`` of its arrays (:mod:`.backend`; numpy by default).

Every kernel also returns a "derivative factor" F with
``dk/dl_d = F * (x_d - x'_d)^2 / l_d^3`` (elementwise), which is all the length-scale gradient
needs; for Matern-5/2 this form has no division by r, so it is safe at r = 0.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .backend import NUMPY

KERNELS = ("rbf", "matern52")

_SQRT5 = np.sqrt(5.0)


def check_kernel(name: str) -> str:
    """Return ``name`` if it is a known kernel, else raise ValueError."""
    if not isinstance(name, str) or name not in KERNELS:
        raise ValueError(f"kernel must be one of {KERNELS}, got {name!r}")
    return name


def scaled_sqdist(X1: Any, X2: Any, lengthscale: Any, bk: Any = NUMPY) -> Any:
    """Squared distances after dividing each dimension by its length scale.

    X1: (n1, d), X2: (n2, d), lengthscale: (d,) positive, all arrays of backend ``bk``
    (:mod:`.backend`; numpy by default). Returns (n1, n2), clipped at 0.
    """
    A = X1 / lengthscale
    Bm = A if X2 is X1 else X2 / lengthscale
    r2 = A @ Bm.T
    r2 *= -2.0
    r2 += bk.einsum("ij,ij->i", A, A)[:, None]
    r2 += bk.einsum("ij,ij->i", Bm, Bm)[None, :]
    bk.clamp_min_(r2, 0.0)
    if X2 is X1:
        bk.fill_diagonal_(r2, 0.0)
    return r2


def from_sqdist(name: str, r2: Any, want_factor: bool = False, bk: Any = NUMPY):
    """Kernel values from scaled squared distances ``r2`` (overwritten for speed).

    Returns K (same shape as r2), and with ``want_factor`` also the derivative factor F
    (see module docstring; for rbf F is K itself, the same array object). Arrays of backend ``bk``.
    """
    if name == "rbf":
        r2 *= -0.5
        K = bk.exp_(r2)
        return (K, K) if want_factor else K
    if name == "matern52":
        # s = sqrt(5) r;  e = exp(-s);  P = (1 + s) e;  K = P + s^2 e / 3;  F = 5/3 P.
        # Three n1 x n2 buffers: s (r2's), e (becomes K) and P (becomes F).
        s = bk.sqrt_(r2)
        s *= _SQRT5
        e = s * -1.0
        bk.exp_(e)
        P = s + 1.0
        P *= e
        e *= s
        e *= s
        e *= 1.0 / 3.0
        e += P
        if not want_factor:
            return e
        P *= 5.0 / 3.0
        return e, P
    raise ValueError(f"kernel must be one of {KERNELS}, got {name!r}")


def gram(name: str, X: Any, lengthscale: Any, want_factor: bool = False, bk: Any = NUMPY):
    """Symmetric kernel matrix k(X, X) (n, n), optionally with the derivative factor F.

    Same values as ``kernel(name, X, X, lengthscale)``; the rbf path fuses the distance and the
    exponential into fewer passes over the n x n array (the LCM's hot loop).
    """
    if name != "rbf":
        return from_sqdist(name, scaled_sqdist(X, X, lengthscale, bk), want_factor, bk)
    # E = a.b - |a|^2/2 - |b|^2/2 = -r^2/2 as ONE gemm of the augmented rows [a, -|a|^2/2, 1]
    # and [b, 1, -|b|^2/2]: no separate passes over the n x n array for the norms
    A = X / lengthscale
    h = 0.5 * bk.einsum("ij,ij->i", A, A)[:, None]
    one = bk.ones(h.shape)
    E = bk.concat([A, -h, one], axis=1) @ bk.concat([A, one, -h], axis=1).T
    bk.fill_diagonal_(E, 0.0)
    K = bk.exp_(E)
    return (K, K) if want_factor else K


def kernel(name: str, X1: Any, X2: Any, lengthscale: Any, bk: Any = NUMPY) -> Any:
    """Kernel matrix k(X1, X2): X1 (n1, d), X2 (n2, d), lengthscale (d,). Returns (n1, n2)."""
    return from_sqdist(name, scaled_sqdist(X1, X2, lengthscale, bk), bk=bk)
