"""Issue 24: sources of tens of thousands of measurements, summarised, against the exact model.

    PYTHONPATH=. python bench/source_scale.py run [--seeds 0-1] [--out bench/results_source_scale.json]
    PYTHONPATH=. python bench/source_scale.py report [--out ...]

The recorded convolution campaign (``data/hub_convolution``) as one problem whose task is the
kernel (one value) and whose machine is the GPU: a held-out GPU is tuned with the other five GPUs'
measurements as sources (``gt.tune(..., sources=...)``; the summary of gptask/model/source_summary.py).

* **full**: the five GPUs' complete campaigns (21,810 measurements, failed ones included) as
  sources with ``source_points="auto"``; the held-out GPU runs 3 random configurations and one
  proposal of the model. Scored: the wall time of the whole call (reading and summarising the
  sources, the fit, the proposal), and the fraction of the optimum of the proposal.
* **accuracy**: sources of ``EXACT_PER_GPU`` random measurements per GPU, small enough for the exact
  model, against two subsets of ``SUMMARY_PER_GPU`` of the same measurements per GPU: the summary
  (``source_points=``) and a uniform random subset. The held-out GPU has 10 random runs (the same
  for the three). Scored on every other configuration of the held-out GPU that completed: Spearman
  rank correlation of the predicted and measured times, the mean absolute relative error, and the
  fraction of the optimum of the best of the 5 configurations predicted fastest.

Held-out GPUs: A100 and W7800 (one of each family), seeds as given.
"""

from __future__ import annotations

import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
from scipy.stats import spearmanr

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import gptask as gt  # noqa: E402
from gptask.sources.replay import Recording, read_recording, recording_rows, replay_problem  # noqa: E402
from gptask.transfer.model import as_transfer_model  # noqa: E402
from gptask.transfer.predict import predict_encoded  # noqa: E402
from row_files import command_line, run_per_gpu  # noqa: E402
from suite_families import CONVOLUTION_DIR, CONVOLUTION_RESTRICTIONS  # noqa: E402
from suite_families import CONVOLUTION_GPUS as GPUS  # noqa: E402

HELD_OUT = ("A100", "W7800")
EXACT_PER_GPU, SUMMARY_PER_GPU, TARGET_RUNS = 300, 75, 10
TASK = {"kernel": "convolution"}


def source_rows(recording: Recording, gpu: str, picks: np.ndarray | None = None) -> list[dict]:
    """The recording's measurements (those at ``picks`` when given) as rows of ``TASK`` measured on
    machine ``gpu``."""
    rows = recording_rows(recording, TASK)
    if picks is not None:
        rows = [rows[k] for k in picks]
    return [{**row, "machine.label": gpu} for row in rows]


def held_out_case(held: str) -> tuple[Any, list]:
    """The run-free case of issue 46: the convolution problem of GPU ``held`` (its recording as the
    replayed problem) and the five other GPUs' complete campaigns as ``gt.Source`` rows."""
    recordings = {g: read_recording(CONVOLUTION_DIR / f"{g}.json.gz") for g in GPUS}
    rec = replace(recordings[held], label=TASK["kernel"])
    prob = replay_problem([rec], CONVOLUTION_RESTRICTIONS, task_name="kernel", name="convolution")
    return prob, [gt.Source(source_rows(recordings[g], g), status="status") for g in GPUS if g != held]

