"""Proposals: each task's initial design, and log-EI maximised on a fitted model: over every
allowed configuration of a listed discrete domain (:mod:`gptask.space.domain`), or with PSO otherwise.
Another acquisition (several objectives, output limits, the failure model: the tuner's
:class:`gptask.model.surrogate.group.OutputModels`) replaces log-EI when one is given.

The searches of several tasks are spread over MPI ranks (task ``active[k]`` on rank
``k % size``) and gathered on every rank as numpy rows. A task whose feasible configurations have
all been claimed gives no proposal (None): the caller ends that task.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ..model.acquisition import log_ei
from ..space.domain import row_keys
from ..core.parallel import allgather_rows, collective, my_items
from ..problem.definition import Problem
from ..space.sampling import NoFeasiblePoint, SpaceExhausted, feasible_lhs
from .search import maximize, maximize_over

__all__ = ["initial_design", "search_task", "search_tasks"]


def _with_constraint_errors(problem: Problem, exc: NoFeasiblePoint) -> NoFeasiblePoint:
    report = problem.constraint_errors()
    return type(exc)(f"{exc}; {report}") if report else exc


def initial_design(problem: Problem, task: Mapping[str, Any], n: int, rng: np.random.Generator,
                   describe: str) -> list[dict]:
    """``n`` distinct feasible configurations of ``task`` from Latin hypercubes (fewer when the
    feasible set is smaller). Raises NoFeasiblePoint naming the constraints, and what any of them
    raised, when none is feasible."""
    if problem.candidates is not None:  # a listed domain: draw from it (a Latin hypercube would miss it)
        domain = problem.domain(task)
        assert domain is not None
        if not len(domain):
            raise _with_constraint_errors(problem, NoFeasiblePoint(f"none of the candidates satisfies {describe}"))
        rows = rng.choice(len(domain), size=min(n, len(domain)), replace=False)
        return domain.params(rows)
    try:
        return feasible_lhs(problem.param_space, n, rng, lambda p: problem.is_feasible(task, p), describe=describe)
    except NoFeasiblePoint as exc:
        raise _with_constraint_errors(problem, exc) from None


def search_task(model: Any, i: int, problem: Problem, task: Mapping[str, Any], best_z: float | None,
                claimed: np.ndarray, incumbents: np.ndarray | None, seed: int, particles: int,
                iters: int, acquisition: Callable[[np.ndarray], np.ndarray] | None = None,
                among: np.ndarray | None = None) -> np.ndarray | None:
    """Task ``i``'s next configuration, encoded: a (D,) row, or None when every feasible
    configuration is among ``claimed`` ((k, D) encoded trials of the task, finished or pending).

    best_z: the incumbent in model units (None: the smallest predicted mean at ``claimed``).
    incumbents: (m, D) encoded good configurations placed in the initial swarm. acquisition: the
    function of encoded configurations (n, D) -> (n,) to maximise instead of ``model``'s log-EI.
    among: (m, D) encoded allowed configurations to choose from instead of searching the space
    (those in ``claimed`` skipped; the space is searched when none is left).
    """
    space = problem.param_space
    if acquisition is None:
        if best_z is None:
            best_z = float(np.min(model.predict(i, claimed)[0]))

        def acquisition(x: np.ndarray) -> np.ndarray:
            mean, var = model.predict(i, x)
            return log_ei(mean, np.sqrt(np.maximum(var, 0.0)), best_z)

    if among is not None and len(among):
        taken = set(row_keys(claimed)) if len(claimed) else set()
        fresh = np.asarray(among, dtype=float)[[k not in taken for k in row_keys(among)]]
        if len(fresh):
            return fresh[int(np.argmax(acquisition(fresh)))]
    domain = problem.domain(task)
    try:
        if domain is not None:
            res = maximize_over(acquisition, domain, seed=seed, exclude=claimed, init=incumbents)
        else:
            # without constraints every configuration is feasible: no per-configuration judgement
            # (decoding each row the search evaluates was a sixth of a fidelity run's CPU)
            feasible = (None if not problem.constraints and problem.candidates is None
                        else lambda p: problem.is_feasible(task, p))
            res = maximize(acquisition, space, seed=seed, is_feasible=feasible,
                           exclude=claimed, init=incumbents, n_particles=particles, iters=iters)
    except SpaceExhausted:
        return None
    return res.encoded


def search_tasks(active: Sequence[int], search: Callable[[int], np.ndarray | None], width: int,
                 comm: Any) -> list[np.ndarray | None]:
    """``search(i)`` for every task in ``active``, spread over the ranks of ``comm`` and gathered
    on all of them; None where a task's space is exhausted."""

    def mine() -> dict[int, np.ndarray]:
        out = {}
        for k in my_items(len(active), comm):
            row = search(active[k])
            out[k] = np.full(width, np.nan) if row is None else row
        return out

    rows = allgather_rows(collective(mine, comm, "acquisition search"), len(active), width, comm)
    return [None if np.isnan(r).any() else r for r in rows]
