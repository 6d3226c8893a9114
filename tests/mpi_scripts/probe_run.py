"""A listed campaign whose tasks stall and probe their incumbents' neighbours (gptask.tuning.probe), run
serially or under mpiexec with comm=COMM_WORLD; dumps the proposals in history order.

usage: python probe_run.py OUT.json [serial|mpi]
"""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import gptask as gt  # noqa: E402
from problems_for_tests import capped_problem  # noqa: E402

out, mode = sys.argv[1], sys.argv[2]
comm = None
rank = 0
if mode == "mpi":
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()

problem = capped_problem("probe-mpi")
tasks = [{"cap": 21}, {"cap": 9}, {"cap": 11}, {"cap": 13}]
res = gt.tune(problem, tasks, budget=14, n_initial=4, seed=3, progress=False, comm=comm, pso_particles=10,
              pso_iters=5)
if rank == 0:
    Path(out).write_text(json.dumps([[r["task_index"], r["params"], r["status"]] for r in res.history]))
