"""Recorded tuning campaigns as objectives: plan budgets and tuner settings offline.

Exhaustively or partly measured landscapes are published for many kernels (Kernel Tuner's cache
files, the FAIR benchmark hub, the T4 results format) and every campaign a user ran keeps its
measurements. A :class:`Recording` is one such campaign on one machine: the measured value, or the
failure, of each configuration it ran. :func:`replay_problem` turns recordings of several machines
into one :class:`gptask.Problem` whose tasks are the machines (a categorical task ``machine``)
and whose objective looks each configuration up: a failed configuration raises
:class:`gptask.EvaluationFailed` with its recorded reason, one the campaign never ran fails with
"not recorded". The tuner may propose only recorded configurations (``candidates``), so a partly
measured landscape replays as what it is. :func:`replay` tunes it for several budgets and seeds and
reports the fraction of the optimum reached (optimum / best found, for a minimised positive
objective such as a time) against evaluations; ``gptask replay`` prints that and plots it.

Formats read by :func:`read_recording` (the format is recognised from the content):

* **Kernel Tuner cache files** (``.json`` or ``.json.gz``): keys ``device_name``,
  ``tune_params_keys``, ``tune_params``, ``objective`` and ``cache``, which maps
  ``"v1,v2,..."`` to a record holding the parameters and the objective (``time`` in ms); a
  string objective (``"CompilationFailedConfig"``, ``"RuntimeFailedConfig"``, ...) marks a failure.
* **T4 results files** (``.json``): ``{"results": [{"configuration": {...}, "invalidity":
  "correct" | "compile" | "runtime" | ..., "measurements": [{"name", "value", "unit"}]}]}``.
* **CSV**: one row per configuration, a column per parameter, the objective column (``--objective``,
  default ``time``, else ``value``), optional ``status`` (complete/failed) and ``reason`` columns;
  the format ``gptask export`` writes (``param.<name>`` columns) reads too.

Parameter spaces are inferred from the recorded values: numbers become :class:`gptask.Ordinal`
lists (on the log scale when they are spaced geometrically, like powers of two), texts, and numbers
mixed with texts (``[1, 2, 4, "auto"]``), become :class:`gptask.Categorical` choices of the values as
recorded, and a parameter with one value becomes a constant the restrictions may read
(``filter_width`` in the convolution kernel's restrictions). A number that does not fit a float
(``10**400``, ``1e400``) is refused naming the file; the text ``Infinity`` or ``NaN`` (``inf``,
``nan`` in a CSV) as a measurement marks a failed configuration.

Over 500 lines on purpose: the readers of three recording formats (Kernel Tuner caches, T4 results,
CSV) share their checks and messages, and the replay harness uses what they read.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import logging
import math
import numbers
import sys
import zlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from ..core.input_files import HISTORY, read_input
from ..evaluation.evaluate import EvaluationFailed
from ..problem.definition import Problem
from ..space.dimensions import Categorical, Dimension, Ordinal, Space

__all__ = ["Recording", "read_recording", "recording_from_bytes", "read_restrictions", "replay_problem",
           "ReplayObjective", "recording_rows",
           "replay", "ReplayReport", "ReplayRun", "MAX_RECORDING_BYTES", "NOT_RECORDED", "LABEL_WIDTH"]

log = logging.getLogger(__name__)

#: the largest recording read (bytes after decompression): a guard against decompression bombs
MAX_RECORDING_BYTES = 512 * 2**20
#: the reason of a configuration the recording does not hold
NOT_RECORDED = "not recorded"
#: CSV columns that are not parameters
_CSV_META = {"status", "reason", "id", "task_index", "samples", "duration", "source", "attempts", "created",
             "finished", "extra", "timestamp"}


@dataclass(frozen=True)
class Recording:
    """One recorded campaign on one machine.

    label: the machine (a Kernel Tuner file's ``device_name``, else the file name); source: where
    it was read from; parameters: every parameter and its recorded values (sorted, distinct);
    objective: the name of the measured quantity; results: configuration (a tuple of values in
    ``parameters`` order) -> the measured value (float) or the failure's reason (str).
    """

    label: str
    source: str
    parameters: dict[str, list]
    objective: str
    results: dict[tuple, float | str] = field(repr=False)

    @property
    def names(self) -> list[str]:
        return list(self.parameters)

    def key(self, params: Mapping[str, Any]) -> tuple:
        """The results key of a configuration given as a dict (all parameters, or the varying ones
        with the constants filled in)."""
        return tuple(params[n] if n in params else self.parameters[n][0] for n in self.parameters)

    def lookup(self, params: Mapping[str, Any]) -> float | str | None:
        """The recorded value or failure reason of ``params``, None when it was not run."""
        return self.results.get(self.key(params))

    def best(self) -> tuple[dict[str, Any], float]:
        """(configuration, value) of the smallest recorded value."""
        ok = [(k, v) for k, v in self.results.items() if not isinstance(v, str)]
        if not ok:
            raise ValueError(f"recording {self.label!r} ({self.source}) holds no successful configuration")
        k, v = min(ok, key=lambda kv: kv[1])
        return dict(zip(self.parameters, k)), float(v)

    def configurations(self) -> list[dict[str, Any]]:
        """Every recorded configuration (failed ones too), as dicts of all parameters."""
        return [dict(zip(self.parameters, k)) for k in self.results]

    @property
    def n_failed(self) -> int:
        return sum(isinstance(v, str) for v in self.results.values())


# ---- reading ---------------------------------------------------------------------------------------
def _content(fh: BinaryIO, p: Path) -> bytes:
    """What the binary file ``fh`` holds, gunzipped as it is read when it is gzip (ValueError naming
    ``p`` for a damaged one); at most MAX_RECORDING_BYTES of data."""
    gzipped = fh.read(2) == b"\x1f\x8b"
    fh.seek(0)
    try:
        if gzipped:
            with gzip.GzipFile(fileobj=fh, mode="rb") as gz:
                raw = gz.read(MAX_RECORDING_BYTES + 1)
        else:
            raw = fh.read(MAX_RECORDING_BYTES + 1)
    except EOFError:
        raise ValueError(f"{p}: damaged gzip file (truncated: the compressed data ends before its end "
                         "marker); copy or download it again") from None
    except (gzip.BadGzipFile, zlib.error) as exc:
        raise ValueError(f"{p}: damaged gzip file ({exc}); copy or download it again") from None
    if len(raw) > MAX_RECORDING_BYTES:
        raise ValueError(f"{p}: more than {MAX_RECORDING_BYTES // 2**20} MiB of data; split the recording")
    return raw


class _Unfit(ValueError):
    """A number in a JSON recording that does not fit a float."""


def _too_big(text: str) -> str:
    """What is wrong with a number (its text) that does not fit a float; a long one shortened."""
    shown = text if len(text) <= 24 else f"{text[:12]}...{text[-6:]} ({len(text)} characters)"
    return f"the number {shown} does not fit a float (at most {sys.float_info.max:.4g})"


def _json_int(text: str) -> int:
    """A JSON integer, refused (before converting a long one) when it does not fit a float."""
    if len(text.lstrip("-")) > 309 or abs(int(text)) > sys.float_info.max:
        raise _Unfit(_too_big(text))
    return int(text)


def _json_float(text: str) -> float:
    """A JSON real, refused when it does not fit a float (``1e400``; the text ``Infinity`` is no real)."""
    v = float(text)
    if math.isinf(v):
        raise _Unfit(_too_big(text))
    return v


def _value(raw: Any, where: str) -> Any:
    """A recorded parameter value as a plain Python number or string; ValueError naming ``where``."""
    if isinstance(raw, bool):
        return int(raw)
    if isinstance(raw, numbers.Integral):
        if abs(int(raw)) > sys.float_info.max:
            raise ValueError(f"{where}: {_too_big(str(raw))}")
        return int(raw)
    if isinstance(raw, numbers.Real):
        f = float(raw)
        if not math.isfinite(f):
            raise ValueError(f"{where}: the parameter value {f} is not a finite number")
        return int(f) if f.is_integer() else f
    if isinstance(raw, str):
        return raw
    raise ValueError(f"{where}: the parameter value {raw!r} is neither a number nor a text")


def _objective_value(raw: Any, where: str) -> float | str:
    """A measurement as a float, or a failure reason (a string, or a value that is not finite)."""
    if isinstance(raw, str):
        return raw or "failed"
    if isinstance(raw, bool) or not isinstance(raw, numbers.Real):
        raise ValueError(f"{where}: the objective is {raw!r}, neither a number nor a failure text")
    if isinstance(raw, numbers.Integral) and abs(int(raw)) > sys.float_info.max:
        raise ValueError(f"{where}: the objective is {_too_big(str(raw))}")
    v = float(raw)
    return v if math.isfinite(v) else f"non-finite value {v}"


def _from_kernel_tuner(data: Mapping[str, Any], path: Path, objective: str | None) -> Recording:
    keys = data.get("tune_params_keys")
    lists = data.get("tune_params")
    cache = data.get("cache")
    if (not isinstance(keys, list) or not all(isinstance(k, str) for k in keys) or not isinstance(lists, Mapping)
            or not isinstance(cache, Mapping)):
        raise ValueError(f"{path}: a Kernel Tuner cache file needs tune_params_keys (a list of names), tune_params "
                         f"and cache (mappings)")
    missing = [k for k in keys if k not in lists]
    if missing:
        raise ValueError(f"{path}: tune_params lacks {missing} of tune_params_keys")
    for k in keys:
        if not isinstance(lists[k], list) or not lists[k]:
            raise ValueError(f"{path}: tune_params[{k!r}] is {lists[k]!r}; expected the list of its values")
    obj = objective or data.get("objective") or "time"
    if not isinstance(obj, str):
        raise ValueError(f"{path}: objective is {obj!r}; expected the name of the measured quantity, such as 'time'")
    parameters = {k: sorted({_value(v, f"{path}: tune_params[{k!r}]") for v in lists[k]}, key=_sort_key)
                  for k in keys}
    results: dict[tuple, float | str] = {}
    for text, record in cache.items():
        where = f"{path}: cache entry {text!r}"
        if not isinstance(record, Mapping):
            raise ValueError(f"{where} is not a record")
        try:
            config = tuple(_value(record[k], where) for k in keys)
        except KeyError as exc:
            raise ValueError(f"{where} lacks the parameter {exc}") from None
        if obj not in record:
            raise ValueError(f"{where} has no objective {obj!r} (its keys: {sorted(record)[:12]})")
        results[config] = _objective_value(record[obj], where)
    label = str(data.get("device_name") or path.name.split(".")[0])
    return Recording(label, str(path), parameters, obj, results)


def _from_t4(data: Mapping[str, Any], path: Path, objective: str | None) -> Recording:
    rows = data["results"]
    if not isinstance(rows, list) or not rows:
        raise ValueError(f"{path}: a T4 results file needs a non-empty 'results' list")
    names: list[str] | None = None
    results: dict[tuple, float | str] = {}
    obj = objective
    for k, row in enumerate(rows):
        where = f"{path}: results[{k}]"
        if not isinstance(row, Mapping) or not isinstance(row.get("configuration"), Mapping):
            raise ValueError(f"{where} has no configuration mapping")
        config = row["configuration"]
        if names is None:
            names = list(config)
        elif set(config) != set(names):
            raise ValueError(f"{where} has parameters {sorted(config)}, the first result {sorted(names)}")
        if obj is None:
            objs = row.get("objectives") or ["time"]
            objs = [objs] if isinstance(objs, str) else objs  # "time" names one objective, as ["time"] does
            if not isinstance(objs, list) or not isinstance(objs[0], str):
                raise ValueError(f"{where}: objectives is {objs!r}; expected a list of measurement names such as "
                                 "['time']")
            obj = objs[0]
        key = tuple(_value(config[n], f"{where}: configuration {n!r}") for n in names)
        invalid = row.get("invalidity", "correct")
        if invalid != "correct":
            results[key] = f"{invalid} failure"
            continue
        measurements = row.get("measurements", [])
        if not isinstance(measurements, list):
            raise ValueError(f"{where}: measurements is {measurements!r}; expected a list of "
                             "{'name', 'value', 'unit'} records")
        found = [m.get("value") for m in measurements if isinstance(m, Mapping) and m.get("name") == obj]
        if not found:
            raise ValueError(f"{where} has no measurement named {obj!r}")
        results[key] = _objective_value(found[0], where)
    assert names is not None and obj is not None
    parameters = {n: sorted({k[j] for k in results}, key=_sort_key) for j, n in enumerate(names)}
    return Recording(path.name.split(".")[0], str(path), parameters, obj, results)


def _from_csv(text: str, path: Path, objective: str | None) -> Recording:
    numbered = [(n, ln) for n, ln in enumerate(text.splitlines(), start=1)
                if ln.strip() and not ln.lstrip().startswith("#")]
    line = [0]

    def lines() -> Iterator[str]:
        for n, ln in numbered:
            line[0] = n
            yield ln

    reader = csv.reader(lines())
    header = [h.strip() for h in next(reader)]
    where = f"{path} line {line[0]}"
    unnamed = [k + 1 for k, h in enumerate(header) if not h]
    if unnamed:
        raise ValueError(f"{where}: column {unnamed[0]} of the header {header} has no name; expected a name for "
                         "every column (the parameters', the objective's)")
    dupes = sorted({h for h in header if header.count(h) > 1})
    if dupes:
        raise ValueError(f"{where}: repeated column names {dupes}")
    obj = objective or next((c for c in ("time", "value") if c in header), None)
    if obj is None or obj not in header:
        raise ValueError(f"{where}: no objective column {objective or 'time or value'!r} among the header's "
                         f"columns {header[:12]}; name the measured column (--objective)")
    params = [c for c in header if c != obj and c not in _CSV_META and not c.startswith("task.")]
    names = [c[len("param."):] if c.startswith("param.") else c for c in params]
    results: dict[tuple, float | str] = {}
    for fields in reader:
        where = f"{path} line {line[0]}"
        if len(fields) != len(header):
            raise ValueError(f"{where}: {len(fields)} fields where the header has {len(header)}")
        row = dict(zip(header, fields))
        key = tuple(_value(_number_or_text(row[c], f"{where}: column {c!r}"), where) for c in params)
        status = (row.get("status") or "complete").strip().lower()
        if status == "failed":
            results[key] = (row.get("reason") or "failed").strip() or "failed"
            continue
        results[key] = _objective_value(_csv_number(row[obj], f"{where}: {obj}"), where)
    if not results:
        raise ValueError(f"{path}: no rows")
    parameters = {n: sorted({k[j] for k in results}, key=_sort_key) for j, n in enumerate(names)}
    return Recording(path.name.split(".")[0], str(path), parameters, obj, results)


#: the texts of an infinite number: a CSV measurement so written marks a failure, as a Kernel Tuner file's
_INFINITY_TEXTS = {"inf", "infinity", "+inf", "+infinity", "-inf", "-infinity"}


def _csv_number(cell: str, what: str) -> float:
    """A CSV cell's number (``inf`` and ``nan`` included); ValueError when it is none or does not fit a float."""
    text = cell.strip()
    try:
        v = float(text)
    except ValueError:
        raise ValueError(f"{what}={cell!r} is not a number") from None
    if math.isinf(v) and text.lower() not in _INFINITY_TEXTS:
        raise ValueError(f"{what}: {_too_big(text)}")
    return v


def _number_or_text(cell: str, where: str) -> Any:
    """A CSV parameter cell as a number, else its text; ValueError for an empty cell or a number that
    is not finite."""
    text = cell.strip()
    if not text:
        raise ValueError(f"{where} is empty; expected the parameter's value")
    try:
        f = float(text)
    except ValueError:
        return text
    if math.isinf(f) and text.lower() not in _INFINITY_TEXTS:
        raise ValueError(f"{where}: {_too_big(text)}")
    if not math.isfinite(f):
        raise ValueError(f"{where} holds {text!r}, not a finite number")
    return int(f) if f.is_integer() else f


def _sort_key(v: Any) -> tuple:
    return (0, v, "") if not isinstance(v, str) else (1, 0, v)


#: what read_recording reads, for its messages
_FORMATS = ("a Kernel Tuner cache file or a T4 results file (a JSON object), or a CSV file with a header line")


def read_recording(path: str | Path, objective: str | None = None, label: str | None = None) -> Recording:
    """Read one recorded campaign (format recognised from the content, see the module docstring).

    objective: the measured quantity to use (default: the file's own, else ``time``); label: the
    machine's name (default: the file's device name, else the file name). Raises ValueError naming
    the file (and entry or line) for anything it cannot read, numbers that do not fit a float
    included; FileNotFoundError for a missing file.
    """
    p = Path(path)
    file = read_input(p)  # the one read of an input file (gptask.sources.measurements reads with it too)
    if file.kind == HISTORY:
        raise ValueError(f"{p}: a gptask history (an SQLite database), not a recording; expected {_FORMATS}")
    return recording_from_bytes(file.raw, p, objective, label)


def recording_from_bytes(raw: bytes, name: str | Path, objective: str | None = None,
                         label: str | None = None) -> Recording:
    """:func:`read_recording` of a file already read: ``raw`` its bytes (gzip or not), ``name`` the
    file, for messages (and the default label)."""
    p = Path(name)
    return _recording(_content(io.BytesIO(raw), p), p, objective, label)


def _recording(data: bytes, p: Path, objective: str | None, label: str | None) -> Recording:
    """The recording of a file's (unpacked) bytes ``data``; ``p``: the file (:func:`read_recording`)."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{p}: not UTF-8 text (byte {exc.start}); is it a recording?") from None
    stripped = text.lstrip()
    if not stripped:
        raise ValueError(f"{p}: the file is empty; expected {_FORMATS}")
    if stripped.startswith(("{", "[")):
        try:
            doc = json.loads(text, parse_int=_json_int, parse_float=_json_float)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{p}: not valid JSON ({exc.msg}, line {exc.lineno})") from None
        except _Unfit as exc:
            raise ValueError(f"{p}: {exc}") from None
        except RecursionError:
            raise ValueError(f"{p}: JSON nested too deeply; expected {_FORMATS}") from None
        if not isinstance(doc, dict):
            raise ValueError(f"{p}: a JSON {type(doc).__name__}; expected {_FORMATS}")
        if "cache" in doc and "tune_params" in doc:
            rec = _from_kernel_tuner(doc, p, objective)
        elif "results" in doc:
            rec = _from_t4(doc, p, objective)
        else:
            raise ValueError(f"{p}: unknown JSON recording format (a Kernel Tuner cache file has 'cache' and "
                             f"'tune_params', a T4 results file has 'results'; this one has {sorted(doc)[:8]})")
    else:
        rec = _from_csv(text, p, objective)
    if not rec.results:
        raise ValueError(f"{p}: the recording holds no configuration")
    if label is not None:
        rec = Recording(str(label), rec.source, rec.parameters, rec.objective, rec.results)
    return rec


def read_restrictions(path: str | Path) -> list[str]:
    """The restrictions of a file, one per line (blank lines and ``#`` comments skipped);
    ValueError naming the file when it is not UTF-8 text."""
    p = Path(path)
    try:
        text = p.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{p}: not UTF-8 text (byte {exc.start}); expected restrictions, one per line") from None
    return [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]


# ---- as a problem ----------------------------------------------------------------------------------
def _geometric(values: Sequence[float]) -> bool:
    """Whether positive ``values`` (sorted, >= 3) are spaced more evenly on the log scale."""
    v = np.asarray(values, dtype=float)
    if len(v) < 3 or v[0] <= 0:
        return False
    lin, lg = np.diff(v), np.diff(np.log(v))
    return float(np.std(lg) / np.mean(lg)) < float(np.std(lin) / np.mean(lin))


def _dimension(name: str, values: list) -> Dimension:
    if any(isinstance(v, str) for v in values):  # texts, or numbers and texts ([1, 2, 4, "auto"]) as they are
        return Categorical(name, list(values))
    return Ordinal(name, values, log=_geometric(values))


class ReplayObjective:
    """Looks configurations up in the recordings, one per machine (picklable: it holds only data).

    ``objective(task, params)`` -> the recorded value of ``params`` on ``task[task_name]``; raises
    EvaluationFailed with the recorded reason, or "not recorded"."""

    def __init__(self, recordings: Mapping[str, Recording], task_name: str) -> None:
        self.recordings = dict(recordings)
        self.task_name = task_name

    def __call__(self, task: Mapping[str, Any], params: Mapping[str, Any]) -> float:
        rec = self.recordings[task[self.task_name]]
        got = rec.lookup(params)
        if got is None:
            raise EvaluationFailed(f"{NOT_RECORDED} in {rec.source}")
        if isinstance(got, str):
            raise EvaluationFailed(f"recorded failure: {got}")
        return float(got)


class _Recorded:
    """The candidates of a task: the configurations its recording ran (varying parameters only)."""

    def __init__(self, recordings: Mapping[str, Recording], task_name: str, varying: Sequence[str]) -> None:
        self.recordings, self.task_name, self.varying = dict(recordings), task_name, list(varying)

    def __call__(self, task: Mapping[str, Any]) -> list[dict[str, Any]]:
        return [{n: c[n] for n in self.varying} for c in self.recordings[task[self.task_name]].configurations()]


def replay_problem(recordings: Sequence[Recording], restrictions: Sequence[str] = (), task_name: str = "machine",
                   name: str | None = None, recorded_only: bool = True) -> Problem:
    """One :class:`Problem` over the machines of ``recordings`` (one task per recording).

    restrictions: the campaign's restrictions as its tuning script writes them (texts over the
    parameter names; they may read parameters that have a single value). recorded_only: the tuner
    proposes only configurations the machine's recording ran (``candidates``); False: any
    configuration of the space that meets the restrictions (those not recorded then fail with
    "not recorded"). Raises ValueError when the recordings disagree on parameters or objective,
    or share a label.
    """
    recs = list(recordings)
    if not recs:
        raise ValueError("replay_problem needs at least one recording")
    first = recs[0]
    for r in recs[1:]:
        if r.names != first.names:
            raise ValueError(f"recordings {first.source} and {r.source} have different parameters: "
                             f"{first.names} against {r.names}")
        if r.objective != first.objective:
            raise ValueError(f"recordings {first.source} and {r.source} measure different objectives: "
                             f"{first.objective!r} against {r.objective!r}")
    labels = [r.label for r in recs]
    if len(set(labels)) != len(labels):
        raise ValueError(f"two recordings share a machine label: {labels}; give each its own label")
    values = {n: sorted({v for r in recs for v in r.parameters[n]}, key=_sort_key) for n in first.names}
    constants = {n: v[0] for n, v in values.items() if len(v) == 1}
    varying = [n for n in first.names if n not in constants]
    if not varying:
        raise ValueError(f"the recordings {labels} have no parameter with more than one value")
    if task_name in first.names:
        raise ValueError(f"task_name {task_name!r} is also a parameter name; choose another")
    params = Space([_dimension(n, values[n]) for n in varying])
    tasks = Space([Categorical(task_name, labels)])
    by_label = {r.label: r for r in recs}
    return Problem(tasks, params, ReplayObjective(by_label, task_name), constraints=list(restrictions),
                   constants=constants, name=name or f"replay:{first.objective}",
                   candidates=_Recorded(by_label, task_name, varying) if recorded_only else None)


def recording_rows(recording: Recording, task: Mapping[str, Any], value: str = "value",
                   status: str = "status") -> list[dict[str, Any]]:
    """The recording as rows for :func:`gptask.import_runs` / :func:`gptask.fit` (``status``
    column: complete or failed), each with the ``task`` values added."""
    out = []
    for key, v in recording.results.items():
        row = {**task, **dict(zip(recording.parameters, key))}
        if isinstance(v, str):
            row.update({value: None, status: "failed"})
        else:
            row.update({value: v, status: "complete"})
        out.append(row)
    return out


# ---- replaying a campaign ------------------------------------------------------------------------
@dataclass(frozen=True)
class ReplayRun:
    """One tuning run of a replay: budget (runs per machine), seed, alone (each machine tuned on its
    own), and per machine the fraction of the optimum reached after each evaluation
    (``fractions[i][k]``: optimum / best value after k + 1 runs; 0 before the first success)."""

    budget: int
    seed: int
    alone: bool
    fractions: list[list[float]]

    def final(self) -> list[float]:
        """Per machine, the fraction of the optimum at the end of the run."""
        return [f[-1] if f else 0.0 for f in self.fractions]


@dataclass(frozen=True)
class ReplayReport:
    """Every run of :func:`replay`: labels (the machines), optima (their best recorded values),
    runs (:class:`ReplayRun`)."""

    labels: list[str]
    optima: list[float]
    runs: list[ReplayRun]

    def summary(self) -> list[dict[str, Any]]:
        """Per (budget, alone): the mean fraction of the optimum over machines and seeds, the worst
        seed's mean, and each machine's mean over seeds."""
        out = []
        for budget, alone in sorted({(r.budget, r.alone) for r in self.runs}):
            runs = [r for r in self.runs if r.budget == budget and r.alone == alone]
            per_seed = np.array([np.mean(r.final()) for r in runs])
            per_machine = np.mean([r.final() for r in runs], axis=0)
            made = np.max([[len(f) for f in r.fractions] for r in runs], axis=0)
            out.append({"budget": budget, "alone": alone, "seeds": len(runs), "mean": float(per_seed.mean()),
                        "worst_seed": float(per_seed.min()),
                        "per_machine": dict(zip(self.labels, per_machine.tolist())),
                        "runs_per_machine": dict(zip(self.labels, (int(n) for n in made)))})
        return out

    def text(self) -> str:
        """The summary as an aligned table (what ``gptask replay`` prints)."""
        short = _column_labels(self.labels)
        w = max(6, *(len(s) for s in short))
        head = (f"{'runs':>5} {'tuning':<8} {'seeds':>5} {'mean':>6} {'worst':>6}  "
                + "  ".join(f"{s:>{w}}" for s in short))
        rows = [head]
        ended: dict[str, tuple[int, list[int]]] = {}
        for s in self.summary():
            rows.append(f"{s['budget']:>5} {'alone' if s['alone'] else 'joint':<8} {s['seeds']:>5} {s['mean']:>6.3f} "
                        f"{s['worst_seed']:>6.3f}  " + "  ".join(f"{v:>{w}.3f}" for v in s["per_machine"].values()))
            for label, n in s["runs_per_machine"].items():
                if n < s["budget"]:
                    budgets = ended.setdefault(label, (n, []))[1]
                    budgets += [] if s["budget"] in budgets else [s["budget"]]
        notes = [f"{label}: {n} runs, all its recording allows (budget {', '.join(map(str, b))}); its runs end there"
                 for label, (n, b) in ended.items()]
        return "\n".join(["fraction of the optimum reached (optimum / best found), per machine", *rows, *notes])

    def plot(self, path: str | Path) -> Path:
        """Mean fraction of the optimum against runs per machine, one line per (budget, tuning),
        the worst seed shaded; written to ``path`` (any matplotlib format)."""
        import matplotlib

        matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(7, 4.2))
        for budget, alone in sorted({(r.budget, r.alone) for r in self.runs}):
            runs = [r for r in self.runs if r.budget == budget and r.alone == alone]
            # (seeds, budget): a machine whose recording ended early keeps its last fraction
            curves = np.array([np.mean([_padded(f, budget) for f in r.fractions], axis=0) for r in runs])
            x = np.arange(1, curves.shape[1] + 1)
            line, = ax.plot(x, curves.mean(axis=0), label=f"{budget} runs, {'alone' if alone else 'joint'}")
            ax.fill_between(x, curves.min(axis=0), curves.mean(axis=0), color=line.get_color(), alpha=0.15)
        ax.set_xlabel("runs per machine")
        ax.set_ylabel("fraction of the optimum (mean over machines)")
        ax.set_ylim(0.0, 1.02)
        ax.xaxis.get_major_locator().set_params(integer=True)
        ax.grid(alpha=0.3)
        ax.legend(loc="lower right")
        fig.tight_layout()
        out = Path(path)
        fig.savefig(out, dpi=110)
        plt.close(fig)
        return out


def _padded(fractions: Sequence[float], n: int) -> list[float]:
    """A machine's fractions of the optimum over ``n`` runs: a recording with fewer configurations
    than the budget ended early and keeps its last value (0 when it made no run)."""
    return list(fractions) + [fractions[-1] if fractions else 0.0] * (n - len(fractions))


#: the widest machine column of :meth:`ReplayReport.text` before a label is cut in the middle
LABEL_WIDTH = 24


def _column_labels(labels: Sequence[str], width: int = LABEL_WIDTH) -> list[str]:
    """The labels as table headings of at most ``width`` characters, cut in the middle (``~``)
    keeping both ends (``AMD Radeon PRO W6600`` and ``... W7800`` differ at the end); the labels
    in full when cutting would make two alike."""
    half = (width - 1) // 2
    short = [s if len(s) <= width else s[:half] + "~" + s[len(s) - (width - 1 - half):] for s in labels]
    return short if len(set(short)) == len(short) else list(labels)


def _fractions(values: Sequence[float | None], optimum: float) -> list[float]:
    out, best = [], None
    for v in values:
        if v is not None and (best is None or v < best):
            best = v
        out.append(0.0 if best is None or best <= 0 else min(1.0, optimum / best))
    return out


def replay(recordings: Sequence[Recording], restrictions: Sequence[str] = (), budgets: Sequence[int] = (20, 40),
           seeds: Sequence[int] = range(5), alone: bool = False, recorded_only: bool = True,
           **tune_options: Any) -> ReplayReport:
    """Tune the replayed campaign (:func:`replay_problem`) for every budget and seed and report the
    fraction of each machine's optimum reached against runs. alone: also tune each machine on its
    own (to see what the joint model gains). tune_options: passed to :func:`gptask.tune`
    (``n_initial``, ``n_latent``, ...; ``progress`` is off). The objective must be minimised and
    positive (a time): the fraction is optimum / best found."""
    from ..tuning import tune

    problem = replay_problem(recordings, restrictions, recorded_only=recorded_only)
    labels = [r.label for r in recordings]
    optima = [r.best()[1] for r in recordings]
    if min(optima) <= 0:
        raise ValueError("replay reports the fraction of the optimum of a positive objective (a time); "
                         f"the recordings' best values are {optima}")
    tasks = [{"machine": label} for label in labels]
    runs = []
    for budget in budgets:
        for seed in seeds:
            for one in ([False, True] if alone else [False]):
                groups = [[t] for t in tasks] if one else [tasks]
                fractions: list[list[float]] = []
                for group in groups:
                    res = tune(problem, tasks=group, budget=int(budget), seed=int(seed), progress=False, **tune_options)
                    for i, task in enumerate(group):
                        trials = sorted((t for t in res.history if t.task_index == i), key=lambda t: t.id)
                        values = [t.value if t.ok else None for t in trials]
                        fractions.append(_fractions(values, optima[labels.index(task["machine"])]))
                runs.append(ReplayRun(int(budget), int(seed), one, fractions))
                log.info("replay: budget %d, seed %d, %s: mean fraction of the optimum %.3f", budget, seed,
                         "alone" if one else "joint", float(np.mean(runs[-1].final())))
    return ReplayReport(labels, optima, runs)
