"""A tuner's read of its history at every ask: the full read against the incremental one.

    PYTHONPATH=. python bench/history_read.py [--sizes 2000,20000]
    PYTHONPATH=. mpiexec -n 2 python bench/history_read.py --mpi    (the tuner on two MPI ranks)

A history of the counting problem of tests/problems_for_tests.py holding ``n`` finished trials
(imported, as sources and imported campaigns arrive), one tuner on it. Prints the seconds of one
``Storage.trials()`` (what ``Tuner.refresh`` read before: every trial, at every ask) and of one
``Tuner.refresh`` as it is now (the trials newer than its last read and those it saw unfinished:
``Storage.trials_after``), best of 5 each, side by side in one process, and their ratio. With
``--mpi`` the tuner runs on the ranks of ``mpiexec`` and the full read is what its ranks did before:
rank 0 reads every trial and broadcasts them as JSON, every rank decodes them.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from gptask.data.storage import SQLiteStorage  # noqa: E402
from gptask.data.trials import Status, Trial  # noqa: E402
from gptask.tuning import Tuner  # noqa: E402
from problems_for_tests import counting_problem  # noqa: E402

REPEATS = 5
TASKS = [{"t": 0.1}, {"t": 0.9}]


def best_of(fn, repeats: int = REPEATS) -> float:
    """Least wall seconds of ``repeats`` calls of ``fn()``."""
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def one_size(n: int, folder: Path, comm: Any = None) -> tuple[float, float]:
    problem = counting_problem()
    path = folder / f"h{n}.sqlite"
    rng = np.random.default_rng(0)
    if comm is None or comm.Get_rank() == 0:
        with SQLiteStorage(path, problem.signature()) as s:
            s.set_tasks(TASKS)
            s.import_trials([Trial(0, i % 2, TASKS[i % 2], {"x": float(rng.random()), "k": int(rng.integers(1, 9))},
                                   Status.COMPLETE, 1.0 + float(rng.random())) for i in range(n)])
    if comm is not None:
        comm.Barrier()
    with Tuner(problem, TASKS, budget=n, n_initial=2, seed=0, history=path, provenance=None, comm=comm) as tuner:
        mirror = tuner.mirror
        if comm is None:
            full = best_of(lambda: mirror.storage.trials())
        else:
            full = best_of(lambda: [Trial.from_json(d) for d in mirror.on_root(
                lambda: [t.to_json() for t in mirror.storage.trials()], "reading the history")])
        incremental = best_of(tuner.refresh)
        if len(tuner.trials) != n:
            raise AssertionError(f"the tuner holds {len(tuner.trials)} trials, the history {n}")
    return full, incremental


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="2000,20000")
    ap.add_argument("--mpi", action="store_true", help="run the tuner on the ranks of mpiexec")
    args = ap.parse_args(argv)
    comm = None
    if args.mpi:
        from mpi4py import MPI

        comm = MPI.COMM_WORLD
    rank = 0 if comm is None else comm.Get_rank()
    with tempfile.TemporaryDirectory() as d:
        folder = Path(d if comm is None else comm.bcast(d, root=0))  # rank 0's folder on every rank
        for n in (int(s) for s in args.sizes.split(",")):
            full, incremental = one_size(n, folder, comm)
            if rank == 0:
                print(f"{n:6d} trials{'' if comm is None else f' on {comm.Get_size()} ranks'}: full read "
                      f"{full:.4f} s, incremental refresh {incremental:.4f} s, {full / incremental:.0f}x")
        if comm is not None:
            comm.Barrier()  # every rank done with rank 0's folder before it goes
    return 0


if __name__ == "__main__":
    sys.exit(main())
