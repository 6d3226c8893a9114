"""Trials: one configuration of one task, from the moment it is asked until its result is told.

A trial exists once the storage has written it as PENDING (asked, not yet told); it then changes
state exactly once, through the storage, to one of the finished states:

=========  =====================================================================================
PENDING    asked and not told: running somewhere, or waiting to be re-proposed after its owner died
COMPLETE   the objective returned a finite number (``value``, stored exactly as given)
FAILED     no usable number: the objective raised, crashed, timed out, or returned NaN, inf or a
           non-number; ``reason`` says which and ``value`` is None
CENSORED   stopped early by a pruner: ``value`` is where it was stopped (a lower bound of the full
           evaluation) or the aggregate of the runs made before it was stopped
=========  =====================================================================================

:class:`Trial` is a frozen record. It also reads like the dict records of schema 1
(``trial["value"]``, ``trial["status"] == "complete"``; :class:`Status` is a ``str`` enum), so code
written against ``result.history`` as a list of dicts keeps working. Its dict fields (``task``,
``params``, ``extra``) are read-only dicts: ``dict(trial.params)`` gives a mutable copy.

This module imports nothing else from gptask: the storage, the tuner and the evaluation layer all
speak in its terms.
"""

from __future__ import annotations

import enum
import json
import math
import numbers
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

__all__ = ["Status", "Trial", "Proposal", "FrozenDict", "point_key", "params_key", "check_value", "CONFIRM_SOURCE",
           "SOURCE_BROUGHT"]

#: the ``source`` of a confirmation run: a re-measurement of an evaluated configuration made by
#: ``TuningResult.recommend(i, confirm=k)``; stored apart from the trials (``Storage.add_confirmation``)
CONFIRM_SOURCE = "confirm"
#: the ``source`` of the measurements a source brought into the history of a ``gt.tune(...,
#: sources=...)`` run (:mod:`gptask.sources.multisource`): data of earlier campaigns, not runs of
#: this one (their cost is not counted against ``cost_budget``)
SOURCE_BROUGHT = "source"


class Status(str, enum.Enum):
    """The state of a trial; the value is what the storage writes (``"pending"``, ...)."""

    PENDING = "pending"
    COMPLETE = "complete"
    FAILED = "failed"
    CENSORED = "censored"

    @property
    def finished(self) -> bool:
        """True for every state but PENDING."""
        return self is not Status.PENDING

    @classmethod
    def parse(cls, value: Any) -> "Status":
        """A Status from a Status or its stored text; anything else raises ValueError naming it."""
        try:
            return cls(value)
        except ValueError:
            raise ValueError(f"trial status must be one of {[s.value for s in cls]}, got {value!r}") from None

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


