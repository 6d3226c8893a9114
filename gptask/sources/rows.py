"""Existing measurements as validated runs: the rows of a CSV file or a list of dicts.

Every row names a task (one column per task dimension of the problem), a configuration (one column
per parameter) and the measured value (the ``value`` column, e.g. ``"time"``). The rules:

* **Columns.** Every task and parameter name and the value column must be present; a task column
  may also be named ``task.<name>`` and a parameter column ``param.<name>``, as ``gptask export``
  writes them, so an exported history reads back as it is (its ``status`` column is then used
  unless another is named, and its PENDING rows, runs that never finished, are left out). A column named
  like one of the problem's constants (``cores``, ``coll``, ...) must hold that constant on every
  row: data measured for another machine or setting is refused. Other columns are ignored (the log
  names them).
* **CSV files.** UTF-8 text (a byte order mark is skipped; another encoding is refused naming the
  line). Lines starting with ``#`` are comments; the first other non-blank line is the
  header. Text is converted per dimension: integers (``64`` or ``64.0``), reals, and categorical
  choices by their text (``ring``, ``1``, ``true``).
* **Validation.** Each row is checked against the task space, the parameter space and the
  constraints. Bad rows are reported with their place (``runs.csv line 17``, or ``data[16]`` for a
  list) and the reason, all together in one :class:`DataError`; nothing is imported then. With
  ``skip_invalid=True`` they are left out and listed in a warning instead, never silently.
* **Status.** An optional status column holds ``complete``, ``failed`` or ``censored`` (a run
  stopped early: its value is a lower bound). A failed row needs no value; any other row needs a
  finite number.
* **Machines.** ``machine.<key>`` columns (``machine.cpu``, ``machine.cores``, ``machine.label``, ...,
  as ``gptask export`` writes them) give the machine record each row was measured on
  (:func:`gptask.data.provenance.unflatten`); rows without them have none. Rows of one configuration
  measured on different machines are refused: they are not repeats of one run.
* **Size.** At most :data:`gptask.model.numerics.defaults.IMPORT_MAX_ROWS` rows (a file is counted before any
  row is parsed) forming at most :data:`~gptask.model.numerics.defaults.EXACT_FIT_MAX_POINTS` configurations:
  more is refused with the counts and what to do, before anything big is built.
* **Repeats.** Rows of the same task and configuration are one run (:class:`Run`) whose
  ``samples`` are their values in row order and whose value is their ``aggregate`` (``min`` by
  default, as ``gt.tune`` aggregates repeated run times). Complete rows take precedence over
  censored ones, and those over failed ones.
* **Named outputs.** For a problem whose objective returns several outputs
  (``Problem(objectives=...)``, :mod:`gptask.problem.objectives`) every output has its column, named like
  the output or ``out.<name>`` as ``gptask export`` writes it (the ``value`` argument is then not
  used); a complete row needs a finite number in each, and repeats are aggregated output by output.
  The run's value is its primary objective's.
"""

from __future__ import annotations

import csv
import io
import json
import logging
import math
import numbers
import os
import statistics
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core.input_files import CONTENT, HISTORY, InputFile, read_input
from ..model.numerics import defaults
from ..problem.definition import Problem
from ..data.provenance import COLUMN_PREFIX, unflatten
from ..data.storage.export import csv_cell_text
from ..space.dimensions import Dimension, choice_text
from ..data.trials import Status, point_key

if TYPE_CHECKING:
    from .replay import Recording

__all__ = ["DataError", "FileContent", "read_file", "not_rows", "Row", "Run", "read_rows", "group_runs", "check_problem", "check_row_count",
           "check_point_count",
           "AGGREGATES", "MAX_REPORTED"]

log = logging.getLogger(__name__)

#: how repeated rows of one configuration become the run's value
AGGREGATES = {"min": min, "median": statistics.median, "mean": statistics.fmean}
#: bad rows listed one by one in an error message (the rest are counted)
MAX_REPORTED = 20


#: one row as (task, params, value or None, status, named outputs or None)
_Parsed = tuple[dict, dict, "float | None", Status, "dict | None"]


