"""Thompson sampling for a stalled task (issue 45, the convolution campaign's worst seeds).

    python bench/suite.py run --families convolution --methods mla --seeds 0-31 --budgets 40 \\
        --proposer thompson_stall --proposer-options '{"after": 2}' --tag ts2 --out F

The default proposer (cross-task picks, the local probe after 2); on a listed or enumerated domain,
once a task's best has not improved over its last ``after`` searched runs, its plain searches
that are not cross-task picks run, by ``mode``, the argmin of one draw from the model's joint
posterior of the task's latent output over its unrun allowed configurations (a random ``subset``
of them when there are more) instead of EI's argmax: "alternate" (default) every other one, the
local probe between; "after_probe" only when its local probe offers nothing (the probe takes every
non-pick search of a stalled task while it has unrun neighbours); "only" every one, the probe off.
``after`` 0: every non-pick search that is not a probe draws, stalled or not.

Why: on MI250X's needle (45 of 4,362 configurations within 0.6 of its optimum), EI's proposals
stay in the incumbent's basin, where the model is confident and wrong (bench/results/
convolution_worst.md); a posterior draw's argmin goes to a configuration with the probability
that it is the task's best, which spends a run on the model's uncertain regions in proportion to
their chance.

The joint draw: mean (m,) and covariance (m, m) = prior - v^T v (v = L^-1 K(data, X)) of task i's
latent output, factored with jitter escalation (gptask.model.numerics.linalg.robust_cholesky); the
model's private ``_posterior_parts`` / ``_prior_cov`` are read here (a bench proposer; a public
``LCM.posterior_cov`` would come with adoption). Measured: bench/results/convolution_worst28.md.
"""

from __future__ import annotations

import numpy as np

from gptask.model.numerics.linalg import robust_cholesky
from gptask.tuning.probe import stalled_for
from gptask.tuning.proposer import Proposer, register_proposer
from gptask.tuning.settings import LOCAL_PROBE_AFTER, STAGE_SEARCH, rng

#: extra key of the draw's random stream (after the search stage's task and trial count)
TS_STREAM = 7045
#: when a stalled task draws: "after_probe" (when its local probe offers nothing), "alternate" (every
#: other non-pick search, the probe between), "only" (every non-pick search; the probe off)
MODES = ("after_probe", "alternate", "only")


def posterior_draws(model, i: int, X: np.ndarray, gen: np.random.Generator, n: int = 1) -> np.ndarray:
    """``n`` joint draws (n, m) of task ``i``'s latent output at encoded X (m, D) from ``model``'s posterior
    (model units)."""
    _, _, mean, v = model._posterior_parts(i, X)
    bk = model._bk
    cov = bk.to_numpy(model._prior_cov(i, X)) - bk.to_numpy(v.T @ v)
    cov = 0.5 * (cov + cov.T)
    L, _ = robust_cholesky(cov, what="posterior covariance of the draw")
    return np.asarray(mean)[None, :] + gen.standard_normal((int(n), len(mean))) @ L.T


class ThompsonStall(Proposer):
    """The default proposer; a stalled task's non-pick searches take a posterior draw's argmin
    (when its probe offers nothing, alternating with the probe, or instead of it: ``mode``)."""

    name = "thompson_stall"

    def __init__(self, after: int = 2, subset: int = 1500, mode: str = "alternate") -> None:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
        super().__init__(local_probe_after=None if mode == "only" else LOCAL_PROBE_AFTER)
        self.after, self.subset, self.mode = int(after), int(subset), mode
        self._last: dict[int, str] = {}  # task -> what its last non-pick search was ("probe", "draw", "plain")
        self.draws: list[tuple[int, int]] = []  # (task, its number of trials) at each draw

    def search_among(self, i: int) -> np.ndarray | None:
        found = self._cross_task_picks(i)
        if found is None:
            return None
        picks, mine, domain = found
        if picks is not None or domain is None:
            return picks
        since, best = stalled_for(mine)
        stalled = best is not None and since >= self.after
        if not (stalled and self.mode == "alternate" and self._last.get(i) == "probe"):
            probe = None if self.local_probe_after is None else self._local_probe(i, mine, domain)
            if probe is not None:
                self._last[i] = "probe"
                return probe
        if not stalled:
            self._last[i] = "plain"
            return None
        tu = self.tuner
        space = tu.problem.param_space
        rows = domain.available(space.encode([t.params for t in mine]))
        if not len(rows):
            return None
        gen = rng(tu.seed, STAGE_SEARCH, i, len(mine), TS_STREAM)
        if len(rows) > self.subset:
            rows = np.sort(gen.choice(rows, size=self.subset, replace=False))
        X = domain.encode(rows)
        draw = posterior_draws(tu.model, i, X, gen)[0]
        self.draws.append((i, len(mine)))
        self._last[i] = "draw"
        return X[[int(np.argmin(draw))]]


register_proposer("thompson_stall", ThompsonStall)
