"""Every command and code block of README.md and of the pages under docs/ runs as written (issues 27, 41).

Each fenced ``bash``/``python`` block of the README and of every ``docs/*.md`` page carries an HTML comment right above it,
``<!-- example: ID [session=NAME] [file=NAME.py] [tested-by=PATH] -->``; the tests extract the
blocks from the pages' text (README first, then the docs pages in the order of ``DOC_PAGES``) and run
them, unchanged; example ids are unique across all the pages:

* in a clean shell: ``PATH`` holds only the system directories, and the README's own activation
  block (``source .venv/bin/activate``) is run first, as a new user would after command 1;
  ``PYTHONPATH`` points at this checkout so that the tree under test is what runs (in a fresh clone
  the editable install already does that);
* in a scratch copy of the repository's layout (links to its directories; notebooks copied), so
  that the examples' output files land there;
* python blocks of one ``session`` in one script, in page order (the library example defines the
  ``problem`` the later ones use); a ``file=`` block is written to that file and run with the
  command its first line names (``# tune.py; run: mpiexec -n 2 python tune.py``);
* the long examples (the two commands, the applications) with small budgets, through the documented
  ``GPTASK_MAX_TASKS`` / ``GPTASK_MAX_BUDGET`` (gptask/core/smoke.py), ``GPTASK_SKIP_SETUP=1`` (the
  scripts' setup step; this suite runs inside the set-up virtualenv) and ``PYTEST_ADDOPTS`` (which
  test file command 2 runs here: not the whole suite again).

``tested-by=`` names the test that runs a block elsewhere (the shell ask/tell loop needs a stand-in
for ``sbatch``). Set ``GPTASK_README_TIMES=file.json`` to record each example's wall time.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
#: the docs pages in reading order (a session's blocks run in this order, after the README's); every
#: docs/*.md page must be listed
DOC_PAGES = ["install", "spaces", "evaluation", "histories", "transfer", "sources", "objectives", "insight",
             "executors", "cluster", "fidelity", "command-line", "applications", "layout"]
FENCE = re.compile(r"^(?P<indent> *)```(?P<lang>\w*)\n(?P<body>.*?)^(?P=indent)```[ \t]*$", re.M | re.S)
NOTE = re.compile(r"<!-- example: (?P<id>[\w-]+)(?P<opts>(?: [\w-]+=\S+)*) -->")
CLEAN_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#: the caps of the long examples (documented in the README and gptask/core/smoke.py)
SMOKE = {"GPTASK_MAX_TASKS": "2", "GPTASK_MAX_BUDGET": "4", "GPTASK_SKIP_SETUP": "1"}
#: a duration as the README states them ("about 40 s", "2 minutes", "1-2 min")
DURATION = re.compile(r"\b\d+(\.\d+)?( to \d+|-\d+)? ?(s|ms|min|minutes?|seconds?|hours?)\b")


@dataclass
class Example:
    id: str
    lang: str
    code: str
    line: int
    after: str  # the page's paragraph right after the block
    opts: dict = field(default_factory=dict)
    page: str = "README.md"

    def session_key(self) -> str:
        """The script a block runs in: its session's, else its own (a history shared within one is fine)."""
        return self.opts.get("session", self.id)


def pages() -> list[Path]:
    """README.md, then the docs pages in reading order."""
    return [README] + [DOCS / f"{name}.md" for name in DOC_PAGES]


def examples() -> list[Example]:
    """The fenced code blocks (``text`` blocks aside) of every page, with their annotations."""
    out = []
    for page in pages():
        out += _examples(page)
    return out


def _examples(page: Path) -> list[Example]:
    text = page.read_text()
    name = str(page.relative_to(ROOT))
    out = []
    for m in FENCE.finditer(text):
        if m["lang"] == "text":
            continue
        line = text.count("\n", 0, m.start()) + 1
        above = text[: m.start()].rstrip("\n").splitlines()
        notes = []
        while above and above[-1].strip().startswith("<!--"):
            notes.append(above.pop().strip())
        found = [n for n in (NOTE.fullmatch(x) for x in notes) if n]
        assert len(found) == 1, f"{name} line {line}: a ```{m['lang']} block needs one <!-- example: ID --> above it"
        opts = dict(o.split("=", 1) for o in found[0]["opts"].split())
        rest = text[m.end():].lstrip("\n")
        while rest.lstrip().startswith("<!--"):  # a closing marker: the paragraph after it
            rest = rest.split("\n", 1)[1].lstrip("\n") if "\n" in rest else ""
        after = rest.split("\n\n", 1)[0]
        out.append(Example(found[0]["id"], m["lang"], textwrap.dedent(m["body"]), line, after, opts, name))
    return out


