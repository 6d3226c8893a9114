"""Search spaces: typed dimensions that map user values to and from the unit cube.

Every dimension knows its own transform (the scikit-optimize idea):

* ``Real(name, lo, hi, log=False)``: one column, ``u = (v - lo) / (hi - lo)`` (or the same on
  ``log v``).
* ``Integer(name, lo, hi, log=False)``: one column. Each integer owns an interval of width
  ``1 / (hi - lo + 1)`` of the unit line (padded by half a step on each side, as Optuna does), so
  every integer is equally likely under uniform sampling; decoding rounds to the nearest integer.
  With ``log=True`` the same is done on ``log v`` with bounds ``lo - 1/2`` and ``hi + 1/2``.
* ``Categorical(name, choices)``: one-hot, one column per choice. Unordered choices get no invented
  order; decoding takes the column with the largest value (ties go to the first).
* ``Ordinal(name, values, log=False)``: an ordered list of allowed values (block sizes in multiples
  of 16, powers of two, tile counts), one column. Numbers sit at their position on the line from
  the smallest to the largest value (on ``log v`` with ``log=True``, so powers of two are evenly
  spaced), so the model sees both their order and their distances; values that are not numbers
  (``["low", "mid", "high"]``) sit at their rank. Decoding takes the nearest allowed value.
* ``Boolean(name)``: ``False``/``True`` at 0 and 1 of one column (a one-hot pair would give the
  model two columns for one bit).

Discrete dimensions (``Integer``, ``Ordinal``, ``Boolean``, ``Categorical``) have a finite list of
values (:meth:`Dimension.values`); a space made of them alone can be enumerated
(:meth:`Space.grid_size`, :meth:`Space.enumerate`), which the acquisition search uses to look at
every allowed configuration of a space of up to a few hundred thousand points.

A ``Space`` is an ordered list of dimensions with unique names. Points are plain ``dict``s
``{name: value}``; encoded points are rows of an ``(n, space.n_columns)`` float array in [0, 1].

Over 500 lines on purpose: five dimension types and the Space, each with its encoding, decoding and
validation, which must agree with each other.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from ..data.trials import KEY_DECIMALS

#: magnitudes below which rounding a float to KEY_DECIMALS decimals is exact (2**53 / 10**12)
_ROUNDED_BELOW = 2.0**53 / 10.0**KEY_DECIMALS

__all__ = ["Real", "Integer", "Categorical", "Ordinal", "Boolean", "Dimension", "Space", "choice_text"]


def _check_name(name: object) -> str:
    if not isinstance(name, str) or not name:
        raise TypeError(f"a dimension name must be a non-empty string, got {name!r}")
    return name


def _check_number(name: str, what: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"dimension {name!r}: {what} must be a number, got {value!r}")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"dimension {name!r}: {what} must be finite, got {value}")
    return value


#: an ordinal of this many values or more, and at most ORDINAL_MAX_INDICATED, gets one indicator
#: column per value besides its position (two values: the position already is an indicator;
#: longer lists would give the model too many columns)
ORDINAL_MIN_INDICATED = 3
ORDINAL_MAX_INDICATED = 32


def choice_text(choice: Any) -> str:
    """How a value is written in text (CSV cells, ``k=v`` arguments): booleans as true/false."""
    return str(choice).lower() if isinstance(choice, bool) else str(choice)


class Dimension:
    """Base class: a named dimension occupying ``n_columns`` columns of the unit cube."""

    name: str
    n_columns: int = 1

    def encode(self, values: Sequence[Any]) -> np.ndarray:
        """Map ``n`` user values to an ``(n, n_columns)`` array in [0, 1]."""
        raise NotImplementedError

    def decode(self, columns: np.ndarray) -> list[Any]:
        """Map an ``(n, n_columns)`` array (clipped to [0, 1]) back to ``n`` user values."""
        raise NotImplementedError

    def validate(self, value: Any) -> Any:
        """Return ``value`` normalised to this dimension's type, or raise ``ValueError``/``TypeError``."""
        raise NotImplementedError

    def snap_columns(self, columns: np.ndarray) -> np.ndarray:
        """Vectorised ``encode(decode(columns))``: ``(n, n_columns)`` -> the encodings of valid values."""
        return np.clip(columns, 0.0, 1.0)

    def grid(self, n: int) -> list[Any]:
        """Up to ``n`` representative values spread over the dimension (for grids and plots)."""
        raise NotImplementedError

    #: whether the values are ordered (a neighbour is one value up or down) or not (any other value)
    ordered_values: bool = True

    def values(self) -> list[Any] | None:
        """Every allowed value, in order, for a discrete dimension; None for a continuous one."""
        return None

    def n_values(self) -> int | None:
        """How many values a discrete dimension has (None: continuous), without listing them."""
        v = self.values()
        return None if v is None else len(v)

    def value_at(self, k: int) -> Any:
        """The k-th allowed value of a discrete dimension (``values()[k]``)."""
        v = self.values()
        if v is None:
            raise TypeError(f"dimension {self.name!r} is continuous: it has no list of values")
        return v[k]

    def value_index(self, columns: np.ndarray) -> np.ndarray:
        """The position (n,) in ``values()`` of the value each encoded row (n, n_columns) decodes to."""
        vals = self.values()
        if vals is None:
            raise TypeError(f"dimension {self.name!r} is continuous: it has no list of values")
        position = {repr(v): k for k, v in enumerate(vals)}
        return np.array([position[repr(v)] for v in self.decode(columns)], dtype=np.int64)

    def sample_columns(self, u: np.ndarray) -> np.ndarray:
        """Encoded columns ``(n, n_columns)`` of ``n`` draws given uniform numbers ``u`` (n,) in
        [0, 1) (one Latin hypercube column): every allowed value is equally likely."""
        return np.clip(np.asarray(u, dtype=float), 0.0, 1.0).reshape(-1, 1)

    def from_text(self, text: str) -> Any:
        """The value written as ``text`` (a CSV cell, a ``k=v`` argument), validated."""
        try:
            number = float(text)
        except ValueError:
            raise ValueError(f"{self.name}={text!r} is not a number") from None
        return self.validate(number)

    def to_json(self) -> dict[str, Any]:
        """A JSON-serialisable description (used in model files and history signatures)."""
        raise NotImplementedError


