"""Cross-task picks gated by an empirical rank correlation (issue 23 experiments; formerly the
a sitecustomize hook that monkeypatched ``Tuner.search_among``).

    python bench/suite.py run --families convolution --methods mla --seeds 0-15 --proposer gated_picks \\
        --proposer-options '{"every": 2, "thr": 0.5, "top": 2}' --tag g05 --out F

The options ``{"every": 2, "thr": -2, "top": 2, "own": 0.93}`` are what gptask does by itself
(gptask/tuning/crosstask.py). On every ``every``-th searched run of a task i with a listed or
enumerated domain, the search chooses by EI among the ``top`` best configurations of each other
task j whose model, conditioned on j's data only (``LCM.subset([j])``, the joint fit's
hyperparameters), ranks task i's measured values with a Spearman correlation of at least ``thr``
(``topq``: instead the share of task i's best quarter of runs that j's model also ranks in its
best quarter; ``pool``: the mean of every estimate made for the pair so far; ``start=k``: only
from the task's k-th searched run on; ``own=r``: only where the task's own leave-one-out
predictions rank its runs below r; ``stall``: only after a searched run that did not improve, never
twice in a row); the whole domain otherwise. Measured: BENCHMARKS.md, issue 23.
"""

from __future__ import annotations

import numpy as np
from scipy.stats import spearmanr

from gptask.model.surrogate.data import usable
from gptask.tuning.proposer import Proposer, register_proposer


class GatedPicks(Proposer):
    """The default proposer with the cross-task picks replaced by the gated rule above."""

    name = "gated_picks"

    def __init__(self, every: int = 2, thr: float = -2.0, top: int = 2, start: int = 0, topq: bool = False,
                 pool: bool = False, stall: bool = False, own: float | None = None) -> None:
        super().__init__()
        self.every, self.thr, self.top, self.start = int(every), float(thr), int(top), int(start)
        self.topq, self.pool, self.stall = bool(topq), bool(pool), bool(stall)
        self.own_below = own
        self._picked_at: set[tuple[int, int]] = set()
        self._estimates: dict[tuple[int, int], list[float]] = {}

    def _stalled(self, i: int, mine: list, searched: int) -> bool:
        done = [t for t in mine if t.status.finished]
        last = max((k for k, t in enumerate(done) if t.source == "search"), default=None)
        if last is None or (i, searched - 1) in self._picked_at:
            return False
        before = [t.value for t in done[:last] if usable(t)]
        return not (usable(done[last]) and (not before or done[last].value < min(before)))

    def _correlation(self, i: int, j: int, predicted: np.ndarray, y: np.ndarray) -> float:
        rho = spearmanr(predicted, y)[0]
        if self.topq:
            q = max(2, len(y) // 4)
            both = set(np.argsort(y, kind="stable")[:q].tolist()) & set(np.argsort(predicted, kind="stable")[:q].tolist())
            rho = len(both) / q
        if self.pool:
            seen = self._estimates.setdefault((i, j), [])
            if np.isfinite(rho):
                seen.append(rho)
            rho = float(np.mean(seen)) if seen else rho
        return rho

    def search_among(self, i: int) -> np.ndarray | None:
        tu = self.tuner
        domain, model = tu.problem.domain(tu.tasks[i]), tu.model
        if domain is None or model is None:
            return None
        mine = tu.trials_of(i)
        searched = sum(t.source == "search" for t in mine)
        if searched % self.every or searched < self.start:
            return None
        if self.stall and not self._stalled(i, mine, searched):
            return None
        X, y = model.data()
        if len(y[i]) < 4:
            return None
        if self.own_below is not None:
            observed, loo_mean, _ = model.loo()
            own = spearmanr(loo_mean[i], observed[i])[0]
            if np.isfinite(own) and own >= self.own_below:
                return None
        rows = []
        for j in range(tu.n_tasks):
            if j == i:
                continue
            rho = self._correlation(i, j, model.subset([j]).predict(0, X[i])[0], y[i])
            if not np.isfinite(rho) or rho < self.thr:
                continue
            rows += [t.params for t in sorted((t for t in tu.trials_of(j) if usable(t)), key=lambda t: t.value)[: self.top]]
        if not rows:
            return None
        self._picked_at.add((i, searched))
        return domain.encode(domain.rows_of(tu.problem.param_space.encode(rows)))


register_proposer(GatedPicks.name, GatedPicks)
