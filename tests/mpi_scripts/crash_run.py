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


def objective(task, params):
    if comm.Get_rank() == 1:
        if how == "exit":
            os._exit(7)  # the process dies without a word
        raise KeyboardInterrupt("operator interrupt on rank 1")  # not an ordinary failure
    return base(task, params)


problem = gt.Problem(problem.task_space, problem.param_space, objective, name="counting")
gt.tune(problem, tasks=2, budget=5, n_initial=3, seed=0, progress=False, comm=comm, parallel_evaluations=True,
        history=history)
