"""A joint initial design over the tasks (issue 45, the convolution campaign's worst seeds).

    python bench/suite.py run --families convolution --methods mla --seeds 0-31 --budgets 40 \\
        --proposer joint_design --proposer-options '{"candidates": 30}' --tag jd30 --out F

The default proposer, except the initial designs: on listed or enumerated domains the tasks'
designs are drawn as one design over their union, task after task in turn (round robin), each
point a configuration no task's design holds yet, chosen by Mitchell's best candidate: of
``candidates`` configurations drawn at random from the task's domain (not yet in any design), the
one farthest (L1 distance over the value positions, each input scaled to [0, 1]) from every point
of every task's design so far. ``candidates`` 1: distinct random configurations across the tasks;
large: a greedy maximin design. ``joint`` false (the control): each task's design drawn alike but
alone (distinct within the task, far from its own points only). ``stream``: the key of the designs' random stream
(another value: other designs by the same rule, to tell the rule from one draw of it). The problem's default stays first in each task's design. Any task
without a domain: the default proposer's designs.

Why: the 6 independent designs of 20 random configurations of the convolution campaign repeat
configurations and leave regions empty; in the worst seeds no GPU's run reached MI250X's narrow
best region (use_shmem 0, use_padding 0, block_size_y 1-2, tile_size_y 2 or 4, a power-of-two
block_size_x) before its search had settled elsewhere. Measured: bench/results/convolution_worst28.md.
"""

from __future__ import annotations

import numpy as np

from gptask.data.trials import params_key
from gptask.tuning.proposer import Proposer, register_proposer
from gptask.tuning.settings import STAGE_INITIAL, rng

#: extra key of the joint design's random stream
JOINT_STREAM = 7046


def positions(domain) -> np.ndarray:
    """(n, n_dims) value positions of every row of ``domain``, each input scaled to [0, 1]
    (an unordered input: its positions as they are, scaled alike)."""
    index = domain.index.astype(float)
    span = np.maximum(index.max(axis=0) - index.min(axis=0), 1.0)
    return (index - index.min(axis=0)) / span


class JointDesign(Proposer):
    """The default proposer with the tasks' initial designs drawn as one space-filling design."""

    name = "joint_design"

    def __init__(self, candidates: int = 30, joint: bool = True, stream: int = JOINT_STREAM, **options) -> None:
        super().__init__(**options)
        self.candidates, self.joint, self.stream = max(1, int(candidates)), bool(joint), int(stream)
        self._designs: list[list[dict]] | None = None

    def _joint(self) -> list[list[dict]] | None:
        tu = self.tuner
        domains = [tu.problem.domain(t) for t in tu.tasks]
        if any(d is None or not len(d) for d in domains):
            return None
        gen = rng(tu.seed, STAGE_INITIAL, self.stream)
        # configurations in a design so far and their scaled positions: shared by the tasks (joint), or each task's own
        shared: tuple[set[bytes], list[np.ndarray]] = (set(), [])
        held = [shared if self.joint else (set(), []) for _ in domains]
        rows: list[list[int]] = [[] for _ in domains]
        pos = [positions(d) for d in domains]
        keys = [[bytes(r) for r in d.index.astype(np.int32)] for d in domains]
        want = [tu.n_initial - (tu.defaults[i] is not None) for i in range(tu.n_tasks)]
        for i, d in enumerate(domains):  # the defaults count as design points
            if tu.defaults[i] is not None:
                r = d.rows_of(tu.problem.param_space.encode([tu.defaults[i]]))
                if len(r):
                    held[i][0].add(keys[i][int(r[0])])
                    held[i][1].append(pos[i][int(r[0])])
        for k in range(max(want, default=0)):
            for i, d in enumerate(domains):
                if k >= want[i]:
                    continue
                taken, chosen = held[i]
                free = np.array([r for r in range(len(d)) if keys[i][r] not in taken], dtype=np.int64)
                cand = gen.choice(free, size=min(len(free), self.candidates), replace=False) if len(free) else free
                if not len(cand):
                    continue
                if chosen:
                    dist = np.abs(pos[i][cand][:, None, :] - np.array(chosen)[None, :, :]).sum(axis=2).min(axis=1)
                    r = int(cand[int(np.argmax(dist))])
                else:
                    r = int(cand[0])
                rows[i].append(r)
                taken.add(keys[i][r])
                chosen.append(pos[i][r])
        return [d.params(np.array(r, dtype=np.int64)) for d, r in zip(domains, rows)]

    def initial_design(self, i: int) -> list[dict]:
        if self._designs is None:
            self._designs = self._joint() or []
        if not self._designs:
            return super().initial_design(i)
        tu = self.tuner
        default = tu.defaults[i]
        design = self._designs[i]
        if default is not None:
            design = [default] + [p for p in design if params_key(p) != params_key(default)]
        return design[: tu.n_initial]


register_proposer("joint_design", JointDesign)
