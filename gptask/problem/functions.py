"""Analytic multitask test problems with known optima (demos, tests and quality benchmarks).

* ``demo``: the function the GPTune project ships as its demo,
  ``f(t, x) = exp(-(x + 1)^(t + 1)) cos(2 pi x) [sin(2 pi (t+2) x) + sin(2 pi (t+2)^2 x) + sin(2 pi (t+2)^3 x)]``,
  ``t in [0, 10]``, ``x in [0, 1]``. The argmin moves with ``t``; it is found by brute force on a fine grid.
* ``branin``: the Branin function whose coefficients are shifted by the task (a family used in
  multi-task BO papers); 2 parameters, 2 task coordinates; optimum by brute force + local refinement.
* ``sphere_shift``: a 3-parameter bowl whose centre moves smoothly with a 1-D task, plus a small
  task-dependent ripple; optimum known in closed form.
* ``branin_drift``: the Branin function with its three basins translated by the task (a 2-D task
  moves them by up to 2.5 units in each direction, part of the time to the box's edge); optimum by
  brute force + local refinement.
* ``hartmann6``: the 6-parameter Hartmann function whose four bump weights change with a 1-D task
  (the multi-task Hartmann family of the multi-task BO literature); optimum by multi-start L-BFGS-B.
* ``mixed``: a run-time-like objective over an integer (``tile``, log scale), a categorical
  (``variant``) and a real (``frac``) parameter; the best variant switches with the task. Optimum by
  brute force over every tile and variant and a fine grid of ``frac`` refined by bounded search.

* ``switch``: 5 reals, 2 log-scale integers and a 4-way choice; choice "c" is best only for the
  tasks with ``t > 0.7``, "a" for the others (one ranking of the choices cannot serve every task).
* ``valley``: 2 reals, a log-scale integer and a 3-way choice, with a narrow curved valley across
  one real and a flat direction along the other.

``with_noise(problem, rel_sd, seed)`` wraps any of them with multiplicative, heavy-tailed run-time
noise (for the noise-robust recommendation benchmarks).

Each ``*_problem()`` returns a :class:`gptask.Problem`; each ``*_optimum(task)`` returns
``(x_opt: dict, f_opt: float)``.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

import numpy as np
from scipy.optimize import minimize

from .definition import Problem
from ..space.dimensions import Categorical, Integer, Real, Space

__all__ = ["demo_f", "demo_problem", "demo_optimum", "branin_problem", "branin_optimum",
           "sphere_problem", "sphere_optimum", "branin_drift_problem", "branin_drift_optimum",
           "hartmann6_problem", "hartmann6_optimum", "mixed_problem", "mixed_optimum", "switch_problem",
           "switch_optimum", "valley_problem", "valley_optimum",
           "with_noise", "FAMILIES"]


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


def _branin_like_problem(fn, name: str) -> Problem:
    """A Problem over the Branin box for ``fn(task, x1, x2)`` with a 2-D task (u, v) in [-1, 1]^2."""
    tasks = Space([Real("u", -1.0, 1.0), Real("v", -1.0, 1.0)])
    params = Space([Real("x1", -5.0, 10.0), Real("x2", 0.0, 15.0)])
    return Problem(tasks, params, lambda t, p: float(fn(t, np.float64(p["x1"]), np.float64(p["x2"]))),
                   name=name)


def _branin_box_optimum(fn, task: dict[str, Any]) -> tuple[dict[str, float], float]:
    """Minimum of ``fn(task, x1, x2)`` over the Branin box: a 601 x 601 grid, then L-BFGS-B from
    the best grid point (the better of the two is returned, with its own location)."""
    g1, g2 = np.meshgrid(np.linspace(-5, 10, 601), np.linspace(0, 15, 601))
    y = fn(task, g1, g2)
    k = np.unravel_index(np.argmin(y), y.shape)
    r = minimize(lambda v: float(fn(task, v[0], v[1])), [g1[k], g2[k]],
                 bounds=[(-5, 10), (0, 15)], method="L-BFGS-B")
    if r.fun <= y[k]:
        return {"x1": float(r.x[0]), "x2": float(r.x[1])}, float(r.fun)
    return {"x1": float(g1[k]), "x2": float(g2[k])}, float(y[k])


def branin_problem() -> Problem:
    return _branin_like_problem(_branin, "branin_family")


def branin_optimum(task: dict[str, Any]) -> tuple[dict[str, float], float]:
    return _branin_box_optimum(_branin, task)


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


# ---- Branin with drifting basins ----------------------------------------------------------------
#: how far (parameter units) the basins move per unit of each task coordinate
BRANIN_DRIFT = 2.5


def _branin_drift(task: dict[str, Any], x1: np.ndarray, x2: np.ndarray) -> np.ndarray:
    y1 = x1 - BRANIN_DRIFT * task["u"]
    y2 = x2 - BRANIN_DRIFT * task["v"]
    b, c, r, s, tt = 5.1 / (4 * math.pi**2), 5.0 / math.pi, 6.0, 10.0, 1.0 / (8 * math.pi)
    return (y2 - b * y1**2 + c * y1 - r) ** 2 + s * (1 - tt) * np.cos(y1) + s


def branin_drift_problem() -> Problem:
    return _branin_like_problem(_branin_drift, "branin_drift")


def branin_drift_optimum(task: dict[str, Any]) -> tuple[dict[str, float], float]:
    return _branin_box_optimum(_branin_drift, task)


# ---- a Hartmann-6 family --------------------------------------------------------------------------
_H6_ALPHA = np.array([1.0, 1.2, 3.0, 3.2])
#: the task s in [0, 1] moves the four bump weights along this direction (s = 0.5: the classic one)
_H6_ALPHA_SHIFT = np.array([0.4, -0.4, 0.4, -0.4])
_H6_A = np.array([[10, 3, 17, 3.5, 1.7, 8], [0.05, 10, 17, 0.1, 8, 14],
                  [3, 3.5, 1.7, 10, 17, 8], [17, 8, 0.05, 10, 0.1, 14]], dtype=float)
_H6_P = 1e-4 * np.array([[1312, 1696, 5569, 124, 8283, 5886], [2329, 4135, 8307, 3736, 1004, 9991],
                         [2348, 1451, 3522, 2883, 3047, 6650], [4047, 8828, 8732, 5743, 1091, 381]])
_H6_NAMES = tuple(f"x{j + 1}" for j in range(6))


def _hartmann6(s: float, x: np.ndarray) -> np.ndarray:
    """Hartmann-6 at x (n, 6) in [0, 1]^6 with task-dependent weights; returns (n,)."""
    alpha = _H6_ALPHA + (s - 0.5) * _H6_ALPHA_SHIFT
    d2 = np.einsum("ij,nij->ni", _H6_A, (x[:, None, :] - _H6_P[None, :, :]) ** 2)
    return -np.exp(-d2) @ alpha


def hartmann6_problem() -> Problem:
    tasks = Space([Real("s", 0.0, 1.0)])
    params = Space([Real(n, 0.0, 1.0) for n in _H6_NAMES])
    return Problem(tasks, params,
                   lambda t, p: float(_hartmann6(t["s"], np.array([[p[n] for n in _H6_NAMES]]))[0]),
                   name="hartmann6_family")


@lru_cache(maxsize=512)
def _h6_opt(s: float) -> tuple[tuple[float, ...], float]:
    rng = np.random.default_rng(0)
    starts = np.vstack([_H6_P, rng.random((60, 6))])
    best_x, best_f = None, np.inf
    for x0 in starts:
        r = minimize(lambda v: float(_hartmann6(s, v[None, :])[0]), x0, bounds=[(0.0, 1.0)] * 6,
                     method="L-BFGS-B")
        if r.fun < best_f:
            best_x, best_f = r.x, float(r.fun)
    return tuple(float(v) for v in best_x), best_f


def hartmann6_optimum(task: dict[str, Any]) -> tuple[dict[str, float], float]:
    x, f = _h6_opt(float(task["s"]))
    return dict(zip(_H6_NAMES, x)), f


# ---- mixed integer / categorical / real ------------------------------------------------------------
MIXED_VARIANTS = ("row", "blocked", "col")


def _mixed(task: dict[str, Any], tile: np.ndarray, variant: str, frac: np.ndarray) -> np.ndarray:
    """A run time (> 0): a preferred tile size and frac that move with the task size n in [0, 1], and
    a variant penalty whose minimum switches from "row" (small n) to "blocked" to "col" (large n)."""
    n = float(task["n"])
    best_log_tile = 3.0 + 4.0 * n  # 8 ... 128
    penalty = {"row": 0.45 * n, "blocked": 0.12, "col": 0.45 * (1.0 - n)}[variant]
    centre = 0.2 + 0.6 * n
    shape = (0.15 * (np.log2(tile) - best_log_tile) ** 2 + 2.0 * (frac - centre) ** 2
             + 0.04 * (1.0 - np.cos(6 * np.pi * (frac - centre))))
    return (1.0 + 0.5 * n) * (1.0 + penalty + shape)


def mixed_problem() -> Problem:
    tasks = Space([Real("n", 0.0, 1.0)])
    params = Space([Integer("tile", 4, 256, log=True), Categorical("variant", list(MIXED_VARIANTS)),
                    Real("frac", 0.0, 1.0)])
    return Problem(tasks, params,
                   lambda t, p: float(_mixed(t, np.float64(p["tile"]), p["variant"], np.float64(p["frac"]))),
                   name="mixed")


def mixed_optimum(task: dict[str, Any]) -> tuple[dict[str, Any], float]:
    tiles = np.arange(4, 257, dtype=float)
    frac = np.linspace(0.0, 1.0, 4001)
    best = (None, None, None, np.inf)
    for variant in MIXED_VARIANTS:
        y = _mixed(task, tiles[:, None], variant, frac[None, :])
        i, j = np.unravel_index(np.argmin(y), y.shape)
        if y[i, j] < best[3]:
            best = (int(tiles[i]), variant, float(frac[j]), float(y[i, j]))
    tile, variant, f0, _ = best
    lo, hi = max(0.0, f0 - 1e-3), min(1.0, f0 + 1e-3)
    r = minimize(lambda v: float(_mixed(task, np.float64(tile), variant, v[0])), [f0], bounds=[(lo, hi)],
                 method="L-BFGS-B")
    f_best = min(float(r.fun), best[3])
    frac_best = float(r.x[0]) if r.fun <= best[3] else f0
    return {"tile": tile, "variant": variant, "frac": frac_best}, f_best


# ---- a categorical choice that is best for some tasks only ------------------------------------------
SWITCH_CHOICES = ("a", "b", "c", "d")


def _switch_centre(t: float) -> np.ndarray:
    """The bowl's centre (5,) for task ``t``: inside [0.15, 0.85], each coordinate on its own path."""
    return 0.5 + 0.35 * np.sin(2.0 * np.pi * (np.array([0.5, -0.3, 0.4, 0.15, -0.45]) * t
                                              + np.array([0.0, 0.2, 0.4, 0.6, 0.8])))


