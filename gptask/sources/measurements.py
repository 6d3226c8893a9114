"""The one reader of measurements: the finished runs of a problem in a history, a result, a model
file, a CSV file, a list of dicts or a Kernel Tuner / T4 recording, as :class:`Measurement` records.

:func:`read_measurements` is what ``gt.tune(..., sources=...)`` and ``gt.predict_optimum(...,
sources=...)`` (:mod:`gptask.sources.multisource`) read each source with; the checks it makes are a source's
(:mod:`gptask.sources.multisource`' docstring): the problem's signature and unit, a machine record for every
measurement (or ``Source(data, machine=...)``). It also holds the one decoder of a model file's
training data back into configurations and values (:func:`model_data`, also behind
:func:`gptask.insight.model_result.result_from_model`) and the one test of "is this file a history"
(:func:`gptask.core.output_files.is_history`, which the output checks and the insight commands use too).

Each item is read once: a file by :func:`gptask.core.input_files.read_input` (the one read of an input
file, also behind ``gt.import_runs``, ``gptask replay`` and ``read_rows`` of a path), whose first bytes tell its
kind; a history is opened once, any other file read whole, and
the parser of its kind gets the content, never the path: :func:`gptask.transfer.model_io.model_document` /
:func:`~gptask.transfer.model_io.model_from_document` for a model file, :func:`gptask.sources.rows.read_rows`
of a :class:`~gptask.sources.rows.FileContent` for rows (a recording by its name,
:func:`gptask.sources.replay.recording_from_bytes`).

* **Histories** (an SQLite file or an open storage): the finished trials, each with the machine
  record stored with it; the stored signature and unit must be the problem's.
* **Results** (:class:`~gptask.TuningResult` of ``gt.tune`` or ``gt.fit``): the same, from memory.
* **Model files** (``save_model``): the data the model was fitted on (module docstring of
  :mod:`gptask.sources.multisource`), each task's machine from the file's provenance.
* **Rows** (a CSV file, a list of dicts, a recording of a replay problem): the rules of
  :mod:`gptask.sources.rows` (``machine.*`` columns read), repeated runs grouped into one
  measurement; another machine's rows are checked against the problem's constraints only.

``gt.import_runs`` and ``gt.fit`` read their data here too (``read_measurements(..., imported=True)``: rows
only, the problem's own candidates, their own errors).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core.input_files import HISTORY, MODEL, is_model_head, read_input
from ..core.signatures import signature_differences
from ..data.provenance import ProvenanceError, check_record
from ..data.storage.postgres import URL_SCHEMES, redact
from ..data.trials import Status, Trial

if TYPE_CHECKING:
    from ..problem.definition import Problem
    from ..space.dimensions import Space
    from ..transfer import TransferModel

__all__ = ["shown_name", "Measurement", "Source", "SourceError", "read_measurements", "model_data",
           "is_model_head"]

def model_data(tm: TransferModel, space: Space | None = None) -> list[list[tuple[dict, float]]]:
    """The data a loaded model was fitted on, per task of ``tm.tasks``: (configuration, value) pairs,
    the encoded configurations decoded by ``space`` (default: the model's parameter space) and the
    values mapped back from model units to the problem's (equal to the measured ones to rounding)."""
    space = tm.param_space if space is None else space
    Xs, ys = tm.model.data()
    out: list[list[tuple[dict, float]]] = []
    for i in range(len(tm.tasks)):
        if not len(ys[i]):
            out.append([])
            continue
        values = tm.transform.backward(i, ys[i])
        out.append([(params, float(v)) for params, v in zip(space.decode(Xs[i]), values)])
    return out


class SourceError(ValueError):
    """A source that cannot join the model: another problem, no machine record, ..."""


@dataclass(frozen=True)
class Source:
    """One source with what the user says about it. data: a history file (SQLite), a
    :class:`~gptask.TuningResult` (of ``gt.tune`` or ``gt.fit``), a CSV file or a list of dicts
    (rules of :mod:`gptask.sources.rows`, ``machine.*`` columns read); machine: the record or label
    of the machine its measurements without a record were made on; value, status: the columns of a
    CSV file or list of dicts."""

    data: Any
    machine: Any = None
    value: str = "value"
    status: str | None = None


@dataclass(frozen=True)
class Measurement:
    """A finished trial of a source: its task (of the problem), params, status, value, samples and
    machine record ({} when it has none); of rows also the lines (a file's) or indices (a list's) of
    the rows it groups, and the value of each output of a problem of several (None otherwise)."""

    task: dict
    params: dict
    status: Status
    value: float | None
    samples: tuple
    machine: dict
    lines: tuple = ()
    values: dict | None = None


# ---- reading sources -------------------------------------------------------------------------------------
def _check_signature(problem: Problem, stored: Mapping[str, Any], where: str) -> None:
    import json

    mine = json.loads(json.dumps(problem.signature(), sort_keys=True, default=str))
    theirs = json.loads(json.dumps(dict(stored), sort_keys=True, default=str))
    if mine != theirs:
        raise SourceError(f"source {where} is of another problem than {problem.name!r}: "
                          + "; ".join(signature_differences(theirs, mine, theirs="the source's")))


@dataclass(frozen=True)
class _Stored:
    """A history's or result's content: the signature and unit it was measured under (unit None: not
    recorded, not checked), its trials and machine records by id."""

    signature: Mapping[str, Any]
    unit: str | None
    trials: Sequence[Trial]
    machines: Mapping[int, Mapping[str, Any]]


@dataclass(frozen=True)
class _Content:
    """One item read once, recognised by its content: a history or result (``stored``), a model
    file's checked document (``document``), rows (``rows``: a file's bytes or a list of dicts, with the
    columns of ``value`` and ``status``)."""

    stored: _Stored | None = None
    document: dict | None = None
    rows: Any = None
    value: str = "value"
    status: str | None = None


def read_measurements(problem: Problem, item: Any, where: str = "", *, imported: bool = False,
                      aggregate: str = "min", skip_invalid: bool = False) -> list[Measurement]:
    """The finished measurements of ``problem`` in one item (module docstring), each with its
    machine record; SourceError naming the item (``where``, else its path or type) when it cannot
    join ``problem``'s model. The item is read once (:func:`_read`), its content parsed by the
    parser of its kind, and the machine it names given to the measurements without a record.

    imported: read as :func:`gptask.import_runs` and :func:`gptask.fit` read their data, rows
    only (a CSV file, a list of dicts, a recording; another kind is a TypeError or a
    :class:`~gptask.sources.rows.DataError`), checked against the problem's own
    candidates, a run without a machine record kept without one ({}), and the rows' errors
    (DataError, TypeError, FileNotFoundError) raised as they are. aggregate, skip_invalid: how rows
    become runs (:func:`gptask.sources.rows.read_rows`, :func:`~gptask.sources.rows.group_runs`).
    """
    src = item if isinstance(item, Source) else Source(item)
    where = where or shown_name(item) or type(src.data).__name__
    content = _read(src, where, imported)
    given = src.machine is not None or imported
    if content.stored is not None:
        found = _from_stored(problem, content.stored, given, where)
    elif content.document is not None:
        found = _from_model_document(problem, content.document, given, where)
    else:
        found = _from_rows(problem, content, given, where, imported, aggregate, skip_invalid)
    return _with_machines(found, src.machine, where)


def shown_name(item: Any) -> str:
    """How messages name a source (or its ``gt.Source``) given by path: the path, or a database
    URL without its password; "" for a source given as an object."""
    data = item.data if isinstance(item, Source) else item
    if isinstance(data, str) and data.startswith(URL_SCHEMES):
        return redact(data)
    return str(data) if isinstance(data, (str, os.PathLike)) else ""


def _read(src: Source, where: str, imported: bool = False) -> _Content:
    """The content of ``src.data``, read once: a result's or storage's trials, a file recognised by
    its first bytes (:func:`gptask.core.input_files.read_input`: a history, a model file, else rows),
    a list of dicts as rows. imported: rows only, with the errors of
    :func:`gptask.sources.rows.read_rows` (:func:`read_measurements`)."""
    from ..results.result import TuningResult
    from ..data.storage import Storage
    from .rows import FileContent, not_rows

    data = src.data
    refused = f"data must be a CSV file path or a list of dicts, got {type(data).__name__}"
    if isinstance(data, (TuningResult, Storage)) and imported:
        raise TypeError(refused)
    if isinstance(data, TuningResult):
        return _Content(stored=_Stored(data.problem.signature(), data.problem.unit or "", data.history, data.machines))
    if isinstance(data, Storage):
        return _Content(stored=_stored(data))
    if isinstance(data, str) and data.startswith(URL_SCHEMES) and not imported:
        from ..data.storage.postgres import PostgresStorage

        with PostgresStorage(data, read_only=True) as h:
            return _Content(stored=_stored(h))
    if isinstance(data, (str, os.PathLike)):
        path = Path(data)
        if not path.is_file():
            if imported:
                raise FileNotFoundError(f"no data file at {path}")
            raise SourceError(f"source {where}: no such file")
        file = read_input(path)  # the one read: a history's first bytes only, any other file whole
        if imported and file.kind in (HISTORY, MODEL):
            raise not_rows(file)
        if file.kind == MODEL:
            from ..transfer.model_io import ModelFileError, model_document

            try:
                return _Content(document=model_document(file.raw, file.name))
            except ModelFileError as exc:
                raise SourceError(f"source {where}: {exc}") from None
        if file.kind == HISTORY:
            from ..data.storage import SQLiteStorage

            with SQLiteStorage(file.name, read_only=True) as h:
                return _Content(stored=_stored(h))
        return _Content(rows=FileContent(file.name, file.raw), value=src.value, status=src.status)
    if isinstance(data, (Sequence, FileContent)) and not isinstance(data, (str, bytes)):
        return _Content(rows=data, value=src.value, status=src.status)
    if imported:
        raise TypeError(refused)
    raise SourceError(f"source {where}: give a history file, a TuningResult, a CSV file or a list of dicts "
                      f"(or gt.Source(...) of one), got {type(data).__name__}")


def _stored(storage: Any) -> _Stored:
    """What an open history holds for a source: signature, unit (None when not recorded), trials and
    machine records."""
    from ..data.run_header import stored_unit

    return _Stored(storage.signature, stored_unit(storage) or None, storage.trials(), storage.machines())


def _from_stored(problem: Problem, stored: _Stored, given: bool, where: str) -> list[tuple[Measurement, bool]]:
    """A history's or result's finished trials, each with whether it carries a machine record
    (SourceError when some do not and no machine is ``given``)."""
    _check_signature(problem, stored.signature, where)
    if stored.unit is not None and stored.unit != (problem.unit or ""):
        raise SourceError(f"source {where} measures in {stored.unit!r}, the problem in {problem.unit!r}")
    finished = [t for t in stored.trials if t.status.finished]
    if not finished:
        raise SourceError(f"source {where} holds no finished trial")
    missing = [t for t in finished if t.machine is None or t.machine not in stored.machines]
    if missing and not given:
        raise SourceError(f"source {where}: {len(missing)} of its {len(finished)} finished trials carry no machine "
                          "record (measured before gptask recorded machines, or with provenance=None): give "
                          "gt.Source(data, machine='label' or a record) to say which machine measured them")
    return [(Measurement(dict(t.task), dict(t.params), t.status, t.value, tuple(t.samples),
                         dict(stored.machines[t.machine]) if t.machine in stored.machines else {}),
             t.machine in stored.machines) for t in finished]


def _with_machines(found: list[tuple[Measurement, bool]], machine: Any, where: str) -> list[Measurement]:
    """The measurements, those without a machine record (the parsers refused them without
    ``machine``) given ``machine``, checked (:func:`gptask.data.provenance.check_record`)."""
    try:
        default = None if machine is None else check_record(machine, f"source {where}: machine")
    except ProvenanceError as exc:
        raise SourceError(str(exc)) from None
    return [m if known or default is None else replace(m, machine=dict(default)) for m, known in found]


def _from_model_document(problem: Problem, doc: dict, given: bool, where: str) -> list[tuple[Measurement, bool]]:
    """The data a saved model was fitted on (module docstring): its encoded configurations decoded,
    its values in model units mapped back to the problem's units, each task's machine from the
    file's provenance."""
    from ..transfer.model_io import ModelFileError, model_from_document
    from ..data.provenance import data_machines

    try:
        tm = model_from_document(doc, problem, where)
    except ModelFileError as exc:
        raise SourceError(f"source {where}: {exc}") from None
    if problem.outputs is not None or getattr(tm, "outputs", None):
        raise SourceError(f"source {where}: a model file of several outputs cannot be a source yet; give its history")
    prov = tm.provenance or {}
    records = {k: dict(r) for k, r in (prov.get("machines") or {}).items()}
    per_task = prov.get("tasks") or [{}] * len(tm.tasks)  # machine id -> trials, per task
    data = model_data(tm, problem.param_space)
    out: list[tuple[Measurement, bool]] = []
    for i, task in enumerate(tm.tasks):
        if not data[i]:
            continue
        counts = per_task[i]
        known = [k for k in counts if k != "unknown"]
        if len(known) > 1:
            raise SourceError(f"source {where}: task {task} of the model mixes measurements of machines "
                              f"{[records[k].get('label') or records[k].get('cpu') for k in known]}; give the "
                              "history it was fitted on")
        record = records.get(known[0]) if known and not counts.get("unknown") else None
        if record is None and not given:
            raise SourceError(f"source {where}: the model file records no machine for task {task} (written before "
                              f"gptask recorded machines{', or fitted on mixed records' if data_machines(prov) else ''}): "
                              "give gt.Source(path, machine='label' or a record) to say which machine measured it")
        for params, value in data[i]:
            out.append((Measurement(dict(task), problem.param_space.validate(params), Status.COMPLETE, value,
                                    (value,), dict(record or {})), record is not None))
    if not out:
        raise SourceError(f"source {where} holds no measurement")
    return out


def _from_rows(problem: Problem, content: _Content, given: bool, where: str, imported: bool = False,
               aggregate: str = "min", skip_invalid: bool = False) -> list[tuple[Measurement, bool]]:
    """Rows (a file's bytes or a list of dicts, :mod:`gptask.sources.rows`) grouped into runs;
    ``imported``: :func:`read_measurements`."""
    from .rows import DataError, group_runs, read_rows

    # another machine ran its own list of candidates: only the constraints apply to its rows
    mine = problem if imported else problem.without_candidates()
    try:
        runs = group_runs(read_rows(mine, content.rows, value=content.value, status=content.status,
                                    skip_invalid=skip_invalid), aggregate)
    except (DataError, ProvenanceError) as exc:
        if imported:
            raise
        raise SourceError(f"source {where}: {exc}") from None
    if not runs:
        raise SourceError(f"source {where} holds no measurement")
    missing = sum(r.machine is None for r in runs)
    if missing and not given:
        raise SourceError(f"source {where}: {missing} of its {len(runs)} runs have no machine.* columns: give "
                          "gt.Source(data, machine='label' or a record) to say which machine measured them")
    return [(Measurement(dict(r.task), dict(r.params), r.status, r.value, tuple(r.samples), dict(r.machine or {}),
                         tuple(r.lines), r.values), r.machine is not None) for r in runs]
