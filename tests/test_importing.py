"""Existing measurements in: rows validated by line, repeats kept as samples, import into a history that
the tuner continues (imported runs count in the budget), and ``gt.fit`` results that every
run-free function takes."""

import csv
import sys
from pathlib import Path

import numpy as np
import pytest

import gptask as gt
from gptask.sources.importing import DataError, group_runs, read_rows
from gptask.data.storage import HistoryMismatch, SQLiteStorage
from gptask.data.trials import Status

sys.path.insert(0, str(Path(__file__).parent))
from problems_for_tests import BLOCKS_DEFAULT, blocks_problem as small_problem, blocks_truth as truth  # noqa: E402

FAST = dict(pso_particles=10, pso_iters=5, restarts=1)


def write_csv(path, header, rows, comments=()):
    with open(path, "w", newline="") as fh:
        for c in comments:
            fh.write(f"# {c}\n")
        w = csv.writer(fh)
        w.writerow(header)
        w.writerows(rows)
    return path


def synthetic_rows(n_tasks=4, per_task=12, seed=0):
    rng = np.random.default_rng(seed)
    rows = []
    for m in np.linspace(100, 1000, n_tasks).astype(int):
        for _ in range(per_task):
            p = {"nb": int(rng.integers(1, min(256, m) + 1)), "alg": ["a", "b"][int(rng.integers(2))],
                 "x": float(rng.random())}
            rows.append({"m": int(m), **p, "time": truth({"m": int(m)}, p)})
    return rows


# ---- rows ----------------------------------------------------------------------------------------


def test_csv_rows_are_converted_by_dimension_and_comments_skipped(tmp_path):
    path = write_csv(tmp_path / "runs.csv", ["m", "nb", "alg", "x", "time", "host"],
                     [["100", "8", "a", "0.5", "1.25", "n1"], ["200", "16.0", "1", "0", "2.5", "n2"]],
                     comments=["measured on a laptop"])
    rows = read_rows(small_problem(), path, value="time")
    assert [r.line for r in rows] == [3, 4]
    assert rows[0].task == {"m": 100} and rows[0].params == {"nb": 8, "alg": "a", "x": 0.5} and rows[0].value == 1.25
    assert rows[1].params == {"nb": 16, "alg": 1, "x": 0.0}  # "1" is the integer choice, 16.0 the integer 16
    assert rows[1].status is Status.COMPLETE


def test_every_bad_row_is_reported_with_its_line_and_nothing_is_imported(tmp_path):
    path = write_csv(tmp_path / "runs.csv", ["m", "nb", "alg", "x", "time", "cores"], [
        ["100", "8", "a", "0.5", "1.0", "4"],     # line 3: fine
        ["100", "300", "a", "0.5", "1.0", "4"],   # line 4: nb outside [1, 256]
        ["100", "8", "c", "0.5", "1.0", "4"],     # line 5: not a choice
        ["50", "64", "a", "0.5", "1.0", "4"],     # line 6: violates blocks_fit
        ["100", "8", "a", "0.5", "", "4"],        # line 7: no value
        ["100", "8", "a", "0.5", "nan", "4"],     # line 8: not finite
        ["100", "8", "a", "0.5", "1.0", "16"],    # line 9: another machine
        ["100", "2.5", "a", "0.5", "1.0", "4"],   # line 10: not an integer
        ["100", "8", "a", "0.5"],                 # line 11: too few fields
    ], comments=["a comment line"])
    with pytest.raises(DataError) as err:
        read_rows(small_problem(), path, value="time")
    msg = str(err.value)
    assert "8 bad row(s), nothing imported" in msg
    for line, why in [(4, "nb=300 is outside [1, 256]"), (5, "alg='c' is not one of"),
                      (6, "violates constraint #0 (blocks_fit)"), (7, "value column 'time' is empty"),
                      (8, "not a finite number"), (9, "the problem's constant cores is 4"),
                      (10, "nb='2.5' is not an integer"), (11, "4 fields where the header has 6")]:
        assert f"runs.csv line {line}: " in msg and why in msg, (line, why, msg)
    assert "line 3:" not in msg
    # the same rows left out on request, listed in a warning
    rows = read_rows(small_problem(), path, value="time", skip_invalid=True)
    assert [r.line for r in rows] == [3]


