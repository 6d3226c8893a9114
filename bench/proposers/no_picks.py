"""The default proposer without cross-task picks: every search of a task chooses over its whole
domain by the acquisition (issue 45, the listed-space gap against BoTorch; bench/results/listed_gap.md).

    python bench/suite.py run --families gen:763 --methods mla --seeds 0-4 --budgets 12 --proposer no_picks \\
        --tag nopicks --out F
"""

from __future__ import annotations

import numpy as np

from gptask.tuning.proposer import Proposer, register_proposer


class NoPicks(Proposer):
    """Today's proposer with :meth:`search_among` always None (no cross-task picks)."""

    name = "no_picks"

    def search_among(self, i: int) -> np.ndarray | None:
        return None


register_proposer("no_picks", NoPicks)
