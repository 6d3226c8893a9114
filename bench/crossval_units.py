"""Issue 45: gt.crossval's within-task coverage at 5-6 points per task against a fold loop written out
by hand that puts each task in the units (mean, sd of log time) of its fold's remaining points. The
family: tests/test_crossval.py's truth, t(m, x) = m/100 (1 + 2 (x - m/2000)^2), k = 3, tasks
m = 100/400/700/1000, n uniform x per task, log-normal noise 0.1, gt.fit with the log transform
(restarts=1), 5 folds, fold seed 0; data seeds 0-11. Run it once per code base (the fix changes
within_task_cv, the loop stays):

    PYTHONPATH=$PWD OMP_NUM_THREADS=1 .venv/bin/python bench/crossval_units.py bench/results/crossval_units_after.json
"""
import json
import math
import sys

import numpy as np

import gptask as gt
from gptask.model.numerics import LCM
from gptask.transfer.crossval import Z95, within_task_cv

NOISE, FOLDS, FOLD_SEED, SEEDS, SIZES = 0.1, 5, 0, range(12), (5, 6)


def truth(task, p):
    return task["m"] / 100 * (1.0 + 2.0 * (p["x"] - task["m"] / 2000) ** 2 + 0.05 * (p["k"] - 3) ** 2)


def problem():
    return gt.Problem(gt.Space([gt.Integer("m", 100, 1000)]),
                      gt.Space([gt.Real("x", 0.0, 1.0), gt.Integer("k", 1, 8)]), truth, name="cv")


def rows(seed, n):
    rng = np.random.default_rng(seed)
    out = []
    for m in (100, 400, 700, 1000):
        for _ in range(n):
            p = {"x": float(rng.random()), "k": 3}
            out.append({"m": m, **p, "value": truth({"m": m}, p) * math.exp(NOISE * rng.standard_normal())})
    return out


def by_hand(fitted):
    """Coverage of the fold loop with each task standardised on the fold's remaining points."""
    model, space, T = fitted.model, fitted.problem.param_space, len(fitted.tasks)
    trials = [[t for t in fitted.history if t["task_index"] == i] for i in range(T)]
    rng = np.random.default_rng(FOLD_SEED)
    fold = [rng.permutation(len(mine)) % FOLDS for mine in trials]
    X = [space.encode([t["params"] for t in mine]) for mine in trials]
    w = [np.log([t["value"] for t in mine]) for mine in trials]
    inside = []
    for k in range(FOLDS):
        units = [(w[i][fold[i] != k].mean(), w[i][fold[i] != k].std()) for i in range(T)]
        ref = LCM(model.n_latent, model.kernel, model.rank).condition(
            [X[i][fold[i] != k] for i in range(T)],
            [(w[i][fold[i] != k] - a) / b for i, (a, b) in enumerate(units)], model.get_params())
        ref.prior = model.prior
        for i in range(T):
            h = np.flatnonzero(fold[i] == k)
            if h.size:
                m, v = ref.predict_calibrated(i, X[i][h], include_noise=True)
                a, b = units[i]
                inside += list(np.abs(w[i][h] - (a + b * m)) <= Z95 * b * np.sqrt(v))
    return float(np.mean(inside))


if __name__ == "__main__":
    out = []
    for n in SIZES:
        for s in SEEDS:
            fitted = gt.fit(problem(), rows(s, n), restarts=1, output_transform="log", progress=False)
            out.append({"n": n, "seed": s, "crossval": within_task_cv(fitted, FOLDS, FOLD_SEED).summary()["coverage"],
                        "by_hand": by_hand(fitted)})
            print(out[-1], flush=True)
    if len(sys.argv) > 1:
        with open(sys.argv[1], "w") as fh:
            json.dump(out, fh, indent=1)
