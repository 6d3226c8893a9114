"""The user's default configuration in results: which trial measured it, and the gain over it.

A problem's default (``Problem(default=...)``) is what a practitioner would run without tuning.
The tuner measures it first on every task; results, ``gptask show``, the convergence plots and the
model cards report the gain of the best (or recommended) configuration over it::

    gain = (default value - value) / default value      (0.25: 25 % less time than the default)

Histories record each task's default in the run's header (:mod:`gptask.data.run_header`, a list with
one params dict, or None, per task index), so tools that have no :class:`~gptask.problem.definition.Problem` (``gptask
show``, ``gptask plot``) can find the trial that measured it.

This module imports nothing from gptask but the trial records and the run's header.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from ..data.run_header import RunHeader, write_defaults
from ..data.trials import Status, Trial, params_key

__all__ = ["gain", "default_trial", "defaults_of", "record_defaults", "stored_defaults",
           "default_values"]

log = logging.getLogger(__name__)

def gain(default_value: float | None, value: float | None) -> float | None:
    """``(default_value - value) / default_value``, or None when either is missing or the
    default's value is not positive (a gain relative to 0 or a negative objective means nothing)."""
    if default_value is None or value is None or not default_value > 0:
        return None
    return (float(default_value) - float(value)) / float(default_value)


def default_trial(trials: Sequence[Trial], task_index: int, params: Mapping[str, Any] | None) -> Trial | None:
    """The COMPLETE trial of task ``task_index`` that measured ``params`` (the lowest value when
    several did), or None when ``params`` is None or was not measured. ``trials``: Trials, or the
    dict records that read like them."""
    if params is None:
        return None
    key = params_key(params)
    hits = [t for t in trials if t["task_index"] == task_index and t["status"] == Status.COMPLETE
            and params_key(t["params"]) == key]
    return min(hits, key=lambda t: t["value"]) if hits else None


def defaults_of(problem: Any, tasks: Sequence[Mapping[str, Any]]) -> list[dict[str, Any] | None]:
    """Each task's default configuration (``problem.default_for``); all None without a default."""
    return [problem.default_for(t) for t in tasks]


def record_defaults(storage: Any, problem: Any) -> None:
    """Store the default of every task of ``storage`` in its header (nothing when the problem has
    no default)."""
    if problem.default is None:
        return
    write_defaults(storage, defaults_of(problem, storage.tasks()))


def stored_defaults(storage: Any) -> list[dict[str, Any] | None]:
    """The per-task defaults a history recorded (one entry per task; None where unknown)."""
    return RunHeader.read(storage).task_defaults(len(storage.tasks()))


def default_values(trials: Sequence[Trial], defaults: Sequence[Mapping[str, Any] | None]) -> list[float | None]:
    """Per task, the measured value of its default configuration (None: no default or not measured)."""
    out = []
    for i, d in enumerate(defaults):
        t = default_trial(trials, i, d)
        out.append(None if t is None else float(t["value"]))
    return out
