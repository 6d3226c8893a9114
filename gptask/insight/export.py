"""Selection tables written for programs: JSON, CSV, and a C header with a lookup function.

The C header (:func:`to_c_header`) holds the grid as a static array of entries (the task values,
the parameters, the predicted value and std, whether the entry is a fallback) and a function
``PREFIX_lookup(const double *task, int *status)`` returning the entry of the grid point nearest to
``task`` by the rule of :meth:`gptask.insight.selection.SelectionTable.lookup`: task coordinates (the
log for a log-scale task dimension) normalised over the grid's range, squared Euclidean distance,
the first entry on ties; ``*status`` is PREFIX_INSIDE, PREFIX_FALLBACK (the entry is a fallback: its
grid point lies outside the model's task range) or PREFIX_OUTSIDE (the query lies outside the
grid's range). Only numeric task dimensions can be looked up that way (a categorical task dimension
is refused with an error naming it). Parameters become ``int`` (integers, booleans), ``double``
(reals) or ``const char *`` (categorical and text values). The header includes only ``<math.h>``
and needs ``-lm``.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from typing import Any

from ..space import Boolean, Integer, Ordinal, Real
from .selection import SelectionTable, is_log_scale, is_numeric

__all__ = ["to_json", "to_csv", "to_c_header", "FORMATS", "DEFAULT_PREFIX"]

#: what ``gptask export-table --format`` writes
FORMATS = ("json", "csv", "c-header")
#: the prefix of every name the C header defines
DEFAULT_PREFIX = "gptask_table"
_C_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _meta(table: SelectionTable, source: str) -> dict[str, Any]:
    return {"problem": table.problem, "source": source, "unit": table.unit, "grid": table.axes,
            "tuned_range": {k: list(v) for k, v in table.tuned_range.items()}, "fallback": table.fallback,
            "constraints_checked": table.constraints_checked, "counts": table.counts(),
            "value": "predicted median of one launch; value_std its std (noise included); lower95/upper95 the "
                     "central 95 % interval; null for a fallback (nothing is extrapolated)"}


def to_json(table: SelectionTable, source: str = "") -> str:
    """``{"format": "gptask.selection_table", ..., "entries": [row, ...]}`` (one line per entry)."""
    head = {"format": "gptask.selection_table", "version": 1, **_meta(table, source)}
    rows = ",\n  ".join(json.dumps(r, default=str) for r in table.rows())
    return json.dumps(head, default=str)[:-1] + ',\n "entries": [\n  ' + rows + "\n ]}\n"


def to_csv(table: SelectionTable, source: str = "") -> str:
    """One row per grid point: task values, parameters, value, value_std, lower95, upper95, source,
    note (empty cells for a fallback's values)."""
    out = io.StringIO()
    rows = table.rows()
    writer = csv.DictWriter(out, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    for r in rows:
        writer.writerow({k: "" if v is None else v for k, v in r.items()})
    return out.getvalue()


def _c_type(dim: Any) -> str:
    if isinstance(dim, (Integer, Boolean)):
        return "int"
    if isinstance(dim, Real):
        return "double"
    if isinstance(dim, Ordinal) and dim.numeric:
        return "int" if all(isinstance(v, int) for v in dim.values()) else "double"
    return "const char *"


def _c_value(ctype: str, v: Any) -> str:
    if ctype == "int":
        return str(int(v))
    if ctype == "double":
        return repr(float(v))
    return json.dumps(str(v))  # a C string literal: JSON escapes are valid C escapes for ASCII text


def _c_double(v: float | None) -> str:
    return "NAN" if v is None or not math.isfinite(v) else repr(float(v))


def _comment(text: str) -> str:
    return text.replace("*/", "* /")


def to_c_header(table: SelectionTable, source: str = "", prefix: str = DEFAULT_PREFIX) -> str:
    """The C header of ``table`` (module docstring); names start with ``prefix``. Raises ValueError
    for a prefix that is not a C identifier, a task dimension that is not numeric, or a parameter
    name that is not a C identifier."""
    if not isinstance(prefix, str) or not _C_NAME.fullmatch(prefix):
        raise ValueError(f"the C prefix must be a C identifier, got {prefix!r}")
    bad = [d.name for d in table.task_space.dimensions if not is_numeric(d)]
    if bad:
        raise ValueError(f"a C lookup table needs numeric task dimensions; {bad} are not (use --format json or csv)")
    names = [d.name for d in table.param_space.dimensions] + [d.name for d in table.task_space.dimensions]
    bad = [n for n in names if not _C_NAME.fullmatch(n)]
    if bad:
        raise ValueError(f"a C header needs parameter and task names that are C identifiers; {bad} are not")
    P, U = prefix, prefix.upper()
    tdims = table.task_space.dimensions
    ptypes = [(d.name, _c_type(d)) for d in table.param_space.dimensions]
    f = [(lambda v: math.log(v)) if is_log_scale(d) else float for d in tdims]
    lo = [min(fj(v) for v in table.axes[d.name]) for d, fj in zip(tdims, f)]
    hi = [max(fj(v) for v in table.axes[d.name]) for d, fj in zip(tdims, f)]
    raw_lo = [min(table.axes[d.name]) for d in tdims]
    raw_hi = [max(table.axes[d.name]) for d in tdims]
    unit = f" ({table.unit})" if table.unit else ""
    counts = table.counts()
    lines = [
        f"/* Selection table of {_comment(table.problem or 'a gptask model')}: the configuration to run for a task,",
        f" * written by gptask export-table from {_comment(source or 'a model')}. Do not edit: regenerate it.",
        f" * Grid: {_comment(', '.join(f'{d.name} {len(table.axes[d.name])} values {raw_lo[j]}..{raw_hi[j]}' for j, d in enumerate(tdims)))}.",
        f" * Entries: {counts['tuned']} tuned tasks (their recommended configurations), {counts['predicted']} predicted",
        f" * without runs by the model, {counts['fallback']} fallbacks (outside the model's task range "
        f"{_comment('; '.join(f'{k} {v[0]}..{v[1]}' for k, v in table.tuned_range.items()))}:",
        f" * {'the nearest tuned task' if table.fallback == 'nearest' else 'the default'}'s configuration, no predicted value).",
        f" * value{unit}: predicted median of one launch, value_std its std (NAN for a fallback).",
        " *",
        f" * Use: int status; const {P}_entry *e = {P}_lookup((const double[]){{{', '.join(d.name for d in tdims)}}}, &status);",
        f" * status: {U}_INSIDE, {U}_FALLBACK (e is a fallback entry), {U}_OUTSIDE (the task lies outside the grid).",
        " */",
        f"#ifndef {U}_H",
        f"#define {U}_H",
        "",
        "#include <math.h>",
        "",
        f"#define {U}_N_TASK_DIMS {len(tdims)}",
        f"#define {U}_N_ENTRIES {len(table.entries)}",
        f"#define {U}_INSIDE 0",
        f"#define {U}_FALLBACK 1",
        f"#define {U}_OUTSIDE 2",
        "",
        "typedef struct {",
        f"    double task[{len(tdims)}]; /* {', '.join(d.name for d in tdims)} */",
        *[f"    {t} {n};" for n, t in ptypes],
        f"    double value;     /* predicted median of one launch{unit}; NAN for a fallback */",
        "    double value_std; /* its std; NAN for a fallback */",
        "    int fallback;     /* 1: outside the model's task range (see the note at the top) */",
        f"}} {P}_entry;",
        "",
        f"static const char *const {P}_task_names[{len(tdims)}] = {{{', '.join(json.dumps(d.name) for d in tdims)}}};",
        f"static const int {P}_task_log[{len(tdims)}] = {{{', '.join('1' if is_log_scale(d) else '0' for d in tdims)}}};",
        f"static const double {P}_task_lo[{len(tdims)}] = {{{', '.join(repr(float(v)) for v in raw_lo)}}};",
        f"static const double {P}_task_hi[{len(tdims)}] = {{{', '.join(repr(float(v)) for v in raw_hi)}}};",
        "/* the same range on the scale of the lookup (log for a log dimension) */",
        f"static const double {P}_scale_lo[{len(tdims)}] = {{{', '.join(repr(v) for v in lo)}}};",
        f"static const double {P}_scale_hi[{len(tdims)}] = {{{', '.join(repr(v) for v in hi)}}};",
        "",
        f"static const {P}_entry {P}_entries[{len(table.entries)}] = {{",
    ]
    for e in table.entries:
        task = ", ".join(repr(float(e.task[d.name])) for d in tdims)
        params = ", ".join(_c_value(t, e.params[n]) for n, t in ptypes)
        lines.append(f"    {{{{{task}}}, {params}, {_c_double(e.value)}, {_c_double(e.value_std)}, "
                     f"{1 if e.fallback else 0}}},")
    lines += [
        "};",
        "",
        f"/* The entry of the grid point nearest to task[{len(tdims)}] ({', '.join(d.name for d in tdims)});",
        f" * status (may be NULL): {U}_INSIDE, {U}_FALLBACK or {U}_OUTSIDE. */",
        f"static inline const {P}_entry *{P}_lookup(const double *task, int *status) {{",
        "    int best = 0, outside = 0;",
        "    double best_d = INFINITY;",
        f"    for (int j = 0; j < {U}_N_TASK_DIMS; j++)",
        f"        if (task[j] < {P}_task_lo[j] || task[j] > {P}_task_hi[j]) outside = 1;",
        f"    for (int k = 0; k < {U}_N_ENTRIES; k++) {{",
        "        double d = 0.0;",
        f"        for (int j = 0; j < {U}_N_TASK_DIMS; j++) {{",
        f"            double t = ({P}_task_log[j] && task[j] <= 0.0) ? {P}_task_lo[j] : task[j];",
        f"            double a = {P}_task_log[j] ? log(t) : t;",
        f"            double b = {P}_task_log[j] ? log({P}_entries[k].task[j]) : {P}_entries[k].task[j];",
        f"            double span = {P}_scale_hi[j] - {P}_scale_lo[j];",
        "            double u = (a - b) / (span > 0.0 ? span : 1.0);",
        "            d += u * u;",
        "        }",
        "        if (d < best_d) {",
        "            best_d = d;",
        "            best = k;",
        "        }",
        "    }",
        f"    if (status) *status = outside ? {U}_OUTSIDE : ({P}_entries[best].fallback ? {U}_FALLBACK : {U}_INSIDE);",
        f"    return &{P}_entries[best];",
        "}",
        "",
        f"#endif /* {U}_H */",
        "",
    ]
    return "\n".join(lines)
