"""The one reader of measurements (gptask.sources.measurements), the one history check, the one decoder of
model files, and the follow-argument measure of issue 41 (scripts/dev/follow_argument.py)."""

import subprocess
import sys
from pathlib import Path

import gptask as gt
from gptask.sources.importing.rows import DataError
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


def _follow(arg):
    out = subprocess.run([sys.executable, str(ROOT / "scripts/dev/follow_argument.py"), arg, "--json"],
                         capture_output=True, text=True, check=True, cwd=ROOT)
    import json

    return json.loads(out.stdout)


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

    from gptask.sources.importing.rows import FileContent, read_rows
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
