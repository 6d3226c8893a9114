"""How tests/data/v1_*.sqlite were made: run at commit 10db37d (schema version 1, gptask/history.py).

    PYTHONPATH=.:tests python tests/data/make_v1_histories.py

v1_failing.sqlite: a finished MLA run of problems_for_tests.failing_problem (2 tasks, budget 8,
n_initial 5, seed 1): complete and failed evaluations (NaN, inf, exception) and model rows.
v1_penalty.sqlite: problems_for_tests.penalty_problem (2 tasks, budget 8, n_initial 5, seed 0); at
that commit the first model fit failed on the objective's 1e308 values ("y_list[0] contains NaN or
inf"), so the file holds the 10 initial evaluations and no model, and every resume failed the same way.
Both files are checkpointed (no -wal file) and kept in WAL mode, as v1 left them.
"""

import sqlite3
from pathlib import Path

import gptask as gt
from problems_for_tests import failing_problem, penalty_problem

HERE = Path(__file__).parent


def checkpoint(path: Path) -> None:
    db = sqlite3.connect(path)
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()


if __name__ == "__main__":
    for name in ("v1_failing.sqlite", "v1_penalty.sqlite"):
        for suffix in ("", "-wal", "-shm"):
            (HERE / (name + suffix)).unlink(missing_ok=True)
    gt.tune(failing_problem(), tasks=2, budget=8, n_initial=5, seed=1, history=HERE / "v1_failing.sqlite",
            progress=False)
    try:
        gt.tune(penalty_problem(), tasks=2, budget=8, n_initial=5, seed=0, history=HERE / "v1_penalty.sqlite",
                progress=False)
    except ValueError as exc:
        print("penalty run failed as expected at this commit:", exc)
    import gc

    gc.collect()
    for name in ("v1_failing.sqlite", "v1_penalty.sqlite"):
        checkpoint(HERE / name)
