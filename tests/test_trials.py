import json
import math

import numpy as np
import pytest

from gptask.data.trials import Proposal, Status, Trial, check_value, params_key, point_key


def make_trial(**kw):
    base = dict(id=3, task_index=1, task={"t": 0.5}, params={"x": 0.25, "alg": "ring"}, status="complete",
                value=1.5, samples=[1.5, 2.0], reason="", extra={"noise": "2 samples"}, source="search")
    return Trial(**{**base, **kw})


def test_status_is_an_enum_that_reads_as_its_stored_text():
    assert Status("pending") is Status.PENDING and Status.COMPLETE == "complete"
    assert f"{Status.FAILED}" == "failed" and str(Status.CENSORED) == "censored"
    assert json.dumps({"s": Status.COMPLETE}) == '{"s": "complete"}'
    assert not Status.PENDING.finished and all(s.finished for s in Status if s is not Status.PENDING)
    with pytest.raises(ValueError, match="one of"):
        Status.parse("done")


def test_trial_is_frozen_and_reads_like_a_v1_record():
    t = make_trial()
    assert t.status is Status.COMPLETE  # text in, enum stored
    assert t["value"] == 1.5 and t["params"]["x"] == 0.25 and t["status"] == "complete"
    assert t.get("reason") == "" and "samples" in t and dict(t)["task"] == {"t": 0.5}
    with pytest.raises(KeyError):
        t["nope"]
    with pytest.raises(AttributeError):
        t.value = 2.0  # type: ignore[misc]
    for mutate in (lambda: t.params.__setitem__("x", 1), lambda: t.task.update(t=1), lambda: t.extra.pop("noise")):
        with pytest.raises(TypeError, match="read-only"):
            mutate()
    copy = dict(t.params)
    copy["x"] = 0.9
    assert t.params["x"] == 0.25
    assert json.loads(json.dumps(t.params)) == {"x": 0.25, "alg": "ring"}


def test_trial_json_round_trip_and_replace():
    t = make_trial()
    back = Trial.from_json(json.loads(json.dumps(t.to_json())))
    assert back == t and back.samples == (1.5, 2.0) and back.status is Status.COMPLETE
    f = t.replace(status=Status.FAILED, value=None, reason="boom")
    assert f.status is Status.FAILED and t.status is Status.COMPLETE and f != t


@pytest.mark.parametrize("given, value, reason", [
    (1e308, 1e308, ""), (-1e308, -1e308, ""), (5e-324, 5e-324, ""), (0, 0.0, ""), (np.float32(2.5), 2.5, ""),
    (np.array(3.0), 3.0, ""), (np.array([4.0]), 4.0, ""),
    (float("nan"), None, "NaN"), (math.inf, None, "inf"), (-math.inf, None, "-inf"),
    (True, None, "not a number"), ("fast", None, "not a number"), (None, None, "not a number"),
    (np.zeros(2), None, "shape (2,)"),
])
def test_check_value_keeps_every_finite_float_exactly(given, value, reason):
    v, why = check_value(given)
    assert v == value and (reason in why if reason else why == "")


def test_keys_identify_configurations_up_to_float_noise():
    a, b = {"x": 0.1 + 0.2, "k": 3}, {"k": np.int64(3), "x": 0.3}
    assert point_key(a) == point_key(b) and params_key(a) == params_key(b)
    assert params_key({"x": 0.3}) != params_key({"x": 0.3001})
    assert Proposal(0, {"t": 1}, {"x": 0.3}).source == ""
