"""Cautious initial designs: design points the failure model expects to fail, swapped before they run.

With ``failure_model=p`` (a probability; :func:`gptask.tune`), a run asks every proposal to be at
least ``p`` likely to succeed once a run has failed, the initial designs included. The designs are
asked one point per task and round, so the failures of the first rounds already teach the failure
model (:mod:`gptask.model.surrogate.failure_model`, shared over the tasks) where the limit is; each later
design point it gives a probability of success below ``p`` is replaced by a point of a larger Latin
hypercube of the same task (:data:`POOL_FACTOR` times the design) that it expects to succeed,
the one farthest from the task's runs and the points already kept (maximin in the unit cube), so
that the design still spreads over the space it believes feasible. When no pool point reaches
``p`` the most likely one replaces the design point if it is more likely than it.

What it costs and gains against the default (``failure_model=True``: designs unsteered, searches
gated at 1/2) is measured in BENCHMARKS.md (issue 25): far fewer failed runs, and a higher regret
where the optimum lies on the failure boundary (the cautious run keeps away from it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..space.dimensions import Space
from ..data.trials import params_key

__all__ = ["POOL_FACTOR", "steer_design"]

#: the pool of replacement points is a Latin hypercube this many times the task's design
POOL_FACTOR = 4


def steer_design(points: Sequence[dict], fixed: set[str], task: Mapping[str, Any], space: Space, failure: Any,
                 at_least: float, pool: Sequence[dict], runs: Sequence[dict]) -> dict[int, dict]:
    """The replacements of task ``task``'s design ``points`` that are less than ``at_least`` likely to
    succeed: {index in points: replacement}, empty when none needs one.

    fixed: keys (``params_key``) of points never replaced (the user's default configuration).
    failure: a fitted :class:`gptask.model.surrogate.failure_model.FailureModel`. pool: candidate replacements
    (dicts; those equal to a point or a run are skipped). runs: the configurations of the task's
    trials, any state.
    """
    if not points:
        return {}
    P = space.encode(list(points))
    ok = failure.prob_success(dict(task), P)
    bad = [k for k in range(len(points)) if ok[k] < at_least and params_key(points[k]) not in fixed]
    if not bad:
        return {}
    taken = {params_key(p) for p in [*points, *runs]}
    cands = [c for c in pool if params_key(c) not in taken]
    if not cands:
        return {}
    C = space.encode(cands)
    c_ok = failure.prob_success(dict(task), C)
    R = space.encode(list(runs)) if runs else np.empty((0, space.n_columns))
    kept = np.vstack([R, P[[k for k in range(len(points)) if k not in bad]]])
    nearest = (np.min(np.linalg.norm(C[:, None, :] - kept[None, :, :], axis=2), axis=1) if len(kept)
               else np.full(len(C), np.inf))
    free = np.ones(len(C), dtype=bool)
    out: dict[int, dict] = {}
    for k in bad:
        likely = free & (c_ok >= at_least)
        if likely.any():
            j = int(np.argmax(np.where(likely, nearest, -np.inf)))
        else:
            j = int(np.argmax(np.where(free, c_ok, -np.inf)))
            if not free[j] or c_ok[j] <= ok[k]:
                continue
        out[k] = cands[j]
        free[j] = False
        nearest = np.minimum(nearest, np.linalg.norm(C - C[j], axis=1))
    return out