def test_missing_columns_are_named_at_once(tmp_path):
    path = write_csv(tmp_path / "runs.csv", ["m", "nb", "x", "seconds"], [["100", "8", "0.5", "1.0"]])
    with pytest.raises(DataError, match=r"missing columns \['alg', 'time'\]"):
        read_rows(small_problem(), path, value="time")
    with pytest.raises(DataError, match=r"data\[1\]: missing \['time'\]"):
        read_rows(small_problem(), [{"m": 100, "nb": 8, "alg": "a", "x": 0.5, "time": 1.0},
                                    {"m": 100, "nb": 8, "alg": "a", "x": 0.5}], value="time")
    with pytest.raises(TypeError, match="CSV file path or a list of dicts"):
        read_rows(small_problem(), 42, value="time")
    with pytest.raises(FileNotFoundError):
        read_rows(small_problem(), tmp_path / "none.csv", value="time")


def test_status_column_failed_rows_need_no_value_and_repeats_become_samples():
    data = [{"m": 100, "nb": 8, "alg": "a", "x": 0.5, "time": 3.0, "state": "complete"},
            {"m": 100, "nb": 8, "alg": "a", "x": 0.5, "time": 2.0, "state": "COMPLETE"},
            {"m": 100, "nb": 8, "alg": "a", "x": 0.5, "time": 2.5, "state": "complete"},
            {"m": 100, "nb": 8, "alg": "a", "x": 0.5, "time": None, "state": "failed"},
            {"m": 100, "nb": 4, "alg": "b", "x": 0.1, "time": "", "state": "failed"},
            {"m": 200, "nb": 4, "alg": "b", "x": 0.1, "time": 9.0, "state": "censored"}]
    rows = read_rows(small_problem(), data, value="time", status="state")
    runs = group_runs(rows)
    assert len(runs) == 3
    assert runs[0].status is Status.COMPLETE and runs[0].samples == (3.0, 2.0, 2.5) and runs[0].value == 2.0
    assert runs[0].lines == (0, 1, 2, 3)
    assert runs[1].status is Status.FAILED and runs[1].value is None
    assert runs[2].status is Status.CENSORED and runs[2].value == 9.0
    assert group_runs(rows, "median")[0].value == 2.5 and group_runs(rows, "mean")[0].value == pytest.approx(2.5)
    with pytest.raises(ValueError, match="aggregate must be one of"):
        group_runs(rows, "max")
    with pytest.raises(DataError, match="status column 'state' holds 'pending'"):
        read_rows(small_problem(), [{**data[0], "state": "pending"}], value="time", status="state")


# ---- into a history, and the tuner continues ------------------------------------------------------


def test_import_into_a_history_twice_adds_nothing_and_keeps_provenance(tmp_path):
    path = write_csv(tmp_path / "runs.csv", ["m", "nb", "alg", "x", "time"],
                     [[r["m"], r["nb"], r["alg"], r["x"], r["time"]] for r in synthetic_rows(2, 3)])
    h = tmp_path / "h.sqlite"
    rep = gt.import_runs(small_problem(), path, h, value="time")
    assert (rep.rows, rep.runs, len(rep.trials), rep.existing, rep.new_tasks) == (6, 6, 6, 0, 2)
    again = gt.import_runs(small_problem(), path, h, value="time")
    assert (len(again.trials), again.existing, again.new_tasks) == (0, 6, 0)
    with SQLiteStorage(h, read_only=True) as s:
        trials = s.trials()
        assert len(trials) == 6 and {t.source for t in trials} == {"imported"}
        assert all(t.status is Status.COMPLETE for t in trials)
        assert trials[0].extra == {"imported_from": str(path), "lines": [2]}
        assert s.tasks() == [{"m": 100}, {"m": 1000}]


