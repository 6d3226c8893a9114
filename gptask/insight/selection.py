"""Selection tables: the configuration to run at every point of a task grid, for the application
to look up at run time (``gptask export-table``).

Every grid point gets one :class:`Entry`, by one of three routes (``Entry.source``):

* ``"tuned"``: the point is a tuned task; its configuration is that task's recommendation by the
  one rule of :mod:`gptask.results.recommend` (a model file's stored ``recommended`` entry when it has one,
  else the rule applied to the model's own data; see :mod:`gptask.insight.model_result`);
* ``"predicted"``: the point lies inside the model's task range; its configuration is the run-free
  prediction :func:`gptask.predict_optimum` (TLA1, or the joint model's pick for a problem with
  features);
* ``"fallback"``: the point lies outside the model's task range (the smallest box holding the
  tuned tasks; for a categorical or boolean task dimension, the values tuned). Nothing is
  extrapolated there: the entry holds the recommendation of the *nearest tuned task*
  (``fallback="nearest"``, distance in the task coordinates of :func:`task_coordinates`) or the
  problem's default configuration (``fallback="default"``), has no predicted value, and says why
  in ``note``.

Predicted values are those of one new launch: the median and the std of a new measurement (the
model's noise included), and the central 95 % interval (:func:`gptask.transfer.crossval.interval95`).

:meth:`SelectionTable.lookup` is the rule the generated C header implements
(:mod:`gptask.insight.export`): the nearest grid point in task coordinates normalised over the
grid's range, with a status saying whether that entry is a fallback and whether the query lay
outside the grid.
"""

from __future__ import annotations

import logging
import math
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..transfer.crossval import interval95
from ..core.labels import task_label
from ..core.progress import Progress
from ..results.recommend import nothing_to_recommend, recommend
from ..space.dimensions import Dimension, Integer, Ordinal, Real, Space
from ..transfer import TransferModel, as_transfer_model, predict_optimum
from ..data.trials import point_key
from .grid import grid_points, parse_grid
from .model_result import result_from_model

__all__ = ["Entry", "SelectionTable", "selection_table", "task_coordinates", "FALLBACKS", "SOURCES",
           "LOOKUP_INSIDE", "LOOKUP_FALLBACK", "LOOKUP_OUTSIDE", "is_numeric", "is_log_scale"]

log = logging.getLogger(__name__)

#: what a point outside the model's task range gets
FALLBACKS = ("nearest", "default")
#: the routes of an entry (module docstring)
SOURCES = ("tuned", "predicted", "fallback")
#: lookup status: the nearest entry was chosen by the model, inside the grid
LOOKUP_INSIDE = 0
#: lookup status: the nearest entry is a fallback (its grid point lies outside the model's range)
LOOKUP_FALLBACK = 1
#: lookup status: the query lies outside the grid's range (the nearest edge entry is returned)
LOOKUP_OUTSIDE = 2


@dataclass(frozen=True)
class Entry:
    """One grid point. task: the point; params: the configuration to run; source: "tuned",
    "predicted" or "fallback"; value, value_std: the predicted median and std of one launch there
    (user units; None for a fallback); lower, upper: its central 95 % interval; fallback: True for
    a fallback; note: where the configuration comes from (and, for a fallback, why)."""

    task: dict
    params: dict
    source: str
    value: float | None
    value_std: float | None
    lower: float | None
    upper: float | None
    note: str

    @property
    def fallback(self) -> bool:
        return self.source == "fallback"

    def row(self) -> dict[str, Any]:
        """A flat row: task values, parameters, value, std, interval, source, note."""
        return {**self.task, **self.params, "value": self.value, "value_std": self.value_std,
                "lower95": self.lower, "upper95": self.upper, "source": self.source, "note": self.note}


