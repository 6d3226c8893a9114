"""TLA2 variants on the leave-one-GPU-out benchmark, each source run tuned once (issue 24 experiment).

    PYTHONPATH=. python bench/archive/tla2_variants.py SEEDS OUT VARIANTS
    e.g.  ... 0-9 /tmp/tla2.jsonl base,cons,every1,cons_every1,cons_init6,cons_top3

For each held-out GPU and seed the five other GPUs are tuned as ``bench/leave_one_gpu_out.py`` does
(40 runs each, the seed's run), then every variant transfers to the held-out GPU from that same
result (10 runs), so paired differences are TLA2's alone. A JSON line per (GPU, seed): each
variant's fraction of the optimum after 1..10 runs. Variants (names combine):

* ``base``: TLA2 as it is;
* ``cons``: the first design point is the consensus pick (``predict_optimum(..., consensus=True)``)
  instead of TLA1's blend;
* ``every1``: cross-task picks at every searched run (``PICK_EVERY = 1``);
* ``top3``: each tuned task's three best offered (``PICK_TOP = 3``);
* ``init6``: an initial design of 6 runs instead of 3;
* ``refitauto``, ``refit3``: ``refit="auto"`` (a full refit when the model stops predicting the new
  task) or a full refit every 3 new runs, instead of block updates only;
* ``model_consensus`` (not TLA2): the ten configurations of least mean log predicted time over the
  five tuned GPUs (the sources' model, the run-free rule extended to a list), run in that order
  with no model update: what the sources' model knows before any run of the new GPU.

Results: BENCHMARKS.md, issue 24 ("TLA2 variants since the source GPUs are tuned with picks").
"""

from __future__ import annotations

import json
import logging
import sys
from multiprocessing import Pool
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import numpy as np  # noqa: E402

import gptask as gt  # noqa: E402
import gptask.transfer.tla2 as tla2  # noqa: E402
import leave_one_gpu_out as logo  # noqa: E402
from gptask.results.consensus import consensus_scores  # noqa: E402
from gptask.transfer.model import as_transfer_model  # noqa: E402
from gptask.transfer.predict import predict_encoded  # noqa: E402
from suite_families import CONVOLUTION_GPUS as GPUS  # noqa: E402

PREDICT_OPTIMUM = tla2.predict_optimum
PICK_EVERY, PICK_TOP = tla2.PICK_EVERY, tla2.PICK_TOP


def use_variant(name: str) -> dict:
    """Set TLA2's module switches for variant ``name``; the keyword arguments of tune_new_task."""
    tla2.PICK_EVERY = 1 if "every1" in name else PICK_EVERY
    tla2.PICK_TOP = 3 if "top3" in name else PICK_TOP
    tla2.predict_optimum = ((lambda tm, task, consensus=True: PREDICT_OPTIMUM(tm, task, consensus=True))
                            if "cons" in name else PREDICT_OPTIMUM)
    kwargs: dict = {"n_initial": 6} if "init6" in name else {}
    if "refitauto" in name:
        kwargs["refit"] = "auto"
    if "refit3" in name:
        kwargs["refit"] = 3
    return kwargs


def model_consensus(sources, problem, label: str, others: list[str], recordings: dict) -> list[dict]:
    """The new GPU's NEW_BUDGET configurations of least mean log predicted time over the tuned GPUs."""
    model, domain = as_transfer_model(sources), problem.domain({"gpu": label})
    every = domain.encode(np.arange(len(domain)))
    P = np.array([predict_encoded(model, {"gpu": recordings[g].label}, every)[0] for g in others])
    return domain.params(np.argsort(consensus_scores(P), kind="stable")[: logo.NEW_BUDGET])


def one(job: tuple[str, int, list[str]]) -> dict:
    held, seed, variants = job
    problem, recordings = logo.campaign()
    rec = recordings[held]
    optimum = rec.best()[1]
    others = [g for g in GPUS if g != held]
    sources = gt.tune(problem, tasks=[{"gpu": recordings[g].label} for g in others], budget=logo.SOURCE_BUDGET,
                      seed=seed, progress=False, max_failures=None)
    out: dict = {"gpu": held, "seed": seed}
    value = (lambda p: None if (v := rec.lookup(p)) is None or isinstance(v, str) else float(v))
    for name in variants:
        if name == "model_consensus":
            picks = model_consensus(sources, problem, rec.label, others, recordings)
            values = [value(p) for p in picks]
        else:
            tr = gt.tune_new_task(sources, {"gpu": rec.label}, budget=logo.NEW_BUDGET, seed=seed, **use_variant(name))
            values = logo.trial_values(tr.records(tr.task_index, status=None))
        out[name] = logo.fractions_reached(values, optimum, logo.NEW_BUDGET)
    use_variant("base")
    return out


def main(argv: list[str]) -> int:
    first, last = (int(x) for x in argv[0].split("-"))
    variants = argv[2].split(",")
    logging.disable(logging.WARNING)
    jobs = [(g, s, variants) for s in range(first, last + 1) for g in GPUS]
    with Pool(2) as pool, open(argv[1], "a") as fh:
        for row in pool.imap_unordered(one, jobs):
            fh.write(json.dumps(row) + "\n")
            fh.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
