"""The outcome of a tuning run: tasks, every evaluation, the fitted model and the output transform."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Callable
from typing import Any

from .baseline import default_trial, gain
from ..problem.definition import Problem
from ..problem.fidelity import role_of
from .fronts import FrontPoint, task_front
from .recommend import Recommendation, recommend
from .table import Table
from ..model.transforms import OutputTransform
from ..data.trials import Status

__all__ = ["TuningResult", "LazyModelResult"]


@dataclass
class TuningResult:
    """problem, tasks (list of dicts), history (the finished trials, :class:`gptask.data.trials.Trial`
    records in id order; they also read like dicts: ``r["value"]``), model (the last fitted LCM,
    or None), transform (the output transform the model was fitted under), pending (trials asked
    and not told, e.g. stopped by ``max_time``: the next run with the same history re-proposes
    them), closed (task index -> why the task stopped before its budget: target reached, or every
    feasible configuration run), confirmations (the confirmation runs of :meth:`recommend`, Trial
    records with source "confirm"; not trials of the run, not in ``history``), history_file (the
    run's SQLite history, where confirmation runs are committed; None for a history in memory),
    machines (id -> machine record of the machines the trials ran on, which ``Trial.machine`` names;
    :mod:`gptask.data.provenance`), outputs (for a problem with named outputs, :mod:`gptask.problem.objectives`: each modelled output's
    ``(model, transform)``, the primary objective's being ``model`` and ``transform``; the models
    see ``sign * value``, -1 for a maximised objective), source_selection (a run with
    ``sources=..., select_sources=True``: which sources were kept and why,
    :class:`gptask.sources.selection.SourceSelection`; None otherwise), fidelity (a run with fidelity
    levels or auxiliary tasks, docs/fidelity.md: ``{"n_tuned", "n_aux", "n_own", "levels", "dropped",
    "correlation"}``; tasks ``0 .. n_tuned - 1`` are the tuned tasks at the target fidelity, the only
    ones of the run :meth:`best` speaks of; with sources, tasks ``n_own ..`` are the sources', each at
    the fidelity of its rows; None otherwise), cost_spent, cost_budget (seconds: the summed cost
    of the runs, and the run's limit on it; None when the run did not track cost)."""

    problem: Problem
    tasks: list[dict]
    history: list
    model: Any = None
    transform: OutputTransform | None = None
    pending: list = field(default_factory=list)
    closed: dict = field(default_factory=dict)
    confirmations: list = field(default_factory=list)
    history_file: Path | None = None
    machines: dict = field(default_factory=dict)
    outputs: dict = field(default_factory=dict)
    source_selection: Any = None
    fidelity: dict | None = None
    cost_spent: float | None = None
    cost_budget: float | None = None

    def is_low_fidelity(self, i: int) -> bool:
        """Whether task ``i`` is a cheaper fidelity level or an auxiliary task (not a result); with
        sources, a source's task below the target fidelity (one at the target is data of another
        machine or task at it, as without fidelity)."""
        if self.fidelity is None or i < self.fidelity["n_tuned"]:
            return False
        if i < self.fidelity.get("n_own", len(self.tasks)):
            return True
        target = self.fidelity["levels"][0] if self.fidelity.get("levels") else {}  # target first
        return any(self.tasks[i].get(k) != v for k, v in target.items())

    def is_source_task(self, i: int) -> bool:
        """Whether task ``i`` of a run with fidelity and sources is a source's (data, no run)."""
        return self.fidelity is not None and i >= self.fidelity.get("n_own", len(self.tasks))

    def records(self, i: int, status: Status | str | None = Status.COMPLETE) -> list:
        """Task ``i``'s finished trials (only complete ones by default; ``status=None``: all)."""
        self._check_index(i)
        return [r for r in self.history if r["task_index"] == i and (status is None or r["status"] == status)]

    def _check_index(self, i: int) -> None:
        if not isinstance(i, int) or isinstance(i, bool) or not 0 <= i < len(self.tasks):
            raise ValueError(f"task index must be an integer in 0..{len(self.tasks) - 1}, got {i!r}")

    def best(self, i: int) -> tuple[dict, float]:
        """(params, value) of the best complete evaluation of task ``i``. With named outputs
        (:mod:`gptask.problem.objectives`): the best primary objective (in its direction) among the
        evaluations that meet every limit. In a run with fidelity levels or auxiliary tasks, only a
        tuned task at the target fidelity (``i < fidelity["n_tuned"]``) has a best."""
        if self.fidelity is not None and isinstance(i, int) and 0 <= i < len(self.tasks) and self.is_low_fidelity(i):
            what = "a source's task below the target fidelity" if self.is_source_task(i) else \
                "a cheaper fidelity level or an auxiliary task"
            raise ValueError(f"task {i} ({self.tasks[i]}) is {what}: results speak of the tuned tasks at the target "
                             f"fidelity, tasks 0..{self.fidelity['n_tuned'] - 1}")
        ok = self.records(i)
        spec = self.problem.outputs
        if spec is not None:
            ok = [r for r in ok if spec.meets_limits(r["values"])]
            if not ok and self.records(i):
                raise ValueError(f"task {i} ({self.tasks[i]}) has no complete evaluation that meets the limits "
                                 f"{', '.join(map(str, spec.limits))}")
        if not ok:
            raise ValueError(f"task {i} ({self.tasks[i]}) has no complete evaluation")
        sign = 1.0 if spec is None else spec.sign(spec.primary)
        r = min(ok, key=lambda r: sign * r["value"])
        return dict(r["params"]), float(r["value"])

    def pareto(self, i: int, everything: bool = False) -> list[FrontPoint]:
        """Task ``i``'s non-dominated configurations (:func:`gptask.results.fronts.task_front`): those whose
        complete evaluations meet every limit and that no other such configuration dominates in the
        objectives, each a :class:`gptask.results.fronts.FrontPoint` (params, observed outputs, number of
        evaluations), best primary objective first. everything: every configuration meeting the
        limits. Raises ValueError for a problem without named outputs."""
        self._check_index(i)
        if self.problem.outputs is None:
            raise ValueError(f"problem {self.problem.name!r} has one objective: use best({i}); a front needs "
                             "Problem(objectives=...)")
        return task_front(self.records(i, status=None), self.problem.outputs, everything=everything)

    def default(self, i: int) -> tuple[dict, float] | None:
        """(params, value) of the problem's default configuration as measured on task ``i``, or
        None when the problem has no default or it was not measured (completely) there."""
        self._check_index(i)
        t = default_trial(self.history, i, self.problem.default_for(self.tasks[i]))
        return None if t is None else (dict(t["params"]), float(t["value"]))

    def gain(self, i: int) -> float | None:
        """Gain of task ``i``'s best value over its default's: ``(default - best) / default``
        (0.25: the best configuration takes 25 % less than the default); None without a measured
        default (see :mod:`gptask.results.baseline`)."""
        d = self.default(i)
        try:
            best = self.best(i)[1]
        except ValueError:
            return None
        spec = self.problem.outputs
        g = None if d is None else gain(d[1], best)
        return None if g is None else (g if spec is None else spec.sign(spec.primary) * g)

    def recommend(self, i: int, confirm: int = 0, candidates: int | None = None,
                  timeout: float | None = None, aggregate: str | None = None,
                  progress: bool = True, rule: Any = None) -> Recommendation:
        """Task ``i``'s recommended configuration, robust to a noisy objective (:mod:`gptask.results.recommend`).

        Picks, among task ``i``'s evaluated configurations, the one with the lowest posterior mean
        of the model (in user units through the output transform), not the single best launch of
        :meth:`best`. With ``confirm=k`` the ``candidates`` (default 3) best by posterior mean, the
        single best launch's configuration and the problem's default if they are not among them,
        and any configuration confirmed before, are re-measured ``k`` times each through the
        problem's objective (round robin; ``timeout`` seconds per run, None: no limit) and the one
        whose runs have the lowest ``aggregate`` ("min" by default, as for repeats of run times;
        "median" or "mean") is picked; with ``confirm=0`` the confirmation runs already made decide
        the same way when there are any. ``rec.gain`` compares the pick with the default like for
        like; ``rec.is_default`` says when the default wins. progress: a bar or a log line per
        confirmation run. Confirmation runs are committed to the
        run's history file (``history_file``) one by one, apart from its trials (never counted
        against the tuning budget, never seen by the model), and reused by later calls; a failed
        run is recorded with its reason and never raises. Returns a frozen
        :class:`gptask.results.recommend.Recommendation`. Raises ``ValueError`` when task ``i`` has no
        complete evaluation (meeting the limits, with named outputs). rule: for several objectives,
        how to pick on the front (:class:`gptask.results.fronts.PickRule`: ``{"weights": {...}}``,
        ``{"reference": {...}}`` or ``{"limit": {...}}``; None: equal weights).
        """
        return recommend(self, i, confirm=confirm, candidates=candidates, timeout=timeout, aggregate=aggregate,
                         progress=progress, rule=rule)

    def best_so_far(self, i: int) -> list[float]:
        """Running minimum of task ``i``'s values, one entry per evaluation (failed ones repeat it)."""
        out, cur = [], float("inf")
        for r in self.records(i, status=None):
            if r["status"] == Status.COMPLETE:
                cur = min(cur, r["value"])
            out.append(cur)
        return out

    def save_model(self, path: Any, accuracy: bool = True, metadata: dict | None = None) -> Any:
        """Write a model file (JSON, no pickle) for run-free prediction; see :mod:`gptask.transfer.model_io`.

        accuracy: also store the leave-one-task-out accuracy report; metadata: a JSON-ready dict
        kept with the model (``gptask.transfer.model_io.read_metadata``). Returns the path written.
        """
        # upward: a model file builds on transfer (above results); model_io never imports this module
        from ..transfer.model_io import save_model

        return save_model(self, path, accuracy=accuracy, metadata=metadata)

    def table(self) -> Table:
        """One row per task: the task, its best parameters and value, evaluations and failures; with a
        default configuration (``Problem(default=...)``) also its measured value and the gain.
        A :class:`gptask.results.table.Table`: a list of dicts that prints as aligned columns (gains in
        percent, the objective's unit in the value headers)."""
        rows = []
        for i, t in enumerate(self.tasks):
            all_r = self.records(i, status=None)
            row: dict[str, Any] = {"task_index": i, **t}
            if self.fidelity is not None:
                row["role"] = "source" if self.is_source_task(i) else role_of(i, self.fidelity["n_tuned"],
                                                                               self.fidelity["n_aux"])
            try:
                p, v = self.best(i)
                row.update(p)
                row["best"] = v
            except ValueError:
                row["best"] = None
            if self.problem.default is not None:
                d = self.default(i)
                row["default"] = None if d is None else d[1]
                row["gain"] = self.gain(i)
            row["evaluations"] = len(all_r)
            row["failed"] = sum(r["status"] == Status.FAILED for r in all_r)
            if self.cost_spent is not None:
                row["cost_s"] = sum(float(r["extra"].get("cost") or 0.0) for r in all_r)
            if self.problem.outputs is not None and len(self.problem.outputs.objectives) > 1:
                row["front"] = len(self.pareto(i))
            rows.append(row)
        return Table(rows, getattr(self.problem, "unit", ""), ("best", "default"))


_MODEL_FIELDS = ("model", "transform", "outputs")


def _lazy_field(name: str) -> property:
    def get(self: "LazyModelResult") -> Any:
        self._settle()
        return self._lazy[name]

    def put(self: "LazyModelResult", value: Any) -> None:
        self._settle()  # a value set after construction replaces the fitted one
        self._lazy[name] = value

    return property(get, put, doc=f"The result's {name}, fitted at first use (:class:`LazyModelResult`).")


class LazyModelResult(TuningResult):
    """A :class:`TuningResult` whose ``model``, ``transform`` and ``outputs`` are fitted when one of
    them is first read (issue 46): ``gt.tune`` returns one when the run ended without a model
    fitted yet (every run a design point), so a caller that only reads the history pays no fit.

    fit: called once, returns ``(model, transform, outputs, record)``: the first three as
    :class:`TuningResult` takes them, ``record`` the fit made ({"iteration", "params",
    "log_likelihood", "data_key", "use_log"}, or None when none was made), which every callback
    given to :meth:`on_fit` receives; the other arguments are :class:`TuningResult`'s (``model``,
    ``transform``, ``outputs`` omitted)."""

    model = _lazy_field("model")
    transform = _lazy_field("transform")
    outputs = _lazy_field("outputs")

    def __init__(self, fit: Callable[[], tuple[Any, OutputTransform | None, dict, dict | None]], **kwargs: Any) -> None:
        self._pending: Callable[[], tuple[Any, OutputTransform | None, dict, dict | None]] | None = None
        self._lazy: dict[str, Any] = {}
        self._callbacks: list[Callable[[dict], None]] = []
        super().__init__(**kwargs)
        self._pending = fit

    def on_fit(self, callback: Callable[[dict], None]) -> None:
        """Call ``callback(record)`` when the model is fitted (the record of :class:`LazyModelResult`;
        not called when no fit was made)."""
        self._callbacks.append(callback)

    @property
    def model_fitted(self) -> bool:
        """Whether the model was fitted already (reading ``model`` fits it)."""
        return self._pending is None

    def _settle(self) -> None:
        if self._pending is not None:
            fit, self._pending = self._pending, None
            *fields, record = fit()
            self._lazy.update(zip(_MODEL_FIELDS, fields))
            if record is not None:
                for callback in self._callbacks:
                    callback(record)
