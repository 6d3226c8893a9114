"""The default proposer, with the LCM's fresh starts after a noise on its floor switched off (issue 40).

    python bench/suite.py run --families bbob-f8-d5,hartmann6 --methods mla --seeds 0-4 \\
        --proposer no_floor_restarts --tag nofloor --out F

Every fit of a deterministic objective ends with the noise on its floor, which :meth:`LCM.diagnose`
flags and which ran ``EXPLORE_RESTARTS`` more random starts of the fit. Loading this file sets
``gptask.model.numerics.lcm.EXPLORE_ON_NOISE_FLOOR`` to False in the worker: a fit whose only flag is the
noise floor keeps its first winner; other flags still run the fresh starts. The proposals are the
default proposer's.
"""

from __future__ import annotations

import gptask.model.numerics.lcm as lcm
from gptask.tuning.proposer import Proposer, register_proposer

lcm.EXPLORE_ON_NOISE_FLOOR = False


class NoFloorRestarts(Proposer):
    """The default proposer (the switch above is what differs)."""

    name = "no_floor_restarts"


register_proposer(NoFloorRestarts.name, NoFloorRestarts)
