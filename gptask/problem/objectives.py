"""What an objective returns when it measures several things: named outputs, the objectives among
them with their directions, and limits on outputs.

A problem declares them (``Problem(objectives=..., outputs=..., constraints_out=...)``):

* ``objectives``: the outputs to optimise, in order; a mapping ``{"time": "min", "memory": "min"}``,
  a list of names (all minimised) or of ``(name, direction)`` pairs. The first is the *primary*
  objective: a trial's ``value`` is its value, and what needs one number (``best``, targets,
  progress lines) uses it.
* ``outputs``: further outputs the objective measures without optimising them (e.g. ``"memory"``
  when only a limit applies to it); the objective returns exactly the objectives and these.
* ``constraints_out``: limits on outputs, ``{"memory": ("<=", 2e9)}`` (``"<="`` or ``">="``, a
  finite bound in the output's unit). A limit naming no output of the problem is refused when the
  problem is made, before any run.

The objective then returns a mapping with exactly those keys and finite numbers; anything else (a
number, a missing or an extra key, NaN or inf under one key) makes the run a failed one with that
reason (:meth:`Outputs.parse`). Without ``objectives`` a problem is the classic one: one number,
minimised.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Outputs", "Limit", "outputs_spec", "time_and_memory", "DIRECTIONS", "LIMIT_OPS"]

#: objective directions
DIRECTIONS = ("min", "max")
#: limit operators
LIMIT_OPS = ("<=", ">=")


@dataclass(frozen=True)
class Limit:
    """``output op bound``: the run meets it when its value of ``output`` satisfies it."""

    output: str
    op: str
    bound: float

    def met(self, value: float) -> bool:
        """Whether ``value`` (the output's value) meets the limit."""
        return value <= self.bound if self.op == "<=" else value >= self.bound

    def to_json(self) -> list:
        return [self.op, self.bound]

    def __str__(self) -> str:
        return f"{self.output} {self.op} {self.bound:g}"


@dataclass(frozen=True)
class Outputs:
    """The outputs of a problem's objective (module docstring).

    names: every output the objective returns, objectives first; objectives: those optimised;
    directions: "min" or "max" per objective; limits: the limits on outputs.
    """

    names: tuple[str, ...]
    objectives: tuple[str, ...]
    directions: tuple[str, ...]
    limits: tuple[Limit, ...] = ()

    @property
    def primary(self) -> str:
        """The first objective (a trial's ``value``)."""
        return self.objectives[0]

    @property
    def modelled(self) -> tuple[str, ...]:
        """The outputs a tuner models: every objective, then every limited output that is not one."""
        extra = [lim.output for lim in self.limits if lim.output not in self.objectives]
        return self.objectives + tuple(dict.fromkeys(extra))

    def direction(self, name: str) -> str:
        """"min" or "max" for an objective (outputs that are not objectives count as "min")."""
        return self.directions[self.objectives.index(name)] if name in self.objectives else "min"

    def label(self, name: str) -> str:
        """``"time (minimised)"``: an output's name with its direction, for axes and headers (an output
        that is not an objective: its name alone)."""
        if name not in self.objectives:
            return name
        return f"{name} ({'maximised' if self.direction(name) == 'max' else 'minimised'})"

    def sign(self, name: str) -> float:
        """+1 for a minimised output, -1 for a maximised one: ``sign * value`` is minimised."""
        return -1.0 if self.direction(name) == "max" else 1.0

    def parse(self, returned: Any) -> tuple[dict[str, float] | None, str]:
        """``(values, "")`` when ``returned`` is a mapping of exactly :attr:`names` to finite
        numbers, else ``(None, reason)`` naming the key and what is wrong."""
        expected = ", ".join(self.names)
        if not isinstance(returned, Mapping):
            return None, (f"objective returned {type(returned).__name__} {returned!r}, not a mapping of its "
                          f"outputs {expected}")
        missing = [n for n in self.names if n not in returned]
        if missing:
            return None, f"objective returned no value for {', '.join(map(repr, missing))} (its outputs: {expected})"
        extra = [k for k in returned if k not in self.names]
        if extra:
            return None, f"objective returned unexpected key(s) {', '.join(map(repr, extra))} (its outputs: {expected})"
        out = {}
        for name in self.names:
            v = returned[name]
            if hasattr(v, "item") and getattr(v, "size", None) == 1:
                v = v.item()
            if isinstance(v, bool) or not isinstance(v, numbers.Real):
                return None, f"objective returned {type(v).__name__} {v!r} for {name!r}, not a number"
            v = float(v)
            if math.isnan(v):
                return None, f"objective returned NaN for {name!r}"
            if math.isinf(v):
                return None, f"objective returned {v} for {name!r}"
            out[name] = v
        return out, ""

    def missing(self, values: Mapping[str, Any] | None) -> list[str]:
        """The outputs (of :attr:`names`, in order) that ``values``, a result's outputs, lacks."""
        return [n for n in self.names if n not in (values or {})]

    def violated(self, values: Mapping[str, float]) -> list[Limit]:
        """The limits ``values`` (a run's outputs) do not meet."""
        return [lim for lim in self.limits if not lim.met(float(values[lim.output]))]

    def meets_limits(self, values: Mapping[str, float] | None) -> bool:
        """Whether ``values`` meet every limit (False for None: a run without outputs)."""
        return values is not None and not self.violated(values)

    def to_json(self) -> dict[str, Any]:
        """What the problem's signature records."""
        out: dict[str, Any] = {"objectives": [[n, d] for n, d in zip(self.objectives, self.directions)],
                               "names": list(self.names)}
        if self.limits:
            out["limits"] = {lim.output: lim.to_json() for lim in self.limits}
        return out

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "Outputs":
        """The outputs a problem's signature records (:meth:`to_json`), checked as a problem's are."""
        spec = outputs_spec([tuple(o) for o in d["objectives"]], list(d["names"]),
                            {k: tuple(v) for k, v in (d.get("limits") or {}).items()})
        assert spec is not None
        return spec


def _name(raw: Any, what: str) -> str:
    if not isinstance(raw, str) or not raw.strip():
        raise TypeError(f"Problem: {what} must be a non-empty text, got {raw!r}")
    return raw


def _objectives(objectives: Any) -> tuple[list[str], list[str]]:
    if isinstance(objectives, Mapping):
        pairs = list(objectives.items())
    elif isinstance(objectives, Sequence) and not isinstance(objectives, str):
        pairs = [(o, "min") if isinstance(o, str) else tuple(o) if isinstance(o, Sequence) else (o, None)
                 for o in objectives]
    else:
        raise TypeError(f"Problem: objectives must be a mapping name -> 'min'|'max' or a list of names or of "
                        f"(name, direction) pairs, got {objectives!r}")
    if not pairs:
        raise ValueError("Problem: objectives must name at least one output")
    names, directions = [], []
    for pair in pairs:
        if len(pair) != 2:
            raise ValueError(f"Problem: each objective is a name or a (name, direction) pair, got {pair!r}")
        n, d = _name(pair[0], "an objective's name"), pair[1]
        if d not in DIRECTIONS:
            raise ValueError(f"Problem: the direction of objective {n!r} must be 'min' or 'max', got {d!r}")
        names.append(n)
        directions.append(d)
    if len(set(names)) != len(names):
        raise ValueError(f"Problem: objectives are named twice: {names}")
    return names, directions


def outputs_spec(objectives: Any = None, outputs: Any = None, constraints_out: Any = None) -> Outputs | None:
    """The :class:`Outputs` a problem declares, or None for a classic one (no ``objectives``).
    Raises TypeError/ValueError naming what is wrong (module docstring)."""
    if objectives is None:
        if outputs is not None or constraints_out:
            raise ValueError("Problem: outputs= and constraints_out= need the outputs named: give objectives= "
                             "(e.g. objectives={'time': 'min'}, outputs=['memory'])")
        return None
    names, directions = _objectives(objectives)
    extra: list[str] = []
    if outputs is not None:
        if isinstance(outputs, str) or not isinstance(outputs, Sequence):
            raise TypeError(f"Problem: outputs must be a list of output names, got {outputs!r}")
        extra = [_name(o, "an output's name") for o in outputs if o not in names]
        if len(set(extra)) != len(extra):
            raise ValueError(f"Problem: outputs are named twice: {list(outputs)}")
    all_names = tuple(names + extra)
    limits = []
    if constraints_out:
        if not isinstance(constraints_out, Mapping):
            raise TypeError(f"Problem: constraints_out must be a mapping output -> (op, bound), got {constraints_out!r}")
        for name, rule in constraints_out.items():
            if name not in all_names:
                raise ValueError(f"Problem: constraints_out limits {name!r}, which is not an output of the problem "
                                 f"(its outputs: {', '.join(all_names)}); name measured outputs that are not "
                                 "objectives with outputs=[...]")
            if isinstance(rule, str) or not isinstance(rule, Sequence) or len(rule) != 2:
                raise ValueError(f"Problem: constraints_out[{name!r}] must be an (op, bound) pair such as ('<=', 2e9), "
                                 f"got {rule!r}")
            op, bound = rule
            if op not in LIMIT_OPS:
                raise ValueError(f"Problem: constraints_out[{name!r}] operator must be '<=' or '>=', got {op!r}")
            if isinstance(bound, bool) or not isinstance(bound, numbers.Real) or not math.isfinite(float(bound)):
                raise ValueError(f"Problem: constraints_out[{name!r}] bound must be a finite number, got {bound!r}")
            limits.append(Limit(name, op, float(bound)))
    return Outputs(all_names, tuple(names), tuple(directions), tuple(limits))


def time_and_memory(memory_limit: float | None = None, memory_objective: bool = False,
                    what: str = "problem()") -> dict[str, Any]:
    """The :class:`~gptask.problem.definition.Problem` keyword arguments of an application that measures its
    time (seconds) and its memory (bytes): ``{}`` when neither is asked for; ``memory_objective``:
    both minimised (a front); ``memory_limit``: the time within ``memory <= memory_limit`` bytes (the
    memory then measured as an output). ValueError naming ``what`` for a limit that is not a
    positive finite number of bytes."""
    if memory_limit is not None and (isinstance(memory_limit, bool) or not isinstance(memory_limit, numbers.Real)
                                     or not memory_limit > 0 or not math.isfinite(memory_limit)):
        raise ValueError(f"{what}: memory_limit must be a positive number of bytes, got {memory_limit!r}")
    out: dict[str, Any] = {}
    if memory_objective:
        out["objectives"] = {"time": "min", "memory": "min"}
    elif memory_limit is not None:
        out.update(objectives={"time": "min"}, outputs=["memory"])
    if memory_limit is not None:
        out["constraints_out"] = {"memory": ("<=", float(memory_limit))}
    return out