class DataError(ValueError):
    """Measurements that cannot be imported: missing columns, or rows that are not valid points of
    the problem (the message lists each bad row with its line)."""


@dataclass(frozen=True)
class Row:
    """One validated row. where: ``"runs.csv line 17"`` or ``"data[16]"``; line: the file line (CSV)
    or the list index; task, params: validated dicts; value: the measurement (None when failed)."""

    where: str
    line: int
    task: dict
    params: dict
    value: float | None
    status: Status
    machine: dict | None = None
    values: dict | None = None


@dataclass(frozen=True)
class Run:
    """The rows of one task and configuration. status: COMPLETE when any row is complete, else
    CENSORED when any is censored, else FAILED; value: the aggregate of those rows' values (None
    when failed); samples: those values in row order; lines: the lines of every row of the run."""

    task: dict
    params: dict
    status: Status
    value: float | None
    samples: tuple[float, ...]
    lines: tuple[int, ...]
    machine: dict | None = None
    values: dict | None = None


def _convert(dim: Dimension, raw: Any) -> Any:
    """A user value of ``dim`` from a cell (text from a CSV file, or a value from a dict)."""
    if isinstance(raw, str):
        text = raw.strip()
        if not text:
            raise ValueError(f"{dim.name} is empty")
        try:
            return dim.from_text(text)
        except ValueError:
            if csv_cell_text(text) == text:
                raise
            return dim.from_text(csv_cell_text(text))  # a text gptask export guarded against spreadsheets
    return dim.validate(raw)


def _number(raw: Any, column: str) -> float | None:
    """A finite float from a cell of ``column``, None for an empty one; ValueError otherwise."""
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return None
    if isinstance(raw, str):
        try:
            v = float(raw.strip())
        except ValueError:
            raise ValueError(f"value column {column!r} holds {raw!r}, not a number") from None
    elif isinstance(raw, numbers.Real) and not isinstance(raw, bool):
        v = float(raw)
    else:
        raise ValueError(f"value column {column!r} holds {raw!r}, not a number")
    if not math.isfinite(v):
        raise ValueError(f"value column {column!r} holds {v}, not a finite number (mark failed runs in a status "
                         "column)")
    return v


def _status(raw: Any, column: str) -> Status:
    text = str(raw).strip().lower() if raw is not None else ""
    try:
        st = Status.parse(text)
    except ValueError:
        st = None
    if st is None or not st.finished:
        raise ValueError(f"status column {column!r} holds {raw!r}; expected complete, failed or censored")
    return st


def _same_constant(expected: Any, raw: Any) -> bool:
    if isinstance(raw, str):
        text = raw.strip()
        if choice_text(expected) == text:
            return True
        try:
            return not isinstance(expected, (bool, str)) and float(text) == float(expected)
        except ValueError:
            return False
    return raw == expected


@dataclass(frozen=True)
class FileContent:
    """A file read once: its name (for messages) and its bytes."""

    name: str
    raw: bytes


def read_file(path: str | os.PathLike) -> FileContent:
    """The content of the data file ``path``, read once (:func:`gptask.core.input_files.read_input`);
    FileNotFoundError when it is missing, DataError when it is a history or a model file."""
    if not Path(path).is_file():
        raise FileNotFoundError(f"no data file at {Path(path)}")
    file = read_input(path)
    if file.kind != CONTENT:
        raise not_rows(file)
    return FileContent(file.name, file.raw)


def not_rows(file: InputFile) -> DataError:
    """The error of a history or model file given where rows are read."""
    return DataError(f"{file.name} is a gptask {'history' if file.kind == HISTORY else 'model file'}, not rows to "
                     "import (a CSV file, a list of dicts or a recording); give it to gt.tune(..., sources=[...])")


def _read_csv(content: FileContent) -> tuple[list[str], list[tuple[int, dict[str, str] | str]]]:
    """The header and ``(line, {column: text})`` pairs of a CSV file with ``#`` comment lines
    (``(line, message)`` for a line with another number of fields than the header)."""
    try:
        text = content.raw.decode("utf-8-sig")  # -sig: a byte order mark (Excel) is not text
    except UnicodeDecodeError:
        raise DataError(_undecodable(content)) from None
    return _read_csv_text(text, content.name)


