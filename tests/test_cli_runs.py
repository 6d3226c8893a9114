"""The command line around a run: the shell ask/tell loop of docs/evaluation.md (with a stand-in for
sbatch), ask/tell/release errors, progress lines in a log, output paths checked up front."""

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from gptask.data.storage import SQLiteStorage
from gptask.data.trials import Status

sys.path.insert(0, str(Path(__file__).parent))
from problems_for_tests import counting_problem  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests")]),
       "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}

FAKE_SBATCH = """#!/bin/bash
# stand-in for Slurm's sbatch --wait: run the job script with bash, output to --output, same exit code
out=/dev/stdout
while [[ "$1" == --* ]]; do
    case "$1" in --output=*) out="${1#--output=}";; esac
    shift
done
bash "$@" > "$out" 2>&1
"""

RUN_ONE = """#!/bin/bash
# the user's job: run the application for task "$1" and params "$2", print the value last
python - "$1" "$2" <<'EOF'
import sys
from gptask.cli.main import parse_assignments
task, p = parse_assignments(sys.argv[1]), parse_assignments(sys.argv[2])
if p["k"] >= 7:
    sys.exit(3)  # the application crashed
print("solver finished")
print(repr(1.0 + (p["x"] - task["t"]) ** 2 + 0.05 * (p["k"] - 4) ** 2))
EOF
"""


def gptask(*args, cwd, timeout=300, env=ENV):
    return subprocess.run([sys.executable, "-m", "gptask", *map(str, args)], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=timeout)


def readme_driver() -> str:
    text = (ROOT / "docs" / "evaluation.md").read_text()
    block = text.split("<!-- ask-tell-driver -->", 1)[1].split("<!-- /ask-tell-driver -->", 1)[0]
    return textwrap.dedent(block.split("```bash", 1)[1].split("```", 1)[0])


