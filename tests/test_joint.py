"""The joint route of new-task prediction (gptask.transfer.joint): Problem.features and
Problem.cost_model checked at the boundary, predictions against a known function and against the
measured 16-core PDGEQRF timings, and model files that keep the joint GP."""

from __future__ import annotations

import logging
import math
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import spearmanr

import gptask as gt
from apps.scalapack_qr import problem as pdgeqrf
from gptask.sources.importing import read_rows
from gptask.transfer.model import as_transfer_model

ROOT = Path(__file__).resolve().parents[1]
XEON16 = ROOT / "apps" / "scalapack_qr" / "data" / "xeon16" / "runs.csv"


def blocked_time(task: dict, params: dict) -> float:
    """A known 'run time': n^3 / threads, times a penalty that depends only on the number of
    panels n / nb (best at 2^4 panels, whatever n), which no task or parameter coordinate gives
    alone."""
    n, nb, t = task["n"], params["nb"], params["threads"]
    return n ** 3 / t * 1e-9 * (1.0 + 0.15 * (math.log2(n / nb) - 4.0) ** 2)


def panels(point: dict) -> dict:
    return {"log_panels": math.log2(point["n"] / point["nb"])}


def cubic_cost(point: dict) -> float:
    return point["n"] ** 3 / point["threads"]


def known_problem(**hooks) -> gt.Problem:
    return gt.Problem(gt.Space([gt.Integer("n", 64, 4096, log=True)]),
                      gt.Space([gt.Integer("nb", 1, 256, log=True), gt.Integer("threads", 1, 8)]),
                      blocked_time, name="blocked", **hooks)


def known_rows(sizes, per_task: int = 40, seed: int = 0) -> list[dict]:
    rng = np.random.default_rng(seed)
    rows = []
    for n in sizes:
        for _ in range(per_task):
            p = {"nb": int(2 ** rng.uniform(0, 8)), "threads": int(rng.integers(1, 9))}
            rows.append({"n": n, **p, "time": blocked_time({"n": n}, p) * math.exp(rng.normal(0.0, 0.02))})
    return rows


def mape(pred: np.ndarray, truth: np.ndarray) -> float:
    return float(np.mean(np.abs(pred - truth) / truth))


# ---- the boundary -----------------------------------------------------------------------------------

def test_hooks_must_be_callable():
    with pytest.raises(TypeError, match="features must be a function"):
        known_problem(features={"a": 1.0})
    with pytest.raises(TypeError, match="cost_model must be a function"):
        known_problem(cost_model=3.0)


@pytest.mark.parametrize("features, message", [
    (lambda pt: {"a": 1.0 / (pt["nb"] - pt["nb"])}, "features raised ZeroDivisionError"),
    (lambda pt: {"a": float("nan")}, "non-finite value"),
    (lambda pt: {"a": "wide"}, "features raised ValueError"),
    (lambda pt: {"a": 1.0} if pt["nb"] < 8 else {"b": 1.0}, "the names must be the same"),
])
def test_bad_features_are_named_with_the_point(features, message):
    prob = known_problem(features=features)
    with pytest.raises(ValueError, match=message) as err:
        prob.feature_matrix([{"n": 100}, {"n": 100}], [{"nb": 4, "threads": 1}, {"nb": 16, "threads": 1}])
    assert "'n': 100" in str(err.value)


@pytest.mark.parametrize("cost", [lambda pt: 0.0, lambda pt: -1.0, lambda pt: float("inf"), lambda pt: pt["nope"]])
def test_bad_cost_model_is_named_with_the_point(cost):
    prob = known_problem(cost_model=cost)
    with pytest.raises(ValueError, match="cost_model") as err:
        prob.cost_estimates([{"n": 100}], [{"nb": 4, "threads": 2}])
    assert "'threads': 2" in str(err.value)


def test_features_and_cost_as_arrays():
    prob = known_problem(features=panels, cost_model=cubic_cost)
    names, F = prob.feature_matrix([{"n": 1024}, {"n": 64}], [{"nb": 16, "threads": 2}, {"nb": 64, "threads": 1}])
    assert names == ["log_panels"] and F.shape == (2, 1)
    np.testing.assert_allclose(F[:, 0], [6.0, 0.0])
    np.testing.assert_allclose(prob.cost_estimates([{"n": 1024}], [{"nb": 16, "threads": 2}]), [1024 ** 3 / 2])
    assert known_problem().feature_matrix([{"n": 64}], [{"nb": 1, "threads": 1}])[1].shape == (1, 0)


# ---- predictions ------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def known_fits():
    rows = known_rows([128, 256, 1024, 2048])
    joint = gt.fit(known_problem(features=panels, cost_model=cubic_cost), rows, value="time", restarts=1,
                   output_transform="log")
    plain = gt.fit(known_problem(), rows, value="time", restarts=1, output_transform="log")
    return joint, plain