def _undecodable(content: FileContent) -> str:
    """Where the file stops being UTF-8 text: its line, column and byte."""
    path = content.name
    for number, line in enumerate(io.BytesIO(content.raw), start=1):
        try:
            line.decode("utf-8-sig" if number == 1 else "utf-8")
        except UnicodeDecodeError as exc:
            return (f"{path} line {number}: not UTF-8 text (byte 0x{line[exc.start]:02x} at column {exc.start + 1}); "
                    "save the file as UTF-8")
    return f"{path}: not UTF-8 text; save the file as UTF-8"


def _read_csv_text(text: str, path: str) -> tuple[list[str], list[tuple[int, dict[str, str] | str]]]:
    current = [0]
    with io.StringIO(text, newline="") as fh:
        def lines() -> Iterator[str]:
            for number, line in enumerate(fh, start=1):
                if line.lstrip().startswith("#") or not line.strip():
                    continue
                current[0] = number
                yield line

        reader = csv.reader(lines())
        try:
            header = [h.strip() for h in next(reader)]
        except StopIteration:
            raise DataError(f"{path}: no header line (the file is empty or only comments)") from None
        dupes = sorted({h for h in header if header.count(h) > 1})
        if dupes:
            raise DataError(f"{path} line {current[0]}: repeated column names {dupes}")
        out: list[tuple[int, dict[str, str] | str]] = []
        for fields in reader:
            if len(fields) != len(header):
                out.append((current[0], f"{len(fields)} fields where the header has {len(header)}"))
            else:
                out.append((current[0], dict(zip(header, fields))))
    return header, out


def _value_columns(problem: Problem, value: str) -> list[str]:
    """The columns holding measurements: ``value``, or every named output of the problem."""
    return list(problem.outputs.names) if problem.outputs is not None else [value]


def _data_lines(raw: bytes) -> int:
    """How many rows a CSV file (its bytes) holds at most (its lines that are neither blank nor
    comments, less the header; a quoted cell spanning lines counts more than once), counted without
    parsing them."""
    n = 0
    for line in io.BytesIO(raw):
        text = line.lstrip()
        if text and not text.startswith(b"#"):
            n += 1
    return max(0, n - 1)


def check_row_count(n_rows: int, where: str) -> None:
    """DataError when ``n_rows`` rows are more than gptask reads (:data:`gptask.model.numerics.defaults.IMPORT_MAX_ROWS`)."""
    limit = defaults.IMPORT_MAX_ROWS
    if n_rows > limit:
        raise DataError(f"{where} holds {n_rows:,} rows; gptask reads at most {limit:,} (the exact model fits at most "
                        f"{defaults.EXACT_FIT_MAX_POINTS:,} configurations, its memory grows as N^2 and its time as "
                        "N^3): keep one row per configuration (e.g. the median of its repeats) or a sample of the "
                        "configurations, and import that")


def check_point_count(n_points: int, where: str) -> None:
    """DataError when ``n_points`` configurations are more than the exact model fits
    (:data:`gptask.model.numerics.defaults.EXACT_FIT_MAX_POINTS`)."""
    limit = defaults.EXACT_FIT_MAX_POINTS
    if n_points > limit:
        raise DataError(f"{where} holds {n_points:,} configurations (rows grouped by task and configuration); the "
                        f"exact model fits at most {limit:,} (its memory grows as N^2 and its time as N^3: one "
                        f"likelihood evaluation at 5,000 points takes about 14 s on 2 cores): import a sample of "
                        "the configurations, or raise gptask.model.numerics.defaults.EXACT_FIT_MAX_POINTS if you can wait")


