import numpy as np
import pytest

import gptask as gt
from gptask.space.sampling import NoFeasiblePoint, centred_normal_points, feasible_lhs, lhs_points, lhs_unit, point_key


def test_lhs_is_a_latin_hypercube():
    rng = np.random.default_rng(3)
    for n, d in [(10, 3), (37, 5), (1, 2)]:
        u = lhs_unit(n, d, rng)
        assert u.shape == (n, d)
        strata = np.floor(u * n).astype(int)
        for j in range(d):
            assert sorted(strata[:, j]) == list(range(n))


def test_lhs_points_categorical_balanced_and_valid():
    s = gt.Space([gt.Categorical("a", ["x", "y", "z"]), gt.Integer("k", 1, 10)])
    pts = lhs_points(s, 30, np.random.default_rng(0))
    counts = {c: sum(p["a"] == c for p in pts) for c in "xyz"}
    assert counts == {"x": 10, "y": 10, "z": 10}
    assert sorted(p["k"] for p in pts) == sorted([k for k in range(1, 11)] * 3)


def test_feasible_lhs_respects_constraints_and_is_distinct():
    s = gt.Space([gt.Integer("p", 1, 8), gt.Integer("q", 1, 8)])
    pts = feasible_lhs(s, 12, np.random.default_rng(1), lambda c: c["p"] * c["q"] <= 8)
    assert len(pts) == 12
    assert all(p["p"] * p["q"] <= 8 for p in pts)
    assert len({point_key(p) for p in pts}) == 12


def test_feasible_lhs_fails_fast_with_constraint_name():
    s = gt.Space([gt.Real("x", 0, 1)])
    with pytest.raises(NoFeasiblePoint, match="my rule"):
        feasible_lhs(s, 3, np.random.default_rng(0), lambda c: False, describe="my rule")


def test_feasible_lhs_returns_what_exists_when_space_is_small():
    s = gt.Space([gt.Integer("k", 1, 3)])
    pts = feasible_lhs(s, 10, np.random.default_rng(0))
    assert sorted(p["k"] for p in pts) == [1, 2, 3]


def test_centred_normal_concentrates_and_stays_feasible():
    s = gt.Space([gt.Real("x", 0, 1), gt.Real("y", 0, 1)])
    pts = centred_normal_points(s, np.array([0.2, 0.8]), np.array([0.05, 0.05]), 50,
                                np.random.default_rng(0), lambda c: c["x"] < 0.25)
    xy = np.array([[p["x"], p["y"]] for p in pts])
    assert len(pts) == 50 and np.all(xy[:, 0] < 0.25)
    assert abs(np.median(xy[:, 1]) - 0.8) < 0.03
