"""The seeding rule of every random choice gptask makes, and the stage numbers that keep them apart.

Each random draw takes its generator from ``np.random.SeedSequence([seed, stage, *keys])``: the run's
seed, the stage below (which job draws) and the keys that identify the draw (a task index, a trial
count, an iteration). A resumed run therefore draws what an uninterrupted run would have drawn, and
two jobs never share a stream. This module imports nothing from gptask, so the tuning engine and
the transfer layer both use it without depending on each other.
"""

from __future__ import annotations

import numpy as np

__all__ = ["rng", "int_seed", "STAGE_TASKS", "STAGE_INITIAL", "STAGE_SEARCH", "STAGE_FIT", "STAGE_STEER", "STAGE_CENTRED",
           "STAGE_EXTEND", "STAGE_REFIT", "STAGE_PROJECT", "STAGE_JOINT_SEARCH", "STAGE_CHEAP", "STAGE_PRICE"]

#: MLA: the task Latin hypercube, each task's initial design, each acquisition search, each model fit
STAGE_TASKS, STAGE_INITIAL, STAGE_SEARCH, STAGE_FIT = 0, 1, 2, 3
#: the pool of replacement design points of a cautious run (gptask.propose.steering)
STAGE_STEER = 4
#: transfer: TLA2's centred design, its LCM extension and full refits, TLA1's projection candidates,
#: the joint model's candidates for a new task's optimum
STAGE_CENTRED, STAGE_EXTEND, STAGE_REFIT, STAGE_PROJECT, STAGE_JOINT_SEARCH = 20, 22, 23, 24, 25
#: fidelity: the extra points of a cheapest level's design sized by the cost budget (CHEAP_DESIGN_SHARE)
STAGE_CHEAP = 26
#: fidelity: the configurations at which run_cost prices the fidelity levels (gptask.tuning.fidelity.run_levels)
STAGE_PRICE = 27


def rng(seed: int, *keys: int) -> np.random.Generator:
    """A generator for ``(seed, *keys)`` (see the module docstring)."""
    return np.random.default_rng(np.random.SeedSequence([int(seed), *map(int, keys)]))


def int_seed(seed: int, *keys: int) -> int:
    """A 32-bit integer seed for ``(seed, *keys)``."""
    return int(np.random.SeedSequence([int(seed), *map(int, keys)]).generate_state(1)[0])
