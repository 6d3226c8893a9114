"""A callable constraint judged on whole columns (gptask.problem.rule_columns) gives exactly the
verdicts of calling it per configuration with plain Python values (the reference, computed here by
brute force), whether it takes arrays or not."""

import itertools
import math

import numpy as np
import pytest

from apps.scalapack_qr.problem import constraints_for
from gptask.problem.rule_columns import COLUMN_CHECK_POINTS, COLUMN_INT_MAX, callable_mask


def grid(**values):
    rows = list(itertools.product(*values.values()))
    return {name: np.asarray([r[k] for r in rows]) for k, name in enumerate(values)}, len(rows)


def reference(rule, base, columns, n):
    """bool(rule(point)) per point with Python values; None where the call raises."""
    out = []
    for r in range(n):
        point = {**base, **{k: v[r].item() for k, v in columns.items()}}
        try:
            out.append(bool(rule(point)))
        except Exception:
            out.append(None)
    return out


class Counted:
    def __init__(self, rule):
        self.rule, self.calls = rule, 0

    def __call__(self, c):
        self.calls += 1
        return self.rule(c)


def judged(rule, base, columns, n):
    errors = []
    mask = callable_mask(rule, base, columns, n, lambda exc, point: errors.append((type(exc), point)))
    return mask, errors


def test_pdgeqrfs_rules_are_judged_on_whole_columns_with_the_per_point_verdicts():
    columns, n = grid(mb=[1, 2, 7, 64, 256], nb=[1, 3, 100, 256], nproc=[1, 2, 3, 4], p=[1, 2, 3, 4], nth=[1, 2])
    base = {"nodes": 1, "cores": 4, "m": 300, "n": 500}
    for rule in constraints_for(False):
        counted = Counted(rule)
        mask, errors = judged(counted, base, columns, n)
        assert mask.tolist() == reference(rule, base, columns, n) and not errors
        assert counted.calls <= 1 + COLUMN_CHECK_POINTS < n  # once on the columns, then the spot check


def test_a_rule_written_for_one_point_is_called_per_point():
    columns, n = grid(x=range(-5, 6), y=[0.5, 1.5, 2.5])

    def branching(c):
        if c["x"] > 0:
            return c["y"] < 2
        return max(c["x"], -2) == -2 and math.isfinite(c["y"])

    counted = Counted(branching)
    mask, errors = judged(counted, {}, columns, n)
    assert mask.tolist() == reference(branching, {}, columns, n) and not errors
    assert counted.calls == n + 1


def test_a_division_by_zero_is_a_violation_recorded_as_per_point_not_an_inf():
    columns, n = grid(a=[1, 2, 3], b=[0, 1, 2])
    rule = lambda c: c["a"] / c["b"] > 0.5  # noqa: E731
    mask, errors = judged(rule, {}, columns, n)
    ref = reference(rule, {}, columns, n)
    assert mask.tolist() == [bool(v) for v in ref]
    assert [p for _, p in errors] == [{"a": a, "b": 0} for a in (1, 2, 3)]
    assert all(kind is ZeroDivisionError for kind, _ in errors)


def test_values_that_could_overflow_int64_are_judged_per_point():
    columns, n = grid(x=[1, 2, 3, 2 ** 21], y=[1, 2])
    rule = lambda c: c["x"] * c["y"] * c["big"] > 0  # noqa: E731 - overflows int64 on arrays
    for base in ({"big": 2 ** 62}, {"big": 1}):
        counted = Counted(rule)
        mask, _ = judged(counted, base, columns, n)
        assert mask.tolist() == reference(rule, base, columns, n) == [True] * n
        assert counted.calls == n  # COLUMN_INT_MAX exceeded: not called on the columns at all
    assert 2 ** 21 > COLUMN_INT_MAX


def test_texts_and_flags_are_judged_like_python_values():
    columns, n = grid(algo=["ring", "tree", "rabenseifner"], seg=[0, 4096, 65536], pipelined=[False, True])
    for rule in (lambda c: (c["algo"] == "ring") | (c["seg"] >= 4096),
                 lambda c: (c["algo"] != "tree") & c["pipelined"],
                 lambda c: c["algo"].startswith("r") or c["seg"] == 0):
        mask, errors = judged(rule, {"cap": 65536}, columns, n)
        assert mask.tolist() == reference(rule, {"cap": 65536}, columns, n) and not errors


def test_array_verdicts_that_disagree_with_the_rule_per_point_are_not_used():
    columns, n = grid(x=range(100))
    # a rule that answers an array differently than it answers a point
    sly = lambda c: (c["x"] > 3) if isinstance(c["x"], int) else np.ones(len(c["x"]), dtype=bool)  # noqa: E731
    mask, _ = judged(sly, {}, columns, n)
    assert mask.tolist() == [x > 3 for x in range(100)]


def test_every_point_reaches_the_rule_as_plain_python_values():
    columns, n = grid(k=[1, 2], r=[0.5], s=["a"])
    columns["o"] = np.asarray([np.int64(3), "x"], dtype=object)
    seen = []
    mask, _ = judged(lambda c: seen.append({k: type(v) for k, v in c.items()}) is None, {}, columns, n)
    assert mask.all() and seen and all(t == {"k": int, "r": float, "s": str, "o": t["o"]} for t in seen)
    assert {t["o"] for t in seen} == {int, str}


@pytest.mark.parametrize("rule", [lambda c: c["missing"] > 1, lambda c: 1 / 0])
def test_a_rule_that_always_raises_records_every_point(rule):
    columns, n = grid(x=[1, 2, 3])
    mask, errors = judged(rule, {}, columns, n)
    assert not mask.any() and len(errors) == n
