"""ScaLAPACK PDGEQRF (distributed QR factorisation): the GPTune paper's guiding tuning example.

``problem(...)`` returns the :class:`gptask.Problem` shared by the API, the command line
(``python -m apps.scalapack_qr``) and notebooks. ``backend="real"`` builds and runs our C driver
against Debian's ScaLAPACK under Debian's MPICH; ``backend="model"`` evaluates the paper's
analytic cost MODEL (eq. 18-19) with per-unit times fitted on this machine.
"""

from .build import BuildError, MissingDependency, build_driver
from .costmodel import CostModel, counts
from .launcher import Launcher, LaunchError, LaunchTimeout
from .problem import InfeasibleConfiguration, detect_cores, problem

__all__ = [
    "problem",
    "Launcher",
    "LaunchError",
    "LaunchTimeout",
    "InfeasibleConfiguration",
    "MissingDependency",
    "BuildError",
    "build_driver",
    "CostModel",
    "counts",
    "detect_cores",
]
