"""Everything a campaign report shows, read once from a history file (read only).

:func:`load_report_data` never raises for a history that is merely empty or half-finished: what is
not there yet (tasks, evaluations, a fitted model, a default, provenance) is listed in
:attr:`ReportData.missing`, and each section of the report shows what it can.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.labels import task_label
from ..data.run_header import RunHeader
from ..results.result import TuningResult
from ..data.trials import Status, Trial

__all__ = ["ReportData", "load_report_data"]

log = logging.getLogger(__name__)


@dataclass
class ReportData:
    """path: the history file (a Path), or its database URL (a str); name: the problem's name; signature: its
    stored signature; tasks;
    trials: every trial (pending ones included), in id order; confirmations: the confirmation runs;
    result: a TuningResult rebuilt from the history (None when it has no task); unit; budget,
    n_initial, cost_budget: the run's settings (None when not recorded; cost_budget also when the run had
    none); closed: task index -> why it stopped;
    n_models: model fits recorded; fits: each recorded fit's diagnostics (LCM.fit_record; {} where not
    recorded), in order; provenance: the recorded provenance (None: not recorded);
    missing: what the history does not hold yet, one line each."""

    path: Path | str
    name: str
    signature: dict
    tasks: list[dict]
    trials: list[Trial]
    confirmations: list[Trial]
    result: TuningResult | None
    unit: str = ""
    budget: int | None = None
    n_initial: int | None = None
    cost_budget: float | None = None
    closed: dict[int, str] = field(default_factory=dict)
    n_models: int = 0
    fits: list[dict] = field(default_factory=list)
    provenance: Any = None
    missing: list[str] = field(default_factory=list)

    @property
    def where(self) -> str:
        """The history as the report names it: a file's path, a database URL without its password."""
        from ..data.storage.postgres import redact

        return str(self.path) if isinstance(self.path, Path) else redact(self.path)

    @property
    def where_short(self) -> str:
        """:attr:`where`, a file by its name alone."""
        return self.path.name if isinstance(self.path, Path) else self.where

    @property
    def finished(self) -> list[Trial]:
        return [t for t in self.trials if t.status.finished]

    @property
    def pending(self) -> list[Trial]:
        return [t for t in self.trials if t.status is Status.PENDING]

    @property
    def has_model(self) -> bool:
        return self.result is not None and self.result.model is not None

    def task_text(self, i: int) -> str:
        return f"task {i} ({task_label(self.tasks[i])})"


def _provenance(meta: Any, machines: dict[int, dict], trials: list[Trial]) -> Any:
    """What the provenance section shows: the history's machine records (one line each with the
    number of finished trials measured on it, :mod:`gptask.data.provenance`) and any ``provenance``
    meta record; None when neither is there."""
    from ..data.provenance import history_rows

    if not machines:
        return meta
    out: dict[str, Any] = dict(history_rows(machines, trials))
    if isinstance(meta, dict):
        out.update(meta)
    elif meta is not None:
        out["recorded"] = meta
    return out


def _missing(data: ReportData) -> list[str]:
    out = []
    if not data.tasks:
        return ["no task: the history was created but no run was asked yet"]
    if not data.finished:
        out.append("no finished evaluation yet")
    if not data.has_model:
        out.append("no fitted model yet (the model is fitted once the initial designs are measured): no "
                   "recommendation by the model, sensitivity, held-out accuracy or map of the task space")
    if data.budget is not None:
        short = []
        low = data.result.is_low_fidelity if data.result is not None else (lambda i: False)
        for i in range(len(data.tasks)):
            n = sum(t.task_index == i for t in data.finished)
            if n < data.budget and i not in data.closed and not low(i):  # levels and aux tasks: no budget of their own
                short.append(f"{i} ({n}/{data.budget})")
        # the cost as the tuner counts it against the budget (gptask.results.rebuild: sources' runs left out)
        spent = data.result.cost_spent if data.result is not None else None
        spent_up = data.cost_budget is not None and (spent or 0.0) >= data.cost_budget  # the run stopped there
        if short and not spent_up:
            if data.cost_budget is not None:
                why = f"the run is unfinished: {spent or 0.0:.4g} of its cost budget of {data.cost_budget:.4g} spent"
            elif spent is not None:  # a cost budget stops first; not recorded before
                why = ("the run is unfinished, unless it stopped at a cost budget, which histories of earlier "
                       "versions do not record")
            else:
                why = "the run is unfinished"
            out.append(f"tasks below their budget of evaluations ({why}): " + ", ".join(short))
    if data.pending:
        out.append(f"{len(data.pending)} trial(s) pending (asked, not yet told)")
    if data.result is not None and data.result.problem.default is None:
        out.append("no default configuration recorded: no gain over the default")
    if data.provenance is None:
        out.append("no provenance recorded (machine and software of the runs)")
    return out


def load_report_data(path: str | Path) -> ReportData:
    """Read the history at ``path`` (SQLite, read only) into a :class:`ReportData`. Raises
    ValueError for a file that is not a gptask history (the storage names the problem)."""
    from ..results.rebuild import result_from_history
    from ..data.storage import is_url, open_history

    p = str(path) if is_url(path) else Path(path)
    if isinstance(p, Path) and not p.is_file():
        raise ValueError(f"no history file at {p}")
    with open_history(p, read_only=True) as h:
        sig = h.signature
        tasks = h.tasks()
        trials = h.trials()
        header = RunHeader.read(h)
        result = None
        if tasks and sig.get("task_space") and sig.get("param_space"):
            result = result_from_history(h)
        data = ReportData(path=p, name=str(sig.get("name", "problem")), signature=sig, tasks=tasks, trials=trials,
                          confirmations=h.confirmations(), result=result, unit=header.unit,
                          budget=header.budget, n_initial=header.n_initial, cost_budget=header.cost_budget,
                          closed=h.closed_tasks(), n_models=len(h.models()), fits=h.fit_diagnostics(),
                          provenance=_provenance(header.provenance, h.machines(), trials))
    data.missing = _missing(data)
    return data
