"""Every option and argument of every command line has a --help text (issue 27: --budget,
--n-initial, --seed, --repeats, --n-latent had none), and the reading side of a pipe may leave early."""

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def parsers():
    from apps.io_accelerators.__main__ import build_parser as io_parser
    from apps.mpi_collectives.cli import build_parser as mpi_parser
    from apps.scalapack_qr.cli import build_parser as qr_parser
    from gptask.cli.main import build_parser

    return {"gptask": build_parser(), "apps.scalapack_qr": qr_parser(), "apps.mpi_collectives": mpi_parser(),
            "apps.io_accelerators": io_parser()}


def undocumented(parser, prefix):
    out = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                out += undocumented(sub, f"{prefix} {name}")
        elif not isinstance(action, argparse._HelpAction) and not (action.help or "").strip():
            out.append(f"{prefix} {'/'.join(action.option_strings) or action.dest}")
    return out


@pytest.mark.parametrize("name", ["gptask", "apps.scalapack_qr", "apps.mpi_collectives", "apps.io_accelerators"])
def test_every_option_has_a_help_text(name):
    assert undocumented(parsers()[name], name) == []


def test_tune_help_explains_the_budget_and_the_failure_rule():
    text = parsers()["gptask"]._subparsers._group_actions[0].choices["tune"].format_help()
    for option in ("--budget", "--n-initial", "--seed", "--repeats", "--n-latent", "--max-failures"):
        assert option in text
    assert "evaluations per task" in text and "same reason" in text


def test_a_reader_leaving_the_pipe_early_is_not_an_error(tmp_path):
    import gptask as gt
    from gptask.problem.functions import demo_problem

    # 3000 tasks of one run each: show prints far more than a pipe holds (64 KiB)
    rows = [{"t": 10.0 * k / 3000, "x": 0.5, "value": 1.0 + k} for k in range(3000)]
    gt.import_runs(demo_problem(), rows, tmp_path / "h.sqlite")
    env = {**os.environ, "PYTHONPATH": os.environ.get("GPTASK_UNDER_TEST", str(ROOT))}
    # head reads one line and exits; gptask's later writes then meet a closed pipe
    r = subprocess.run(f'"{sys.executable}" -m gptask show h.sqlite | head -1; echo "status ${{PIPESTATUS[0]}}"',
                       shell=True, executable="/bin/bash", cwd=tmp_path, env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.stdout.startswith("problem: demo  tasks: 3000")
    assert r.stdout.splitlines()[-1] in ("status 0", "status 141")
    assert "Broken pipe" not in r.stderr and "Traceback" not in r.stderr and r.stderr == ""