def by_id() -> dict[str, Example]:
    found = examples()
    ids = [e.id for e in found]
    assert len(ids) == len(set(ids)), f"repeated example ids: {ids}"
    return {e.id: e for e in found}


def session(name: str) -> str:
    return "\n\n".join(e.code for e in examples() if e.opts.get("session") == name)


@pytest.fixture
def repo(tmp_path):
    """A scratch copy of the repository's layout: links to its directories and files, the
    notebooks copied (running one writes next to it)."""
    for name in ("apps", "gptask", "scripts", "models", "tests", "bench", "data", "docs", "pyproject.toml", "README.md",
                 ".venv"):
        (tmp_path / name).symlink_to(ROOT / name)
    shutil.copytree(ROOT / "notebooks", tmp_path / "notebooks", ignore=shutil.ignore_patterns("*.png"))
    return tmp_path


def clean_env(smoke: bool = False) -> dict[str, str]:
    env = {"PATH": CLEAN_PATH, "HOME": os.environ.get("HOME", "/root"), "LANG": "C.UTF-8",
           "PYTHONPATH": str(ROOT), "TMPDIR": os.environ.get("TMPDIR", "/tmp")}
    if smoke:
        env.update(SMOKE)
    return env


def activate() -> str:
    code = by_id()["venv"].code
    assert code.strip().startswith("source .venv/bin/activate")
    return code


def run_shell(example_id: str, script: str, cwd: Path, smoke: bool = False, timeout: int = 900,
              env_extra: dict | None = None) -> subprocess.CompletedProcess:
    """``script`` in a clean bash (errexit, pipefail) after the README's activation block."""
    env = {**clean_env(smoke), **(env_extra or {})}
    t0 = time.monotonic()
    r = subprocess.run(["bash", "-c", "set -eo pipefail\n" + activate() + "\n" + script], cwd=cwd, env=env,
                       capture_output=True, text=True, timeout=timeout)
    _record(example_id, time.monotonic() - t0, smoke)
    assert r.returncode == 0, f"example {example_id} failed ({r.returncode}):\n{r.stdout[-3000:]}\n{r.stderr[-5000:]}"
    return r


def _record(example_id: str, seconds: float, smoke: bool) -> None:
    path = os.environ.get("GPTASK_README_TIMES")
    if not path:
        return
    p = Path(path)
    times = json.loads(p.read_text()) if p.exists() else {}
    times[example_id] = {"seconds": round(seconds, 1), "smoke": smoke}
    p.write_text(json.dumps(times, indent=1))


# ---- the pages themselves --------------------------------------------------------------------------
RUN_HERE = {"two-commands", "venv", "pip-install", "notebooks", "library", "ask-tell", "transfer", "executor", "measurements",
            "measurements-cli", "mpi-ranks", "mpi-pool", "lcm-torch", "cli", "app-scalapack", "app-mpi", "app-io",
            "insight", "discrete", "replay-cli", "objectives", "memory-limit", "proposer", "cluster-objective"}


def test_every_code_block_is_an_example_that_a_test_runs():
    found = by_id()
    elsewhere = {i for i, e in found.items() if "tested-by" in e.opts}
    assert set(found) == RUN_HERE | elsewhere, sorted(set(found) ^ (RUN_HERE | elsewhere))
    for i in elsewhere:
        path = ROOT / found[i].opts["tested-by"]
        assert path.is_file() and f"<!-- {i} -->" in path.read_text(), i  # that test extracts this block
    assert all(e.lang in ("bash", "python") for e in found.values())


def test_every_docs_page_is_listed_in_reading_order():
    assert sorted(p.stem for p in DOCS.glob("*.md")) == sorted(DOC_PAGES)


def test_every_example_states_how_long_it_runs():
    for e in examples():
        if e.id in ("venv", "pip-install"):
            continue  # activating the virtualenv runs nothing; pip's time is the network's
        assert DURATION.search(e.code) or DURATION.search(e.after), f"{e.page} line {e.line}: example {e.id} " \
                                                                    "does not say how long it runs"
    assert not any(re.search(r"\bRT_", p.read_text()) for p in pages())  # no placeholder (not SLURM_RESTART_COUNT)


