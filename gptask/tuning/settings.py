"""Constants of the tuning engine, in one place, and the seeding rule.

Reproducibility: the task LHS, each task's initial design, each model fit and each search draw
their randomness from ``np.random.SeedSequence([seed, stage, *keys])`` with the stage numbers
below, so a resumed run asks for the same points an uninterrupted run would have (up to the warm
start of the model fit).
"""

from __future__ import annotations

import numpy as np

__all__ = ["STAGE_TASKS", "STAGE_INITIAL", "STAGE_SEARCH", "STAGE_FIT", "VALUE_LIMIT", "CLAIM_ROUNDS",
           "WAIT_MIN_S", "WAIT_MAX_S", "WAIT_LOG_S", "rng", "int_seed"]

#: seed stages (the first key after the run's seed)
STAGE_TASKS, STAGE_INITIAL, STAGE_SEARCH, STAGE_FIT = 0, 1, 2, 3

#: the largest |value| the model takes as a measurement. Anything beyond (the 1e308 a user returns
#: as a "penalty") is shown to the model like a failed run; the trial keeps its value as given.
#: At 1e150 the squares in a task's mean and variance stay finite in float64, and log(1e150) = 345.
VALUE_LIMIT = 1e150

#: how many times ``ask`` re-proposes when another process claimed the same configuration first
CLAIM_ROUNDS = 4

#: ``tune`` with nothing to ask while other processes hold the last trials: poll the history
#: every WAIT_MIN_S seconds, backing off to WAIT_MAX_S, saying so in the log every WAIT_LOG_S
WAIT_MIN_S, WAIT_MAX_S, WAIT_LOG_S = 0.2, 5.0, 60.0


def rng(seed: int, *keys: int) -> np.random.Generator:
    """A generator for ``(seed, *keys)`` (see the module docstring)."""
    return np.random.default_rng(np.random.SeedSequence([int(seed), *map(int, keys)]))


def int_seed(seed: int, *keys: int) -> int:
    """A 32-bit integer seed for ``(seed, *keys)``."""
    return int(np.random.SeedSequence([int(seed), *map(int, keys)]).generate_state(1)[0])
