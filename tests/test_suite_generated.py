"""The generated families of the benchmark suite (bench/suite_generated.py, issue 45): deterministic
from their seed, within the ranges the issue asks for, GP draws of the stated kernel, optima checked by
brute force, and the seeds used for tuning apart from the judged ones."""

import sys

import numpy as np
import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "bench"))

import suite_generated as sg  # noqa: E402

#: a tuning seed whose family is listed and small (121: 3 inputs, 4 tasks, 567 configurations, noise 0.05)
LISTED_SEED = 121


@pytest.fixture(autouse=True)
def _fresh_cache(tmp_path, monkeypatch):
    monkeypatch.setattr(sg, "CACHE_DIR", tmp_path / "cache")


def test_the_same_seed_draws_the_same_family_and_another_seed_another():
    a, b, c = sg.draw_spec(5), sg.draw_spec(5), sg.draw_spec(6)
    U = np.random.default_rng(0).random((7, a.n_inputs))
    np.testing.assert_array_equal(a.shared(U), b.shared(U))
    np.testing.assert_array_equal(a.shift, b.shift)
    assert [d.name for d in a.dims] == [d.name for d in b.dims]
    assert sg.describe(a) == sg.describe(b)
    assert (sg.describe(a), a.n_tasks) != (sg.describe(c), c.n_tasks) or not np.array_equal(a.b, c.b)
    space = sg.generated(5)["problem"].param_space
    p = space.decode(np.random.default_rng(1).random((1, space.n_columns)))[0]
    obj1, obj2 = sg.GeneratedObjective(a), sg.GeneratedObjective(b)
    assert obj1({"task": 1}, p) == obj2({"task": 1}, p) == obj1.latent({"task": 1}, p) + (
        obj1({"task": 1}, p) - obj1.latent({"task": 1}, p))


def test_families_span_the_issue_ranges_of_inputs_tasks_kinds_spaces_and_noise():
    specs = [sg.draw_spec(s) for s in range(60)]
    assert all(2 <= s.n_inputs <= 8 and 4 <= s.n_tasks <= 20 for s in specs)
    assert {s.kind for s in specs} == {"smooth", "rough"}
    assert {s.space_kind for s in specs} == {"continuous", "mixed", "listed"}
    assert {s.noise for s in specs} == set(sg.NOISE_LEVELS)
    assert {s.n_inputs for s in specs} >= {2, 8} and {s.n_tasks for s in specs} >= {4, 20}
    for s in specs:
        assert s.shift.shape == (s.n_tasks, s.n_inputs) and s.a.shape == s.b.shape == s.c.shape == (s.n_tasks,)
        assert len(s.own) == s.n_tasks and np.all(s.c <= s.c_max + 1e-12)
        if s.space_kind == "listed":
            assert np.prod([len(c) for c in s.coords]) <= sg.LISTED_MAX
        if s.space_kind == "mixed":
            assert any(d.__class__.__name__ == "Categorical" for d in s.dims)


@pytest.mark.parametrize("kernel, k", [
    ("rbf", lambda r: np.exp(-0.5 * r**2)),
    ("matern32", lambda r: (1 + np.sqrt(3) * r) * np.exp(-np.sqrt(3) * r)),
])
def test_a_draw_has_the_covariance_of_its_kernel(kernel, k):
    """Over many random-Fourier-feature draws, cov(f(0), f(r e1)) approaches the kernel at r / length."""
    rng = np.random.default_rng(3)
    ell = 0.3
    r = np.array([0.0, 0.15, 0.3, 0.6])
    U = np.stack([r, np.zeros_like(r)], axis=1)
    F = np.array([sg._draw(rng, kernel, np.array([ell, ell]))(U) for _ in range(3000)])
    cov = F.T @ F[:, 0] / len(F)
    np.testing.assert_allclose(cov, k(r / ell), atol=0.07)


