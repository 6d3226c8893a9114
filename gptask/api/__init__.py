"""The entry points of batch tuning with their full signatures: ``gt.tune`` (:mod:`.campaign`).

``gptask.api`` was one module until issue 41; its names are re-exported here from
:mod:`.campaign`, so ``from gptask.api import ...`` keeps working."""

from .campaign import (tune, AUTO)

__all__ = ["tune", "AUTO"]
