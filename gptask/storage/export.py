"""A history as CSV or JSON text (for spreadsheets and other tools), from the Storage interface."""

from __future__ import annotations

import csv
import io
import json

from .base import Storage

__all__ = ["to_csv", "to_json", "text_cell"]

#: the CSV columns after the task and parameter columns
TRIAL_COLUMNS = ("value", "status", "reason", "samples", "duration", "source", "attempts", "created", "finished",
                 "extra")


#: the prefix of the CSV columns of named outputs (one per output, in the order the problem names them)
OUTPUT_PREFIX = "out."

#: a text cell starting with one of these may be evaluated as a formula by a spreadsheet
_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def text_cell(text: str) -> str:
    """``text`` for a CSV cell a spreadsheet shows as text: a leading ``'`` when it starts like a
    formula (OWASP's rule for CSV injection). For free text that may come from outside, such as a
    failure reason holding an application's output."""
    return "'" + text if text.startswith(_FORMULA_STARTS) else text


def to_csv(storage: Storage) -> str:
    """Every trial, one row each: id, task_index, ``task.<key>`` and ``param.<key>`` columns, then
    :data:`TRIAL_COLUMNS` (values written with ``repr`` so they read back exactly; a reason that
    starts like a spreadsheet formula gets a leading ``'``, :func:`text_cell`), then for a problem
    with named outputs one ``out.<name>`` column per output (empty when the trial has none), then the
    ``machine.<key>`` columns of the machine each trial was measured on (:func:`gptask.provenance.flatten`;
    only when the history records machines; empty cells for a trial without a record)."""
    from ..provenance import flatten

    trials = storage.trials()
    machines = {i: flatten(r) for i, r in storage.machines().items()}
    mkeys = sorted({k for cells in machines.values() for k in cells})
    tkeys = sorted({k for t in trials for k in t.task})
    pkeys = sorted({k for t in trials for k in t.params})
    named = (storage.signature.get("outputs") or {}).get("names") or []
    okeys = list(named) + [k for k in dict.fromkeys(k for t in trials for k in t.values) if k not in named]
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["id", "task_index", *[f"task.{k}" for k in tkeys], *[f"param.{k}" for k in pkeys], *TRIAL_COLUMNS,
                *[OUTPUT_PREFIX + k for k in okeys], *mkeys])
    for t in trials:
        cells = machines.get(t.machine, {}) if t.machine is not None else {}
        w.writerow([t.id, t.task_index, *[t.task.get(k, "") for k in tkeys], *[t.params.get(k, "") for k in pkeys],
                    "" if t.value is None else repr(t.value), t.status.value, text_cell(t.reason), json.dumps(list(t.samples)),
                    "" if t.duration is None else f"{t.duration:.6g}", t.source, t.attempts, repr(t.created),
                    "" if t.finished is None else repr(t.finished), json.dumps(dict(t.extra), sort_keys=True),
                    *["" if k not in t.values else repr(t.values[k]) for k in okeys],
                    *[cells.get(k, "") for k in mkeys]])
    return buf.getvalue()


def to_json(storage: Storage) -> str:
    """{"signature", "tasks", "closed_tasks", "trials", "models", "confirmations", "machines"} as
    indented JSON (confirmations: the re-measurements of ``TuningResult.recommend``, which are not
    trials; machines: the machine records by id, which each trial's ``machine`` names)."""
    return json.dumps({"signature": storage.signature, "tasks": storage.tasks(),
                       "closed_tasks": {str(k): v for k, v in storage.closed_tasks().items()},
                       "trials": [t.to_json() for t in storage.trials()], "models": storage.models(),
                       "confirmations": [t.to_json() for t in storage.confirmations()],
                       "machines": {str(k): v for k, v in storage.machines().items()}}, indent=1)
