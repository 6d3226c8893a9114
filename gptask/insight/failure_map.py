"""Where runs fail: the failure model of a history, mapped over the two parameters that decide it.

For the campaign report (:mod:`gptask.insight.sections`): the classifier of
:mod:`gptask.surrogate.failure` fitted on every finished trial of a history, the two parameters
with the shortest fitted length scales (the inputs across which the probability of success changes
fastest), and P(success) over a grid of their values for the task with the most failures, the
other parameters held at that task's best measured configuration.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..surrogate.failure import FailureModel
from ..trials import Status, Trial

__all__ = ["FailureMap", "failure_map", "GRID_POINTS"]

#: grid values per mapped parameter (a discrete one with fewer allowed values takes them all)
GRID_POINTS = 25


@dataclass(frozen=True)
class FailureMap:
    """task_index, task: the mapped task; names: the two mapped parameters (one when the space has
    one); xs, ys: their grid values (ys [None] for one parameter); p_success: (len(ys), len(xs));
    base: the configuration the other parameters are held at; length_scales: every parameter's
    shortest fitted length scale (unit-cube units), shortest first; failed, ok: the task's failed
    and complete configurations; n_failed, n_finished: over every task."""

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
    counts = np.bincount([t.task_index for t in failed])
    i = int(np.argmax(counts))
    mine = [t for t in finished if t.task_index == i]
    complete = [t for t in mine if t.status is Status.COMPLETE and t.value is not None]
    base = dict(min(complete, key=lambda t: t.value).params if complete else mine[0].params)
    names = tuple(ranked[:2])
    xs = space[names[0]].grid(GRID_POINTS)
    ys = space[names[1]].grid(GRID_POINTS) if len(names) > 1 else [None]
    grid = [{**base, names[0]: x, **({names[1]: y} if len(names) > 1 else {})} for y in ys for x in xs]
    task = dict(mine[0].task)
    p = model.prob_success(task, space.encode(grid)).reshape(len(ys), len(xs))
    return FailureMap(i, task, names, list(xs), list(ys), p, base, {n: per_dim[n] for n in ranked},
                      [dict(t.params) for t in mine if t.status is Status.FAILED],
                      [dict(t.params) for t in complete], len(failed), len(finished))
