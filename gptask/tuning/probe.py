"""The local probe of a stalled task's incumbent (issue 45, the listed trap; the default proposer's
after :data:`~gptask.tuning.settings.LOCAL_PROBE_AFTER` = 2 searched runs without improvement).

On a listed or enumerated domain, once a task's best value has not improved over its last
``after`` searched runs, its next search that is not a cross-task pick chooses (by the acquisition)
only among the incumbent's one-step neighbours (:meth:`gptask.space.domain.Domain.neighbours`)
that the task has not run, and among those only the ones the fewest tasks have run or been
offered by another task's probe of the same round. Never two probes in a row: the search after a
probe is the plain one.

Why (bench/results/listed_trap.md): on a generated family whose tasks share a narrow optimum
(gen:837, seed 0), every task settles one list step from it on one input and none runs it. The
model fits a short length scale to the indicator column of the incumbent's value of that input,
i.e. it explains the incumbent's good value by that exact value; the neighbour one value away then
reverts to the prior mean (0.0 in model units against the incumbent's -1.3, std 0.3-0.4), its
log-EI ranks 330-470th of about 1,070 unrun configurations, and EI spends the remaining runs on
the incumbent's other neighbours along an input already known to be flat. A probe among the
neighbours no task has run puts the untried inputs' steps in front of the acquisition; spreading
the probes of one round over different neighbours tries the neighbourhood once for all the tasks
that share it.

Measured (bench/results/listed_trap.md): on 9 generated listed families (12 runs per task, 12 seeds)
within noise (after 1: -0.004, after 2: -0.006 in regret, se 0.009 / 0.008), gen:837 itself
unchanged; on the recorded convolution campaign (40 runs per GPU, 32 seeds) after 2 raises the
mean fraction of the optimum from 0.836 to 0.868 (+0.032, se 0.012), the worst seed 0.678 -> 0.707.

The offers of a round are kept as configurations (each task's domain numbers its rows its own way:
PDGEQRF's allowed configurations depend on the matrix, the convolution campaign lists one GPU's in
another order); until session 32 they were kept as row numbers and read in the next task's domain,
which stopped PDGEQRF's main job with an IndexError and misread that GPU's offers
(bench/results/listed_trap.md, section 6).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from ..data.trials import Trial
from ..model.surrogate.data import usable
from ..space.domain import Domain
from .settings import SOURCE_SEARCH

__all__ = ["stalled_for", "probe_rows"]


def stalled_for(trials: Sequence[Trial]) -> tuple[int, dict | None]:
    """(how many searched runs with a usable value came after the task's best, the best's
    configuration) over one task's ``trials`` in order (values minimised); (0, None) when none has a
    usable value."""
    best: Trial | None = None
    since = 0
    for t in trials:
        if not usable(t):
            continue
        if best is None or float(t.value) < float(best.value):
            best, since = t, 0
        elif t.source == SOURCE_SEARCH:
            since += 1
    return since, (None if best is None else dict(best.params))


def probe_rows(domain: Domain, incumbent: int, own: Iterable[int], seen: Iterable[int]) -> list[int]:
    """Row numbers of ``domain`` a probe of the incumbent (row ``incumbent``) chooses from: its
    one-step neighbours not among ``own`` (rows the task has run or claimed), along the inputs
    whose line through the incumbent (the configurations that differ from it in that input alone)
    holds the fewest of ``seen`` (rows any task ran, claimed or was offered by a probe), in
    neighbour order; empty when the task has run every neighbour."""
    mine = set(int(r) for r in own)
    near = [int(r) for r in domain.neighbours(int(incumbent)) if int(r) not in mine]
    if not near:
        return []
    base = domain.index[int(incumbent)]
    rows = np.array(sorted(set(int(r) for r in seen) - {int(incumbent)}), dtype=np.int64)
    on_line = np.zeros(domain.index.shape[1], dtype=int)
    if len(rows):
        differs = domain.index[rows] != base
        single = differs.sum(axis=1) == 1
        np.add.at(on_line, np.argmax(differs[single], axis=1), 1)
    axis = [int(np.flatnonzero(domain.index[r] != base)[0]) for r in near]
    least = min(on_line[a] for a in axis)
    return [r for r, a in zip(near, axis) if on_line[a] == least]
