"""The allowed configurations of one task, listed, when the space is discrete enough to list them.

Real tuning spaces are mostly lists of allowed values (block sizes in multiples of 16, powers of
two, tile counts, switches, algorithm choices) with restrictions between them: 10^3 to 10^6
configurations, of which the restrictions often allow a third. Such a space need not be searched
by a swarm in a continuous relaxation: every allowed configuration can be listed once per task and
the acquisition evaluated on all of them, or on a large sample and their neighbours
(:func:`gptask.search.maximize_over`). A :class:`Domain` is that list:

* from the problem's ``candidates`` (a finite list, e.g. what a recorded campaign measured), or
* from the whole grid of a space of discrete dimensions (``Integer``, ``Ordinal``, ``Boolean``,
  ``Categorical``) of at most :data:`ENUMERATION_LIMIT` configurations,

filtered by the constraints (text restrictions vectorised over the whole grid). A space with a
``Real`` dimension, or a larger grid, has no domain and is searched in the unit cube instead.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from .space import Space

if TYPE_CHECKING:  # pragma: no cover
    from .problem import Problem

__all__ = ["Domain", "build_domain", "row_keys", "ENUMERATION_LIMIT"]

#: the most configurations (before constraints) a discrete space may hold to be listed per task
ENUMERATION_LIMIT = 1_000_000


def row_keys(x: np.ndarray) -> list[bytes]:
    """Hashable identities of snapped encoded rows ``(n, D)`` (rounded to 9 decimals)."""
    r = np.round(np.asarray(x, dtype=float), 9) + 0.0  # + 0.0 turns -0.0 into 0.0
    return [row.tobytes() for row in r]


@dataclass
class Domain:
    """The allowed configurations of one task: ``encoded`` (n, D) rows in the unit cube, in a
    fixed order (grid order, or the candidates' order), and ``space`` to decode them."""

    encoded: np.ndarray
    space: Space
    _index: dict[bytes, int] | None = field(default=None, repr=False)

    def __len__(self) -> int:
        return len(self.encoded)

    def index(self) -> dict[bytes, int]:
        """Row key (:func:`row_keys`) -> row number, built on first use."""
        if self._index is None:
            self._index = {k: r for r, k in enumerate(row_keys(self.encoded))}
        return self._index

    def rows_of(self, encoded: np.ndarray) -> np.ndarray:
        """Row numbers of the configurations ``encoded`` (k, D) that belong to the domain (others,
        e.g. imported runs outside it, are left out)."""
        if encoded is None or not len(encoded):
            return np.empty(0, dtype=int)
        index = self.index()
        found = [index.get(k) for k in row_keys(self.space.snap(encoded))]
        return np.array([r for r in found if r is not None], dtype=int)

    def available(self, exclude: np.ndarray | None) -> np.ndarray:
        """Row numbers (m,) of the configurations not among ``exclude`` (k, D), in order."""
        keep = np.ones(len(self.encoded), dtype=bool)
        keep[self.rows_of(exclude)] = False
        return np.flatnonzero(keep)

    def params(self, rows: Sequence[int] | np.ndarray) -> list[dict[str, Any]]:
        """The configurations (dicts) of the given row numbers."""
        return self.space.decode(self.encoded[np.asarray(rows, dtype=int)])


def _grid_columns(space: Space) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """The whole grid of a discrete space: encoded rows (n, D) and each parameter's values (n,)."""
    values = [d.values() for d in space.dimensions]
    index = np.indices([len(v) for v in values]).reshape(len(values), -1)
    encoded = np.empty((index.shape[1], space.n_columns))
    columns = {}
    for j, (d, sl, vals) in enumerate(zip(space.dimensions, space.column_slices(), values)):
        encoded[:, sl] = d.encode(vals)[index[j]]
        columns[d.name] = np.asarray(vals, dtype=object if any(isinstance(v, str) for v in vals) else None)[index[j]]
    return encoded, columns


def _list_columns(space: Space, configs: Sequence[Mapping[str, Any]]) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    encoded = space.encode(configs)
    columns = {}
    for name in space.names:
        vals = [c[name] for c in configs]
        columns[name] = np.asarray(vals, dtype=object if any(isinstance(v, str) for v in vals) else None)
    return encoded, columns


def build_domain(problem: "Problem", task: Mapping[str, Any]) -> Domain | None:
    """The :class:`Domain` of ``task``: the problem's candidates or the whole grid of its discrete
    space, filtered by the constraints; None when there is neither (a continuous space, or a grid of
    more than :data:`ENUMERATION_LIMIT` configurations). The domain may be empty."""
    space = problem.param_space
    listed = problem.candidate_list(task)
    if listed is not None:
        encoded, columns = _list_columns(space, listed)
    else:
        size = space.grid_size()
        if size is None or size > ENUMERATION_LIMIT:
            return None
        encoded, columns = _grid_columns(space)
    mask = problem.feasible_mask(task, columns, len(encoded))
    return Domain(np.ascontiguousarray(encoded[mask]), space)

