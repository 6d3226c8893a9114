"""The analytic test families: each optimum(task) is checked against an independent brute-force search
(a dense random sample of the parameter space, never better than the stated optimum)."""

import numpy as np
import pytest

from gptask.problem.functions import FAMILIES, with_noise
from gptask.tuning.mla import resolve_tasks

DRAWS = 20_000


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_stated_optimum_is_attained_and_not_beaten_by_a_dense_sample(family):
    make, optimum = FAMILIES[family]
    problem = make()
    space = problem.param_space
    for task in resolve_tasks(problem, 3, seed=7):
        x_opt, f_opt = optimum(task)
        assert problem.objective(task, x_opt) == pytest.approx(f_opt, rel=1e-9, abs=1e-12)
        rng = np.random.default_rng(0)
        draws = DRAWS if space.n_columns <= 5 else DRAWS // 4  # no closeness check in 6-D below
        points = space.decode(space.snap(rng.random((draws, space.n_columns))))
        sampled = min(problem.objective(task, p) for p in points)
        assert sampled >= f_opt - 1e-9, (family, task, sampled, f_opt)
        if space.n_columns <= 5:  # a dense sample comes close in few dimensions: no wrong formula
            assert sampled - f_opt < 0.05 * (1.0 + abs(f_opt))


def test_mixed_family_best_variant_switches_with_the_task():
    _, optimum = FAMILIES["mixed"]
    assert [optimum({"n": n})[0]["variant"] for n in (0.0, 0.5, 1.0)] == ["row", "blocked", "col"]


def test_with_noise_only_slows_runs_down_and_is_reproducible():
    make, _ = FAMILIES["sphere"]
    task, params = {"s": 0.3}, {"x1": 0.5, "x2": 0.5, "x3": 0.5}
    clean = make().objective(task, params)
    first = with_noise(make(), 0.1, seed=3).objective(task, params)
    noisy = with_noise(make(), 0.1, seed=3)
    draws = np.array([noisy.objective(task, params) for _ in range(200)])
    assert np.all(draws >= clean) and draws.std() > 0.01 * clean
    assert first == draws[0]
    with pytest.raises(ValueError, match="rel_sd"):
        with_noise(make(), -1.0)
