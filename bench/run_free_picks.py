"""Issue 46: the run-free picks of the six held-out GPUs (bench/run_free_sources.py's deterministic
part, without the tuned runs), with the output transform chosen and the time of each call, so a
faster fit can be checked to give the same answers.

    PYTHONPATH=. python bench/run_free_picks.py OUT.json [GPU ...]

Takes gptask from PYTHONPATH (run it once with the worktree of main, once with the branch)."""

from __future__ import annotations

import json
import logging
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import gptask as gt  # noqa: E402
from gptask.sources.replay import read_recording, replay_problem  # noqa: E402
from run_free_sources import fractions  # noqa: E402
from source_scale import TASK, source_rows  # noqa: E402
from suite_families import CONVOLUTION_DIR, CONVOLUTION_RESTRICTIONS  # noqa: E402
from suite_families import CONVOLUTION_GPUS as GPUS  # noqa: E402


class _Choice(logging.Handler):
    """Keeps the output transform lines of the fit's log."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        msg = record.getMessage()
        if "transform" in msg or "failure model" in msg:
            self.lines.append(msg)


def cholesky_seconds(n: int = 3000) -> float:
    a = np.random.default_rng(0).standard_normal((n, n))
    a = a @ a.T + n * np.eye(n)
    t0 = time.perf_counter()
    np.linalg.cholesky(a)
    return time.perf_counter() - t0


def main(out: str, gpus: list[str]) -> None:
    handler = _Choice()
    logging.getLogger("gptask").addHandler(handler)
    logging.getLogger("gptask").setLevel(logging.INFO)
    recordings = {g: read_recording(CONVOLUTION_DIR / f"{g}.json.gz") for g in GPUS}
    rows = []
    for held in gpus or GPUS:
        rec = replace(recordings[held], label=TASK["kernel"])
        prob = replay_problem([rec], CONVOLUTION_RESTRICTIONS, task_name="kernel", name="convolution")
        sources = [gt.Source(source_rows(recordings[g], g), status="status") for g in GPUS if g != held]
        handler.lines.clear()
        ref = cholesky_seconds()
        t0 = time.perf_counter()
        pred = gt.predict_optimum(None, TASK, sources=sources, machine=held, problem=prob)
        seconds = time.perf_counter() - t0
        row = {"gpu": held, "params": pred.params, "route": pred.route,
               "fraction": float(fractions(rec, [pred.params])[0]), "seconds": seconds,
               "cholesky_s": ref, "log": list(handler.lines), "file": gt.__file__}
        print(json.dumps(row), flush=True)
        rows.append(row)
        Path(out).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
