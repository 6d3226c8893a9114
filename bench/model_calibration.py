"""Calibration of the LCM's predictive intervals on generated multitask families (issue 45, model half).

A family: a smooth random GP draw (random Fourier features of an RBF kernel, generating length scales
log-uniform in [0.15, 0.8] per input) shared by every task, plus a task-specific draw, mixed per task
(a_i f0 + b_i g_i), then shifted and scaled per task and measured with Gaussian noise. The model is fitted
as the tuner fits it (per-task standardised outputs, Matern-5/2, one latent process, 3 restarts, the
tuner's prior) on n points per task, and scored on held-out points of every task: coverage of the
central 95 % interval of the latent function (against the noise-free value) and of a new measurement
(against a fresh noisy value), the RMSE over the latent's standard deviation, and the fitted length scales
against the generating ones.

Seeds 1000-1999 are for tuning the defaults (issue 45 keeps the judged seeds elsewhere).

    PYTHONPATH=$PWD .venv/bin/python bench/model_calibration.py --seeds 1000-1011 --n 5,12,20,30
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np

from gptask.model.numerics import LCM
from gptask.model.numerics.priors import LCMPrior

Z95 = 1.959963984540054


def draw_family(seed: int, n: int | None = None) -> dict:
    """A random family: d inputs (2-6), T tasks (6-20), n points per task (12-20 when None), per
    task (n, d) inputs, noisy outputs, and callables for the latent and noisy values anywhere."""
    rng = np.random.default_rng(seed)
    d = int(rng.integers(2, 7))
    T = int(rng.integers(6, 21))
    n = int(rng.integers(12, 21)) if n is None else n
    ls = np.exp(rng.uniform(np.log(0.15), np.log(0.8), size=d))
    M = 400

    def rff():
        omega = rng.standard_normal((M, d)) / ls
        phase = rng.uniform(0, 2 * np.pi, M)
        w = rng.standard_normal(M)
        return lambda X: np.sqrt(2.0 / M) * np.cos(X @ omega.T + phase) @ w

    f0 = rff()
    own = [rff() for _ in range(T)]
    share = rng.uniform(0.5, 1.0, T)  # fraction of each task's variance that is shared
    sign = np.where(rng.random(T) < 0.85, 1.0, -1.0)
    shift = rng.normal(0, 3, T)
    scale = np.exp(rng.normal(0, 1, T))
    noise_sd = float(np.exp(rng.uniform(np.log(0.005), np.log(0.15))))  # relative to the latent's sd

    def latent(i, X):
        return shift[i] + scale[i] * (sign[i] * np.sqrt(share[i]) * f0(X) + np.sqrt(1 - share[i]) * own[i](X))

    def noisy(i, X, r):
        return latent(i, X) + scale[i] * noise_sd * r.standard_normal(X.shape[0])

    X = [rng.random((n, d)) for _ in range(T)]
    y = [noisy(i, X[i], rng) for i in range(T)]
    return {"d": d, "T": T, "n": n, "ls": ls, "noise_sd": noise_sd, "X": X, "y": y, "latent": latent,
            "noisy": noisy, "scale": scale, "rng": rng}


def score(fam: dict, model: LCM, mu: np.ndarray, sd: np.ndarray, n_test: int = 100) -> dict:
    rng = np.random.default_rng(12345)
    inside_l, inside_n, err2, var_f = [], [], [], []
    for i in range(fam["T"]):
        Xt = rng.random((n_test, fam["d"]))
        f = (fam["latent"](i, Xt) - mu[i]) / sd[i]
        y = (fam["noisy"](i, Xt, rng) - mu[i]) / sd[i]
        m, v = model.predict(i, Xt)
        _, vn = model.predict(i, Xt, include_noise=True)
        inside_l.append(np.abs(f - m) <= Z95 * np.sqrt(v))
        inside_n.append(np.abs(y - m) <= Z95 * np.sqrt(vn))
        err2.append(np.mean((f - m) ** 2))
        var_f.append(np.var(f))
    return {"cov_latent": float(np.mean(inside_l)), "cov_noisy": float(np.mean(inside_n)),
            "nrmse": float(np.sqrt(np.mean(err2) / np.mean(var_f)))}


def fit(fam: dict, seed: int):
    mu = np.array([y.mean() for y in fam["y"]])
    sd = np.array([y.std() for y in fam["y"]])
    z = [(y - m) / s for y, m, s in zip(fam["y"], mu, sd)]
    model = LCM(n_latent=1, kernel="matern52").fit(fam["X"], z, restarts=3, seed=seed,
                                                     prior=LCMPrior(dimension=float(fam["d"])))
    return model, mu, sd


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", default="1000-1011")
    ap.add_argument("--n", default="12,20")
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    lo, _, hi = a.seeds.partition("-")
    seeds = range(int(lo), int(hi or lo) + 1)
    rows = []
    for n in [int(v) for v in a.n.split(",")]:
        for s in seeds:
            fam = draw_family(s, n)
            t0 = time.perf_counter()
            model, mu, sd = fit(fam, s)
            row = {"seed": s, "n": n, "d": fam["d"], "T": fam["T"], "noise_sd": fam["noise_sd"],
                   **score(fam, model, mu, sd), "seconds": time.perf_counter() - t0,
                   "ls_true": fam["ls"].round(3).tolist(), "ls_fit": model.lengthscales[0].round(3).tolist(),
                   "noise_fit": float(np.mean(model.get_params()["noise"])),
                   "flags": list(model.fit_report.flags_after)}
            rep = model.fit_report
            row.update({k: getattr(rep, k) for k in ("variance_scale", "collapsed", "collapse_refit") if hasattr(rep, k)})
            rows.append(row)
            print(json.dumps(row), flush=True)
    for n in sorted({r["n"] for r in rows}):
        rs = [r for r in rows if r["n"] == n]
        cl, cn = [r["cov_latent"] for r in rs], [r["cov_noisy"] for r in rs]
        print(f"n={n}: latent coverage mean {np.mean(cl):.3f} worst {min(cl):.3f}; noisy mean {np.mean(cn):.3f} "
              f"worst {min(cn):.3f}; nRMSE mean {np.mean([r['nrmse'] for r in rs]):.3f}", file=sys.stderr)
    if a.out:
        with open(a.out, "w") as fh:
            json.dump(rows, fh, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
