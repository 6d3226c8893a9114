"""Issue 46: reading and validating the five other GPUs' convolution campaigns (21,810 rows), in this
process, with a Cholesky of 3000 x 3000 before and after as the reference.

    ROOT46=/work/wt/old46 PYTHONPATH=/work/wt/old46 python bench/run_free_read.py   # before (a worktree of main)
    ROOT46=$PWD PYTHONPATH=$PWD python bench/run_free_read.py                        # after
"""
import os, sys, time
from dataclasses import replace
from pathlib import Path
ROOT = Path(os.environ["ROOT46"]); sys.path.insert(0, str(ROOT)); sys.path.insert(0, str(ROOT / "bench"))
import numpy as np
import gptask as gt
from gptask.sources.replay import read_recording, replay_problem
from gptask.sources.measurements import read_measurements
from source_scale import TASK, source_rows
from suite_families import CONVOLUTION_DIR, CONVOLUTION_RESTRICTIONS, CONVOLUTION_GPUS as GPUS
recordings = {g: read_recording(CONVOLUTION_DIR / f"{g}.json.gz") for g in GPUS}
held = "A100"
rec = replace(recordings[held], label=TASK["kernel"])
prob = replay_problem([rec], CONVOLUTION_RESTRICTIONS, task_name="kernel", name="convolution")
sources = [gt.Source(source_rows(recordings[g], g), status="status") for g in GPUS if g != held]
a = np.random.default_rng(0).standard_normal((3000, 3000)); m = a @ a.T + 3000 * np.eye(3000)
def chol():
    t = time.perf_counter(); np.linalg.cholesky(m); return time.perf_counter() - t
c0 = min(chol() for _ in range(3))
t = time.perf_counter()
n = sum(len(read_measurements(prob, s)) for s in sources)
el = time.perf_counter() - t
c1 = min(chol() for _ in range(3))
print(f"{ROOT.name}: read+validate {n} measurements {el:.2f}s; cholesky {c0:.2f}/{c1:.2f}s; ratio {el/min(c0,c1):.2f} .. {el/max(c0,c1):.2f}")