@dataclass
class SelectionTable:
    """The entries of a grid (last task dimension fastest). axes: the grid's values per task
    dimension; task_space, param_space: the model's; unit: the objective's; problem: its name;
    tuned_range: per task dimension, (lo, hi) of the tuned tasks or the list of tuned values;
    fallback: the rule used outside it; constraints_checked: whether the predictions knew the
    problem's constraints (a model loaded with its problem); objective: the name of the objective
    the value columns predict (the primary one of a problem with named outputs, "" for a classic
    problem of one number)."""

    axes: dict[str, list[Any]]
    entries: list[Entry]
    task_space: Space
    param_space: Space
    unit: str = ""
    problem: str = ""
    objective: str = ""
    tuned_range: dict[str, Any] = field(default_factory=dict)
    fallback: str = "nearest"
    constraints_checked: bool = True

    def counts(self) -> dict[str, int]:
        """How many entries each route gave."""
        return {s: sum(e.source == s for e in self.entries) for s in SOURCES}

    def rows(self) -> list[dict[str, Any]]:
        return [e.row() for e in self.entries]

    def lookup(self, task: Mapping[str, Any]) -> tuple[Entry, int]:
        """The entry of the grid point nearest to ``task`` (task coordinates normalised over the
        grid's range) and a status: LOOKUP_INSIDE, LOOKUP_FALLBACK (that entry is a fallback) or
        LOOKUP_OUTSIDE (``task`` lies outside the grid's range). Ties go to the first entry."""
        q = task_coordinates(self.task_space, [task], self.axes)[0]
        P = task_coordinates(self.task_space, [e.task for e in self.entries], self.axes)
        k = int(np.argmin(np.sum((P - q) ** 2, axis=1)))
        if not _inside_axes(self.task_space, task, self.axes):
            return self.entries[k], LOOKUP_OUTSIDE
        return self.entries[k], LOOKUP_FALLBACK if self.entries[k].fallback else LOOKUP_INSIDE


def is_numeric(dim: Dimension) -> bool:
    """Whether a task dimension has numeric values (a nearest point can be measured along it)."""
    return isinstance(dim, (Real, Integer)) or (isinstance(dim, Ordinal) and dim.numeric)


def is_log_scale(dim: Dimension) -> bool:
    """Whether a dimension lies on a log scale (distances along it are taken between logs)."""
    return bool(getattr(dim, "log", False))


def task_coordinates(space: Space, tasks: Sequence[Mapping[str, Any]], axes: Mapping[str, Sequence[Any]]) -> np.ndarray:
    """(n, len(space)) coordinates of ``tasks`` for nearest-point rules: a numeric dimension's value
    (its log for a ``log=True`` dimension) scaled by the span of ``axes[name]`` (1 when the axis is
    a single value); a categorical one 0 or 1 for each value (the distance between two values is 1).
    Values outside the task space are allowed."""
    out = np.zeros((len(tasks), len(space)))
    for j, d in enumerate(space.dimensions):
        if is_numeric(d):
            low = min(axes[d.name])
            # a log dimension takes the log; a value <= 0 there is read as the axis' lowest value
            f = (lambda v, low=low: math.log(v if v > 0 else low)) if is_log_scale(d) else float
            axis = [f(v) for v in axes[d.name]]
            span = (max(axis) - min(axis)) or 1.0
            out[:, j] = [(f(t[d.name]) - min(axis)) / span for t in tasks]
        else:
            values = list(axes[d.name])
            out[:, j] = [float(values.index(t[d.name])) if t[d.name] in values else -1.0 for t in tasks]
    return out


def _inside_axes(space: Space, task: Mapping[str, Any], axes: Mapping[str, Sequence[Any]]) -> bool:
    for d in space.dimensions:
        v, axis = task[d.name], list(axes[d.name])
        if is_numeric(d):
            if not min(axis) <= v <= max(axis):
                return False
        elif v not in axis:
            return False
    return True


