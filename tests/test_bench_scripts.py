"""Smoke tests of the issue-12 benchmark scripts (bench/quality.py, bench/model_quality.py and their
helpers): tiny runs in a few seconds; the BoTorch parts skip where torch is not installed."""

import inspect
import gzip
import json
import sys

import numpy as np
import pytest

from gptask.problem.functions import FAMILIES, mixed_problem
from gptask.model.numerics import LCM

from conftest import ROOT

sys.path.insert(0, str(ROOT / "bench"))

import model_quality  # noqa: E402
import mtbo  # noqa: E402
import quality  # noqa: E402
import records  # noqa: E402


def test_dense_sample_of_a_mixed_space_is_valid_and_covers_every_choice():
    space = mixed_problem().param_space
    pts = quality.dense_sample(space, n_grid=3000, n_random=50)
    for p in pts[::97]:
        assert space.validate(p) == p
    assert {p["variant"] for p in pts} == set(space["variant"].choices)
    assert len(pts) >= 3000 * 0.5


def test_dense_sample_of_a_real_box_is_the_regular_grid_plus_uniform_points():
    space = FAMILIES["branin"][0]().param_space
    pts = quality.dense_sample(space, n_grid=100, n_random=5, seed=3)
    grid = np.array([[p["x1"], p["x2"]] for p in pts[:100]])
    np.testing.assert_allclose(np.unique(grid[:, 0]), np.linspace(-5, 10, 10))
    u = np.random.default_rng(3).random((5, 2))
    np.testing.assert_allclose([[p["x1"], p["x2"]] for p in pts[100:]], [-5, 0] + u * 15)


def test_records_merge_joins_nested_results_and_replaces_a_run_by_id():
    a = {"format": "f", "runs": [{"id": 1, "end": None}], "cells": {"x": {"seeds": {"0": {"MLA": 1}}}}}
    b = {"format": "f", "runs": [{"id": 1, "end": 5}, {"id": 2}], "cells": {"x": {"seeds": {"1": {"MLA": 2}}}}}
    m = records.merge(a, b)
    assert m["runs"] == [{"id": 1, "end": 5}, {"id": 2}]
    assert m["cells"]["x"]["seeds"] == {"0": {"MLA": 1}, "1": {"MLA": 2}}
    with pytest.raises(ValueError, match="formats"):
        records.merge(a, {"format": "g"})


def test_quality_driver_runs_merges_and_reports(tmp_path, capsys):
    out = tmp_path / "q.json"
    args = ["--families", "mixed", "--tasks", "2", "--budget", "3,4", "--seeds", "0", "--methods", "random",
            "--fmax-grid", "3000", "--json", str(out)]
    assert quality.main(args) == 0
    data = json.loads(out.read_text())
    assert set(data["cells"]) == {"mixed/T2/b3/i1", "mixed/T2/b4/i2"}
    regrets = data["cells"]["mixed/T2/b4/i2"]["seeds"]["0"]["random"]["regret"]
    assert len(regrets) == 2 and all(0.0 <= r <= 1.0 for r in regrets)
    assert quality.main(args + ["--pending"]) == 3  # nothing left to run
    assert quality.main(args + ["--resume"]) == 0
    assert len(records.read(str(out))["runs"]) == 2
    report = tmp_path / "q.md"
    assert quality.main(["--merge", str(out), "--out", str(report)]) == 0
    text = report.read_text()
    assert "| mixed | 2 | 4 (2) |" in text and "Worst seed" in text


def test_model_quality_on_a_tiny_synthetic_set(tmp_path):
    out = tmp_path / "m.json"
    assert model_quality.main(["--sets", "mix6:2x6", "--seeds", "0", "--n-test", "5", "--json", str(out),
                               "--models", f"GP per task,{model_quality.REFERENCE}"]) == 0
    row = records.read(str(out))["sets"]["mix6:2x6"]["seeds"]["0"]["GP per task"]
    assert row["n_test"] == 10 and row["rmse"] > 0 and 0.0 <= row["coverage"] <= 1.0


