"""Trace what the model and search did on chosen convolution seeds (issue 45, the worst seeds):
per GPU the fraction of the optimum, which run found the best (its index, initial design / whole-space
search / cross-task pick), and per fit the diagnostics (collapsed length scales, flags, refits).

    PYTHONPATH=. python bench/archive/worst_seed_trace.py BUDGET SEED... [--draws N]
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import gptask as gt  # noqa: E402
from gptask.model.surrogate.core import Surrogate  # noqa: E402
from gptask.space.domain import row_keys  # noqa: E402
from gptask.tuning import Tuner  # noqa: E402
from suite_families import family  # noqa: E402


def trace(budget: int, seed: int, draws: int) -> dict:
    fam = family("convolution")
    fits: list[dict] = []
    picks: dict[tuple[int, int], bool] = {}
    orig_full, orig_search = Surrogate.full_fit, Tuner._search

    def full_fit(self, model_trials, trials):
        kind = orig_full(self, model_trials, trials)
        rec = self.model.fit_record()
        ls = np.asarray(rec["lengthscales"])
        fits.append({"n": int(self.model.n_points.sum()), "collapsed": rec["collapsed"], "refit": rec["collapse_refit"],
                     "flags": rec["flags"], "ls_min": float(ls.min()), "ls_median": float(np.median(ls)),
                     "noise": rec["noise"]})
        return kind

    def search(self, i):
        among = self.search_among(i)
        row = orig_search(self, i)
        offered = among is not None and row is not None and row_keys(row[None, :])[0] in set(row_keys(among))
        picks[(i, len(self.trials_of(i)))] = bool(offered)
        return row

    Surrogate.full_fit, Tuner._search = full_fit, search
    try:
        res = gt.tune(fam.problem, tasks=fam.tasks, budget=budget, seed=seed, progress=False, ei_draws=draws)
    finally:
        Surrogate.full_fit, Tuner._search = orig_full, orig_search
    gpus = []
    for i, task in enumerate(fam.tasks):
        trials = sorted((t for t in res.history if t.task_index == i), key=lambda t: t.id)
        ok = [(t.value, k, t) for k, t in enumerate(trials) if t.status is gt.Status.COMPLETE]
        value, k, best = min(ok, key=lambda v: v[0])
        how = best.source + (" (pick)" if picks.get((i, k), False) else "")
        gpus.append({"gpu": task["gpu"], "fraction": fam.f_opt[i] / value, "best_run": k, "how": how,
                     "failed": sum(t.status is not gt.Status.COMPLETE for t in trials),
                     "picks": sum(picks.get((i, j), False) for j in range(len(trials)))})
    n_col = sum(bool(f["collapsed"]) for f in fits)
    return {"seed": seed, "budget": budget, "fraction": float(np.mean([g["fraction"] for g in gpus])), "gpus": gpus,
            "fits": len(fits), "fits_collapsed": n_col, "fits_refit": sum(f["refit"] for f in fits),
            "fits_flagged": sum(bool(f["flags"]) for f in fits), "last_fit": fits[-1] if fits else None}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("budget", type=int)
    ap.add_argument("seeds", type=int, nargs="+")
    ap.add_argument("--draws", type=int, default=0)
    args = ap.parse_args()
    logging.getLogger("gptask").setLevel(logging.ERROR)
    for seed in args.seeds:
        print(json.dumps(trace(args.budget, seed, args.draws)), flush=True)


if __name__ == "__main__":
    main()
