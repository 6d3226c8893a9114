"""Named outputs of an objective (gptask/problem/objectives.py): what a problem declares, what a run must
return, and what becomes a failed run with which reason."""

import math

import numpy as np
import pytest

import gptask as gt
from gptask.evaluation.evaluate import Outcome
from gptask.problem.objectives import Limit
from gptask.data.trials import Status

TASKS = gt.Space([gt.Real("t", 0.0, 1.0)])
PARAMS = gt.Space([gt.Real("x", 0.0, 1.0)])


def two(task, p):
    return {"time": 1.0 + p["x"], "memory": 2.0 - p["x"]}


def problem(objective=two, **kw):
    kw.setdefault("objectives", {"time": "min", "memory": "min"})
    return gt.Problem(TASKS, PARAMS, objective, **kw)


def test_objectives_in_every_accepted_form():
    for form in ({"time": "min", "memory": "max"}, [("time", "min"), ("memory", "max")]):
        out = problem(objectives=form).outputs
        assert out.names == ("time", "memory") and out.directions == ("min", "max") and out.primary == "time"
        assert out.sign("memory") == -1.0 and out.sign("time") == 1.0
    assert problem(objectives=["time", "memory"]).outputs.directions == ("min", "min")
    p = problem(objectives={"time": "min"}, outputs=["memory"], constraints_out={"memory": ("<=", 2e9)})
    assert p.outputs.names == ("time", "memory") and p.outputs.objectives == ("time",)
    assert p.outputs.limits == (Limit("memory", "<=", 2e9),) and p.outputs.modelled == ("time", "memory")
    assert gt.Problem(TASKS, PARAMS, lambda t, p: 1.0).outputs is None


@pytest.mark.parametrize("kw,match", [
    ({"constraints_out": {"memroy": ("<=", 1.0)}}, "limits 'memroy', which is not an output"),
    ({"constraints_out": {"memory": ("<", 1.0)}}, "operator must be '<=' or '>='"),
    ({"constraints_out": {"memory": ("<=", math.nan)}}, "bound must be a finite number"),
    ({"constraints_out": {"memory": 3.0}}, r"must be an \(op, bound\) pair"),
    ({"objectives": {"time": "fastest"}}, "direction of objective 'time' must be 'min' or 'max'"),
    ({"objectives": {}}, "at least one output"),
    ({"objectives": ["time", "time"]}, "named twice"),
])
def test_bad_declarations_are_refused_before_any_run(kw, match):
    calls = []

    def f(task, p):
        calls.append(1)
        return {"time": 1.0, "memory": 1.0}

    with pytest.raises(ValueError, match=match):
        problem(f, **kw)
    assert not calls


def test_limits_without_named_outputs_are_refused():
    with pytest.raises(ValueError, match="need the outputs named"):
        gt.Problem(TASKS, PARAMS, lambda t, p: 1.0, constraints_out={"memory": ("<=", 1.0)})


def test_the_outputs_are_part_of_the_signature_and_a_classic_signature_is_unchanged():
    classic = gt.Problem(TASKS, PARAMS, lambda t, p: 1.0)
    assert "outputs" not in classic.signature()
    a = problem().signature_hash()
    b = problem(constraints_out={"memory": ("<=", 1.5)}).signature_hash()
    c = problem(objectives={"time": "min", "memory": "max"}).signature_hash()
    assert len({a, b, c, classic.signature_hash()}) == 4


@pytest.mark.parametrize("returned,reason", [
    ({"time": 1.0}, "no value for 'memory'"),
    ({"time": 1.0, "memory": 2.0, "energy": 3.0}, "unexpected key(s) 'energy'"),
    ({"time": 1.0, "memory": float("nan")}, "NaN for 'memory'"),
    ({"time": float("inf"), "memory": 1.0}, "inf for 'time'"),
    ({"time": "fast", "memory": 1.0}, "str 'fast' for 'time', not a number"),
    (3.0, "float 3.0, not a mapping of its outputs time, memory"),
])
@pytest.mark.parametrize("timeout", [None, 30.0])
def test_a_bad_mapping_is_a_failed_run_with_its_reason(returned, reason, timeout):
    p = problem(lambda t, x: returned)
    out = gt.Evaluator(p.objective, timeout=timeout, outputs=p.outputs)({"t": 0.5}, {"x": 0.5})
    assert out.status is Status.FAILED and reason in out.reason and not out.values


def test_repeats_aggregate_output_by_output():
    draws = iter([{"time": 3.0, "memory": 1.0}, {"time": 2.0, "memory": 5.0}, {"time": 4.0, "memory": 3.0}])
    p = problem(lambda t, x: next(draws))
    out = gt.Evaluator(p.objective, repeats=3, aggregate="median", outputs=p.outputs)({"t": 0.5}, {"x": 0.5})
    assert out.ok and out.values == {"time": 3.0, "memory": 3.0} and out.value == 3.0
    assert out.samples == (3.0, 2.0, 4.0)


def test_outputs_come_back_from_a_forked_run():
    p = problem(lambda t, x: {"time": 2.0 + x["x"], "memory": 1.0})
    out = gt.Evaluator(p.objective, repeats=2, outputs=p.outputs, timeout=30.0)({"t": 0.5}, {"x": 0.25})
    assert out.ok and out.values == {"time": 2.25, "memory": 1.0} and out.value == 2.25


def test_noise_policies_are_refused_with_several_outputs():
    from gptask.evaluation.noise import StaticResampling

    p = problem()
    with pytest.raises(ValueError, match="noise policies work on one number"):
        gt.Evaluator(p.objective, noise=StaticResampling(k=2), outputs=p.outputs)


def test_outcome_of_a_mapping_and_its_json():
    p = problem()
    o = Outcome.of({"time": 1.5, "memory": 0.5}, outputs=p.outputs)
    assert o.ok and o.value == 1.5 and o.values == {"time": 1.5, "memory": 0.5}
    assert Outcome.from_json(o.to_json()) == o
    bad = Outcome.of({"time": 1.5}, outputs=p.outputs)
    assert bad.status is Status.FAILED and "no value for 'memory'" in bad.reason


def test_tell_takes_a_mapping_and_stores_every_output(tmp_path):
    p = problem()
    with gt.Tuner(p, tasks=1, budget=3, n_initial=3, seed=0, history=tmp_path / "h.sqlite") as tu:
        a, b, c = tu.ask()
        tu.tell(a, {"time": 1.25, "memory": 0.75})
        tu.tell(b, {"time": 1.0, "memory": float("nan")})
        tu.tell(c, 2.0)
    with gt.Tuner(p, tasks=1, budget=3, n_initial=3, seed=0, history=tmp_path / "h.sqlite") as tu:
        got = {t.id: t for t in tu.records}
    assert got[a.id].ok and dict(got[a.id].values) == {"time": 1.25, "memory": 0.75} and got[a.id].value == 1.25
    assert got[b.id].status is Status.FAILED and "NaN for 'memory'" in got[b.id].reason
    assert got[c.id].status is Status.FAILED and "not a mapping" in got[c.id].reason
    assert np.isclose(got[a.id].value, 1.25)
