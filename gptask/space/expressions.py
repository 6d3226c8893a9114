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
makes the comparison it feeds false, so such a configuration counts as not allowed. Integer
``+``, ``-``, ``*`` and ``**`` never wrap around: a result beyond int64 is carried as a float
(``2 ** 70 > 1`` is true), an integer raised to a negative power is a float (``2 ** -1 == 0.5``),
and a power beyond the largest float (``bx ** 10 ** 10``) is an error naming the restriction, as
Python's own float power raises.

A text nests at most :data:`MAX_RESTRICTION_DEPTH` levels (``not not ... x``, a sum of that many
terms), so that neither parsing nor judging it can exhaust Python's stack. Given the kinds of the
names (numbers or text, ``kinds=``), :func:`parse_restriction` also refuses a comparison of a
number with a text (``bx == "a"``, ``alg in [1, 2]``), which no configuration could pass.
"""

from __future__ import annotations

import ast
import numbers
from collections.abc import Iterable, Mapping
from typing import Any, Callable

import numpy as np

__all__ = ["Restriction", "parse_restriction", "MAX_RESTRICTION_LENGTH", "MAX_RESTRICTION_DEPTH"]

#: longest restriction text accepted (characters): a guard against pathological input
MAX_RESTRICTION_LENGTH = 10_000
#: deepest nesting of a restriction's syntax tree (``not not ... x``, ``a + a + ... + a``): the
#: parser and the interpreter recurse once per level, within Python's stack of 1,000 frames
MAX_RESTRICTION_DEPTH = 100
#: integer results at or beyond this magnitude would wrap around in int64
_INT64_LIMIT = 2.0**63

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
            return self._arithmetic(node, self._eval(node.left, env), self._eval(node.right, env))
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

    def _arithmetic(self, node: ast.BinOp, left: Any, right: Any) -> Any:
        """``left op right`` elementwise; integer ``+ - * **`` never wrap (module docstring)."""
        op = type(node.op)
        a, b = (np.asarray(v) for v in (left, right))
        a, b = (v.astype(np.int64) if v.dtype.kind == "b" else v for v in (a, b))
        integers = a.dtype.kind in "iub" and b.dtype.kind in "iub"
        if op is ast.Pow and a.dtype.kind in "iubf" and b.dtype.kind in "iubf":
            shadow = np.power(a.astype(float), b.astype(float))
            beyond = np.isinf(shadow) & np.isfinite(a) & np.isfinite(b) & (a != 0)
            if beyond.any():
                k = int(np.argmax(np.broadcast_to(beyond, shadow.shape).reshape(-1)))
                base, power = (np.broadcast_to(v, shadow.shape).reshape(-1)[k] for v in (a, b))
                raise ValueError(f"restriction {self.text!r}: {ast.unparse(node)} is beyond the largest float "
                                 f"(1.8e308) at {_plain(base)!r} ** {_plain(power)!r}; bound the exponent or "
                                 "compare logarithms")
            if not integers or np.any(b < 0):  # a float, or an integer to a negative power, as in Python
                return shadow
            wraps = ~(np.abs(shadow) < _INT64_LIMIT)
            return np.where(wraps, shadow, np.power(a, b)) if wraps.any() else np.power(a, b)
        if integers and op in (ast.Add, ast.Sub, ast.Mult):
            exact = _BINARY[op](a, b)
            shadow = _BINARY[op](a.astype(float), b.astype(float))
            wraps = ~(np.abs(shadow) < _INT64_LIMIT)
            return np.where(wraps, shadow, exact) if wraps.any() else exact
        return _BINARY[op](a, b)

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


def _plain(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value


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


def _depth(tree: ast.AST) -> int:
    """How many levels the syntax tree ``tree`` nests (walked without recursion)."""
    deepest, stack = 0, [(tree, 1)]
    while stack:
        node, level = stack.pop()
        deepest = max(deepest, level)
        stack.extend((child, level + 1) for child in ast.iter_child_nodes(node))
    return deepest


def _kind(node: ast.AST, kinds: Mapping[str, tuple[str, str]]) -> str | None:
    """What a whitelisted expression yields: "number", "text", or None when that is not known."""
    if isinstance(node, ast.Constant):
        return "text" if isinstance(node.value, str) else "number"
    if isinstance(node, ast.Name):
        return kinds[node.id][0] if node.id in kinds else None
    if isinstance(node, (ast.Compare, ast.BoolOp, ast.UnaryOp, ast.Call)):
        return "number"  # truth values, signs and the functions' results are numbers
    if isinstance(node, ast.BinOp):
        left, right = _kind(node.left, kinds), _kind(node.right, kinds)
        return "number" if left == right == "number" else None
    if isinstance(node, ast.IfExp):
        body = _kind(node.body, kinds)
        return body if body == _kind(node.orelse, kinds) else None
    return None


def _describe_side(node: ast.AST, kind: str, kinds: Mapping[str, tuple[str, str]]) -> str:
    if isinstance(node, ast.Name) and node.id in kinds:
        return f"{node.id!r} ({kinds[node.id][1]}, which holds {'numbers' if kind == 'number' else 'text'})"
    if isinstance(node, ast.Constant):
        return f"the {'number' if kind == 'number' else 'text'} {node.value!r}"
    return f"{ast.unparse(node)!r} (a {'number' if kind == 'number' else 'text'})"


def _check_kinds(tree: ast.AST, text: str, kinds: Mapping[str, tuple[str, str]]) -> None:
    """Refuse a comparison of a number with a text (``==``, ``<``, ``in [...]``...): it holds for no
    configuration, or for all of them, whatever the values."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.Compare):
            continue
        left = node.left
        for op, right in zip(node.ops, node.comparators):
            lk = _kind(left, kinds)
            if isinstance(op, (ast.In, ast.NotIn)):
                elts = right.elts  # type: ignore[attr-defined]
                other = {_kind(e, kinds) for e in elts}
                if lk is not None and len(other) == 1 and None not in other and other != {lk}:
                    raise ValueError(f"restriction {text!r}: {_describe_side(left, lk, kinds)} is looked up in "
                                     f"{ast.unparse(right)}, a list of {'numbers' if lk == 'text' else 'texts'} "
                                     f"(column {right.col_offset + 1}): no configuration can be among them")
            else:
                rk = _kind(right, kinds)
                if lk is not None and rk is not None and lk != rk:
                    raise ValueError(f"restriction {text!r}: {_describe_side(left, lk, kinds)} is compared with "
                                     f"{_describe_side(right, rk, kinds)} (column {left.col_offset + 1}): a number "
                                     "never equals or orders with a text; compare like with like")
            left = right


