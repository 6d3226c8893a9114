"""Acquisition maximisation over a parameter space: particle swarm (pyswarms), a dense candidate
pass, and a local polish of the best distinct points; or, over a listed discrete domain
(:mod:`gptask.space.domain`), every allowed configuration (:func:`maximize_over`).

Everything moves in the encoded unit cube, and every point is *snapped* to a valid configuration
(integers rounded, one-hot categoricals to their argmax) before the acquisition is evaluated, so the
search sees exactly the points that could be run. Three stages, each evaluating the (vectorised)
acquisition on many rows per call:

1. PSO, as the GPTune paper does; infeasible particles get a penalty.
2. ``n_candidates`` Latin-hypercube points in one call, from a random stream of their own (the
   swarm's draws are the same with or without them): basins the swarm's star topology left alone.
3. A local search from ``polish_starts`` points: the best point seen and the candidates' best local
   maxima (not merely their best values, so that one broad basin does not take every start). It
   polishes the continuous (Real) columns with the discrete ones held, by projected BFGS whose
   finite-difference gradients and whole line search are rows of one call for all starts at once,
   then moves each start to a better discrete neighbour (an integer one step away, another
   categorical choice) and polishes again, while that improves.

The proposal is the best feasible, not-yet-evaluated configuration seen by any stage (so a point
that duplicates an evaluated one is replaced by the next best), with a random feasible point as
the last resort. Seeding a quarter of the swarm from the best of 1,000 random points instead was
tried and made the swarm collapse onto the seeded basin; the candidates only feed the polish.

pyswarms is driven through its backend (swarm, Star topology, handlers) so that the acquisition is
evaluated once per iteration on all particles at once. Two pyswarms habits are contained here:
importing it reconfigures the root logger and opens ``report.log`` in the working directory (we
import it with a no-op logging configuration), and it draws from numpy's global random state (we
seed that state per search and restore the caller's state afterwards).

Over 500 lines on purpose: the swarm, the dense pass, the local polish and the search over a listed
domain share how candidates are encoded, made feasible and deduplicated; one job, maximising an
acquisition.
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
from scipy.spatial import cKDTree

from ..space.domain import Domain, row_keys
from ..space.sampling import SpaceExhausted, feasible_lhs, lhs_unit, point_key
from ..space.dimensions import Boolean, Categorical, Integer, Ordinal, Real, Space

__all__ = ["SearchResult", "maximize", "maximize_over", "row_keys"]

log = logging.getLogger(__name__)

#: penalty added to the (negated) acquisition of an infeasible particle
INFEASIBLE_PENALTY = 1e30
_PSO_OPTIONS = {"c1": 1.5, "c2": 1.5, "w": 0.7}
#: uniform (Latin hypercube) points evaluated in one call after the swarm: starts for the polish in
#: basins the swarm left alone
N_CANDIDATES = 1000
#: how many of the best mutually distinct points seen are refined by the local search
POLISH_STARTS = 6
#: a candidate is a local maximum (a polish start) when no one of its this many nearest candidates is better
LOCAL_MAX_NEIGHBOURS = 8
#: two polish starts are distinct when they differ by more than this in some encoded column
START_SEPARATION = 0.05
#: forward finite-difference step (unit-cube units) of the polish gradient
FD_STEP = 1e-6
#: quasi-Newton iterations per polish, at most
POLISH_MAXITER = 30
#: the polish's first step moves no column by more than this (unit-cube units)
POLISH_FIRST_STEP = 0.05
#: the line search tries steps 1, LINE_SEARCH_SHRINK, LINE_SEARCH_SHRINK^2, ... (LINE_SEARCH_STEPS
#: of them, all in one call) along the quasi-Newton direction and takes the longest that gains at
#: least ARMIJO times the gradient's prediction
LINE_SEARCH_STEPS = 8
LINE_SEARCH_SHRINK = 0.4
ARMIJO = 1e-4
#: a start stops when a step gains less than POLISH_FTOL * max(1, |value|), or when its projected
#: gradient is below POLISH_GTOL
POLISH_FTOL = 1e-9
POLISH_GTOL = 1e-5
#: discrete neighbourhood moves (integer +-1, another categorical choice) per start, at most
NEIGHBOUR_ROUNDS = 8
#: added to the polish's (negated) value at an infeasible point: larger than any log-EI difference
INFEASIBLE_STEP_PENALTY = 1e6
#: (negated) value the polish sees where the acquisition is not finite
_FLAT_COST = 1e30
#: SeedSequence key of the candidate stream, apart from the swarm's
_CANDIDATE_STREAM = 1
#: a listed domain (gptask.space.domain) with at most this many available configurations is searched
#: exhaustively: the acquisition is evaluated on every one of them
EXHAUSTIVE_LIMIT = 50_000
#: a larger domain: this many configurations drawn at random, then neighbour moves from the best
DOMAIN_SAMPLE = 20_000
#: rows per acquisition call when a domain is evaluated (bounds the memory of one call)
DOMAIN_CHUNK = 8192
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


@dataclass(frozen=True)
class SearchResult:
    """params: the proposal (dict); encoded: its encoding (D,); value: acquisition there;
    n_evaluations: acquisition evaluations spent (rows); fallback: True when no searched point was usable."""

    params: dict[str, Any]
    encoded: np.ndarray
    value: float
    n_evaluations: int
    fallback: bool = False


class _Evaluations:
    """Every acquisition evaluation of one search goes through here: rows are snapped, evaluated in
    one call, counted and kept, so that the proposal is the best point seen by any stage.
    Feasibility is judged once per configuration, on demand; exclusion and duplicates are sorted
    out only when the points are ranked."""

    def __init__(self, acquisition: Callable[[np.ndarray], np.ndarray], space: Space,
                 is_feasible: Callable[[Mapping[str, Any]], bool] | None, excluded: set[bytes]) -> None:
        self.acquisition, self.space, self.is_feasible, self.excluded = acquisition, space, is_feasible, excluded
        self.values: list[np.ndarray] = []
        self.rows: list[np.ndarray] = []
        self.feasible: dict[bytes, bool] = {}
        self.count = 0

    def __call__(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Snap ``x`` (n, D) and evaluate it in one call; returns (snapped (n, D), values (n,))."""
        snapped = self.space.snap(x)
        values = np.asarray(self.acquisition(snapped), dtype=float).reshape(-1)
        if values.shape != (len(snapped),):
            raise ValueError(f"the acquisition must return one value per row: {len(snapped)} rows gave "
                             f"shape {values.shape}")
        self.count += len(values)
        self.values.append(values)
        self.rows.append(snapped)
        return snapped, values

    def check(self, snapped: np.ndarray) -> np.ndarray:
        """Feasibility (n,) of snapped rows (n, D), each configuration judged once."""
        if self.is_feasible is None:
            return np.ones(len(snapped), dtype=bool)
        keys = row_keys(snapped)
        todo = [r for r, k in enumerate(keys) if k not in self.feasible]
        if todo:
            for r, p in zip(todo, self.space.decode(snapped[todo])):
                self.feasible[keys[r]] = bool(self.is_feasible(p))
        return np.array([self.feasible[k] for k in keys], dtype=bool)

    def ranked(self) -> Iterator[tuple[float, np.ndarray]]:
        """(value, snapped row) of the distinct feasible, not excluded points seen with a finite
        value, best first."""
        if not self.values:
            return
        values, rows = np.concatenate(self.values), np.concatenate(self.rows)
        finite = np.flatnonzero(np.isfinite(values))
        done = set(self.excluded)
        for j in finite[np.argsort(-values[finite], kind="stable")]:
            key = row_keys(rows[j : j + 1])[0]
            if key in done:
                continue
            done.add(key)
            if self.check(rows[j : j + 1])[0]:
                yield float(values[j]), rows[j]