class _Numeric(Dimension):
    _kind = ""

    def __init__(self, name: str, lo: float, hi: float, log: bool = False) -> None:
        self.name = _check_name(name)
        lo_f = _check_number(name, "lo", lo)
        hi_f = _check_number(name, "hi", hi)
        if not lo_f <= hi_f:
            raise ValueError(f"dimension {name!r}: `lo <= hi` must hold, got lo={lo}, hi={hi}")
        if not isinstance(log, bool):
            raise TypeError(f"dimension {name!r}: log must be True or False, got {log!r}")
        self.lo, self.hi, self.log = lo, hi, log

    def _bounds(self) -> tuple[float, float]:
        """Bounds of the continuous line that is mapped linearly to [0, 1]."""
        raise NotImplementedError

    def _forward(self, v: np.ndarray) -> np.ndarray:
        return np.log(v) if self.log else v

    def _backward(self, w: np.ndarray) -> np.ndarray:
        return np.exp(w) if self.log else w

    def encode(self, values: Sequence[Any]) -> np.ndarray:
        v = np.asarray([self.validate(x) for x in values], dtype=float)
        a, b = self._bounds()
        if b == a:
            return np.full((len(v), 1), 0.5)
        return ((self._forward(v) - a) / (b - a)).reshape(-1, 1)

    def _continuous(self, columns: np.ndarray) -> np.ndarray:
        u = np.clip(np.asarray(columns, dtype=float).reshape(-1), 0.0, 1.0)
        a, b = self._bounds()
        return self._backward(a + u * (b - a))

    def to_json(self) -> dict[str, Any]:
        return {"type": self._kind, "name": self.name, "lo": self.lo, "hi": self.hi, "log": self.log}

    def __repr__(self) -> str:
        log = ", log=True" if self.log else ""
        return f"{type(self).__name__}({self.name!r}, {self.lo!r}, {self.hi!r}{log})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Dimension) and self.to_json() == other.to_json()

    def __hash__(self) -> int:
        return hash((self._kind, self.name, self.lo, self.hi, self.log))


