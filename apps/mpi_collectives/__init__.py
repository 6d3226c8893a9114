"""MPI collective algorithm selection with MPICH control variables (mpi4py + the mpich wheel).

``problem(...)`` returns the :class:`gptask.Problem`; ``evaluate``/``default_time`` run single
measurements; ``python -m apps.mpi_collectives {evaluate,grid,tune}`` is the command line.
See README.md in this directory for the knobs and the evidence that each one has an effect.
"""

from .algorithms import ALGORITHMS, COLLECTIVES, KNOBS, cvar_environment
from .launcher import LaunchConfig, LaunchError, run_benchmark
from .objective import CollectiveObjective, default_time, evaluate
from .problem import param_space, problem

__all__ = [
    "ALGORITHMS", "COLLECTIVES", "KNOBS", "CollectiveObjective", "LaunchConfig", "LaunchError",
    "cvar_environment", "default_time", "evaluate", "param_space", "problem", "run_benchmark",
]
