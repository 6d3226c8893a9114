"""Data too large for the exact model is refused early, with how many rows or points, the limit and
what to do: before the rows are parsed (a streamed count) or an N x N matrix is built."""

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

import gptask as gt
from gptask.sources import rows as rows_module
from gptask.sources.importing import DataError
from gptask.model.numerics import LCM, defaults

TESTS = Path(__file__).parent
ROOT = TESTS.parent
sys.path.insert(0, str(TESTS))
from problems_for_tests import counting_problem  # noqa: E402


def write_csv(path: Path, n_rows: int, n_configs: int) -> Path:
    """``n_rows`` rows of the counting problem cycling over ``n_configs`` configurations of 2 tasks."""
    with open(path, "w") as fh:
        fh.write("# measured somewhere\nt,x,k,value\n")
        chunk = []
        for r in range(n_rows):
            c = r % n_configs
            chunk.append(f"{0.25 * (c % 2)},{(c // 2) / n_configs:.9f},{1 + c % 8},{1.0 + c / n_configs:.6f}\n")
            if len(chunk) == 50_000:
                fh.write("".join(chunk))
                chunk = []
        fh.write("".join(chunk))
    return path


def _limit_memory():  # pragma: no cover - runs in the child
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))


def test_gptask_fit_on_a_million_rows_refuses_at_once_naming_the_count(tmp_path):
    data = write_csv(tmp_path / "big.csv", 1_000_000, 5000)
    # 2 GiB of address space: reading the million rows took 3.6 GB, the model 7.3 TiB
    out = subprocess.run([sys.executable, "-m", "gptask", "fit", str(data), "--problem",
                          "problems_for_tests:counting_problem", "--save-model", str(tmp_path / "m.json")],
                         capture_output=True, text=True, timeout=600, preexec_fn=_limit_memory,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(TESTS)])})
    assert out.returncode == 2, out.stderr[-3000:]
    assert "1,000,000 rows" in out.stderr and f"{defaults.IMPORT_MAX_ROWS:,}" in out.stderr, out.stderr
    assert str(data) in out.stderr and "Traceback" not in out.stderr
    assert not (tmp_path / "m.json").exists()


@pytest.mark.parametrize("entry", ["fit", "import_runs"])
def test_too_many_rows_are_refused_before_any_row_is_parsed(tmp_path, monkeypatch, entry):
    monkeypatch.setattr(defaults, "IMPORT_MAX_ROWS", 1000)
    parsed = []
    real = rows_module._row
    monkeypatch.setattr(rows_module, "_row", lambda *a, **k: parsed.append(1) or real(*a, **k))
    data = write_csv(tmp_path / "d.csv", 1001, 50)
    call = (lambda: gt.fit(counting_problem(), data)) if entry == "fit" else (
        lambda: gt.import_runs(counting_problem(), data, tmp_path / "h.sqlite"))
    with pytest.raises(DataError, match=r"1,001 rows.*at most 1,000"):
        call()
    assert parsed == [] and not (tmp_path / "h.sqlite").exists()
    as_dicts = [{"t": 0.0, "x": 0.5, "k": 2, "value": 1.0}] * 1001
    with pytest.raises(DataError, match=r"1,001 rows"):
        gt.fit(counting_problem(), as_dicts)
    assert parsed == []
    write_csv(data, 1000, 50)  # at the limit: imported
    assert gt.import_runs(counting_problem(), data, None).runs == 50


def test_more_configurations_than_the_model_fits_are_refused_before_the_fit(tmp_path, monkeypatch):
    n = defaults.EXACT_FIT_MAX_POINTS + 1
    data = write_csv(tmp_path / "d.csv", n, n)
    fitted = []
    monkeypatch.setattr(LCM, "fit", lambda *a, **k: fitted.append(1))
    for call in (lambda: gt.fit(counting_problem(), data),
                 lambda: gt.import_runs(counting_problem(), data, tmp_path / "h.sqlite")):
        with pytest.raises(DataError, match=rf"{n:,} configurations.*at most {defaults.EXACT_FIT_MAX_POINTS:,}"):
            call()
    assert fitted == [] and not (tmp_path / "h.sqlite").exists()


def test_a_tuning_run_larger_than_the_model_fits_is_refused_before_it_runs(tmp_path, monkeypatch):
    monkeypatch.setattr(defaults, "EXACT_FIT_MAX_POINTS", 30)
    log = tmp_path / "calls.log"
    with pytest.raises(ValueError, match=r"4 tasks x budget 8 = 32 points.*at most 30"):
        gt.tune(counting_problem(str(log)), tasks=4, budget=8, progress=False)
    assert not log.exists()  # nothing was run
    res = gt.tune(counting_problem(str(log)), tasks=3, budget=10, n_initial=3, progress=False, pso_particles=8,
                  pso_iters=3, restarts=1)
    assert len(res.history) == 30
