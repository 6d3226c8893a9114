"""Fidelity dimensions: cheap runs of a problem that teach its expensive ones (issue 44).

A problem may declare ``fidelity=Space([...])`` (iterations, a problem-size fraction, repetitions)
and ``target_fidelity={name: value}``, the fidelity its results are wanted at. The tuner runs a
few discrete *levels* of the fidelity (:func:`fidelity_levels`: the target first, then a geometric
ladder down by :data:`ETA`, as Hyperband's brackets; when ``run_cost`` prices the levels, a level
nearly as cheap as the one below it is left out, :func:`cost_spaced`), and models each (task, level)
as a task of the LCM whose base task's coregionalisation it shares, its level one more kernel input
(gptask.tuning.fidelity.LEVEL_MODEL): the fit learns how much each level says about the target.

Inside the tuner a fidelity problem is its :func:`expanded` problem: the task space followed by the
fidelity dimensions, so the history's task rows hold each run's fidelity values; the user's
objective is called through :class:`FidelityObjective`, which hands it the fidelity values *in the
params dict*, beside the parameters (``f(task, {**params, **fidelity})``).

Cost: a run's cost in seconds (:func:`run_cost_of`) is ``Problem(run_cost=...)`` of the dict the
constraints see (fidelity included) when given, else the ``"cost"`` output of a problem with named
outputs, else the run's measured wall time. (``Problem(cost_model=...)`` is something else: a rough
estimate of the objective for run-free prediction.)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ..data.trials import Trial
from ..space.dimensions import Boolean, Categorical, Integer, Ordinal, Real, Space

__all__ = ["ETA", "MAX_LEVELS", "COST_OUTPUT", "check_fidelity", "fidelity_levels", "cost_spaced", "FidelityObjective",
           "split_fidelity", "run_cost_of", "check_cost", "role_of"]

#: each fidelity level is the previous one divided by ETA (Hyperband's eta)
ETA = 3.0
#: at most this many levels, the target included
MAX_LEVELS = 4
#: the output of a problem with named outputs that, when present, is a run's cost in seconds
COST_OUTPUT = "cost"


def check_fidelity(fidelity: Any, target: Any, taken: Mapping[str, str]) -> tuple[Space | None, dict | None]:
    """The checked ``(fidelity, target_fidelity)`` of a :class:`~gptask.problem.definition.Problem`:
    both None, or a Space and a validated dict of a value of each of its dimensions. taken: the
    names already used, ``{name: "a parameter" | "a task dimension" | "a constant"}``. Raises
    TypeError or ValueError naming the offending value."""
    if fidelity is None:
        if target is not None:
            raise ValueError(f"Problem: target_fidelity={target!r} needs fidelity= (the fidelity dimensions)")
        return None, None
    if not isinstance(fidelity, Space):
        raise TypeError(f"Problem: fidelity must be a gptask.Space of fidelity dimensions, got {type(fidelity).__name__}")
    for name in fidelity.names:
        if name in taken:
            raise ValueError(f"Problem: fidelity dimension {name!r} has the name of {taken[name]}; "
                             "give it another name")
    if target is None:
        raise ValueError(f"Problem: fidelity={fidelity.names} needs target_fidelity={{name: value}}, the fidelity "
                         "the results are wanted at")
    if not isinstance(target, Mapping):
        raise TypeError(f"Problem: target_fidelity must be a dict {{name: value}}, got {target!r}")
    return fidelity, fidelity.validate(target, what="Problem: target_fidelity")


def _ladder(d: Any, target: Any) -> list[Any]:
    """The values of fidelity dimension ``d`` from ``target`` down: the target first."""
    if isinstance(d, (Integer, Real)):
        lo, hi = d.lo, d.hi
        end = lo if target > lo else hi  # a target at the lower bound: the cheap runs lie above it
        out = [target]
        for k in range(1, MAX_LEVELS):
            if target > 0 and end >= 0:  # geometric: divided (or multiplied) by ETA per level (a lower
                # bound of 0, e.g. a fraction in [0, 1], is approached, never reached: 1, 1/3, 1/9, 1/27)
                v = target * ETA ** (-k if end < target else k)
            else:
                v = target + (end - target) * k / (MAX_LEVELS - 1)
            v = int(round(v)) if isinstance(d, Integer) else float(v)
            v = min(max(v, lo), hi)
            if v not in out:
                out.append(v)
            if v == end:
                break
        return out
    if isinstance(d, Boolean):
        return [target, not target]
    if isinstance(d, Ordinal):
        return _ordinal_ladder(list(d.values() or []), target)
    values = list(d.values() or []) if isinstance(d, Categorical) else [target]
    return [target] + [v for v in values if v != target][: MAX_LEVELS - 1]


def _ordinal_ladder(values: list[Any], target: Any) -> list[Any]:
    """An ordered dimension's ladder: the target, then the other values from the target outwards (the
    nearest in the dimension's order first), so that the last level, where the fidelity proposer runs
    its cheap design and searches, is the farthest from the target: ``Ordinal([0.25, 0.5, 1.0])``
    with target 1 gives 1, 0.5, 0.25. Of more than ``MAX_LEVELS - 1`` other values, evenly spaced
    ones are kept, the nearest and the farthest among them. Ties (a target inside the list) go to the
    value listed first."""
    at = values.index(target)
    others = [values[i] for i in sorted((i for i in range(len(values)) if i != at), key=lambda i: abs(i - at))]
    if len(others) > MAX_LEVELS - 1:
        keep = np.unique(np.round(np.linspace(0, len(others) - 1, MAX_LEVELS - 1)).astype(int))
        others = [others[i] for i in keep]
    return [target, *others]


def fidelity_levels(fidelity: Space, target: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The fidelity levels the tuner runs, target first: level k takes each dimension's k-th value
    from the target down (a geometric ladder of ratio :data:`ETA` for numbers, the other listed
    values for choices; a dimension whose ladder is shorter stays at its last value), at most
    :data:`MAX_LEVELS` distinct levels."""
    ladders = {d.name: _ladder(d, target[d.name]) for d in fidelity}
    out: list[dict[str, Any]] = []
    for k in range(max(len(v) for v in ladders.values())):
        level = {n: v[min(k, len(v) - 1)] for n, v in ladders.items()}
        if level not in out:
            out.append(level)
    return out[:MAX_LEVELS]


