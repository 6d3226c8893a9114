"""Pure numerics for the surrogate models: numpy in, numpy out, no I/O, no other gptask import."""

from .gp import GP
from .kernels import KERNELS
from .lcm import LCM, FitReport, lml_and_grad
from .linalg import CholeskyError, robust_cholesky
from .priors import LCMPrior

__all__ = ["LCM", "GP", "FitReport", "LCMPrior", "lml_and_grad", "KERNELS", "CholeskyError",
           "robust_cholesky"]