def _check_columns(problem: Problem, columns: Sequence[str], value: str, status: str | None, where: str) -> None:
    needed = [*problem.task_space.names, *problem.param_space.names, *_value_columns(problem, value)] + (
        [status] if status else [])
    missing = [c for c in needed if c not in columns]
    if missing:
        values = (f"a column per output {list(problem.outputs.names)}" if problem.outputs is not None
                  else f"the value column {value!r}")
        raise DataError(f"{where}: missing columns {missing}; the problem {problem.name!r} needs its task names "
                        f"{problem.task_space.names}, its parameter names {problem.param_space.names} and "
                        f"{values}" + (f" and the status column {status!r}" if status else ""))
    extra = [c for c in columns if c not in needed and c not in problem.constants and not c.startswith("machine.")]
    if extra:
        log.info("%s: columns %s are not used", where, extra)


def _check_constraints(problem: Problem, task: dict, params: dict) -> None:
    """ValueError naming the constraints that ``(task, params)`` violates, if any."""
    bad = problem.violated(task, params)
    if bad:
        raise ValueError(f"{task} {params} violates {', '.join(problem.constraint_names(bad))}")


def _row(problem: Problem, cells: Mapping[str, Any], value: str, status: str | None,
         check_constraints: bool = True) -> _Parsed:
    """(task, params, value, status, values) of one row; ValueError saying what is wrong.
    check_constraints=False leaves the constraints to the caller (:func:`read_rows` judges every
    row's at once)."""
    missing = [c for c in [*problem.task_space.names, *problem.param_space.names, *_value_columns(problem, value)]
               if c not in cells]
    if missing:
        raise ValueError(f"missing {missing}")
    problems: list[str] = []
    task, params = {}, {}
    for space, out in ((problem.task_space, task), (problem.param_space, params)):
        for dim in space.dimensions:
            try:
                out[dim.name] = _convert(dim, cells[dim.name])
            except (ValueError, TypeError) as exc:
                problems.append(str(exc))
    for name, const in problem.constants.items():
        if name in cells and not _same_constant(const, cells[name]):
            problems.append(f"column {name!r} holds {cells[name]!r} but the problem's constant {name} is {const!r}")
    st = _status(cells[status], status) if status else Status.COMPLETE
    numbers: dict[str, float | None] = {}
    for column in _value_columns(problem, value):
        numbers[column] = None
        try:
            numbers[column] = _number(cells[column], column)
        except ValueError as exc:
            if st is not Status.FAILED:
                problems.append(str(exc))
        if numbers[column] is None and st is not Status.FAILED and not problems:
            problems.append(f"value column {column!r} is empty (mark failed runs in a status column)")
    if problems:
        raise ValueError("; ".join(problems))
    if check_constraints:
        _check_constraints(problem, task, params)
    if st is Status.FAILED:
        return task, params, None, st, None
    if problem.outputs is None:
        return task, params, numbers[value], st, None
    return task, params, numbers[problem.outputs.primary], st, dict(numbers)


#: the status column of a history exported by ``gptask export`` (read when no other is named)
EXPORT_STATUS = "status"
#: the prefixes of ``gptask export``'s task, parameter and output columns
TASK_PREFIX, PARAM_PREFIX, OUTPUT_PREFIX = "task.", "param.", "out."


def _prefixed_columns(problem: Problem, header: Sequence[str]) -> dict[str, str]:
    """``{"task.t": "t", "param.x": "x"}`` for the columns of ``header`` named like an export's
    (``task.<name>``, ``param.<name>``) whose plain name the problem needs and the header lacks."""
    out = {}
    outputs = list(problem.outputs.names) if problem.outputs is not None else []
    for prefix, names in ((TASK_PREFIX, problem.task_space.names), (PARAM_PREFIX, problem.param_space.names),
                          (OUTPUT_PREFIX, outputs)):
        for name in names:
            if name not in header and prefix + name in header:
                out[prefix + name] = name
    return out


def _is_recording(path: Path) -> bool:
    """Whether ``path`` is a recorded campaign in a JSON format (Kernel Tuner cache, T4), by name."""
    return path.name.endswith((".json", ".json.gz"))


