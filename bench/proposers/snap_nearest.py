"""BoTorch's way of choosing a listed configuration, on gptask's model (issue 45, the listed-space gap against
BoTorch; bench/results/listed_gap.md). bench/suite_peers.py's ``botorch_mtgp`` maximises LogEI over the unit cube,
then runs the *nearest allowed configuration not run yet*: when the acquisition's maximum is a configuration
already run (the incumbent, under a model that believes it), the run goes to its nearest unrun neighbour, a local
step. gptask's search instead takes the best unrun configuration by the acquisition, wherever it is.

This proposer makes every searched run of a task with a listed domain choose like the peer, on gptask's model:
the log-EI maximiser over *every* allowed configuration (run or not; the fitted model, latent predictive,
incumbent the least predicted value at the task's runs), then the unrun configuration nearest to it in gptask's
encoding (the peer's ``nearest_allowed``). ``picks=true`` keeps the default cross-task picks on their turns.

    python bench/suite.py run --families gen:763 --methods mla --seeds 0-4 --budgets 12 --proposer snap_nearest \\
        --tag snap --out F
"""

from __future__ import annotations

import numpy as np

from gptask.model.acquisition import log_ei
from gptask.tuning.proposer import Proposer, register_proposer


class SnapNearest(Proposer):
    """The default proposer, with the search of a listed domain replaced by the peer's rule (module docstring)."""

    name = "snap_nearest"

    def __init__(self, picks: bool = False) -> None:
        super().__init__()
        self.picks = bool(picks)

    def search_among(self, i: int) -> np.ndarray | None:
        tu = self.tuner
        model = tu.model
        domain = tu.problem.domain(tu.tasks[i])
        if model is None or domain is None:
            return None
        if self.picks:
            offered = super().search_among(i)
            if offered is not None:
                return offered
        space = tu.problem.param_space
        run = space.encode([t.params for t in tu.trials_of(i)])
        X = domain.encoded
        mean, var = model.predict(i, X)
        best = float(np.min(model.predict(i, run)[0])) if len(run) else float(np.min(mean))
        top = X[int(np.argmax(log_ei(mean, np.sqrt(np.maximum(var, 0.0)), best)))]
        avail = domain.available(run if len(run) else None)
        if not len(avail):
            return None
        near = avail[int(np.argmin(np.sum((X[avail] - top) ** 2, axis=1)))]
        return X[near][None, :]


register_proposer("snap_nearest", SnapNearest)
