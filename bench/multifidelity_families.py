"""The multi-fidelity families of bench/multifidelity.py (issue 44): the standard multi-fidelity test
functions of the literature in multitask form, each with its published low-fidelity form and a cost
per fidelity.

Every family is minimised over the unit box ``[0, 1]^d`` (the function's own domain is mapped onto
it), has one fidelity dimension ``fidelity`` whose target value is 1.0, and a cost per run in
seconds of a simulated machine (nothing sleeps: the harness adds the costs up):

* two-level families, ``fidelity`` in {0.1, 1.0}, cost 0.1 and 1.0 (ratio 1:10):
  ``currin`` (2-d, Currin et al. 1988, maximised: -f; low fidelity of Xiong et al. 2013, the
  average of f at four points 0.05 away), ``park`` (4-d, Park 1991, maximised; low fidelity
  ``(1 + sin(x1)/10) f - 2 x1 + x2^2 + x3^2 + 0.5``, Xiong et al. 2013), ``borehole`` (8-d, the
  water flow through a borehole of Morris et al. 1993, maximised; low fidelity of Xiong et al. 2013:
  ``2 pi`` -> 5 and 1 -> 1.5 in the denominator);
* continuous families, ``fidelity`` a real in [0, 1], cost ``0.1 + 0.9 s^2`` (the MF-GP / BOCA
  literature's cost): ``hartmann3`` and ``hartmann6`` (alpha_1 -> alpha_1 - 0.1 (1 - s), the
  form of Kandasamy et al. 2016 and BoTorch's AugmentedHartmann), ``branin`` (b -> b - 0.1 (1 - s),
  BoTorch's AugmentedBranin);
* the guard's pair: ``currin`` above and ``currin_noinfo``, the same target with a low fidelity
  that ranks configurations at random (a fixed smooth random function of the same mean and spread,
  independent of the target).

Tasks are shifted and scaled instances (:data:`N_TASKS` of them, task 0 the function itself):
instance ``i`` evaluates ``a_i f(m(x + d_i)) + b_i`` where ``m`` mirrors back into the unit box
(continuous, so the instances stay smooth), ``d_i`` a shift of at most :data:`MAX_SHIFT` per
coordinate, ``a_i`` in [0.7, 1.4]; the low fidelity of an instance is transformed the same way.
Known optima per task (target fidelity, noise-free): the best of a dense random sample polished by
L-BFGS-B (task 0 of every family matches the published optimum: tests/test_multifidelity_families.py),
``f_ref`` the median of the target over the box (normalised regret 1).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np

import gptask as gt

TARGET = 1.0
#: the two levels of the two-level families and their costs (seconds)
LEVELS = (0.1, 1.0)
LEVEL_COST = {0.1: 0.1, 1.0: 1.0}
#: continuous fidelity: cost(s) = COST_FLOOR + (1 - COST_FLOOR) s^2
COST_FLOOR = 0.1
N_TASKS = 3
MAX_SHIFT = 0.1
TASK_SEED = 4444
REFERENCE_SAMPLES = 20_000
POLISH_STARTS = 8


# ---- the functions, on their own domains, vectorised over rows of X (n, d) ------------------------------------
def _currin_raw(x1: np.ndarray, x2: np.ndarray) -> np.ndarray:
    x2 = np.maximum(x2, 1e-12)
    return (1.0 - np.exp(-1.0 / (2.0 * x2))) * (2300 * x1**3 + 1900 * x1**2 + 2092 * x1 + 60) / (
        100 * x1**3 + 500 * x1**2 + 4 * x1 + 20)


def currin_high(X: np.ndarray) -> np.ndarray:
    """Currin exponential on [0, 1]^2 (maximum 13.7987 on x2 = 0)."""
    return _currin_raw(X[:, 0], X[:, 1])


def currin_low(X: np.ndarray) -> np.ndarray:
    """Xiong et al. (2013): the mean of the high fidelity at (x1 +- 0.05, x2 + 0.05) and
    (x1 +- 0.05, max(0, x2 - 0.05))."""
    x1, x2 = X[:, 0], X[:, 1]
    lo = np.maximum(0.0, x2 - 0.05)
    return 0.25 * (_currin_raw(x1 + 0.05, x2 + 0.05) + _currin_raw(x1 + 0.05, lo)
                   + _currin_raw(x1 - 0.05, x2 + 0.05) + _currin_raw(x1 - 0.05, lo))


def park_high(X: np.ndarray) -> np.ndarray:
    """Park (1991) on (0, 1]^4."""
    x1, x2, x3, x4 = (X[:, k] for k in range(4))
    x1 = np.maximum(x1, 1e-9)
    return x1 / 2 * (np.sqrt(1 + (x2 + x3**2) * x4 / x1**2) - 1) + (x1 + 3 * x4) * np.exp(1 + np.sin(x3))


def park_low(X: np.ndarray) -> np.ndarray:
    """Xiong et al. (2013): (1 + sin(x1)/10) f - 2 x1 + x2^2 + x3^2 + 0.5."""
    x1, x2, x3 = X[:, 0], X[:, 1], X[:, 2]
    return (1 + np.sin(x1) / 10) * park_high(X) - 2 * x1 + x2**2 + x3**2 + 0.5


#: the borehole's inputs: rw, r, Tu, Hu, Tl, Hl, L, Kw
BOREHOLE_BOUNDS = np.array([[0.05, 0.15], [100, 50000], [63070, 115600], [990, 1110],
                            [63.1, 116], [700, 820], [1120, 1680], [9855, 12045]], dtype=float)


def _borehole(X: np.ndarray, num: float, one: float) -> np.ndarray:
    rw, r, tu, hu, tl, hl, L, kw = (X[:, k] for k in range(8))
    lr = np.log(r / rw)
    return num * tu * (hu - hl) / (lr * (one + 2 * L * tu / (lr * rw**2 * kw) + tu / tl))


def borehole_high(X: np.ndarray) -> np.ndarray:
    """Water flow through a borehole (m^3/yr), X on the physical ranges of BOREHOLE_BOUNDS."""
    return _borehole(X, 2 * np.pi, 1.0)


def borehole_low(X: np.ndarray) -> np.ndarray:
    """Xiong et al. (2013): 5 instead of 2 pi, 1.5 instead of 1."""
    return _borehole(X, 5.0, 1.5)


HARTMANN3_A = np.array([[3.0, 10, 30], [0.1, 10, 35], [3.0, 10, 30], [0.1, 10, 35]])
HARTMANN3_P = 1e-4 * np.array([[3689, 1170, 2673], [4699, 4387, 7470], [1091, 8732, 5547], [381, 5743, 8828]])
HARTMANN6_A = np.array([[10, 3, 17, 3.5, 1.7, 8], [0.05, 10, 17, 0.1, 8, 14],
                        [3, 3.5, 1.7, 10, 17, 8], [17, 8, 0.05, 10, 0.1, 14]], dtype=float)
HARTMANN6_P = 1e-4 * np.array([[1312, 1696, 5569, 124, 8283, 5886], [2329, 4135, 8307, 3736, 1004, 9991],
                               [2348, 1451, 3522, 2883, 3047, 6650], [4047, 8828, 8732, 5743, 1091, 381]])
HARTMANN_ALPHA = np.array([1.0, 1.2, 3.0, 3.2])


def hartmann(X: np.ndarray, s: np.ndarray | float, A: np.ndarray, P: np.ndarray) -> np.ndarray:
    """Hartmann (minimised) at fidelity s: alpha_1 - 0.1 (1 - s) (Kandasamy et al. 2016)."""
    s = np.broadcast_to(np.asarray(s, dtype=float), (X.shape[0],))
    alpha = np.tile(HARTMANN_ALPHA, (X.shape[0], 1))
    alpha[:, 0] -= 0.1 * (1 - s)
    inner = np.einsum("nkd->nk", A[None] * (X[:, None, :] - P[None]) ** 2)
    return -np.sum(alpha * np.exp(-inner), axis=1)


def branin(X: np.ndarray, s: np.ndarray | float) -> np.ndarray:
    """Branin on [-5, 10] x [0, 15] at fidelity s: b - 0.1 (1 - s) (BoTorch's AugmentedBranin)."""
    s = np.broadcast_to(np.asarray(s, dtype=float), (X.shape[0],))
    x1, x2 = X[:, 0], X[:, 1]
    b = 5.1 / (4 * np.pi**2) - 0.1 * (1 - s)
    return (x2 - b * x1**2 + 5 / np.pi * x1 - 6) ** 2 + 10 * (1 - 1 / (8 * np.pi)) * np.cos(x1) + 10


class RandomSmooth:
    """A fixed smooth random function on [0, 1]^d (random Fourier features), scaled to mean ``mean``
    and standard deviation ``std`` over the box: a fidelity that ranks configurations at random."""

    def __init__(self, dim: int, mean: float, std: float, seed: int = 7, n_features: int = 30) -> None:
        rng = np.random.default_rng(seed)
        self.w = rng.normal(0.0, 6.0, (n_features, dim))
        self.b = rng.uniform(0, 2 * np.pi, n_features)
        self.a = rng.normal(0.0, 1.0, n_features)
        raw = self._raw(np.random.default_rng(seed + 1).random((4000, dim)))
        self.shift, self.scale = mean - raw.mean() * std / raw.std(), std / raw.std()

    def _raw(self, U: np.ndarray) -> np.ndarray:
        return np.cos(U @ self.w.T + self.b) @ self.a

    def __call__(self, U: np.ndarray) -> np.ndarray:
        return self.shift + self.scale * self._raw(U)


# ---- the families -------------------------------------------------------------------------------------------------
@dataclass
class MFFunction:
    """A minimised function of the unit box at a fidelity: ``base(U, s) -> (n,)`` for U (n, d) in
    [0, 1]^d and s (n,); ``cost(s) -> seconds``; ``levels``: the allowed fidelities (None:
    continuous in [0, 1])."""

    name: str
    dim: int
    base: Callable[[np.ndarray, np.ndarray], np.ndarray]
    levels: tuple[float, ...] | None
    published_opt: float | None = None

    def cost(self, s: float) -> float:
        if self.levels is not None:
            return LEVEL_COST[float(s)]
        return COST_FLOOR + (1 - COST_FLOOR) * float(s) ** 2


def _two_level(high: Callable[[np.ndarray], np.ndarray], low: Callable[[np.ndarray], np.ndarray],
               bounds: np.ndarray | None = None, sign: float = 1.0) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    def base(U: np.ndarray, s: np.ndarray) -> np.ndarray:
        X = U if bounds is None else bounds[:, 0] + U * (bounds[:, 1] - bounds[:, 0])
        s = np.broadcast_to(np.asarray(s, dtype=float), (U.shape[0],))
        out = np.empty(U.shape[0])
        hi = s >= TARGET
        if hi.any():
            out[hi] = sign * high(X[hi])
        if (~hi).any():
            out[~hi] = sign * low(X[~hi])
        return out
    return base


def _branin_unit(U: np.ndarray, s: np.ndarray) -> np.ndarray:
    return branin(np.column_stack([-5 + 15 * U[:, 0], 15 * U[:, 1]]), s)


def _currin_noinfo() -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    sample = -currin_high(np.random.default_rng(TASK_SEED).random((4000, 2)))
    g = RandomSmooth(2, float(sample.mean()), float(sample.std()))
    return _two_level(lambda X: currin_high(X), lambda X: -g(X), sign=-1.0)


def functions() -> dict[str, MFFunction]:
    """The base functions (task 0 of each family), by family name."""
    return {
        "currin": MFFunction("currin", 2, _two_level(currin_high, currin_low, sign=-1.0), LEVELS, -13.7986850),
        "currin_noinfo": MFFunction("currin_noinfo", 2, _currin_noinfo(), LEVELS, -13.7986850),
        "park": MFFunction("park", 4, _two_level(park_high, park_low, sign=-1.0), LEVELS),
        "borehole": MFFunction("borehole", 8, _two_level(borehole_high, borehole_low, BOREHOLE_BOUNDS, -1.0), LEVELS),
        "hartmann3": MFFunction("hartmann3", 3, lambda U, s: hartmann(U, s, HARTMANN3_A, HARTMANN3_P), None, -3.86278),
        "hartmann6": MFFunction("hartmann6", 6, lambda U, s: hartmann(U, s, HARTMANN6_A, HARTMANN6_P), None, -3.32237),
        "branin": MFFunction("branin", 2, _branin_unit, None, 0.397887),
    }


def mirror(U: np.ndarray) -> np.ndarray:
    """U folded back into [0, 1] (reflection at both ends; continuous)."""
    V = np.mod(U, 2.0)
    return np.where(V > 1.0, 2.0 - V, V)


class MFObjective:
    """The objective of a family: ``value(task_index, U, s)`` (vectorised, noise-free), and the
    gptask objective ``(task, params) -> {"y": value, "cost": seconds}`` with params holding the
    parameters ``x0..x{d-1}`` and ``fidelity`` (absent: the target)."""

    def __init__(self, fn: MFFunction, shifts: np.ndarray, scales: np.ndarray, offsets: np.ndarray) -> None:
        self.fn, self.shifts, self.scales, self.offsets = fn, shifts, scales, offsets
        self.names = [f"x{k}" for k in range(fn.dim)]

    def value(self, i: int, U: np.ndarray, s: np.ndarray | float) -> np.ndarray:
        U = np.atleast_2d(np.asarray(U, dtype=float))
        return self.scales[i] * self.fn.base(mirror(U + self.shifts[i]), s) + self.offsets[i]

    def point(self, params: dict) -> np.ndarray:
        return np.array([[float(params[n]) for n in self.names]])

    def __call__(self, task: dict, params: dict) -> dict[str, float]:
        s = float(params.get("fidelity", TARGET))
        return {"y": float(self.value(int(task["instance"]), self.point(params), s)[0]), "cost": self.fn.cost(s)}

    def target_value(self, task: dict, params: dict) -> float:
        """The noise-free value at the target fidelity (gptask's single-fidelity objective)."""
        return float(self.value(int(task["instance"]), self.point(params), TARGET)[0])


@dataclass
class MFFamily:
    """name; fn; objective; tasks (``{"instance": i}``); f_opt, f_ref per task (target fidelity);
    x_opt per task (unit box); informative: whether the low fidelities rank like the target."""

    name: str
    fn: MFFunction
    objective: MFObjective
    tasks: list[dict]
    f_opt: list[float]
    f_ref: list[float]
    x_opt: list[np.ndarray]
    informative: bool = True
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def dim(self) -> int:
        return self.fn.dim

    @property
    def levels(self) -> tuple[float, ...] | None:
        return self.fn.levels

    def cost(self, s: float) -> float:
        return self.fn.cost(s)

    def param_space(self) -> gt.Space:
        return gt.Space([gt.Real(n, 0.0, 1.0) for n in self.objective.names])

    def task_space(self) -> gt.Space:
        return gt.Space([gt.Categorical("instance", list(range(len(self.tasks))))])

    def fidelity_space(self) -> gt.Space:
        if self.levels is not None:
            return gt.Space([gt.Ordinal("fidelity", list(self.levels))])
        return gt.Space([gt.Real("fidelity", 0.0, 1.0)])

    def fidelity_for_budget(self, b: float) -> float:
        """The fidelity a Hyperband-style peer runs at for a budget fraction b in (0, 1]: b itself
        when continuous, else the highest level <= b (the lowest level at least)."""
        if self.levels is None:
            return float(min(max(b, 0.0), 1.0))
        ok = [lv for lv in self.levels if lv <= b + 1e-9]
        return float(max(ok) if ok else min(self.levels))

    def peer_budgets(self) -> tuple[float, int]:
        """(min budget fraction, eta) of the Hyperband-style peers: one rung per level of a
        two-level family (eta 10), rungs 1/9, 1/3, 1 (eta 3) for a continuous fidelity."""
        if self.levels is not None:
            return min(self.levels), int(round(max(self.levels) / min(self.levels)))
        return 1.0 / 9.0, 3

    def normalised_regret(self, i: int, y: float) -> float:
        return (y - self.f_opt[i]) / (self.f_ref[i] - self.f_opt[i])


def _optimum(obj: MFObjective, i: int, dim: int) -> tuple[float, np.ndarray, float]:
    """(f_opt, x_opt, f_ref) of task i at the target: a dense random sample, its best points
    polished by L-BFGS-B in the box."""
    from scipy.optimize import minimize

    rng = np.random.default_rng(TASK_SEED + 17 * i)
    U = rng.random((REFERENCE_SAMPLES * (2 if dim > 4 else 1), dim))
    vals = obj.value(i, U, TARGET)
    f_ref = float(np.median(vals))
    best_u, best_v = U[np.argmin(vals)], float(vals.min())
    for k in np.argsort(vals)[:POLISH_STARTS]:
        res = minimize(lambda u: float(obj.value(i, u[None], TARGET)[0]), U[k], method="L-BFGS-B",
                       bounds=[(0.0, 1.0)] * dim)
        if res.fun < best_v:
            best_u, best_v = np.clip(res.x, 0, 1), float(res.fun)
    return best_v, best_u, f_ref


def build(name: str, n_tasks: int = N_TASKS) -> MFFamily:
    """The family ``name`` (see :data:`NAMES`) with ``n_tasks`` instances."""
    fns = functions()
    if name not in fns:
        raise SystemExit(f"unknown multi-fidelity family {name!r}; known: {', '.join(fns)}")
    fn = fns[name]
    rng = np.random.default_rng(TASK_SEED)
    shifts = rng.uniform(-MAX_SHIFT, MAX_SHIFT, (n_tasks, fn.dim))
    scales = rng.uniform(0.7, 1.4, n_tasks)
    offsets = rng.uniform(-0.5, 0.5, n_tasks)
    shifts[0], scales[0], offsets[0] = 0.0, 1.0, 0.0
    obj = MFObjective(fn, shifts, scales, offsets)
    f_opt, x_opt, f_ref = [], [], []
    for i in range(n_tasks):
        fo, xo, fr = _optimum(obj, i, fn.dim)
        f_opt.append(fo)
        x_opt.append(xo)
        f_ref.append(fr)
    return MFFamily(name, fn, obj, [{"instance": i} for i in range(n_tasks)], f_opt, f_ref, x_opt,
                    informative=not name.endswith("_noinfo"))


NAMES = tuple(functions())


@lru_cache(maxsize=None)
def family(name: str) -> MFFamily:
    return build(name)


def rank_correlation(fam: MFFamily, i: int, s: float, n: int = 2000, seed: int = 0) -> float:
    """Spearman correlation between fidelity s and the target over a uniform sample of task i."""
    U = np.random.default_rng(seed).random((n, fam.dim))
    a = np.argsort(np.argsort(fam.objective.value(i, U, s)))
    b = np.argsort(np.argsort(fam.objective.value(i, U, TARGET)))
    return float(np.corrcoef(a, b)[0, 1])