class FrozenDict(dict):
    """A dict that refuses changes (still a dict for ``json.dumps`` and ``==``)."""

    def _refuse(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("trial records are read-only; copy with dict(...) to change a value")

    __setitem__ = __delitem__ = __ior__ = _refuse  # type: ignore[assignment]
    clear = pop = popitem = setdefault = update = _refuse  # type: ignore[assignment]

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(tuple(sorted(self.items(), key=lambda kv: kv[0])))


#: floats of a configuration are the same value when they agree to this many decimals (point_key)
KEY_DECIMALS = 12


def _norm(v: Any) -> Any:
    kind = type(v)  # the exact built-in types first: the abstract checks below cost 10 x more (issue 46)
    if kind is str or kind is int or kind is bool:
        return v
    if kind is float:
        return round(v, KEY_DECIMALS)
    if isinstance(v, (bool, str)):
        return v
    if isinstance(v, numbers.Integral):
        return int(v)
    if isinstance(v, numbers.Real):
        return round(float(v), KEY_DECIMALS)
    return v


def point_key(point: Mapping[str, Any]) -> tuple:
    """A hashable identity of a configuration (floats rounded to 12 decimals): the same point
    twice gives the same key, so a configuration is never run twice."""
    items = [(k, v if type(v) is str or type(v) is int else _norm(v)) for k, v in point.items()]
    items.sort()
    return tuple(items)


def params_key(point: Mapping[str, Any]) -> str:
    """:func:`point_key` as compact JSON text: what the storage indexes to find duplicates."""
    return json.dumps(point_key(point), separators=(",", ":"))


def check_value(result: Any) -> tuple[float | None, str]:
    """The objective's return value as ``(value, "")`` when it is a finite real number, else
    ``(None, reason)``. Finite floats are kept exactly as given (1e308, -5, 1e-300 included): what
    the model may use of them is the tuner's rule (:mod:`gptask.model.surrogate.data`), not the record's."""
    if isinstance(result, bool) or not isinstance(result, numbers.Real):
        size = getattr(result, "size", None)
        if size == 1 and hasattr(result, "reshape"):  # a one-element numpy array
            return check_value(result.reshape(-1)[0].item())
        if size is not None:
            return None, f"objective returned an array of shape {getattr(result, 'shape', '?')}, not a number"
        return None, f"objective returned {type(result).__name__} {result!r}, not a number"
    value = float(result)
    if math.isnan(value):
        return None, "objective returned NaN"
    if math.isinf(value):
        return None, f"objective returned {value}"
    return value, ""


@dataclass(frozen=True)
class Proposal:
    """A configuration the tuner wants to run, before the storage has made it a trial.

    task_index: the task's position in the run; task, params: dicts; source: why it was proposed
    ("initial": the task's Latin hypercube, "search": an acquisition maximiser).
    """

    task_index: int
    task: Mapping[str, Any]
    params: Mapping[str, Any]
    source: str = ""


@dataclass(frozen=True)
class Trial(Mapping):
    """One trial as stored (read-only).

    id: its number in the history (unique, increasing); task_index, task, params: what runs;
    status: a :class:`Status`; value: the objective (None unless COMPLETE or CENSORED); samples:
    every measured repeat, in run order; reason: why it failed or was censored ("" otherwise);
    extra: what the evaluation reported besides the value (e.g. a noise policy's decision);
    source: "initial" | "search" | ...; created, finished: UNIX times of ask and tell (finished
    None while PENDING); duration: seconds the evaluation took (None while PENDING); attempts: how
    many times it was handed out (> 1 after a dead owner's trial was re-proposed); owner: who holds
    it while PENDING (a text naming a process, or None once released); machine: the id of the
    machine record it was measured on in its history (``Storage.machines()``), None when not recorded;
    values: every output of a
    problem with named outputs (:mod:`gptask.problem.objectives`), ``{name: float}``, when the trial is
    complete or censored (``value`` is then the primary objective's); empty otherwise.
    """

    id: int
    task_index: int
    task: Mapping[str, Any]
    params: Mapping[str, Any]
    status: Status
    value: float | None = None
    samples: tuple[float, ...] = ()
    reason: str = ""
    extra: Mapping[str, Any] = field(default_factory=dict)
    source: str = ""
    created: float = 0.0
    finished: float | None = None
    duration: float | None = None
    attempts: int = 1
    owner: str | None = None
    machine: int | None = None
    values: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", Status.parse(self.status))
        object.__setattr__(self, "task", FrozenDict(self.task))
        object.__setattr__(self, "params", FrozenDict(self.params))
        object.__setattr__(self, "extra", FrozenDict(self.extra))
        object.__setattr__(self, "values", FrozenDict({str(k): float(v) for k, v in (self.values or {}).items()}))
        object.__setattr__(self, "samples", tuple(float(s) for s in self.samples))

    # ---- the dict-like read access of schema-1 records ----------------------------------------
    def __getitem__(self, key: str) -> Any:
        if key not in _FIELDS:
            raise KeyError(key)
        return getattr(self, key)

    def __iter__(self) -> Iterator[str]:
        return iter(_FIELDS)

    def __len__(self) -> int:
        return len(_FIELDS)

    def __hash__(self) -> int:
        return hash((self.id, self.task_index, self.status))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Trial):
            return NotImplemented
        return all(getattr(self, f) == getattr(other, f) for f in _FIELDS)

    @property
    def ok(self) -> bool:
        """True when COMPLETE."""
        return self.status is Status.COMPLETE

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict of every field (status as its text)."""
        d = {f: getattr(self, f) for f in _FIELDS}
        d["status"] = self.status.value
        d["task"], d["params"], d["extra"] = dict(self.task), dict(self.params), dict(self.extra)
        d["values"] = dict(self.values)
        d["samples"] = list(self.samples)
        return d

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "Trial":
        """The inverse of :meth:`to_json`."""
        return cls(**{f: d[f] for f in _FIELDS if f in d})

    def replace(self, **changes: Any) -> "Trial":
        """A copy with ``changes`` (the record itself never changes)."""
        return Trial(**{**{f: getattr(self, f) for f in _FIELDS}, **changes})


_FIELDS = tuple(f.name for f in fields(Trial))
