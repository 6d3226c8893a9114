"""Sobol indices from a tuning history against those from a space-filling design (issue 40).

    python bench/sensitivity_from_tuning.py --runs 50,100 --seeds 0-2

On Ishigami (a = 7, b = 0.1, three parameters on [-pi, pi]), for each number of runs and seed:
the history of ``gt.tune`` (its points cluster near the minimum) and a Latin hypercube of as many
points, each fitted (``output_transform="none"``), and :func:`gptask.insight.sensitivity` on the
model's mean (``scale="user"``). Printed: the largest error over the parameters of S1 and of ST
against the true indices (analytic, checked here by a brute-force pick-freeze estimate on the
function itself), per design and number of runs, mean and max over the seeds.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import gptask as gt  # noqa: E402
from gptask.insight import sensitivity  # noqa: E402

PI = np.pi
NAMES = ["x0", "x1", "x2"]
#: brute-force samples of the pick-freeze check of the true indices
BRUTE = 400_000


def ishigami(x: np.ndarray, a: float = 7.0, b: float = 0.1) -> np.ndarray:
    return np.sin(x[:, 0]) + a * np.sin(x[:, 1]) ** 2 + b * x[:, 2] ** 4 * np.sin(x[:, 0])


def true_indices() -> tuple[np.ndarray, np.ndarray]:
    """Analytic S1, ST (Ishigami and Homma 1990), checked against brute-force pick-freeze estimates."""
    v1, v2, v13 = 0.5 * (1 + 0.1 * PI ** 4 / 5) ** 2, 49 / 8, 8 * 0.01 * PI ** 8 / 225
    v = v1 + v2 + v13
    s1, st = np.array([v1, v2, 0.0]) / v, np.array([v1 + v13, v2, v13]) / v
    rng = np.random.default_rng(0)
    A, B = rng.uniform(-PI, PI, (BRUTE, 3)), rng.uniform(-PI, PI, (BRUTE, 3))
    fA, fB = ishigami(A), ishigami(B)
    var = np.var(np.concatenate([fA, fB]))
    for i in range(3):
        ABi = A.copy()
        ABi[:, i] = B[:, i]
        fABi = ishigami(ABi)
        b1, bt = np.mean(fB * (fABi - fA)) / var, 0.5 * np.mean((fA - fABi) ** 2) / var
        assert abs(b1 - s1[i]) < 0.02 and abs(bt - st[i]) < 0.02, (i, b1, s1[i], bt, st[i])
    return s1, st


def problem() -> gt.Problem:
    return gt.Problem(gt.Space([gt.Real("t", 0.0, 1.0)]), gt.Space([gt.Real(n, -PI, PI) for n in NAMES]),
                      lambda t, p: float(ishigami(np.array([[p[n] for n in NAMES]]))[0]))


def from_tuning(runs: int, seed: int) -> gt.TuningResult:
    return gt.tune(problem(), tasks=[{"t": 0.5}], budget=runs, seed=seed, progress=False, output_transform="none")


def from_lhs(runs: int, seed: int):
    from scipy.stats import qmc

    X = qmc.scale(qmc.LatinHypercube(3, seed=seed).random(runs), [-PI] * 3, [PI] * 3)
    rows = [{"t": 0.5, **dict(zip(NAMES, x)), "value": float(v)} for x, v in zip(X, ishigami(X))]
    return gt.fit(problem(), rows, progress=False, output_transform="none")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", default="50,100")
    ap.add_argument("--seeds", default="0-2")
    ap.add_argument("--base", type=int, default=1024, help="SALib's N")
    args = ap.parse_args(argv)
    logging.getLogger("gptask").setLevel(logging.ERROR)
    lo, _, hi = args.seeds.partition("-")
    seeds = list(range(int(lo), int(hi or lo) + 1))
    s1, st = true_indices()
    print(f"true S1 {np.round(s1, 3).tolist()}, ST {np.round(st, 3).tolist()}")
    print("| design | runs | max S1 error: mean (max) over seeds | max ST error: mean (max) | seconds |")
    print("|---|---|---|---|---|")
    for runs in (int(r) for r in args.runs.split(",")):
        for name, make in (("tuning history", from_tuning), ("Latin hypercube", from_lhs)):
            e1, et, t0 = [], [], time.perf_counter()
            for seed in seeds:
                rep = sensitivity(make(runs, seed), base=args.base, scale="user", seed=seed)
                e1.append(np.max(np.abs(rep.mean.first - s1)))
                et.append(np.max(np.abs(rep.mean.total - st)))
            print(f"| {name} | {runs} | {np.mean(e1):.2f} ({np.max(e1):.2f}) | {np.mean(et):.2f} ({np.max(et):.2f}) "
                  f"| {time.perf_counter() - t0:.0f} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
