"""Leave a stalled basin (issue 45, the convolution campaign's worst seeds).

    python bench/suite.py run --families convolution --methods mla --seeds 0-31 --budgets 40 \\
        --proposer stall_escape --proposer-options '{"after": 3, "radius": 2}' --tag esc --out F

On a listed or enumerated domain, once a task's best has not improved over its last ``after``
searched runs, its next search that is not a cross-task pick maximises the acquisition (exact,
over the listed configurations) only among those that differ from the task's incumbent in more
than ``radius`` parameters: EI, which kept proposing the incumbent's neighbours (1-2 parameters
away, predicted as good as it with a small std, measured far worse: bench/archive/stall_trace.py),
is made to take its best proposal from another basin. One improvement resets the count.
"""

from __future__ import annotations

import numpy as np

from gptask.model.surrogate.data import usable
from gptask.tuning.proposer import Proposer, register_proposer
from gptask.tuning.settings import SOURCE_SEARCH


class StallEscape(Proposer):
    """The default proposer; a stalled task's non-pick searches choose outside its incumbent's ball."""

    name = "stall_escape"

    def __init__(self, after: int = 3, radius: int = 2) -> None:
        super().__init__()
        self.after, self.radius = int(after), int(radius)

    def search_among(self, i: int) -> np.ndarray | None:
        picks = super().search_among(i)
        if picks is not None:
            return picks
        tu = self.tuner
        domain = tu.problem.domain(tu.tasks[i])
        if domain is None:
            return None
        done = [t for t in tu.trials_of(i) if t.status.finished]
        best, searched_since = None, 0
        for t in done:
            if usable(t) and (best is None or t.value < best.value):
                best, searched_since = t, 0
            elif t.source == SOURCE_SEARCH:
                searched_since += 1
        if best is None or searched_since < self.after:
            return None
        table = domain.index  # (n, n_dims) value indices of the listed configurations
        inc = domain.rows_of(tu.problem.param_space.encode([best.params]))
        if not len(inc) or inc[0] < 0:
            return None
        far = np.flatnonzero((table != table[inc[0]]).sum(axis=1) > self.radius)
        claimed = tu.problem.param_space.encode([t.params for t in tu.trials_of(i)])
        free = np.intersect1d(far, domain.available(claimed))
        return domain.encode(free) if len(free) else None


register_proposer("stall_escape", StallEscape)
