"""A parallel_evaluations run killed after rank 1 finished its evaluation and before rank 0 committed it.

usage: mpiexec -n 2 python journal_run.py HISTORY CALLS MARK

The first batch is one initial design point per task: task 0's on rank 0, task 1's on rank 1. Rank 1
runs its point (one line in CALLS, counting_problem's log) and goes on: it journals the result
(with gptask's rank journal) and hands it to rank 0. Rank 0, in its own first objective call and
before running anything (no line in CALLS), waits until a result file is in the history's journal
folder (at most WAIT_S seconds: without the rank journal none ever comes), writes MARK (JSON: what
it found) and kills itself with SIGKILL: the job dies with rank 1's result not committed, whatever
the load (the kill comes after rank 1's write, never during it).
"""

import json
import os
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mpi4py import MPI  # noqa: E402

import gptask as gt  # noqa: E402
from gptask.evaluation import journal  # noqa: E402
from problems_for_tests import counting_problem  # noqa: E402

WAIT_S = 30.0
comm = MPI.COMM_WORLD
history, calls, mark = sys.argv[1], sys.argv[2], sys.argv[3]
problem = counting_problem(calls)
base = problem.objective


def objective(task, params):
    if comm.Get_rank() == 0:
        end = time.monotonic() + WAIT_S
        while not journal.journals(history) and time.monotonic() < end:
            time.sleep(0.02)
        Path(mark).write_text(json.dumps(sorted(journal.journals(history))))
        os.kill(os.getpid(), signal.SIGKILL)
    return base(task, params)


problem = gt.Problem(problem.task_space, problem.param_space, objective, name="counting")
gt.tune(problem, tasks=2, budget=3, n_initial=3, seed=0, progress=False, comm=comm, parallel_evaluations=True,
        history=history)
