"""What is tuned: the problem (:mod:`.definition`), its objectives and outputs, analytic test problems.

``gptask.problem`` was one module until issue 41; its names are re-exported here from
:mod:`.definition`, so ``from gptask.problem import ...`` keeps working."""

from .definition import (Problem, Features, CostModel)

__all__ = ["Problem", "Features", "CostModel"]
