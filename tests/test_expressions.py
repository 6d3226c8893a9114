"""Constraints written as text: the same answers as the Python functions they describe, on single
points and vectorised over columns, and nothing outside the whitelist ever runs."""

import itertools

import numpy as np
import pytest

import gptask as gt
from gptask.space.expressions import MAX_RESTRICTION_DEPTH, MAX_RESTRICTION_LENGTH, parse_restriction

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


def test_deep_nesting_is_refused_with_a_clear_error_and_shallow_nesting_agrees_with_python():
    # issue 40: 2,400 nested `not` (under the length limit) ended in RecursionError
    for text in ["not " * 2400 + "bx > 1", "bx" + " + bx" * 1500 + " > 1", "-" * 3000 + "bx > 1",
                 "(" * 300 + "bx" + ")" * 300 + " > 1"]:
        assert len(text) <= MAX_RESTRICTION_LENGTH
        with pytest.raises(ValueError, match=f"nests deeper than {MAX_RESTRICTION_DEPTH} levels"):
            parse_restriction(text, NAMES)
    for k in (0, 1, 40, 41):  # within the limit: the same answer as Python
        rule = parse_restriction("not " * k + "bx > 20", NAMES)
        assert [rule({"bx": v}) for v in (16, 48)] == [(k % 2 == 1) == (not v > 20) for v in (16, 48)]
    rule = parse_restriction(" + ".join(["bx"] * 40) + " == 40 * bx", NAMES)
    assert rule({"bx": 7})


@pytest.mark.parametrize("text,fn", [
    ("bx ** tx > 2 ** 62", lambda c: c["bx"] ** c["tx"] > 2 ** 62),
    ("bx ** tx < 9223372036854775807", lambda c: c["bx"] ** c["tx"] < 2 ** 63 - 1),
    ("bx * bx * bx * bx * bx * bx * bx > 0", lambda c: c["bx"] ** 7 > 0),
    ("-(bx * bx * bx * bx * bx * bx * bx) - bx < 0", lambda c: -(c["bx"] ** 7) - c["bx"] < 0),
    ("bx ** -tx < 0.01", lambda c: c["bx"] ** -c["tx"] < 0.01),
    ("bx ** -1 == 1 / bx and 2 ** -1 == 0.5", lambda c: True),
])
def test_integer_arithmetic_never_wraps_around(text, fn):
    # issue 40: `bx ** 10 ** 10 > 1` wrapped int64 around, silently false
    rule = parse_restriction(text, NAMES)
    pairs = [*itertools.product([2, 3, 1024, 9000, 3037000500], [1, 2, 10, 20]), (2, 62), (2, 63), (2, 64)]
    points = [{"bx": b, "tx": t} for b, t in pairs]  # 3037000500 ** 2 is just beyond int64
    expected = [bool(fn(p)) for p in points]
    assert [rule(p) for p in points] == expected
    assert rule.mask({"bx": np.array([b for b, _ in pairs]), "tx": np.array([t for _, t in pairs])}).tolist() == expected


def test_a_power_beyond_the_largest_float_is_an_error_naming_the_restriction():
    rule = parse_restriction("bx ** 10 ** 10 > 1", NAMES)
    exact = parse_restriction("bx ** 10 ** 10 >= 1", NAMES)  # 0 and 1 to any power are exact
    assert exact.mask({"bx": np.array([0, 1])}).tolist() == [False, True]
    with pytest.raises(ValueError, match=r"'bx \*\* 10 \*\* 10 > 1': bx \*\* 10 \*\* 10 is beyond the largest "
                                         r"float \(1.8e308\) at 2 \*\* 10000000000"):
        rule.mask({"bx": np.array([1, 2, 3])})
    with pytest.raises(ValueError, match="beyond the largest float"):
        parse_restriction("x ** 1000 > 1", NAMES)({"x": 10.0})  # as Python's 10.0 ** 1000 raises


def test_comparing_numbers_with_texts_is_refused_naming_the_restriction_and_the_dimension():
    # issue 40: such a comparison made every configuration infeasible, with no word why
    tasks = gt.Space([gt.Categorical("machine", ["a100", "h100"]), gt.Integer("m", 1, 100)])
    params = gt.Space([gt.Integer("bx", 1, 64), gt.Ordinal("mode", ["low", "high"]), gt.Boolean("pad"),
                       gt.Categorical("mix", ["a", 1]), gt.Real("x", 0.0, 1.0)])

    def problem(text, constants=None):
        return gt.Problem(tasks, params, lambda t, c: 1.0, constraints=[text], constants=constants)

    for text, what in [
        ('bx == "a"', r"'bx' \(an Integer parameter dimension, which holds numbers\) is compared with the text 'a'"),
        ("mode < 3", r"'mode' \(an Ordinal parameter dimension, which holds text\) is compared with the number 3"),
        ("3 != machine", r"the number 3 is compared with 'machine' \(a Categorical task dimension, which holds text"),
        ("machine in [1, 2]", r"'machine' \(a Categorical task dimension, which holds text\) is looked up in \[1, 2\]"),
        ("pad == 'true'", r"'pad' \(a Boolean parameter dimension"),
        ("x * 2 >= name", r"'x \* 2' \(a number\) is compared with 'name' \(a constant, which holds text\)"),
        ("1 < bx < mode", r"'bx' .* is compared with 'mode'"),
        ("(bx if pad else m) == 'big'", r"'bx if pad else m' \(a number\)"),
    ]:
        with pytest.raises(ValueError, match=what):
            problem(text, {"name": "gpu"})
    # like with like, and names of mixed or unknown kinds, stay allowed
    for text in ['machine == "a100" or bx > 8', "mode in ['low'] and m > 2", "mix == 1 or mix == 'a'",
                 "bx in [1, 2.5] and pad == 1", "(bx if pad else mode) == 'low'", "mode + 'x' == 'lowx'"]:
        assert problem(text).constraints[0].text == text
