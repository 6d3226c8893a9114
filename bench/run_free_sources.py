"""Issue 24: the run-free pick for a new GPU when the other five GPUs' complete campaigns are the sources.

    PYTHONPATH=. python bench/run_free_sources.py run [--out bench/results_run_free_sources.json]
    PYTHONPATH=. python bench/run_free_sources.py report [--out ...]

The recorded convolution campaign (``data/hub_convolution``) as one problem whose task is the kernel
and whose machine is the GPU (as in ``bench/source_scale.py``). For each GPU in turn: no run on it,
the other five GPUs' complete campaigns (21,810 measurements, summarised to 200 per GPU by the
default ``source_points="auto"``) as sources, and ``gt.predict_optimum(None, task, sources=...,
machine=gpu, problem=...)``; scored as the fraction of the GPU's optimum that the predicted
configuration reaches (its best recorded time / the configuration's recorded time; 0 where it
failed), against TLA1's blend of the five GPUs' optima (``consensus=False``, the rule before) and
the configuration best on average over the five (the mean fraction of each one's
optimum, from their measurements: what a model could reach at best by this rule). Deterministic:
no seed enters (the summary's draw is fixed).
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import gptask as gt  # noqa: E402
from gptask.replay import read_recording, replay_problem  # noqa: E402
from row_files import command_line, run_per_gpu  # noqa: E402
from source_scale import TASK, source_rows  # noqa: E402
from suite_families import CONVOLUTION_DIR, CONVOLUTION_RESTRICTIONS  # noqa: E402
from suite_families import CONVOLUTION_GPUS as GPUS  # noqa: E402


def fractions(recording: Any, configs: list[dict]) -> np.ndarray:
    """(n,) the fraction of the recording's optimum each configuration reaches (0: failed or missing)."""
    optimum = recording.best()[1]
    values = [recording.lookup(c) for c in configs]
    return np.array([0.0 if v is None or isinstance(v, str) else optimum / float(v) for v in values])


def run_one(held: str, seed: int) -> dict[str, Any]:
    recordings = {g: read_recording(CONVOLUTION_DIR / f"{g}.json.gz") for g in GPUS}
    rec = replace(recordings[held], label=TASK["kernel"])
    prob = replay_problem([rec], CONVOLUTION_RESTRICTIONS, task_name="kernel", name="convolution")
    others = [g for g in GPUS if g != held]
    sources = [gt.Source(source_rows(recordings[g], g), status="status") for g in others]
    pred = gt.predict_optimum(None, TASK, sources=sources, machine=held, problem=prob)
    blend = gt.predict_optimum(None, TASK, sources=sources, machine=held, problem=prob, consensus=False)
    configs = prob.candidate_list(TASK)
    on_average = np.mean([fractions(recordings[g], configs) for g in others], axis=0)
    return {"gpu": held, "seed": seed, "route": pred.route, "run_free": float(fractions(rec, [pred.params])[0]),
            "blend": float(fractions(rec, [blend.params])[0]),
            "best_on_average": float(fractions(rec, [configs[int(np.argmax(on_average))]])[0])}


def cmd_run(seeds: list[int], out: str) -> None:
    run_per_gpu(out, seeds[:1], GPUS, run_one)


def report(doc: dict) -> str:
    rows = doc["rows"]
    columns = ("run_free", "blend", "best_on_average")
    lines = ["| held-out GPU | run-free pick (route) | TLA1's blend (`consensus=False`) | best on average over the five, "
             "measured |", "|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['gpu']} | {r['run_free']:.3f} ({r['route']}) | {r['blend']:.3f} | {r['best_on_average']:.3f} |")
    lines.append("| mean (worst) | " + " | ".join(f"{np.mean([r[c] for r in rows]):.3f} ({min(r[c] for r in rows):.3f})"
                                              for c in columns) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    return command_line(__doc__.split("\n")[0], ROOT / "bench" / "results_run_free_sources.json", cmd_run, report,
                        argv, quiet=("gptask",))


if __name__ == "__main__":
    sys.exit(main())
