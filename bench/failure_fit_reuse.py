"""Issue 46: the failure classifier's fit, kept and reused, in a run-free pick and a resumed tuned run.

    PYTHONPATH=. python bench/failure_fit_reuse.py [--size 20000] [--held A100] [--seed 0]
        [--out bench/results/failure_fit_reuse.json]

The sources of ``bench/run_free_speed.py`` (the five other GPUs' convolution campaigns, resampled to
``size`` measurements, some configurations missing a GPU's measurement). Measured in this process,
with the numpy Cholesky of a 3000 x 3000 matrix as the reference (best of 3, at the start and end):

* **pick**: ``run_free_speed.one(size, held, seed, cached=True)`` (two ``predict_optimum`` calls
  with ``cache=``, the second timed), with every fit of the failure classifier timed: its update,
  ``_fit_ard`` (the grid's best start and the L-BFGS-B search) and, beside it, a classifier restored
  from the settings the first one keeps (JSON round trip) updated on the same trials: its time, how
  it was made ("reused") and the largest difference of the two log probabilities at the inputs.
* **tune**: ``gt.tune(prob, [TASK], 1, sources=..., history=H, cache=C)``, then the same call again
  (resumed: the budget is spent): each call's seconds and the ``_fit_ard`` runs and seconds in each.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import numpy as np  # noqa: E402

import gptask.model.surrogate.failure_model as fm  # noqa: E402

LOG: list[dict[str, Any]] = []


def _instrument() -> None:
    real_ard, real_update = fm._fit_ard, fm.FailureModel.update

    def ard(*a: Any) -> Any:
        t = time.perf_counter()
        out = real_ard(*a)
        LOG.append({"what": "fit_ard", "seconds": time.perf_counter() - t})
        return out

    def update(self: fm.FailureModel, trials: Any) -> None:
        before = self.fitted
        t = time.perf_counter()
        real_update(self, trials)
        if self.fitted is None or self.fitted is before:
            return
        LOG.append({"what": "update", "seconds": time.perf_counter() - t, "how": self.last_fit,
                    "points": len(self.fitted.X)})
        other = fm.FailureModel(self.params, self.tasks)
        other.restore(json.loads(json.dumps(self.settings())))
        t = time.perf_counter()
        real_update(other, trials)
        X = self.fitted.X
        LOG.append({"what": "restored update (beside)", "seconds": time.perf_counter() - t, "how": other.last_fit,
                    "max_log_prob_diff": float(np.max(np.abs(other.fitted.log_prob_success(X)
                                                             - self.fitted.log_prob_success(X))))})

    fm._fit_ard, fm.FailureModel.update = ard, update


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=20000)
    ap.add_argument("--held", default="A100")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=str(HERE / "results" / "failure_fit_reuse.json"))
    args = ap.parse_args()
    _instrument()
    import gptask as gt
    import run_free_speed as rfs
    from source_scale import TASK, source_rows
    from suite_families import CONVOLUTION_DIR, CONVOLUTION_RESTRICTIONS
    from suite_families import CONVOLUTION_GPUS as GPUS
    from gptask.sources.replay import read_recording, replay_problem

    out: dict[str, Any] = {"size": args.size, "held": args.held, "seed": args.seed, "load_start": os.getloadavg(),
                           "cholesky_seconds_start": rfs.cholesky_seconds()}
    pick = rfs.one(args.size, args.held, args.seed, cached=True)
    out["pick"] = {k: pick[k] for k in ("seconds", "cholesky_seconds", "ratio", "route", "params")}
    out["pick_log"], LOG[:] = list(LOG), []
    recordings = {g: read_recording(CONVOLUTION_DIR / f"{g}.json.gz") for g in GPUS}
    rec = replace(recordings[args.held], label=TASK["kernel"])
    prob = replay_problem([rec], CONVOLUTION_RESTRICTIONS, task_name="kernel", name="convolution")
    rng = np.random.default_rng(args.seed)
    others = [g for g in GPUS if g != args.held]
    sources = []
    for g in others:  # as run_free_speed.one draws them
        rows = source_rows(recordings[g], g)
        picks = rng.choice(len(rows), args.size // len(others), replace=True)
        sources.append(gt.Source([rows[k] for k in picks], status="status"))
    folder = Path(tempfile.mkdtemp(prefix="failure_fit_reuse_"))
    for call in ("first", "resumed"):
        t = time.perf_counter()
        r = gt.tune(prob, [TASK], 1, seed=args.seed, sources=sources, provenance=args.held, progress=False,
                    history=folder / "h.sqlite", cache=folder / "cache")
        r.model  # the result's model, fitted when read (and kept in the cache)
        out[f"tune_{call}"] = {"seconds": time.perf_counter() - t, "log": list(LOG)}
        LOG[:] = []
    out["cholesky_seconds_end"], out["load_end"] = rfs.cholesky_seconds(), os.getloadavg()
    Path(args.out).write_text(json.dumps(out, indent=1, default=str))
    print(json.dumps(out, indent=1, default=str))


if __name__ == "__main__":
    main()
