"""A task's Pareto front from its trials, and the user's rule for picking one configuration on it.

For a problem with named outputs (:mod:`gptask.problem.objectives`):

* :func:`task_front`: a task's configurations whose every complete evaluation meets every limit,
  with their observed outputs (the mean over repeated evaluations), and among them those no other
  dominates in the objectives (each taken in its direction). What ``result.pareto(i)``,
  ``gptask show`` and the plots list.
* :class:`PickRule`: how a recommendation chooses on the front (:mod:`gptask.results.recommend`):

  - ``{"weights": {"time": 1, "memory": 0.5}}``: the smallest weighted sum of the objectives, each
    scaled to [0, 1] over the front (0 at its best value there, 1 at its worst), so that the
    weights compare objectives of different units; an objective not named weighs 0;
  - ``{"reference": {"time": 2.0, "memory": 1e9}}``: the point closest to a reference point in the
    scaled objectives by the Chebyshev (worst-objective) distance of the achievement function
    ``max_k (y_k - r_k) / range_k``; a point that beats the reference in every objective scores
    below 0 and wins;
  - ``{"limit": {"memory": ("<=", 1e9)}}``: the best primary objective on the front of the
    configurations that meet these limits (on any output) in every complete evaluation, as the
    problem's own limits bind; a recommendation raises ValueError when none meets them;
  - None: equal weights on every objective (for one objective: the objective itself).

Scores are minimised; ties keep the given order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..problem.objectives import Limit, Outputs, outputs_spec
from ..model.pareto import non_dominated
from ..data.trials import Status, point_key

__all__ = ["PickRule", "FrontPoint", "task_front", "meets_limits", "RULE_KINDS"]

#: the kinds of rule a recommendation accepts
RULE_KINDS = ("weights", "reference", "limit")


@dataclass(frozen=True)
class FrontPoint:
    """One configuration of a task: params, its observed outputs (means over its complete
    evaluations, user units) and how many evaluations they rest on."""

    params: dict[str, Any]
    values: dict[str, float]
    evaluations: int


def meets_limits(records: Sequence[Any], spec: Outputs | None) -> bool:
    """Whether every record (complete evaluations of one configuration) meets every limit."""
    if spec is None or not spec.limits:
        return True
    return all(spec.meets_limits(r["values"]) for r in records)


def _grouped(records: Sequence[Any]) -> list[tuple[dict, list]]:
    groups: dict[tuple, tuple[dict, list]] = {}
    for r in records:
        groups.setdefault(point_key(r["params"]), (dict(r["params"]), []))[1].append(r)
    return list(groups.values())


def task_front(records: Sequence[Any], spec: Outputs, everything: bool = False) -> list[FrontPoint]:
    """The front of a task's finished ``records`` (module docstring), sorted by the primary objective
    (best first). everything: every configuration meeting the limits, not only the front."""
    points = []
    for params, rs in _grouped([r for r in records if r["status"] == Status.COMPLETE and r["values"]]):
        if not meets_limits(rs, spec):
            continue
        values = {n: float(np.mean([r["values"][n] for r in rs])) for n in spec.names}
        points.append(FrontPoint(params, values, len(rs)))
    if not points:
        return []
    Y = np.array([[spec.sign(n) * p.values[n] for n in spec.objectives] for p in points])
    keep = np.ones(len(points), dtype=bool) if everything else non_dominated(Y)
    order = np.argsort(Y[:, 0], kind="stable")
    return [points[k] for k in order if keep[k]]


@dataclass(frozen=True)
class PickRule:
    """A rule choosing one point of a front (module docstring). kind: "weights", "reference",
    "limit" or "" (the default: equal weights); what: its weights, reference point or limits."""

    kind: str = ""
    what: tuple = ()

    @classmethod
    def parse(cls, rule: Any, spec: Outputs | None) -> "PickRule":
        """A rule from ``{"weights": {...}}``, ``{"reference": {...}}``, ``{"limit": {...}}`` or None;
        ValueError naming what is wrong (an unknown kind or output, a weight < 0, ...)."""
        if rule is None:
            return cls()
        if isinstance(rule, PickRule):
            return rule
        if spec is None:
            raise ValueError("a pick rule needs a problem with named outputs (Problem(objectives=...))")
        if not isinstance(rule, Mapping) or len(rule) != 1:
            raise ValueError(f"a pick rule is one of {{'weights': {{...}}}}, {{'reference': {{...}}}}, "
                             f"{{'limit': {{...}}}}, got {rule!r}")
        kind, what = next(iter(rule.items()))
        if kind not in RULE_KINDS:
            raise ValueError(f"pick rule kind must be one of {', '.join(RULE_KINDS)}, got {kind!r}")
        if not isinstance(what, Mapping) or not what:
            raise ValueError(f"pick rule {kind!r} needs a non-empty mapping of outputs, got {what!r}")
        if kind == "limit":
            extra = outputs_spec(list(spec.objectives), [n for n in spec.names if n not in spec.objectives],
                                 dict(what))
            assert extra is not None
            return cls(kind, extra.limits)
        known = spec.objectives
        bad = [k for k in what if k not in known]
        if bad:
            raise ValueError(f"pick rule {kind!r} names {bad}, not objectives of the problem ({', '.join(known)})")
        items = []
        for k in known:
            v = what.get(k, 0.0 if kind == "weights" else None)
            if v is None:
                raise ValueError(f"pick rule 'reference' needs a value for every objective; {k!r} is missing")
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not np.isfinite(v):
                raise ValueError(f"pick rule {kind!r}: {k} must be a finite number, got {v!r}")
            if kind == "weights" and v < 0:
                raise ValueError(f"pick rule 'weights': {k} must be >= 0, got {v!r}")
            items.append((k, float(v)))
        if kind == "weights" and not any(v > 0 for _, v in items):
            raise ValueError("pick rule 'weights' needs a positive weight")
        return cls(kind, tuple(items))

    def describe(self) -> str:
        if not self.kind:
            return "equal weights on the objectives scaled over the front"
        if self.kind == "limit":
            return "the best primary objective within " + ", ".join(map(str, self.what))
        return f"{self.kind} " + ", ".join(f"{k}={v:g}" for k, v in self.what)

    def scores(self, values: Sequence[Mapping[str, float]], front: Sequence[Mapping[str, float]],
               spec: Outputs) -> np.ndarray:
        """(n,) scores (lower is better) of ``values`` (one mapping of outputs per candidate, user
        units); ``front``: the task's front the scaling is taken over (module docstring)."""
        objectives = spec.objectives
        Y = np.array([[spec.sign(n) * float(v[n]) for n in objectives] for v in values]).reshape(-1, len(objectives))
        F = np.array([[spec.sign(n) * float(v[n]) for n in objectives] for v in front]).reshape(-1, len(objectives))
        ref = F if len(F) else Y
        lo, hi = ref.min(axis=0), ref.max(axis=0)
        span = np.where(hi > lo, hi - lo, 1.0)
        scaled = (Y - lo) / span
        if self.kind == "limit":
            limits: tuple[Limit, ...] = self.what
            ok = np.array([all(lim.met(float(v[lim.output])) for lim in limits) for v in values])
            return np.where(ok, Y[:, 0], np.inf)
        if self.kind == "reference":
            r = np.array([spec.sign(k) * v for k, v in self.what])
            return np.max((Y - r) / span, axis=1)
        w = np.array([v for _, v in self.what]) if self.kind == "weights" else np.ones(len(objectives))
        return scaled @ w
