"""A tuner's read of its history at every ask: the full read against the incremental one.

    PYTHONPATH=. python bench/history_read.py [--sizes 2000,20000]

A history of the counting problem of tests/problems_for_tests.py holding ``n`` finished trials
(imported, as sources and imported campaigns arrive), one tuner on it. Prints the seconds of one
``Storage.trials()`` (what ``Tuner.refresh`` read before: every trial, at every ask) and of one
``Tuner.refresh`` as it is now (the trials newer than its last read and those it saw unfinished:
``Storage.trials_after``), best of 5 each, side by side in one process, and their ratio.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from gptask.storage import SQLiteStorage  # noqa: E402
from gptask.trials import Status, Trial  # noqa: E402
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


def one_size(n: int, folder: Path) -> tuple[float, float]:
    problem = counting_problem()
    path = folder / f"h{n}.sqlite"
    rng = np.random.default_rng(0)
    with SQLiteStorage(path, problem.signature()) as s:
        s.set_tasks(TASKS)
        s.import_trials([Trial(0, i % 2, TASKS[i % 2], {"x": float(rng.random()), "k": int(rng.integers(1, 9))},
                               Status.COMPLETE, 1.0 + float(rng.random())) for i in range(n)])
    with Tuner(problem, TASKS, budget=n, n_initial=2, seed=0, history=path, provenance=None) as tuner:
        full = best_of(lambda: tuner.mirror.storage.trials())
        incremental = best_of(tuner.refresh)
        if len(tuner.trials) != n:
            raise AssertionError(f"the tuner holds {len(tuner.trials)} trials, the history {n}")
    return full, incremental


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="2000,20000")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as d:
        for n in (int(s) for s in args.sizes.split(",")):
            full, incremental = one_size(n, Path(d))
            print(f"{n:6d} trials: full read {full:.4f} s, incremental refresh {incremental:.4f} s, "
                  f"{full / incremental:.0f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