def run_one(held: str, seed: int) -> dict[str, Any]:
    recordings = {g: read_recording(CONVOLUTION_DIR / f"{g}.json.gz") for g in GPUS}
    rec = replace(recordings[held], label=TASK["kernel"])  # the held-out GPU's recording as the kernel's task
    prob = replay_problem([rec], CONVOLUTION_RESTRICTIONS, task_name="kernel", name="convolution")
    optimum = rec.best()[1]
    others = [g for g in GPUS if g != held]
    out: dict[str, Any] = {"gpu": held, "seed": seed}
    # full: every measurement of the five GPUs, summarised by "auto"
    full = [gt.Source(source_rows(recordings[g], g), status="status") for g in others]
    t0 = time.perf_counter()
    r = gt.tune(prob, [TASK], 4, n_initial=3, seed=seed, sources=full, provenance=held, progress=False)
    out["full_seconds"] = time.perf_counter() - t0
    out["full_points"] = int(sum(1 for t in r.history))
    proposal = [t for t in r.history if t.task_index == len(r.tasks) - 1][-1]
    v = rec.lookup(proposal.params)
    out["full_proposal"] = 0.0 if v is None or isinstance(v, str) else optimum / float(v)
    # accuracy: exact on EXACT_PER_GPU per GPU against two subsets of SUMMARY_PER_GPU of the same
    rng = np.random.default_rng(seed)
    picks = {g: rng.choice(len(recordings[g].results), EXACT_PER_GPU, replace=False) for g in others}
    exact_rows = {g: source_rows(recordings[g], g, picks[g]) for g in others}
    random_rows = {g: [exact_rows[g][k] for k in rng.choice(EXACT_PER_GPU, SUMMARY_PER_GPU, replace=False)]
                   for g in others}
    target_configs = prob.candidate_list(TASK)
    mine = rng.choice(len(target_configs), TARGET_RUNS, replace=False)
    listed = gt.Problem(prob.task_space, prob.param_space, prob.objective, constraints=prob.constraints,
                        constants=prob.constants, candidates=[target_configs[k] for k in mine],
                        name="convolution")  # the same 10 runs for the three models
    held_params = [c for c in target_configs if not isinstance(rec.lookup(c), str)]
    measured = np.array([float(rec.lookup(c)) for c in held_params])
    for name, sources, points in (("exact", exact_rows, None), ("summary", exact_rows, SUMMARY_PER_GPU),
                                  ("random", random_rows, None)):
        t0 = time.perf_counter()
        res = gt.tune(listed, [TASK], TARGET_RUNS, n_initial=TARGET_RUNS, seed=seed, progress=False,
                      sources=[gt.Source(sources[g], status="status") for g in others], source_points=points,
                      provenance=held)
        seconds = time.perf_counter() - t0
        tm = as_transfer_model(res)
        task = res.tasks[-1]
        pred, _ = predict_encoded(tm, task, prob.param_space.encode(held_params))
        top = np.argsort(pred)[:5]
        out[name] = {"seconds": seconds, "points": int(sum(res.model.n_points)),
                     "spearman": float(spearmanr(pred, measured)[0]),
                     "mape": float(np.mean(np.abs(pred - measured) / measured)),
                     "top5": float(optimum / measured[top].min())}
    return out


def cmd_run(seeds: list[int], out: str) -> None:
    run_per_gpu(out, seeds, HELD_OUT, run_one)


def report(doc: dict) -> str:
    rows = doc["rows"]
    lines = ["| held-out GPU, seed | full sources: points in the model, seconds, proposal | exact: points, s, "
             "Spearman, MAPE, top-5 | summary | random subset |", "|---|---|---|---|---|"]
    for r in rows:
        cells = [f"{r['full_points']:,}, {r['full_seconds']:.0f} s, {r['full_proposal']:.3f}"]
        for name in ("exact", "summary", "random"):
            m = r[name]
            cells.append(f"{m['points']:,}, {m['seconds']:.0f} s, {m['spearman']:.3f}, {m['mape']:.3f}, {m['top5']:.3f}")
        lines.append(f"| {r['gpu']}, {r['seed']} | " + " | ".join(cells) + " |")
    for name in ("exact", "summary", "random"):
        lines.append(f"\n{name}: mean Spearman {np.mean([r[name]['spearman'] for r in rows]):.3f}, MAPE "
                     f"{np.mean([r[name]['mape'] for r in rows]):.3f}, top-5 {np.mean([r[name]['top5'] for r in rows]):.3f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    return command_line(__doc__.split("\n")[0], ROOT / "bench" / "results_source_scale.json", cmd_run, report, argv,
                        quiet=("gptask",))


if __name__ == "__main__":
    sys.exit(main())