def _switch(task: dict[str, Any], x: np.ndarray, n1: np.ndarray, n2: np.ndarray, choice: str) -> np.ndarray:
    """A run time (> 0) over 5 reals ``x`` (..., 5), two log-scale integers and a 4-way choice: a
    bowl whose centre moves with the task ``t`` in [0, 1], preferred integer sizes that grow with
    ``t``, and a choice whose penalty is lowest for "a" on most tasks but for "c" when ``t > 0.7``
    (about a quarter of a Latin hypercube of tasks): one ranking of the choices cannot serve all."""
    t = float(task["t"])
    centre = _switch_centre(t)
    bowl = np.sum((x - centre) ** 2 * np.array([1.0, 0.8, 0.6, 0.5, 0.4]), axis=-1)
    sizes = 0.08 * (np.log2(n1) - (2.0 + 4.0 * t)) ** 2 + 0.05 * (np.log2(n2) - (6.0 - 3.0 * t)) ** 2
    step = 1.0 / (1.0 + np.exp(-(t - 0.7) * 40.0))  # 0 below t = 0.7, 1 above
    penalty = {"a": 0.10 + 0.35 * step, "b": 0.30, "c": 0.45 - 0.40 * step, "d": 0.50}[choice]
    return (1.0 + 0.3 * t) * (1.0 + bowl + sizes + penalty)


