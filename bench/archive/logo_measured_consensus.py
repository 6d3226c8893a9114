"""The measured consensus with 40-run sources (issue 24 experiment; BENCHMARKS.md, "A new GPU from
the other five's complete campaigns").

    PYTHONPATH=. python bench/archive/logo_measured_consensus.py GPU SEED

For one held-out GPU and seed of ``bench/leave_one_gpu_out.py``: the other five GPUs tuned jointly
(40 runs each, the seed's run, as that benchmark does), then the configurations that all five
measured and none failed, best mean log time first (``gptask.results.consensus.consensus_order``, the
design the sources path gives a new machine when complete campaigns are the sources). Prints one
JSON line: how many there are, the fraction of the held-out GPU's optimum of the first ten in
order, and that of ``gt.predict_optimum``'s run-free pick (the model's consensus) for comparison
with the benchmark's stored rows.
"""

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import gptask as gt  # noqa: E402
import leave_one_gpu_out as logo  # noqa: E402
from gptask.results.consensus import consensus_order  # noqa: E402
from run_free_sources import fractions  # noqa: E402
from suite_families import CONVOLUTION_GPUS as GPUS  # noqa: E402


def main(held: str, seed: int) -> None:
    problem, recs = logo.campaign()
    rec = recs[held]
    others = [{"gpu": recs[g].label} for g in GPUS if g != held]
    sources = gt.tune(problem, tasks=others, budget=logo.SOURCE_BUDGET, seed=seed, progress=False, max_failures=None)
    order = consensus_order(sources.history, others)
    pred = gt.predict_optimum(sources, {"gpu": rec.label})
    print(json.dumps({"gpu": held, "seed": seed, "n": len(order),
                      "fr": [round(float(f), 3) for f in fractions(rec, order[:10])],
                      "run_free": round(float(fractions(rec, [pred.params])[0]), 3)}))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
