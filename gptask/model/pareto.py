"""Pareto fronts, hypervolumes and the box decomposition behind expected hypervolume improvement.

Plain numpy on arrays of objective vectors, all *minimised* (negate an objective to maximise it):
``Y`` has shape (n, d), one row per point, one column per objective. Nothing here knows about
tasks, models or trials.

* :func:`non_dominated`: which rows no other row dominates (``a`` dominates ``b`` when
  ``a <= b`` in every objective and ``a < b`` in one); duplicates of a non-dominated row are all kept.
* :func:`nondominated_boxes`: the region below a reference point ``ref`` that no point of a front
  dominates, as disjoint axis-aligned boxes ``[lower, upper]`` (lower bounds may be ``-inf``).
  Construction: the grid of the front's coordinates and ``ref`` on every axis splits the region
  into cells that are dominated or not as a whole; along the first axis the free cells of one
  column (fixed cells on the other axes) are a prefix, so each column gives one box
  ``[-inf, m] x cell``, where ``m`` is the smallest first coordinate among the points that
  dominate the column's lower corner on the other axes (``ref[0]`` when none does). That is
  at most ``(n + 1) ** (d - 1)`` boxes for ``n`` non-dominated points: ``n + 1`` vertical strips for two objectives (the
  sorted front's staircase), 1,681 for 40 points in three.
* :func:`hypervolume_improvement`: the volume a new point adds, ``sum over boxes of prod_k
  (upper_k - max(y_k, lower_k))^+`` (vectorised over points).
* :func:`hypervolume`: the volume a front dominates below ``ref``, as the sum of the improvements
  of its points added one after the other (exact in any dimension).

The expected improvement under independent Gaussian predictions factorises over the same boxes
(:func:`gptask.model.acquisition.log_ehvi`).
"""

from __future__ import annotations

import itertools

import numpy as np

__all__ = ["non_dominated", "nondominated_boxes", "hypervolume_improvement", "hypervolume", "as_points"]

#: candidates x boxes handled per block in :func:`hypervolume_improvement` (bounds the memory)
BLOCK = 200_000


def as_points(Y: np.ndarray, what: str = "Y") -> np.ndarray:
    """``Y`` as a float array of shape (n, d), d >= 1; ValueError for another shape or a non-finite value."""
    Y = np.asarray(Y, dtype=float)
    if Y.ndim == 1:
        Y = Y.reshape(1, -1) if Y.size else Y.reshape(0, 1)
    if Y.ndim != 2:
        raise ValueError(f"{what} must be an (n, d) array of objective vectors, got shape {Y.shape}")
    if not np.all(np.isfinite(Y)):
        raise ValueError(f"{what} holds a non-finite value")
    return Y


def non_dominated(Y: np.ndarray) -> np.ndarray:
    """(n,) bool: True for each row of ``Y`` (n, d) that no other row dominates (minimisation)."""
    Y = as_points(Y)
    n = len(Y)
    if n == 0:
        return np.zeros(0, dtype=bool)
    le = np.all(Y[:, None, :] <= Y[None, :, :], axis=2)  # le[a, b]: a <= b everywhere
    lt = np.any(Y[:, None, :] < Y[None, :, :], axis=2)
    dominated = np.any(le & lt, axis=0)  # b is dominated by some a
    return ~dominated


def nondominated_boxes(front: np.ndarray, ref: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Disjoint boxes covering ``{z <= ref : no point of front <= z}`` (module docstring).

    front: (n, d) points (any; dominated ones change nothing); ref: (d,). Returns ``lower``,
    ``upper`` of shape (m, d); ``lower`` holds ``-inf`` on the unbounded sides. Boxes of zero
    volume are left out.
    """
    ref = np.asarray(ref, dtype=float).reshape(-1)
    d = ref.size
    front = as_points(front, "front").reshape(-1, d) if np.size(front) else np.empty((0, d))
    if front.shape[1] != d:
        raise ValueError(f"front has {front.shape[1]} objectives, ref has {d}")
    front = front[np.all(front < ref, axis=1)]  # a point not below ref everywhere dominates no volume here
    if len(front):  # dominated points and duplicates would only split boxes
        front = np.unique(front[non_dominated(front)], axis=0)
    if d == 1:
        top = float(front[:, 0].min()) if len(front) else float(ref[0])
        return np.array([[-np.inf]]), np.array([[top]])
    grids = [np.unique(np.append(front[:, k], ref[k])) for k in range(1, d)]
    lows = [np.concatenate([[-np.inf], g[:-1]]) for g in grids]
    index = np.array(list(itertools.product(*[range(len(g)) for g in grids])), dtype=int).reshape(-1, d - 1)
    lower_rest = np.column_stack([lows[k][index[:, k]] for k in range(d - 1)])
    upper_rest = np.column_stack([grids[k][index[:, k]] for k in range(d - 1)])
    if len(front):
        covers = np.all(front[None, :, 1:] <= lower_rest[:, None, :], axis=2)  # (cells, n)
        top = np.where(covers, front[None, :, 0], ref[0]).min(axis=1)
    else:
        top = np.full(len(index), ref[0])
    keep = top > -np.inf
    lower = np.column_stack([np.full(len(index), -np.inf), lower_rest])[keep]
    upper = np.column_stack([top, upper_rest])[keep]
    return lower, upper


def hypervolume_improvement(Y: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> np.ndarray:
    """(n,) volume each point of ``Y`` (n, d) would add to the front whose free region is the
    boxes ``lower``, ``upper`` (m, d) of :func:`nondominated_boxes`."""
    Y = as_points(Y)
    lower, upper = np.asarray(lower, float), np.asarray(upper, float)
    out = np.empty(len(Y))
    step = max(1, BLOCK // max(1, len(lower)))
    for s in range(0, len(Y), step):
        y = Y[s:s + step, None, :]
        side = np.clip(upper[None] - np.maximum(y, lower[None]), 0.0, None)
        out[s:s + step] = np.prod(side, axis=2).sum(axis=1)
    return out


def hypervolume(front: np.ndarray, ref: np.ndarray) -> float:
    """The volume dominated by ``front`` (n, d) and below ``ref`` (d,), exact (module docstring)."""
    ref = np.asarray(ref, dtype=float).reshape(-1)
    front = as_points(front, "front").reshape(-1, ref.size) if np.size(front) else np.empty((0, ref.size))
    front = front[non_dominated(front)] if len(front) else front
    front = front[np.all(front < ref, axis=1)]
    if not len(front):
        return 0.0
    if ref.size == 2:  # the staircase, directly
        f = front[np.lexsort((front[:, 1], front[:, 0]))]
        widths = np.diff(np.append(f[:, 0], ref[0]))
        return float(np.sum(widths * (ref[1] - f[:, 1])))
    order = np.lexsort(front.T[::-1])
    total = 0.0
    for k, idx in enumerate(order):
        lower, upper = nondominated_boxes(front[order[:k]], ref)
        total += float(hypervolume_improvement(front[idx][None], lower, upper)[0])
    return total
