"""The one reader of measurements: the finished runs of a problem in a history, a result, a model
file, a CSV file, a list of dicts or a Kernel Tuner / T4 recording, as :class:`Measurement` records.

:func:`read_measurements` is what ``gt.tune(..., sources=...)`` and ``gt.predict_optimum(...,
sources=...)`` (:mod:`gptask.sources`) read each source with; the checks it makes are a source's
(:mod:`gptask.sources`' docstring): the problem's signature and unit, a machine record for every
measurement (or ``Source(data, machine=...)``). It also holds the one decoder of a model file's
training data back into configurations and values (:func:`model_data`, also behind
:func:`gptask.insight.sources.result_from_model`) and the one test of "is this file a history"
(:func:`gptask.outputs.is_history`, which the output checks and the insight commands use too).

* **Histories** (an SQLite file or an open storage): the finished trials, each with the machine
  record stored with it; the stored signature and unit must be the problem's.
* **Results** (:class:`~gptask.TuningResult` of ``gt.tune`` or ``gt.fit``): the same, from memory.
* **Model files** (``save_model``): the data the model was fitted on (module docstring of
  :mod:`gptask.sources`), each task's machine from the file's provenance.
* **Rows** (a CSV file, a list of dicts, a recording of a replay problem): the rules of
  :mod:`gptask.importing.rows` (``machine.*`` columns read), repeated runs grouped into one
  measurement; another machine's rows are checked against the problem's constraints only.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .outputs import is_history
from .provenance import ProvenanceError, check_record
from .trials import Status, Trial

if TYPE_CHECKING:
    from .problem import Problem
    from .space import Space
    from .transfer import TransferModel

__all__ = ["Measurement", "Source", "SourceError", "read_measurements", "model_data", "is_model_file"]

#: what the first bytes of a model file (``save_model``) hold
MODEL_FILE_MARK, MODEL_FILE_HEAD = b'"gptask.model"', 512


def is_model_file(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a model file of ``save_model`` (its document's kind in the first bytes)."""
    try:
        with open(path, "rb") as fh:
            return MODEL_FILE_MARK in fh.read(MODEL_FILE_HEAD)
    except OSError:
        return False


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
    (rules of :mod:`gptask.importing.rows`, ``machine.*`` columns read); machine: the record or label
    of the machine its measurements without a record were made on; value, status: the columns of a
    CSV file or list of dicts."""

    data: Any
    machine: Any = None
    value: str = "value"
    status: str | None = None


@dataclass(frozen=True)
class Measurement:
    """A finished trial of a source: its task (of the problem), params, status, value, samples and
    machine record."""

    task: dict
    params: dict
    status: Status
    value: float | None
    samples: tuple
    machine: dict


# ---- reading sources -------------------------------------------------------------------------------------
def _check_signature(problem: Problem, stored: Mapping[str, Any], where: str) -> None:
    import json

    from .model_io import signature_differences

    mine = json.loads(json.dumps(problem.signature(), sort_keys=True, default=str))
    theirs = json.loads(json.dumps(dict(stored), sort_keys=True, default=str))
    if mine != theirs:
        diffs = signature_differences(theirs, mine) or ["the stored signature differs"]
        raise SourceError(f"source {where} is of another problem than {problem.name!r}: "
                          + "; ".join(d.replace("the model's", "the source's") for d in diffs))


def _from_trials(trials: Sequence[Trial], machines: Mapping[int, Mapping[str, Any]], default: dict | None,
                 where: str) -> list[Measurement]:
    finished = [t for t in trials if t.status.finished]
    if not finished:
        raise SourceError(f"source {where} holds no finished trial")
    missing = [t for t in finished if t.machine is None or t.machine not in machines]
    if missing and default is None:
        raise SourceError(f"source {where}: {len(missing)} of its {len(finished)} finished trials carry no machine "
                          "record (measured before gptask recorded machines, or with provenance=None): give "
                          "gt.Source(data, machine='label' or a record) to say which machine measured them")
    return [Measurement(dict(t.task), dict(t.params), t.status, t.value, tuple(t.samples),
                        dict(machines[t.machine]) if t.machine in machines else dict(default)) for t in finished]


def read_measurements(problem: Problem, item: Any, where: str = "") -> list[Measurement]:
    """The finished measurements of ``problem`` in one item (module docstring), each with its
    machine record; SourceError naming the item (``where``, else its path or type) when it cannot
    join ``problem``'s model."""
    from .result import TuningResult

    src = item if isinstance(item, Source) else Source(item)
    data = src.data
    where = where or (str(data) if isinstance(data, (str, os.PathLike)) else type(data).__name__)
    if where.startswith(("postgresql://", "postgres://")):
        from .storage import redact

        where = redact(where)
    try:
        default = None if src.machine is None else check_record(src.machine, f"source {where}: machine")
    except ProvenanceError as exc:
        raise SourceError(str(exc)) from None
    if isinstance(data, TuningResult):
        _check_signature(problem, data.problem.signature(), where)
        if (data.problem.unit or "") != (problem.unit or ""):
            raise SourceError(f"source {where} measures in {data.problem.unit!r}, the problem in {problem.unit!r}")
        return _from_trials(data.history, data.machines, default, where)
    if isinstance(data, str) and data.startswith(("postgresql://", "postgres://")):
        from .storage import open_history

        with open_history(data, read_only=True) as h:
            return _from_storage(problem, h, default, where)
    if isinstance(data, (str, os.PathLike)):
        path = Path(data)
        if not path.is_file():
            raise SourceError(f"source {where}: no such file")
        if is_model_file(path):
            return _from_model_file(problem, path, default, where)
        if is_history(path):
            return _from_history(problem, path, default, where)
        return _from_rows(problem, src, default, where)
    if isinstance(data, Sequence) and not isinstance(data, (str, bytes)):
        return _from_rows(problem, src, default, where)
    from .storage import Storage

    if isinstance(data, Storage):
        return _from_storage(problem, data, default, where)
    raise SourceError(f"source {where}: give a history file, a TuningResult, a CSV file or a list of dicts "
                      f"(or gt.Source(...) of one), got {type(data).__name__}")