def _recording_rows(problem: Problem, rec: Recording, path: str,
                    status: str | None) -> tuple[list[dict[str, Any]], str, str]:
    """A Kernel Tuner cache or T4 file as rows (with a status column): one machine's campaign, the
    task being the problem's one categorical task dimension set to the recording's machine label,
    and each row's machine record (``machine.*`` columns) that label, as the machine's name and its
    accelerator: a history then knows which GPU measured what, and refuses a second GPU's file
    unless mixing machines was asked for (:func:`gptask.data.provenance.check_history`)."""
    from .replay import recording_rows
    from ..space.dimensions import Categorical

    dims = problem.task_space.dimensions
    if len(dims) != 1 or not isinstance(dims[0], Categorical) or rec.label not in dims[0].choices:
        raise DataError(f"{path} is one machine's recorded campaign ({rec.label!r}): the problem's task space must "
                        f"be one categorical whose choices include that label (gptask.sources.replay.replay_problem makes "
                        f"one), or convert it with gptask.sources.replay.recording_rows(read_recording(path), task={{...}})")
    col = status or "status"
    machine = {f"{COLUMN_PREFIX}label": rec.label, f"{COLUMN_PREFIX}accelerators": [rec.label]}
    rows = [{**row, **machine} for row in recording_rows(rec, {dims[0].name: rec.label}, value="value", status=col)]
    return rows, "value", col


def check_problem(problem: Any) -> Problem:
    """``problem`` itself when it is a :class:`Problem`; TypeError otherwise."""
    if not isinstance(problem, Problem):
        raise TypeError(f"problem must be a gptask.Problem, got {type(problem).__name__}")
    return problem


def read_rows(problem: Problem, data: str | os.PathLike | Sequence[Mapping[str, Any]], value: str = "value",
              status: str | None = None, skip_invalid: bool = False) -> list[Row]:
    """The validated rows of ``data`` (module docstring): a CSV path, a list of dicts, or one
    machine's recorded campaign (a Kernel Tuner cache or T4 file, ``.json``/``.json.gz``; its
    failed configurations become failed runs; the problem's task is that machine, see
    :mod:`gptask.sources.replay`).

    value: the column holding the measurement; status: the column holding each row's status (None:
    every row is complete). Raises :class:`DataError` listing every bad row (or, with
    ``skip_invalid``, logs them as a warning and leaves them out), TypeError for data of another
    kind, FileNotFoundError for a missing file.
    """
    check_problem(problem)
    for name, col in (("value", value), ("status", status)):
        if col is not None and (not isinstance(col, str) or not col):
            raise TypeError(f"{name} must be a column name, got {col!r}")
    objective = None if value == "value" else value
    if isinstance(data, (str, os.PathLike)):
        data = read_file(data)
    if isinstance(data, FileContent) and _is_recording(Path(data.name)):
        from .replay import recording_from_bytes

        rec = recording_from_bytes(data.raw, data.name, objective=objective)
        data, value, status = _recording_rows(problem, rec, data.name, status)
    if isinstance(data, FileContent):
        path = data.name
        check_row_count(_data_lines(data.raw), path)
        header, cells = _read_csv(data)
        cells = [(n, c if isinstance(c, str) else {k: csv_cell_text(v) if k.startswith(COLUMN_PREFIX) and isinstance(v, str)
                                                   else v for k, v in c.items()}) for n, c in cells]  # gptask export's guard
        renames = _prefixed_columns(problem, header)
        if renames:
            header = [renames.get(h, h) for h in header]
            cells = [(n, c if isinstance(c, str) else {renames.get(k, k): v for k, v in c.items()}) for n, c in cells]
            if status is None and EXPORT_STATUS in header:
                status = EXPORT_STATUS  # an exported history: its failed runs are marked there
            if status == EXPORT_STATUS:
                pending = [n for n, c in cells if not isinstance(c, str)
                           and str(c.get(status, "")).strip().lower() == Status.PENDING.value]
                if pending:
                    log.info("%s: %d pending row(s) left out (runs that never finished): lines %s", path,
                             len(pending), pending[:MAX_REPORTED])
                skip = set(pending)
                cells = [(n, c) for n, c in cells if n not in skip]
        _check_columns(problem, header, value, status, path)
        source = [(f"{path} line {n}", n, c) for n, c in cells]
    elif isinstance(data, Sequence) and not isinstance(data, (bytes, bytearray)):
        check_row_count(len(data), "data")
        for k, item in enumerate(data):
            if not isinstance(item, Mapping):
                raise TypeError(f"data[{k}] must be a dict of task, parameter and value columns, got {item!r}")
        if data:
            _check_columns(problem, sorted({c for item in data for c in item}), value, status, "data")
        source = [(f"data[{k}]", k, item) for k, item in enumerate(data)]
    else:
        raise TypeError(f"data must be a CSV file path or a list of dicts, got {type(data).__name__}")
    parsed: list[tuple[int, Row]] = []
    found: list[tuple[int, str]] = []  # (place in the source, message)
    records: dict[tuple, dict] = {}  # the rows of one machine repeat its record: checked once
    for k, (where, line, cells) in enumerate(source):
        try:
            if isinstance(cells, str):
                raise ValueError(cells)
            task, params, v, st, values = _row(problem, cells, value, status, check_constraints=False)
            machine = unflatten(cells, where, records)
        except ValueError as exc:
            found.append((k, f"{where}: {exc}"))
            continue
        parsed.append((k, Row(where, line, task, params, v, st, machine=machine, values=values)))
    # the constraints of every parsed row judged at once (Problem.infeasible_rows), the messages of
    # the rows they refuse made one by one
    refused = problem.infeasible_rows([r.task for _, r in parsed], [r.params for _, r in parsed]) if parsed else []
    rows: list[Row] = []
    for (k, r), out in zip(parsed, refused):
        if out:
            try:
                _check_constraints(problem, r.task, r.params)
            except ValueError as exc:
                found.append((k, f"{r.where}: {exc}"))
                continue
        rows.append(r)
    bad = [message for _, message in sorted(found)]
    if bad:
        shown = "\n  ".join(bad[:MAX_REPORTED])
        more = f"\n  ... and {len(bad) - MAX_REPORTED} more" if len(bad) > MAX_REPORTED else ""
        if not skip_invalid:
            raise DataError(f"{len(bad)} bad row(s), nothing imported (skip_invalid=True, or --skip-invalid on the "
                            "command line, leaves them out):"
                            f"\n  {shown}{more}")
        log.warning("%d bad row(s) left out:\n  %s%s", len(bad), shown, more)
    if not rows:
        raise DataError("no valid rows to import" + (f" ({len(bad)} bad)" if bad else ""))
    return rows


