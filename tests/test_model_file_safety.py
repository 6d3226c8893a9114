"""Model files someone else made: non-finite numbers, .npy headers that claim more than they hold,
compressed (zip bomb) blocks and oversized files are refused with a clear error when the file is
loaded, before anything big is allocated. The checksum is recomputed in each case, as anyone can."""

import base64
import io
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

from gptask import model_io
from gptask.transfer.model_io import ModelFileError, _checksum, load_model

sys.path.insert(0, str(Path(__file__).parent))
from transfer_helpers import make_result, mixed_problem  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TASKS = [{"t": float(t)} for t in np.linspace(0.0, 1.0, 4)]


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> Path:
    res = make_result(mixed_problem(), TASKS, 4, seed=2)
    path = tmp_path_factory.mktemp("model") / "m.json"
    res.save_model(path, accuracy=False)
    return path


def resealed(doc: dict, path: Path) -> Path:
    """``doc`` written with a valid checksum, as a tamperer would write it."""
    body = {k: v for k, v in doc.items() if k != "checksum"}
    path.write_text(json.dumps({**body, "checksum": _checksum(body)}))
    return path


def npz_members(doc: dict) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(base64.b64decode(doc["lcm"]["data"]))) as zf:
        return {i.filename: zf.read(i) for i in zf.infolist()}


def npz_block(members: dict[str, bytes], compress: int = zipfile.ZIP_STORED) -> dict:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=compress) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return {"encoding": "npz-base64", "data": base64.b64encode(buf.getvalue()).decode("ascii")}


