"""Why a GPU stops improving on the convolution campaign (issue 45, the worst seed): for one seed and
GPU, at every searched run, what the search saw over the GPU's whole listed domain.

Per searched run of the GPU (JSON line): the run's index, whether it was a cross-task pick, the
incumbent (best measured value, model units) and the task's noise sd, how many listed candidates
remain, the proposal's true value and whether it improved, its parameter distance (how many of the 7
parameters differ) to the incumbent configuration, the acquisition's top 5 (true fraction of the
optimum, distance to the incumbent, mean, std, acquisition), and where the true optimum (and the
configurations within 10 % of it) rank under the model's mean, its std, the acquisition and EI alone.

    PYTHONPATH=. python bench/archive/stall_trace.py BUDGET SEED GPU [--options JSON]
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
from gptask.model.acquisition import log_ei  # noqa: E402
from gptask.space.domain import row_keys  # noqa: E402
from gptask.tuning import Tuner  # noqa: E402
from suite_families import CONVOLUTION_DIR, family  # noqa: E402
from gptask.sources.replay import read_recording  # noqa: E402


def rank_of(values: np.ndarray, j: int, larger_first: bool) -> int:
    """1-based rank of values[j] (ties: optimistic)."""
    v = values[j]
    return int(np.sum(values > v) + 1) if larger_first else int(np.sum(values < v) + 1)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("budget", type=int)
    ap.add_argument("seed", type=int)
    ap.add_argument("gpu")
    ap.add_argument("--options", default="{}")
    args = ap.parse_args()
    logging.getLogger("gptask").setLevel(logging.ERROR)
    fam = family("convolution")
    i = [t["gpu"] for t in fam.tasks].index(args.gpu)
    rec = read_recording(CONVOLUTION_DIR / f"{args.gpu}.json.gz")
    domain = fam.problem.domain(fam.tasks[i])
    params = domain.params(np.arange(len(domain)))
    truth = np.array([rec.results.get(rec.key(p)) for p in params], dtype=object)
    true = np.array([v if isinstance(v, float) else np.inf for v in truth], dtype=float)
    X = domain.encode(np.arange(len(domain)))
    keys = row_keys(X)
    f_opt = float(np.min(true))
    opt = int(np.argmin(true))
    near = np.flatnonzero(true <= 1.1 * f_opt)
    names = list(params[0])
    orig = Tuner._search
    out: list[dict] = []

    def search(self: Tuner, j: int):
        if j != i:
            return orig(self, j)
        mine = self.trials_of(j)
        claimed = self.problem.param_space.encode([t.params for t in mine])
        taken = set(row_keys(claimed))
        free = np.array([k not in taken for k in keys])
        view = self._search_view
        acq = self.outputs.acquisition(view, j, claimed)
        best = view.best[j]
        mean, var = view.model.predict(j, X)
        std = np.sqrt(np.maximum(var, 0.0))
        ei = log_ei(mean, std, best)
        a = acq(X) if acq is not None else ei
        done = [t for t in mine if t.status is gt.Status.COMPLETE]
        inc = min(done, key=lambda t: t.value)
        inc_p = inc.params

        def dist(p: dict) -> int:
            return sum(p[n] != inc_p[n] for n in names)

        a_free = np.where(free, a, -np.inf)
        top = np.argsort(-a_free)[:5]
        among = self.search_among(j)
        row = orig(self, j)
        r = domain.rows_of(row[None, :])[0]
        noise = float(view.model._params["noise"][j]) ** 0.5 if hasattr(view.model, "_params") else None
        out.append({
            "run": len(mine), "pick": among is not None, "best_frac": f_opt / inc.value, "incumbent_z": best,
            "noise_sd": noise, "free": int(free.sum()),
            "proposal_frac": f_opt / true[r], "improves": bool(true[r] < inc.value), "proposal_dist": dist(params[r]),
            "top": [[round(f_opt / true[k], 3), dist(params[k]), round(float(mean[k]), 3), round(float(std[k]), 3),
                     round(float(a[k]), 2)] for k in top],
            "opt_free": bool(free[opt]),
            "opt_rank": {"mean": rank_of(np.where(free, mean, np.inf), opt, False),
                         "std": rank_of(np.where(free, std, -np.inf), opt, True),
                         "acq": rank_of(a_free, opt, True), "ei": rank_of(np.where(free, ei, -np.inf), opt, True)},
            "opt_model": [round(float(mean[opt]), 3), round(float(std[opt]), 3), round(float(a[opt]), 2)],
            "near10_best_acq_rank": int(min(rank_of(a_free, k, True) for k in near if free[k])) if free[near].any() else None,
            "ei_max": round(float(np.max(np.where(free, ei, -np.inf))), 2),
        })
        return row

    Tuner._search = search
    try:
        res = gt.tune(fam.problem, tasks=fam.tasks, budget=args.budget, seed=args.seed, progress=False,
                      **json.loads(args.options))
    finally:
        Tuner._search = orig
    for line in out:
        print(json.dumps(line), flush=True)
    vals = [t.value for t in res.history if t.task_index == i and t.status is gt.Status.COMPLETE]
    print(json.dumps({"gpu": args.gpu, "seed": args.seed, "fraction": f_opt / min(vals)}))


if __name__ == "__main__":
    main()
