"""Model files: save -> load gives identical predictions; files that are not ours or are corrupted
are refused with a clear error; the `gptask predict` command line."""

import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest

import gptask as gt
from gptask.data.storage import SQLiteStorage
from gptask.transfer.model_io import FORMAT, ModelFileError, load_model

sys.path.insert(0, str(Path(__file__).parent))
from transfer_helpers import make_result, mixed_optimum, mixed_problem  # noqa: E402

TASKS = [{"t": float(t)} for t in np.linspace(0.0, 1.0, 5)]


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    res = make_result(mixed_problem(), TASKS, 4, optimum=mixed_optimum, seed=4)
    path = tmp_path_factory.mktemp("model") / "mixed.json"
    assert res.save_model(path) == path
    return res, path


def test_save_load_identical_predictions(saved):
    res, path = saved
    m = load_model(path, problem=mixed_problem())
    rng = np.random.default_rng(0)
    X = rng.random((7, 5))
    # bit for bit: LCM.load restores the Cholesky factor in the memory order the fit left it in
    same = dict(rtol=0, atol=0)
    for i in range(len(TASKS)):
        for a, b in zip(res.model.predict(i, X), m.model.predict(i, X)):
            np.testing.assert_allclose(a, b, **same)
    for t in (0.1, 0.45, 0.8):
        p1, p2 = gt.predict_optimum(res, {"t": t}), gt.predict_optimum(m, {"t": t})
        assert p1.params == p2.params and p1.projected == p2.projected
        np.testing.assert_allclose([p1.std[k] for k in p1.std], [p2.std[k] for k in p1.std], **same)
        np.testing.assert_allclose([p1.value, p1.value_std], [p2.value, p2.value_std], **same)
        cfg = {"x": 0.3, "k": 3, "alg": "b"}
        np.testing.assert_allclose(gt.predict(res, {"t": t}, cfg), gt.predict(m, {"t": t}, cfg), **same)
    assert m.tasks == TASKS and m.best == [res.best(i) for i in range(len(TASKS))]
    assert m.accuracy["summary"]["n_tasks"] == len(TASKS)
    # a loaded model with its problem can seed TLA2
    new = gt.tune_new_task(m, {"t": 0.33}, budget=3, n_initial=2, pso_particles=8, pso_iters=3)
    assert len(new.records(new.task_index)) == 3


def test_file_is_plain_json_with_format_tag(saved):
    _, path = saved
    doc = json.loads(path.read_text())
    assert doc["format"] == FORMAT and doc["version"] == 2
    assert doc["problem"]["name"] == "mixed" and doc["checksum"].startswith("sha256:")
    assert len(doc["tla1"]["gps"]) == mixed_problem().param_space.n_columns


def test_without_problem_constraints_are_unknown(saved):
    _, path = saved
    m = gt.load_model(path)
    pred = gt.predict_optimum(m, {"t": 0.9})
    assert pred.feasible is None
    with pytest.raises(TypeError, match="objective"):
        gt.tune_new_task(m, {"t": 0.3}, budget=3)


def test_other_problem_refused(saved):
    _, path = saved
    from gptask.problem.functions import demo_problem

    with pytest.raises(ValueError, match="another problem"):
        load_model(path, problem=demo_problem())


def _write(tmp_path, name, content):
    p = tmp_path / name
    p.write_bytes(content if isinstance(content, bytes) else content.encode())
    return p