def test_pdgeqrf_folds_partition_every_task():
    _, X, times = model_quality.pdgeqrf_data()
    splits, held = model_quality.pdgeqrf_splits(seed=0)
    assert len(splits) == model_quality.FOLDS
    for i, t in enumerate(times):
        assert sum(len(h[i]) for h in held) == len(t)
        assert sorted(np.concatenate([h[i] for h in held])) == sorted(t)
        assert len(splits[0].X_train[i]) + len(splits[0].X_test[i]) == len(X[i])


def test_lcm_rows_start_with_the_tuners_default_fit_and_add_its_ml_twin():
    rows = model_quality.lcm_rows()
    assert rows[0].name.startswith("LCM default") and rows[0].options == ()
    if "prior" in inspect.signature(LCM.fit).parameters:
        assert [dict(r.options) for r in rows[1:2]] == [{"prior": None}]


def test_botorch_search_fixes_the_task_and_each_categorical_choice():
    space = mixed_problem().param_space  # tile | variant (3 one-hot columns) | frac
    choices = mtbo._fixed_choices(space, task_column=5, i=2)
    assert choices == [{5: 2.0, 1: 1.0, 2: 0.0, 3: 0.0}, {5: 2.0, 1: 0.0, 2: 1.0, 3: 0.0},
                       {5: 2.0, 1: 0.0, 2: 0.0, 3: 1.0}]


def test_botorch_mtbo_proposes_valid_points():
    pytest.importorskip("botorch")
    problem = FAMILIES["branin"][0]()
    tasks = [{"u": 0.0, "v": 0.0}, {"u": 0.5, "v": -0.5}]
    out = mtbo.run_botorch_mtbo(problem, tasks, budget=3, n_initial=2, seed=0)
    assert out["iterations"] == 1 and len(out["best"]) == 2 and np.all(np.isfinite(out["best"]))


def test_an_integer_axis_keeps_its_bounds_and_takes_every_integer_when_it_can():
    tile = mixed_problem().param_space["tile"]  # 4..256, log scale
    coarse = quality._axis(tile, 10)
    assert coarse[0] == 4 and coarse[-1] == 256 and len(coarse) == 10
    assert quality._axis(tile, 253) == list(range(4, 257))