def _from_model_file(problem: Problem, path: Path, default: dict | None, where: str) -> list[Measurement]:
    """The data a saved model was fitted on (module docstring): its encoded configurations decoded,
    its values in model units mapped back to the problem's units, each task's machine from the
    file's provenance."""
    from .model_io import ModelFileError, load_model
    from .provenance import data_machines

    try:
        tm = load_model(path, problem=problem)
    except ModelFileError as exc:
        raise SourceError(f"source {where}: {exc}") from None
    if problem.outputs is not None or getattr(tm, "outputs", None):
        raise SourceError(f"source {where}: a model file of several outputs cannot be a source yet; give its history")
    prov = tm.provenance or {}
    records = {k: dict(r) for k, r in (prov.get("machines") or {}).items()}
    per_task = prov.get("tasks") or [{}] * len(tm.tasks)  # machine id -> trials, per task
    data = model_data(tm, problem.param_space)
    out: list[Measurement] = []
    for i, task in enumerate(tm.tasks):
        if not data[i]:
            continue
        counts = per_task[i]
        known = [k for k in counts if k != "unknown"]
        if len(known) > 1:
            raise SourceError(f"source {where}: task {task} of the model mixes measurements of machines "
                              f"{[records[k].get('label') or records[k].get('cpu') for k in known]}; give the "
                              "history it was fitted on")
        record = records.get(known[0]) if known and not counts.get("unknown") else default
        if record is None:
            raise SourceError(f"source {where}: the model file records no machine for task {task} (written before "
                              f"gptask recorded machines{', or fitted on mixed records' if data_machines(prov) else ''}): "
                              "give gt.Source(path, machine='label' or a record) to say which machine measured it")
        for params, value in data[i]:
            out.append(Measurement(dict(task), problem.param_space.validate(params), Status.COMPLETE, value,
                                   (value,), dict(record)))
    if not out:
        raise SourceError(f"source {where} holds no measurement")
    return out


def _from_storage(problem: Problem, storage: Any, default: dict | None, where: str) -> list[Measurement]:
    from .labels import stored_unit

    _check_signature(problem, storage.signature, where)
    unit = stored_unit(storage) or ""
    if unit and unit != (problem.unit or ""):
        raise SourceError(f"source {where} measures in {unit!r}, the problem in {problem.unit!r}")
    return _from_trials(storage.trials(), storage.machines(), default, where)


def _from_history(problem: Problem, path: Path, default: dict | None, where: str) -> list[Measurement]:
    from .storage import SQLiteStorage

    with SQLiteStorage(path, read_only=True) as h:
        return _from_storage(problem, h, default, where)


def _from_rows(problem: Problem, src: Source, default: dict | None, where: str) -> list[Measurement]:
    from .importing.rows import DataError, group_runs, read_rows

    try:
        # another machine ran its own list of candidates: only the constraints apply to its rows
        runs = group_runs(read_rows(problem.without_candidates(), src.data, value=src.value, status=src.status))
    except (DataError, ProvenanceError) as exc:
        raise SourceError(f"source {where}: {exc}") from None
    if not runs:
        raise SourceError(f"source {where} holds no measurement")
    missing = sum(r.machine is None for r in runs)
    if missing and default is None:
        raise SourceError(f"source {where}: {missing} of its {len(runs)} runs have no machine.* columns: give "
                          "gt.Source(data, machine='label' or a record) to say which machine measured them")
    return [Measurement(dict(r.task), dict(r.params), r.status, r.value, tuple(r.samples),
                        dict(r.machine if r.machine is not None else default)) for r in runs]
