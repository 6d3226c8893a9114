"""Consensus candidates added to the joint search's cross-task picks (issue 23 experiment, formerly
a sitecustomize hook that monkeypatched the Tuner).

    python bench/suite.py run --families convolution --methods mla --seeds 0-15 \\
        --proposer consensus_picks --proposer-options '{"cons": 2}' --tag cons2 --out F

Whenever gptask offers task i cross-task picks (gptask/tuning/crosstask.py), the ``cons``
configurations of least mean predicted model value over the other tasks (with ``consall=True``,
over every task, i included) that task i has not run are offered too: the run-free consensus rule
of gptask/transfer/tla1.py inside the joint search. Measured: not ahead of the default (BENCHMARKS.md,
issue 23).
"""

from __future__ import annotations

import numpy as np

from gptask.tuning.proposer import Proposer, register_proposer


class ConsensusPicks(Proposer):
    """The default proposer, with ``cons`` consensus configurations added to every cross-task offer."""

    name = "consensus_picks"

    def __init__(self, cons: int = 2, consall: bool = False) -> None:
        super().__init__()
        self.cons, self.consall = int(cons), bool(consall)

    def search_among(self, i: int) -> np.ndarray | None:
        offered = super().search_among(i)
        if offered is None or not self.cons:
            return offered
        tu = self.tuner
        domain, model = tu.problem.domain(tu.tasks[i]), tu.model
        every = domain.encode(np.arange(len(domain)))
        tasks = [j for j in range(tu.n_tasks) if self.consall or j != i]
        score = np.mean([model.predict(j, every)[0] for j in tasks], axis=0)
        mine = tu.trials_of(i)
        skip = set(domain.rows_of(tu.problem.param_space.encode([t.params for t in mine])).tolist()) if mine else set()
        skip |= set(domain.rows_of(offered).tolist())
        extra = [int(r) for r in np.argsort(score, kind="stable") if int(r) not in skip][: self.cons]
        return np.vstack([offered, domain.encode(np.array(extra, dtype=np.int64))]) if extra else offered


register_proposer(ConsensusPicks.name, ConsensusPicks)
