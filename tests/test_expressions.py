"""Constraints written as text: the same answers as the Python functions they describe, on single
points and vectorised over columns, and nothing outside the whitelist ever runs."""

import itertools

import numpy as np
import pytest

import gptask as gt
from gptask.expressions import MAX_RESTRICTION_LENGTH, parse_restriction

NAMES = ["bx", "by", "tx", "ty", "pad", "shm", "fw", "fh", "alg", "x"]

# each text with the plain Python function it means (the independent reference)
CASES = [
    ("pad==0 or bx % 32 != 0", lambda c: c["pad"] == 0 or c["bx"] % 32 != 0),
    ("bx*by<=1024", lambda c: c["bx"] * c["by"] <= 1024),
    ("shm == 0 or (((bx*tx+(fw-1)))*((by*ty+(fh-1)))) < 12*1024",
     lambda c: c["shm"] == 0 or (c["bx"] * c["tx"] + c["fw"] - 1) * (c["by"] * c["ty"] + c["fh"] - 1) < 12 * 1024),
    ("not (bx // 3 > by ** 2) and -tx < 0", lambda c: not (c["bx"] // 3 > c["by"] ** 2) and -c["tx"] < 0),
    ("1 <= tx < ty <= 3", lambda c: 1 <= c["tx"] < c["ty"] <= 3),
    ("alg in ['a', 'c'] or max(bx, by * 8) >= 64", lambda c: c["alg"] in ["a", "c"] or max(c["bx"], c["by"] * 8) >= 64),
    ("(bx if pad else by) % 2 == 0", lambda c: (c["bx"] if c["pad"] else c["by"]) % 2 == 0),
    ("abs(x - 0.5) < 0.25 and round(x * 4) != 2", lambda c: abs(c["x"] - 0.5) < 0.25 and round(c["x"] * 4) != 2),
    ("bx / (tx - 1) > 10", None),  # divides by zero at tx = 1: such points are not allowed
]


def _grid():
    return [dict(zip(NAMES, c)) for c in itertools.product(
        [16, 48, 64, 96, 256], [1, 2, 4, 16], [1, 2, 3], [1, 2, 3, 4], [0, 1], [0, 1], [15], [15], ["a", "b", "c"],
        [0.1, 0.3, 0.55, 0.8])]


def _reference(fn, text, point):
    if fn is not None:
        return bool(fn(point))
    return point["tx"] != 1 and point["bx"] / (point["tx"] - 1) > 10


@pytest.mark.parametrize("text,fn", CASES)
def test_text_restrictions_agree_with_python_on_points_and_columns(text, fn):
    rule = parse_restriction(text, NAMES)
    points = _grid()
    expected = np.array([_reference(fn, text, p) for p in points])
    assert [rule(p) for p in points] == expected.tolist()
    columns = {n: np.array([p[n] for p in points], dtype=object if n == "alg" else None) for n in NAMES}
    assert np.array_equal(rule.mask(columns), expected)
    assert expected.any() or text.startswith("1 <=")


@pytest.mark.parametrize("text,what", [
    ("__import__('os').system('true')", "a call of anything but"),
    ("bx.real > 0", "Attribute"),
    ("[bx][0] > 0", "Subscript"),
    ("(lambda: 1)()", "a call of anything but"),
    ("open", "unknown name 'open'"),
    ("y > 1", "unknown name 'y'"),
    ("bx > 1 if", "not a valid expression"),
    ("max", "outside a call"),
    ("max(*[bx])", "starred"),
    ("round(x, ndigits=1) > 0", "keyword"),
    ("bx in range(3)", "literal list"),
    ("bx @ by", "MatMult"),
    ("bx > None", "constant None"),
    ("", "must not be empty"),
])
def test_anything_outside_the_whitelist_is_refused_with_its_name(text, what):
    with pytest.raises(ValueError, match=what.replace("(", "\\(").replace("[", "\\[")):
        parse_restriction(text, NAMES)


def test_restrictions_reach_problems_and_their_errors_name_the_rule():
    tasks = gt.Space([gt.Integer("m", 1, 100)])
    params = gt.Space([gt.Integer("mb", 1, 64), gt.Integer("p", 1, 4)])
    problem = gt.Problem(tasks, params, lambda t, c: 1.0, constraints=["mb * p <= m", lambda c: c["p"] != 3],
                         constants={"cores": 4})
    assert problem.is_feasible({"m": 10}, {"mb": 5, "p": 2})
    assert not problem.is_feasible({"m": 10}, {"mb": 6, "p": 2})
    bad = problem.violated({"m": 10}, {"mb": 6, "p": 3})
    assert problem.constraint_names(bad) == ["constraint #0 (mb * p <= m)", "constraint #1"]
    assert problem.signature()["restrictions"] == ["mb * p <= m"]
    with pytest.raises(ValueError, match="unknown name 'q'"):
        gt.Problem(tasks, params, lambda t, c: 1.0, constraints=["mb * q <= m"])
    with pytest.raises(TypeError, match="callable on a dict or a text"):
        gt.Problem(tasks, params, lambda t, c: 1.0, constraints=[3])
    with pytest.raises(ValueError, match="longer than"):
        parse_restriction("bx" + " + bx" * MAX_RESTRICTION_LENGTH, NAMES)