def _tuned_range(tm: TransferModel, tuned: list[int]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for d in tm.task_space.dimensions:
        values = [tm.tasks[i][d.name] for i in tuned]
        out[d.name] = (min(values), max(values)) if is_numeric(d) else sorted(set(values), key=str)
    return out


def _outside(space: Space, task: Mapping[str, Any], rng: Mapping[str, Any]) -> list[str]:
    """Why ``task`` lies outside the tuned range (empty when inside)."""
    why = []
    for d in space.dimensions:
        v = task[d.name]
        if is_numeric(d):
            lo, hi = rng[d.name]
            if v < lo:
                why.append(f"{d.name}={v} below the tuned {lo}..{hi}")
            elif v > hi:
                why.append(f"{d.name}={v} above the tuned {lo}..{hi}")
        elif v not in rng[d.name]:
            why.append(f"{d.name}={v} not among the tuned values {rng[d.name]}")
    return why


class _Once(logging.Filter):
    """Lets each distinct message through once: run-free predictions over a grid repeat the same
    warning (e.g. constraints unknown) at every point."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: set[str] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        msg = record.getMessage()
        if msg in self.seen:
            return False
        self.seen.add(msg)
        return True


def _interval(median: float, sd: float, use_log: bool) -> tuple[float, float]:
    lo, hi = interval95(use_log and median > 0, np.array([median]), np.array([sd]))
    return float(lo[0]), float(hi[0])


def _tuned_entries(source: Any, tm: TransferModel, tuned: list[int], stored: Sequence[Mapping[str, Any] | None] | None
                   ) -> tuple[dict[int, tuple[dict, str]], dict[int, str]]:
    """Task index -> (recommended params, note), by the one rule; and task index -> why it has no
    recommendation (none of its runs meets the problem's output limits)."""
    out: dict[int, tuple[dict, str]] = {}
    if stored:
        for i in tuned:
            rec = stored[i] if i < len(stored) else None
            if rec is not None:
                out[i] = (tm.param_space.validate(rec["params"], what="a stored recommendation"),
                          f"recommended for this tuned task ({rec.get('basis', 'stored')}, model file)")
    missing = [i for i in tuned if i not in out]
    unmet: dict[int, str] = {}
    if missing:
        is_result = hasattr(source, "records")
        result = source if is_result else result_from_model(tm)
        spec = getattr(tm.problem, "outputs", None)
        no_stored = None  # a model file keeps the primary output only: with limits, no stored entry says it all
        if spec is not None and spec.limits:
            no_stored = ("the model file stores no recommendation for it: none of its runs met the limits "
                         f"{', '.join(map(str, spec.limits))} when it was saved")
        for i in missing:
            why = nothing_to_recommend(source, i) if is_result else no_stored
            if why:
                unmet[i] = why
                continue
            rec = recommend(result, i, progress=False)
            out[i] = (dict(rec.params), f"recommended for this tuned task ({rec.basis})")
    return out, unmet


def _tuned_value(tm: TransferModel, i: int, params: dict) -> tuple[float, float]:
    """Median and std of one new launch of ``params`` on tuned task i (noise included)."""
    z, v = tm.model.predict_calibrated(i, tm.param_space.encode([params]), include_noise=True)
    med = tm.transform.backward(i, z)
    sd = tm.transform.backward_std(i, z, np.sqrt(np.maximum(v, 0.0)))
    return float(med[0]), float(sd[0])


def selection_table(source: Any, grid: str | Mapping[str, Sequence[Any]], *, fallback: str = "nearest",
                    recommendations: Sequence[Mapping[str, Any] | None] | None = None,
                    progress: bool = False) -> SelectionTable:
    """The selection table of ``source`` over ``grid`` (module docstring).

    source: a :class:`gptask.TuningResult` or a model from :func:`gptask.load_model` (load it with
    ``problem=`` so that predictions respect the constraints and, for a problem with features, use
    the joint model). grid: a grid text (:func:`gptask.insight.grid.parse_grid`) or ``{name: values}``.
    fallback: "nearest" or "default" (the problem's default configuration; needs the problem).
    recommendations: a model file's stored recommendations (``gptask.transfer.model_io.read_recommendations``)
    for the tuned tasks. progress: a line per grid point predicted. Raises ValueError for a bad grid,
    an unknown fallback, a model without a tuned task. With one tuned task the tuned range is that task: every
    other grid point takes the fallback.
    """
    if fallback not in FALLBACKS:
        raise ValueError(f"fallback must be one of {FALLBACKS}, got {fallback!r}")
    tm = as_transfer_model(source)
    axes = parse_grid(grid, tm.task_space) if isinstance(grid, str) else _check_axes(grid, tm.task_space)
    tuned = [i for i in range(len(tm.tasks)) if tm.model.n_points[i] > 0
             and (not hasattr(source, "records") or source.records(i))]  # a result: something to recommend from
    if not tuned:  # one tuned task is a table too: its recommendation there, the fallback everywhere else
        raise ValueError("a selection table needs a model with a tuned task, and none has a successful run")
    rng = _tuned_range(tm, tuned)
    points = grid_points(axes)
    keys = {point_key(tm.tasks[i]): i for i in tuned}
    recs, unmet = _tuned_entries(source, tm, tuned, recommendations)
    tuned = [i for i in tuned if i in recs]  # what the fallbacks choose from
    if not tuned:
        raise ValueError("no tuned task has a recommendation: " + "; ".join(
            f"{task_label(tm.tasks[i])}: {why}" for i, why in unmet.items()))
    problem = tm.problem
    if fallback == "default" and (problem is None or problem.default is None):
        raise ValueError("fallback='default' needs the problem's default configuration: load the model with its "
                         "problem (gt.load_model(path, problem=...), --problem) and give the problem a default")
    tuned_X = task_coordinates(tm.task_space, [tm.tasks[i] for i in tuned], axes)
    use_log = bool(tm.transform.use_log)
    reporter = Progress(progress, len(points), 0, desc="selection table")
    entries = []
    once, tla1 = _Once(), logging.getLogger("gptask.transfer.tla1")
    tla1.addFilter(once)
    try:
        for point in points:
            i = keys.get(point_key(point))
            why = _outside(tm.task_space, point, rng)
            if i is not None and i in unmet:  # tuned, but no run there meets the limits
                entries.append(_fallback_entry(tm, point, f"no run of this tuned task meets the limits ({unmet[i]})",
                                               fallback, tuned, tuned_X, recs, axes))
            elif i is not None:
                params, note = recs[i]
                med, sd = _tuned_value(tm, i, params)
                lo, hi = _interval(med, sd, use_log)
                entries.append(Entry(point, params, "tuned", med, sd, lo, hi, note))
            elif not why:
                pred = predict_optimum(tm, point)
                lo, hi = _interval(pred.value, pred.value_std, use_log or pred.route == "joint")
                entries.append(Entry(point, dict(pred.params), "predicted", pred.value, pred.value_std, lo, hi,
                                     f"run-free prediction ({pred.route} route)"))
            else:
                entries.append(_fallback_entry(tm, point, "outside the model's task range (" + "; ".join(why) + ")",
                                               fallback, tuned, tuned_X, recs, axes))
            reporter.step(f"selection table: {task_label(point)} ({entries[-1].source})")
    finally:
        tla1.removeFilter(once)
        reporter.close()
    return SelectionTable(axes, entries, tm.task_space, tm.param_space,
                          unit=getattr(problem, "unit", "") if problem is not None else tm.unit,
                          problem=str(tm.signature.get("name", "")), objective=_objective_name(tm.signature),
                          tuned_range=rng, fallback=fallback,
                          constraints_checked=problem is not None)


def _objective_name(signature: Mapping[str, Any]) -> str:
    """The primary objective of a problem signature with named outputs ("" without them)."""
    objectives = (signature.get("outputs") or {}).get("objectives") or []
    return str(objectives[0][0]) if objectives else ""


def _fallback_entry(tm: TransferModel, point: dict, reason: str, fallback: str, tuned: list[int],
                    tuned_X: np.ndarray, recs: dict[int, tuple[dict, str]], axes: Mapping[str, Any]) -> Entry:
    """The fallback entry at ``point`` (``reason``: why the model does not choose there)."""
    if fallback == "default":
        try:
            params = tm.problem.default_for(point)
        except (ValueError, TypeError) as exc:
            raise ValueError(f"the problem's default configuration for {task_label(point)} cannot be used as a "
                             f"fallback: {exc}") from None
        return Entry(point, dict(params), "fallback", None, None, None, None, f"{reason}: the problem's default")
    q = task_coordinates(tm.task_space, [point], axes)[0]
    order = np.argsort(np.sum((tuned_X - q) ** 2, axis=1), kind="stable")
    feasible = tm.is_feasible(point) if _in_space(tm.task_space, point) else None
    for k in order:  # the nearest tuned task whose recommendation the constraints allow here
        i = tuned[int(k)]
        if feasible is None or feasible(recs[i][0]):
            which = "the nearest tuned task" if k == order[0] else \
                "the nearest tuned task whose recommendation the constraints allow here,"
            return Entry(point, dict(recs[i][0]), "fallback", None, None, None, None,
                         f"{reason}: the recommendation of {which} {task_label(tm.tasks[i])}")
    default = _usable_default(tm, point)
    if default is not None:
        return Entry(point, default, "fallback", None, None, None, None,
                     f"{reason}: the problem's default (no tuned task's recommendation is allowed here)")
    i = tuned[int(order[0])]
    return Entry(point, dict(recs[i][0]), "fallback", None, None, None, None,
                 f"{reason}: the recommendation of the nearest tuned task {task_label(tm.tasks[i])}, which "
                 "VIOLATES the constraints here (no allowed recommendation or default)")


def _in_space(space: Space, point: Mapping[str, Any]) -> bool:
    return point in space


def _usable_default(tm: TransferModel, point: dict) -> dict | None:
    problem = tm.problem
    if problem is None or problem.default is None or not _in_space(tm.task_space, point):
        return None
    try:
        return problem.default_for(point)
    except (ValueError, TypeError):
        return None


def _check_axes(grid: Mapping[str, Sequence[Any]], space: Space) -> dict[str, list[Any]]:
    if not isinstance(grid, Mapping):
        raise TypeError(f"grid must be a grid text or a dict of value lists, got {type(grid).__name__}")
    unknown = [k for k in grid if k not in space.names]
    missing = [n for n in space.names if n not in grid]
    if unknown or missing:
        raise ValueError(f"grid: every task dimension and only those ({space.names}); unknown {unknown}, "
                         f"missing {missing}")
    out = {}
    for n in space.names:
        values = list(grid[n])
        if not values:
            raise ValueError(f"grid: no value for {n!r}")
        for v in values:
            if is_numeric(space[n]) and (isinstance(v, bool) or not isinstance(v, numbers.Real)):
                raise ValueError(f"grid: {n}={v!r} is not a number")
        out[n] = values
    return out
