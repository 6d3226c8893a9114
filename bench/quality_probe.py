"""Small diagnostic experiments behind bench/results_quality.md (why MLA wins or loses somewhere).

Bench-only: these subclass :class:`gptask.mla.Tuner` and override private hooks to *try* changes
without editing the library. Nothing here is used by gptask itself.

* ``probe_run``: one MLA run that, at every search, also records (a) the gap between the PSO
  proposal's log-EI and the best log-EI over a dense uniform sample polished by L-BFGS-B (is the
  acquisition search the weak link?) and, at the end, (b) the final LCM's prediction error on the
  true standardised objective vs a single-task GP (scikit-learn, Matern 5/2, as gp_minimize uses)
  fitted on the same task's data under the same transform (is the model the weak link?).

Run: ``PYTHONPATH=. python bench/quality_probe.py --family sphere --tasks 4 --seeds 0,1``
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

import numpy as np
from scipy.optimize import minimize

from gptask.acquisition import log_ei
from gptask.evaluate import Evaluator
from gptask.functions import FAMILIES
from gptask.mla import Tuner, resolve_tasks
from gptask.trials import Status

TASK_SEED = 12345


class ProbeTuner(Tuner):
    """Records, for every acquisition search, how far PSO is from a dense-sample + L-BFGS maximum."""

    def __init__(self, *a: Any, **k: Any) -> None:
        super().__init__(*a, **k)
        self.gaps: list[float] = []

    def _search(self, i: int):
        prop = super()._search(i)
        space = self.problem.param_space
        model, tr = self.model, self.transform
        ok = [t.value for t in self.trials_of(i) if t.status is Status.COMPLETE]
        best = float(np.min(tr.forward(i, np.array(ok))))

        def acq(x):
            m, v = model.predict(i, np.atleast_2d(x))
            return log_ei(m, np.sqrt(np.maximum(v, 0.0)), best)

        if prop is None:  # the task's space is exhausted
            return prop
        pso = float(acq(prop[None, :])[0])  # _search returns the encoded proposal
        rng = np.random.default_rng(len(self.gaps))
        u = rng.random((20_000, space.n_columns))
        a = acq(u)
        top = u[np.argsort(a)[-5:]]
        dense = float(a.max())
        for x0 in top:
            r = minimize(lambda x: -float(acq(x)[0]), x0, bounds=[(0, 1)] * space.n_columns, method="L-BFGS-B")
            dense = max(dense, -float(r.fun))
        self.gaps.append(dense - pso)
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


def probe_run(family: str, n_tasks: int, budget: int, n_initial: int, seed: int) -> dict[str, Any]:
    make, _ = FAMILIES[family]
    problem = make()
    tasks = resolve_tasks(problem, n_tasks, TASK_SEED)
    tuner = ProbeTuner(problem, tasks, budget, n_initial, seed, None)
    ev = Evaluator(problem.objective)
    while not tuner.done:
        for p in tuner.ask():
            tuner.tell(p, ev(p.task, p.params))
    return {"gaps": tuner.gaps, "model_rmse": model_error(tuner)}


def main(argv: list[str] | None = None) -> int:
    from threadpoolctl import threadpool_limits

    threadpool_limits(1)
    ap = argparse.ArgumentParser()
    ap.add_argument("--family", default="sphere")
    ap.add_argument("--tasks", type=int, default=4)
    ap.add_argument("--budget", type=int, default=20)
    ap.add_argument("--n-initial", type=int, default=10)
    ap.add_argument("--seeds", default="0")
    a = ap.parse_args(argv)
    for s in map(int, a.seeds.split(",")):
        t0 = time.perf_counter()
        r = probe_run(a.family, a.tasks, a.budget, a.n_initial, s)
        g = np.array(r["gaps"])
        print(f"{a.family} seed {s}: log-EI gap (dense+LBFGS minus PSO): median {np.median(g):.3g}, "
              f"90% {np.quantile(g, 0.9):.3g}, max {g.max():.3g}, share > 0.1: {np.mean(g > 0.1):.2f}")
        for i, (lcm, gp) in enumerate(r["model_rmse"]):
            print(f"  task {i}: standardised RMSE LCM {lcm:.3f}  single-task GP {gp:.3f}")
        print(f"  ({time.perf_counter() - t0:.0f} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