def test_joint_route_predicts_a_new_size_from_the_known_function(known_fits):
    joint, plain = known_fits
    rng = np.random.default_rng(1)
    params = [{"nb": int(2 ** rng.uniform(0, 8)), "threads": int(rng.integers(1, 9))} for _ in range(60)]
    for n in (512, 3000):  # between the tuned sizes, and beyond them
        truth = np.array([blocked_time({"n": n}, p) for p in params])
        pj, sj = gt.predict(joint, {"n": n}, params)
        pp, _ = gt.predict(plain, {"n": n}, params)
        assert mape(pj, truth) < 0.05, n
        assert mape(pj, truth) < 0.5 * mape(pp, truth), n
        # the best configuration of the new size (16 panels, most threads) is the one ranked first
        assert math.log2(n / params[int(np.argmin(pj))]["nb"]) == pytest.approx(4.0, abs=1.0)
        assert np.all(sj > 0)
    assert as_transfer_model(plain).joint() is None


def test_new_task_optimum_is_the_joint_models_pick(known_fits):
    """predict_optimum of a new size picks, with the joint model, a configuration within 3 % of the
    brute-force optimum of the known function (16 panels, 8 threads), inside and beyond the tuned
    sizes; without features it stays TLA1's configuration."""
    joint, plain = known_fits
    grid = [{"nb": nb, "threads": t} for nb in range(1, 257) for t in range(1, 9)]
    for n in (512, 3000):
        best = min(blocked_time({"n": n}, p) for p in grid)
        pred = gt.predict_optimum(joint, {"n": n})
        assert pred.route == "joint" and pred.feasible is True
        assert blocked_time({"n": n}, pred.params) <= 1.03 * best, (n, pred.params)
        assert pred.value == pytest.approx(gt.predict(joint, {"n": n}, pred.params)[0])
        assert gt.predict_optimum(plain, {"n": n}).route == "optima"
    assert gt.predict_optimum(joint, {"n": 256}).route == "optima"  # a tuned task


def test_tuned_tasks_still_use_the_lcm(known_fits):
    joint, plain = known_fits
    params = [{"nb": 8, "threads": 4}, {"nb": 64, "threads": 1}]
    a, b = gt.predict(joint, {"n": 256}, params), gt.predict(plain, {"n": 256}, params)
    np.testing.assert_allclose(a[0], b[0], rtol=1e-6)


def test_measured_corner_better_than_the_gp_over_tasks():
    """On the 16-core PDGEQRF timings, the tall 4000 x 1000 size held out: the app's features make
    the ranking and the error better than predicting each configuration over tasks."""
    def fit(prob):
        return gt.fit(prob, [r for r in rows if (r["m"], r["n"]) != (4000, 1000)], value="time", restarts=1,
                      output_transform="log")

    featured = pdgeqrf(cores=16, m_max=4000, log_sizes=True)
    plain = gt.Problem(featured.task_space, featured.param_space, featured.objective, featured.constraints,
                       featured.constants, featured.name)
    rows = [{**r.task, **r.params, "time": r.value} for r in read_rows(featured, XEON16, value="time")]
    held = [r for r in rows if (r["m"], r["n"]) == (4000, 1000)]
    params = [{k: r[k] for k in featured.param_space.names} for r in held]
    truth = np.array([r["time"] for r in held])
    pj, _ = gt.predict(fit(featured), {"m": 4000, "n": 1000}, params)
    pp, _ = gt.predict(fit(plain), {"m": 4000, "n": 1000}, params)
    assert mape(pj, truth) < 0.2 and mape(pj, truth) < mape(pp, truth)
    assert spearmanr(pj, truth).statistic > max(0.85, spearmanr(pp, truth).statistic)


# ---- model files ------------------------------------------------------------------------------------

def test_model_file_keeps_the_joint_gp(known_fits, tmp_path, caplog):
    joint, _ = known_fits
    path = joint.save_model(tmp_path / "m.json", accuracy=False)
    params = [{"nb": 4, "threads": 3}, {"nb": 32, "threads": 8}]
    before = gt.predict(joint, {"n": 700}, params)
    prob = known_problem(features=panels, cost_model=cubic_cost)
    after = gt.predict(gt.load_model(path, problem=prob), {"n": 700}, params)
    np.testing.assert_array_equal(before[0], after[0])
    np.testing.assert_array_equal(before[1], after[1])
    # without the problem the features are unknown: a warning, and the GP over tasks
    with caplog.at_level(logging.WARNING):
        bare = gt.predict(gt.load_model(path), {"n": 700}, params)
    assert "features" in caplog.text and not np.array_equal(bare[0], before[0])
    renamed = known_problem(features=lambda pt: {"panels": panels(pt)["log_panels"]}, cost_model=cubic_cost)
    with pytest.raises(ValueError, match="not those the model was fitted with"):
        gt.predict(gt.load_model(path, problem=renamed), {"n": 700}, params)
