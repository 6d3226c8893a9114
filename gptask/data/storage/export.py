"""A history as CSV or JSON text (for spreadsheets and other tools), from the Storage interface."""

from __future__ import annotations

import csv
import io
import json
import numbers
import re
from typing import Any

from .base import Storage

__all__ = ["to_csv", "to_json", "text_cell", "csv_cell", "csv_cell_text"]

#: the CSV columns after the task and parameter columns
TRIAL_COLUMNS = ("value", "status", "reason", "samples", "duration", "source", "attempts", "created", "finished",
                 "extra")


#: the prefix of the CSV columns of named outputs (one per output, in the order the problem names them)
OUTPUT_PREFIX = "out."

#: a text cell starting with one of these may be evaluated as a formula by a spreadsheet
_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


#: a text that a spreadsheet reads as a plain number (left as it is: no formula, and stays numeric)
_PLAIN_NUMBER = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def csv_cell(value: Any) -> Any:
    """``value`` for a CSV cell that no spreadsheet evaluates as a formula (OWASP's rule for CSV
    injection): a text starting with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return gets a
    leading ``'``, unless it is a plain number ("-1.5", "+3e4"); numbers (int, float, numpy) are
    returned as they are, so negative numbers stay numeric; None becomes "". Every CSV writer of
    gptask writes its cells through it; :func:`csv_cell_text` reads such a cell back."""
    if value is None:
        return ""
    if isinstance(value, numbers.Number):
        return value
    text = str(value)
    if text.startswith(_FORMULA_STARTS) and not _PLAIN_NUMBER.fullmatch(text):
        return "'" + text
    return text


def csv_cell_text(cell: str) -> str:
    """The text :func:`csv_cell` wrote as ``cell``: without the leading ``'`` it added (one followed
    by a formula start), else ``cell`` unchanged."""
    return cell[1:] if cell.startswith("'") and cell[1:].startswith(_FORMULA_STARTS) else cell


def text_cell(text: str) -> str:
    """``text`` for a CSV cell a spreadsheet shows as text (:func:`csv_cell` of a text). For free
    text that may come from outside, such as a failure reason holding an application's output."""
    return str(csv_cell(str(text)))


def to_csv(storage: Storage) -> str:
    """Every trial, one row each: id, task_index, ``task.<key>`` and ``param.<key>`` columns, then
    :data:`TRIAL_COLUMNS` (values written with ``repr`` so they read back exactly), then for a problem
    with named outputs one ``out.<name>`` column per output (empty when the trial has none), then the
    ``machine.<key>`` columns of the machine each trial was measured on (:func:`gptask.data.provenance.flatten`;
    only when the history records machines; empty cells for a trial without a record). Every cell
    goes through :func:`csv_cell`: a text that starts like a spreadsheet formula (a categorical
    value, a machine label, a reason) gets a leading ``'``, which ``gptask fit`` removes on reading."""
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
    header = ["id", "task_index", *[f"task.{k}" for k in tkeys], *[f"param.{k}" for k in pkeys], *TRIAL_COLUMNS,
              *[OUTPUT_PREFIX + k for k in okeys], *mkeys]
    w.writerow([csv_cell(c) for c in header])
    for t in trials:
        cells = machines.get(t.machine, {}) if t.machine is not None else {}
        row = [t.id, t.task_index, *[t.task.get(k, "") for k in tkeys], *[t.params.get(k, "") for k in pkeys],
               "" if t.value is None else repr(t.value), t.status.value, t.reason, json.dumps(list(t.samples)),
               "" if t.duration is None else f"{t.duration:.6g}", t.source, t.attempts, repr(t.created),
               "" if t.finished is None else repr(t.finished), json.dumps(dict(t.extra), sort_keys=True),
               *["" if k not in t.values else repr(t.values[k]) for k in okeys],
               *[cells.get(k, "") for k in mkeys]]
        w.writerow([csv_cell(c) for c in row])
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
