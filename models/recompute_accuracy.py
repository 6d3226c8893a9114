"""Recompute the shipped models' accuracy figures (``metadata.accuracy``: gt.crossval within-task and
leave-one-task-out, models/build.py's settings) with each model keeping its fit, and re-render the cards:
for a change of the cross-validation or of the calibrated intervals, not of the fit.

    PYTHONPATH=$PWD .venv/bin/python models/recompute_accuracy.py            # every model
    PYTHONPATH=$PWD .venv/bin/python models/recompute_accuracy.py io_sbb     # one of them

Data, not library code (as models/build.py).
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import gptask as gt  # noqa: E402
import build as BUILD  # noqa: E402
from gptask.sources.importing import from_model  # noqa: E402


def recompute(name: str) -> None:
    path = HERE / f"{name}.json"
    doc = json.loads(path.read_text())
    meta = doc["metadata"]
    spec = BUILD.SPECS[name]
    model = gt.load_model(path, problem=BUILD.load_factory(spec))
    td = meta["training_data"]
    result = from_model(model, HERE.parent / td["path"], value=td["value"], status=td["status"], aggregate=td["aggregate"])
    before = meta["accuracy"]["within_task"]["summary"]
    meta["accuracy"] = json.loads(json.dumps(BUILD.accuracy(result), allow_nan=False))
    body = {k: v for k, v in doc.items() if k != "checksum"}
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), allow_nan=False)
    doc["checksum"] = "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()
    path.write_text(json.dumps(doc, indent=1, sort_keys=True, allow_nan=False))
    meta = gt.transfer.model_io.read_metadata(path) if hasattr(gt, "transfer") else meta
    (HERE / f"{name}.md").write_text(BUILD.render_card(meta))
    after = meta["accuracy"]["within_task"]["summary"]
    print(f"{name}: within-task coverage {before['coverage']:.3f} -> {after['coverage']:.3f}, "
          f"latent {before.get('coverage_latent')} -> {after.get('coverage_latent')}, MAPE {before['mape']:.4f} -> {after['mape']:.4f}")


if __name__ == "__main__":
    for name in sys.argv[1:] or list(BUILD.SPECS):
        recompute(name)
