"""Imported runs into a history: finished trials with the source ``"imported"``.

:func:`import_runs` writes the runs of :mod:`gptask.sources.rows` into a history (a file, a
:class:`~gptask.data.storage.Storage`, or None for one in memory) through
:meth:`Storage.import_trials`, in one transaction: tasks the history does not hold yet are appended
to its task list in order of first appearance; each run becomes one finished trial (COMPLETE,
CENSORED or FAILED as its rows said) whose ``samples`` are the repeated rows' values and whose
``extra`` names the file and lines it came from. A configuration the history already holds is left
as it is, so importing a file twice adds nothing.

**Budget.** Imported trials count in a task's budget like the tuner's own: ``gt.tune(problem,
tasks=..., budget=B, history=H)`` on a history holding ``k`` imported runs of a task runs at most
``B - k`` more there (pass ``budget=k + 20`` for 20 new runs), and a task holding ``n_initial`` or
more imported runs skips the initial Latin hypercube (its imported runs are its initial design);
the problem's default configuration is measured all the same when no imported run measured it.
``gt.tune`` must be called with the history's task list, or that list extended by new tasks
(``gptask show H`` lists it), or with the number of tasks it holds.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ...results.baseline import record_defaults
from ...data.run_header import write_unit
from ...problem.definition import Problem
from ...data.storage import Storage, open_storage
from ...data.trials import Status, Trial, point_key
from ...tuning.settings import SOURCE_IMPORTED
from ..rows import check_point_count, check_problem

__all__ = ["ImportReport", "import_runs"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ImportReport:
    """What :func:`import_runs` did. rows: valid rows read; runs: configurations they form (rows of
    one task and configuration are one run); trials: the trials written; existing: runs the history
    already held (left as they were); tasks: the history's task list afterwards; new_tasks: how
    many of those this import added."""

    rows: int
    runs: int
    trials: list[Trial] = field(default_factory=list)
    existing: int = 0
    tasks: list[dict] = field(default_factory=list)
    new_tasks: int = 0

    def summary(self) -> str:
        return (f"{self.rows} rows -> {self.runs} configurations over {len(self.tasks)} tasks "
                f"({self.new_tasks} new): {len(self.trials)} imported, {self.existing} already in the history")


def import_runs(problem: Problem, data: str | os.PathLike | Sequence[Mapping[str, Any]],
                history: str | os.PathLike | Storage | None, value: str = "value", *, status: str | None = None,
                aggregate: str = "min", skip_invalid: bool = False, machine: Any = None,
                mix_machines: bool = False) -> ImportReport:
    """Import measurements into ``history`` as finished trials (module docstring).

    data, value, status, skip_invalid: see :func:`gptask.sources.rows.read_rows` (the data read by
    :func:`gptask.sources.measurements.read_measurements`, the one reader of measurements); aggregate:
    how repeated rows of one configuration become its value ("min", "median" or "mean").
    history: a history file (created when missing; one of another problem is refused), an open
    :class:`~gptask.data.storage.Storage` (left open), or None (in memory, for a look at the report).
    machine: the machine record (or a label) of rows that carry no ``machine.*`` columns
    (:mod:`gptask.data.provenance`); None: such rows are stored without one. mix_machines: accept rows
    of a machine the history has not seen next to another machine's trials (refused otherwise).
    """
    from ...data.provenance import check_history, check_record, same_machine
    from ..measurements import Source, read_measurements

    check_problem(problem)
    runs = read_measurements(problem, Source(data, value=value, status=status), imported=True, aggregate=aggregate,
                             skip_invalid=skip_invalid)
    default_machine = None if machine is None else check_record(machine, "import_runs: machine")
    machines = [r.machine or default_machine for r in runs]
    origin = str(data) if isinstance(data, (str, os.PathLike)) else "data"
    check_point_count(len(runs), origin)
    own = not isinstance(history, Storage)
    storage = open_storage(history, problem.signature())
    try:
        known = dict(storage.machines())
        for record in (m for m in machines if m is not None):
            check_history(known, record, mix_machines, f"history {storage.path or '(in memory)'}",
                          "mix_machines=True (gptask fit --mix-machines)")
            if not any(same_machine(record, r) for r in known.values()):
                known[-1 - len(known)] = record  # a second new machine of the same import is a mix too
        stored = storage.tasks()
        held = {(point_key(stored[t.task_index]), point_key(t.params)) for t in storage.trials()}
        if held:
            fresh = sum((point_key(r.task), point_key(r.params)) not in held for r in runs)
            check_point_count(len(held) + fresh, f"{origin} with the {len(held):,} trials the history holds")
        index = {point_key(t): i for i, t in enumerate(stored)}
        new = []
        for r in runs:
            key = point_key(r.task)
            if key not in index:
                index[key] = len(stored) + len(new)
                new.append(r.task)
        if new:
            storage.set_tasks(stored + new)
        now = time.time()
        trials = [Trial(id=0, task_index=index[point_key(r.task)], task=r.task, params=r.params, status=r.status,
                        value=r.value, samples=r.samples, reason=_reason(r.status, origin, r.lines),
                        extra={"imported_from": origin, "lines": list(r.lines)}, source=SOURCE_IMPORTED,
                        created=now, finished=now, values=r.values or {}) for r in runs]
        written = storage.import_trials(trials, machines)
        record_defaults(storage, problem)
        write_unit(storage, getattr(problem, "unit", ""))
        report = ImportReport(rows=sum(len(r.lines) for r in runs), runs=len(runs), trials=[t for t in written if t is not None],
                              existing=sum(t is None for t in written), tasks=storage.tasks(), new_tasks=len(new))
    finally:
        if own:
            storage.close()
    log.info("import from %s: %s", origin, report.summary())
    return report


def _reason(status: Status, origin: str, lines: Sequence[int]) -> str:
    if status is Status.COMPLETE:
        return ""
    where = "rows" if origin == "data" else "lines"
    return f"{status.value} in the imported data ({origin}, {where} {', '.join(map(str, lines))})"
