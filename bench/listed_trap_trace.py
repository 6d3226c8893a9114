"""Why no task of a listed generated family tries the shared optimum next to its incumbent (issue 45, the listed trap;
bench/results/listed_trap.md): one gptask run (``mla``, 12 runs per task unless told) of a TUNING family ``gen:<seed>``
(seed < 1000) traced at every search.

Per search (one JSON line): the task, its run index, whether it was a cross-task pick, the incumbent's list indices and
regret, the task's optimum (list indices, whether the task ran it, its list steps from the incumbent), where the optimum
ranks among the task's unrun configurations under the model's mean, std and the acquisition (log-EI, averaged over
hyperparameter draws when the model has them), the acquisition of the optimum and of the chosen configuration, the
chosen one's indices and true regret, the incumbent's unrun one-step neighbours (indices, acquisition, rank, true
regret), and the fitted length scales of the columns of each input (Q x columns) with the task's noise sd.

    PYTHONPATH=. python bench/listed_trap_trace.py 837 0 [--budget 12] [--options JSON] [--probe AFTER] > trace.jsonl
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import gptask as gt  # noqa: E402
from gptask.model.acquisition import log_ei  # noqa: E402
from gptask.model.surrogate.core import SearchView  # noqa: E402
from gptask.space.domain import row_keys  # noqa: E402
from gptask.tuning import Tuner  # noqa: E402
from gptask.tuning.proposer import Proposer  # noqa: E402
from suite_generated import generated  # noqa: E402


def rank_of(values: np.ndarray, j: int, larger_first: bool) -> int:
    """1-based rank of values[j] (ties: optimistic)."""
    v = values[j]
    return int(np.sum(values > v) + 1) if larger_first else int(np.sum(values < v) + 1)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("seed", type=int, help="the family gen:SEED (a tuning seed, < 1000)")
    ap.add_argument("run_seed", type=int)
    ap.add_argument("--budget", type=int, default=12)
    ap.add_argument("--options", default="{}")
    ap.add_argument("--probe", type=int, default=None, help="the local probe on after this many searched runs")
    a = ap.parse_args(argv)
    if a.seed >= 1000:
        raise SystemExit(f"gen:{a.seed} is a judged family (seed >= 1000): trace tuning seeds only")
    logging.getLogger("gptask").setLevel(logging.ERROR)
    g = generated(a.seed)
    problem, tasks, obj = g["problem"], g["tasks"], g["objective"]
    f_opt, f_ref = np.array(g["f_opt"]), np.array(g["f_ref"])
    domain = problem.domain(tasks[0])
    X = domain.encode(np.arange(len(domain)))
    params = domain.params(np.arange(len(domain)))
    U = obj.unit(params)
    true = np.array([obj.latent_unit(i, U) for i in range(len(tasks))])  # (T, n)
    regret = (true - f_opt[:, None]) / (f_ref - f_opt)[:, None]
    keys = row_keys(X)
    index = domain.index
    space = problem.param_space
    slices = space.column_slices()
    orig = Tuner._search
    out: list[dict] = []

    def search(self: Tuner, i: int):
        mine = self.trials_of(i)
        claimed = space.encode([t.params for t in mine])
        taken = set(row_keys(claimed))
        free = np.array([k not in taken for k in keys])
        view = self._search_view
        acq = self.outputs.acquisition(view, i, claimed)
        best = view.best[i]
        if best is None:
            best = float(np.min(view.model.predict(i, claimed)[0]))
        if acq is None and isinstance(view, SearchView) and view.draws:
            acq = view.log_ei(i, best)
        mean, var = view.model.predict(i, X)
        std = np.sqrt(np.maximum(var, 0.0))
        a_all = acq(X) if acq is not None else log_ei(mean, std, best)
        a_free = np.where(free, a_all, -np.inf)
        offered: list = []
        ask = self.proposer.search_among

        def among_of(j: int):
            offered.append(ask(j))
            return offered[-1]

        self.proposer.search_among = among_of
        try:
            row = orig(self, i)
        finally:
            del self.proposer.search_among
        among = offered[0] if offered else None
        r = int(domain.rows_of(row[None, :])[0])
        done = [t for t in mine if t.status is gt.Status.COMPLETE and t.value is not None]
        inc = min(done, key=lambda t: t.value)
        ri = int(domain.rows_of(space.encode([inc.params]))[0])
        opt = int(np.argmin(true[i]))
        steps = np.abs(index - index[ri]).sum(axis=1)
        near = [int(k) for k in np.flatnonzero((steps == 1) & free)]
        lm = view.model
        ls = np.asarray(lm._params["lengthscale"]) if hasattr(lm, "_params") else None
        out.append({
            "task": i, "run": len(mine), "pick": among is not None, "n_among": None if among is None else len(among),
            "inc": index[ri].tolist(), "inc_regret": round(float(regret[i, ri]), 3),
            "opt": index[opt].tolist(), "opt_run": not bool(free[opt]), "opt_steps": int(steps[opt]),
            "opt_rank": None if not free[opt] else {
                "mean": rank_of(np.where(free, mean, np.inf), opt, False),
                "std": rank_of(np.where(free, std, -np.inf), opt, True),
                "acq": rank_of(a_free, opt, True)},
            "opt_model": [round(float(mean[opt]), 3), round(float(std[opt]), 3), round(float(a_all[opt]), 2)],
            "inc_model": [round(float(mean[ri]), 3), round(float(std[ri]), 3)], "best_z": round(float(best), 3),
            "chosen": index[r].tolist(), "chosen_steps": int(steps[r]), "chosen_regret": round(float(regret[i, r]), 3),
            "chosen_model": [round(float(mean[r]), 3), round(float(std[r]), 3), round(float(a_all[r]), 2)],
            "neighbours": [[index[k].tolist(), round(float(a_all[k]), 2), rank_of(a_free, k, True),
                            round(float(mean[k]), 3), round(float(std[k]), 3), round(float(regret[i, k]), 3)]
                           for k in near],
            "lengthscales": None if ls is None else [[np.round(ls[q, sl], 3).tolist() for sl in slices]
                                                     for q in range(ls.shape[0])],
            "noise_sd": None if not hasattr(lm, "_params") else round(float(np.sqrt(lm._params["noise"][i])), 4),
        })
        return row

    Tuner._search = search
    try:
        opts = json.loads(a.options)
        if a.probe is not None:
            opts["proposer"] = Proposer(local_probe_after=a.probe)
        res = gt.tune(problem, tasks=tasks, budget=a.budget, seed=a.run_seed, progress=False, **opts)
    finally:
        Tuner._search = orig
    for line in out:
        print(json.dumps(line), flush=True)
    final = []
    for i in range(len(tasks)):
        ks = [int(domain.rows_of(space.encode([t.params]))[0]) for t in res.history
              if t.task_index == i and t.status is gt.Status.COMPLETE]
        vals = [t.value for t in res.history if t.task_index == i and t.status is gt.Status.COMPLETE]
        final.append(round(float(regret[i, ks[int(np.argmin(vals))]]), 3))
    print(json.dumps({"family": f"gen:{a.seed}", "seed": a.run_seed, "regret": final, "mean": float(np.mean(final))}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
