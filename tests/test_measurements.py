"""The one reader of measurements (gptask.sources.measurements), the one history check, the one decoder of
model files, and the follow-argument measure of issue 41 (scripts/dev/follow_argument.py)."""

import subprocess
import sys
from pathlib import Path

import pytest

import gptask as gt
from gptask.sources.importing import DataError, read_rows
from gptask.insight.model_result import result_from_model
from gptask.sources.measurements import model_data, read_measurements
from gptask.core.output_files import is_history

sys.path.insert(0, str(Path(__file__).parent))
from problems_for_tests import counting_problem  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(__file__).parent / "data"


def test_is_history_knows_sqlite_files_from_others(tmp_path):
    csv = tmp_path / "runs.csv"
    csv.write_text("t,x,k,value\n0.1,0.2,2,1.0\n")
    assert all(is_history(p) for p in DATA.glob("*.sqlite"))
    assert not is_history(csv) and not is_history(tmp_path / "missing.sqlite") and not is_history(tmp_path)


def test_a_model_file_reads_as_the_result_it_was_fitted_on(tmp_path):
    problem = counting_problem()
    r = gt.tune(problem, tasks=[{"t": 0.2}, {"t": 0.8}], budget=5, n_initial=3, seed=0, progress=False,
                provenance="laptop")
    path = tmp_path / "m.json"
    r.save_model(path)
    got = read_measurements(problem, path)
    measured = {(tuple(sorted(t.task.items())), tuple(sorted(t.params.items()))): t.value
                for t in r.history if t.ok}
    assert len(got) == len(measured) and {m.machine["label"] for m in got} == {"laptop"}
    for m in got:  # the values mapped back from model units: the measured ones to rounding
        key = (tuple(sorted(m.task.items())), tuple(sorted(m.params.items())))
        assert abs(m.value - measured[key]) < 1e-9 * max(1.0, abs(measured[key]))
    rebuilt = result_from_model(gt.load_model(path, problem=problem))  # insight's reading: the same decoder
    assert sorted((tuple(sorted(t.params.items())), t.value) for t in rebuilt.history) == \
        sorted((tuple(sorted(m.params.items())), m.value) for m in got)


def _follow(arg, start=None):
    out = subprocess.run([sys.executable, str(ROOT / "scripts/dev/follow_argument.py"), arg, "--json"]
                         + (["--start", start] if start else []), capture_output=True, text=True, check=True, cwd=ROOT)
    import json

    return json.loads(out.stdout)


def _entered(got):
    return [f"{module}:{name}" for module, name, _ in got["chain"]]


def test_import_and_replay_read_their_files_through_the_one_reader():
    """gt.import_runs (and gt.fit, through it) reads its data with read_measurements; gptask replay
    and read_rows of a path read a file with read_input, the one read of an input file."""
    imported = _entered(_follow("data", "gptask.sources.importing.store:import_runs"))
    assert imported[1] == "gptask.sources.measurements:read_measurements", imported
    assert "gptask.core.input_files:read_input" in imported
    assert not any(f.startswith("gptask.sources.rows:read") for f in imported)  # no reading of its own
    fitted = _entered(_follow("data", "gptask.sources.importing.fit:fit"))
    assert "gptask.sources.measurements:read_measurements" in fitted
    replayed = _entered(_follow("args", "gptask.cli.replay:_cmd_replay"))
    at = replayed.index("gptask.sources.replay:read_recording")
    assert replayed[at + 1] == "gptask.core.input_files:read_input", replayed
    rows = _entered(_follow("data", "gptask.sources.rows:read_rows"))
    assert "gptask.core.input_files:read_input" in rows and "gptask.sources.replay:read_recording" not in rows
    sources = _entered(_follow("sources"))
    assert "gptask.core.input_files:read_input" in sources


def test_a_history_or_model_file_given_as_rows_or_a_recording_is_named_as_such(tmp_path):
    """Read through the one reader, a history is recognised by its first bytes: import_runs and
    replay said "not UTF-8 text" of one (and import_runs "unknown JSON recording format" of a model file)."""
    from gptask.sources.replay import read_recording

    problem = counting_problem()
    history = next(iter(sorted(DATA.glob("*.sqlite"))))
    with pytest.raises(DataError, match=rf"{history} is a gptask history, not rows to import"):
        gt.import_runs(problem, history, None)
    with pytest.raises(ValueError, match=rf"{history}: a gptask history \(an SQLite database\), not a recording"):
        read_recording(history)
    r = gt.tune(problem, tasks=[{"t": 0.2}], budget=4, n_initial=3, seed=0, progress=False, provenance="laptop")
    model = tmp_path / "m.json"
    r.save_model(model)
    with pytest.raises(DataError, match=rf"{model} is a gptask model file, not rows to import"):
        gt.fit(problem, model, progress=False)
    with pytest.raises(DataError, match="is a gptask model file"):
        read_rows(problem, model)


