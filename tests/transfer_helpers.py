"""Small tuned results for the transfer tests, built without running MLA (fast, and the best
configurations are controlled: the true optimum of each task is among its observations)."""

from __future__ import annotations

import numpy as np

import gptask as gt
from gptask.model.numerics import LCM
from gptask.results.result import TuningResult
from gptask.space.sampling import lhs_points
from gptask.model.transforms import OutputTransform


def make_result(problem, tasks, n_points, optimum=None, seed=0, n_latent=1, restarts=1):
    """A TuningResult whose task i has ``n_points`` feasible LHS configurations (plus the true
    optimum when ``optimum(task) -> (params, value)`` is given) and an LCM fitted on them the way
    MLA fits it (log + per-task standardisation when positive)."""
    rng = np.random.default_rng(seed)
    records, X, values = [], [], []
    for i, task in enumerate(tasks):
        pts = [p for p in lhs_points(problem.param_space, 6 * n_points, rng) if problem.is_feasible(task, p)]
        pts = pts[:n_points] + ([optimum(task)[0]] if optimum else [])
        vals = [float(problem.objective(task, p)) for p in pts]
        for p, v in zip(pts, vals):
            records.append({"task_index": i, "task": dict(task), "params": p, "value": v,
                            "status": "complete", "reason": ""})
        X.append(problem.param_space.encode(pts))
        values.append(np.array(vals))
    transform = OutputTransform.fit(values)
    Y = [transform.forward(i, v) for i, v in enumerate(values)]
    model = LCM(n_latent).fit(X, Y, restarts=restarts, seed=seed, maxiter=200)
    return TuningResult(problem, [dict(t) for t in tasks], records, model, transform)


def mixed_problem():
    """Real x, Integer k, Categorical alg; the optimum moves with t; one constraint x + k/10 <= 1.

    Unconstrained optimum: alg "a" below t = 0.5, "c" above; k = round(1 + 6 t); x = t.
    mixed_optimum moves x onto the constraint when it binds (close to, not exactly, the
    constrained optimum; used as each training task's best observation).
    """
    tasks = gt.Space([gt.Real("t", 0.0, 1.0)])
    params = gt.Space([gt.Real("x", 0.0, 1.0), gt.Integer("k", 1, 8), gt.Categorical("alg", ["a", "b", "c"])])

    def f(task, p):
        t = task["t"]
        pen = ({"a": 0.0, "b": 0.3, "c": 0.6} if t < 0.5 else {"a": 0.6, "b": 0.3, "c": 0.0})[p["alg"]]
        return 1.0 + (p["x"] - t) ** 2 + 0.05 * (p["k"] - 1 - 6 * t) ** 2 + pen

    def budget_rule(c):
        return c["x"] + 0.1 * c["k"] <= 1.0

    return gt.Problem(tasks, params, f, constraints=[budget_rule], name="mixed")


def mixed_optimum(task):
    t = task["t"]
    k = int(round(1 + 6 * t))
    x = min(t, 1.0 - 0.1 * k)
    p = {"x": x, "k": k, "alg": "a" if t < 0.5 else "c"}
    return p, mixed_problem().objective(task, p)