def npy(array: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array(buf, array, allow_pickle=False)
    return buf.getvalue()


def with_lcm(saved: Path, members: dict[str, bytes], tmp_path: Path, compress: int = zipfile.ZIP_STORED) -> Path:
    doc = json.loads(saved.read_text())
    doc["lcm"] = npz_block(members, compress)
    return resealed(doc, tmp_path / "tampered.json")


def test_the_untouched_file_loads(saved):
    assert load_model(saved).tasks == TASKS


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_a_non_finite_json_number_is_refused(saved, tmp_path, literal):
    doc = json.loads(saved.read_text())
    text = json.dumps(doc).replace(json.dumps(doc["best"][0]["value"]), literal, 1)
    p = tmp_path / "nan.json"
    p.write_text(text)
    with pytest.raises(ModelFileError, match="finite"):
        load_model(p)


@pytest.mark.parametrize("array", ["y", "L", "alpha", "lengthscale", "W"])
def test_a_nan_inside_the_lcm_arrays_is_refused_even_with_a_valid_checksum(saved, tmp_path, array):
    members = npz_members(json.loads(saved.read_text()))
    a = np.lib.format.read_array(io.BytesIO(members[array + ".npy"]))
    a.flat[a.size // 2] = np.nan
    members[array + ".npy"] = npy(a)
    with pytest.raises(ModelFileError, match=f"array {array} .*non-finite"):
        load_model(with_lcm(saved, members, tmp_path))


def test_arrays_that_disagree_on_the_number_of_points_are_refused(saved, tmp_path):
    members = npz_members(json.loads(saved.read_text()))
    y = np.lib.format.read_array(io.BytesIO(members["y.npy"]))
    members["y.npy"] = npy(y[:-1])
    with pytest.raises(ModelFileError, match="y.*shape"):
        load_model(with_lcm(saved, members, tmp_path))


HUGE_HEADER = """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))  # 3 GiB of address space
from gptask.transfer.model_io import load_model
try:
    load_model(sys.argv[1])
except Exception as exc:
    print(type(exc).__name__, exc)
"""


def test_a_npy_header_claiming_74_gib_is_refused_before_anything_is_allocated(saved, tmp_path):
    members = npz_members(json.loads(saved.read_text()))
    header = io.BytesIO()
    n = 100_000
    np.lib.format.write_array_header_1_0(header, {"descr": "<f8", "fortran_order": True, "shape": (n, n)})
    members["L.npy"] = header.getvalue() + b"\0" * 64  # 74.5 GiB claimed, 64 bytes held
    p = with_lcm(saved, members, tmp_path)
    # in a process that cannot allocate 74.5 GiB (or even 3): a MemoryError or the clear refusal
    out = subprocess.run([sys.executable, "-c", HUGE_HEADER, str(p)], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.stdout.startswith("ModelFileError"), out.stdout + out.stderr
    assert "L.npy" in out.stdout and "(100000, 100000)" in out.stdout


def test_a_compressed_block_is_refused_unread(saved, tmp_path, monkeypatch):
    """A zip bomb: 8 MiB of zeros deflated to a few KiB. gptask writes stored (uncompressed) members
    only, so a compressed one is refused before a byte of it is inflated."""
    members = npz_members(json.loads(saved.read_text()))
    members["X.npy"] = npy(np.zeros((1 << 20,)))
    p = with_lcm(saved, members, tmp_path, compress=zipfile.ZIP_DEFLATED)
    assert p.stat().st_size < 200_000
    inflated = []
    real_open = zipfile.ZipFile.open

    def watching(self, name, *a, **k):
        fh = real_open(self, name, *a, **k)
        inflated.append(getattr(name, "filename", name))
        return fh

    monkeypatch.setattr(zipfile.ZipFile, "open", watching)
    with pytest.raises(ModelFileError, match="compressed"):
        load_model(p)
    assert inflated == []


def test_a_file_larger_than_the_limit_is_refused_unread(saved, tmp_path, monkeypatch):
    monkeypatch.setattr(model_io, "MODEL_FILE_MAX_BYTES", saved.stat().st_size - 1)
    with pytest.raises(ModelFileError, match="larger than"):
        load_model(saved)


def test_the_docs_say_what_the_checksum_does_not_do():
    assert "not an authenticity check" in " ".join(model_io.__doc__.split())


def test_a_model_file_of_a_fidelity_run_loads_and_tampered_levels_are_refused(tmp_path):
    """A run with fidelity levels saves an LCM whose W and kappa have a row per base task, not per (task, level):
    its model file loads (it was refused as corrupted, "T = 8 disagrees with the other arrays' T = 2") and
    predicts what the run's result predicts, a task given without its fidelity being at the target. Levels that
    do not match the rows, and rows without levels, are refused."""
    import gptask as gt

    prob = gt.Problem(gt.Space([gt.Integer("n", 1, 4)]), gt.Space([gt.Real("x", 0, 1), gt.Real("y", 0, 1)]),
                      lambda t, p: (p["x"] - 0.3) ** 2 + (p["y"] - 0.7) ** 2
                      + 0.3 * (1 - p["iterations"] / 1000) * (p["x"] + 0.2) + 0.05 * t["n"],
                      fidelity=gt.Space([gt.Integer("iterations", 10, 1000, log=True)]),
                      target_fidelity={"iterations": 1000}, run_cost=lambda point: point["iterations"] / 1000.0)
    res = gt.tune(prob, [{"n": 1}, {"n": 3}], cost_budget=4.0, n_initial=4, seed=0, restarts=1, refit_restarts=1,
                  pso_particles=12, pso_iters=8, progress=False)
    assert res.model.levels is not None and res.model.get_params()["W"].shape[1] < res.model.n_tasks
    path = tmp_path / "m.json"
    res.save_model(path, accuracy=False)
    model = load_model(path)  # without its problem: the target comes from the stored signature
    at = {"x": 0.3, "y": 0.7}
    for task in ({"n": 3}, {"n": 2}):  # a tuned task and a new one, without the fidelity
        full = {**task, "iterations": 1000}
        assert gt.predict(model, task, at) == pytest.approx(gt.predict(res, full, at), rel=1e-9)
        assert gt.predict_optimum(model, task).params == gt.predict_optimum(res, full).params
    doc = json.loads(path.read_text())
    members = npz_members(doc)
    meta = json.loads(np.load(io.BytesIO(members["meta.npy"]), allow_pickle=False).item())
    for levels, why in [({**meta["levels"], "group": [0] * len(meta["levels"]["group"])}, "base tasks other than"),
                        (None, "rows of W and kappa for")]:
        bad = dict(members, **{"meta.npy": npy(np.array(json.dumps({**meta, "levels": levels})))})
        with pytest.raises(ModelFileError, match=why):
            load_model(with_lcm(path, bad, tmp_path))


def test_a_history_given_for_a_model_file_is_named_as_such(tmp_path):
    """`gptask predict history.sqlite` (a history where a model file is asked for) says what the file is and how to
    write a model file from it (it said "not valid JSON: 'utf-8' codec can't decode byte ...")."""
    import gptask as gt

    path = tmp_path / "h.sqlite"
    gt.tune(mixed_problem(), TASKS[:2], 3, seed=0, history=path, progress=False, restarts=1, pso_particles=8,
            pso_iters=4)
    why = r"is an SQLite file \(a gptask history\?\), not a gptask model file: .*--save-model"
    with pytest.raises(ModelFileError, match=why):
        load_model(path)