def switch_problem() -> Problem:
    tasks = Space([Real("t", 0.0, 1.0)])
    params = Space([*(Real(f"x{k}", 0.0, 1.0) for k in range(5)), Integer("n1", 1, 256, log=True),
                    Integer("n2", 1, 256, log=True), Categorical("choice", list(SWITCH_CHOICES))])

    def f(t: dict, p: dict) -> float:
        x = np.array([p[f"x{k}"] for k in range(5)])
        return float(_switch(t, x, np.float64(p["n1"]), np.float64(p["n2"]), p["choice"]))

    return Problem(tasks, params, f, name="switch")


def switch_optimum(task: dict[str, Any]) -> tuple[dict[str, Any], float]:
    t = float(task["t"])
    centre = _switch_centre(t)
    ints = np.arange(1, 257, dtype=float)
    n1 = ints[np.argmin(0.08 * (np.log2(ints) - (2.0 + 4.0 * t)) ** 2)]
    n2 = ints[np.argmin(0.05 * (np.log2(ints) - (6.0 - 3.0 * t)) ** 2)]
    best = min(SWITCH_CHOICES, key=lambda c: float(_switch(task, centre, n1, n2, c)))
    params = {**{f"x{k}": float(centre[k]) for k in range(5)}, "n1": int(n1), "n2": int(n2), "choice": best}
    return params, float(_switch(task, centre, n1, n2, best))


