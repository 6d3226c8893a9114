"""Constraints written as text, the way tuning scripts write them, read without ``eval``.

Kernel Tuner scripts, and many hand-written tuning scripts, give their restrictions as Python
boolean expressions over the parameter names::

    "block_size_x*block_size_y<=1024"
    "use_padding==0 or block_size_x % 32 != 0"

:func:`parse_restriction` parses such a text with :mod:`ast` and keeps it only when every node is
one of a small whitelist (numbers, strings, names of the problem, arithmetic, comparisons,
``and``/``or``/``not``, ``x if c else y``, ``in`` a literal list, and the functions ``min``,
``max``, ``abs``, ``int``, ``float``, ``round``, ``floor``, ``ceil``, ``sqrt``, ``log``, ``log2``).
It is then *interpreted* node by node on numpy arrays: nothing is compiled, no attribute, subscript,
call of anything else or name outside the problem can be reached. The same tree judges one
configuration (a dict of values) or, vectorised, a whole column of configurations at once
(:meth:`Restriction.mask`), which is how an enumerated discrete space is filtered.

Arithmetic follows numpy on int64 and float64 arrays (``/`` is true division, ``//`` and ``%`` are
floor division and modulo as in Python); a division by zero, or any other non-finite result,
makes the comparison it feeds false, so such a configuration counts as not allowed.
"""

from __future__ import annotations

import ast
import numbers
from collections.abc import Iterable, Mapping
from typing import Any, Callable

import numpy as np

__all__ = ["Restriction", "parse_restriction", "MAX_RESTRICTION_LENGTH"]

#: longest restriction text accepted (characters): a guard against pathological input
MAX_RESTRICTION_LENGTH = 10_000

_BINARY: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: np.add, ast.Sub: np.subtract, ast.Mult: np.multiply, ast.Div: np.true_divide,
    ast.FloorDiv: np.floor_divide, ast.Mod: np.mod, ast.Pow: np.power,
}
_COMPARE: dict[type, Callable[[Any, Any], Any]] = {
    ast.Eq: np.equal, ast.NotEq: np.not_equal, ast.Lt: np.less, ast.LtE: np.less_equal,
    ast.Gt: np.greater, ast.GtE: np.greater_equal,
}


def _round(x: Any, digits: Any = 0) -> Any:
    return np.round(x, int(digits))


_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "min": lambda *a: _reduce(np.minimum, a), "max": lambda *a: _reduce(np.maximum, a),
    "abs": np.abs, "int": lambda x: np.trunc(x).astype(np.int64), "float": lambda x: np.asarray(x, dtype=float),
    "round": _round, "floor": np.floor, "ceil": np.ceil, "sqrt": np.sqrt, "log": np.log, "log2": np.log2,
}


def _reduce(fn: Callable[[Any, Any], Any], args: tuple) -> Any:
    if not args:
        raise ValueError("min() and max() need at least one argument")
    out = args[0]
    for a in args[1:]:
        out = fn(out, a)
    return out


def _finite(x: Any) -> Any:
    """Elementwise: a number that is finite, or anything that is not a number (a text)."""
    a = np.asarray(x)
    return np.isfinite(a) if a.dtype.kind in "fc" else np.ones(a.shape, dtype=bool)


def _truth(x: Any) -> Any:
    """Truthiness of a value or array, elementwise (a NaN is false: it came from an invalid step)."""
    a = np.asarray(x)
    if a.dtype == bool:
        return a
    if a.dtype.kind in "iuf":
        return (a != 0) & ~np.isnan(a) if a.dtype.kind == "f" else a != 0
    return a.astype(bool)


class Restriction:
    """A constraint parsed from text (see the module docstring); call it on a dict of values.

    text: the expression as given; names: the names it reads (a subset of the problem's).
    ``restriction(point)`` -> bool for one configuration; ``restriction.mask(columns)`` -> (n,)
    bool array for columns ``{name: (n,) array}`` (scalars broadcast).
    """

    def __init__(self, text: str, tree: ast.Expression, names: frozenset[str]) -> None:
        self.text = text
        self._tree = tree
        self.names = names
        self.__name__ = text  # how Problem.constraint_names shows it

    def _eval(self, node: ast.AST, env: Mapping[str, Any]) -> Any:
        if isinstance(node, ast.Expression):
            return self._eval(node.body, env)
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            return env[node.id]
        if isinstance(node, ast.BinOp):
            return _BINARY[type(node.op)](self._eval(node.left, env), self._eval(node.right, env))
        if isinstance(node, ast.UnaryOp):
            v = self._eval(node.operand, env)
            if isinstance(node.op, ast.Not):
                return np.logical_not(_truth(v))
            return np.negative(v) if isinstance(node.op, ast.USub) else np.positive(v)
        if isinstance(node, ast.BoolOp):
            parts = [_truth(self._eval(v, env)) for v in node.values]
            return _reduce(np.logical_and if isinstance(node.op, ast.And) else np.logical_or, tuple(parts))
        if isinstance(node, ast.Compare):
            left, out = self._eval(node.left, env), True
            for op, right_node in zip(node.ops, node.comparators):
                if isinstance(op, (ast.In, ast.NotIn)):
                    choices = [self._eval(e, env) for e in right_node.elts]  # type: ignore[attr-defined]
                    hit = np.isin(left, np.asarray(choices, dtype=object if _has_text(choices) else None))
                    step = hit if isinstance(op, ast.In) else np.logical_not(hit)
                    right = None
                else:
                    right = self._eval(right_node, env)
                    step = np.logical_and(_COMPARE[type(op)](left, right), _finite(left) & _finite(right))
                out = np.logical_and(out, step)
                left = right
            return out
        if isinstance(node, ast.IfExp):
            return np.where(_truth(self._eval(node.test, env)), self._eval(node.body, env),
                            self._eval(node.orelse, env))
        if isinstance(node, ast.Call):
            return _FUNCTIONS[node.func.id](*[self._eval(a, env) for a in node.args])  # type: ignore[attr-defined]
        raise AssertionError(f"unchecked node {type(node).__name__}")  # parse_restriction rejects it

    def mask(self, columns: Mapping[str, Any]) -> np.ndarray:
        """Whether each of ``n`` configurations is allowed: ``columns`` maps every name this
        restriction reads to an (n,) array (or a scalar); returns an (n,) bool array."""
        missing = sorted(self.names - set(columns))
        if missing:
            raise KeyError(f"restriction {self.text!r} needs {missing}")
        env = {n: _as_array(columns[n]) for n in self.names}
        n = max((np.size(v) for v in env.values()), default=1)
        with np.errstate(all="ignore"):
            out = _truth(self._eval(self._tree, env))
        return np.broadcast_to(out, (n,)).copy() if np.ndim(out) == 0 else np.asarray(out, dtype=bool)

    def __call__(self, point: Mapping[str, Any]) -> bool:
        return bool(self.mask({n: [point[n]] for n in self.names})[0])

    def __repr__(self) -> str:
        return f"Restriction({self.text!r})"


