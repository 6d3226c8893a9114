"""Pure numerics for the surrogate models: numpy in, numpy out, no I/O, no other gptask import."""

from .gp import GP
from .kernels import KERNELS
from .lcm import LCM, FitReport, TaskLevels, lml_and_grad
from .linalg import CholeskyError, robust_cholesky
from .priors import LCMPrior

__all__ = ["LCM", "GP", "FitReport", "TaskLevels", "LCMPrior", "lml_and_grad", "KERNELS", "CholeskyError",
           "robust_cholesky"]
