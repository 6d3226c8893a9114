import math
import time

import numpy as np
import pytest

from gptask.evaluation.evaluate import EvaluationFailed, EvaluationInterrupted, Evaluator, Outcome
from gptask.data.trials import Status


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


@pytest.mark.parametrize("kw, error", [({"repeats": 0}, ValueError), ({"aggregate": "max"}, ValueError),
                                       ({"timeout": -1}, ValueError), ({"repeats": 1.5}, TypeError)])
def test_bad_settings(kw, error):
    with pytest.raises(error, match=next(iter(kw))):
        Evaluator(lambda t, p: 1.0, **kw)


def test_numpy_scalar_return_accepted():
    assert Evaluator(lambda t, p: np.float32(2.5))({}, {}).value == 2.5


def test_noise_policy_decides_the_samples_per_task():
    from gptask.evaluation.noise import StaticResampling

    rng = np.random.default_rng(0)
    ev = Evaluator(lambda t, p: 1.0 + t["t"] + rng.exponential(0.1), noise=StaticResampling(k=4, aggregate="min"))
    out = ev({"t": 1.0}, {"x": 0})
    assert out.ok and len(out.samples) == 4 and out.value == min(out.samples) and out.reason == ""
    # state is per task: a second task starts with its own incumbent
    assert len(ev._sessions) == 1 and ev({"t": 0.0}, {"x": 0}).ok and len(ev._sessions) == 2


@pytest.mark.parametrize("timeout", [None, 5.0])
def test_pruned_run_is_stopped_at_its_deadline_and_marked_censored(timeout):
    from gptask.evaluation.noise import Pruner, RunCensored, StaticResampling

    def objective(task, params, deadline=None):
        cost = params["cost"]
        if deadline is not None and cost > deadline:
            raise RunCensored(deadline)  # a real app would stop its run here
        return cost

    ev = Evaluator(objective, timeout=timeout, noise=StaticResampling(k=1), pruner=Pruner(factor=2.0))
    assert ev({"t": 0}, {"cost": 1.0}).value == 1.0  # no incumbent yet: no bound
    slow = ev({"t": 0}, {"cost": 10.0})
    assert slow.status is Status.CENSORED and slow.reason.startswith("censored") and slow.value == pytest.approx(2.0)
    assert slow.extra == {"noise": slow.reason, "n_samples": 1}
    ok = ev({"t": 0}, {"cost": 1.5})
    assert ok.ok and ok.reason == "" and ok.extra["n_samples"] == 1


def test_noise_and_repeats_together_is_an_error():
    from gptask.evaluation.noise import SEDR

    with pytest.raises(ValueError, match="either repeats"):
        Evaluator(lambda t, p: 1.0, repeats=3, noise=SEDR())
    with pytest.raises(TypeError, match="noise policy"):
        Evaluator(lambda t, p: 1.0, noise="sedr")


def test_outcome_of_what_users_report():
    assert Outcome.of(2.5) == Outcome(2.5, (2.5,), Status.COMPLETE)
    assert Outcome.of(1e308).value == 1e308
    nan = Outcome.of(float("nan"))
    assert nan.status is Status.FAILED and nan.value is None and "NaN" in nan.reason
    assert Outcome.of(None, "node crashed").reason == "node crashed"
    assert Outcome(None, (), "failed", "x").status is Status.FAILED  # text still accepted
    with pytest.raises(ValueError, match="finite value"):
        Outcome(float("inf"))
    with pytest.raises(ValueError, match="not pending"):
        Outcome(1.0, status="pending")


def test_stop_at_interrupts_a_forked_run_without_failing_it():
    ev = Evaluator(_sleepy, timeout=30)
    t0 = time.perf_counter()
    with pytest.raises(EvaluationInterrupted, match="time is up"):
        ev({}, {"s": 30}, stop_at=time.monotonic() + 0.5)
    assert time.perf_counter() - t0 < 10
    assert ev({}, {"s": 0.01}, stop_at=time.monotonic() + 20).ok


class _Unprintable(RuntimeError):
    def __str__(self) -> str:
        raise ValueError("no text for you")


def _raise_unprintable(task, params):
    raise _Unprintable()


@pytest.mark.parametrize("kw", [{}, {"timeout": 5}, {"repeats": 2}])
def test_an_exception_whose_text_cannot_be_read_is_a_failure_named_by_its_type(kw):
    # issue 40: a user exception whose __str__ raises crashed gt.tune
    out = Evaluator(_raise_unprintable, **kw)({}, {})
    assert out.status == "failed" and out.value is None
    assert out.reason.startswith("_Unprintable") and "message could not be read" in out.reason


def test_tuning_goes_on_past_an_exception_whose_text_cannot_be_read():
    import gptask as gt

    def objective(task, params):
        if params["x"] > 5:
            raise _Unprintable()
        return float(params["x"])

    problem = gt.Problem(gt.Space([gt.Integer("m", 1, 2)]), gt.Space([gt.Integer("x", 0, 9)]), objective)
    result = gt.tune(problem, [{"m": 1}], budget=8, seed=0)
    trials = result.history
    failed = [t for t in trials if t.status == "failed"]
    assert len(trials) == 8 and failed and all(t.reason.startswith("_Unprintable") for t in failed)
