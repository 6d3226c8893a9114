"""Small budgets for smoke tests of scripts: ``GPTASK_MAX_TASKS`` and ``GPTASK_MAX_BUDGET``.

A script, a batch job or a README example written for the real budget (8 tasks, 20 runs each,
minutes to hours) can be checked end to end in seconds by setting, in its environment::

    GPTASK_MAX_TASKS=2      # at most 2 tasks: the first 2 of a list, or 2 Latin hypercube tasks
    GPTASK_MAX_BUDGET=4     # at most 4 evaluations per task (and an initial design of at most 4)

Every ``gt.tune`` call (the API, ``gptask tune``, the apps' ``tune`` commands, ``scripts/main.sh``)
then uses ``min(its value, the cap)`` and logs a warning saying so. The test suite runs the
README's examples this way. Unset (the default), nothing changes. A value that is not a positive
integer is an error naming the variable.
"""

from __future__ import annotations

import logging
import numbers
import os
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["MAX_TASKS_VAR", "MAX_BUDGET_VAR", "smoke_limits"]

log = logging.getLogger(__name__)

MAX_TASKS_VAR = "GPTASK_MAX_TASKS"
MAX_BUDGET_VAR = "GPTASK_MAX_BUDGET"


def _cap(name: str) -> int | None:
    text = os.environ.get(name, "").strip()
    if not text:
        return None
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise ValueError(f"{name} must be a positive integer (a cap for smoke tests), got {text!r}")
    return value


def smoke_limits(tasks: int | Sequence[Mapping[str, Any]], budget: int,
                 n_initial: int | None) -> tuple[Any, int, int | None]:
    """``(tasks, budget, n_initial)`` within the caps of the environment (module docstring)."""
    max_tasks, max_budget = _cap(MAX_TASKS_VAR), _cap(MAX_BUDGET_VAR)
    if max_tasks is not None:
        if isinstance(tasks, numbers.Integral) and not isinstance(tasks, bool) and tasks > max_tasks:
            log.warning("%s=%d: %d tasks -> %d (smoke test)", MAX_TASKS_VAR, max_tasks, tasks, max_tasks)
            tasks = max_tasks
        elif isinstance(tasks, Sequence) and not isinstance(tasks, (str, bytes)) and len(tasks) > max_tasks:
            log.warning("%s=%d: the first %d of %d tasks (smoke test)", MAX_TASKS_VAR, max_tasks, max_tasks,
                        len(tasks))
            tasks = list(tasks)[:max_tasks]
    if max_budget is not None and isinstance(budget, numbers.Integral) and budget > max_budget:
        log.warning("%s=%d: budget %d -> %d per task (smoke test)", MAX_BUDGET_VAR, max_budget, budget, max_budget)
        budget = max_budget
        if n_initial is not None and n_initial > max_budget:
            n_initial = max_budget
    return tasks, budget, n_initial
