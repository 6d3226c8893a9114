"""Constants of the tuning engine, in one place, and the seeding rule.

Reproducibility: the task LHS, each task's initial design, each model fit and each search draw
their randomness from ``np.random.SeedSequence([seed, stage, *keys])`` with the stage numbers of
:mod:`gptask.seeding` (re-exported here), so a resumed run asks for the same points an
uninterrupted run would have (up to the warm start of the model fit).
"""

from __future__ import annotations

from ..seeding import STAGE_FIT, STAGE_INITIAL, STAGE_SEARCH, STAGE_STEER, STAGE_TASKS, int_seed, rng
from ..surrogate.settings import DRIFT_E2, DRIFT_WINDOW, VALUE_LIMIT

__all__ = ["STAGE_TASKS", "STAGE_INITIAL", "STAGE_SEARCH", "STAGE_FIT", "STAGE_STEER", "VALUE_LIMIT", "CLAIM_ROUNDS",
           "WAIT_MIN_S", "WAIT_MAX_S", "WAIT_LOG_S", "DRIFT_WINDOW", "DRIFT_E2", "SEARCH_BLAS_THREADS",
           "SOURCE_INITIAL", "SOURCE_DEFAULT", "SOURCE_SEARCH", "SOURCE_IMPORTED", "rng", "int_seed"]

#: ``Trial.source`` of the engine's trials: the initial Latin hypercube, the problem's default
#: configuration (measured first on every task), an acquisition maximiser, and measurements
#: imported from elsewhere (:func:`gptask.import_runs`)
SOURCE_INITIAL, SOURCE_DEFAULT, SOURCE_SEARCH, SOURCE_IMPORTED = "initial", "default", "search", "imported"

#: how many times ``ask`` re-proposes when another process claimed the same configuration first
CLAIM_ROUNDS = 4

#: ``tune`` with nothing to ask while other processes hold the last trials: poll the history
#: every WAIT_MIN_S seconds, backing off to WAIT_MAX_S, saying so in the log every WAIT_LOG_S
WAIT_MIN_S, WAIT_MAX_S, WAIT_LOG_S = 0.2, 5.0, 60.0

#: BLAS threads while a search round runs (model updates, fantasies, the acquisition's predictions):
#: its triangular solves are small (N x 40 for N up to a few hundred), and OpenBLAS threads only
#: spin on them: a 160 x 160 solve with 40 right-hand sides took 1.5 ms with 2 threads and 0.19 ms
#: with 1 on the 2-core machine of BENCHMARKS.md (loaded), and the searches of an 8-task run were
#: 70 % of the tuner's time. The LCM fit limits its own threads (gptask.models.defaults).
SEARCH_BLAS_THREADS = 1