def test_source_scale_gpu_runs_its_arms_on_the_cpu_and_reports(tmp_path, capsys):
    """bench/source_scale_gpu.py on a small draw of the sources (30 per GPU) on the CPU: every arm
    shares the held-out GPU's initial runs, the subset start is taken above --subset-above, and the
    report lists every arm."""
    import source_scale_gpu

    out = tmp_path / "rows.jsonl"
    assert source_scale_gpu.main(["--gpus", "A100", "--per-gpu", "30", "--device", "cpu", "--subset-above", "100",
                                  "--arms", "exact,exact_cold", "--out", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines() if "arm" in line]
    assert [r["arm"] for r in rows] == ["summary", "exact", "exact_cold"]
    assert rows[1]["initial"] == rows[0]["initial"] == rows[2]["initial"]
    assert rows[1]["points"] == rows[2]["points"] == 161
    assert any("started from a subset" in line for line in rows[1]["fit_log"])
    assert not any("started from a subset" in line for line in rows[2]["fit_log"])
    assert all(-1 <= r["spearman"] <= 1 and 0 < r["top5"] <= 1 for r in rows)
    source_scale_gpu.main(["--report", "--out", str(out)])
    assert capsys.readouterr().out.count("| A100, 0 |") == 3


def test_suite_compare_pairs_runs_by_seed_and_flags_a_difference_beyond_two_standard_errors(tmp_path, capsys):
    """bench/suite.py compare: per family and budget, the per-seed differences of the new method
    against the base (fraction of the optimum for a time objective), their mean and standard error,
    the seeds won and lost; seeds only one method ran are left out."""
    import suite
    from suite_families import family

    fam = family("convolution")
    f_opt = fam.f_opt

    def rec(method: str, seed: int, factor: float) -> dict:  # every task's best run at factor x its optimum
        return {"family": "convolution", "budget": 2, "method": method, "seed": seed,
                "values": [[None, f * factor] for f in f_opt]}

    records = [rec("mla@old", s, 2.0) for s in range(4)] + [rec("mla@new", s, 1.25 + 0.25 * (s % 2)) for s in range(3)]
    rows = suite.paired(records, "mla@old", "mla@new")
    expected = np.array([1 / 1.25 - 0.5, 1 / 1.5 - 0.5, 1 / 1.25 - 0.5])  # seed 3: the base's alone
    assert len(rows) == 1 and rows[0]["seeds"] == 3 and (rows[0]["wins"], rows[0]["losses"]) == (3, 0)
    assert rows[0]["mean"] == pytest.approx(expected.mean())
    assert rows[0]["se"] == pytest.approx(expected.std(ddof=1) / np.sqrt(3))
    path = tmp_path / "runs.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in records))
    assert suite.main(["compare", str(path), "--base", "mla@old", "--new", "mla@new"]) == 0
    assert f"| convolution | 2 | 3 | **{expected.mean():+.4f}** |" in capsys.readouterr().out
    stored = tmp_path / "runs.jsonl.gz"  # as suite_runs/ keeps them
    stored.write_bytes(gzip.compress(path.read_bytes()))
    assert suite.main(["compare", str(stored), "--base", "mla@old", "--new", "mla@new"]) == 0
    assert f"| convolution | 2 | 3 | **{expected.mean():+.4f}** |" in capsys.readouterr().out


def test_failure_fit_scale_fits_the_limit_then_every_trial_and_restores_the_limit(capsys):
    import gptask.model.surrogate.failure_model as failure
    import failure_fit_scale

    before = failure.FIT_MAX_POINTS
    assert failure_fit_scale.main(["--sizes", "600"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(", ")[-1] for line in lines] == [f"{before} fitted", "600 fitted"], lines
    assert failure.FIT_MAX_POINTS == before


def test_run_free_speed_report_pairs_rows_by_resampling_mode_and_gives_the_cpu_ratio():
    import run_free_speed

    def row(code, mode, seconds, cpu=None, params=None):
        r = {"code": code, "mode": mode, "size": 20000, "held": "A100", "seed": 0, "seconds": seconds,
             "cholesky_seconds": 2.0, "ratio": seconds / 2.0, "peak_mib": 400.0, "added_mib": 1.0,
             "params": params or {"x": 1}}
        if cpu is not None:
            r.update(cpu_seconds=cpu, cholesky_cpu_seconds=0.5, cpu_ratio=cpu / 0.5)
        return r

    rows = [row("before", "complete", 100.0), row("after", "complete", 4.0, cpu=1.0),
            {k: v for k, v in row("before", "draw", 60.0, params={"x": 2}).items() if k != "mode"},  # last session's
            row("after", "draw", 30.0, cpu=10.0)]
    lines = run_free_speed.report({"rows": rows}).splitlines()[2:]
    complete = next(line for line in lines if "(complete)" in line)
    draw = next(line for line in lines if "(draw)" in line)
    assert "| 100.0 (50x) | 4.0 (2x) |" in complete and "| 1.0 (2.0x) | 25.0 |" in complete and complete.endswith("yes |")
    assert "| 60.0 (30x) | 30.0 (15x) |" in draw and "| 10.0 (20.0x) | 2.0 |" in draw and draw.endswith("NO |")


def test_listed_trap_count_finds_the_tasks_one_step_from_a_near_optimal_configuration():
    """bench/listed_trap_count.py on a hand-made run of the tuning family gen:837: every task ran only (1, 4, 2, 0)
    (list indices); brute force: a task is one step away when a grid neighbour of it is within 0.1 of its optimum."""
    import listed_trap_count
    from suite_generated import generated

    g = generated(837)
    dims, obj = g["spec"].dims, g["objective"]
    inc = {d.name: d.ordered[k] for d, k in zip(dims, (1, 4, 2, 0))}
    rec = {"family": "gen:837", "method": "mla", "budget": 12, "seed": 0,
           "values": [[1.0]] * len(g["tasks"]), "params": [[inc]] * len(g["tasks"])}
    expect = []
    for i in range(len(g["tasks"])):
        near = []
        for j, d in enumerate(dims):
            for step in (-1, 1):
                k = d.ordered.index(inc[d.name]) + step
                if 0 <= k < len(d.ordered):
                    near.append({**inc, d.name: d.ordered[k]})
        regret = [(obj.latent({"task": i}, p) - g["f_opt"][i]) / (g["f_ref"][i] - g["f_opt"][i]) for p in near]
        expect.append(min(regret) < listed_trap_count.NEAR)
    got = listed_trap_count.count([rec])[("gen:837", "mla")]
    assert got["tasks"] == len(g["tasks"]) and got["found"] == 0.0
    assert got["one_step"] == pytest.approx(np.mean(expect))
    assert 0 < np.mean(expect) < 1  # some tasks are one step away (x0 = 4 next to 8), some not


def test_constants_set_sets_a_modules_constants_inside_and_restores_them_even_on_an_error():
    """bench/module_constants.py: the benchmark variants' way to run the library with some constants set."""
    from gptask.tuning import fidelity as fm
    from module_constants import constants_set

    before = (fm.CHEAP_SEARCH_SHARE, fm.RHO_REBUY)
    with constants_set(fm, {"CHEAP_SEARCH_SHARE": None, "RHO_REBUY": 0.3}):
        assert (fm.CHEAP_SEARCH_SHARE, fm.RHO_REBUY) == (None, 0.3)
    assert (fm.CHEAP_SEARCH_SHARE, fm.RHO_REBUY) == before
    with pytest.raises(RuntimeError, match="inside"):
        with constants_set(fm, {"CHEAP_SEARCH_SHARE": 1.0}):
            raise RuntimeError("inside")
    assert fm.CHEAP_SEARCH_SHARE == before[0]
    with pytest.raises(AttributeError, match="gptask.tuning.fidelity has no constant CHEAP_SEARCH_SHAR"):
        with constants_set(fm, {"CHEAP_SEARCH_SHAR": 1.0}):
            pass
    assert not hasattr(fm, "CHEAP_SEARCH_SHAR")


def test_fidelity_kernel_paired_shift_and_the_fidelity_input_model():
    """bench/fidelity_kernel.py: ``paired_shift`` moves a cheaper level by the mean target-minus-level
    difference at the configurations both ran (worked by hand), leaves a level that shares none and the
    target alone; ``fit_lcm_input`` predicts the target level (u = 0) through its own runs on data where
    the cheap level is the target moved by a constant."""
    import fidelity_kernel as fk

    target = (1.0, np.array([[0.0], [1.0]]), np.array([10.0, 12.0]))
    cheap = (0.1, np.array([[1.0], [0.0], [0.5]]), np.array([2.0, 0.0, 5.0]))
    alone = (0.3, np.array([[0.25]]), np.array([7.0]))
    shifted = fk.paired_shift([target, cheap, alone])
    np.testing.assert_allclose(shifted[0], [10.0, 12.0])
    np.testing.assert_allclose(shifted[1], [12.0, 10.0, 15.0])  # (10 - 0 + 12 - 2) / 2 = 10
    np.testing.assert_allclose(shifted[2], [7.0])

    rng = np.random.default_rng(0)
    f = lambda U: np.sin(6.0 * U[:, 0]) + U[:, 1] ** 2  # noqa: E731
    data = []
    for task in range(2):
        U_c, U_t = rng.random((12, 2)), rng.random((4, 2))
        data.append([(1.0, U_t, f(U_t) + task), (0.1, U_c, f(U_c) + task - 3.0)])
    for rule in ("", "paired"):
        predict = fk.fit_lcm_input(data, seed=0, n_latent=1, rule=rule)
        for task, rows in enumerate(data):
            mean, var = predict(task, rows[0][1])
            np.testing.assert_allclose(mean, rows[0][2], atol=0.05)
            assert np.all(var >= 0.0)


def test_fidelity_kernel_data_follow_the_schedule_and_an_offset_keeps_each_levels_ranking():
    """bench/fidelity_kernel.py's data: the target's first configurations are the best cheap ones, the
    level between runs the target's first two, and a "+offset" family moves the cheaper levels without
    changing their ranking or the target's values."""
    import fidelity_kernel as fk
    import multifidelity_families as mff

    fam = mff.build("hartmann3")
    plain, moved = fk.training_data(fam, "late", 3), fk.training_data(fam, "late", 3, offset=True)
    for rows, rows_moved in zip(plain, moved):
        (s_t, U_t, y_t), (s_m, U_m, _), (s_c, U_c, y_c) = rows
        assert (s_t, s_m, s_c) == (1.0, 1.0 / 3.0, 1.0 / 27.0) and (len(U_t), len(U_c)) == (6, 20)
        np.testing.assert_array_equal(U_t[:3], U_c[np.argsort(y_c)[:3]])  # the 3 best cheap ones, best first
        np.testing.assert_array_equal(U_m, U_t[:2])
        np.testing.assert_array_equal(rows_moved[0][2], y_t)  # the target untouched
        y_moved = rows_moved[2][2]
        assert np.array_equal(np.argsort(y_moved), np.argsort(y_c))
        assert np.mean(y_moved) > np.mean(y_c) + 1


def test_row_files_read_a_gzipped_result_and_list_the_rows_done(tmp_path):
    """bench/row_files.py: a result kept gzipped in the repository reads as the plain file does (reference: the
    document written); done_keys lists the given fields of every row of a JSON-lines file, none for no file."""
    import row_files

    doc = {"machine": {"description": "m"}, "rows": [{"family": "currin", "seed": 3}]}
    (tmp_path / "r.json.gz").write_bytes(gzip.compress(json.dumps(doc).encode()))
    (tmp_path / "r.json").write_text(json.dumps(doc))
    assert row_files.load_rows(str(tmp_path / "r.json.gz")) == row_files.load_rows(str(tmp_path / "r.json")) == doc
    lines = tmp_path / "rows.jsonl"
    lines.write_text('{"family": "a", "kind": "sf", "seed": 0, "x": 1}\n\n{"family": "b", "kind": "input", "seed": 2}\n')
    assert row_files.done_keys(lines, ("family", "seed")) == {("a", 0), ("b", 2)}
    assert row_files.done_keys(tmp_path / "none.jsonl", ("family",)) == set()


def test_the_mean_search_variant_searches_the_targets_by_the_posterior_mean(monkeypatch):
    """bench/multifidelity.py's gptask_mf_mean (session 44), a FidelityProposer whose acquisition is the
    posterior mean at a tuned task's target: each target search returns the minimiser of the mean of the model
    it searched on (reference: that mean along a line through the pick); the default's EI picks do not."""
    import multifidelity as mf
    import multifidelity_families as mff
    from gptask.tuning import tuner as tm

    original = tm.Tuner._search

    def picks_at_the_mean_minimum(proposer):
        seen = []

        def spy(tuner, i, *among):
            out = original(tuner, i, *among)
            if out is not None and tuner.proposer.is_target(i):
                grid = np.linspace(0, 1, 201)[:, None] * np.ones((1, len(out)))
                grid[:, 1:] = out[1:]  # a line through the pick along the first input
                mean = tuner._search_view.model.predict(i, np.vstack([grid, out[None]]))[0]
                seen.append(mean[-1] <= mean[:-1].min() + 1e-6 * (1 + abs(mean).max()))
            return out

        monkeypatch.setattr(tm.Tuner, "_search", spy)
        assert mf.run_gptask_mf(mff.family("currin"), 5, 0, proposer)
        assert seen
        return all(seen)

    assert picks_at_the_mean_minimum(mf.mean_targets(*mf.MEAN_TARGETS["gptask_mf_mean"]))
    assert not picks_at_the_mean_minimum(None)
