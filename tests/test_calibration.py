"""Calibrated predictions of the tuner's default surrogate (issue 12): on held-out points the 95 %
predictive intervals (noise included) cover 85-99 % of them, on the measured 16-core PDGEQRF timings
(5-fold within-task cross-validation of log time) and on the mixed integer/categorical family.

The model is built the way the tuner builds it: log of the positive values, per-task
standardisation from the training points only, then ``LCM(SURROGATE_N_LATENT, SURROGATE_KERNEL)``
fitted by MAP with the default priors. The reference is the held-out measurements themselves.
"""

import csv
from pathlib import Path

import numpy as np
import pytest

from gptask.problem.functions import mixed_problem
from gptask.model.numerics import LCM
from gptask.model.numerics.defaults import SURROGATE_KERNEL, SURROGATE_N_LATENT
from gptask.space.sampling import lhs_points
from gptask.model.transforms import OutputTransform
from gptask.tuning import resolve_tasks

XEON16 = Path(__file__).resolve().parents[1] / "apps" / "scalapack_qr" / "data" / "xeon16" / "runs.csv"
Z95 = 1.959963984540054


def fit_default(X_train, y_train, seed=0):
    """The tuner's surrogate on raw positive values y_train[i] (n_i,): (model, transform)."""
    transform = OutputTransform.fit(y_train, use_log=True)
    z = [transform.forward(i, y) for i, y in enumerate(y_train)]
    model = LCM(SURROGATE_N_LATENT, SURROGATE_KERNEL).fit(X_train, z, restarts=2, seed=seed)
    return model, transform


def covered(model, transform, X_test, y_test):
    """Per held-out point: inside the 95 % predictive interval of its task (log units)?"""
    hits = []
    for i, (X, y) in enumerate(zip(X_test, y_test)):
        if len(y) == 0:
            continue
        mean, var = model.predict(i, X, include_noise=True)
        z = transform.forward(i, y)
        hits.append(np.abs(z - mean) <= Z95 * np.sqrt(var))
    return np.concatenate(hits)


def test_intervals_on_measured_pdgeqrf_timings_cover_85_to_99_percent():
    from apps.scalapack_qr.problem import problem

    space = problem(m_max=4000, cores=16, backend="model").param_space
    rows = list(csv.DictReader(XEON16.open()))
    sizes = sorted({(int(r["m"]), int(r["n"])) for r in rows})
    X, y = [], []
    for size in sizes:
        mine = [r for r in rows if (int(r["m"]), int(r["n"])) == size]
        X.append(space.encode([{k: int(r[k]) for k in space.names} for r in mine]))
        y.append(np.array([float(r["time"]) for r in mine]))
    assert sum(len(v) for v in y) == 590 and len(sizes) == 8
    rng = np.random.default_rng(0)
    folds = [rng.permutation(len(v)) % 5 for v in y]
    hits = []
    for f in range(5):
        model, tr = fit_default([x[fo != f] for x, fo in zip(X, folds)], [v[fo != f] for v, fo in zip(y, folds)])
        hits.append(covered(model, tr, [x[fo == f] for x, fo in zip(X, folds)], [v[fo == f] for v, fo in zip(y, folds)]))
    coverage = float(np.mean(np.concatenate(hits)))
    assert 0.85 <= coverage <= 0.99, coverage


def test_intervals_on_the_mixed_family_cover_85_to_99_percent():
    """6 LHS tasks x 12 LHS points per task (the tuner's regime), 100 uniform held-out
    configurations per task, five independent draws."""
    problem = mixed_problem()
    space = problem.param_space
    hits = []
    for seed in range(5):
        rng = np.random.default_rng(seed)
        tasks = resolve_tasks(problem, 6, seed)
        train = [lhs_points(space, 12, rng) for _ in tasks]
        test = [space.decode(space.snap(rng.random((100, space.n_columns)))) for _ in tasks]
        values = [np.array([problem.objective(t, p) for p in pts]) for t, pts in zip(tasks, train)]
        model, tr = fit_default([space.encode(p) for p in train], values, seed=seed)
        truth = [np.array([problem.objective(t, p) for p in pts]) for t, pts in zip(tasks, test)]
        hits.append(covered(model, tr, [space.encode(p) for p in test], truth))
    coverage = float(np.mean(np.concatenate(hits)))
    assert 0.85 <= coverage <= 0.99, coverage
