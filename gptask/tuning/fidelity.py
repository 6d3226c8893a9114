"""Cost-aware multitask tuning over fidelity levels and auxiliary tasks (issue 44, docs/fidelity.md).

The run's tasks are laid out as ``(level, base task)``: base tasks are the tuned tasks then the
auxiliary ones, levels the problem's fidelity levels, target first
(:meth:`gptask.problem.definition.Problem.fidelity_levels`); the tuner's task ``level * n_base + b``
is base task ``b`` at that level, so its first tasks are the tuned tasks at the target fidelity and
``result.best(k)`` speaks of them. Every (task, level) is one task of the LCM: its
coregionalisation learns how the levels relate.

:class:`FidelityProposer` (the tuner's proposer slot) chooses what to buy:

* initial designs: a tuned task's target level runs the first ``ceil(n_initial / 2)`` points of its
  Latin hypercube, each cheaper level all ``n_initial`` (the target's points included, so every
  level has configurations in common with the target to be judged on);
* then, per tuned task and round, one level: the target at least every :data:`TARGET_EVERY`-th
  searched run (Hyperband's and GPTuneBand's share of full-fidelity runs: the recommendation comes
  from target runs only), otherwise the level of largest ``rho**2 / cost``, where ``rho`` is the
  model's correlation between that level and the target at one configuration (from the fitted
  coregionalisation; 1 for the target) and ``cost`` its mean measured cost: the expected improvement
  at the target a run buys, through its correlation, per second. The configuration is the level's own
  log-EI maximiser (with the levels correlated, the target's);
* the guard: a level (or an auxiliary task) whose correlation with the target is below
  :data:`RHO_MIN`, by the model or by the rank correlation of the configurations it shares with the
  target (at least :data:`MIN_COMMON` of them), is not bought again (logged, and listed in
  ``result.fidelity["dropped"]``);
* auxiliary tasks run their initial designs only: data that teaches the tuned tasks.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..data.trials import Status, params_key
from ..problem.definition import Problem
from ..problem.fidelity import role_of
from .proposer import Proposer
from .settings import SOURCE_SEARCH

__all__ = ["TARGET_EVERY", "RHO_MIN", "MIN_COMMON", "COST_BUDGET_RUNS", "FidelityProposer", "expand_tasks",
           "level_correlations", "spearman"]

log = logging.getLogger(__name__)

#: at least every TARGET_EVERY-th searched run of a tuned task is at the target fidelity
TARGET_EVERY = 3
#: a level or auxiliary task whose correlation with the target is below this is not bought again
RHO_MIN = 0.3
#: the rank correlation on configurations run at both a level and the target counts from this many
MIN_COMMON = 5
#: with ``cost_budget`` and no ``budget``, each task and level takes at most this many runs (the cost
#: budget is what stops the run; the exact model's size caps it further, see gptask.tune)
COST_BUDGET_RUNS = 200


def expand_tasks(problem: Problem, tasks: Sequence[Mapping[str, Any]],
                 aux: Sequence[Mapping[str, Any]]) -> list[dict]:
    """The run's task rows: every base task (``tasks`` then ``aux``) at every fidelity level, level
    by level, target first (``[{**task, **level}, ...]``; the base tasks themselves without fidelity)."""
    base = [dict(t) for t in tasks] + [dict(t) for t in aux]
    return [{**t, **level} for level in problem.fidelity_levels() for t in base]


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    """Spearman's rank correlation of two (n,) arrays (ties by average rank; 0 for a constant one)."""
    ra = _ranks(np.asarray(a, dtype=float))
    rb = _ranks(np.asarray(b, dtype=float))
    sa, sb = ra.std(), rb.std()
    if sa == 0 or sb == 0:
        return 0.0
    return float(np.mean((ra - ra.mean()) * (rb - rb.mean())) / (sa * sb))