def test_import_runs_reads_rows_recordings_and_errors_as_before(tmp_path):
    """Through read_measurements, import_runs keeps its formats (CSV, dicts, recording) and errors."""
    import gzip
    import json

    problem = counting_problem()
    csv = tmp_path / "runs.csv"
    csv.write_text("t,x,k,value,machine.label\n0.1,0.2,2,1.0,a\n0.1,0.2,2,3.0,a\n0.1,0.3,3,2.5,a\n")
    report = gt.import_runs(problem, csv, None)
    assert (report.rows, report.runs) == (3, 2) and report.trials[0].samples == (1.0, 3.0)
    assert report.trials[0].extra == {"imported_from": str(csv), "lines": [2, 3]}
    report = gt.import_runs(problem, [{"t": 0.1, "x": 0.2, "k": 2, "value": 1.0}], None, machine="laptop")
    assert report.rows == 1 and report.trials[0].value == 1.0
    with pytest.raises(FileNotFoundError, match="no data file at"):
        gt.import_runs(problem, tmp_path / "none.csv", None)
    with pytest.raises(TypeError, match="CSV file path or a list of dicts, got int"):
        gt.import_runs(problem, 42, None)
    with pytest.raises(DataError, match="bad row"):
        gt.import_runs(problem, [{"t": 0.1, "x": "no", "k": 2, "value": 1.0}], None)
    replayed = gt.Problem(gt.Space([gt.Categorical("machine", ["A100"])]), gt.Space([gt.Ordinal("b", [16, 32])]),
                          lambda task, params: 1.0)
    rec = tmp_path / "cache.json.gz"
    doc = {"tune_params_keys": ["b"], "tune_params": {"b": [16, 32]}, "objective": "time", "device_name": "A100",
           "cache": {"16": {"b": 16, "time": 1.5}, "32": {"b": 32, "time": "RuntimeFailedConfig"}}}
    rec.write_bytes(gzip.compress(json.dumps(doc).encode()))
    report = gt.import_runs(replayed, rec, None)
    assert sorted((t.params["b"], t.status.value, t.value) for t in report.trials) == [
        (16, "complete", 1.5), (32, "failed", None)]


def test_history_passes_through_few_functions_and_files():
    got = _follow("history")
    assert got["functions"] <= 10 and got["returns"] <= 2, got  # issue 41's target


def test_sources_passes_through_few_functions_and_files():
    got = _follow("sources")
    assert got["functions"] <= 15 and got["returns"] <= 3, got  # issue 41's target


def test_the_parsers_of_content_read_as_the_path_readers(tmp_path):
    """Each file is read once by read_measurements, its bytes handed to the parser of its kind: those
    parse as the readers of the path itself (a CSV file, a gzipped recording, a model file)."""
    import gzip
    import json

    from gptask.sources.rows import FileContent, read_rows
    from gptask.transfer.model_io import model_document, model_from_document
    from gptask.sources.replay import read_recording, recording_from_bytes

    problem = counting_problem()
    csv = tmp_path / "runs.csv"
    csv.write_bytes("\ufeff# a comment\nt,x,k,value\r\n0.1,0.2,2,1.0\n0.1,0.3,3,\"2.5\"\n".encode())
    assert read_rows(problem, FileContent(str(csv), csv.read_bytes())) == read_rows(problem, csv)
    bad = tmp_path / "bad.csv"
    bad.write_bytes(b"t,x,k,value\n0.1,0.2,2,1.0\n0.1,\xff,2,1.0\n")
    errors = []
    for data in (bad, FileContent(str(bad), bad.read_bytes())):
        try:
            read_rows(problem, data)
        except DataError as exc:
            errors.append(str(exc))
    assert len(errors) == 2 and errors[0] == errors[1] and "line 3" in errors[0]
    rec = tmp_path / "cache.json.gz"
    doc = {"tune_params_keys": ["b"], "tune_params": {"b": [16, 32]}, "objective": "time", "device_name": "A100",
           "cache": {"16": {"b": 16, "time": 1.5}, "32": {"b": 32, "time": 2.5}}}
    rec.write_bytes(gzip.compress(json.dumps(doc).encode()))
    assert recording_from_bytes(rec.read_bytes(), rec) == read_recording(rec)
    r = gt.tune(problem, tasks=[{"t": 0.2}], budget=4, n_initial=3, seed=0, progress=False, provenance="laptop")
    path = tmp_path / "m.json"
    r.save_model(path)
    a = model_from_document(model_document(path.read_bytes(), str(path)), problem, str(path))
    b = gt.load_model(path, problem)
    assert a.tasks == b.tasks and [p for p, _ in model_data(a)[0]] == [p for p, _ in model_data(b)[0]]


def test_a_source_named_by_a_database_url_is_shown_without_its_password():
    from gptask.sources.measurements import shown_name
    from gptask.data.storage.postgres import split_url

    url = "postgresql://me:s3cret%40x@db.example:5433/tuning?schema=conv&password=other"
    assert "s3cret" not in shown_name(url) and "other" not in shown_name(url) and "db.example:5433" in shown_name(url)
    assert shown_name(gt.Source(url, machine="a100")) == shown_name(url)
    assert shown_name([{"x": 1}]) == ""
    location = split_url(url)
    assert location.schema == "conv" and "s3cret" not in location.shown and "schema=" not in location.conninfo