def parse_restriction(text: str, known: Iterable[str],
                      kinds: Mapping[str, tuple[str, str]] | None = None) -> Restriction:
    """Parse ``text`` (a Python-syntax boolean expression over the names ``known``) into a
    :class:`Restriction`. Raises TypeError for a non-string and ValueError naming the problem for
    bad syntax, a name outside ``known``, a construct outside the whitelist, or nesting deeper than
    :data:`MAX_RESTRICTION_DEPTH`.

    kinds: optionally, for names whose values are all numbers (booleans count) or all texts,
    ``{name: (kind, label)}`` with kind ``"number"`` or ``"text"`` and a label naming the name in
    messages (``"an Integer dimension"``); a comparison of a number with a text is then refused."""
    if not isinstance(text, str):
        raise TypeError(f"a restriction must be a string or a callable, got {text!r}")
    if len(text) > MAX_RESTRICTION_LENGTH:
        raise ValueError(f"restriction of {len(text)} characters is longer than {MAX_RESTRICTION_LENGTH}")
    stripped = text.strip()
    if not stripped:
        raise ValueError("a restriction must not be empty")
    too_deep = (f"restriction {text[:60]!r}{'...' if len(text) > 60 else ''} nests deeper than "
                f"{MAX_RESTRICTION_DEPTH} levels (operators within operators); split it into several restrictions")
    try:
        tree = ast.parse(stripped, mode="eval")
    except SyntaxError as exc:
        if "too many nested" in str(exc.msg) or "too complex" in str(exc.msg):
            raise ValueError(too_deep) from None
        raise ValueError(f"restriction {text!r} is not a valid expression: {exc.msg} "
                         f"(column {exc.offset})") from None
    except (RecursionError, MemoryError):  # the parser's own stack
        raise ValueError(too_deep) from None
    if _depth(tree) > MAX_RESTRICTION_DEPTH:
        raise ValueError(too_deep)
    used: set[str] = set()
    _check(tree, text, frozenset(known), used)
    if kinds:
        _check_kinds(tree, text, kinds)
    return Restriction(text, tree, frozenset(used))