class Real(_Numeric):
    """A continuous dimension on ``[lo, hi]``; ``log=True`` needs ``lo > 0``."""

    _kind = "real"

    def __init__(self, name: str, lo: float, hi: float, log: bool = False) -> None:
        super().__init__(name, lo, hi, log)
        self.lo, self.hi = float(lo), float(hi)
        if log and self.lo <= 0:
            raise ValueError(f"dimension {name!r}: log scale needs lo > 0, got lo={lo}")

    def _bounds(self) -> tuple[float, float]:
        return (math.log(self.lo), math.log(self.hi)) if self.log else (self.lo, self.hi)

    def validate(self, value: Any) -> float:
        v = _check_number(self.name, "value", value)
        if not self.lo <= v <= self.hi:
            raise ValueError(f"{self.name}={value} is outside [{self.lo}, {self.hi}]")
        return v

    def _values(self, columns: np.ndarray) -> np.ndarray:
        """The values (n,) that ``columns`` stand for, as the history tells configurations apart:
        rounded to :data:`gptask.data.trials.KEY_DECIMALS` decimals (below 2**53 / 1e12, where that is
        finer than a float's own resolution), then kept within [lo, hi]."""
        v = self._continuous(columns)
        small = np.abs(v) < _ROUNDED_BELOW
        v = np.where(small, np.round(np.where(small, v, 0.0), KEY_DECIMALS), v)
        return np.clip(v, self.lo, self.hi)

    def decode(self, columns: np.ndarray) -> list[float]:
        return [float(x) for x in self._values(columns)]

    def snap_columns(self, columns: np.ndarray) -> np.ndarray:
        """``encode(decode(columns))``: rows that are one configuration snap alike, so a search sees a
        range with a single value (``lo == hi``, or narrower than 1e-12) or a handful of them as used
        up once they ran, as for :class:`Integer`; elsewhere a row moves by 5e-13 in user units at most."""
        a, b = self._bounds()
        if b == a:
            return np.full((len(columns), 1), 0.5)
        return ((self._forward(self._values(columns)) - a) / (b - a)).reshape(-1, 1)

    def grid(self, n: int) -> list[float]:
        u = np.linspace(0.0, 1.0, max(int(n), 1)) if n > 1 else np.array([0.5])
        return self.decode(u.reshape(-1, 1))


