"""What results look like (issue 27): result.table() prints as aligned columns and stays a list of
dicts, gains in percent and values with the problem's unit everywhere, convergence plots with
integer evaluation ticks and the unit on the y axis, labelled progress lines, and the CSV that
``gptask export`` writes read back by ``gptask fit``."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

import gptask as gt
from gptask.core.labels import format_gain, task_label
from gptask.core.progress import format_line
from gptask.data.storage import SQLiteStorage
from gptask.data.trials import Status

sys.path.insert(0, str(Path(__file__).parent))
from problems_for_tests import blocks_problem, failing_problem  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests")])}


def unit_problem(unit="s"):
    base = blocks_problem(default=True)
    return gt.Problem(base.task_space, base.param_space, base.objective, base.constraints, base.constants,
                      name="blocks", default=base.default, unit=unit)


def test_the_table_prints_aligned_and_stays_a_list_of_dicts():
    result = gt.tune(unit_problem(), tasks=3, budget=6, n_initial=4, seed=0, progress=False)
    table = result.table()
    assert isinstance(table, list) and len(table) == 3 and all(isinstance(r, dict) for r in table)
    assert table[0]["best"] == result.best(0)[1] and table[1]["gain"] == result.gain(1)
    text = str(table)
    assert repr(table) == text
    lines = text.splitlines()
    assert len(lines) == 5 and len({len(line) for line in lines}) == 1  # aligned columns
    head = lines[0].split("  ")
    assert "best (s)" in lines[0] and "default (s)" in lines[0] and "[" not in text and "{" not in text
    for row, line in zip(table, lines[2:]):
        assert format_gain(row["gain"]) in line and line.rstrip().endswith(str(row["failed"]))
    assert head[0].strip() == "task_index"
    # without a unit the headers are plain
    assert "best (" not in str(gt.tune(unit_problem(""), tasks=2, budget=3, n_initial=3, progress=False).table())


def test_units_are_checked():
    with pytest.raises(TypeError, match="unit must be a string"):
        unit_problem(unit=1.0)
    with pytest.raises(ValueError, match="short label on one line"):
        unit_problem(unit="s\nrm -rf")
    assert unit_problem(unit=" ms ").unit == "ms"


def test_progress_lines_label_every_value_with_its_task():
    line = format_line(3, 1, 2, 10, 40, 2, 1, [0.01167, None], 0.5, 65.0,
                       labels=[task_label({"m": 1200, "n": 800}), task_label({"m": 300, "n": 1900})], unit="s",
                       reasons=__import__("collections").Counter({"KeyError: 'nodes'": 2}))
    assert "best [m=1200,n=800: 0.01167 s; m=300,n=1900: -]" in line
    assert "(2 failed: KeyError: 'nodes' x2, 1 pending)" in line and line.endswith("1m05s")


def test_convergence_plots_have_integer_ticks_and_the_unit(tmp_path):
    import matplotlib.pyplot as plt

    from gptask.results.plots import convergence_figure, plot_convergence

    result = gt.tune(unit_problem(), tasks=2, budget=5, n_initial=3, seed=0, progress=False)
    fig = convergence_figure(result.history, tasks=result.tasks, unit="s")
    try:
        ax = fig.axes[0]
        fig.canvas.draw()
        lo, hi = ax.get_xlim()
        ticks = [t for t in ax.get_xticks() if lo <= t <= hi]
        assert len(ticks) >= 2 and all(float(t).is_integer() for t in ticks)
        assert ax.get_ylabel() == "best value so far (s)"
    finally:
        plt.close(fig)
    assert plot_convergence(result.history, tmp_path / "c.png", unit="s").stat().st_size > 1000


def test_an_exported_history_fits_as_it_is(tmp_path):
    h = tmp_path / "h.sqlite"
    gt.tune(failing_problem(), tasks=2, budget=8, n_initial=6, seed=1, history=h, progress=False)
    run = lambda *a: subprocess.run([sys.executable, "-m", "gptask", *map(str, a)], env=ENV, cwd=tmp_path,
                                    capture_output=True, text=True, timeout=600)
    r = run("export", h, "--out", "runs.csv")
    assert r.returncode == 0, r.stderr
    header = (tmp_path / "runs.csv").read_text().splitlines()[0].split(",")
    assert "task.t" in header and "param.x" in header and "t" not in header
    r = run("fit", "runs.csv", "--problem", "problems_for_tests:failing_problem", "--save-model", "m.json",
            "--quiet")
    assert r.returncode == 0, r.stderr
    with SQLiteStorage(h, read_only=True) as s:
        trials = s.trials()
    assert any(t.status is Status.FAILED for t in trials)  # failed runs read back through the status column
    result = gt.fit(failing_problem(), tmp_path / "runs.csv", progress=False)
    back = sorted((t.task_index, t.params["x"], t.status.value, t.value) for t in result.history)
    assert back == sorted((t.task_index, t.params["x"], t.status.value, t.value) for t in trials)
    assert "model file: m.json" in r.stdout


def test_predict_with_other_problem_options_names_what_differs(tmp_path):
    rows = ["t,x,value"] + [f"{t},{x},{1.0 + (x - t) ** 2}" for t in (0.2, 0.5, 0.8) for x in (0.1, 0.4, 0.7, 1.3)]
    (tmp_path / "runs.csv").write_text("\n".join(rows) + "\n")
    run = lambda *a: subprocess.run([sys.executable, "-m", "gptask", *map(str, a)], env=ENV, cwd=tmp_path,
                                    capture_output=True, text=True, timeout=600)
    fit = run("fit", "runs.csv", "--problem", "problems_for_tests:sized_problem", "--problem-options",
              "x_max=2,cores=8", "--save-model", "m.json", "--quiet")
    assert fit.returncode == 0, fit.stderr
    bad = run("predict", "m.json", "--task", "t=0.3", "--problem", "problems_for_tests:sized_problem")
    assert bad.returncode == 2
    assert "constant cores: the model's 8, this problem's 4" in bad.stderr
    assert "parameter dimension x: the model's real in [0.0, 2.0], this problem's real in [0.0, 1.0]" in bad.stderr
    assert ("saved from --problem problems_for_tests:sized_problem --problem-options cores=8,x_max=2; this command "
            "gave --problem problems_for_tests:sized_problem without --problem-options") in bad.stderr
    good = run("predict", "m.json", "--task", "t=0.3", "--problem", "problems_for_tests:sized_problem",
               "--problem-options", "x_max=2,cores=8")
    assert good.returncode == 0 and "predicted objective there" in good.stdout and good.stderr == ""