def _ranks(x: np.ndarray) -> np.ndarray:
    order = np.argsort(x, kind="mergesort")
    r = np.empty(len(x))
    r[order] = np.arange(len(x), dtype=float)
    for v in np.unique(x):  # average rank of ties
        m = x == v
        if m.sum() > 1:
            r[m] = r[m].mean()
    return r


def level_correlations(model: Any, target: int, others: Sequence[int]) -> dict[int, float]:
    """The LCM's correlation between task ``target`` and each of ``others`` at one configuration:
    ``C[i, t] / sqrt(C[i, i] C[t, t])`` with ``C = sum_q B_q`` (the coregionalisation)."""
    C = np.sum(model.coregionalization(), axis=0)
    out = {}
    for i in others:
        den = math.sqrt(max(C[i, i] * C[target, target], 1e-300))
        out[i] = float(C[i, target] / den)
    return out


class FidelityProposer(Proposer):
    """What a fidelity / auxiliary-task run buys next (module docstring).

    n_tuned, n_aux: the tuned and auxiliary base tasks; n_levels: the fidelity levels (1: none).
    """

    name = "fidelity"

    def __init__(self, n_tuned: int, n_aux: int, n_levels: int) -> None:
        super().__init__()
        self.n_tuned, self.n_aux, self.n_levels = n_tuned, n_aux, n_levels
        self.n_base = n_tuned + n_aux
        #: task index -> why it is not bought again (the guard)
        self.dropped: dict[int, str] = {}
        #: task index -> the correlations with its target measured when last judged
        self.correlation: dict[int, dict[str, float]] = {}
        self._designs: dict[int, list[dict]] = {}
        self._choice_key: Any = None
        self._choice: dict[int, int] = {}
        self._judged_model: Any = None

    # ---- layout ------------------------------------------------------------------------------
    def base_of(self, i: int) -> tuple[int, int]:
        """Task ``i`` as ``(base task, level)`` (level 0: the target)."""
        return i % self.n_base, i // self.n_base

    def target_of(self, i: int) -> int:
        """The target-fidelity task of task ``i``'s base task (for an auxiliary task, the tuned
        task it is judged against: the first one)."""
        b, _ = self.base_of(i)
        return b

    def is_target(self, i: int) -> bool:
        """Whether task ``i`` is a tuned task at the target fidelity (what results speak of)."""
        return i < self.n_tuned

    def role(self, i: int) -> str:
        """What task ``i``'s runs are, as histories and exports mark them: "target" (a tuned task at
        the target fidelity), "low fidelity" or "auxiliary"."""
        return role_of(i, self.n_tuned, self.n_aux)

    # ---- the proposer's questions -----------------------------------------------------------
    def initial_design(self, i: int) -> list[dict]:
        if i not in self._designs:
            b, level = self.base_of(i)
            full = super().initial_design(b)
            if level == 0 and b < self.n_tuned and self.n_levels > 1:
                design = full[: max(1, math.ceil(len(full) / 2))]
            elif level == 0:
                design = full
            else:
                tu = self.tuner
                design = [p for p in full if tu.problem.is_feasible(tu.tasks[i], p)] or super().initial_design(i)
            self._designs[i] = design
        return self._designs[i]

    def _in_initial(self, i: int) -> bool:
        return len(self.tuner.trials_of(i)) < len(self.initial_design(i))

    def proposes_for(self, i: int) -> bool:
        if i in self.dropped:
            return False
        if self._in_initial(i):
            return True
        b, level = self.base_of(i)
        if b >= self.n_tuned:
            return False  # an auxiliary task teaches with its initial design only
        return self._choose().get(b) == level

    def _choose(self) -> dict[int, int]:
        """Each tuned base task's level for the next run (-1: none), recomputed when the history
        or the model changed."""
        tu = self.tuner
        key = (len(tu.trials), sum(t.status.finished for t in tu.trials), id(tu.model))
        if key == self._choice_key:
            return self._choice
        self._judge()
        out = {}
        for b in range(self.n_tuned):
            out[b] = self._choose_level(b)
        self._choice_key, self._choice = key, out
        return out

    def _choose_level(self, b: int) -> int:
        tu = self.tuner
        target = b
        if tu.closed_reason(target) is not None:
            return -1  # the target is finished: nothing more is bought for it
        levels = [lv for lv in range(self.n_levels) if self._open(lv * self.n_base + b)]
        if levels == [0] or not levels:
            return 0
        # the share of target runs: every TARGET_EVERY-th searched run of this task
        searched = sorted((t for lv in range(self.n_levels) for t in tu.trials_of(lv * self.n_base + b)
                           if t.source == SOURCE_SEARCH), key=lambda t: t.id)
        since = 0
        for t in reversed(searched):
            if t.task_index == target:
                break
            since += 1
        if since >= TARGET_EVERY - 1:
            return 0
        cost0 = self.mean_cost(target)
        score = {0: 1.0 / max(cost0, 1e-12) if cost0 is not None else 0.0}
        for lv in levels:
            if lv == 0:
                continue
            i = lv * self.n_base + b
            rho = max(0.0, self.correlation.get(i, {}).get("model", 0.0))
            c = self.mean_cost(i)
            if c is None and cost0 is not None:
                c = cost0 / 3.0 ** lv
            score[lv] = rho ** 2 / max(c if c is not None else 1.0, 1e-12)
        return max(score, key=lambda lv: (score[lv], -lv))

    def _open(self, i: int) -> bool:
        tu = self.tuner
        return i not in self.dropped and tu.closed_reason(i) is None and len(tu.trials_of(i)) < tu.budget

    def mean_cost(self, i: int) -> float | None:
        """The mean cost in seconds of task ``i``'s finished runs (None before its first)."""
        costs = [c for t in self.tuner.trials_of(i) if t.status.finished
                 and (c := self.tuner.cost_of(t)) is not None]
        return float(np.mean(costs)) if costs else None

    # ---- the guard ---------------------------------------------------------------------------
    def _judge(self) -> None:
        """Measure each cheaper level's and auxiliary task's correlation with its target (by the
        fitted model, and by ranks on shared configurations) and drop those below RHO_MIN."""
        tu = self.tuner
        model = tu.model
        if model is None or model is self._judged_model:
            return
        self._judged_model = model
        for i in range(tu.n_tasks):
            if self.is_target(i) or i in self.dropped or self._in_initial(i):
                continue
            target = self.target_of(i) if self.base_of(i)[0] < self.n_tuned else 0
            if self._in_initial(target):
                continue
            rho = {"model": level_correlations(model, target, [i])[i]}
            mine = {params_key(t.params): t.value for t in tu.trials_of(i) if t.status is Status.COMPLETE}
            both = [(mine[k], t.value) for t in tu.trials_of(target) if t.status is Status.COMPLETE
                    and (k := params_key(t.params)) in mine]
            if len(both) >= MIN_COMMON:
                a, c = np.array(both).T
                rho["rank"] = spearman(a, c)
            self.correlation[i] = rho
            low = {k: v for k, v in rho.items() if v < RHO_MIN}
            if low:
                why = (f"its correlation with the target ({tu.tasks[target]}) is "
                       + ", ".join(f"{v:.2f} by {'the model' if k == 'model' else f'rank on {len(both)} shared runs'}"
                                   for k, v in rho.items()) + f", below {RHO_MIN}")
                self.dropped[i] = why
                log.warning("task %d (%s) is not bought again: %s", i, tu.tasks[i], why)

    def summary(self) -> dict[str, Any]:
        """What results report of the run (``TuningResult.fidelity``): the layout, the levels
        dropped by the guard and the correlations measured."""
        tu = self.tuner
        return {"n_tuned": self.n_tuned, "n_aux": self.n_aux, "levels": tu.problem.fidelity_levels(),
                "dropped": {int(i): r for i, r in self.dropped.items()},
                "correlation": {int(i): dict(r) for i, r in self.correlation.items()}}
