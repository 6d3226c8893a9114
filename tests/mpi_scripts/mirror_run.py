"""Drive a Tuner on MPI ranks as the loop does with parallel evaluations (rank 0 tells alone, inside
the collective step) and dump each rank's view of the trials after every read of the history.

usage: mpiexec -n 2 python mirror_run.py OUT_PREFIX
"""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mpi4py import MPI  # noqa: E402

from gptask.evaluation.evaluate import Outcome  # noqa: E402
from gptask.tuning import Tuner  # noqa: E402
from problems_for_tests import counting_problem  # noqa: E402

prefix = sys.argv[1]
comm = MPI.COMM_WORLD
rank = comm.Get_rank()
problem = counting_problem()
views = []
with Tuner(problem, tasks=2, budget=6, n_initial=3, seed=3, history=prefix + ".sqlite", comm=comm) as tuner:
    while not tuner.done:
        trials = tuner.ask()
        if not trials:
            break
        tuner.refresh()  # a read between the claims and the tells: the trials are now older than the last read
        if rank == 0:
            for t in trials:
                tuner.tell_local(t, Outcome.of(problem.objective(t.task, t.params)))
        tuner.refresh()
        views.append([[t.id, t.status.value, t.value] for t in tuner.trials])
    if rank == 0:
        stored = [[t.id, t.status.value, t.value] for t in tuner.mirror.storage.trials()]
        Path(prefix + ".stored.json").write_text(json.dumps(stored))
Path(f"{prefix}.rank{rank}.json").write_text(json.dumps(views))
