"""A tuning run in which one rank dies or raises inside the tuner: the job must end, not hang.

usage: mpiexec -n 2 python crash_run.py [raise|exit] [HISTORY]
"""

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mpi4py import MPI  # noqa: E402

import gptask as gt  # noqa: E402
from problems_for_tests import counting_problem  # noqa: E402

comm = MPI.COMM_WORLD
how = sys.argv[1]
history = sys.argv[2] if len(sys.argv) > 2 else None
problem = counting_problem()
base = problem.objective


def _wait_for_rank_0s_commit(path, limit_s=60.0):
    """Until the history holds a complete trial (rank 0's, told at once): the death below then comes
    after rank 0 finished and committed its run, whatever the load (a death racing rank 0's own run
    would leave that run legitimately unfinished)."""
    import sqlite3
    import time

    end = time.monotonic() + limit_s
    while time.monotonic() < end:
        try:
            with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=1.0) as db:
                if db.execute("SELECT COUNT(*) FROM trials WHERE status = 'complete'").fetchone()[0]:
                    return
        except sqlite3.Error:
            pass
        time.sleep(0.05)


def objective(task, params):
    if comm.Get_rank() == 1:
        if how == "exit":
            if history is not None:
                _wait_for_rank_0s_commit(history)
            os._exit(7)  # the process dies without a word
        raise KeyboardInterrupt("operator interrupt on rank 1")  # not an ordinary failure
    return base(task, params)


problem = gt.Problem(problem.task_space, problem.param_space, objective, name="counting")
gt.tune(problem, tasks=2, budget=5, n_initial=3, seed=0, progress=False, comm=comm, parallel_evaluations=True,
        history=history)
