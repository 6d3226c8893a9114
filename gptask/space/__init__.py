"""Search spaces: dimensions (:mod:`.dimensions`), listed domains, constraint expressions, initial designs.

``gptask.space`` was one module until issue 41; its names are re-exported here from
:mod:`.dimensions`, so ``from gptask.space import ...`` keeps working."""

from .dimensions import (Real, Integer, Categorical, Ordinal, Boolean, Dimension, Space, choice_text)

__all__ = ["Real", "Integer", "Categorical", "Ordinal", "Boolean", "Dimension", "Space", "choice_text"]
