import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import gptask as gt
from gptask.space.dimensions import Space, dimension_from_json


def mixed_space():
    return gt.Space([
        gt.Real("x", -2.0, 3.0),
        gt.Real("lr", 1e-4, 1.0, log=True),
        gt.Integer("mb", 1, 256, log=True),
        gt.Integer("p", 1, 7),
        gt.Categorical("alg", ["ring", "tree", "auto"]),
        gt.Categorical("flag", [True, False]),
    ])


@given(
    x=st.floats(-2.0, 3.0), lr=st.floats(1e-4, 1.0), mb=st.integers(1, 256), p=st.integers(1, 7),
    alg=st.sampled_from(["ring", "tree", "auto"]), flag=st.booleans(),
)
@settings(max_examples=200, deadline=None)
def test_encode_decode_round_trip(x, lr, mb, p, alg, flag):
    s = mixed_space()
    point = {"x": x, "lr": lr, "mb": mb, "p": p, "alg": alg, "flag": flag}
    enc = s.encode([point])
    assert enc.shape == (1, s.n_columns) == (1, 4 + 3 + 2)
    assert np.all((enc >= 0) & (enc <= 1))
    back = s.decode(enc)[0]
    assert back["mb"] == mb and back["p"] == p and back["alg"] == alg and back["flag"] is flag
    assert math.isclose(back["x"], x, rel_tol=1e-12, abs_tol=1e-12)
    # decoding rounds a real to KEY_DECIMALS (12) decimals: up to 5e-13 off, 4e-9 relative at lr = 1.3e-4
    assert math.isclose(back["lr"], lr, rel_tol=1e-9, abs_tol=1e-12)


@given(u=st.lists(st.floats(0, 1), min_size=9, max_size=9))
@settings(max_examples=200, deadline=None)
def test_decode_any_cube_point_gives_a_valid_point(u):
    s = mixed_space()
    p = s.decode(np.array([u]))[0]
    assert p in s
    # vectorised snapping equals encode(decode(.)) and is idempotent
    enc = s.snap(np.array([u]))
    assert np.allclose(enc, s.encode(s.decode(np.array([u]))), atol=1e-12)
    assert np.allclose(s.snap(enc), enc)


def test_integer_cells_are_equal_width():
    d = gt.Integer("k", 0, 3)
    u = np.linspace(0, 1, 100001)[:-1]  # exclude the upper edge
    counts = np.bincount(d.decode(u.reshape(-1, 1)), minlength=4)
    assert np.allclose(counts / counts.sum(), 0.25, atol=1e-3)


def test_log_integer_uses_log_scale():
    d = gt.Integer("mb", 1, 256, log=True)
    mid = d.decode(np.array([[0.5]]))[0]
    assert mid == round(math.sqrt(0.5 * 256.5))  # geometric middle of the padded range [0.5, 256.5]
    assert gt.Integer("mb", 1, 256).decode(np.array([[0.5]]))[0] in (128, 129)  # linear middle


def test_categorical_one_hot_no_order():
    d = gt.Categorical("alg", ["a", "b", "c"])
    enc = d.encode(["a", "b", "c"])
    assert np.array_equal(enc, np.eye(3))
    # equal distances between all choices: no invented order
    dists = {round(float(np.linalg.norm(enc[i] - enc[j])), 12) for i in range(3) for j in range(3) if i != j}
    assert len(dists) == 1


def test_categorical_takes_numpy_strings_and_numbers_as_its_choices():
    # a choice read from a numpy array (np.str_) was refused: "variant='col' is not one of [..., 'col']"
    d = gt.Categorical("variant", ["row", "blocked", "col", 3])
    picked = np.array(["row", "blocked", "col"])[2]
    assert d.validate(picked) == "col" and type(d.validate(picked)) is str
    assert d.validate(np.int64(3)) == 3 and d.index("col") == 2
    with pytest.raises(ValueError, match="is not one of"):
        d.validate(np.str_("3"))


@pytest.mark.parametrize("make, msg", [
    (lambda: gt.Real("x", 10, 5), "lo <= hi"),
    (lambda: gt.Integer("x", 5, 1), "lo <= hi"),
    (lambda: gt.Real("x", 0, 1, log=True), "lo > 0"),
    (lambda: gt.Integer("x", 0, 4, log=True), "lo >= 1"),
    (lambda: gt.Categorical("c", []), "must not be empty"),
    (lambda: gt.Categorical("c", ["a", "a"]), "unique"),
    (lambda: gt.Space([gt.Real("x", 0, 1), gt.Integer("x", 0, 3)]), "unique"),
    (lambda: gt.Space([]), "at least one"),
    (lambda: gt.Real("x", 0, float("nan")), "finite"),
])
def test_bad_dimensions_raise_value_error(make, msg):
    with pytest.raises(ValueError, match=msg):
        make()


@pytest.mark.parametrize("make", [
    lambda: gt.Integer("x", 0.5, 3),
    lambda: gt.Real("x", "0", 1),
    lambda: gt.Categorical("c", "abc"),
    lambda: gt.Space([("x", 0, 1)]),
    lambda: gt.Real("", 0, 1),
])
def test_bad_types_raise_type_error(make):
    with pytest.raises(TypeError):
        make()