def test_the_readme_is_a_front_door():
    """At most 300 lines; the docs pages it links to exist (and so do the other relative links of every page)."""
    assert len(README.read_text().splitlines()) <= 300
    for page in pages():
        for target, anchor in re.findall(r"\]\(([^)#\s]*)(?:#([^)]*))?\)", page.read_text()):
            if "://" in target:
                continue
            path = page.parent / target if target else page
            assert path.exists(), f"{page.relative_to(ROOT)}: broken link {target}"
            if anchor:
                assert anchor in _anchors(path), f"{page.relative_to(ROOT)}: no heading for {target}#{anchor}"


def _anchors(path: Path) -> set[str]:
    """GitHub's anchors of a Markdown file's headings (lower case, punctuation dropped, spaces to hyphens)."""
    heads = re.findall(r"^#+ (.+)$", FENCE.sub("", path.read_text()), re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in heads}


def test_the_pip_install_block_names_real_extras():
    """The README's install block installs this repository (``.``) with extras that pyproject.toml defines."""
    import tomllib

    extras = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"])
    lines = [x.split("#")[0].strip() for x in by_id()["pip-install"].code.splitlines()]
    installs = [x for x in lines if x.startswith("pip install")]
    assert installs
    named = set()
    for x in installs:
        m = re.fullmatch(r"pip install (?:-e )?'?\.(?:\[(?P<extras>[\w,]+)\])?'?", x)
        assert m, x
        named |= set((m["extras"] or "").split(",")) - {""}
    assert named and named <= extras, (named, extras)
    assert extras <= named | set(re.findall(r"`(\w+)`", by_id()["pip-install"].after)), extras


def test_smoke_caps_are_checked_and_logged(monkeypatch, caplog):
    from gptask.core.smoke import smoke_limits

    monkeypatch.setenv("GPTASK_MAX_TASKS", "2")
    monkeypatch.setenv("GPTASK_MAX_BUDGET", "4")
    assert smoke_limits(8, 20, 10) == (2, 4, 4)
    assert smoke_limits([{"t": 1}, {"t": 2}, {"t": 3}], 3, None) == ([{"t": 1}, {"t": 2}], 3, None)
    assert "smoke test" in caplog.text
    monkeypatch.setenv("GPTASK_MAX_BUDGET", "many")
    with pytest.raises(ValueError, match="GPTASK_MAX_BUDGET must be a positive integer"):
        smoke_limits(8, 20, 10)



#: the options and arguments that name a file an example writes
_WRITES = re.compile(r"""(?:--(?:history|out|plot|save-model) |save_model\(["']|\.save\(["']|["'](?=[\w./-]+\.sqlite["']))"""
                     r"""(?P<path>[\w./-]+)""")


def test_examples_write_only_under_out_and_no_two_share_a_history():
    """Issue 40: examples left files in the repository root, and two of them wrote pool.sqlite for
    different problems (run in order, the second failed with HistoryMismatch)."""
    histories: dict[str, set[str]] = {}
    for e in examples():
        for m in _WRITES.finditer(e.code):
            assert m["path"].startswith("out/"), f"{e.page} line {e.line}: example {e.id} writes {m['path']} outside out/"
            if m["path"].endswith(".sqlite") and not m.group(0).startswith("--out"):
                histories.setdefault(m["path"], set()).add(e.session_key())
        if "file" in e.opts:
            assert e.opts["file"].startswith("out/"), e.opts["file"]
    shared = {h: ids for h, ids in histories.items() if len(ids) > 1}
    assert not shared, shared


# ---- running the examples --------------------------------------------------------------------------
@pytest.mark.slow
def test_the_virtualenv_puts_gptask_python_jupyter_and_mpich_first(repo):
    r = run_shell("venv", "for c in gptask python jupyter mpiexec; do command -v $c; done; mpiexec --version", repo)
    lines = r.stdout.splitlines()
    venv_bin = Path(os.path.realpath(repo / ".venv")) / "bin"  # where the activation script puts PATH
    assert [Path(x).parent for x in lines[:4]] == [venv_bin] * 4, lines[:4]
    assert "HYDRA" in r.stdout  # MPICH's launcher, not Open MPI's /usr/bin/mpiexec