def test_tune_continues_an_imported_history_counting_imported_runs_in_the_budget(tmp_path):
    data = synthetic_rows(2, 5)
    h = tmp_path / "h.sqlite"
    problem = small_problem(default=BLOCKS_DEFAULT)
    rep = gt.import_runs(problem, data, h, value="time")
    result = gt.tune(problem, tasks=rep.tasks, budget=8, n_initial=4, history=h, progress=False, **FAST)
    for i in range(2):
        recs = result.records(i, status=None)
        sources = [r["source"] for r in recs]
        assert len(recs) == 8  # 5 imported + 3 run: the budget counts imported runs
        assert sources[:5] == ["imported"] * 5
        # the default is measured first even though the imported runs filled the initial design
        assert sources[5] == "default" and recs[5]["params"] == BLOCKS_DEFAULT
        assert sources[6:] == ["search", "search"]
    assert result.default(0)[1] == pytest.approx(truth({"m": 100}, BLOCKS_DEFAULT))
    # the imported values are the tuner's data like its own: the best may well be an imported one
    assert result.best(0)[1] == min(r["value"] for r in result.records(0))


def test_tune_refuses_a_task_list_that_does_not_extend_the_imported_one(tmp_path):
    h = tmp_path / "h.sqlite"
    gt.import_runs(small_problem(), synthetic_rows(2, 2), h, value="time")
    with pytest.raises(HistoryMismatch, match="holds tasks"):
        gt.tune(small_problem(), tasks=[{"m": 1000}], budget=3, history=h, progress=False, **FAST)


# ---- gt.fit ---------------------------------------------------------------------------------------


def test_fit_gives_a_result_that_every_run_free_function_takes(tmp_path):
    data = synthetic_rows(4, 12)
    problem = small_problem(default=BLOCKS_DEFAULT)
    data.append({"m": 100, "nb": 8, "alg": "a", "x": 0.5, "time": truth({"m": 100}, BLOCKS_DEFAULT)})
    result = gt.fit(problem, data, value="time", restarts=1)
    assert [t for t in result.tasks] == [{"m": 100}, {"m": 400}, {"m": 700}, {"m": 1000}]
    assert len(result.history) == len(data) and {r["source"] for r in result.history} == {"imported"}
    assert result.model is not None and result.transform.use_log in (True, False)
    assert result.default(0)[1] == data[-1]["time"] and result.default(1) is None
    assert result.gain(0) == pytest.approx((data[-1]["time"] - result.best(0)[1]) / data[-1]["time"])
    row = result.table()[0]
    assert row["default"] == data[-1]["time"] and row["gain"] == result.gain(0)
    # the model learnt the data: in-sample predictions close to the measured values
    mean, _ = gt.predict(result, {"m": 700}, [dict(r["params"]) for r in result.records(2)])
    meas = np.array([r["value"] for r in result.records(2)])
    assert np.median(np.abs(mean - meas) / meas) < 0.1
    opt = gt.predict_optimum(result, {"m": 550})
    assert problem.is_feasible({"m": 550}, opt.params)
    assert gt.transfer_accuracy(result).summary()["n_tasks"] == 4
    path = result.save_model(tmp_path / "m.json")
    loaded = gt.load_model(path, problem=problem)
    assert gt.predict(loaded, {"m": 550}, opt.params) == pytest.approx(gt.predict(result, {"m": 550}, opt.params))
    new = gt.tune_new_task(result, {"m": 550}, budget=3, pso_particles=8, pso_iters=3)
    assert len(new.records(new.task_index)) == 3


def test_fit_of_a_csv_equals_fit_of_the_same_rows_as_dicts(tmp_path):
    data = synthetic_rows(3, 6)
    path = write_csv(tmp_path / "runs.csv", ["m", "nb", "alg", "x", "time"],
                     [[r["m"], r["nb"], r["alg"], repr(r["x"]), repr(r["time"])] for r in data])
    a = gt.fit(small_problem(), data, value="time", restarts=1, output_transform="log")
    b = gt.fit(small_problem(), path, value="time", restarts=1, output_transform="log")
    assert [dict(t.params) for t in a.history] == [dict(t.params) for t in b.history]
    assert a.model.log_likelihood() == pytest.approx(b.model.log_likelihood())


