"""A listed campaign whose tasks stall and probe their incumbents' neighbours (gptask.tuning.probe), run
serially or under mpiexec with comm=COMM_WORLD; dumps the proposals in history order.

usage: python probe_run.py OUT.json [serial|mpi]
"""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import gptask as gt  # noqa: E402

out, mode = sys.argv[1], sys.argv[2]
comm = None
rank = 0
if mode == "mpi":
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()

VALUES = list(range(8))


def bowl(task, p):
    """One optimum near (3, 4, 2) for every task: the tasks settle on it and stall, their probes of one round
    meet on the same neighbours."""
    return 1.0 + (p["x"] - 3) ** 2 / 16 + (p["y"] - 4) ** 2 / 16 + (p["z"] - 2) ** 2 / 16 + 0.01 * task["cap"]


problem = gt.Problem(gt.Space([gt.Integer("cap", 0, 30)]), gt.Space([gt.Ordinal(n, VALUES) for n in ("x", "y", "z")]),
                     bowl, name="probe-mpi", constraints=["x + y + z <= cap"])
tasks = [{"cap": 21}, {"cap": 9}, {"cap": 11}, {"cap": 13}]
res = gt.tune(problem, tasks, budget=14, n_initial=4, seed=3, progress=False, comm=comm, pso_particles=10,
              pso_iters=5)
if rank == 0:
    Path(out).write_text(json.dumps([[r["task_index"], r["params"], r["status"]] for r in res.history]))