# ---- two reals, a log integer and a choice, with a narrow valley ---------------------------------------
def _valley(task: dict[str, Any], x1: np.ndarray, x2: np.ndarray, n: np.ndarray, kind: str) -> np.ndarray:
    """A run time (> 0): a curved valley in (x1, x2) whose floor moves with the task ``s`` in
    [0, 1], a preferred size ``n`` and a choice whose best switches from "p" to "q" halfway; the
    valley is narrow across ``x2`` (a steep input) and wide along ``x1`` (a flat one), the kind of
    landscape where a fit can put all its weight on one input."""
    s = float(task["s"])
    floor = 0.3 + 0.4 * s + 0.15 * np.sin(3.0 * x1)
    across = 12.0 * (x2 - floor) ** 2
    along = 0.6 * (x1 - (0.7 - 0.4 * s)) ** 2
    size = 0.06 * (np.log2(n) - (3.0 + 3.0 * s)) ** 2
    penalty = {"p": 0.25 * s, "q": 0.25 * (1.0 - s), "r": 0.2}[kind]
    return (1.0 + 0.5 * s) * (1.0 + across + along + size + penalty)


def valley_problem() -> Problem:
    tasks = Space([Real("s", 0.0, 1.0)])
    params = Space([Real("x1", 0.0, 1.0), Real("x2", 0.0, 1.0), Integer("n", 1, 128, log=True),
                    Categorical("kind", ["p", "q", "r"])])
    return Problem(tasks, params, lambda t, p: float(_valley(t, np.float64(p["x1"]), np.float64(p["x2"]),
                                                              np.float64(p["n"]), p["kind"])), name="valley")


def valley_optimum(task: dict[str, Any]) -> tuple[dict[str, Any], float]:
    x1 = np.linspace(0.0, 1.0, 2001)
    sizes = np.arange(1, 129, dtype=float)
    best: tuple[Any, ...] = (None, np.inf)
    for kind in ("p", "q", "r"):
        # along the valley floor x2 = floor(x1) the "across" term vanishes
        s = float(task["s"])
        x2 = np.clip(0.3 + 0.4 * s + 0.15 * np.sin(3.0 * x1), 0.0, 1.0)
        y = _valley(task, x1[:, None], x2[:, None], sizes[None, :], kind)
        i, j = np.unravel_index(np.argmin(y), y.shape)
        if y[i, j] < best[1]:
            best = ({"x1": float(x1[i]), "x2": float(x2[i]), "n": int(sizes[j]), "kind": kind}, float(y[i, j]))
    params, _ = best
    r = minimize(lambda v: float(_valley(task, v[0], v[1], np.float64(params["n"]), params["kind"])),
                 [params["x1"], params["x2"]], bounds=[(0.0, 1.0), (0.0, 1.0)], method="L-BFGS-B")
    params = {**params, "x1": float(r.x[0]), "x2": float(r.x[1])}
    return params, min(float(r.fun), best[1])


# ---- noise ----------------------------------------------------------------------------------------
def with_noise(problem: Problem, rel_sd: float = 0.1, seed: int = 0) -> Problem:
    """``problem`` with multiplicative run-time noise on a positive objective: each call returns
    ``f * exp(|e|)`` with ``e ~ Student-t(3) * rel_sd`` (runs are only ever slowed down, sometimes a
    lot, as real launches are). The draws come from one generator seeded by ``seed``."""
    if not rel_sd >= 0.0:
        raise ValueError(f"rel_sd must be >= 0, got {rel_sd!r}")
    rng = np.random.default_rng(seed)
    inner = problem.objective

    def noisy(task: dict[str, Any], params: dict[str, Any]) -> float:
        value = float(inner(task, params))
        return value * math.exp(abs(float(rng.standard_t(3))) * rel_sd)

    return Problem(problem.task_space, problem.param_space, noisy, constraints=problem.constraints,
                   constants=problem.constants, name=f"{problem.name}+noise")


FAMILIES = {
    "demo": (demo_problem, demo_optimum),
    "branin": (branin_problem, branin_optimum),
    "sphere": (sphere_problem, sphere_optimum),
    "branin_drift": (branin_drift_problem, branin_drift_optimum),
    "hartmann6": (hartmann6_problem, hartmann6_optimum),
    "mixed": (mixed_problem, mixed_optimum),
    "switch": (switch_problem, switch_optimum),
    "valley": (valley_problem, valley_optimum),
}
