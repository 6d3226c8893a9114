"""A tuning problem: task space, parameter space, objective and constraints."""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .space import Space

__all__ = ["Problem"]

log = logging.getLogger(__name__)

Objective = Callable[[dict, dict], float]
Constraint = Callable[[dict], bool]


class Problem:
    """What to tune.

    Parameters
    ----------
    task_space: the problem instances (e.g. matrix sizes); a :class:`Space`.
    param_space: the tuning parameters; a :class:`Space`.
    objective: ``f(task: dict, params: dict) -> float``, minimised (e.g. a run time in seconds).
    constraints: callables on one dict holding the task values, the parameter values and the
        ``constants``; each returns truthy when the configuration is allowed. No strings are
        evaluated, ever.
    constants: fixed values visible to the constraints and passed to nobody else (e.g. the number
        of cores of the machine).
    name: a label stored in histories and model files.
    """

    def __init__(
        self,
        task_space: Space,
        param_space: Space,
        objective: Objective,
        constraints: Sequence[Constraint] = (),
        constants: Mapping[str, Any] | None = None,
        name: str = "problem",
    ) -> None:
        for label, space in (("task_space", task_space), ("param_space", param_space)):
            if not isinstance(space, Space):
                raise TypeError(f"Problem: {label} must be a gptask.Space, got {type(space).__name__}")
        clash = sorted(set(task_space.names) & set(param_space.names))
        if clash:
            raise ValueError(f"Problem: names used in both task_space and param_space: {clash}")
        if not callable(objective):
            raise TypeError(f"Problem: objective must be callable f(task, params), got {objective!r}")
        if callable(constraints):
            constraints = [constraints]
        constraints = list(constraints)
        for c in constraints:
            if not callable(c):
                raise TypeError(f"Problem: every constraint must be callable on a dict, got {c!r}")
        constants = dict(constants or {})
        clash = sorted(set(constants) & (set(task_space.names) | set(param_space.names)))
        if clash:
            raise ValueError(f"Problem: constants shadow dimension names: {clash}")
        self.task_space = task_space
        self.param_space = param_space
        self.objective = objective
        self.constraints = constraints
        self.constants = constants
        self.name = str(name)
        self._raised: dict[int, tuple[int, str]] = {}  # constraint index -> (times raised, first error)

    def merged(self, task: Mapping[str, Any], params: Mapping[str, Any]) -> dict[str, Any]:
        """The dict the constraints see: constants, task values and parameter values together."""
        return {**self.constants, **task, **params}

    def violated(self, task: Mapping[str, Any], params: Mapping[str, Any]) -> list[int]:
        """Indices of the constraints that ``(task, params)`` violates (empty when feasible).

        A constraint that raises counts as violated: a configuration the user's own rule cannot
        judge is not one to run. It is not hidden: the first exception of each constraint is logged
        as a warning, and :meth:`constraint_errors` reports them (a "no feasible point" error does).
        """
        c = self.merged(task, params)
        bad = []
        for k, rule in enumerate(self.constraints):
            try:
                ok = bool(rule(dict(c)))
            except Exception as exc:  # noqa: BLE001 - any failure of a user rule means "not allowed"
                ok = False
                self._record_error(k, exc, c)
            if not ok:
                bad.append(k)
        return bad

    def _record_error(self, k: int, exc: Exception, point: Mapping[str, Any]) -> None:
        count, first = self._raised.get(k, (0, ""))
        if count == 0:
            first = f"{type(exc).__name__}: {exc}"
            log.warning("%s of problem %r raised %s on %s; such configurations count as infeasible",
                        self.constraint_names([k])[0], self.name, first, dict(point))
        self._raised[k] = (count + 1, first)

    def constraint_errors(self) -> str:
        """What the constraints raised so far, e.g. ``"constraint #0 (fits) raised KeyError: 'mbb'
        (on 1000 configurations)"``; "" when none raised."""
        return "; ".join(f"{self.constraint_names([k])[0]} raised {first} (on {count} configurations)"
                         for k, (count, first) in sorted(self._raised.items()))

    def is_feasible(self, task: Mapping[str, Any], params: Mapping[str, Any]) -> bool:
        return not self.violated(task, params)

    def constraint_names(self, indices: Sequence[int] | None = None) -> list[str]:
        """Readable names of constraints (their ``__name__`` or ``constraint #k``)."""
        idx = range(len(self.constraints)) if indices is None else indices
        out = []
        for k in idx:
            n = getattr(self.constraints[k], "__name__", "")
            out.append(f"constraint #{k}" + (f" ({n})" if n and n != "<lambda>" else ""))
        return out

    def signature(self) -> dict[str, Any]:
        """A JSON description identifying the problem (spaces, constants, constraint count)."""
        return {
            "name": self.name,
            "task_space": self.task_space.to_json(),
            "param_space": self.param_space.to_json(),
            "constants": {k: self.constants[k] for k in sorted(self.constants)},
            "n_constraints": len(self.constraints),
        }

    def signature_hash(self) -> str:
        text = json.dumps(self.signature(), sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def __repr__(self) -> str:
        return (
            f"Problem(name={self.name!r}, tasks={self.task_space.names}, "
            f"params={self.param_space.names}, constraints={len(self.constraints)})"
        )
