"""Cross-task picks of the joint search (issue 23).

On a listed or enumerated domain, every :data:`CROSS_PICK_EVERY`-th searched run of a task chooses
by the acquisition among the :data:`CROSS_PICK_TOP` best configurations of every other task (those
the task has not run), instead of searching its whole domain, while the model predicts the task's
own runs poorly: the rank correlation of its leave-one-out predictions with the measured values
(:meth:`gptask.model.numerics.LCM.loo_task`) is below :data:`CROSS_PICK_OWN_BELOW`.

Why: on recorded GPU-kernel campaigns the few configurations within 10 % of a GPU's optimum
(2-23 of 4,362) are often another GPU's best, and a model fitted on 20-40 runs per GPU ranks them
no better than the rest (rank correlation 0.55-0.68 whatever the model class), so the acquisition
rarely proposes them; offered every other run, the acquisition picks the likeliest. On smooth
landscapes, where the model already ranks the task's runs almost perfectly, a pick would only take
a run from the local search, and the gate leaves them alone. Figures in BENCHMARKS.md.
"""

from __future__ import annotations

import warnings

import numpy as np
from scipy.stats import ConstantInputWarning, spearmanr

from ..space.domain import Domain
from ..model.numerics import LCM
from .settings import (CROSS_PICK_EVERY, CROSS_PICK_LOO_POINTS, CROSS_PICK_MIN_POINTS, CROSS_PICK_OWN_BELOW,
                       CROSS_PICK_TOP)

__all__ = ["cross_task_picks", "predicts_itself", "best_rows"]


def best_rows(X_list: list[np.ndarray], y_list: list[np.ndarray], domain: Domain, top: int,
              skip: int | None = None, refill: bool = False) -> list[int]:
    """Row numbers of ``domain`` offered from each task's best configurations, task by task, each
    row once.

    X_list, y_list: per task, encoded configurations (n_j, D) and their model values (n_j,)
    (smaller is better); skip: a task left out. refill False (the joint search): each task's
    ``top`` configurations of least value, those outside the domain or offered already dropped;
    True (TLA2): each task's ``top`` best among those in the domain not offered by an earlier task
    (tasks tuned with cross-task picks often share their bests, and a repeat would offer nothing)."""
    rows: dict[int, None] = {}
    for j, (X, y) in enumerate(zip(X_list, y_list)):
        if j == skip or not len(y):
            continue
        ranked = X[np.argsort(y, kind="stable")]
        if refill:
            mine = [r for r in domain.rows_of(ranked).tolist() if r not in rows][:top]
        else:
            mine = domain.rows_of(ranked[:top]).tolist()
        rows.update(dict.fromkeys(mine))
    return list(rows)


def predicts_itself(model: LCM, i: int) -> bool:
    """Whether the model's leave-one-out predictions of task ``i``'s values rank them with a
    Spearman correlation of at least :data:`CROSS_PICK_OWN_BELOW` (False when undefined; at most
    :data:`CROSS_PICK_LOO_POINTS` of them judged)."""
    observed, mean, _ = model.loo_task(i, at_most=CROSS_PICK_LOO_POINTS)
    with warnings.catch_warnings():  # constant values (every run imputed alike): no correlation
        warnings.simplefilter("ignore", ConstantInputWarning)
        rho = spearmanr(mean, observed)[0]
    return bool(np.isfinite(rho) and rho >= CROSS_PICK_OWN_BELOW)


def cross_task_picks(model: LCM, i: int, searched: int, domain: Domain | None) -> np.ndarray | None:
    """Encoded configurations (m, D) that task ``i``'s next search chooses from, or None (search
    the whole domain).

    model: the fitted model searched on, its values in model units (smaller is better); searched:
    task ``i``'s searched trials so far (any state); domain: task ``i``'s listed or enumerated
    domain (None on a continuous space: no picks). The offer is every other task's
    CROSS_PICK_TOP configurations of least model value, in the domain, without repeats.
    """
    if domain is None or model.n_tasks < 2 or searched % CROSS_PICK_EVERY:
        return None
    X_list, y_list = model.data()
    if len(y_list[i]) < CROSS_PICK_MIN_POINTS or predicts_itself(model, i):
        return None
    rows = best_rows(X_list, y_list, domain, CROSS_PICK_TOP, skip=i)
    return domain.encode(np.array(rows, dtype=np.int64)) if rows else None
