"""The multitask learning autotuner (MLA) under its historical name.

The engine lives in :mod:`gptask.tuning` (training data, proposals, the ask/tell :class:`Tuner`,
the ``tune`` loop); this module keeps ``from gptask.tuning.mla import tune, Tuner, Proposal,
resolve_tasks`` working.
"""

from ..data.trials import Proposal
from . import Tuner, resolve_tasks, tune

__all__ = ["Proposal", "Tuner", "tune", "resolve_tasks"]
