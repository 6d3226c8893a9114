"""Bad numbers and paths on the command line: one clear line naming the argument and the rule, exit 2,
never a traceback; nothing written."""

import sys
from pathlib import Path

import pytest

from gptask.cli import main
from gptask.storage import SQLiteStorage

TESTS = Path(__file__).parent
sys.path.insert(0, str(TESTS))
from problems_for_tests import counting_problem  # noqa: E402

PROBLEM = ["--problem", "problems_for_tests:counting_problem"]
HUGE = "99999999999999999999"


@pytest.fixture
def history(tmp_path) -> Path:
    path = tmp_path / "h.sqlite"
    assert main(["ask", str(path), *PROBLEM, "--tasks", "2", "--budget", "4", "-n", "2"]) == 0
    return path


def run(args, capsys) -> tuple[int, str]:
    code = main([str(a) for a in args])
    return code, capsys.readouterr().err


@pytest.mark.parametrize("args, argument", [
    (["tell", "{h}", HUGE, "0.25"], "trial id"),
    (["release", "{h}", "1", HUGE], "trial id"),
    (["tell", "{h}", "-3", "0.25"], "trial id"),
    (["ask", "{h}", *PROBLEM, "-n", HUGE], "-n"),
    (["ask", "{h}", *PROBLEM, "--budget", HUGE], "--budget"),
    (["ask", "{h}", *PROBLEM, "--seed", HUGE], "--seed"),
    (["tune", *PROBLEM, "--tasks", HUGE], "--tasks"),
    (["tune", *PROBLEM, "--workers", HUGE], "--workers"),
    (["tune", *PROBLEM, "--repeats", HUGE], "--repeats"),
    (["tune", *PROBLEM, "--n-latent", HUGE], "--n-latent"),
    (["tune", *PROBLEM, "--timeout", "nan"], "--timeout"),
    (["tune", *PROBLEM, "--max-time", "inf"], "--max-time"),
    (["tune", *PROBLEM, "--target", "nan"], "--target"),
    (["ask", "{h}", *PROBLEM, "--lease", "inf"], "--lease"),
    (["tell", "{h}", "1", "0.25", "--duration", "inf"], "--duration"),
    (["fit", "d.csv", *PROBLEM, "--restarts", HUGE], "--restarts"),
])
def test_out_of_range_numbers_are_one_clear_line(history, capsys, args, argument):
    before = [(t.id, t.status, t.owner) for t in SQLiteStorage(history, read_only=True).trials()]
    code, err = run([a.format(h=history) for a in args], capsys)
    assert code == 2 and err.startswith("gptask: error: ") and argument in err and len(err.splitlines()) == 1, err
    assert "Traceback" not in err and "OverflowError" not in err
    assert [(t.id, t.status, t.owner) for t in SQLiteStorage(history, read_only=True).trials()] == before


def test_numbers_in_range_still_work(history, capsys):
    assert run(["tell", history, "1", "0.25", "--duration", "3"], capsys)[0] == 0
    assert run(["release", history, "2"], capsys)[0] == 0
