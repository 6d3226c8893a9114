"""Leave a stalled basin (issue 45, the convolution campaign's worst seeds).

    python bench/suite.py run --families convolution --methods mla --seeds 0-31 --budgets 40 \\
        --proposer stall_escape --proposer-options '{"after": 3, "radius": 2}' --tag stall --out F

On a listed or enumerated domain, once a task's best has not improved over its last ``after``
searched runs, its next search that is not a cross-task pick maximises the acquisition (exact,
over the listed configurations) only among those that differ from the task's incumbent in more
than ``radius`` parameters: EI, which kept proposing the incumbent's neighbours (1-2 parameters
away, predicted as good as it with a small std, measured far worse: bench/archive/stall_trace.py),
is made to take its best proposal from another basin. One improvement resets the count.
``alternate`` (default True): never two escapes in a row, the search after an escape is the plain
one, so that an optimum within ``radius`` of a stalled incumbent stays reachable; False: every
non-pick search while stalled escapes (the first version, tag esc32 of
bench/results/convolution_worst.md). Measured and not adopted: -0.018 (se 0.016) in mean over the
32 convolution seeds at 40 runs, worst seed 0.678 -> 0.689 (bench/results/convolution_worst.md).
"""

from __future__ import annotations

import numpy as np

from gptask.data.trials import Status
from gptask.tuning.proposer import Proposer, register_proposer
from gptask.tuning.settings import SOURCE_SEARCH


class StallEscape(Proposer):
    """The default proposer; a stalled task's non-pick searches choose outside its incumbent's ball."""

    name = "stall_escape"

    def __init__(self, after: int = 3, radius: int = 2, alternate: bool = True) -> None:
        super().__init__()
        self.after, self.radius, self.alternate = int(after), int(radius), bool(alternate)
        self._escapes: set[tuple[int, int]] = set()  # (task, its number of trials) at each escape

    def _since_best(self, trials: list) -> tuple[int, object]:
        """(searched runs finished after the task's best meeting every limit, that best trial)."""
        spec = self.tuner.problem.outputs
        sign = -1.0 if spec is not None and spec.sign(spec.primary) < 0 else 1.0
        best, since = None, 0
        for t in trials:
            if not t.status.finished:
                continue
            ok = t.status is Status.COMPLETE and t.value is not None and (spec is None or spec.meets_limits(t.values))
            if ok and (best is None or sign * float(t.value) < sign * float(best.value)):
                best, since = t, 0
            elif best is not None and t.source == SOURCE_SEARCH:
                since += 1
        return since, best

    def search_among(self, i: int) -> np.ndarray | None:
        picks = super().search_among(i)
        tu = self.tuner
        mine = tu.trials_of(i)
        searched = [k for k, t in enumerate(mine) if t.source == SOURCE_SEARCH]
        if picks is not None or (self.alternate and searched and (i, searched[-1]) in self._escapes):
            return picks
        domain = tu.problem.domain(tu.tasks[i])
        if domain is None:
            return None
        since, best = self._since_best(mine)
        if best is None or since < self.after:
            return None
        space = tu.problem.param_space
        inc = domain.indices_of(space.encode([best.params]))[0]
        far = np.flatnonzero((domain.index != inc).sum(axis=1) > self.radius)
        rows = np.intersect1d(far, domain.available(space.encode([t.params for t in mine])))
        if not len(rows):
            return None
        self._escapes.add((i, len(mine)))
        return domain.encode(rows)


register_proposer("stall_escape", StallEscape)
