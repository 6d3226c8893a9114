"""Small diagnostic experiments behind bench/results_quality.md (why MLA wins or loses somewhere).

Bench-only: these subclass :class:`gptask.tuning.mla.Tuner` and override private hooks to *try* changes
without editing the library. Nothing here is used by gptask itself.

* ``probe_run``: one MLA run that, at every search, also records (a) the gap between the search's
  proposal's log-EI and a careful reference maximum (:func:`reference_maximum`: a dense sample,
  every discrete combination enumerated on mixed spaces, polished by L-BFGS-B), and the search's
  wall time (is the acquisition search the weak link?) and, at the end, (b) the final LCM's prediction error on the
  true standardised objective vs a single-task GP (scikit-learn, Matern 5/2, as gp_minimize uses)
  fitted on the same task's data under the same transform (is the model the weak link?).

Run: ``PYTHONPATH=. python bench/archive/quality_probe.py --family sphere --tasks 4 --seeds 0,1``
(``--no-model-rmse`` skips (b); ``--search plain`` measures PSO alone, the search before issue 12;
the last line sums the miss rate over the seeds).
"""

from __future__ import annotations

import argparse
import functools
import itertools
import os
import sys
import time
from typing import Any

import numpy as np
from scipy.optimize import minimize

from gptask.model.acquisition import log_ei
from gptask.evaluation.evaluate import Evaluator
from gptask.problem.functions import FAMILIES
from gptask import search
from gptask.tuning.mla import Tuner, resolve_tasks
from gptask.space.dimensions import Categorical, Integer, Real, Space
from gptask.data.trials import Status
from gptask.tuning import propose

TASK_SEED = 12345


#: reference maximum: uniform points in the continuous columns (per discrete combination when the
#: space has integers or categoricals), distinct starts polished by L-BFGS-B, and their separation
REF_DENSE = 20_000
REF_STARTS = 8
REF_SEPARATION = 0.02
#: discrete combinations enumerated exhaustively up to this many (sampled beyond)
REF_MAX_COMBOS = 5_000
#: a search "misses" when its proposal's log-EI is this far below the reference maximum
MISS = 0.1