@pytest.mark.slow
def test_the_two_commands(repo):
    code = by_id()["two-commands"].code
    assert "bash scripts/main.sh" in code and "bash scripts/test.sh" in code
    r = run_shell("two-commands", code, repo, smoke=True, timeout=1200,
                  env_extra={"PYTEST_ADDOPTS": "-p no:cacheprovider tests/test_space.py"})
    assert "setup: skipped (GPTASK_SKIP_SETUP=1)" in r.stdout
    best = json.loads((repo / "out" / "main_best.json").read_text())
    assert len(best["recommended"]) == 2 and best["unit"] == "s" and best["confirm"] == 3
    assert all(r["runs"] == 3 or r["basis"] != "confirmed min" for r in best["recommended"])
    assert "value (s)" in r.stdout and "gain" in r.stdout and (repo / "out" / "main_convergence.png").exists()
    assert re.search(r"\d+ passed", r.stdout)


@pytest.mark.slow
def test_the_notebook_command(repo):
    r = run_shell("notebooks", by_id()["notebooks"].code, repo, timeout=900)
    # the notebook's own asserts fail the command; its inline figures are checked by test_notebooks
    assert "Executing notebooks/01_mla_demo.ipynb" in r.stderr


@pytest.mark.slow
def test_the_library_examples_in_one_session(repo):
    code = session("api")
    assert [e.id for e in examples() if e.opts.get("session") == "api"] == ["library", "ask-tell", "transfer",
                                                                             "executor"]
    (repo / "api.py").write_text(code)
    r = run_shell("library", "python api.py", repo, timeout=1200)
    assert "best (s)" in r.stdout and "gain" in r.stdout and "%" in r.stdout  # result.table() and describe()
    from gptask.data.storage import SQLiteStorage

    with SQLiteStorage(repo / "out" / "asktell.sqlite", read_only=True) as h:
        assert len(h.trials()) == 4 * 8 and all(t.status.finished for t in h.trials())
    with SQLiteStorage(repo / "out" / "pool_runs.sqlite", read_only=True) as h:
        assert len(h.trials()) == 4 * 12
    with SQLiteStorage(repo / "out" / "runs.sqlite", read_only=True) as h:
        assert len(h.confirmations()) >= 3 * 3  # recommend(0, confirm=3): 3+ candidates and the default
    assert (repo / "out" / "qr_model.json").exists()


@pytest.mark.slow
def test_existing_measurements_python_and_command_line_agree(repo):
    (repo / "measurements.py").write_text(by_id()["measurements"].code)
    r = run_shell("measurements", "python measurements.py", repo, timeout=1200)
    m = re.search(r"predicted optimum: (\{[^}]*\})", r.stdout)
    python_route = ast.literal_eval(m.group(1))  # a dict literal printed by the example
    from gptask.data.storage import SQLiteStorage

    with SQLiteStorage(repo / "out" / "qr2.sqlite", read_only=True) as h:
        counts = [sum(t.task_index == i for t in h.trials()) for i in range(len(h.tasks()))]
    assert counts == [104] * 4  # the imported runs and the new ones, per size
    cli = run_shell("measurements-cli", by_id()["measurements-cli"].code, repo, timeout=1200)
    assert "warn" not in cli.stderr.lower()
    table = cli.stdout.split("std (encoded units)", 1)[1].split("predicted objective there", 1)[0]
    rows = [line.split() for line in table.splitlines() if line.strip() and not line.startswith("-")]
    assert {k: int(v) for k, v, _ in rows} == python_route  # the same optimum by both routes


@pytest.mark.slow
@pytest.mark.mpi
@pytest.mark.parametrize("example_id", ["mpi-ranks", "mpi-pool"])
def test_the_mpi_scripts_under_mpich(repo, example_id):
    e = by_id()[example_id]
    first = e.code.splitlines()[0]
    m = re.fullmatch(r"# (?P<file>\S+); run: (?P<cmd>.+?)  \(.*\)", first)
    assert m and m["file"] == e.opts["file"], first
    (repo / m["file"]).parent.mkdir(parents=True, exist_ok=True)
    (repo / m["file"]).write_text(e.code)
    r = run_shell(example_id, m["cmd"], repo, timeout=900)
    assert "best" in r.stdout and r.stdout.count("\n") >= 4  # the table, printed once (rank 0)


@pytest.mark.slow
def test_the_torch_lcm_example(repo):
    pytest.importorskip("torch")
    (repo / "lcm.py").write_text(by_id()["lcm-torch"].code)
    run_shell("lcm-torch", "python lcm.py", repo, timeout=600)
    assert (repo / "out" / "m.npz").exists()


@pytest.mark.slow
def test_the_command_line_examples(repo):
    r = run_shell("cli", by_id()["cli"].code, repo, timeout=1500)
    out = repo / "out"
    assert (out / "conv.png").exists() and (out / "demo.json").exists() and (out / "demo.csv").exists()
    assert sorted(p.name for p in repo.iterdir() if not p.is_symlink()) == ["notebooks", "out"]  # nothing else
    assert "recommended (" in r.stdout and "predicted objective there" in r.stdout


