"""Where runs fail: the failure model of a history, mapped over the two parameters that decide it.

For the campaign report (:mod:`gptask.insight.sections`): the classifier of
:mod:`gptask.model.surrogate.failure_model` fitted on every finished trial of a history, the two parameters
whose inputs the runs show to decide a failure (ignoring them lowers the classifier's log
evidence by at least :data:`DECIDES_AT`; a fitted length scale alone is no evidence: one the data
do not inform stays at the prior's median), and P(success) over a grid of their values for the task with the most failures, the
other parameters held at that task's best measured configuration.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..model.surrogate.failure_model import FailureModel
from ..data.trials import Status, Trial

__all__ = ["FailureMap", "failure_map", "GRID_POINTS"]

#: a parameter decides failures when ignoring it lowers the classifier's log evidence by this much
#: (log 20: a Bayes factor of 20). On 60 runs of 4 parameters, random crashes (8-15 failures) gave
#: drops of at most 1.8, rules on one to three parameters (13-21 failures) at least 5.8 for each
#: of them (tests/test_report.py)
DECIDES_AT = 3.0
#: grid values per mapped parameter (a discrete one with fewer allowed values takes them all)
GRID_POINTS = 25


@dataclass(frozen=True)
class FailureMap:
    """task_index, task: the mapped task; names: the two mapped parameters (one when the space has
    one; empty when no parameter decides failures); xs, ys: their grid values (ys [None] for one parameter); p_success: (len(ys), len(xs));
    base: the configuration the other parameters are held at; length_scales: every parameter's
    shortest fitted length scale (unit-cube units), shortest first; failed, ok: the task's failed
    and complete configurations; n_failed, n_finished: over every task; evidence: per parameter,
    the drop of the log evidence when it is ignored (:meth:`FailureModel.evidence_drop`), largest
    first; deciding: the parameters whose drop is at least :data:`DECIDES_AT`, in that order."""

    task_index: int
    task: dict
    names: tuple[str, ...]
    xs: list[Any]
    ys: list[Any]
    p_success: np.ndarray
    base: dict
    length_scales: dict[str, float]
    failed: list[dict]
    ok: list[dict]
    n_failed: int
    n_finished: int
    evidence: dict[str, float]
    deciding: tuple[str, ...]


def failure_map(problem: Any, trials: Sequence[Trial]) -> FailureMap | None:
    """The map of ``problem``'s finished ``trials`` (module docstring); None when none failed or
    the classifier cannot be fitted."""
    finished = [t for t in trials if t.status.finished]
    failed = [t for t in finished if t.status is Status.FAILED]
    if not failed:
        return None
    space = problem.param_space
    model = FailureModel(space, problem.task_space)
    model.update(finished)
    if model.fitted is None:
        return None
    scales = 1.0 / model.fitted.inv_ls[: space.n_columns]
    per_dim = {d.name: float(np.min(scales[sl])) for d, sl in zip(space.dimensions, space.column_slices())}
    ranked = sorted(per_dim, key=per_dim.get)
    drop = {d.name: model.evidence_drop(sl) for d, sl in zip(space.dimensions, space.column_slices())}
    evidence = {n: drop[n] for n in sorted(drop, key=lambda n: -drop[n])}
    deciding = tuple(n for n, v in evidence.items() if v >= DECIDES_AT)
    counts = np.bincount([t.task_index for t in failed])
    i = int(np.argmax(counts))
    mine = [t for t in finished if t.task_index == i]
    complete = [t for t in mine if t.status is Status.COMPLETE and t.value is not None]
    base = dict(min(complete, key=lambda t: t.value).params if complete else mine[0].params)
    names = deciding[:2]
    xs = space[names[0]].grid(GRID_POINTS) if names else []
    ys = space[names[1]].grid(GRID_POINTS) if len(names) > 1 else [None]
    grid = [{**base, names[0]: x, **({names[1]: y} if len(names) > 1 else {})} for y in ys for x in xs]
    task = dict(mine[0].task)
    p = model.prob_success(task, space.encode(grid)).reshape(len(ys), len(xs)) if names else np.empty((1, 0))
    return FailureMap(i, task, names, list(xs), list(ys), p, base, {n: per_dim[n] for n in ranked},
                      [dict(t.params) for t in mine if t.status is Status.FAILED],
                      [dict(t.params) for t in complete], len(failed), len(finished), evidence, deciding)
