r"""Selection tables written for programs: JSON, CSV, and a C header with a lookup function.

The C header (:func:`to_c_header`) holds the grid as a static array of entries (the task values,
the parameters, the predicted value and std, whether the entry is a fallback) and a function
``PREFIX_lookup(const double *task, int *status)`` returning the entry of the grid point nearest to
``task`` by the rule of :meth:`gptask.insight.selection.SelectionTable.lookup`: task coordinates (the
log for a log-scale task dimension) normalised over the grid's range, squared Euclidean distance,
the first entry on ties; ``*status`` is PREFIX_INSIDE, PREFIX_FALLBACK (the entry is a fallback: its
grid point lies outside the model's task range) or PREFIX_OUTSIDE (the query lies outside the
grid's range). Only numeric task dimensions can be looked up that way (a categorical task dimension
is refused with an error naming it). Parameters become ``int`` (integers, booleans), ``double``
(reals) or ``const char *`` (categorical and text values). The header needs C99 or later (C++ also
compiles it; an older C standard stops at an ``#error`` naming C99), includes only ``<math.h>``
and needs ``-lm``.

No input leaves the place the header gives it: every text (problem name, unit, file name, task
names, categorical values) is written either as a comment body (:func:`c_comment_text`: printable
ASCII only, no backslash, no ``*/``, ``/*`` or ``??``) or as a string literal
(:func:`c_string_literal`: octal escapes for everything but plain printable ASCII, ``\?`` against
trigraphs); parameter names become struct members and must be C identifiers that are neither a C
keyword, a reserved name, a ``<math.h>`` macro nor a member the header defines itself
(:func:`check_c_member_name`; refused with an error, never mangled).
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from typing import Any

from ..space.dimensions import Boolean, Integer, Ordinal, Real
from ..data.storage.export import csv_cell
from .selection import SelectionTable, is_log_scale, is_numeric

__all__ = ["to_json", "to_csv", "to_c_header", "FORMATS", "DEFAULT_PREFIX", "c_comment_text", "c_string_literal",
           "check_c_member_name", "C_STANDARD"]

#: what ``gptask export-table --format`` writes
FORMATS = ("json", "csv", "c-header")
#: the prefix of every name the C header defines
DEFAULT_PREFIX = "gptask_table"
#: the C standard the header needs (stated in it, checked by it)
C_STANDARD = "C99"
_C_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: C keywords (C89 to C23) and C++ keywords a struct member or prefix may not be
_C_KEYWORDS = frozenset("""
    auto break case char const continue default do double else enum extern float for goto if inline int long
    register restrict return short signed sizeof static struct switch typedef union unsigned void volatile while
    _Alignas _Alignof _Atomic _Bool _Complex _Generic _Imaginary _Noreturn _Static_assert _Thread_local
    alignas alignof bool constexpr false nullptr static_assert thread_local true typeof typeof_unqual
    _BitInt _Decimal32 _Decimal64 _Decimal128 asm catch class delete explicit friend mutable namespace new
    operator private protected public template this throw try typeid typename using virtual wchar_t
    and and_eq bitand bitor compl not not_eq or or_eq xor xor_eq char8_t char16_t char32_t concept consteval
    constinit co_await co_return co_yield decltype export noexcept requires reinterpret_cast static_cast
    dynamic_cast const_cast""".split())
#: object-like macros of <math.h> (C99 and POSIX/GNU), which a member of that name would expand
_MATH_MACROS = frozenset("""
    HUGE_VAL HUGE_VALF HUGE_VALL INFINITY NAN FP_INFINITE FP_NAN FP_NORMAL FP_SUBNORMAL FP_ZERO FP_FAST_FMA
    FP_FAST_FMAF FP_FAST_FMAL FP_ILOGB0 FP_ILOGBNAN MATH_ERRNO MATH_ERREXCEPT math_errhandling M_E M_LOG2E
    M_LOG10E M_LN2 M_LN10 M_PI M_PI_2 M_PI_4 M_1_PI M_2_PI M_2_SQRTPI M_SQRT2 M_SQRT1_2 MAXFLOAT HUGE
    DOMAIN SING OVERFLOW UNDERFLOW TLOSS PLOSS X_TLOSS""".split())
#: the members every entry has besides the parameters
_ENTRY_MEMBERS = frozenset({"task", "value", "value_std", "fallback"})
#: pairs of characters a comment body never holds (comment delimiters, the start of a trigraph)
_COMMENT_PAIRS = frozenset({"*/", "/*", "??"})


def c_comment_text(text: str) -> str:
    """``text`` as the body of a C ``/* ... */`` comment that no input can end or change: printable
    ASCII stays (but a backslash, which could splice lines), every other character (line breaks,
    control characters, non-ASCII, bidirectional overrides) becomes ``<U+XXXX>``, and a space goes
    between any two characters that would form ``*/``, ``/*`` or ``??`` (a trigraph's start).
    The result is one line of printable ASCII."""
    out: list[str] = []
    for ch in str(text):
        piece = ch if " " <= ch <= "~" and ch != "\\" else f"<U+{ord(ch):04X}>"
        if out and out[-1][-1] + piece[0] in _COMMENT_PAIRS:
            out.append(" ")
        out.append(piece)
    return "".join(out)


def c_string_literal(text: str) -> str:
    r"""``text`` as a C string literal (quotes included) whose bytes are the UTF-8 of ``text``:
    printable ASCII stays, ``\`` ``\"`` and ``\?`` (against trigraphs) are escaped, every other byte
    is a three-digit octal escape (so no following digit extends it). Raises ValueError for a NUL
    character, which a C string cannot hold (the program would read a shorter string), and for a
    text that is not valid Unicode (a lone surrogate)."""
    text = str(text)
    if "\x00" in text:
        raise ValueError(f"a C string cannot hold a NUL character, got {text!r}")
    try:
        raw = text.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"a C string needs valid Unicode text, got {text!r}") from None
    out = []
    for b in raw:
        ch = chr(b)
        if ch in '\\"?':
            out.append("\\" + ch)
        elif 0x20 <= b <= 0x7E:
            out.append(ch)
        else:
            out.append(f"\\{b:03o}")
    return '"' + "".join(out) + '"'


def check_c_member_name(name: Any, what: str = "parameter") -> str:
    """``name`` if it can be a member of the header's entry struct: a C identifier (ASCII letters,
    digits, underscore, not starting with a digit) that is not a C or C++ keyword, not reserved (a
    leading ``__`` or ``_`` and a capital), not an object-like ``<math.h>`` macro and not a member
    the entry has already (task, value, value_std, fallback). Raises ValueError naming it otherwise."""
    why = None
    if not isinstance(name, str) or not _C_NAME.fullmatch(name):
        why = "it is not a C identifier (ASCII letters, digits and _, not starting with a digit)"
    elif name in _C_KEYWORDS:
        why = "it is a C or C++ keyword"
    elif name.startswith("__") or (name[0] == "_" and name[1:2].isupper()):
        why = "names starting with __ or _ and a capital are reserved in C"
    elif name in _MATH_MACROS:
        why = "it is a macro of <math.h>, which the header includes"
    elif name in _ENTRY_MEMBERS:
        why = f"every entry has a member of that name already ({', '.join(sorted(_ENTRY_MEMBERS))})"
    if why:
        raise ValueError(f"a C header needs a {what} name that can be a C member name; {name!r} cannot: {why}")
    return name


def _meta(table: SelectionTable, source: str) -> dict[str, Any]:
    return {"problem": table.problem, "source": source, "objective": table.objective, "unit": table.unit,
            "grid": table.axes,
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
    note (empty cells for a fallback's values), then objective (the name of the objective the values
    are of, "" for a problem with one unnamed objective) and unit (the objective's unit, "" when
    unknown). Every cell goes through :func:`gptask.data.storage.export.csv_cell` (a text that starts like
    a spreadsheet formula gets a leading ``'``)."""
    out = io.StringIO()
    rows = [{**r, "objective": table.objective, "unit": table.unit} for r in table.rows()]
    writer = csv.writer(out)  # RFC 4180 line ends: a text holding a CR is then quoted
    writer.writerow([csv_cell(k) for k in rows[0]])
    for r in rows:
        writer.writerow([csv_cell(v) for v in r.values()])
    return out.getvalue()


#: the range of a C ``int`` the header relies on (32 bits); wider integer columns become ``long long``
_C_INT_MAX = 2**31 - 1


def _c_type(dim: Any, values: list[Any]) -> str:
    if isinstance(dim, (Integer, Boolean)) or (isinstance(dim, Ordinal) and dim.numeric
                                               and all(isinstance(v, int) for v in dim.values())):
        return "int" if all(-_C_INT_MAX <= int(v) <= _C_INT_MAX for v in values) else "long long"
    if isinstance(dim, (Real, Ordinal)) and (isinstance(dim, Real) or dim.numeric):
        return "double"
    return "const char *"


def _c_value(ctype: str, v: Any) -> str:
    if ctype == "int":
        return str(int(v))
    if ctype == "long long":
        return f"{int(v)}LL"
    if ctype == "double":
        x = float(v)
        if not math.isfinite(x):
            raise ValueError(f"a C header needs finite real parameter values, got {v!r}")
        return repr(x)
    return c_string_literal(str(v))


def _c_double(v: float | None) -> str:
    return "NAN" if v is None or not math.isfinite(v) else repr(float(v))


def _c_comment(lines: list[str]) -> list[str]:
    """A ``/* ... */`` block of ``lines`` (each made safe by :func:`c_comment_text`)."""
    body = [c_comment_text(line) for line in lines]
    return ["/* " + body[0], *[(" * " + t).rstrip() for t in body[1:]], " */"]


def to_c_header(table: SelectionTable, source: str = "", prefix: str = DEFAULT_PREFIX) -> str:
    """The C header of ``table`` (module docstring); names start with ``prefix``. Raises ValueError
    for a prefix that is not a C identifier (or is a keyword or reserved name), a task dimension that
    is not numeric, a parameter name that cannot be a C member (:func:`check_c_member_name`), or a
    text value holding a NUL character. Every text from the table or ``source`` is written through
    :func:`c_comment_text` or :func:`c_string_literal`."""
    if not isinstance(prefix, str) or not _C_NAME.fullmatch(prefix) or prefix in _C_KEYWORDS \
            or prefix.startswith("__") or (prefix[0] == "_" and prefix[1:2].isupper()):
        raise ValueError(f"the C prefix must be a C identifier that is not a keyword nor start with __ or _ and a "
                         f"capital, got {prefix!r}")
    bad = [d.name for d in table.task_space.dimensions if not is_numeric(d)]
    if bad:
        raise ValueError(f"a C lookup table needs numeric task dimensions; {bad} are not (use --format json or csv)")
    for d in table.param_space.dimensions:
        check_c_member_name(d.name)
    P, U = prefix, prefix.upper()
    tdims = table.task_space.dimensions
    tnames = ", ".join(d.name for d in tdims)
    ptypes = [(d.name, _c_type(d, [e.params[d.name] for e in table.entries])) for d in table.param_space.dimensions]
    f = [(lambda v: math.log(v)) if is_log_scale(d) else float for d in tdims]
    lo = [min(fj(v) for v in table.axes[d.name]) for d, fj in zip(tdims, f)]
    hi = [max(fj(v) for v in table.axes[d.name]) for d, fj in zip(tdims, f)]
    raw_lo = [min(table.axes[d.name]) for d in tdims]
    raw_hi = [max(table.axes[d.name]) for d in tdims]
    objective = table.objective
    what = f"value of {objective}" if objective else "value"
    unit = f" ({table.unit})" if table.unit else ""
    counts = table.counts()
    lines = [
        *_c_comment([
            f"Selection table of {table.problem or 'a gptask model'}: the configuration to run for a task,",
            f"written by gptask export-table from {source or 'a model'}. Do not edit: regenerate it.",
            f"Needs {C_STANDARD} or later (or C++); link with -lm.",
            f"Grid: {', '.join(f'{d.name} {len(table.axes[d.name])} values {raw_lo[j]}..{raw_hi[j]}' for j, d in enumerate(tdims))}.",
            f"Entries: {counts['tuned']} tuned tasks (their recommended configurations), {counts['predicted']} predicted",
            f"without runs by the model, {counts['fallback']} fallbacks (outside the model's task range "
            f"{'; '.join(f'{k} {v[0]}..{v[1]}' for k, v in table.tuned_range.items())}:",
            f"{'the nearest tuned task' if table.fallback == 'nearest' else 'the default'}'s configuration, no predicted value).",
            f"{what}{unit}: predicted median of one launch, value_std its std (NAN for a fallback).",
            "",
            f"Use: int status; const {P}_entry *e = {P}_lookup((const double[]){{{tnames}}}, &status);",
            f"status: {U}_INSIDE, {U}_FALLBACK (e is a fallback entry), {U}_OUTSIDE (the task lies outside the grid).",
        ]),
        f"#ifndef {U}_H",
        f"#define {U}_H",
        "",
        "#if !defined(__cplusplus) && (!defined(__STDC_VERSION__) || __STDC_VERSION__ < 199901L)",
        f'#error "this selection table needs {C_STANDARD} or later (compile with -std=c99 or a newer standard)"',
        "#endif",
        "",
        "#include <math.h>",
        "",
        "/* the objective the entries' value is of (empty: the problem's one objective) and its unit */",
        f"#define {U}_OBJECTIVE {c_string_literal(objective)}",
        f"#define {U}_UNIT {c_string_literal(table.unit or '')}",
        f"#define {U}_N_TASK_DIMS {len(tdims)}",
        f"#define {U}_N_ENTRIES {len(table.entries)}",
        f"#define {U}_INSIDE 0",
        f"#define {U}_FALLBACK 1",
        f"#define {U}_OUTSIDE 2",
        "",
        "typedef struct {",
        f"    double task[{len(tdims)}]; /* {c_comment_text(tnames)} */",
        *[f"    {t} {n};" for n, t in ptypes],
        f"    double value;     /* {c_comment_text(f'predicted median of one launch{unit}')}; NAN for a fallback */",
        "    double value_std; /* its std; NAN for a fallback */",
        "    int fallback;     /* 1: outside the model's task range (see the note at the top) */",
        f"}} {P}_entry;",
        "",
        f"static const char *const {P}_task_names[{len(tdims)}] = {{{', '.join(c_string_literal(d.name) for d in tdims)}}};",
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
        f"/* The entry of the grid point nearest to task[{len(tdims)}] ({c_comment_text(tnames)});",
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