class Integer(_Numeric):
    """An integer dimension on ``[lo, hi]`` (inclusive); ``log=True`` needs ``lo >= 1``."""

    _kind = "integer"

    def __init__(self, name: str, lo: int, hi: int, log: bool = False) -> None:
        for what, v in (("lo", lo), ("hi", hi)):
            if isinstance(v, bool) or not isinstance(v, numbers.Integral):
                raise TypeError(f"dimension {name!r}: {what} must be an integer, got {v!r}")
        super().__init__(name, lo, hi, log)
        self.lo, self.hi = int(lo), int(hi)
        if log and self.lo < 1:
            raise ValueError(f"dimension {name!r}: log scale needs lo >= 1, got lo={lo}")

    def _bounds(self) -> tuple[float, float]:
        a, b = self.lo - 0.5, self.hi + 0.5
        return (math.log(a), math.log(b)) if self.log else (a, b)

    def validate(self, value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise TypeError(f"{self.name} must be an integer, got {value!r}")
        if not float(value).is_integer():
            raise ValueError(f"{self.name} must be an integer, got {value!r}")
        v = int(value)
        if not self.lo <= v <= self.hi:
            raise ValueError(f"{self.name}={v} is outside [{self.lo}, {self.hi}]")
        return v

    def _integers(self, columns: np.ndarray) -> np.ndarray:
        return np.clip(np.rint(self._continuous(columns)), self.lo, self.hi)

    def decode(self, columns: np.ndarray) -> list[int]:
        return [int(x) for x in self._integers(columns)]

    def snap_columns(self, columns: np.ndarray) -> np.ndarray:
        a, b = self._bounds()
        if b == a:
            return np.full((len(columns), 1), 0.5)
        return ((self._forward(self._integers(columns)) - a) / (b - a)).reshape(-1, 1)

    def grid(self, n: int) -> list[int]:
        span = self.hi - self.lo + 1
        if span <= n:
            return list(range(self.lo, self.hi + 1))
        u = (np.arange(n) + 0.5) / n
        return sorted(set(self.decode(u.reshape(-1, 1))))

    def values(self) -> list[int]:
        return list(range(self.lo, self.hi + 1))

    def n_values(self) -> int:
        return self.hi - self.lo + 1

    def value_at(self, k: int) -> int:
        return self.lo + int(k)

    def value_index(self, columns: np.ndarray) -> np.ndarray:
        return (self._integers(columns) - self.lo).astype(np.int64)

    def from_text(self, text: str) -> int:
        try:
            number = float(text)
        except ValueError:
            raise ValueError(f"{self.name}={text!r} is not a number") from None
        if math.isfinite(number) and not number.is_integer():
            raise ValueError(f"{self.name}={text!r} is not an integer")
        return self.validate(number)


class Categorical(Dimension):
    """An unordered choice among ``choices`` (strings, numbers or booleans), one-hot encoded."""

    def __init__(self, name: str, choices: Sequence[Any]) -> None:
        self.name = _check_name(name)
        if isinstance(choices, (str, bytes)) or not isinstance(choices, Iterable):
            raise TypeError(f"dimension {name!r}: choices must be a list, got {choices!r}")
        choices = list(choices)
        if not choices:
            raise ValueError(f"dimension {name!r}: choices must not be empty")
        for c in choices:
            if not isinstance(c, (str, numbers.Real)) or (isinstance(c, float) and not math.isfinite(c)):
                raise TypeError(
                    f"dimension {name!r}: choices must be strings, numbers or booleans, got {c!r}"
                )
        keys = [(type(c).__name__, c) for c in choices]
        if len(set(keys)) != len(keys):
            raise ValueError(f"dimension {name!r}: choices must be unique, got {choices!r}")
        self.choices = choices
        self.n_columns = len(choices)

    def index(self, value: Any) -> int:
        for k, c in enumerate(self.choices):
            if type(c) is type(value) and c == value:
                return k
        for k, c in enumerate(self.choices):  # 1 == 1.0, numpy scalars (np.str_ is a str)
            if isinstance(c, str) and isinstance(value, str) and c == value:
                return k
            if not isinstance(c, (str, bool)) and not isinstance(value, (str, bool)) and c == value:
                return k
        raise ValueError(f"{self.name}={value!r} is not one of {self.choices!r}")

    def validate(self, value: Any) -> Any:
        return self.choices[self.index(value)]

    def encode(self, values: Sequence[Any]) -> np.ndarray:
        out = np.zeros((len(values), self.n_columns))
        for row, v in enumerate(values):
            out[row, self.index(v)] = 1.0
        return out

    def decode(self, columns: np.ndarray) -> list[Any]:
        cols = np.asarray(columns, dtype=float).reshape(-1, self.n_columns)
        return [self.choices[k] for k in np.argmax(cols, axis=1)]

    def snap_columns(self, columns: np.ndarray) -> np.ndarray:
        cols = np.asarray(columns, dtype=float).reshape(-1, self.n_columns)
        return np.eye(self.n_columns)[np.argmax(cols, axis=1)]

    def grid(self, n: int) -> list[Any]:
        return list(self.choices)

    ordered_values = False

    def values(self) -> list[Any]:
        return list(self.choices)

    def value_index(self, columns: np.ndarray) -> np.ndarray:
        return np.argmax(np.asarray(columns, dtype=float).reshape(-1, self.n_columns), axis=1).astype(np.int64)

    def sample_columns(self, u: np.ndarray) -> np.ndarray:
        k = np.minimum((np.asarray(u, dtype=float) * self.n_columns).astype(int), self.n_columns - 1)
        return np.eye(self.n_columns)[k]

    def from_text(self, text: str) -> Any:
        for c in self.choices:
            if choice_text(c) == text or (isinstance(c, bool) and text.lower() == choice_text(c)):
                return c
        try:
            number = float(text)
        except ValueError:
            number = None
        if number is not None:
            for c in self.choices:
                if isinstance(c, numbers.Real) and not isinstance(c, bool) and c == number:
                    return c
        raise ValueError(f"{self.name}={text!r} is not one of {self.choices!r}")

    def to_json(self) -> dict[str, Any]:
        return {"type": "categorical", "name": self.name, "choices": list(self.choices)}

    def __repr__(self) -> str:
        return f"Categorical({self.name!r}, {self.choices!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Dimension) and self.to_json() == other.to_json()

    def __hash__(self) -> int:
        return hash(("categorical", self.name, tuple(map(repr, self.choices))))


class Ordinal(Dimension):
    """An ordered list of allowed values (module docstring).

    values: numbers (sorted here, at least one; ``log=True`` needs them all > 0 and places them on
    the log line) or strings in their given order (placed at their rank; ``log`` must be False).
    Repeated values are an error. Decoding and snapping take the nearest allowed value.

    Encoding: the value's position on the line (one column), followed, for a list of
    ORDINAL_MIN_INDICATED to ORDINAL_MAX_INDICATED values, by one indicator column per value. The
    position lets the model follow smooth trends in the value; the indicators let it learn what
    is not smooth in it, such as block sizes that are powers of two being fast among multiples of
    16 (on the recorded convolution campaign, position alone: held-out rank correlation 0.61, the
    best of the model's 10 top picks at 0.72 of the optimum, 40 random runs per GPU; with the
    indicators 0.67 and 0.79). The ARD kernel gives every column its own length scale, so the
    data decide how much each part counts. Decoding reads the position alone.
    """

    def __init__(self, name: str, values: Sequence[Any], log: bool = False) -> None:
        self.name = _check_name(name)
        if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
            raise TypeError(f"dimension {name!r}: values must be a list, got {values!r}")
        vals = list(values)
        if not vals:
            raise ValueError(f"dimension {name!r}: the list of allowed values must not be empty")
        if not isinstance(log, bool):
            raise TypeError(f"dimension {name!r}: log must be True or False, got {log!r}")
        numeric = all(isinstance(v, numbers.Real) and not isinstance(v, bool) for v in vals)
        if numeric:
            for v in vals:
                if not math.isfinite(float(v)):
                    raise ValueError(f"dimension {name!r}: values must be finite, got {v!r}")
            vals = [int(v) if isinstance(v, numbers.Integral) else float(v) for v in vals]
            ordered = sorted(vals)
            # neighbours in sorted order: 1 and 1.0 are the same value, as in Python (O(n log n))
            repeated = sorted({a for a, b in zip(ordered, ordered[1:]) if a == b})
            if repeated:
                raise ValueError(f"dimension {name!r}: allowed values must be distinct, repeated: {repeated}")
            if log and ordered[0] <= 0:
                raise ValueError(f"dimension {name!r}: log scale needs every value > 0, got {ordered[0]!r}")
            line = np.log(np.asarray(ordered, float)) if log else np.asarray(ordered, float)
        else:
            if not all(isinstance(v, str) for v in vals):
                raise TypeError(f"dimension {name!r}: values must be all numbers or all strings, got {vals!r}")
            if log:
                raise ValueError(f"dimension {name!r}: log=True needs numeric values, got {vals!r}")
            seen: set[str] = set()
            repeated = sorted({v for v in vals if v in seen or seen.add(v)})  # type: ignore[func-returns-value]
            if repeated:
                raise ValueError(f"dimension {name!r}: allowed values must be distinct, repeated: {repeated}")
            ordered = vals
            line = np.arange(len(vals), dtype=float)
        self.numeric = numeric
        self.log = log
        self.ordered: list[Any] = ordered
        if not math.isfinite(float(line[-1]) - float(line[0])):  # a span beyond the largest float: halve it first
            line = line / 2.0
        span = float(line[-1] - line[0])
        #: encoded position of each allowed value, increasing, (k,)
        self.positions = (line - line[0]) / span if span > 0 else np.full(len(ordered), 0.5)
        #: where a value's own position is (k,): the value found by a hash, not a scan
        self._where = {v: k for k, v in enumerate(ordered)}
        self._midpoints = (self.positions[1:] + self.positions[:-1]) / 2.0
        #: whether each value also gets an indicator column (see the class docstring)
        self.indicators = ORDINAL_MIN_INDICATED <= len(ordered) <= ORDINAL_MAX_INDICATED
        self.n_columns = 1 + len(ordered) if self.indicators else 1
        # the encoding of every allowed value, (k, n_columns): its position, then its indicator
        rows = self.positions.reshape(-1, 1)
        self._rows = np.hstack([rows, np.eye(len(ordered))]) if self.indicators else rows

    def index(self, value: Any) -> int:
        if self.numeric and (type(value) is int or type(value) is float):  # the common case, without the abc checks
            k = self._where.get(value)
            if k is not None:
                return k
        if self.numeric and (isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real)):
            raise TypeError(f"{self.name} must be one of {self.ordered!r}, got {value!r}")
        if not self.numeric and not isinstance(value, str):
            value = None  # only a text is one of a list of texts
        k = self._where.get(value)  # equal numbers hash alike (1, 1.0, numpy scalars); np.str_ is a str
        if k is not None:
            return k
        raise ValueError(f"{self.name}={value!r} is not one of the allowed values {self.ordered!r}")

    def validate(self, value: Any) -> Any:
        return self.ordered[self.index(value)]

    def encode(self, values: Sequence[Any]) -> np.ndarray:
        return self._rows[[self.index(v) for v in values]]

    def _indices(self, columns: np.ndarray) -> np.ndarray:
        """The value index (n,) of encoded columns (n, n_columns): the nearest position (the
        indicator columns are ignored: the search moves in the position alone)."""
        u = np.clip(np.asarray(columns, dtype=float).reshape(-1, self.n_columns)[:, 0], 0.0, 1.0)
        return np.searchsorted(self._midpoints, u, side="left")

    def decode(self, columns: np.ndarray) -> list[Any]:
        return [self.ordered[k] for k in self._indices(columns)]

    def value_index(self, columns: np.ndarray) -> np.ndarray:
        return self._indices(columns).astype(np.int64)

    def snap_columns(self, columns: np.ndarray) -> np.ndarray:
        return self._rows[self._indices(columns)]

    def sample_columns(self, u: np.ndarray) -> np.ndarray:
        k = np.minimum((np.asarray(u, dtype=float) * len(self.ordered)).astype(int), len(self.ordered) - 1)
        return self._rows[k]

    def from_text(self, text: str) -> Any:
        if not self.numeric:
            return self.validate(text)
        return self.validate(_number_text(self.name, text))

    def grid(self, n: int) -> list[Any]:
        if len(self.ordered) <= n:
            return list(self.ordered)
        k = np.unique(np.round(np.linspace(0, len(self.ordered) - 1, max(int(n), 1))).astype(int))
        return [self.ordered[j] for j in k]

    def values(self) -> list[Any]:
        return list(self.ordered)

    def to_json(self) -> dict[str, Any]:
        return {"type": "ordinal", "name": self.name, "values": list(self.ordered), "log": self.log}

    def __repr__(self) -> str:
        log = ", log=True" if self.log else ""
        return f"Ordinal({self.name!r}, {self.ordered!r}{log})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Dimension) and self.to_json() == other.to_json()

    def __hash__(self) -> int:
        return hash(("ordinal", self.name, tuple(map(repr, self.ordered)), self.log))