def maximize(
    acquisition: Callable[[np.ndarray], np.ndarray],
    space: Space,
    seed: int,
    is_feasible: Callable[[Mapping[str, Any]], bool] | None = None,
    exclude: np.ndarray | None = None,
    init: np.ndarray | None = None,
    n_particles: int = 40,
    iters: int = 40,
    n_candidates: int = N_CANDIDATES,
    polish_starts: int = POLISH_STARTS,
) -> SearchResult:
    """Maximise ``acquisition`` over ``space``: PSO, a dense candidate pass, then local polishing.

    acquisition: maps an ``(n, D)`` array of encoded, snapped points to ``(n,)`` values to maximise
    (it is called on many rows at once). seed: makes the search reproducible. is_feasible: judges a
    decoded configuration (dict). exclude: ``(k, D)`` encoded configurations that must not be
    proposed (already evaluated). init: optional ``(k, D)`` encoded points placed in the initial
    swarm (e.g. incumbents). n_candidates: uniform (Latin hypercube) points evaluated in one call
    besides the swarm (0: none). polish_starts: how many points are refined by a local search
    (projected BFGS on the real columns, discrete neighbour moves): the best point seen and the
    candidates' best local maxima (0: none).

    The proposal is the best feasible, not excluded point evaluated by any stage; with no such point,
    a random feasible configuration not in ``exclude`` (``fallback=True``).
    """
    if n_particles < 2 or iters < 1:
        raise ValueError(f"need n_particles >= 2 and iters >= 1, got {n_particles}, {iters}")
    if n_candidates < 0 or polish_starts < 0:
        raise ValueError(f"need n_candidates >= 0 and polish_starts >= 0, got {n_candidates}, {polish_starts}")
    dim = space.n_columns
    excluded = set(row_keys(space.snap(exclude))) if exclude is not None and len(exclude) else set()
    evaluate = _Evaluations(acquisition, space, is_feasible, excluded)
    rng = np.random.default_rng(seed)
    pos0 = rng.random((n_particles, dim))
    if init is not None and len(init):
        k = min(len(init), n_particles // 2)
        pos0[:k] = np.clip(np.asarray(init, float)[:k], 0.0, 1.0)
    _swarm(evaluate, dim, pos0, iters, int(rng.integers(2**32)))
    # the candidates and the polish draw from their own stream: the swarm's is the same as without them
    candidates, values = np.empty((0, dim)), np.empty(0)
    if n_candidates:
        stream = np.random.default_rng(np.random.SeedSequence([seed, _CANDIDATE_STREAM]))
        candidates, values = evaluate(lhs_unit(n_candidates, dim, stream))
    starts = _starts(evaluate, candidates, values, polish_starts)
    if starts:
        _local_search(evaluate, np.array([x for x, _ in starts]), np.array([v for _, v in starts]))
    for value, enc in evaluate.ranked():
        return SearchResult(space.decode(enc[None, :])[0], np.asarray(enc), value, evaluate.count)
    log.info("acquisition search found no new feasible point; proposing a random feasible one")
    used = {point_key(p) for p in space.decode(exclude)} if excluded else set()
    params = feasible_lhs(space, 1, rng, is_feasible, used)[0]
    enc = space.encode([params])[0]
    return SearchResult(params, enc, float(acquisition(enc[None, :])[0]), evaluate.count + 1, fallback=True)


def maximize_over(
    acquisition: Callable[[np.ndarray], np.ndarray],
    domain: Domain,
    seed: int,
    exclude: np.ndarray | None = None,
    init: np.ndarray | None = None,
) -> SearchResult:
    """Maximise ``acquisition`` over the listed configurations of ``domain`` not in ``exclude``.

    Up to EXHAUSTIVE_LIMIT available configurations are all evaluated (chunks of DOMAIN_CHUNK
    rows per call): the proposal is the acquisition's exact maximiser. A larger domain is
    sampled (DOMAIN_SAMPLE configurations, plus ``init`` (k, D), e.g. incumbents, where they are
    in the domain), and the best POLISH_STARTS are moved to better available neighbours (one
    discrete step in one dimension) while that improves. Raises SpaceExhausted when every
    configuration of the domain is excluded."""
    avail = domain.available(exclude)
    if not len(avail):
        raise SpaceExhausted(f"every one of the {len(domain)} allowed configurations has been claimed")
    rng = np.random.default_rng(seed)
    sampled = len(avail) > EXHAUSTIVE_LIMIT
    rows = avail
    free = np.zeros(len(domain), dtype=bool)
    free[avail] = True
    if sampled:
        rows = rng.choice(avail, size=DOMAIN_SAMPLE, replace=False)
        if init is not None and len(init):
            extra = domain.rows_of(init)
            rows = np.unique(np.concatenate([rows, extra[free[extra]]]))
    values = np.concatenate([np.asarray(acquisition(domain.encode(rows[k:k + DOMAIN_CHUNK])), dtype=float).reshape(-1)
                             for k in range(0, len(rows), DOMAIN_CHUNK)])
    count = len(rows)
    if sampled:
        rows, values, climbed = _climb(acquisition, domain, rows, values, free)
        count += climbed
    finite = np.flatnonzero(np.isfinite(values))
    if not len(finite):
        log.info("the acquisition is not finite on any allowed configuration; proposing a random one")
        pick = int(rng.choice(avail))
        return SearchResult(domain.params([pick])[0], domain.encode([pick])[0], float("nan"), count, fallback=True)
    best = int(rows[finite[np.argmax(values[finite])]])
    return SearchResult(domain.params([best])[0], domain.encode([best])[0], float(np.max(values[finite])), count)


def _climb(acquisition: Callable[[np.ndarray], np.ndarray], domain: Domain, rows: np.ndarray, values: np.ndarray,
           free: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """Move the POLISH_STARTS best of ``rows`` (values ``values``) to their best available
    neighbour in the domain (``free``: (n,) True where a configuration may be proposed) while that
    improves (NEIGHBOUR_ROUNDS rounds at most); returns every row and value seen and how many new
    evaluations were made."""
    seen = dict(zip(rows.tolist(), values.tolist()))
    order = np.argsort(-np.where(np.isfinite(values), values, -np.inf))[:POLISH_STARTS]
    current = [(int(rows[j]), float(values[j])) for j in order]
    count = 0
    for _ in range(NEIGHBOUR_ROUNDS):
        moves = []
        for r, _ in current:
            near = domain.neighbours(r)
            moves.append([int(m) for m in near if free[m]])
        new = sorted({m for ms in moves for m in ms} - set(seen))
        if new:
            vals = np.asarray(acquisition(domain.encode(new)), dtype=float).reshape(-1)
            count += len(new)
            seen.update(zip(new, vals.tolist()))
        improved, nxt = False, []
        for (r, v), ms in zip(current, moves):
            best = max(ms, key=lambda m: seen[m] if np.isfinite(seen[m]) else -np.inf, default=None)
            if best is not None and np.isfinite(seen[best]) and seen[best] > v:
                nxt.append((best, seen[best]))
                improved = True
            else:
                nxt.append((r, v))
        current = nxt
        if not improved:
            break
    all_rows = np.fromiter(seen.keys(), dtype=int, count=len(seen))
    return all_rows, np.fromiter(seen.values(), dtype=float, count=len(seen)), count


def _swarm(evaluate: _Evaluations, dim: int, pos0: np.ndarray, iters: int, seed: int) -> None:
    """PSO over the unit cube from ``pos0`` (n_particles, D); infeasible particles penalised."""
    ps, topology, bh, vh = _pyswarms_backend()

    def cost(x: np.ndarray) -> np.ndarray:
        snapped, values = evaluate(x)
        out = -np.where(np.isfinite(values), values, -INFEASIBLE_PENALTY)
        return out + np.where(evaluate.check(snapped), 0.0, INFEASIBLE_PENALTY)

    bounds = (np.zeros(dim), np.ones(dim))
    with _global_numpy_seed(seed):
        swarm = ps.create_swarm(n_particles=len(pos0), dimensions=dim, options=dict(_PSO_OPTIONS),
                                bounds=bounds, init_pos=pos0)
        swarm.pbest_cost = np.full(len(pos0), np.inf)
        bh.memory = swarm.position
        vh.memory = swarm.position
        for _ in range(iters):
            swarm.current_cost = cost(swarm.position)
            swarm.pbest_pos, swarm.pbest_cost = ps.compute_pbest(swarm)
            swarm.best_pos, swarm.best_cost = topology.compute_gbest(swarm)
            swarm.velocity = topology.compute_velocity(swarm, None, vh, bounds)
            swarm.position = topology.compute_position(swarm, bounds, bh)


def _starts(evaluate: _Evaluations, candidates: np.ndarray, values: np.ndarray,
            n: int) -> list[tuple[np.ndarray, float]]:
    """Up to ``n`` (row, value) polish starts: the best feasible point seen (usually the swarm's),
    then the candidate pass's local maxima (a candidate at least as good as its LOCAL_MAX_NEIGHBOURS
    nearest candidates), best first, feasible and more than START_SEPARATION away (in some encoded
    column) from every start already taken. Local maxima rather than the best values, so that one
    broad basin does not take every start."""
    starts: list[tuple[np.ndarray, float]] = []
    if n == 0:
        return starts

    def take(enc: np.ndarray, value: float) -> None:
        if all(np.max(np.abs(enc - s)) > START_SEPARATION for s, _ in starts):
            starts.append((enc, value))

    for value, enc in evaluate.ranked():
        take(enc, value)
        break
    if len(candidates) > 1 and n > 1:
        feasible = evaluate.check(candidates)
        vals = np.where(np.isfinite(values) & feasible, values, -np.inf)
        k = min(LOCAL_MAX_NEIGHBOURS, len(candidates) - 1)
        near = cKDTree(candidates).query(candidates, k=k + 1)[1][:, 1:]  # each point's k nearest others
        peaks = np.flatnonzero(np.isfinite(vals) & (vals >= vals[near].max(axis=1)))
        for j in peaks[np.argsort(-vals[peaks])]:
            if len(starts) >= n:
                break
            take(candidates[j], float(vals[j]))
    return starts[:n]


def _local_search(evaluate: _Evaluations, x: np.ndarray, value: np.ndarray) -> None:
    """Refine the snapped, feasible starts ``x`` (S, D) with values ``value`` (S,), all at once:
    a quasi-Newton polish of the continuous (Real) columns with the discrete ones held
    (:func:`_polish`), then, while that improves, a move of each start to its best discrete
    neighbour (an integer one step up or down, another categorical choice; all neighbours of all
    starts in one call), each followed by another polish. Every point evaluated is recorded by
    ``evaluate``; nothing is returned."""
    space = evaluate.space
    cont = np.concatenate([np.full(d.n_columns, isinstance(d, Real)) for d in space.dimensions])
    x, value = x.copy(), value.copy()
    if cont.any():
        x, value = _polish(evaluate, x, value, cont)
    for _ in range(NEIGHBOUR_ROUNDS):
        moves = [_neighbours(space, row) for row in x]
        owner = np.concatenate([np.full(len(m), s) for s, m in enumerate(moves)]).astype(int)
        if not len(owner):
            return
        rows, values = evaluate(np.vstack(moves))
        values = np.where(np.isfinite(values) & evaluate.check(rows), values, -np.inf)
        better = np.zeros(len(x), dtype=bool)
        for s in range(len(x)):
            mine = np.flatnonzero(owner == s)
            if len(mine):
                j = mine[int(np.argmax(values[mine]))]
                if values[j] > value[s]:
                    x[s], value[s], better[s] = rows[j], values[j], True
        if not better.any():
            return
        if cont.any():
            x[better], value[better] = _polish(evaluate, x[better], value[better], cont)


def _polish(evaluate: _Evaluations, x0: np.ndarray, v0: np.ndarray,
            cont: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Maximise the acquisition over the columns where ``cont`` (D,) is True, in [0, 1], from each
    feasible start ``x0`` (S, D) (values ``v0`` (S,)), the other columns held: projected BFGS with
    a backtracking (Armijo) line search whose trial steps are evaluated together, all starts in
    lockstep, so that one iteration of every start is one acquisition call. Gradients are forward
    differences of step FD_STEP (backward at the upper bound): each point and its k perturbations
    are rows of that call. An infeasible point counts as INFEASIBLE_STEP_PENALTY worse, so a step
    into an infeasible region is shortened. Returns the best feasible (rows (S, D), values (S,))
    reached from each start."""
    idx = np.flatnonzero(cont)
    k, n = len(idx), len(x0)
    best_x, best_v = x0.copy(), v0.astype(float).copy()
    eye = np.eye(k)

    def cost(starts: np.ndarray, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Negated acquisition (m,) and its gradient (m, k) at u (m, k) for the starts (m,)."""
        m = len(u)
        rows = np.repeat(x0[starts], k + 1, axis=0).reshape(m, k + 1, -1)
        rows[:, :, idx] = u[:, None, :]
        step = np.where(u + FD_STEP <= 1.0, FD_STEP, -FD_STEP)
        rows[:, np.arange(1, k + 1), idx] += step
        snapped, values = evaluate(rows.reshape(m * (k + 1), -1))
        snapped, values = snapped.reshape(m, k + 1, -1)[:, 0], values.reshape(m, k + 1)
        grad = np.where(np.isfinite(values[:, 1:]), (values[:, 1:] - values[:, :1]) / step, 0.0)
        ok = np.isfinite(values[:, 0])
        feasible = evaluate.check(snapped)
        f = np.where(ok, -values[:, 0], _FLAT_COST) + np.where(feasible, 0.0, INFEASIBLE_STEP_PENALTY)
        improved = ok & feasible & (values[:, 0] > best_v[starts])
        best_x[starts[improved]] = snapped[improved]
        best_v[starts[improved]] = values[improved, 0]
        return f, np.where(ok[:, None], -grad, 0.0)

    all_starts = np.arange(n)
    u = x0[:, idx].copy()
    f, g = cost(all_starts, u)
    h = _first_inverse_hessian(g, k)
    fresh = np.ones(n, dtype=bool)  # h is still the scaled identity
    active = np.isfinite(f) & (f < _FLAT_COST)
    for _ in range(POLISH_MAXITER):
        todo = np.flatnonzero(active)
        if not len(todo):
            break
        d = _direction(h[todo], g[todo], u[todo])
        uphill = np.sum(d * g[todo], axis=1) >= 0.0  # the bounds spoilt the direction: steepest descent
        if uphill.any():
            bad = todo[uphill]
            h[bad], fresh[bad] = _first_inverse_hessian(g[bad], k), True
            d[uphill] = _direction(h[bad], g[bad], u[bad])
        # every step length of the backtracking line search at once: one call for all starts
        steps = LINE_SEARCH_SHRINK ** np.arange(LINE_SEARCH_STEPS)
        u_try = np.clip(u[todo, None, :] + steps[None, :, None] * d[:, None, :], 0.0, 1.0)
        f_try, g_try = cost(np.repeat(todo, len(steps)), u_try.reshape(-1, k))
        f_try, g_try = f_try.reshape(len(todo), -1), g_try.reshape(len(todo), len(steps), k)
        armijo = f_try <= f[todo, None] + ARMIJO * np.einsum("sj,saj->sa", g[todo], u_try - u[todo, None, :])
        armijo &= np.any(u_try != u[todo, None, :], axis=2)
        for j, si in enumerate(todo):
            ok = np.flatnonzero(armijo[j])
            if not len(ok):
                active[si] = False  # no acceptable step: a local maximum at this resolution
                continue
            step = ok[0]  # the longest acceptable one
            sv, yv = u_try[j, step] - u[si], g_try[j, step] - g[si]
            ys = float(yv @ sv)
            if ys > 1e-12 * float(np.sqrt((yv @ yv) * (sv @ sv))):  # BFGS update of the inverse Hessian
                if fresh[si]:
                    h[si] = eye * (ys / float(yv @ yv))
                    fresh[si] = False
                rho = 1.0 / ys
                v = eye - rho * np.outer(sv, yv)
                h[si] = v @ h[si] @ v.T + rho * np.outer(sv, sv)
            converged = f[si] - f_try[j, step] <= POLISH_FTOL * max(1.0, abs(f_try[j, step]))
            u[si], f[si], g[si] = u_try[j, step], f_try[j, step], g_try[j, step]
            if converged or np.abs(_projected(g[si], u[si])).max() <= POLISH_GTOL:
                active[si] = False
    return best_x, best_v


def _first_inverse_hessian(g: np.ndarray, k: int) -> np.ndarray:
    """Scaled identities (m, k, k) whose first step from gradients ``g`` (m, k) moves no column by
    more than POLISH_FIRST_STEP."""
    scale = POLISH_FIRST_STEP / np.maximum(np.abs(g).max(axis=1), 1e-300)
    return np.eye(k)[None, :, :] * scale[:, None, None]


def _projected(d: np.ndarray, u: np.ndarray, sign: float = 1.0) -> np.ndarray:
    """``d`` with the components that would leave [0, 1] from ``u`` zeroed (``sign=1``: ``d`` is a
    gradient of a function to minimise, the step goes along ``-d``; ``sign=-1``: ``d`` is the step)."""
    leaving = ((u <= 0.0) & (sign * d > 0.0)) | ((u >= 1.0) & (sign * d < 0.0))
    return np.where(leaving, 0.0, d)


def _direction(h: np.ndarray, g: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Quasi-Newton steps ``-h g`` (m, k) for inverse Hessians ``h`` (m, k, k) and gradients ``g``
    (m, k) at ``u`` (m, k), without the components that would leave the box."""
    return _projected(-np.einsum("sij,sj->si", h, g), u, sign=-1.0)


def _neighbours(space: Space, x: np.ndarray) -> np.ndarray:
    """Rows (m, D) that differ from the snapped row ``x`` (D,) in one discrete dimension: an integer
    or an ordinal one step up or down (within its values), another choice of a categorical, a
    boolean flipped."""
    rows = []
    for d, sl in zip(space.dimensions, space.column_slices()):
        if isinstance(d, Integer):
            v = d.decode(x[sl][None, :])[0]
            for w in (v - 1, v + 1):
                if d.lo <= w <= d.hi:
                    y = x.copy()
                    y[sl] = d.encode([w])[0]
                    rows.append(y)
        elif isinstance(d, Categorical):
            for j in range(d.n_columns):
                if x[sl][j] != 1.0:
                    y = x.copy()
                    y[sl] = np.eye(d.n_columns)[j]
                    rows.append(y)
        elif isinstance(d, Ordinal):
            k = d.index(d.decode(x[sl][None, :])[0])
            for j in (k - 1, k + 1):
                if 0 <= j < len(d.ordered):
                    y = x.copy()
                    y[sl] = d.encode([d.ordered[j]])[0]
                    rows.append(y)
        elif isinstance(d, Boolean):
            y = x.copy()
            y[sl] = 1.0 - x[sl]
            rows.append(y)
    return np.array(rows).reshape(-1, len(x))
