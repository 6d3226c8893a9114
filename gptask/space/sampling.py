"""Initial designs: Latin hypercube samples of a space, with and without constraints.

All samplers return encoded points (rows in [0, 1]^D, D = ``space.n_columns``) *and* the decoded
dicts, because constraints are judged on user values while models work on encodings.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
from scipy.stats import qmc

from .dimensions import Space
from ..data.trials import point_key

__all__ = ["lhs_unit", "lhs_points", "feasible_lhs", "centred_normal_points", "NoFeasiblePoint", "SpaceExhausted",
           "point_key"]

log = logging.getLogger(__name__)

#: how many candidate points the rejection sampler may draw per wanted point, and in total
OVERSAMPLE_FACTOR = 20
MAX_CANDIDATES = 200_000


class NoFeasiblePoint(ValueError):
    """Raised when constrained sampling finds (almost) no configuration satisfying the constraints."""


class SpaceExhausted(NoFeasiblePoint):
    """Raised when feasible configurations exist but every one found is already used (a small
    discrete space whose points have all been run)."""


def lhs_unit(n: int, n_dims: int, rng: np.random.Generator) -> np.ndarray:
    """A Latin hypercube of ``n`` points in ``[0, 1]^n_dims``: shape ``(n, n_dims)``.

    Each column has exactly one point in each of the ``n`` equal strata.
    """
    if n <= 0:
        return np.empty((0, n_dims))
    sampler = qmc.LatinHypercube(d=n_dims, seed=rng)
    return sampler.random(n)


def lhs_points(space: Space, n: int, rng: np.random.Generator) -> list[dict[str, Any]]:
    """``n`` points of ``space`` from a Latin hypercube over its *dimensions*.

    One LHS column per dimension (not per encoded column): a categorical or ordinal dimension takes
    its value from the stratum index, so each value is drawn equally often.
    """
    u = lhs_unit(n, len(space), rng)
    enc = np.empty((n, space.n_columns))
    for j, (dim, sl) in enumerate(zip(space.dimensions, space.column_slices())):
        enc[:, sl] = dim.sample_columns(u[:, j])
    return space.decode(enc)


def feasible_lhs(
    space: Space,
    n: int,
    rng: np.random.Generator,
    is_feasible: Callable[[Mapping[str, Any]], bool] | None = None,
    exclude: set | None = None,
    describe: str = "the constraints",
) -> list[dict[str, Any]]:
    """``n`` distinct feasible points: Latin hypercubes drawn repeatedly, infeasible ones rejected.

    Oversamples by rounds (each a fresh LHS of growing size) until ``n`` feasible, distinct points
    not in ``exclude`` (a set of ``point_key`` values) are found. Raises :class:`NoFeasiblePoint`
    naming ``describe`` when the bounded effort (``MAX_CANDIDATES`` draws) finds none
    (:class:`SpaceExhausted` when it found feasible points but all of them in ``exclude``), and returns
    fewer than ``n`` points (with a warning) when the feasible set is smaller than ``n``.
    """
    chosen: list[dict[str, Any]] = []
    seen = set(exclude or ())
    drawn = 0
    batch = max(n, 8)
    limit = min(MAX_CANDIDATES, max(OVERSAMPLE_FACTOR * n, 1000))
    n_feasible_total = 0
    while len(chosen) < n and drawn < limit:
        drawn += batch
        n_feasible_total += _take_new_feasible(lhs_points(space, batch, rng), n, is_feasible, seen, chosen)
        batch = min(batch * 2, 4096)
    if not chosen and n > 0:
        if n_feasible_total == 0:
            raise NoFeasiblePoint(
                f"no configuration satisfying {describe} was found in {drawn} random draws; "
                "check that the constraints can be met for this task"
            )
        raise SpaceExhausted(f"every feasible configuration found under {describe} was already used")
    if len(chosen) < n:
        log.warning("only %d of %d distinct feasible points found under %s", len(chosen), n, describe)
    return chosen


def _take_new_feasible(candidates: list[dict[str, Any]], n: int, is_feasible, seen: set,
                       chosen: list[dict[str, Any]]) -> int:
    """Append feasible candidates not in ``seen`` to ``chosen`` (updating ``seen``) until it holds
    ``n`` points; returns how many feasible candidates were examined."""
    n_feasible = 0
    for p in candidates:
        if len(chosen) >= n:
            break
        if is_feasible is not None and not is_feasible(p):
            continue
        n_feasible += 1
        key = point_key(p)
        if key not in seen:
            seen.add(key)
            chosen.append(p)
    return n_feasible


def centred_normal_points(
    space: Space,
    centre: np.ndarray,
    scale: np.ndarray,
    n: int,
    rng: np.random.Generator,
    is_feasible: Callable[[Mapping[str, Any]], bool] | None = None,
    exclude: set | None = None,
    describe: str = "the constraints",
) -> list[dict[str, Any]]:
    """``n`` distinct feasible points drawn from N(centre, diag(scale^2)) in the encoded cube.

    ``centre`` and ``scale`` have shape ``(space.n_columns,)``. Draws outside [0, 1] or infeasible
    are redrawn (the paper's TLA2 centred sampling). Falls back to :func:`feasible_lhs` for what the
    bounded effort could not find.
    """
    centre = np.asarray(centre, dtype=float).reshape(-1)
    scale = np.broadcast_to(np.asarray(scale, dtype=float), centre.shape)
    chosen: list[dict[str, Any]] = []
    seen = set(exclude or ())
    drawn = 0
    limit = max(OVERSAMPLE_FACTOR * n, 1000)
    while len(chosen) < n and drawn < limit:
        z = centre + scale * rng.standard_normal((64, centre.size))
        drawn += 64
        z = z[np.all((z >= 0.0) & (z <= 1.0), axis=1)]
        if len(z):
            _take_new_feasible(space.decode(z), n, is_feasible, seen, chosen)
    if len(chosen) < n:
        chosen += feasible_lhs(space, n - len(chosen), rng, is_feasible, seen, describe)
    return chosen
