"""gptask: multitask and transfer-learning Gaussian-process autotuning for HPC applications."""

from .problem import Problem
from .space import Categorical, Integer, Real, Space

__version__ = "0.1.0"

__all__ = ["Problem", "Space", "Real", "Integer", "Categorical"]
