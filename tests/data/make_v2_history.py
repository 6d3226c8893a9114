"""How tests/data/v2_failing.sqlite was made: run at commit 59b0823 (schema version 2, before named
outputs), with a confirmation run so that the optional confirmations table exists.

    PYTHONPATH=.:tests python tests/data/make_v2_history.py

A finished MLA run of problems_for_tests.failing_problem (2 tasks, budget 8, n_initial 5, seed 1):
complete and failed trials and model rows; then one confirmation run of task 0's recommendation.
Checkpointed (no -wal file).
"""

import sqlite3
from pathlib import Path

import gptask as gt
from problems_for_tests import failing_problem

HERE = Path(__file__).parent

if __name__ == "__main__":
    path = HERE / "v2_failing.sqlite"
    for suffix in ("", "-wal", "-shm"):
        Path(str(path) + suffix).unlink(missing_ok=True)
    res = gt.tune(failing_problem(), tasks=2, budget=8, n_initial=5, seed=1, history=path, progress=False)
    res.recommend(0, confirm=1, candidates=1, progress=False)
    db = sqlite3.connect(path)
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