def test_the_optimum_of_a_listed_family_is_the_brute_force_minimum_over_every_configuration():
    """f_opt and f_ref against every configuration gptask's own space enumerates, evaluated one dict at
    a time through the objective's latent (no shared code path with the vectorised one but the draws)."""
    g = sg.generated(LISTED_SEED)
    spec, obj, problem = g["spec"], g["objective"], g["problem"]
    assert spec.space_kind == "listed"
    configs = problem.param_space.decode(problem.param_space.enumerate(10**6))
    assert len(configs) == np.prod([len(d.ordered) for d in spec.dims])
    for i, task in enumerate(g["tasks"]):
        vals = np.array([obj.latent(task, p) for p in configs])
        assert g["f_opt"][i] == pytest.approx(vals.min(), abs=1e-9)
        assert g["f_opt"][i] < g["f_ref"][i]
        assert abs(g["f_ref"][i] - np.median(vals)) < 0.1 * vals.std()  # the median of a sample of them
    # a measurement is the latent value plus noise of the family's size, the same for the same run
    p, task = configs[17], g["tasks"][2]
    assert obj(task, p) == obj(task, p) != obj.latent(task, p)
    errs = np.array([obj(task, q) - obj.latent(task, q) for q in configs])
    assert errs.std() == pytest.approx(spec.noise * obj.spread[2], rel=0.15)


def test_the_optimum_of_a_continuous_family_is_not_beaten_by_a_fresh_dense_sample():
    g = sg.generated(1054)  # 2 inputs, 4 tasks, continuous
    spec, obj = g["spec"], g["objective"]
    U = sg.sample_unit(spec, np.random.default_rng(99), 20000)
    for i in range(spec.n_tasks):
        assert obj.latent_unit(i, U).min() >= g["f_opt"][i] - 1e-9


def test_judged_and_tuning_seeds_are_disjoint_and_the_groups_hold_judged_seeds_only():
    from suite_families import GROUPS, known

    assert not set(sg.TUNING_SEEDS) & set(sg.JUDGED_SEEDS)
    for group in ("generated", "generated_smooth", "generated_rough", "generated_small"):
        names = GROUPS[group]
        assert names and all(sg.parse_name(n) in sg.JUDGED_SEEDS for n in names)
    assert {sg.draw_spec(sg.parse_name(n)).kind for n in GROUPS["generated_smooth"]} == {"smooth"}
    assert {sg.draw_spec(sg.parse_name(n)).kind for n in GROUPS["generated_rough"]} == {"rough"}
    assert known("gen:17") and known(GROUPS["generated"][0]) and not known("nonesuch")
    with pytest.raises(SystemExit, match="non-negative integer"):
        known("gen:-3")


def test_a_noisy_family_is_scored_by_the_latent_value_of_the_run_measured_best():
    """bench/suite.py scores: the configuration measured best is kept; its noise-free value counts."""
    import suite
    from suite_families import Family

    latent = {"a": 1.0, "b": 3.0}
    fam = Family("toy", None, [{"task": 0}], [0.0], [10.0], latent=lambda task, p: latent[p["x"]])
    rec = {"budget": 2, "values": [[2.0, 0.5]], "params": [[{"x": "a"}, {"x": "b"}]]}
    assert suite.scores(rec, fam)["regret"] == pytest.approx(0.3)  # b was measured best (0.5), its latent is 3
    assert suite.scores({"budget": 2, "values": [[2.0, 0.5]]}, fam)["regret"] == pytest.approx(0.05)  # no params


def test_the_targets_count_the_worst_seed_against_twice_the_best_peers_mean():
    """bench/suite.py's target checks (issue 45): a worst seed within 2x the best peer's mean passes even
    when it is more than 2x the method's own mean; one beyond it fails; the best peer is the lowest mean."""
    import suite

    def cell(mean: float, worst: float) -> dict:
        return {"regret": mean, "regret_worst": worst, "seeds": 10, "seconds": 1.0}

    summary = {("f", 12, "mla"): cell(0.04, 0.10), ("f", 12, "botorch_mtgp"): cell(0.06, 0.2),
               ("f", 12, "random"): cell(0.3, 0.5),
               ("g", 12, "mla"): cell(0.05, 0.13), ("g", 12, "botorch_mtgp"): cell(0.06, 0.1),
               ("h", 12, "mla"): cell(0.05, 0.06)}  # no peer ran h: counted neither way
    rows = suite._checks(summary, ["mla", "botorch_mtgp", "random"], "mla")
    f_row = next(r for r in rows if r.startswith("| f |"))
    g_row = next(r for r in rows if r.startswith("| g |"))
    # f: worst 0.10 > 2 x own mean 0.04 but <= 2 x botorch's 0.06; g: worst 0.13 > 2 x 0.06
    assert f_row.split("|")[4].strip() == "**no**" and f_row.split("|")[7].strip() == "yes (0.100)"
    assert g_row.split("|")[6].strip().startswith("yes (botorch_mtgp 0.060)") and g_row.split("|")[7].strip() == "**no** (0.130)"
    assert "at or below the best peer on 2 of 2 family-budgets" in rows[-1]
    assert "worst seed at most 2x the best peer's mean on 1 of 2" in rows[-1]


