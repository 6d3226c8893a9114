"""Issue 24: a new GPU when the other five GPUs' complete campaigns are the sources, run-free and tuned.

    PYTHONPATH=. python bench/run_free_sources.py run [--seeds 0-2] [--out bench/results_run_free_sources.json]
    PYTHONPATH=. python bench/run_free_sources.py report [--out ...]

The recorded convolution campaign (``data/hub_convolution``) as one problem whose task is the kernel
and whose machine is the GPU (as in ``bench/source_scale.py``). For each GPU in turn: no run on it,
the other five GPUs' complete campaigns (21,810 measurements, summarised to 200 per GPU by the
default ``source_points="auto"``) as sources, and ``gt.predict_optimum(None, task, sources=...,
machine=gpu, problem=...)``; scored as the fraction of the GPU's optimum that the predicted
configuration reaches (its best recorded time / the configuration's recorded time; 0 where it
failed), against TLA1's blend of the five GPUs' optima (``consensus=False``, the rule before) and
the configuration best on average over the five (the mean fraction of each one's
optimum, from their measurements: what a model could reach at best by this rule). These three are
deterministic (the summary's draw is fixed) and computed in the first seed's rows only.

Tuned (every seed): ``gt.tune(problem, [task], 10, seed=seed, sources=..., provenance=gpu)`` with the
default initial design (5 runs), the fraction of the optimum after 1..10 runs (``tuned``); the same
with the consensus design and search of gptask/tuning/sourced.py switched off (``tuned_before``: the
Tuner's own random design, of the same 3 runs, and its whole-space search; before this change the
default design was 5 runs; the bench's proposer ``consensus-free`` drops the ``designs``); and the other five GPUs' optima run on it (``others_optima``, 5 runs, the
issue's oracle).
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
from gptask.tuning.proposer import register_proposer  # noqa: E402
from gptask.tuning.sourced import ConsensusProposer  # noqa: E402
from gptask.sources.replay import read_recording, replay_problem  # noqa: E402
from row_files import command_line, run_per_gpu  # noqa: E402
from source_scale import TASK, source_rows  # noqa: E402
from suite_families import CONVOLUTION_DIR, CONVOLUTION_RESTRICTIONS  # noqa: E402
from suite_families import CONVOLUTION_GPUS as GPUS  # noqa: E402


def fractions(recording: Any, configs: list[dict]) -> np.ndarray:
    """(n,) the fraction of the recording's optimum each configuration reaches (0: failed or missing)."""
    optimum = recording.best()[1]
    values = [recording.lookup(c) for c in configs]
    return np.array([0.0 if v is None or isinstance(v, str) else optimum / float(v) for v in values])


TUNED_BUDGET = 10


def without_consensus(proposes: Any, designs: Any = None) -> ConsensusProposer:
    """The sources' proposer as before the consensus design and search (the bench's ``tuned_before``)."""
    return ConsensusProposer(proposes, None)


register_proposer("consensus-free", without_consensus)


def tuned(prob: Any, rec: Any, sources: list, held: str, seed: int, before: bool) -> list[float]:
    """Fraction of the held-out GPU's optimum after 1..TUNED_BUDGET runs of gt.tune with the sources."""
    r = gt.tune(prob, [TASK], TUNED_BUDGET, seed=seed, sources=sources, provenance=held, progress=False,
                proposer="consensus-free" if before else None)
    mine = sorted((t for t in r.history if t.task_index == len(r.tasks) - 1), key=lambda t: t.id)
    return np.maximum.accumulate(fractions(rec, [t.params for t in mine])).tolist()


def run_one(held: str, seed: int) -> dict[str, Any]:
    recordings = {g: read_recording(CONVOLUTION_DIR / f"{g}.json.gz") for g in GPUS}
    rec = replace(recordings[held], label=TASK["kernel"])
    prob = replay_problem([rec], CONVOLUTION_RESTRICTIONS, task_name="kernel", name="convolution")
    others = [g for g in GPUS if g != held]
    sources = [gt.Source(source_rows(recordings[g], g), status="status") for g in others]
    row: dict[str, Any] = {"gpu": held, "seed": seed}
    if seed == 0:
        pred = gt.predict_optimum(None, TASK, sources=sources, machine=held, problem=prob)
        blend = gt.predict_optimum(None, TASK, sources=sources, machine=held, problem=prob, consensus=False)
        configs = prob.candidate_list(TASK)
        on_average = np.mean([fractions(recordings[g], configs) for g in others], axis=0)
        row.update({"route": pred.route, "run_free": float(fractions(rec, [pred.params])[0]),
                    "blend": float(fractions(rec, [blend.params])[0]),
                    "best_on_average": float(fractions(rec, [configs[int(np.argmax(on_average))]])[0])})
    row["others_optima"] = float(fractions(rec, [recordings[g].best()[0] for g in others]).max())
    row["tuned"] = tuned(prob, rec, sources, held, seed, before=False)
    row["tuned_before"] = tuned(prob, rec, sources, held, seed, before=True)
    return row


def cmd_run(seeds: list[int], out: str) -> None:
    run_per_gpu(out, seeds, GPUS, run_one)


def report(doc: dict) -> str:
    rows = doc["rows"]
    first = [r for r in rows if "run_free" in r]
    columns = ("run_free", "blend", "best_on_average")
    lines = ["Run-free (deterministic):", "", "| held-out GPU | run-free pick (route) | TLA1's blend (`consensus=False`) | "
             "best on average over the five, measured |", "|---|---|---|---|"]
    for r in first:
        lines.append(f"| {r['gpu']} | {r['run_free']:.3f} ({r['route']}) | {r['blend']:.3f} | {r['best_on_average']:.3f} |")
    if first:
        lines.append("| mean (worst) | " + " | ".join(f"{np.mean([r[c] for r in first]):.3f} "
                                                  f"({min(r[c] for r in first):.3f})" for c in columns) + " |")
    tuned_rows = [r for r in rows if "tuned" in r]
    if not tuned_rows:
        return "\n".join(lines)
    seeds = sorted({r["seed"] for r in tuned_rows})
    lines += ["", f"Tuned with the sources, {len(seeds)} seed(s): fraction of the optimum, mean over seeds (worst seed)",
              "", "| held-out GPU | others' optima (5 runs) | 5 runs | 10 runs | before: 5 runs | before: 10 runs |",
              "|---|---|---|---|---|---|"]

    def cell(values: list[float]) -> str:
        return f"{np.mean(values):.3f} ({min(values):.3f})"

    for gpu in GPUS:
        mine = [r for r in tuned_rows if r["gpu"] == gpu]
        if mine:
            lines.append(f"| {gpu} | {mine[0]['others_optima']:.3f} | " + " | ".join(
                cell([r[k][n - 1] for r in mine]) for k in ("tuned", "tuned_before") for n in (5, 10)) + " |")

    def per_seed(key: str, n: int) -> list[float]:
        return [float(np.mean([r[key][n - 1] for r in tuned_rows if r["seed"] == s])) for s in seeds]

    oracle = float(np.mean([r["others_optima"] for r in tuned_rows if r["seed"] == seeds[0]]))
    lines.append(f"| mean (worst seed) | {oracle:.3f} | " + " | ".join(
        cell(per_seed(k, n)) for k in ("tuned", "tuned_before") for n in (5, 10)) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    return command_line(__doc__.split("\n")[0], ROOT / "bench" / "results_run_free_sources.json", cmd_run, report,
                        argv, quiet=("gptask",))


if __name__ == "__main__":
    sys.exit(main())
