"""Run under ``GPTASK_TEST_LOG=LOG mpiexec -n 3 python -m mpi4py.futures async_run.py OUT``: rank 0
tunes, ranks 1-2 evaluate through MPIPoolExecutor; OUT receives a summary (JSON), LOG one line per
objective call (the environment reaches every rank, so the workers know where to write)."""

import json
import os
import sys
import time
from pathlib import Path

from mpi4py.futures import MPIPoolExecutor

import gptask as gt


def objective(task, p):
    """Defined at module level: the workers import this script as ``__worker__`` to run it."""
    time.sleep(0.02 + 0.1 * p["x"])
    with open(os.environ["GPTASK_TEST_LOG"], "a") as fh:
        fh.write(json.dumps({"pid": os.getpid(), "start": 0, "end": 0, "task": task, "params": p}) + "\n")
    return 1.0 + (p["x"] - task["t"]) ** 2


def main() -> None:
    out = Path(sys.argv[1])
    problem = gt.Problem(gt.Space([gt.Real("t", 0.0, 1.0)]), gt.Space([gt.Real("x", 0.0, 1.0)]), objective,
                         name="mpi-async")
    with MPIPoolExecutor() as ex:
        res = gt.tune(problem, tasks=2, budget=6, n_initial=3, seed=0, progress=False, executor=ex,
                      max_in_flight=ex.num_workers, pso_particles=10, pso_iters=5, restarts=1)
    out.write_text(json.dumps({"n_trials": len(res.history), "statuses": [str(r.status) for r in res.history],
                               "distinct": [len({r.params["x"] for r in res.records(i, status=None)}) for i in range(2)],
                               "pid": os.getpid()}))


if __name__ == "__main__":
    main()
