"""Analytic multitask test problems with known optima (demos, tests and quality benchmarks).

* ``demo``: the function the GPTune project ships as its demo,
  ``f(t, x) = exp(-(x + 1)^(t + 1)) cos(2 pi x) [sin(2 pi (t+2) x) + sin(2 pi (t+2)^2 x) + sin(2 pi (t+2)^3 x)]``,
  ``t in [0, 10]``, ``x in [0, 1]``. The argmin moves with ``t``; it is found by brute force on a fine grid.
* ``branin``: the Branin function whose coefficients are shifted by the task (a family used in
  multi-task BO papers); 2 parameters, 2 task coordinates; optimum by brute force + local refinement.
* ``sphere_shift``: a 3-parameter bowl whose centre moves smoothly with a 1-D task, plus a small
  task-dependent ripple; optimum known in closed form.

Each ``*_problem()`` returns a :class:`gptask.Problem`; each ``*_optimum(task)`` returns
``(x_opt: dict, f_opt: float)``.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

import numpy as np
from scipy.optimize import minimize

from .problem import Problem
from .space import Real, Space

__all__ = ["demo_f", "demo_problem", "demo_optimum", "branin_problem", "branin_optimum",
           "sphere_problem", "sphere_optimum", "FAMILIES"]


# ---- the GPTune demo function -----------------------------------------------------------------
def demo_f(t: float | np.ndarray, x: float | np.ndarray) -> float | np.ndarray:
    """The demo function, vectorised over ``t`` and ``x`` (numpy broadcasting)."""
    t = np.asarray(t, dtype=float)
    x = np.asarray(x, dtype=float)
    a = 2 * np.pi * x
    s = np.sin(a * (t + 2)) + np.sin(a * (t + 2) ** 2) + np.sin(a * (t + 2) ** 3)
    return np.exp(-((x + 1) ** (t + 1))) * np.cos(a) * s


def demo_problem() -> Problem:
    tasks = Space([Real("t", 0.0, 10.0)])
    params = Space([Real("x", 0.0, 1.0)])
    return Problem(tasks, params, lambda task, p: float(demo_f(task["t"], p["x"])), name="demo")


@lru_cache(maxsize=512)
def _demo_opt(t: float) -> tuple[float, float]:
    x = np.linspace(0.0, 1.0, 200_001)
    y = demo_f(t, x)
    k = int(np.argmin(y))
    lo, hi = x[max(k - 1, 0)], x[min(k + 1, len(x) - 1)]
    r = minimize(lambda v: float(demo_f(t, v[0])), [x[k]], bounds=[(lo, hi)], method="L-BFGS-B")
    xs, fs = (float(r.x[0]), float(r.fun)) if r.fun <= y[k] else (float(x[k]), float(y[k]))
    return xs, fs


def demo_optimum(task: dict[str, Any]) -> tuple[dict[str, float], float]:
    x, f = _demo_opt(float(task["t"]))
    return {"x": x}, f


# ---- a Branin family ----------------------------------------------------------------------------
def _branin(task: dict[str, Any], x1: np.ndarray, x2: np.ndarray) -> np.ndarray:
    a = 1.0
    b = 5.1 / (4 * math.pi**2) * (1.0 + 0.2 * task["u"])
    c = 5.0 / math.pi * (1.0 + 0.2 * task["v"])
    r, s, tt = 6.0, 10.0, 1.0 / (8 * math.pi)
    return a * (x2 - b * x1**2 + c * x1 - r) ** 2 + s * (1 - tt) * np.cos(x1) + s


def branin_problem() -> Problem:
    tasks = Space([Real("u", -1.0, 1.0), Real("v", -1.0, 1.0)])
    params = Space([Real("x1", -5.0, 10.0), Real("x2", 0.0, 15.0)])
    return Problem(tasks, params, lambda t, p: float(_branin(t, np.float64(p["x1"]), np.float64(p["x2"]))),
                   name="branin_family")


def branin_optimum(task: dict[str, Any]) -> tuple[dict[str, float], float]:
    g1, g2 = np.meshgrid(np.linspace(-5, 10, 601), np.linspace(0, 15, 601))
    y = _branin(task, g1, g2)
    k = np.unravel_index(np.argmin(y), y.shape)
    r = minimize(lambda v: float(_branin(task, v[0], v[1])), [g1[k], g2[k]],
                 bounds=[(-5, 10), (0, 15)], method="L-BFGS-B")
    return {"x1": float(r.x[0]), "x2": float(r.x[1])}, float(min(r.fun, y[k]))


# ---- a moving bowl ------------------------------------------------------------------------------
def _sphere_centre(s: float) -> np.ndarray:
    return np.array([0.5 + 0.3 * math.sin(2 * s), 0.3 + 0.4 * s, 0.7 - 0.4 * s * s])


def _sphere(task: dict[str, Any], x: np.ndarray) -> float:
    c = _sphere_centre(task["s"])
    d = x - c
    return float(np.sum(d * d * np.array([1.0, 4.0, 10.0])) + 0.05 * (1 - np.cos(8 * np.pi * d[0]))) + 1.0 + task["s"]


def sphere_problem() -> Problem:
    tasks = Space([Real("s", 0.0, 1.0)])
    params = Space([Real("x1", 0.0, 1.0), Real("x2", 0.0, 1.0), Real("x3", 0.0, 1.0)])
    return Problem(tasks, params, lambda t, p: _sphere(t, np.array([p["x1"], p["x2"], p["x3"]])),
                   name="sphere_shift")


def sphere_optimum(task: dict[str, Any]) -> tuple[dict[str, float], float]:
    c = _sphere_centre(task["s"])
    return {"x1": float(c[0]), "x2": float(c[1]), "x3": float(c[2])}, 1.0 + float(task["s"])


FAMILIES = {
    "demo": (demo_problem, demo_optimum),
    "branin": (branin_problem, branin_optimum),
    "sphere": (sphere_problem, sphere_optimum),
}
