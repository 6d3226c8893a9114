"""A cost budget under mpiexec: 4 tasks whose runs cost n seconds (run_cost), their first design
points one batch; dumps the runs as rank 0 and rank 1 see them.

usage: mpiexec -n 2 python cost_budget_run.py OUT.json root|parallel BUDGET
"""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from mpi4py import MPI  # noqa: E402

import gptask as gt  # noqa: E402

out, evals, budget = sys.argv[1], sys.argv[2], float(sys.argv[3])
comm = MPI.COMM_WORLD
problem = gt.Problem(gt.Space([gt.Integer("n", 1, 4)]), gt.Space([gt.Real("x", 0.0, 1.0)]),
                     lambda task, p: (p["x"] - 0.2 * task["n"]) ** 2, run_cost=lambda point: float(point["n"]))
res = gt.tune(problem, [{"n": k} for k in (1, 2, 3, 4)], budget=6, n_initial=3, cost_budget=budget, seed=0,
              history=Path(out).with_suffix(".sqlite"), progress=False, comm=comm,
              parallel_evaluations=(evals == "parallel"), restarts=1, refit_restarts=1, pso_particles=8, pso_iters=4)
view = {"ran": [t.task["n"] for t in res.history], "cost": res.cost_spent,
        "pending": [t.task["n"] for t in res.pending]}
Path(out).with_suffix(f".rank{comm.Get_rank()}.json").write_text(json.dumps(view))
