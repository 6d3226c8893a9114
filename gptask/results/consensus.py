"""The configurations good on every machine seen: scores over several tasks' values (issue 24).

A new machine (a GPU never measured, a category of the task space no tuned task has) is a task the
model knows nothing particular about. What transfers is what is good *everywhere*: the
configuration of least mean log value over the seen machines (a time: the geometric mean, so that
each machine's relative differences count alike). On the recorded convolution campaign, each GPU
held out in turn and the other five GPUs' complete measurements ranked by this score, the first
configuration reaches 0.857 of the held-out GPU's optimum on average, the best of the first five
0.879 and of the first ten 0.927 (``bench/archive/logo_ceiling.py``).

* :func:`consensus_scores`: the score of candidates from a (machines x candidates) table of values
  (measured, predicted, or both), +inf where one failed;
* :func:`measured_values`: that table from measurements (the median of repeated ones);
* :func:`consensus_order`: the candidates every seen machine measured, best score first, none that
  failed anywhere: the run-free design of a new machine when its sources measured the same task.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..data.trials import Status, Trial, point_key

__all__ = ["consensus_scores", "measured_values", "consensus_order"]


def consensus_scores(values: np.ndarray) -> np.ndarray:
    """(n,) scores of n candidates, lower is better, from ``values`` (V, n): candidate k's value on
    seen task v in user units, +inf where it failed there (no NaN). The mean over tasks of the log
    value when every value of the candidates that never failed is positive, else the mean of each
    task's standardised values (over those candidates); +inf for a candidate that failed on any task."""
    V = np.asarray(values, float)
    if V.ndim != 2 or np.isnan(V).any() or np.isneginf(V).any():
        raise ValueError(f"values must be a (tasks, candidates) table of numbers or +inf, got shape {V.shape}"
                         + (" with NaN or -inf" if V.ndim == 2 else ""))
    ok = ~np.isinf(V).any(axis=0)
    score = np.full(V.shape[1], np.inf)
    W = V[:, ok]
    if W.size and np.all(W > 0.0):
        score[ok] = np.log(W).mean(axis=0)
    elif W.size:
        score[ok] = ((W - W.mean(axis=1, keepdims=True)) / np.maximum(W.std(axis=1, keepdims=True), 1e-300)).mean(axis=0)
    return score


def measured_values(trials: Sequence[Trial], tasks: Sequence[Mapping[str, Any]],
                    configs: Sequence[Mapping[str, Any]]) -> np.ndarray:
    """(len(tasks), len(configs)): each configuration's measured value on each task, the median of
    its complete measurements; +inf where it was measured and only failed; NaN where not measured.
    Pending trials do not count."""
    row = {point_key(t): v for v, t in enumerate(tasks)}
    col = {point_key(c): k for k, c in enumerate(configs)}
    seen: dict[tuple[int, int], list[float]] = {}
    rows: dict[int, int | None] = {}  # by id of the task dict: the trials of one task often share it
    for t in trials:
        if not t.status.finished:
            continue
        v = rows.get(id(t.task), -1)
        if v == -1:
            v = rows[id(t.task)] = row.get(point_key(t.task))
        if v is None:
            continue
        k = col.get(point_key(t.params))
        if k is None:
            continue
        got = seen.setdefault((v, k), [])
        if t.status is Status.COMPLETE and t.value is not None:
            got.append(float(t.value))
    out = np.full((len(tasks), len(configs)), np.nan)
    for (v, k), got in seen.items():
        out[v, k] = (got[0] if len(got) == 1 else float(np.median(got))) if got else np.inf
    return out


def consensus_order(trials: Sequence[Trial], tasks: Sequence[Mapping[str, Any]]) -> list[dict]:
    """The configurations that every task of ``tasks`` (the same task on the seen machines) has
    measured and none of them failed, best consensus score first (ties in the order met)."""
    configs: dict[tuple, dict] = {}
    keys = {point_key(t) for t in tasks}
    for t in trials:
        if point_key(t.task) in keys and t.status.finished:
            configs.setdefault(point_key(t.params), dict(t.params))
    listed = list(configs.values())
    if not tasks or not listed:
        return []
    values = measured_values(trials, tasks, listed)
    covered = ~np.isnan(values).any(axis=0)
    score = np.full(len(listed), np.inf)
    score[covered] = consensus_scores(values[:, covered])
    keep = np.flatnonzero(np.isfinite(score))
    return [listed[k] for k in keep[np.argsort(score[keep], kind="stable")]]
