"""LOGO run-free picks from 40-run sources: the consensus over every allowed configuration (gt.predict_optimum's
route) against the consensus restricted to the configurations measured on the source GPUs, and to their bests.

    python bench/archive/runfree_measured.py . 0,1,2,3,4 rows.jsonl   # checkout, seeds, output (JSON lines)

Measured 2026-11-27 (BENCHMARKS.md, issue 24) and not taken."""
import json, sys, logging
root = sys.argv[1]; sys.path.insert(0, root + "/bench"); sys.path.insert(0, root)
import numpy as np
import gptask as gt
from gptask.transfer.model import as_transfer_model
from gptask.transfer.predict import predict_encoded
from gptask.data.trials import Status
from leave_one_gpu_out import campaign, GPUS
logging.disable(logging.WARNING)
seeds = [int(s) for s in sys.argv[2].split(",")]
out = open(sys.argv[3], "a")
problem, recordings = campaign()
for seed in seeds:
    for held in GPUS:
        rec = recordings[held]; opt = rec.best()[1]
        def frac(p):
            v = rec.lookup(p); return 0.0 if v is None or isinstance(v, str) else opt / float(v)
        others = [g for g in GPUS if g != held]
        src = gt.tune(problem, tasks=[{"gpu": recordings[g].label} for g in others], budget=40, seed=seed,
                      progress=False, max_failures=None)
        new = {"gpu": rec.label}
        cons = gt.predict_optimum(src, new)
        tm = as_transfer_model(src)
        done = [t for t in src.history if t.status is Status.COMPLETE]
        measured = list({tuple(sorted(t.params.items())): dict(t.params) for t in done}.values())
        bests = [dict(min((t for t in done if t.task_index == j), key=lambda t: t.value).params) for j in range(len(others))]
        row = {"seed": seed, "gpu": held, "consensus_all": frac(cons.params), "others_best_max": max(frac(p) for p in bests)}
        for name, cands in (("consensus_measured", measured), ("consensus_bests", bests)):
            C = problem.param_space.encode(cands)
            logs = np.array([np.log(predict_encoded(tm, t, C)[0]) for t in src.tasks])
            row[name] = frac(cands[int(np.argmin(logs.mean(0)))])
        print(row, flush=True); out.write(json.dumps(row) + "\n"); out.flush()