def _number_text(name: str, text: str) -> float | int:
    try:
        number = float(text)
    except ValueError:
        raise ValueError(f"{name}={text!r} is not a number") from None
    return int(number) if number.is_integer() else number


class Boolean(Dimension):
    """A switch, ``False`` or ``True``, in one column (0 and 1). Accepts ``0``/``1`` for the values
    (what tuning scripts often use), and ``true``/``false``/``0``/``1`` in text."""

    def __init__(self, name: str) -> None:
        self.name = _check_name(name)

    def validate(self, value: Any) -> bool:
        if isinstance(value, (bool, np.bool_)):
            return bool(value)
        if isinstance(value, numbers.Real) and value in (0, 1):
            return bool(value)
        raise ValueError(f"{self.name} must be True or False (or 0 or 1), got {value!r}")

    def encode(self, values: Sequence[Any]) -> np.ndarray:
        return np.asarray([float(self.validate(v)) for v in values]).reshape(-1, 1)

    def decode(self, columns: np.ndarray) -> list[bool]:
        return [bool(x) for x in np.asarray(columns, dtype=float).reshape(-1) >= 0.5]

    def value_index(self, columns: np.ndarray) -> np.ndarray:
        return (np.asarray(columns, dtype=float).reshape(-1) >= 0.5).astype(np.int64)

    def snap_columns(self, columns: np.ndarray) -> np.ndarray:
        return (np.asarray(columns, dtype=float).reshape(-1, 1) >= 0.5).astype(float)

    def sample_columns(self, u: np.ndarray) -> np.ndarray:
        return (np.asarray(u, dtype=float).reshape(-1, 1) >= 0.5).astype(float)

    def from_text(self, text: str) -> bool:
        low = text.strip().lower()
        if low in ("true", "1", "yes", "on"):
            return True
        if low in ("false", "0", "no", "off"):
            return False
        raise ValueError(f"{self.name}={text!r} is not a boolean (true/false or 1/0)")

    def grid(self, n: int) -> list[bool]:
        return [False, True]

    def values(self) -> list[bool]:
        return [False, True]

    def to_json(self) -> dict[str, Any]:
        return {"type": "boolean", "name": self.name}

    def __repr__(self) -> str:
        return f"Boolean({self.name!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Dimension) and self.to_json() == other.to_json()

    def __hash__(self) -> int:
        return hash(("boolean", self.name))