def test_a_saved_model_is_paired_with_its_data_again_only_when_it_is_that_data(tmp_path):
    from gptask.sources.importing import from_model

    data = synthetic_rows(3, 6)
    result = gt.fit(small_problem(), data, value="time", restarts=1, output_transform="log")
    path = result.save_model(tmp_path / "m.json", accuracy=False)
    again = from_model(gt.load_model(path, problem=small_problem()), data, value="time")
    assert [dict(t.params) for t in again.history] == [dict(t.params) for t in result.history]
    assert again.best(2) == result.best(2)
    changed = [dict(r, time=r["time"] * 1.5) if k == 4 else r for k, r in enumerate(data)]
    with pytest.raises(ValueError, match=r"task 0 \(\{'m': 100\}\): the data's configurations or values"):
        from_model(gt.load_model(path, problem=small_problem()), changed, value="time")
    with pytest.raises(ValueError, match="tasks"):
        from_model(gt.load_model(path, problem=small_problem()), data[:6], value="time")
    with pytest.raises(TypeError, match="problem=..."):
        from_model(gt.load_model(path), data, value="time")


def test_fit_refuses_bad_data_at_the_boundary():
    with pytest.raises(TypeError, match="problem must be a gptask.Problem"):
        gt.fit("small", [{"m": 1}], value="time")
    with pytest.raises(DataError, match="no valid rows"):
        gt.fit(small_problem(), [{"m": 100, "nb": 8, "alg": "a", "x": 0.5, "time": "x"}], value="time",
               skip_invalid=True)
    with pytest.raises(ValueError, match=r"default configuration .* violates constraint #0 \(blocks_fit\)"):
        gt.fit(small_problem(default={"nb": 200, "alg": "a", "x": 0.5}), synthetic_rows(2, 3), value="time")


# ---- the command line -----------------------------------------------------------------------------


def test_cli_fit_imports_saves_and_the_history_shows_the_gain_over_the_default(tmp_path, capsys, monkeypatch):
    from gptask.cli.main import main

    monkeypatch.syspath_prepend(str(Path(__file__).parent))
    rows = synthetic_rows(3, 8) + [{"m": 100, **BLOCKS_DEFAULT, "time": truth({"m": 100}, BLOCKS_DEFAULT)}]
    path = write_csv(tmp_path / "runs.csv", ["m", "nb", "alg", "x", "time"],
                     [[r["m"], r["nb"], r["alg"], r["x"], r["time"]] for r in rows])
    model, hist = tmp_path / "m.json", tmp_path / "h.sqlite"
    args = ["fit", str(path), "--problem", "problems_for_tests:blocks_problem", "--problem-options", "default=true",
            "--value", "time", "--restarts", "1", "--save-model", str(model), "--history", str(hist)]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "25 rows -> 25 configurations over 3 tasks (3 new): 25 imported" in out
    assert "default" in out and "gain" in out and f"model file: {model}" in out
    assert gt.load_model(model).tasks == [{"m": 100}, {"m": 550}, {"m": 1000}]
    best0 = min(r["time"] for r in rows if r["m"] == 100)
    assert main(["show", str(hist)]) == 0
    table = capsys.readouterr().out
    first = next(line for line in table.splitlines() if line.split()[:2] == ["0", "100"])
    d = truth({"m": 100}, BLOCKS_DEFAULT)
    assert f"{d:.4g}" in first and f"{(d - best0) / d:.4g}" in first
    assert main(["plot", str(hist), "--out", str(tmp_path / "c.png")]) == 0
    # predict with the problem: the default's predicted value and the predicted gain
    assert main(["predict", str(model), "--task", "m=300", "--problem", "problems_for_tests:blocks_problem",
                 "--problem-options", "default=true"]) == 0
    text = capsys.readouterr().out
    assert "default configuration nb=8,alg=a,x=0.5: predicted" in text and "predicted gain" in text
    # a bad file: every bad line named, exit code 2
    bad = write_csv(tmp_path / "bad.csv", ["m", "nb", "alg", "x", "time"], [["100", "8", "a", "0.5", "1"],
                                                                           ["100", "999", "a", "0.5", "1"]])
    assert main(["fit", str(bad), "--problem", "problems_for_tests:blocks_problem", "--value", "time"]) == 2
    assert f"{bad} line 3: nb=999 is outside [1, 256]" in capsys.readouterr().err
