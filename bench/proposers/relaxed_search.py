"""BoTorch's way of searching a listed space, on gptask's model (issue 45, the listed trap;
bench/results/listed_trap.md): log-EI maximised over the *relaxed* encoded cube (every column anywhere in [0, 1], not
only the encodings of allowed configurations), then the allowed configuration not run yet nearest to the maximiser
(squared distance in the encoded columns), as bench/suite_peers.py's botorch_mtgp does after ``optimize_acqf``.

    python bench/suite.py run --families gen:837 --methods mla --seeds 0-11 --budgets 12 --proposer relaxed_search \\
        --tag relaxed --out F

Why: BoTorch's searched runs on gen:837 / gen:763 put 57 % of their coordinates at an end of their list against
gptask's 44-46 %, and gen:837's optimum has 69 % of its coordinates at an end (35 % for a configuration drawn
uniformly). On the relaxed cube an ordinal's indicator columns can take values no allowed configuration has (all
zero: correlated with no measured value, the largest std), where EI is largest; the nearest allowed configuration of
such a point is decided by the position column, often at an end. This proposer tests whether that search, not the
model, is what sets BoTorch apart there.

The search: ``samples`` uniform points of the cube and every allowed configuration's encoding, log-EI (the fitted
model's latent predictive; incumbent: the least predicted mean at the task's runs) on all of them, then ``polish``
rounds of Gaussian steps (sd 0.1, then 0.03, 0.01) around the 8 best, clipped to the cube; ``corners``: the share of
the uniform points rounded to vertices of the cube (where BoTorch's bounded L-BFGS-B often ends). The cross-task picks
keep their turns (BoTorch has none; ``picks=false`` drops them).
"""

from __future__ import annotations

import numpy as np

from gptask.model.acquisition import log_ei
from gptask.tuning.proposer import Proposer, register_proposer
from gptask.tuning.settings import int_seed


class RelaxedSearch(Proposer):
    """The default proposer; a listed domain's search as BoTorch's peer does it (module docstring)."""

    name = "relaxed_search"

    def __init__(self, samples: int = 20000, polish: int = 3, picks: bool = True, corners: float = 0.0) -> None:
        super().__init__()
        self.samples, self.polish, self.picks, self.corners = int(samples), int(polish), bool(picks), float(corners)

    def search_among(self, i: int) -> np.ndarray | None:
        tu = self.tuner
        model = tu.model
        if model is None:
            return None
        if self.picks:
            offered = super().search_among(i)
            if offered is not None:
                return offered
        domain = tu.problem.domain(tu.tasks[i])
        if domain is None:
            return None
        space = tu.problem.param_space
        mine = tu.trials_of(i)
        run = space.encode([t.params for t in mine]) if mine else None
        avail = domain.available(run)
        if not len(avail):
            return None
        best = float(np.min(model.predict(i, run)[0])) if run is not None else 0.0

        def acq(X: np.ndarray) -> np.ndarray:
            mean, var = model.predict(i, X)
            return log_ei(mean, np.sqrt(np.maximum(var, 0.0)), best)

        rng = np.random.default_rng(int_seed(tu.seed, 97, i, len(mine)))
        allowed = domain.encoded
        X = rng.random((self.samples, space.n_columns))
        n_corner = int(self.corners * self.samples)
        X[:n_corner] = np.round(X[:n_corner])  # vertices of the cube (where a bounded gradient search often ends)
        X = np.vstack([X, allowed])
        v = acq(X)
        for sd in (0.1, 0.03, 0.01)[: self.polish]:
            top = X[np.argsort(-np.where(np.isfinite(v), v, -np.inf))[:8]]
            Y = np.clip(np.repeat(top, 64, axis=0) + sd * rng.standard_normal((8 * 64, space.n_columns)), 0.0, 1.0)
            X, v = np.vstack([X, Y]), np.concatenate([v, acq(Y)])
        x = X[int(np.argmax(np.where(np.isfinite(v), v, -np.inf)))]
        d = np.sum((allowed[avail] - x) ** 2, axis=1)
        return domain.encode(np.array([avail[int(np.argmin(d))]], dtype=np.int64))


register_proposer("relaxed_search", RelaxedSearch)