def test_files_that_are_not_ours_or_corrupted(saved, tmp_path):
    _, path = saved
    text = path.read_text()
    doc = json.loads(text)
    cases = {
        "missing": (tmp_path / "nope.json", "no model file"),
        "binary": (_write(tmp_path, "b.json", os.urandom(200)), "not a gptask model file"),
        "other json": (_write(tmp_path, "o.json", json.dumps({"format": "keras", "x": 1})), "not a gptask model file"),
        "a list": (_write(tmp_path, "l.json", "[1, 2]"), "not a gptask model file"),
        "truncated": (_write(tmp_path, "t.json", text[: len(text) // 2]), "truncated"),
        "edited": (_write(tmp_path, "e.json", json.dumps({**doc, "tasks": doc["tasks"][:-1]})), "checksum"),
        "newer": (_write(tmp_path, "n.json", json.dumps({**doc, "version": 99})), "upgrade"),
    }
    hist = tmp_path / "h.sqlite"
    SQLiteStorage(hist, mixed_problem().signature()).close()
    cases["history"] = (hist, "not a gptask model file")
    for name, (p, msg) in cases.items():
        with pytest.raises(ValueError, match=msg):
            load_model(p)
        assert issubclass(ModelFileError, ValueError)


def test_corrupted_inner_block_with_valid_checksum(saved, tmp_path):
    """A file whose checksum was recomputed over a broken LCM block is still refused cleanly."""
    from gptask.transfer.model_io import _checksum

    _, path = saved
    doc = json.loads(path.read_text())
    doc["lcm"]["data"] = doc["lcm"]["data"][:100]
    body = {k: v for k, v in doc.items() if k != "checksum"}
    doc["checksum"] = _checksum(body)
    p = _write(tmp_path, "c.json", json.dumps(doc))
    with pytest.raises(ValueError, match="corrupted"):
        load_model(p)


def test_cli_predict(saved, root, capsys):
    """`gptask predict` through cli.main (the `python -m gptask` wiring is tested in test_mla)."""
    from gptask.cli.main import main

    _, path = saved
    assert main(["predict", str(path), "--task", "t=0.7", "--problem", "transfer_helpers:mixed_problem", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert mixed_problem().is_feasible({"t": 0.7}, out["params"]) and out["feasible"] is True
    assert out["params"] == gt.predict_optimum(load_model(path, mixed_problem()), {"t": 0.7}).params
    # the rest in process
    assert main(["predict", str(path), "--task", "t=0.7", "--params", "x=0.3,k=3,alg=c"]) == 0
    text = capsys.readouterr().out
    assert "predicted objective there" in text and "held-out accuracy" in text and "not checked" in text
    assert main(["predict", str(path), "--task", "t=7"]) == 2
    assert "outside" in capsys.readouterr().err
    assert main(["predict", str(root / "pyproject.toml"), "--task", "t=0.5"]) == 2
    assert "not a gptask model file" in capsys.readouterr().err


def test_a_one_task_model_predicts_that_task_s_best_everywhere_and_tla2_starts_from_it(tmp_path, capsys):
    """From one tuned task TLA1 has nothing to relate tasks by (it used to refuse: 'needs at least 2 tuned
    tasks', and so did TLA2): every task's predicted optimum is that task's best (reference: result.best(0)),
    std 0 there and that of a uniform column elsewhere, a new task's predicted value NaN (gt.predict of a new
    task needs two tuned tasks, and says so); the model file gives the same, and tune_new_task runs the new
    task from that best."""
    from gptask.transfer.model import ONE_TASK_STD

    res = make_result(mixed_problem(), [{"t": 0.5}], 4, optimum=mixed_optimum)
    path = res.save_model(tmp_path / "one.json")
    m = load_model(path)
    assert len(json.loads(path.read_text())["tla1"]["gps"]) == res.problem.param_space.n_columns
    assert m.accuracy is None
    cfg = {"x": 0.3, "k": 3, "alg": "a"}
    assert gt.predict(m, {"t": 0.5}, cfg) == pytest.approx(gt.predict(res, {"t": 0.5}, cfg), rel=1e-12)
    best = res.best(0)[0]
    for source in (res, m):
        own = gt.predict_optimum(source, {"t": 0.5})
        assert own.params == best and set(own.std.values()) == {0.0}
        assert own.value == pytest.approx(gt.predict(res, {"t": 0.5}, best)[0], rel=1e-9)
        new = gt.predict_optimum(source, {"t": 0.3})
        assert new.params == best and np.isnan(new.value) and np.isnan(new.value_std)
        assert new.std == pytest.approx({k: ONE_TASK_STD for k in new.std}) and ONE_TASK_STD == pytest.approx(0.2887, abs=1e-4)
    with pytest.raises(ValueError, match="predicting a new task needs a model with at least 2 tuned tasks"):
        gt.predict(m, {"t": 0.3}, cfg)
    # gptask predict: the route in words, no NaN printed, and valid JSON (null where the value is unknown)
    from gptask.cli import main

    assert main(["predict", str(path), "--task", "t=0.3"]) == 0
    out = capsys.readouterr().out
    assert "the one tuned task's best configuration" in out and "predicted objective there: unknown" in out
    assert "nan" not in out.lower()
    assert main(["predict", str(path), "--task", "t=0.3", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["route"] == "one task" and doc["value"] is None and doc["params"] == best
    tla2 = gt.tune_new_task(res, {"t": 0.3}, budget=3, pso_particles=8, pso_iters=4)
    runs = sorted((t for t in tla2.history if getattr(t, "task_index", None) == tla2.task_index), key=lambda t: t.id)
    assert len(runs) == 3 and dict(runs[0].params) == best and all(t.task == {"t": 0.3} for t in runs)


def test_metadata_is_kept_under_the_checksum(saved, tmp_path):
    from gptask.transfer.model_io import read_metadata, save_model

    res, plain = saved
    assert read_metadata(plain) == {}
    meta = {"machine": {"cores": 16}, "accuracy": {"mape": 0.157, "coverage": float("nan")}}
    path = save_model(res, tmp_path / "with_meta.json", accuracy=False, metadata=meta)
    assert read_metadata(path) == {"machine": {"cores": 16}, "accuracy": {"mape": 0.157, "coverage": None}}
    assert load_model(path).tasks == TASKS
    doc = json.loads(path.read_text())
    doc["metadata"]["machine"]["cores"] = 2
    p = _write(tmp_path, "edited.json", json.dumps(doc))
    with pytest.raises(ModelFileError, match="checksum mismatch"):
        read_metadata(p)
    with pytest.raises(TypeError, match="metadata must be a dict"):
        save_model(res, tmp_path / "x.json", accuracy=False, metadata=[1])
