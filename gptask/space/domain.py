"""The allowed configurations of one task, listed, when the space is discrete enough to list them.

Real tuning spaces are mostly lists of allowed values (block sizes in multiples of 16, powers of
two, tile counts, switches, algorithm choices) with restrictions between them: 10^3 to 10^6
configurations, of which the restrictions often allow a third. Such a space need not be searched
by a swarm in a continuous relaxation: every allowed configuration can be listed once per task and
the acquisition evaluated on all of them, or on a large sample and their neighbours
(:func:`gptask.propose.search.maximize_over`). A :class:`Domain` is that list:

* from the problem's ``candidates`` (a finite list, e.g. what a recorded campaign measured), or
* from the whole grid of a space of discrete dimensions (``Integer``, ``Ordinal``, ``Boolean``,
  ``Categorical``) of at most :data:`ENUMERATION_LIMIT` configurations,

filtered by the constraints (text restrictions vectorised over the whole grid). A space with a
``Real`` dimension, or a larger grid, has no domain and is searched in the unit cube instead.

A domain holds each configuration as the indices of its values, one small integer per dimension
(``(n, n_dims)``, 4 bytes each), not as encoded rows, which with ordinal indicator columns can be
a hundred floats per configuration: a million configurations take 28 MB, and rows are encoded
in chunks when the acquisition needs them. Configurations are found by a mixed-radix key of
their value indices (binary search over the sorted keys), vectorised.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import numpy as np

from .dimensions import Space

__all__ = ["Domain", "build_domain", "row_keys", "ENUMERATION_LIMIT", "ListedProblem"]

#: the most configurations (before constraints) a discrete space may hold to be listed per task
ENUMERATION_LIMIT = 1_000_000
#: a dimension with at most this many values keeps a table of their encodings (others encode on demand)
VALUE_TABLE_LIMIT = 100_000


def row_keys(x: np.ndarray) -> list[bytes]:
    """Hashable identities of snapped encoded rows ``(n, D)`` (rounded to 9 decimals)."""
    r = np.round(np.asarray(x, dtype=float), 9) + 0.0  # + 0.0 turns -0.0 into 0.0
    return [row.tobytes() for row in r]


class Domain:
    """The allowed configurations of one task in a fixed order (grid order, or the candidates').

    space: the parameter space (discrete dimensions only); index: (n, n_dims) value indices of the
    configurations (``index[r, j]``: position of row r's value in ``space.dimensions[j].values()``).
    """

    def __init__(self, space: Space, index: np.ndarray) -> None:
        self.space = space
        self.index = np.ascontiguousarray(index, dtype=np.int32).reshape(-1, len(space))
        self._radix = np.array([d.n_values() for d in space.dimensions], dtype=np.int64)
        # per dimension, the encoding of each value (k_j, n_columns_j), when it has few enough values
        self._rows = [d.encode(d.values()) if k <= VALUE_TABLE_LIMIT else None
                      for d, k in zip(space.dimensions, self._radix)]
        self._keys = self._key(self.index)
        self._order = np.argsort(self._keys, kind="stable")
        self._sorted = self._keys[self._order]

    def __len__(self) -> int:
        return len(self.index)

    def _key(self, index: np.ndarray) -> np.ndarray:
        """Mixed-radix keys (m,) of value-index rows (m, n_dims)."""
        key = np.zeros(len(index), dtype=np.int64)
        for j, k in enumerate(self._radix):
            key = key * k + index[:, j]
        return key

    def encode(self, rows: Sequence[int] | np.ndarray) -> np.ndarray:
        """Encoded configurations (m, n_columns) of the given row numbers."""
        rows = np.asarray(rows, dtype=np.int64)
        parts = []
        for j, (d, table) in enumerate(zip(self.space.dimensions, self._rows)):
            idx = self.index[rows, j]
            parts.append(table[idx] if table is not None else d.encode([d.value_at(k) for k in idx]))
        return np.hstack(parts) if parts else np.empty((len(rows), 0))

    @property
    def encoded(self) -> np.ndarray:
        """Every configuration encoded, (n, n_columns) (for small domains: this allocates it all)."""
        return self.encode(np.arange(len(self)))

    def _lookup(self, index: np.ndarray) -> np.ndarray:
        """Row numbers (m,) of value-index rows (m, n_dims), -1 where a row is not in the domain."""
        keys = self._key(index)
        pos = np.minimum(np.searchsorted(self._sorted, keys), len(self._sorted) - 1)
        found = self._sorted[pos] == keys if len(self._sorted) else np.zeros(len(keys), dtype=bool)
        return np.where(found, self._order[pos] if len(self._order) else -1, -1)

    def indices_of(self, encoded: np.ndarray) -> np.ndarray:
        """Value indices (m, n_dims) of encoded configurations (m, n_columns) (snapped first)."""
        enc = np.atleast_2d(np.asarray(encoded, dtype=float))
        return np.column_stack([d.value_index(enc[:, sl]) for d, sl in
                                zip(self.space.dimensions, self.space.column_slices())]).astype(np.int64)

    def positions(self, encoded: np.ndarray) -> np.ndarray:
        """Row numbers (m,) of the encoded configurations (m, n_columns), -1 where one is not in the
        domain (in the order given, unlike :meth:`rows_of`)."""
        if not len(encoded):
            return np.empty(0, dtype=np.int64)
        return self._lookup(self.indices_of(encoded))

    def rows_of(self, encoded: np.ndarray | None) -> np.ndarray:
        """Row numbers of the configurations ``encoded`` (k, D) that belong to the domain (others,
        e.g. imported runs outside it, are left out)."""
        if encoded is None or not len(encoded):
            return np.empty(0, dtype=np.int64)
        rows = self._lookup(self.indices_of(encoded))
        return rows[rows >= 0]

    def available(self, exclude: np.ndarray | None) -> np.ndarray:
        """Row numbers (m,) of the configurations not among ``exclude`` (k, D), in order."""
        keep = np.ones(len(self), dtype=bool)
        keep[self.rows_of(exclude)] = False
        return np.flatnonzero(keep)

    def params(self, rows: Sequence[int] | np.ndarray) -> list[dict[str, Any]]:
        """The configurations (dicts) of the given row numbers."""
        rows = np.asarray(rows, dtype=np.int64)
        names = self.space.names
        cols = [[d.value_at(k) for k in self.index[rows, j]] for j, d in enumerate(self.space.dimensions)]
        return [dict(zip(names, row)) for row in zip(*cols)]

    def neighbours(self, row: int) -> np.ndarray:
        """Row numbers of the configurations one step from ``row`` in one dimension (an integer or
        ordinal one value up or down, a boolean flipped, another categorical choice) that are in
        the domain."""
        base = self.index[row]
        moves = []
        for j, d in enumerate(self.space.dimensions):
            k = int(base[j])
            if d.ordered_values:
                others = [v for v in (k - 1, k + 1) if 0 <= v < self._radix[j]]
            else:
                others = [v for v in range(int(self._radix[j])) if v != k]
            for v in others:
                m = base.copy()
                m[j] = v
                moves.append(m)
        if not moves:
            return np.empty(0, dtype=np.int64)
        rows = self._lookup(np.array(moves, dtype=np.int64))
        return rows[rows >= 0]


def _grid(space: Space) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """The whole grid of a discrete space: value indices (n, n_dims) and each parameter's values (n,)."""
    values = [d.values() for d in space.dimensions]
    index = np.indices([len(v) for v in values]).reshape(len(values), -1).T
    columns = {d.name: _column(vals)[index[:, j]] for j, (d, vals) in enumerate(zip(space.dimensions, values))}
    return index, columns


def _listed(space: Space, configs: Sequence[Mapping[str, Any]]) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Value indices (n, n_dims) and each parameter's values (n,) of listed configurations."""
    enc = space.encode(configs)
    index = np.column_stack([d.value_index(enc[:, sl]) for d, sl in zip(space.dimensions, space.column_slices())])
    columns = {d.name: _column([c[d.name] for c in configs]) for d in space.dimensions}
    return index.reshape(len(configs), len(space)), columns


def _column(values: Sequence[Any]) -> np.ndarray:
    return np.asarray(values, dtype=object if any(isinstance(v, str) for v in values) else None)


class ListedProblem(Protocol):
    """What :func:`build_domain` reads of a problem (:class:`gptask.Problem` has it): the space sits
    below the problem, so the domain names the four members it uses instead of importing it."""

    name: str
    param_space: Space

    def candidate_list(self, task: Mapping[str, Any]) -> list[dict[str, Any]] | None: ...

    def feasible_mask(self, task: Mapping[str, Any], columns: Mapping[str, np.ndarray], n: int) -> np.ndarray: ...


def build_domain(problem: ListedProblem, task: Mapping[str, Any]) -> Domain | None:
    """The :class:`Domain` of ``task``: the problem's candidates or the whole grid of its discrete
    space, filtered by the constraints; None when there is neither (a continuous space, or a grid of
    more than :data:`ENUMERATION_LIMIT` configurations). The domain may be empty. Candidates need a
    discrete space too (a continuous dimension has no list of values to index)."""
    space = problem.param_space
    if space.grid_size() is None:
        if problem.candidate_list(task) is not None:
            raise ValueError(f"problem {problem.name!r}: candidates need a space of discrete dimensions "
                             "(Integer, Ordinal, Boolean, Categorical)")
        return None
    listed = problem.candidate_list(task)
    if listed is not None:
        index, columns = _listed(space, listed)
    else:
        if space.grid_size() > ENUMERATION_LIMIT:
            return None
        index, columns = _grid(space)
    mask = problem.feasible_mask(task, columns, len(index))
    return Domain(space, index[mask])
