"""Tasks that do not run the same configuration in the same round (issue 45, the listed-space gap against BoTorch;
bench/results/listed_gap.md). On tuning families with a narrow optimum shared by the tasks, gptask's tasks move in
lockstep: the joint model predicts nearly the same landscape for every task, each task's search takes the
acquisition's maximiser, and the tasks of one round run the same configuration (gen:763 seed 2: 30 searched runs
over 5 tasks, 7 distinct configurations), which teaches the shared model little more than one run would.

This proposer makes the search of a task with a listed domain choose itself: the log-EI maximiser (on the fitted
model, latent predictive, incumbent the least predicted value at the task's runs) over the task's unrun
configurations, leaving out, with ``distinct=true``, those that another task chose earlier in the same round (a
round: every task asked once). ``distinct=false`` is the control (the default's choice, re-implemented here). The
default's cross-task picks stay on their turns (their offer without this round's choices, when any is left).

    python bench/suite.py run --families gen:763 --methods mla --seeds 0-11 --budgets 12 --proposer distinct_round \\
        --proposer-options '{"distinct": true}' --tag distinct --out F
"""

from __future__ import annotations

import numpy as np

from gptask.model.acquisition import log_ei
from gptask.tuning.proposer import Proposer, register_proposer


class DistinctRound(Proposer):
    """The default proposer; a listed domain's search chosen here (module docstring)."""

    name = "distinct_round"

    def __init__(self, distinct: bool = True) -> None:
        super().__init__()
        self.distinct = bool(distinct)
        self._round: dict[int, int] = {}  # task -> domain row chosen in the current round

    def search_among(self, i: int) -> np.ndarray | None:
        tu = self.tuner
        model = tu.model
        domain = tu.problem.domain(tu.tasks[i])
        if model is None or domain is None:
            return None
        if i in self._round:  # every task asked once: a new round
            self._round = {}
        taken = set(self._round.values()) if self.distinct else set()
        space = tu.problem.param_space
        run = space.encode([t.params for t in tu.trials_of(i)])
        offered = super().search_among(i)
        X = domain.encoded
        if offered is not None:
            rows = [r for r in domain.rows_of(offered).tolist() if r not in taken]
            rows = [r for r in rows if r in set(domain.available(run if len(run) else None).tolist())]
        else:
            rows = [r for r in domain.available(run if len(run) else None).tolist() if r not in taken]
        if not rows:  # everything left was taken this round: the default's choice
            return offered
        mean, var = model.predict(i, X[rows])
        best = float(np.min(model.predict(i, run)[0])) if len(run) else float(np.min(mean))
        pick = rows[int(np.argmax(log_ei(mean, np.sqrt(np.maximum(var, 0.0)), best)))]
        self._round[i] = pick
        return X[pick][None, :]


register_proposer("distinct_round", DistinctRound)
