"""TLA2 (tune_new_task) serially or under mpiexec with comm=COMM_WORLD; dumps what the test compares.

usage: python tla2_run.py OUT.json [serial|mpi]
"""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import gptask as gt  # noqa: E402
from problems_for_tests import counting_problem  # noqa: E402
from transfer_helpers import make_result  # noqa: E402

out, mode = Path(sys.argv[1]), sys.argv[2]
comm, rank = None, 0
if mode == "mpi":
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()

problem = counting_problem()
res = make_result(problem, [{"t": 0.1}, {"t": 0.5}, {"t": 0.9}], 5, seed=3)
new = gt.tune_new_task(res, {"t": 0.3}, budget=6, n_initial=2, refit=3, seed=1, comm=comm,
                       history=out.with_suffix(".sqlite"), pso_particles=10, pso_iters=5)
view = {"trials": [[r["params"], r["status"]] for r in new.records(new.task_index, status=None)],
        "kinds": [u["kind"] for u in new.updates],
        "model": {k: v.tolist() for k, v in new.model.get_params().items()}}
out.with_suffix(f".rank{rank}.json").write_text(json.dumps(view))