def dimension_from_json(data: Mapping[str, Any]) -> Dimension:
    """Rebuild a dimension from :meth:`Dimension.to_json` output (no code is evaluated)."""
    if not isinstance(data, Mapping):
        raise ValueError(f"a dimension description must be a mapping, got {data!r}")
    kind = data.get("type")
    try:
        if kind == "real":
            return Real(data["name"], data["lo"], data["hi"], bool(data.get("log", False)))
        if kind == "integer":
            return Integer(data["name"], int(data["lo"]), int(data["hi"]), bool(data.get("log", False)))
        if kind == "categorical":
            return Categorical(data["name"], data["choices"])
        if kind == "ordinal":
            return Ordinal(data["name"], data["values"], bool(data.get("log", False)))
        if kind == "boolean":
            return Boolean(data["name"])
    except KeyError as exc:
        raise ValueError(f"dimension description {dict(data)!r} lacks {exc}") from None
    raise ValueError(f"unknown dimension type {kind!r} in {dict(data)!r}")


class Space:
    """An ordered set of uniquely named dimensions.

    ``encode(points)`` maps a list of ``n`` dicts to an ``(n, n_columns)`` array in [0, 1];
    ``decode(array)`` maps back to ``n`` dicts (values rounded/snapped to valid ones).
    """

    def __init__(self, dimensions: Sequence[Dimension]) -> None:
        if isinstance(dimensions, Dimension) or not isinstance(dimensions, Iterable):
            raise TypeError("Space takes a list of dimensions (Real, Integer, Categorical)")
        dims = list(dimensions)
        if not dims:
            raise ValueError("a Space needs at least one dimension")
        for d in dims:
            if not isinstance(d, Dimension):
                raise TypeError(f"Space: {d!r} is not a dimension (Real, Integer or Categorical)")
        names = [d.name for d in dims]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"Space: dimension names must be unique, repeated: {dupes}")
        self.dimensions = dims
        self.names = names
        self.n_columns = sum(d.n_columns for d in dims)
        offsets = np.cumsum([0] + [d.n_columns for d in dims])
        self._slices = [slice(int(a), int(b)) for a, b in zip(offsets[:-1], offsets[1:])]

    def __len__(self) -> int:
        return len(self.dimensions)

    def __iter__(self):
        return iter(self.dimensions)

    def __getitem__(self, name: str) -> Dimension:
        for d in self.dimensions:
            if d.name == name:
                return d
        raise KeyError(name)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Space) and self.to_json() == other.to_json()

    def __repr__(self) -> str:
        return f"Space({self.dimensions!r})"

    def column_slices(self) -> list[slice]:
        """The columns of the encoded array that belong to each dimension, in order."""
        return list(self._slices)

    def validate(self, point: Mapping[str, Any], what: str = "point") -> dict[str, Any]:
        """Check that ``point`` has exactly this space's keys with valid values; return a clean copy."""
        if not isinstance(point, Mapping):
            raise TypeError(f"{what} must be a dict of {self.names}, got {point!r}")
        missing = [n for n in self.names if n not in point]
        extra = [k for k in point if k not in self.names]
        if missing:
            raise ValueError(f"{what} {dict(point)!r} is missing {missing}")
        if extra:
            raise ValueError(f"{what} {dict(point)!r} has unknown keys {extra} (expected {self.names})")
        try:
            return {d.name: d.validate(point[d.name]) for d in self.dimensions}
        except (ValueError, TypeError) as exc:
            raise type(exc)(f"{what}: {exc}") from None

    def __contains__(self, point: object) -> bool:
        try:
            self.validate(point)  # type: ignore[arg-type]
        except (ValueError, TypeError):
            return False
        return True

    def encode(self, points: Sequence[Mapping[str, Any]]) -> np.ndarray:
        """``n`` dicts -> ``(n, n_columns)`` array in [0, 1]."""
        if isinstance(points, Mapping):
            points = [points]
        points = [self.validate(p) for p in points]
        out = np.empty((len(points), self.n_columns))
        for d, sl in zip(self.dimensions, self._slices):
            out[:, sl] = d.encode([p[d.name] for p in points])
        return out

    def decode(self, array: np.ndarray) -> list[dict[str, Any]]:
        """``(n, n_columns)`` array -> ``n`` dicts of valid values (clipped, rounded, argmax)."""
        a = np.atleast_2d(np.asarray(array, dtype=float))
        if a.shape[1] != self.n_columns:
            raise ValueError(f"expected an array with {self.n_columns} columns, got shape {a.shape}")
        columns = [d.decode(a[:, sl]) for d, sl in zip(self.dimensions, self._slices)]
        return [dict(zip(self.names, row)) for row in zip(*columns)]

    def snap(self, array: np.ndarray) -> np.ndarray:
        """Round encoded points to the encodings of valid values (integers, one-hot), vectorised:
        equal to ``encode(decode(array))`` without building dicts. ``(n, n_columns)`` -> same shape."""
        a = np.atleast_2d(np.asarray(array, dtype=float))
        if a.shape[1] != self.n_columns:
            raise ValueError(f"expected an array with {self.n_columns} columns, got shape {a.shape}")
        out = np.empty_like(a)
        for d, sl in zip(self.dimensions, self._slices):
            out[:, sl] = d.snap_columns(a[:, sl])
        return out

    def grid_size(self) -> int | None:
        """How many configurations the space holds when every dimension is discrete (the product
        of their numbers of values, constraints not applied), None when one is continuous."""
        sizes = [d.n_values() for d in self.dimensions]
        if any(v is None for v in sizes):
            return None
        return math.prod(sizes)

    def enumerate(self, limit: int) -> np.ndarray:
        """Every configuration of a discrete space, encoded: ``(grid_size(), n_columns)``, the last
        dimension varying fastest. Raises ValueError for a continuous space or one larger than
        ``limit`` configurations (the array would take ``8 * n_columns`` bytes per configuration)."""
        size = self.grid_size()
        if size is None:
            raise ValueError("only a space of discrete dimensions can be enumerated")
        if size > limit:
            raise ValueError(f"the space holds {size} configurations, more than the limit of {limit}")
        out = np.empty((size, self.n_columns))
        shape = [len(d.values()) for d in self.dimensions]
        index = np.indices(shape).reshape(len(shape), -1)
        for j, (d, sl) in enumerate(zip(self.dimensions, self._slices)):
            out[:, sl] = d.encode(d.values())[index[j]]
        return out

    def to_json(self) -> list[dict[str, Any]]:
        return [d.to_json() for d in self.dimensions]

    @classmethod
    def from_json(cls, data: Sequence[Mapping[str, Any]]) -> "Space":
        if not isinstance(data, Sequence) or isinstance(data, (str, bytes)):
            raise ValueError(f"a space description must be a list, got {data!r}")
        return cls([dimension_from_json(d) for d in data])
