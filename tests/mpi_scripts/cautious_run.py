"""A cautious run (failure_model=0.7) of a family where two fifths of the square fail, serially or
under mpiexec with comm=COMM_WORLD; rank 0 dumps the history for the test to compare.

usage: python cautious_run.py OUT.json [serial|mpi]
"""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import gptask as gt  # noqa: E402

PARAMS = gt.Space([gt.Real("x1", 0.0, 1.0), gt.Real("x2", 0.0, 1.0)])
TASKS = gt.Space([gt.Real("t", 0.0, 1.0)])


def failing(task, p):
    if p["x1"] + p["x2"] > 1.1 + 0.2 * task["t"]:
        raise MemoryError("out of memory")
    return 1.0 + (p["x1"] - 0.5) ** 2 + (p["x2"] - 0.3) ** 2


out, mode = sys.argv[1], sys.argv[2]
comm, rank = None, 0
if mode == "mpi":
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
res = gt.tune(gt.Problem(TASKS, PARAMS, failing, name="failing_cautious"), tasks=[{"t": 0.0}, {"t": 1.0}],
              budget=12, n_initial=8, seed=2, history=Path(out).with_suffix(".sqlite"), progress=False, comm=comm,
              max_failures=None, failure_model=0.7)
if rank == 0:
    Path(out).write_text(json.dumps([[r["task_index"], r["params"], r["status"], r["source"]] for r in res.history]))
