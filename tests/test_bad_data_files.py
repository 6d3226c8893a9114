"""Measurement files as they come from other tools: a UTF-8 byte order mark (Excel), a Latin-1 byte,
and the hint that names the command line's option on the command line."""

import sys
from pathlib import Path

import pytest

import gptask as gt
from gptask.cli.main import main
from gptask.sources.importing import DataError

sys.path.insert(0, str(Path(__file__).parent))
from problems_for_tests import counting_problem  # noqa: E402

ROWS = "t,x,k,value\n0.1,0.2,3,1.5\n0.1,0.6,5,1.7\n0.7,0.4,2,1.2\n"


def test_a_csv_with_a_utf8_byte_order_mark_reads_like_one_without(tmp_path):
    plain, bom = tmp_path / "plain.csv", tmp_path / "bom.csv"
    plain.write_text(ROWS, encoding="utf-8")
    bom.write_bytes(b"\xef\xbb\xbf" + ROWS.encode())
    a = gt.import_runs(counting_problem(), plain, None)
    b = gt.import_runs(counting_problem(), bom, None)
    assert (a.rows, a.runs, a.tasks) == (b.rows, b.runs, b.tasks) == (3, 3, a.tasks)
    assert [(t.params, t.value) for t in a.trials] == [(t.params, t.value) for t in b.trials]


def test_a_latin1_byte_names_its_line(tmp_path):
    path = tmp_path / "latin1.csv"
    path.write_bytes(b"# measured on node07\nt,x,k,value\n0.1,0.2,3,1.5\n0.1,0.6,5,1.7 # caf\xe9\n")
    with pytest.raises(DataError, match=rf"{path} line 4: .*not UTF-8.*0xe9"):
        gt.import_runs(counting_problem(), path, None)


def test_the_command_line_hint_names_the_option(tmp_path, capsys):
    path = tmp_path / "bad.csv"
    path.write_text(ROWS + "0.1,7.5,3,1.5\n")
    code = main(["fit", str(path), "--problem", "problems_for_tests:counting_problem"])
    err = capsys.readouterr().err
    assert code == 2 and "--skip-invalid" in err and "line 5" in err
    with pytest.raises(DataError, match="skip_invalid=True"):
        gt.import_runs(counting_problem(), path, None)