@pytest.mark.slow
def test_the_readme_shell_ask_tell_loop_runs_end_to_end(tmp_path):
    script = readme_driver()
    assert "sbatch --wait" in script and "gptask tell" in script
    script, n = re.subn(r"--tasks 4 --budget 12 -n 4", "--tasks 2 --budget 5 --n-initial 3 -n 2 --seed 3", script)
    assert n == 1
    (tmp_path / "myapp.py").write_text("from problems_for_tests import counting_problem\n\n\n"
                                       "def problem():\n    return counting_problem()\n")
    (tmp_path / "run_one.sh").write_text(RUN_ONE)
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "sbatch").write_text(FAKE_SBATCH)
    (bindir / "sbatch").chmod(0o755)
    (tmp_path / "driver.sh").write_text(script)
    env = {**ENV, "PATH": f"{bindir}{os.pathsep}{ENV['PATH']}", "PYTHONPATH": str(ROOT / "tests")}
    r = subprocess.run(["bash", "-e", "driver.sh"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    trials = SQLiteStorage(tmp_path / "batch.sqlite").trials()
    assert len(trials) == 10 and [sum(t.task_index == i for t in trials) for i in (0, 1)] == [5, 5]
    objective = counting_problem().objective
    for t in trials:
        if t.params["k"] >= 7:
            assert t.status is Status.FAILED and t.reason == "job exited with 3"
        else:
            assert t.status is Status.COMPLETE and t.value == objective(dict(t.task), dict(t.params))
    assert len({(t.task_index, t.params["x"], t.params["k"]) for t in trials}) == 10
    assert "pending: 0" in r.stdout  # gptask show at the end


def test_ask_tell_release_from_a_shell(tmp_path):
    h = tmp_path / "h.sqlite"
    first = gptask("ask", h, "--problem", "problems_for_tests:counting_problem", "--tasks", "2", "--budget", "4",
                   "--n-initial", "2", "--seed", "1", "-n", "3", "--json", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    asked = json.loads(first.stdout)
    assert [a["id"] for a in asked] == [1, 2, 3] and set(asked[0]) == {"id", "task_index", "task", "params"}
    # later asks reuse the settings stored in the history; the text form is ID<TAB>task<TAB>params
    more = gptask("ask", h, "--problem", "problems_for_tests:counting_problem", cwd=tmp_path)
    assert more.returncode == 0
    line = more.stdout.strip().split("\t")
    assert line[0] == "4" and line[1].startswith("t=") and "x=" in line[2] and "k=" in line[2]
    nothing = gptask("ask", h, "--problem", "problems_for_tests:counting_problem", cwd=tmp_path)
    assert nothing.stdout == "" and "4 trial(s) pending" in nothing.stderr
    ok = gptask("tell", h, 1, "1.25", "--duration", "3.5", cwd=tmp_path)
    assert ok.returncode == 0 and "trial 1: complete, value 1.25" in ok.stdout
    failed = gptask("tell", h, 2, "--failed", "node failure", cwd=tmp_path)
    assert failed.returncode == 0
    for args, msg in [((1, "2.0"), "already told"), ((99, "1"), "trial 99 is not in history"),
                      ((3, "fast"), "VALUE must be a number"), ((3,), "give the VALUE"),
                      ((3, "1", "--failed", "x"), "not both")]:
        r = gptask("tell", h, *args, cwd=tmp_path)
        assert r.returncode == 2 and msg in r.stderr, (args, r.stderr)
    rel = gptask("release", h, 3, cwd=tmp_path)
    assert rel.returncode == 0 and "[3]" in rel.stdout
    again = gptask("ask", h, "--problem", "problems_for_tests:counting_problem", "-n", "1", cwd=tmp_path)
    assert again.stdout.split("\t")[0] == "3"  # the released trial is proposed again
    trials = {t.id: t for t in SQLiteStorage(h).trials()}
    assert trials[1].value == 1.25 and trials[1].duration == 3.5 and trials[2].reason == "node failure"
    assert trials[3].attempts == 2 and trials[3].status is Status.PENDING
    show = gptask("show", h, cwd=tmp_path)
    assert show.returncode == 0 and "pending: 2" in show.stdout and "pending trial 3" in show.stdout
    wrong = gptask("ask", h, "--problem", "problems_for_tests:failing_problem", cwd=tmp_path)
    assert wrong.returncode == 2 and "different problem" in wrong.stderr


@pytest.mark.slow
def test_trials_held_by_a_shell_or_a_live_tuner_say_how_to_free_them(tmp_path):
    """The audit's weak items: a tune waiting on trials asked without --lease said nothing of how to
    free them; `gptask release` of a trial a live tuner runs was accepted (it then ran twice)."""
    h = tmp_path / "h.sqlite"
    asked = gptask("ask", h, "--problem", "problems_for_tests:counting_problem", "--tasks", "1", "--budget", "2",
                   "--n-initial", "2", "-n", "2", cwd=tmp_path)
    assert asked.returncode == 0, asked.stderr
    wait = gptask("tune", "--history", h, "--problem", "problems_for_tests:counting_problem", "--tasks", "1",
                  "--budget", "2", "--max-time", "2", cwd=tmp_path)
    assert wait.returncode == 0, wait.stderr
    assert re.search(r"waiting for 2 pending trial\(s\) held by other processes \(gptask ask on [^:]+: trial\(s\) \[1, 2\]\. "
                     r"Trials asked by a shell are held until .*gptask tell HISTORY ID VALUE.*gptask release HISTORY ID",
                     wait.stderr), wait.stderr
    # a trial that a live process on this host holds is not released by id unless forced
    holder = subprocess.Popen([sys.executable, "-c", HOLD.format(h=str(h))], stdout=subprocess.PIPE, text=True,
                              env=ENV)
    try:
        held = int(holder.stdout.readline())
        refused = gptask("release", h, held, cwd=tmp_path)
        assert refused.returncode == 2 and f"trial {held} is being run by tune pid {holder.pid}" in refused.stderr
        assert "gptask release --force" in refused.stderr
        assert SQLiteStorage(h).trials()[held - 1].owner is not None
        forced = gptask("release", h, held, "--force", cwd=tmp_path)
        assert forced.returncode == 0 and f"[{held}]" in forced.stdout
    finally:
        holder.kill()
        holder.wait()


HOLD = """
import time
from gptask.data.storage import SQLiteStorage, Owner
from gptask.data.trials import Proposal
s = SQLiteStorage({h!r})
t, = s.add_trials([Proposal(0, s.tasks()[0], {{"x": 0.123, "k": 3}})], Owner.this_process("tune"))
print(t.id, flush=True)
time.sleep(120)
"""


def test_progress_lines_in_a_log_unless_quiet(tmp_path):
    args = ("tune", "--problem", "problems_for_tests:counting_problem", "--tasks", "2", "--budget", "4",
            "--n-initial", "2", "--seed", "0")
    r = gptask(*args, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    lines = [ln for ln in r.stderr.splitlines() if "iteration" in ln]
    assert len(lines) == 4 and "iteration 1: tasks done 0/2, evaluations 2/8 (0 failed, 0 pending), best [" in lines[0]
    assert "tasks done 2/2, evaluations 8/8" in lines[-1]
    quiet = gptask(*args, "--quiet", cwd=tmp_path)
    assert quiet.returncode == 0 and "iteration" not in quiet.stderr


def test_output_paths_are_checked_before_any_run(tmp_path):
    log = tmp_path / "calls.txt"
    base = ("tune", "--problem", "problems_for_tests:counting_problem", "--problem-options", f"log={log}",
            "--tasks", "1", "--budget", "2", "--history", tmp_path / "h.sqlite")
    for extra, msg in [(("--plot", tmp_path / "nope" / "c.png"), "does not exist"),
                       (("--plot", tmp_path / "c.txt"), "must end in one of"),
                       (("--save-model", tmp_path / "nope" / "m.json"), "does not exist"),
                       (("--plot", tmp_path), "is a directory")]:
        r = gptask(*base, *extra, cwd=tmp_path)
        assert r.returncode == 2 and msg in r.stderr, (extra, r.stderr)
    assert not log.exists() and not (tmp_path / "h.sqlite").exists()


def test_problem_modules_are_found_in_the_current_directory(tmp_path):
    (tmp_path / "localmod.py").write_text("from problems_for_tests import counting_problem as problem\n")
    env = {**ENV, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests")])}
    r = gptask("tune", "--problem", "localmod:problem", "--tasks", "1", "--budget", "2", "--quiet", cwd=tmp_path,
               env=env)
    assert r.returncode == 0, r.stderr
    r = gptask("tune", "--problem", "nomod:problem", "--tasks", "1", "--budget", "2", cwd=tmp_path)
    assert r.returncode == 2 and "cannot import 'nomod'" in r.stderr and "PYTHONPATH" in r.stderr


def test_a_file_in_the_current_directory_named_like_a_package_is_not_imported_in_its_place(tmp_path):
    # the audit's case: a pyswarms.py next to the user was executed by gptask tune --problem mod:fn
    (tmp_path / "localmod.py").write_text("from problems_for_tests import counting_problem as problem\n")
    (tmp_path / "pyswarms.py").write_text("open('shadowed', 'w').close()\nraise SystemExit('wrong pyswarms')\n")
    (tmp_path / "numpy.py").write_text("open('shadowed', 'w').close()\nraise SystemExit('wrong numpy')\n")
    # the installed command (python -m puts the current directory first by Python's own rule)
    r = subprocess.run([str(BIN / "gptask"), "tune", "--problem", "localmod:problem", "--tasks", "2", "--budget", "6",
                        "--n-initial", "3", "--quiet", "--history", str(tmp_path / "h.sqlite")], env=ENV, cwd=tmp_path,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert not (tmp_path / "shadowed").exists()
    assert len(SQLiteStorage(tmp_path / "h.sqlite", read_only=True).trials()) == 12  # searched runs used PSO


def test_tune_with_workers_runs_the_objective_in_other_processes(tmp_path):
    log, hist = tmp_path / "calls.jsonl", tmp_path / "w.sqlite"
    r = gptask("tune", "--problem", "problems_for_tests:sleepy_problem", "--problem-options", f"log={log}",
               "--tasks", "2", "--budget", "5", "--n-initial", "3", "--workers", "2", "--history", hist, "-q",
               cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    trials = SQLiteStorage(hist, read_only=True).trials()
    assert len(trials) == 10 and all(t.status.finished for t in trials)
    pids = {json.loads(line)["pid"] for line in log.read_text().splitlines()}
    # each run in a process group of its own, forked by one of the pool's two workers (so that it dies with the tuner)
    assert len(log.read_text().splitlines()) == 10 and len(pids) == 10
    bad = gptask("tune", "--problem", "demo", "--workers", "0", cwd=tmp_path)
    assert bad.returncode == 2 and "--workers must be >= 1" in bad.stderr
