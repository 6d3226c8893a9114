"""The run's header (gptask.data.run_header): what a history keeps beside its trials, read and written in
one place, stored exactly as before (the same keys and JSON texts), so old histories read and the previous
version reads new ones."""

import ast
import json
import math
import shutil
import sqlite3
import sys
from pathlib import Path

import gptask as gt
from gptask.data import run_header
from gptask.data.run_header import RunHeader, write_source_selection
from gptask.data.storage import SQLiteStorage

sys.path.insert(0, str(Path(__file__).parent))
from problems_for_tests import blocks_fit, blocks_truth  # noqa: E402

DATA = Path(__file__).parent / "data"
FAST = dict(pso_particles=10, pso_iters=5, restarts=1)
DEFAULT = {"nb": 64, "alg": "a", "x": 0.5}


def _blocks():
    tasks = gt.Space([gt.Integer("m", 10, 1000)])
    params = gt.Space([gt.Integer("nb", 1, 256, log=True), gt.Categorical("alg", ["a", "b", 1]),
                       gt.Real("x", 0.0, 1.0)])
    return gt.Problem(tasks, params, blocks_truth, constraints=[blocks_fit], constants={"cores": 4}, name="blocks",
                      default=DEFAULT, unit="s")


def _zdt(task, params):
    x1, x2 = params["x1"], params["x2"]
    g = 1 + 9 * x2 * task["t"]
    return {"f1": x1, "f2": g * (1 - math.sqrt(x1 / g))}


def _two_objectives():
    return gt.Problem(gt.Space([gt.Real("t", 0.0, 1.0)]), gt.Space([gt.Real("x1", 0.0, 1.0), gt.Real("x2", 0.0, 1.0)]),
                      _zdt, objectives=["f1", "f2"], name="zdt")


def _rows(path):
    with sqlite3.connect(path) as db:
        return dict(db.execute("SELECT key, value FROM meta WHERE key LIKE 'user:%'").fetchall())


def test_a_tuned_history_holds_the_texts_the_previous_version_wrote_and_reads_back_typed(tmp_path):
    path = tmp_path / "a.sqlite"
    gt.tune(_blocks(), tasks=[{"m": 100}, {"m": 800}], budget=5, n_initial=3, seed=3, history=path,
            progress=False, target=[1.0, None], **FAST)
    # the texts main's code (before run_header.py) wrote for this very run
    assert _rows(path) == {
        "user:defaults": '[{"alg": "a", "nb": 64, "x": 0.5}, {"alg": "a", "nb": 64, "x": 0.5}]',
        "user:seed": "3",
        "user:settings": '{"budget": 5, "failure_model": true, "kernel": "matern52", "n_initial": 3, "target": [1.0, null]}',
        "user:unit": '"s"',
        "user:use_log": "true"}
    with SQLiteStorage(path, read_only=True) as s:
        h = RunHeader.read(s)
    assert (h.seed, h.budget, h.n_initial, h.kernel, h.failure_model, h.target) == (3, 5, 3, "matern52", True, [1.0, None])
    assert h.use_log is True and h.unit == "s" and h.defaults == [DEFAULT, DEFAULT]
    assert h.task_defaults(3) == [DEFAULT, DEFAULT, None]
    assert h.source_selection is None and h.provenance is None and not h.output_models


def test_the_other_outputs_transforms_and_fits_keep_their_keys(tmp_path):
    path = tmp_path / "b.sqlite"
    gt.tune(_two_objectives(), tasks=[{"t": 0.3}], budget=8, n_initial=6, seed=4, history=path, progress=False, **FAST)
    rows = _rows(path)
    assert set(rows) == {"user:model:f2", "user:seed", "user:settings", "user:use_log", "user:use_log:f2"}
    assert rows["user:settings"] == '{"budget": 8, "failure_model": true, "kernel": "matern52", "n_initial": 6, ' \
                                    '"target": [null]}'
    assert (rows["user:seed"], rows["user:use_log"], rows["user:use_log:f2"]) == ("4", "false", "false")
    assert sorted(json.loads(rows["user:model:f2"])) == ["data_key", "iteration", "log_likelihood", "params"]
    with SQLiteStorage(path, read_only=True) as s:
        h = RunHeader.read(s, outputs=["f2"])
    assert h.use_log is False and h.output_use_log == {"f2": False}
    assert h.output_models["f2"] == json.loads(rows["user:model:f2"]) and h.unit == "" and h.defaults is None


def test_old_histories_read(tmp_path):
    for name, seed, use_log, settings in (("v1_failing.sqlite", 1, True, {}), ("v1_penalty.sqlite", 0, False, {}),
                                          ("v2_failing.sqlite", 1, True,
                                           {"budget": 8, "kernel": "matern52", "n_initial": 5})):
        shutil.copy(DATA / name, tmp_path / name)
        with SQLiteStorage(tmp_path / name, read_only=True) as s:
            h = RunHeader.read(s)
        assert (h.seed, h.use_log, dict(h.settings), h.unit, h.defaults) == (seed, use_log, settings, "", None)
        assert h.failure_model is None and h.task_defaults(2) == [None, None]


def test_the_selection_and_provenance_records_read(tmp_path):
    with SQLiteStorage(tmp_path / "c.sqlite", {"name": "x"}) as s:
        write_source_selection(s, [[0, [["m1", 3]]]], {"kept": [0]})
        s.set_meta(run_header.PROVENANCE, {"mpi": "MPICH 4.0"})
        h = RunHeader.read(s)
    assert h.source_selection == {"fingerprint": [[0, [["m1", 3]]]], "selection": {"kept": [0]}}
    assert h.provenance == {"mpi": "MPICH 4.0"}
    assert _rows(tmp_path / "c.sqlite")["user:source_selection"] == \
        '{"fingerprint": [[0, [["m1", 3]]]], "selection": {"kept": [0]}}'


def test_only_run_header_names_the_keys():
    """Outside the storage (which implements get_meta/set_meta) and run_header.py, gptask calls them
    with no string literal: which key means what is known in one module."""
    pkg = Path(gt.__file__).parent
    found = []
    for path in pkg.rglob("*.py"):
        if "storage" in path.parts or path.name == "run_header.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                    node.func.attr in ("get_meta", "set_meta") and node.args and \
                    not isinstance(node.args[0], ast.Name):
                found.append(f"{path.relative_to(pkg)}:{node.lineno}")
    assert found == []