def test_the_discrete_space_and_replay_examples(repo):
    code = session("discrete")
    r = subprocess.run([sys.executable, "-c", code], cwd=repo, env=clean_env(), capture_output=True, text=True,
                       timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    fractions = [float(x.split()[0]) for x in ast.literal_eval(r.stdout.strip().splitlines()[-1])]
    assert len(fractions) == 2 and all(0.0 < f <= 1.0 for f in fractions)
    out = run_shell("replay-cli", by_id()["replay-cli"].code, repo, timeout=900)
    assert "fraction of the optimum" in out.stdout and (repo / "out" / "replay.png").exists()


def test_the_proposer_example(repo):
    """docs/evaluation.md's search variant: registered, used by gt.tune, every search it made within it."""
    r = subprocess.run([sys.executable, "-c", by_id()["proposer"].code], cwd=repo, env=clean_env(), capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    searched = ast.literal_eval(r.stdout.strip().splitlines()[-1])
    assert len(searched) == 2 and all(p["x"] % 2 == 0 for p in searched)


def test_the_cluster_objective_defines_what_srun_steps_read():
    """docs/cluster.md's objective: it needs an allocation to run, so the test runs the block (it
    defines the functions) and checks what SlurmSteps reads of it: the resources of one run."""
    scope: dict = {}
    exec(compile(by_id()["cluster-objective"].code, "cluster-objective", "exec"), scope)
    assert callable(scope["objective"]) and scope["objective"].resources is scope["resources"]
    assert scope["resources"]({"m": 20000}, {"p": 8, "q": 8}) == {"nodes": 2, "tasks_per_node": 32, "time_limit": 600}


@pytest.mark.slow
def test_the_insight_commands(repo):
    r = run_shell("insight", by_id()["insight"].code, repo, timeout=900)
    assert "Sobol indices" in r.stdout and "report: out/report.html" in r.stdout
    text = (repo / "out" / "report.html").read_text()
    assert text.startswith("<!DOCTYPE html>") and "<script" not in text and "data:image/png;base64," in text
    assert "gptask_table_lookup" in (repo / "out" / "pdgeqrf_table.h").read_text()


@pytest.mark.slow
def test_the_scalapack_app_commands(repo):
    r = run_shell("app-scalapack", by_id()["app-scalapack"].code, repo, smoke=True, timeout=1200)
    first = json.loads(r.stdout.splitlines()[0])
    assert first["backend"] == "real" and first["time"] > 0
    assert "value (s)" in r.stdout and (repo / "out" / "qr.sqlite").exists()
    rows = [x for x in (repo / "out" / "grid.csv").read_text().splitlines() if x and not x.startswith("#")]
    assert len(rows) > 16 and rows[0].startswith("m,n,mb,nb")


@pytest.mark.slow
@pytest.mark.mpi
def test_the_mpi_collectives_app_commands(repo):
    r = run_shell("app-mpi", by_id()["app-mpi"].code, repo, smoke=True, timeout=1200)
    lines = [json.loads(x) for x in r.stdout.splitlines() if x.startswith("{")]
    assert lines[0]["time"] > 0
    tuned = [x for x in lines if "recommended" in x]
    assert len(tuned) == 2 and all("gain_over_default" in x and "is_default" in x for x in tuned)
    assert "iteration 1:" in r.stderr and "confirmation run" in r.stderr  # not silent any more


@pytest.mark.slow
def test_the_io_app_commands(repo):
    r = run_shell("app-io", by_id()["app-io"].code, repo, smoke=True, timeout=1200)
    lines = [json.loads(x) for x in r.stdout.splitlines() if x.startswith("{")]
    assert lines[0]["time"] > 0 and "gain_over_default" in lines[0]
    tuned = [x for x in lines if "recommended" in x]
    assert len(tuned) == 2 and all(x["gain_basis"] == "confirmation runs" for x in tuned)
    assert "iteration 1:" in r.stderr  # not silent any more


#: appended to the "objectives" session (the README block itself runs unchanged): what the test checks
_OBJECTIVES_CHECK = """
import json as _json
_runs = lambda r, i: [[dict(x["params"]), dict(x["values"])] for x in r.records(i)]
print("CHECK " + _json.dumps({
    "tasks": result.tasks, "front": [[p.params, p.values] for p in result.pareto(0)], "runs": _runs(result, 0),
    "pick": rec.params, "limited_tasks": limited.tasks, "limited_runs": _runs(limited, 0),
    "best": limited.best(0)[0], "recommended": limited.recommend(0).params}))
"""


def _g(task: dict, p: dict) -> dict:
    """The README example's objective, written out again (the reference the test checks against)."""
    return {"time": 1 + (p["nb"] / 64 - task["m"] / 2000) ** 2 + 0.5 / p["p"],
            "memory": 2e5 * task["m"] * (1 + p["nb"] / 16) * p["p"]}


@pytest.mark.slow
def test_the_several_objectives_example(repo):
    code = session("objectives") + "\n" + _OBJECTIVES_CHECK
    r = subprocess.run([sys.executable, "-c", code], cwd=repo, env=clean_env(), capture_output=True, text=True,
                       timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    got = json.loads(r.stdout.split("CHECK ", 1)[1])
    task = got["tasks"][0]
    runs = got["runs"]
    assert len(runs) == 14
    for params, values in runs:  # every stored output is what the objective returned
        assert values == pytest.approx(_g(task, params), rel=1e-12)
    # the front by brute force: the runs no other run dominates (both objectives minimised)
    points = {json.dumps(p, sort_keys=True): (v["time"], v["memory"]) for p, v in runs}
    front = {k for k, a in points.items()
             if not any(b[0] <= a[0] and b[1] <= a[1] and b != a for b in points.values())}
    assert {json.dumps(p, sort_keys=True) for p, _ in got["front"]} == front
    times = [v["time"] for _, v in got["front"]]
    assert times == sorted(times)  # fastest first, as the README says
    assert json.dumps(got["pick"], sort_keys=True) in front  # the weighted pick lies on the front
    # the limited problem: the best run is the fastest of the runs within the limit, and the
    # recommendation is within it (memory recomputed from the formula, not read back)
    ltask = got["limited_tasks"][0]
    inside = [(v["time"], p) for p, v in got["limited_runs"] if _g(ltask, p)["memory"] <= 2e9]
    outside = [p for p, v in got["limited_runs"] if _g(ltask, p)["memory"] > 2e9]
    assert inside and outside  # the limit matters in this example: it excludes runs and the true optimum
    grid = [{"nb": nb, "p": q} for nb in range(8, 257) for q in range(1, 9)]
    assert _g(ltask, min(grid, key=lambda p: _g(ltask, p)["time"]))["memory"] > 2e9
    assert got["best"] == min(inside, key=lambda x: x[0])[1]
    assert _g(ltask, got["recommended"])["memory"] <= 2e9


@pytest.mark.slow
@pytest.mark.mpi
def test_the_pdgeqrf_memory_limit_command(repo):
    from apps.scalapack_qr.memory import memory_per_process

    code = by_id()["memory-limit"].code
    assert "bash scripts/memory_limit.sh" in code
    # the smoke cap's 4 runs per task hold at most one configuration within the limit (its design's
    # nproc=1 points all exceed it): one launch slowed past --timeout on a loaded machine then left
    # nothing to recommend; 12 runs (8 design + 4 searched) learn the limit on both sizes
    r = run_shell("memory-limit", code, repo, smoke=True, timeout=1200, env_extra={"GPTASK_MAX_BUDGET": "12"})
    assert "setup: skipped (GPTASK_SKIP_SETUP=1)" in r.stdout
    limit = 4.15e6
    assert "--memory-limit 4.15e6" in (ROOT / "scripts" / "memory_limit.sh").read_text()
    best = json.loads((repo / "out" / "memory_best.json").read_text())
    assert best["confirm"] == 3
    assert sorted(json.dumps(r["task"], sort_keys=True) for r in best["recommended"]) == [
        '{"m": 1000, "n": 500}', '{"m": 500, "n": 1000}']  # both sizes found a configuration within the limit
    for rec in best["recommended"]:
        t, p = rec["task"], rec["params"]
        # the driver's allocations computed without a run (2 timed factorisations per launch)
        assert memory_per_process(t["m"], t["n"], p["mb"], p["nb"], p["p"], p["nproc"] // p["p"], 2) <= limit
    from gptask.data.storage import SQLiteStorage

    with SQLiteStorage(repo / "out" / "memory.sqlite", read_only=True) as h:
        done = [t for t in h.trials() if t.status.finished]
        assert done and all("memory" in t.values for t in done if t.values)
    assert "memory" in r.stdout  # the tables show the recommendation's memory