def group_runs(rows: Sequence[Row], aggregate: str = "min") -> list[Run]:
    """The rows grouped by task and configuration, in order of first appearance (module docstring)."""
    if aggregate not in AGGREGATES:
        raise ValueError(f"aggregate must be one of {sorted(AGGREGATES)}, got {aggregate!r}")
    groups: dict[tuple, list[Row]] = {}
    for r in rows:
        groups.setdefault((point_key(r.task), point_key(r.params)), []).append(r)
    out = []
    for members in groups.values():
        first = members[0]
        for st in (Status.COMPLETE, Status.CENSORED, Status.FAILED):
            used = [r for r in members if r.status is st]
            if used:
                break
        samples = tuple(r.value for r in used if r.value is not None)
        value = (float(samples[0]) if len(samples) == 1 else float(AGGREGATES[aggregate](samples))) if samples else None
        machines = {json.dumps(r.machine, sort_keys=True) for r in members} if len(members) > 1 else ()
        if len(machines) > 1:
            raise DataError(f"{first.where} and the other rows of task {first.task} {first.params} were measured on "
                            f"different machines ({len(machines)} records): they are not repeats of one run; "
                            "import each machine's rows into its own history")
        named = [r.values for r in used if r.values]
        values = {k: float(AGGREGATES[aggregate]([v[k] for v in named])) for k in named[0]} if named else None
        if values is not None and st is not Status.FAILED:  # the run's value: its primary output's aggregate
            value = values[next(iter(values))]
        out.append(Run(first.task, first.params, st, value, samples, tuple(r.line for r in members),
                       machine=first.machine, values=values))
    return out
