"""I/O accelerators app: a small-read prefetcher and a burst buffer tuned per I/O pattern.

``problem(accelerator="sro"|"sbb", backend="real"|"model", workdir=None, seed=0) -> gptask.Problem``;
the command line is ``python -m apps.io_accelerators {evaluate,tune,grid,summary,compare}``.
"""

from .problem import DEFAULTS, named_task, problem

__all__ = ["problem", "named_task", "DEFAULTS"]