def test_validate_names_missing_unknown_and_outside():
    s = mixed_space()
    good = {"x": 0.0, "lr": 0.1, "mb": 8, "p": 2, "alg": "ring", "flag": True}
    assert s.validate(good) == good
    with pytest.raises(ValueError, match="missing"):
        s.validate({k: v for k, v in good.items() if k != "mb"})
    with pytest.raises(ValueError, match="unknown keys"):
        s.validate({**good, "zz": 1})
    with pytest.raises(ValueError, match="outside"):
        s.validate({**good, "p": 9})
    with pytest.raises(ValueError, match="not one of"):
        s.validate({**good, "alg": "fft"})
    with pytest.raises(ValueError, match="integer"):
        s.validate({**good, "mb": 2.5})


def test_json_round_trip():
    s = mixed_space()
    assert Space.from_json(s.to_json()) == s
    with pytest.raises(ValueError, match="unknown dimension type"):
        dimension_from_json({"type": "lambda", "name": "x"})


def test_problem_constraints_and_signature():
    s = gt.Space([gt.Integer("m", 1, 100)])
    p = gt.Space([gt.Integer("mb", 1, 64)])

    def mb_fits(c):
        return c["mb"] <= c["m"]

    prob = gt.Problem(s, p, lambda t, x: 1.0, constraints=[mb_fits, lambda c: c["mb"] % c["k"] == 0],
                      constants={"k": 2})
    assert prob.is_feasible({"m": 10}, {"mb": 4})
    assert prob.violated({"m": 10}, {"mb": 12}) == [0]
    assert prob.violated({"m": 10}, {"mb": 3}) == [1]
    assert "mb_fits" in prob.constraint_names([0])[0]
    assert prob.signature_hash() == gt.Problem(s, p, lambda t, x: 2.0, [mb_fits, mb_fits], {"k": 2}).signature_hash()
    with pytest.raises(ValueError, match="both"):
        gt.Problem(s, gt.Space([gt.Integer("m", 1, 3)]), lambda t, x: 0)
    with pytest.raises(TypeError, match="callable"):
        gt.Problem(s, p, "x**2")


def test_ordinal_distinct_values_are_checked_as_python_compares_them():
    # issue 40: the check was quadratic (20,000 values in 4.6 s); the result must stay the same
    with pytest.raises(ValueError, match=r"repeated: \[1\]"):
        gt.Ordinal("a", [1, 2, 1.0])  # 1 == 1.0, as in Python
    with pytest.raises(ValueError, match=r"repeated: \[3, 7\]"):
        gt.Ordinal("a", [7, 3, 5, 3, 7.0, 7])
    with pytest.raises(ValueError, match=r"repeated: \['x'\]"):
        gt.Ordinal("a", ["x", "y", "x"])
    with pytest.raises(TypeError, match="all numbers or all strings"):
        gt.Ordinal("a", [1, True])  # a boolean is not a number here
    with pytest.raises(TypeError, match="all numbers or all strings"):
        gt.Ordinal("a", ["1", 1])
    big = gt.Ordinal("a", list(range(20_000, 0, -1)) + [0.5])
    assert big.values()[:3] == [0.5, 1, 2] and big.n_values() == 20_001
    with pytest.raises(ValueError, match=r"repeated: \[12345\]"):
        gt.Ordinal("a", list(range(20_000)) + [12345.0])
    # values are found by hash as they were by ==: equal numbers of any type, never a boolean or a text
    o = gt.Ordinal("b", [1, 2.5, 4])
    assert [o.index(v) for v in (1.0, np.int64(4), np.float64(2.5), 4.0)] == [0, 2, 1, 2]
    for bad, err in [(True, TypeError), ("1", TypeError), (3, ValueError), (float("nan"), ValueError)]:
        with pytest.raises(err):
            o.index(bad)
    s = gt.Ordinal("c", ["low", "high"])
    assert s.index(np.str_("high")) == 1
    with pytest.raises(ValueError, match="not one of the allowed values"):
        s.index(0)
    assert big.encode(big.values()).ravel().tolist() == big.positions.tolist()


@pytest.mark.parametrize("values", [[-1e308, 1e308], [-1.7e308, 0.0, 1.7e308], [-1e308, -1e307, 1e308, 5.0]])
def test_ordinal_spanning_more_than_the_largest_float_encodes_and_round_trips(values):
    # issue 40: Ordinal("a", [-1e308, 1e308]) encoded to NaN
    o = gt.Ordinal("a", values)
    enc = o.encode(values)
    assert np.isfinite(enc).all() and (enc >= 0).all() and (enc <= 1).all()
    assert o.decode(enc) == values
    ordered = sorted(values)
    expected = [(v / 2 - ordered[0] / 2) / (ordered[-1] / 2 - ordered[0] / 2) for v in ordered]
    np.testing.assert_allclose(o.positions, expected, rtol=1e-12)
    assert o.positions[0] == 0.0 and o.positions[-1] == 1.0
    snapped = o.snap_columns(np.array([[0.0], [0.49], [1.0]])[:, :1].repeat(o.n_columns, axis=1))
    assert np.isfinite(snapped).all()
