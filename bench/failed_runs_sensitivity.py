"""Sensitivity on a campaign with failed runs (issue 40): 4 tasks, a memory limit (mb * nb * p too
large: the objective raises) and random crashes; the true total Sobol indices of log(objective)
by brute force (Jansen's estimator on the true function, 2^16 base points) against what
``gt.sensitivity`` and the report's "can be fixed" verdict say.

    PYTHONPATH=$PWD .venv/bin/python bench/failed_runs_sensitivity.py [--seed 0] [--report out.html]
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
from pathlib import Path

import numpy as np

import gptask as gt
from gptask.evaluation.evaluate import EvaluationFailed
from gptask.insight.sensitivity import encoded_sample

#: log2 of the memory limit on mb * nb * p (runs above it fail)
MEMORY_LOG2 = 15.0
#: probability that a run crashes at random
CRASH = 0.08
TASKS = [{"n": n} for n in (1000, 2000, 4000, 8000)]


def space() -> gt.Space:
    return gt.Space([gt.Integer("p", 1, 64, log=True), gt.Integer("mb", 8, 128, log=True),
                     gt.Integer("nb", 8, 128, log=True), gt.Real("x", 0.0, 1.0),
                     gt.Categorical("alg", ["a", "b", "c"])])


def log_time(n: float, p: float, mb: float, nb: float, x: float, alg: str) -> float:
    """The true log run time: p dominates (too few processes: slow; too many: communication)."""
    lp = np.log2(p)
    return (np.log(n / 1000.0) + 0.06 * (lp - 4.0) ** 2 + 0.06 * (np.log2(mb) - 5.0) ** 2
            + 0.04 * (np.log2(nb) - 5.0) ** 2 + 0.25 * x + {"a": 0.0, "b": 0.03, "c": 0.06}[alg])


def fails(p: float, mb: float, nb: float) -> bool:
    return np.log2(mb) + np.log2(nb) + np.log2(p) > MEMORY_LOG2


def true_indices(task: dict, base: int = 1 << 16, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(S1, ST) of log(objective) over the box (failures ignored: the objective's own values), by
    Saltelli / Jansen pick-freeze on the true function with the same input distribution as
    gt.sensitivity (encoded_sample)."""
    sp = space()
    d = len(sp)
    rng = np.random.default_rng(seed)

    def f(unit: np.ndarray) -> np.ndarray:
        return np.array([log_time(task["n"], **c) for c in sp.decode(encoded_sample(sp, unit))])

    A, B = rng.random((base, d)), rng.random((base, d))
    fA, fB = f(A), f(B)
    var = np.var(np.concatenate([fA, fB]))
    s1, st = np.empty(d), np.empty(d)
    for k in range(d):
        ABk = A.copy()
        ABk[:, k] = B[:, k]
        fABk = f(ABk)
        s1[k] = np.mean(fB * (fABk - fA)) / var
        st[k] = 0.5 * np.mean((fA - fABk) ** 2) / var
    return s1, st


def problem(seed: int) -> gt.Problem:
    rng = np.random.default_rng(seed + 1000)

    def objective(task: dict, params: dict) -> float:
        if fails(params["p"], params["mb"], params["nb"]):
            raise EvaluationFailed("out of memory")
        if rng.random() < CRASH:
            raise EvaluationFailed("segmentation fault")
        return float(np.exp(log_time(task["n"], **params)))

    return gt.Problem(gt.Space([gt.Integer("n", 500, 10000)]), space(), objective, name="failing")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--budget", type=int, default=20)
    ap.add_argument("--report", default=None, help="also write the HTML report there")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.ERROR)
    s1, st = true_indices(TASKS[0])
    names = space().names
    print("true ST  " + "  ".join(f"{n}={v:.3f}" for n, v in zip(names, st)))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "h.db"
        result = gt.tune(problem(args.seed), TASKS, budget=args.budget, seed=args.seed, history=str(path),
                         progress=False, max_failures=None)
        n_failed = sum(t.status is gt.Status.FAILED for t in result.history)
        print(f"runs {len(result.history)}, failed {n_failed}")
        rep = gt.sensitivity(result, base=1024)
        print("tune   ST " + "  ".join(f"{n}={v:.3f}+-{c:.3f}" for n, v, c in zip(names, rep.mean.total,
                                                                                rep.mean.total_conf)))
        print("tune   fixable:", rep.fixable())
        from gptask.insight.report_data import load_report_data

        data = load_report_data(path)
        rep = gt.sensitivity(data.result, base=1024)
        print("report ST " + "  ".join(f"{n}={v:.3f}+-{c:.3f}" for n, v, c in zip(names, rep.mean.total,
                                                                                rep.mean.total_conf)))
        print("report fixable:", rep.fixable())
        if args.report:
            from gptask.insight.report import write_report

            write_report(path, args.report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
