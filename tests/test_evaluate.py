import math
import time

import numpy as np
import pytest

from gptask.evaluate import EvaluationFailed, Evaluator


def test_repeats_aggregate_and_raw_samples_kept():
    vals = iter([3.0, 1.0, 2.0])
    ev = Evaluator(lambda t, p: next(vals), repeats=3, aggregate="min")
    out = ev({}, {})
    assert out.ok and out.value == 1.0 and out.samples == (3.0, 1.0, 2.0)
    vals2 = iter([3.0, 1.0, 2.0])
    assert Evaluator(lambda t, p: next(vals2), repeats=3, aggregate="median")({}, {}).value == 2.0


@pytest.mark.parametrize("fn, reason", [
    (lambda t, p: float("nan"), "NaN"),
    (lambda t, p: float("inf"), "inf"),
    (lambda t, p: "fast", "not a number"),
    (lambda t, p: 1 / 0, "ZeroDivisionError"),
    (lambda t, p: (_ for _ in ()).throw(EvaluationFailed("job crashed: exit 139")), "job crashed"),
])
def test_failures_become_failed_outcomes_with_reason(fn, reason):
    out = Evaluator(fn)({}, {})
    assert out.status == "failed" and out.value is None and reason in out.reason


def _sleepy(task, params):
    time.sleep(params["s"])
    return params["s"]


def test_timeout_kills_hung_objective():
    ev = Evaluator(_sleepy, timeout=0.5)
    t0 = time.perf_counter()
    out = ev({}, {"s": 30})
    assert out.status == "failed" and "timeout" in out.reason
    assert time.perf_counter() - t0 < 10
    ok = ev({}, {"s": 0.01})
    assert ok.ok and math.isclose(ok.value, 0.01)


def test_timeout_path_reports_errors_and_crashes():
    import os

    assert "ValueError: bad" in Evaluator(lambda t, p: (_ for _ in ()).throw(ValueError("bad")), timeout=5)({}, {}).reason
    assert "died" in Evaluator(lambda t, p: os._exit(3), timeout=5)({}, {}).reason


@pytest.mark.parametrize("kw", [{"repeats": 0}, {"aggregate": "max"}, {"timeout": -1}, {"repeats": 1.5}])
def test_bad_settings(kw):
    with pytest.raises(ValueError):
        Evaluator(lambda t, p: 1.0, **kw)


def test_numpy_scalar_return_accepted():
    assert Evaluator(lambda t, p: np.float32(2.5))({}, {}).value == 2.5