def test_calibration_scores_a_calibrated_predictor_near_95_percent_and_an_overconfident_one_below():
    """bench/calibration.py scores: values drawn from the predictive normal itself are covered 95 % of the
    time; intervals half as wide cover P(|Z| <= 0.98) = 67 %; nRMSE of the mean against its own sd."""
    import calibration

    rng = np.random.default_rng(0)
    m, v = rng.normal(size=(2, 4000)), np.full((2, 4000), 0.25)
    f = m + 0.5 * rng.standard_normal((2, 4000))
    y = f + 0.1 * rng.standard_normal((2, 4000))
    good = calibration.scores(list(zip(m, v)), list(zip(m, v + 0.01)), list(f), list(y))
    assert good["cover_latent"] == pytest.approx(0.95, abs=0.01) and good["cover_noisy"] == pytest.approx(0.95, abs=0.01)
    assert good["nrmse"] == pytest.approx(np.mean([0.5 / f_i.std() for f_i in f]), rel=0.05)
    bad = calibration.scores(list(zip(m, v / 4)), list(zip(m, v / 4)), list(f), list(y))
    assert bad["cover_latent"] == pytest.approx(0.67, abs=0.02)


def test_calibration_fits_the_tuners_model_on_its_initial_design_and_scores_held_out_configurations():
    import calibration
    from suite_families import family

    fam = family(f"gen:{LISTED_SEED}")
    out = calibration.evaluate(fam, 5, 0, ["gptask"], 10)["gptask"]
    assert out["n_test"] == 10 * len(fam.tasks)
    assert 0.0 <= out["cover_latent"] <= 1.0 and 0.0 <= out["cover_noisy"] <= 1.0 and out["nrmse"] > 0
    data = calibration.split(fam, 5, 0, 10)
    tuner = data["tuner"]
    assert [tuner.count(i) for i in range(len(fam.tasks))] == [5] * len(fam.tasks)
    for i in range(len(fam.tasks)):  # held out: not in the training data, latent values of the family
        trained = [t.params for t in tuner.trials_of(i)]
        assert not any(p in trained for p in data["params"][i])
        np.testing.assert_allclose(data["latent"][i], [fam.latent(fam.tasks[i], p) for p in data["params"][i]])
    tuner.close()


def test_suite_worst_reruns_a_seed_to_the_recorded_regret_and_reads_its_fits():
    """bench/suite_worst.py: gptask's run of a (family, budget, seed) made again with a history gives
    the regret bench/suite.py scored for the recorded run, task by task, and one stored fit per model
    iteration; the best configuration run is never worse than the one kept or the initial design's (on
    this noisy family the one kept may be worse than the initial design's: it is the one measured best)."""
    import suite
    import suite_worst
    from suite_families import family

    fam = family(f"gen:{LISTED_SEED}")
    rec = {"family": fam.name, "budget": 4, "method": "mla", "seed": 1,
           **suite.run_mla(fam, 4, 1, alone=False, options={})}
    again = suite_worst.rerun(fam, 4, 1)
    assert np.mean([t["final"] for t in again["tasks"]]) == pytest.approx(suite.scores(rec, fam)["regret"])
    assert all(t["best_run"] <= min(t["final"], t["init"]) for t in again["tasks"])
    assert again["fits"] and all("lengthscales" in f and "collapsed" in f for f in again["fits"])
    assert "fits" in suite_worst.describe_fits(again["fits"])
