"""Collapsed fits at the end of a tuning run (issue 45): the final model's length scales against the typical
gap between the distinct values of each input within a task (range / (distinct values - 1), median over
tasks), on a suite family (default: branin_drift, 2 inputs, the optimum drifting across 6 tasks).

    PYTHONPATH=$PWD .venv/bin/python bench/collapse_check.py --family branin_drift --budget 12 --seeds 1,2,3
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))


def gaps(Xs: list[np.ndarray]) -> np.ndarray:
    out = np.zeros(Xs[0].shape[1])
    for j in range(len(out)):
        per = [(v[-1] - v[0]) / (v.size - 1) for v in (np.unique(X[:, j]) for X in Xs) if v.size >= 3]
        out[j] = float(np.median(per)) if per else 0.0
    return out


def main(argv=None) -> int:
    import gptask as gt
    from suite_families import family

    ap = argparse.ArgumentParser()
    ap.add_argument("--family", default="branin_drift")
    ap.add_argument("--budget", type=int, default=12)
    ap.add_argument("--seeds", default="1,2,3")
    a = ap.parse_args(argv)
    fam = family(a.family)
    for seed in [int(s) for s in a.seeds.split(",")]:
        res = gt.tune(fam.problem, tasks=fam.tasks, budget=a.budget, seed=seed, progress=False)
        Xs, _ = res.model.data()
        g = gaps(Xs)
        ls = res.model.lengthscales[0]
        best = [min(t.value for t in res.history if t.task_index == i and t.status is gt.Status.COMPLETE)
                for i in range(len(fam.tasks))]
        regret = float(np.mean([(b - o) / (r - o) for b, o, r in zip(best, fam.f_opt, fam.f_ref)]))
        print(json.dumps({"seed": seed, "lengthscales": ls.round(4).tolist(), "gaps": g.round(4).tolist(),
                          "ls_over_gap": (ls / np.where(g > 0, g, np.nan)).round(2).tolist(),
                          "noise": res.model.get_params()["noise"].round(5).tolist(), "regret": round(regret, 4)}),
              flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
