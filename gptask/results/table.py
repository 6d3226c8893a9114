"""Tables of results that print readably and stay lists of dicts.

:class:`Table` is what ``result.table()`` returns: a ``list`` of row dicts (index it, loop over it,
``pandas.DataFrame(result.table())``), whose ``str`` and ``repr`` are aligned text columns::

    task_index      t      x  best  evaluations  failed
    ----------  -----  -----  ----  -----------  ------
             0    0.5  0.213  -0.9           14       0

Cells: None is ``-``, floats have 4 significant digits, a ``gain`` column is written in percent
(``48.5 %``, :func:`gptask.core.labels.format_gain`), and the columns listed as values carry the
objective's unit in their header (``best (s)``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from ..core.labels import GAIN_COLUMNS, format_gain

__all__ = ["Table", "format_rows"]


def _cell(key: str, v: Any) -> str:
    if key in GAIN_COLUMNS and isinstance(v, (int, float)) and not isinstance(v, bool):
        return format_gain(float(v))
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def format_rows(rows: Sequence[dict[str, Any]], unit: str = "", value_columns: Iterable[str] = ()) -> str:
    """Aligned text of dict rows (the union of their keys, in first-seen order; module docstring).
    unit: appended to the headers of ``value_columns`` as ``name (unit)``."""
    if not rows:
        return "(no rows)"
    keys: list[str] = []
    for r in rows:
        keys += [k for k in r if k not in keys]
    with_unit = set(value_columns) if unit else set()
    heads = [f"{k} ({unit})" if k in with_unit else str(k) for k in keys]
    cells = [[_cell(k, r.get(k)) for k in keys] for r in rows]
    widths = [max(len(h), *(len(c[j]) for c in cells)) for j, h in enumerate(heads)]
    line = "  ".join(h.rjust(w) for h, w in zip(heads, widths))
    body = ["  ".join(c.rjust(w) for c, w in zip(row, widths)) for row in cells]
    return "\n".join([line, "  ".join("-" * w for w in widths), *body])


class Table(list):
    """A list of row dicts that prints as an aligned table (module docstring).

    unit: the objective's unit, shown in the headers of ``value_columns``."""

    def __init__(self, rows: Iterable[dict[str, Any]] = (), unit: str = "",
                 value_columns: Iterable[str] = ()) -> None:
        super().__init__(rows)
        self.unit = unit
        self.value_columns = tuple(value_columns)

    def __str__(self) -> str:
        return format_rows(self, self.unit, self.value_columns)

    def __repr__(self) -> str:
        return self.__str__()

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:  # IPython and Jupyter
        printer.text(str(self))