def _discrete_combos(space: Space, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Encoded discrete part of the space: (continuous column mask (D,), combos (c, D) with the
    continuous columns at 0). Every integer value x every categorical choice when there are at
    most REF_MAX_COMBOS such combinations, else REF_MAX_COMBOS random snapped ones."""
    cont = np.zeros(space.n_columns, dtype=bool)
    options = []
    for dim, sl in zip(space.dimensions, space.column_slices()):
        if isinstance(dim, Real):
            cont[sl] = True
        elif isinstance(dim, Integer):
            options.append((sl, dim.encode(list(range(dim.lo, dim.hi + 1)))))
        elif isinstance(dim, Categorical):
            options.append((sl, np.eye(dim.n_columns)))
    sizes = [len(o[1]) for o in options]
    total = int(np.prod(sizes)) if sizes else 1
    if total <= REF_MAX_COMBOS:
        idx = np.array(list(itertools.product(*[range(n) for n in sizes]))) if sizes else np.zeros((1, 0), int)
    else:
        idx = np.column_stack([rng.integers(0, n, REF_MAX_COMBOS) for n in sizes])
    combos = np.zeros((len(idx), space.n_columns))
    for j, (sl, enc) in enumerate(options):
        combos[:, sl] = enc[idx[:, j]]
    return cont, combos


def reference_maximum(acq: Any, space: Space, rng: np.random.Generator) -> float:
    """A careful maximum of ``acq`` (vectorised over encoded, snapped rows) over ``space``: about
    REF_DENSE points (continuous columns uniform, discrete combinations enumerated), then
    L-BFGS-B over the continuous columns (discrete ones held) from REF_STARTS distinct best points."""
    cont, combos = _discrete_combos(space, rng)
    per = max(1, REF_DENSE // len(combos)) if cont.any() else 1
    U = np.repeat(combos, per, axis=0)
    U[:, cont] = rng.random((len(U), int(cont.sum())))
    U = space.snap(U)
    a = np.asarray(acq(U), dtype=float)
    best = float(np.max(a))
    if not cont.any():
        return best
    starts: list[np.ndarray] = []
    for k in np.argsort(-a):
        if len(starts) == REF_STARTS:
            break
        if all(np.max(np.abs(U[k] - s)) > REF_SEPARATION for s in starts):
            starts.append(U[k])
    for x0 in starts:
        def f(v: np.ndarray, x0: np.ndarray = x0) -> float:
            x = x0.copy()
            x[cont] = v
            return -float(acq(x[None, :])[0])

        r = minimize(f, x0[cont], bounds=[(0.0, 1.0)] * int(cont.sum()), method="L-BFGS-B")
        best = max(best, -float(r.fun))
    return best


class ProbeTuner(Tuner):
    """Records, for every acquisition search, how far the search's proposal is from a careful
    reference maximum (:func:`reference_maximum`), and the search's wall time."""

    def __init__(self, *a: Any, **k: Any) -> None:
        super().__init__(*a, **k)
        self.gaps: list[float] = []
        self.search_seconds: list[float] = []
        self.search_cpu_seconds: list[float] = []

    def _search(self, i: int, *among: Any):
        t0, c0 = time.perf_counter(), time.process_time()
        prop = super()._search(i, *among)
        self.search_seconds.append(time.perf_counter() - t0)
        self.search_cpu_seconds.append(time.process_time() - c0)
        space = self.problem.param_space
        model, tr = self.model, self.transform
        ok = [t.value for t in self.trials_of(i) if t.status is Status.COMPLETE]
        best = float(np.min(tr.forward(i, np.array(ok))))

        def acq(x):
            m, v = model.predict(i, np.atleast_2d(x))
            return log_ei(m, np.sqrt(np.maximum(v, 0.0)), best)

        if prop is None:  # the task's space is exhausted
            return prop
        found = float(acq(prop[None, :])[0])  # _search returns the encoded proposal
        ref = reference_maximum(acq, space, np.random.default_rng(len(self.gaps)))
        self.gaps.append(ref - found)
        return prop


def model_error(tuner: Tuner, n_test: int = 2000, seed: int = 0) -> list[tuple[float, float]]:
    """Per task: (RMSE of the LCM mean, RMSE of a single-task Matern-5/2 GP) on the standardised
    true objective at ``n_test`` uniform points, both trained on the task's evaluations."""
    from sklearn.gaussian_process import GaussianProcessRegressor
    from sklearn.gaussian_process.kernels import ConstantKernel, Matern, WhiteKernel

    space, prob = tuner.problem.param_space, tuner.problem
    tuner.fit_model()
    out = []
    rng = np.random.default_rng(seed)
    U = rng.random((n_test, space.n_columns))
    params = space.decode(U)
    for i, task in enumerate(tuner.tasks):
        z_true = tuner.transform.forward(i, np.array([prob.objective(task, p) for p in params]))
        m, _ = tuner.model.predict(i, U)
        recs = [t for t in tuner.trials_of(i) if t.status is Status.COMPLETE]
        X = space.encode([r["params"] for r in recs])
        z = tuner.transform.forward(i, np.array([r["value"] for r in recs]))
        k = ConstantKernel(1.0) * Matern(length_scale=np.ones(space.n_columns), nu=2.5) + WhiteKernel(1e-4)
        gp = GaussianProcessRegressor(k, normalize_y=True, n_restarts_optimizer=2, random_state=0).fit(X, z)
        out.append((float(np.sqrt(np.mean((m - z_true) ** 2))),
                    float(np.sqrt(np.mean((gp.predict(U) - z_true) ** 2)))))
    return out


#: ``--search plain``: the search as it was before issue 12 (the swarm alone)
PLAIN_SEARCH = {"n_candidates": 0, "polish_starts": 0}


def probe_run(family: str, n_tasks: int, budget: int, n_initial: int, seed: int,
              model_rmse: bool = True) -> dict[str, Any]:
    make, _ = FAMILIES[family]
    problem = make()
    tasks = resolve_tasks(problem, n_tasks, TASK_SEED)
    tuner = ProbeTuner(problem, tasks, budget, n_initial, seed, None)
    ev = Evaluator(problem.objective)
    while not tuner.done:
        for p in tuner.ask():
            tuner.tell(p, ev(p.task, p.params))
    return {"gaps": tuner.gaps, "search_seconds": tuner.search_seconds, "search_cpu_seconds": tuner.search_cpu_seconds,
            "model_rmse": model_error(tuner) if model_rmse else []}


def main(argv: list[str] | None = None) -> int:
    from threadpoolctl import threadpool_limits

    threadpool_limits(1)
    ap = argparse.ArgumentParser()
    ap.add_argument("--family", default="sphere", choices=sorted(FAMILIES))
    ap.add_argument("--tasks", type=int, default=4)
    ap.add_argument("--budget", type=int, default=20)
    ap.add_argument("--n-initial", type=int, default=10)
    ap.add_argument("--seeds", default="0")
    ap.add_argument("--no-model-rmse", action="store_true", help="skip the final model-error comparison")
    ap.add_argument("--search", choices=("default", "plain"), default="default",
                    help="plain: PSO alone (no candidate pass, no polish), the search before issue 12")
    a = ap.parse_args(argv)
    if a.search == "plain":  # bench-only: the tuner calls gptask.propose.proposals.maximize with its defaults
        propose.maximize = functools.partial(search.maximize, **PLAIN_SEARCH)
    gaps, secs, cpu = [], [], []
    for s in map(int, a.seeds.split(",")):
        t0 = time.perf_counter()
        r = probe_run(a.family, a.tasks, a.budget, a.n_initial, s, model_rmse=not a.no_model_rmse)
        g = np.array(r["gaps"])
        gaps.append(g)
        secs += r["search_seconds"]
        cpu += r["search_cpu_seconds"]
        print(f"{a.family} seed {s}: log-EI gap (reference minus search): median {np.median(g):.3g}, "
              f"90% {np.quantile(g, 0.9):.3g}, max {g.max():.3g}, share > {MISS}: {np.mean(g > MISS):.3f} "
              f"({int(np.sum(g > MISS))}/{len(g)}); search {np.mean(r['search_seconds']):.3f} s mean")
        for i, (lcm, gp) in enumerate(r["model_rmse"]):
            print(f"  task {i}: standardised RMSE LCM {lcm:.3f}  single-task GP {gp:.3f}")
        print(f"  ({time.perf_counter() - t0:.0f} s)", file=sys.stderr)
    g = np.concatenate(gaps)
    print(f"{a.family} all seeds: share > {MISS}: {np.mean(g > MISS):.3f} ({int(np.sum(g > MISS))}/{len(g)}), "
          f"max gap {g.max():.3g}; per search: wall {np.mean(secs):.3f} s mean ({np.median(secs):.3f} median), "
          f"CPU {np.mean(cpu):.3f} s mean; load average {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
