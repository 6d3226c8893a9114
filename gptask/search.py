"""Acquisition maximisation over a parameter space with particle swarm optimisation (pyswarms).

The swarm moves in the encoded unit cube. Every particle is *snapped* to a valid configuration
(integers rounded, one-hot categoricals to their argmax) before the acquisition is evaluated, so the
search sees exactly the points that could be run. Infeasible configurations get a penalty; the
final proposal is the best feasible, not-yet-evaluated configuration seen during the whole search
(so a proposal that duplicates an evaluated point is replaced by the next best), with a random
feasible point as the last resort.

pyswarms is driven through its backend (swarm, Star topology, handlers) so that the acquisition is
evaluated once per iteration on all particles at once. Two pyswarms habits are contained here:
importing it reconfigures the root logger and opens ``report.log`` in the working directory (we
import it with a no-op logging configuration), and it draws from numpy's global random state (we
seed that state per search and restore the caller's state afterwards).
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .sampling import feasible_lhs, point_key
from .space import Space

__all__ = ["SearchResult", "maximize", "row_keys"]

log = logging.getLogger(__name__)

#: penalty added to the (negated) acquisition of an infeasible particle
INFEASIBLE_PENALTY = 1e30
_PSO_OPTIONS = {"c1": 1.5, "c2": 1.5, "w": 0.7}
_backend: Any = None


def _pyswarms_backend() -> Any:
    """Import pyswarms' backend once, without letting it reconfigure logging or write report.log."""
    global _backend
    if _backend is None:
        quiet = str(Path(__file__).with_name("pyswarms_quiet_logging.yaml"))
        old_env = os.environ.get("LOG_CFG")
        root = logging.getLogger()
        old_handlers, old_level = list(root.handlers), root.level
        os.environ["LOG_CFG"] = quiet
        try:
            import pyswarms.backend as ps
            from pyswarms.backend.handlers import BoundaryHandler, VelocityHandler
            from pyswarms.backend.topology import Star

            _backend = (ps, Star(), BoundaryHandler(strategy="reflective"), VelocityHandler(strategy="unmodified"))
        finally:
            if old_env is None:
                os.environ.pop("LOG_CFG", None)
            else:
                os.environ["LOG_CFG"] = old_env
            root.handlers[:] = old_handlers
            root.setLevel(old_level)
    return _backend


@contextlib.contextmanager
def _global_numpy_seed(seed: int) -> Iterator[None]:
    state = np.random.get_state()
    np.random.seed(seed % (2**32))
    try:
        yield
    finally:
        np.random.set_state(state)


def row_keys(x: np.ndarray) -> list[bytes]:
    """Hashable identities of snapped encoded rows ``(n, D)`` (rounded to 9 decimals)."""
    r = np.round(np.asarray(x, dtype=float), 9) + 0.0  # + 0.0 turns -0.0 into 0.0
    return [row.tobytes() for row in r]


@dataclass(frozen=True)
class SearchResult:
    """params: the proposal (dict); encoded: its encoding (D,); value: acquisition there;
    n_evaluations: acquisition evaluations spent; fallback: True when no searched point was usable."""

    params: dict[str, Any]
    encoded: np.ndarray
    value: float
    n_evaluations: int
    fallback: bool = False


def maximize(
    acquisition: Callable[[np.ndarray], np.ndarray],
    space: Space,
    seed: int,
    is_feasible: Callable[[Mapping[str, Any]], bool] | None = None,
    exclude: np.ndarray | None = None,
    init: np.ndarray | None = None,
    n_particles: int = 40,
    iters: int = 40,
) -> SearchResult:
    """Maximise ``acquisition`` over ``space`` with PSO.

    acquisition: maps an ``(n, D)`` array of encoded, snapped points to ``(n,)`` values to maximise.
    seed: makes the search reproducible. is_feasible: judges a decoded configuration (dict).
    exclude: ``(k, D)`` encoded configurations that must not be proposed (already evaluated).
    init: optional ``(k, D)`` encoded points placed in the initial swarm (e.g. incumbents).
    """
    if n_particles < 2 or iters < 1:
        raise ValueError(f"need n_particles >= 2 and iters >= 1, got {n_particles}, {iters}")
    ps, topology, bh, vh = _pyswarms_backend()
    dim = space.n_columns
    excluded = set(row_keys(space.snap(exclude))) if exclude is not None and len(exclude) else set()
    rng = np.random.default_rng(seed)
    pos0 = rng.random((n_particles, dim))
    if init is not None and len(init):
        k = min(len(init), n_particles // 2)
        pos0[:k] = np.clip(np.asarray(init, float)[:k], 0.0, 1.0)
    seen: dict[bytes, tuple[float, np.ndarray]] = {}
    feasible: dict[bytes, bool] = {}
    n_evals = 0

    def cost(x: np.ndarray) -> np.ndarray:
        nonlocal n_evals
        snapped = space.snap(x)
        keys = row_keys(snapped)
        values = np.asarray(acquisition(snapped), dtype=float).reshape(-1)
        n_evals += len(values)
        if is_feasible is not None:
            todo = [r for r, k in enumerate(keys) if k not in feasible]
            if todo:
                for r, p in zip(todo, space.decode(snapped[todo])):
                    feasible[keys[r]] = bool(is_feasible(p))
        out = -np.where(np.isfinite(values), values, -INFEASIBLE_PENALTY)
        for row, key in enumerate(keys):
            if is_feasible is not None and not feasible[key]:
                out[row] += INFEASIBLE_PENALTY
            elif key not in excluded and np.isfinite(values[row]):
                if key not in seen or values[row] > seen[key][0]:
                    seen[key] = (float(values[row]), snapped[row])
        return out

    bounds = (np.zeros(dim), np.ones(dim))
    with _global_numpy_seed(int(rng.integers(2**32))):
        swarm = ps.create_swarm(n_particles=n_particles, dimensions=dim, options=dict(_PSO_OPTIONS),
                                bounds=bounds, init_pos=pos0)
        swarm.pbest_cost = np.full(n_particles, np.inf)
        bh.memory = swarm.position
        vh.memory = swarm.position
        for _ in range(iters):
            swarm.current_cost = cost(swarm.position)
            swarm.pbest_pos, swarm.pbest_cost = ps.compute_pbest(swarm)
            swarm.best_pos, swarm.best_cost = topology.compute_gbest(swarm)
            swarm.velocity = topology.compute_velocity(swarm, None, vh, bounds)
            swarm.position = topology.compute_position(swarm, bounds, bh)
    if seen:
        value, enc = max(seen.values(), key=lambda t: t[0])
        return SearchResult(space.decode(enc[None, :])[0], np.asarray(enc), value, n_evals)
    log.info("acquisition search found no new feasible point; proposing a random feasible one")
    used = {point_key(p) for p in space.decode(exclude)} if excluded else set()
    params = feasible_lhs(space, 1, rng, is_feasible, used)[0]
    enc = space.encode([params])[0]
    return SearchResult(params, enc, float(acquisition(enc[None, :])[0]), n_evals + 1, fallback=True)