def _has_text(values: Iterable[Any]) -> bool:
    return any(isinstance(v, str) for v in values)


def _as_array(values: Any) -> np.ndarray:
    a = np.asarray(values)
    if a.dtype.kind == "b":
        return a.astype(np.int64)  # booleans compare with 0 and 1 as in the scripts
    if a.dtype.kind in "iu":
        return a.astype(np.int64)
    if a.dtype.kind == "f":
        return a.astype(float)
    return a.astype(object)


def _check(node: ast.AST, text: str, known: frozenset[str], used: set[str]) -> None:
    """Reject every node outside the whitelist, naming it; collect the names read into ``used``."""
    def bad(what: str) -> ValueError:
        where = f" at column {node.col_offset + 1}" if hasattr(node, "col_offset") else ""
        return ValueError(f"restriction {text!r}: {what}{where} is not allowed (allowed: numbers, strings, "
                          f"the problem's names, + - * / // % **, comparisons, and/or/not, 'x if c else y', "
                          f"'in [...]', and the functions {sorted(_FUNCTIONS)})")

    if isinstance(node, ast.Expression):
        _check(node.body, text, known, used)
    elif isinstance(node, ast.Constant):
        if not isinstance(node.value, (numbers.Real, str)):  # numbers (booleans too) and strings
            raise bad(f"the constant {node.value!r}")
    elif isinstance(node, ast.Name):
        if node.id in _FUNCTIONS:
            raise bad(f"the function name {node.id!r} outside a call")
        if node.id not in known:
            raise ValueError(f"restriction {text!r}: unknown name {node.id!r}; the problem's names are "
                             f"{sorted(known)}")
        used.add(node.id)
    elif isinstance(node, ast.BinOp):
        if type(node.op) not in _BINARY:
            raise bad(f"the operator {type(node.op).__name__}")
        _check(node.left, text, known, used)
        _check(node.right, text, known, used)
    elif isinstance(node, ast.UnaryOp):
        if not isinstance(node.op, (ast.Not, ast.USub, ast.UAdd)):
            raise bad(f"the operator {type(node.op).__name__}")
        _check(node.operand, text, known, used)
    elif isinstance(node, ast.BoolOp):
        for v in node.values:
            _check(v, text, known, used)
    elif isinstance(node, ast.Compare):
        _check(node.left, text, known, used)
        for op, right in zip(node.ops, node.comparators):
            if isinstance(op, (ast.In, ast.NotIn)):
                if not isinstance(right, (ast.List, ast.Tuple, ast.Set)):
                    raise bad("'in' followed by something other than a literal list")
                for e in right.elts:
                    _check(e, text, known, used)
            elif type(op) not in _COMPARE:
                raise bad(f"the comparison {type(op).__name__}")
            else:
                _check(right, text, known, used)
    elif isinstance(node, ast.IfExp):
        for part in (node.test, node.body, node.orelse):
            _check(part, text, known, used)
    elif isinstance(node, ast.Call):
        if not isinstance(node.func, ast.Name) or node.func.id not in _FUNCTIONS:
            raise bad("a call of anything but " + ", ".join(sorted(_FUNCTIONS)))
        if node.keywords:
            raise bad("a keyword argument")
        for a in node.args:
            if isinstance(a, ast.Starred):
                raise bad("a starred argument")
            _check(a, text, known, used)
    else:
        raise bad(f"{type(node).__name__}")


def parse_restriction(text: str, known: Iterable[str]) -> Restriction:
    """Parse ``text`` (a Python-syntax boolean expression over the names ``known``) into a
    :class:`Restriction`. Raises TypeError for a non-string and ValueError naming the problem for
    bad syntax, a name outside ``known`` or a construct outside the whitelist."""
    if not isinstance(text, str):
        raise TypeError(f"a restriction must be a string or a callable, got {text!r}")
    if len(text) > MAX_RESTRICTION_LENGTH:
        raise ValueError(f"restriction of {len(text)} characters is longer than {MAX_RESTRICTION_LENGTH}")
    stripped = text.strip()
    if not stripped:
        raise ValueError("a restriction must not be empty")
    try:
        tree = ast.parse(stripped, mode="eval")
    except SyntaxError as exc:
        raise ValueError(f"restriction {text!r} is not a valid expression: {exc.msg} "
                         f"(column {exc.offset})") from None
    used: set[str] = set()
    _check(tree, text, frozenset(known), used)
    return Restriction(text, tree, frozenset(used))

