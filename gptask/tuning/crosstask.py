"""Cross-task picks of the joint search (issue 23).

On a listed or enumerated domain, every :data:`CROSS_PICK_EVERY`-th searched run of a task chooses
by the acquisition among the :data:`CROSS_PICK_TOP` best configurations of every other task (those
the task has not run), instead of searching its whole domain, while the model predicts the task's
own runs poorly: the rank correlation of its leave-one-out predictions with the measured values
(:meth:`gptask.models.LCM.loo_task`) is below :data:`CROSS_PICK_OWN_BELOW`.

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

from ..domain import Domain
from ..models import LCM
from .settings import (CROSS_PICK_EVERY, CROSS_PICK_LOO_POINTS, CROSS_PICK_MIN_POINTS, CROSS_PICK_OWN_BELOW,
                       CROSS_PICK_TOP)

__all__ = ["cross_task_picks", "predicts_itself"]


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
    tops = [X[np.argsort(y, kind="stable")[:CROSS_PICK_TOP]] for j, (X, y) in enumerate(zip(X_list, y_list))
            if j != i and len(y)]
    if not tops:
        return None
    rows = list(dict.fromkeys(domain.rows_of(np.vstack(tops)).tolist()))  # in order, each once
    return domain.encode(np.array(rows, dtype=np.int64)) if rows else None
