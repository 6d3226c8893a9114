"""Shared synthetic data and random hyperparameters for the LCM tests."""

import numpy as np


def make_data(sizes, d=2, seed=0, noise=0.05):
    """Heterotopic data from two shared latent functions mixed per task."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((len(sizes), 2))
    Xs, ys = [], []
    for i, n in enumerate(sizes):
        X = rng.random((n, d))
        u1 = np.sin(4 * X[:, 0]) + X[:, -1]
        u2 = np.cos(3 * X.sum(axis=1))
        Xs.append(X)
        ys.append(a[i, 0] * u1 + a[i, 1] * u2 + noise * rng.standard_normal(n))
    return Xs, ys


def random_params(Q, T, d, rank=1, seed=0):
    rng = np.random.default_rng(seed)
    return {
        "lengthscale": rng.uniform(0.2, 1.0, (Q, d)),
        "W": rng.standard_normal((Q, T, rank)),
        "kappa": rng.uniform(0.05, 0.5, (Q, T)),
        "noise": rng.uniform(0.01, 0.1, T),
    }
