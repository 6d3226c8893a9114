"""Issue 46: the time of ``gt.tune(problem, [task], 1, sources=..., provenance=gpu)`` with the five
other GPUs' complete campaigns as sources (as bench/run_free_sources.py builds them), as a ratio to a
numpy Cholesky of 3000 x 3000 in the same process; then the time of reading the result's model
(fitted when first read since issue 46) and, with ``--cache``, of a second call resumed on the same
history and cache folder.

    PYTHONPATH=. python bench/run_free_tune_one.py OUT.json [--held A100] [--cache]

Takes gptask from PYTHONPATH."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import gptask as gt  # noqa: E402
from run_free_picks import cholesky_seconds  # noqa: E402
from source_scale import TASK, held_out_case  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--held", default="A100")
    ap.add_argument("--cache", action="store_true")
    a = ap.parse_args()
    prob, sources = held_out_case(a.held)
    row: dict = {"held": a.held, "file": gt.__file__, "cholesky_s": cholesky_seconds()}
    with tempfile.TemporaryDirectory() as tmp:
        extra = {"history": Path(tmp) / "h.sqlite", "cache": Path(tmp) / "cache"} if a.cache else {}
        t0 = time.perf_counter()
        r = gt.tune(prob, [TASK], 1, seed=0, sources=sources, provenance=a.held, progress=False, **extra)
        row["tune_1_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        row["model_none"] = r.model is None
        row["read_model_s"] = time.perf_counter() - t0
        if a.cache:
            t0 = time.perf_counter()
            again = gt.tune(prob, [TASK], 1, seed=0, sources=sources, provenance=a.held, progress=False, **extra)
            assert again.model is not None
            row["resumed_with_model_s"] = time.perf_counter() - t0
    row["cholesky_after_s"] = cholesky_seconds()
    print(json.dumps(row), flush=True)
    Path(a.out).write_text(json.dumps(row, indent=1))


if __name__ == "__main__":
    main()