def cost_spaced(prices: Sequence[float], ratio: float) -> list[int]:
    """The levels kept of a ladder priced ``prices`` (seconds per run, target first, each level
    cheaper than the one before): from the cheapest level up, a level is one rung with the last one
    kept when it costs less than ``ratio`` times it (ratio 1: every level kept), and the rung keeps
    its cheapest level (the cheapest level does most of the cheap runs); the target is always kept.
    Indices into ``prices``, ascending. A price that is not a finite number > 0, or a level dearer
    than the one before it (a ``Categorical`` ladder lists its other values in their own order; an
    ``Ordinal`` one whose costs do not follow its values), keeps every level."""
    p = np.asarray(prices, dtype=float)
    if p.size == 0 or not np.all(np.isfinite(p)) or np.any(p <= 0) or np.any(np.diff(p) > 0):
        return list(range(p.size))
    kept = [p.size - 1]
    for k in range(p.size - 2, 0, -1):
        if p[k] >= ratio * p[kept[-1]] * (1 - 1e-9):
            kept.append(k)
    return sorted({0, *kept})


def split_fidelity(task: Mapping[str, Any], names: list[str]) -> tuple[dict, dict]:
    """A task row of the expanded problem as ``(task, fidelity)``."""
    return ({k: v for k, v in task.items() if k not in names}, {k: task[k] for k in names if k in task})


class FidelityObjective:
    """The objective of the expanded problem: ``objective(task, {**params, **fidelity})`` for a task
    row holding the fidelity values (picklable when the user's objective is, for executors)."""

    def __init__(self, objective: Callable[[dict, dict], Any], names: list[str]) -> None:
        self.objective, self.names = objective, list(names)

    def __call__(self, task: dict, params: dict) -> Any:
        plain, fid = split_fidelity(task, self.names)
        return self.objective(plain, {**params, **fid})

    def split(self, task: Mapping[str, Any], params: Mapping[str, Any]) -> tuple[dict, dict, dict]:
        """A run of the expanded problem as ``(task, params, fidelity)``: what the user's objective
        receives, ``params`` with the fidelity values in it, and those values alone."""
        plain, fid = split_fidelity(task, self.names)
        return plain, {**params, **fid}, fid

    @property
    def resources(self) -> Callable[[dict, dict], Any] | None:
        """The user's objective's ``resources(task, params)`` (a Slurm executor's per-run rule,
        :class:`gptask.tuning.cluster.SlurmSteps`), called as the objective is: the fidelity values
        in ``params``; None when it has none."""
        rule = getattr(self.objective, "resources", None)
        if rule is None:
            return None

        def resources(task: dict, params: dict) -> Any:
            plain, merged, _ = self.split(task, params)
            return rule(plain, merged)
        return resources


def check_cost(value: Any, what: str) -> float:
    """A run's cost: a finite number of seconds >= 0, else ValueError naming ``what`` and the value."""
    try:
        c = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{what} must be a number of seconds >= 0, got {value!r}") from None
    if not (np.isfinite(c) and c >= 0.0):
        raise ValueError(f"{what} must be a finite number of seconds >= 0, got {value!r}")
    return c


def run_cost_of(run_cost: Callable[[dict], float] | None, point: Mapping[str, Any], trial: Trial) -> float | None:
    """A finished trial's cost in seconds: its stored ``extra["cost"]``, else ``run_cost(point)``
    (``point``: the dict the constraints see, fidelity included), else its ``"cost"`` output, else
    its wall time (None when it has none)."""
    stored = trial.extra.get("cost")
    if stored is not None:
        return float(stored)
    if run_cost is not None:
        return check_cost(run_cost(dict(point)), "run_cost")
    if COST_OUTPUT in trial.values:
        return float(trial.values[COST_OUTPUT])
    return trial.duration


def role_of(i: int, n_tuned: int, n_aux: int) -> str:
    """Task ``i``'s role in a run laid out as :func:`gptask.tuning.fidelity.expand_tasks` does: "target", "low fidelity" or
    "auxiliary"."""
    if i % (n_tuned + n_aux) >= n_tuned:
        return "auxiliary"
    return "target" if i < n_tuned else "low fidelity"
