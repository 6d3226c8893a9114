"""Which sources help this machine: selection by the held-out fit of its own runs (issue 24).

``gt.tune(..., sources=..., select_sources=True)`` and ``gt.predict_optimum(..., sources=...,
select_sources=True)`` judge each source (each item of ``sources``) by cross-validation on the
runs already made on this machine, as Ax selects source experiments, and leave out those that make
the model worse at predicting them:

1. The model (the same LCM, prior and settings as the tuner's) is fitted on this machine's runs and
   the kept sources' measurements, and scored by the leave-one-out log predictive density of this
   machine's measured runs (the sum over them, in nats; hyperparameters fitted on all the data of
   that fit, each run predicted from the others, :meth:`gptask.model.numerics.LCM.loo`). The values are
   compared in model units: each task's output transform depends on its own values only, so this
   machine's runs are scored on the same scale whichever sources a fit holds.
2. Backward elimination: each kept source in turn is left out and the model refitted; the source
   whose absence raises the score most is dropped when the rise exceeds :data:`SELECT_MARGIN`
   (a likelihood ratio of about 7); then again with the remaining sources, until no absence helps.
   A source measured on this machine itself is this machine's data and never a candidate.
3. With fewer than :data:`SELECT_MIN_RUNS` measured runs on this machine there is nothing to judge
   by: every source is kept, and the report says so.

The fits are (1 + k) per round for k kept sources: with S sources at most S (S + 1) / 2 + 1 fits,
each on the (summarised) sources' data. The :class:`SourceSelection` report lists, per source, the
scores with and without it at the round that decided it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np

from ..model.numerics import LCM
from ..model.numerics.defaults import SURROGATE_KERNEL
from ..model.numerics.priors import LCMPrior
from ..space.dimensions import Space
from ..model.surrogate.data import log_possible, training_data, usable
from ..data.trials import Trial, point_key

__all__ = ["SELECT_MARGIN", "SELECT_MIN_RUNS", "SourceScore", "SourceSelection", "select_sources", "heldout_score"]

#: a source is dropped when leaving it out raises this machine's held-out log density by more (nats)
SELECT_MARGIN = 2.0
#: measured runs this machine needs before sources are judged (fewer: every source is kept)
SELECT_MIN_RUNS = 4


@dataclass(frozen=True)
class SourceScore:
    """One source's verdict. source: its index in ``sources``; name: how it was given; machine: its
    machine label(s); measurements: how many of its measurements the model takes; with_it, without:
    the held-out log density (nats, summed over this machine's measured runs) of the fits with and
    without it at the round that decided it; kept: the verdict."""

    source: int
    name: str
    machine: str
    measurements: int
    with_it: float
    without: float
    kept: bool

    @property
    def gain(self) -> float:
        """How much the source adds to the held-out log density (nats; negative: it hurts)."""
        return self.with_it - self.without


@dataclass(frozen=True)
class SourceSelection:
    """The outcome of :func:`select_sources`: ``kept`` and ``dropped`` source indices, one
    :class:`SourceScore` per judged source (in source order), ``target_runs``: this machine's
    measured runs it was judged on, and ``note``: why nothing was judged (empty when it was)."""

    kept: list[int]
    dropped: list[int]
    scores: list[SourceScore]
    target_runs: int
    note: str = ""
    #: what the runs judged by are: "runs" (every run of this machine) or "target runs" (a run with
    #: fidelity or auxiliary tasks: those of the tuned tasks at the target fidelity)
    what: str = "runs"

    def to_json(self) -> dict[str, Any]:
        return {"kept": list(self.kept), "dropped": list(self.dropped), "scores": [asdict(s) for s in self.scores],
                "target_runs": self.target_runs, "note": self.note, "what": self.what}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "SourceSelection":
        return cls([int(k) for k in data["kept"]], [int(k) for k in data["dropped"]],
                   [SourceScore(**s) for s in data["scores"]], int(data["target_runs"]), str(data.get("note", "")),
                   str(data.get("what", "runs")))

    def lines(self) -> list[str]:
        """One line per source (or the note), as the log and ``gptask show`` print them."""
        if self.note:
            return [self.note]
        return [f"source #{s.source}{s.name} ({s.machine}, {s.measurements} measurements): "
                f"{'kept' if s.kept else 'dropped'}, held-out log density of this machine's {self.target_runs} "
                f"{self.what} {s.with_it:.2f} with it, {s.without:.2f} without" for s in self.scores]


def _renumbered(trials: Sequence[Trial], first: Sequence[Mapping[str, Any]]) -> tuple[list[Trial], int]:
    """``trials`` with task indices 0.. in order of first appearance, the tasks ``first`` leading;
    and the number of tasks."""
    index = {point_key(t): k for k, t in enumerate(first)}
    out = []
    for t in trials:
        key = point_key(t.task)
        if key not in index:
            index[key] = len(index)
        out.append(replace(t, task_index=index[key]))
    return out, len(index)


def heldout_score(space: Space, target: Sequence[Trial], others: Sequence[Trial], target_tasks: Sequence[Mapping],
                  use_log: bool, n_latent: int = 1, kernel: str = SURROGATE_KERNEL, restarts: int = 3,
                  seed: int = 0, n_scored: int | None = None) -> float:
    """The leave-one-out log predictive density (nats, summed) of ``target``'s measured trials, by
    an LCM fitted on ``target`` and ``others`` (finished trials; tasks told apart by their task
    dicts, ``target_tasks`` first) with the tuner's prior: step 1 of the module docstring.
    n_scored: only the trials of the first this many of ``target_tasks`` are scored (None: all; the
    others are fitted on, as ``others`` are)."""
    trials, n_tasks = _renumbered([*target, *others], target_tasks)
    data = training_data(trials, n_tasks, space, use_log)
    model = LCM(n_latent=n_latent, kernel=kernel).fit(data.X, data.y, restarts=restarts, seed=seed,
                                                      prior=LCMPrior(dimension=float(len(space))))
    ys, means, variances = model.loo()
    total = 0.0
    for i in range(len(target_tasks) if n_scored is None else n_scored):
        ok = data.measured[i]
        y, m, v = ys[i][ok], means[i][ok], variances[i][ok]
        total += float(np.sum(-0.5 * np.log(2.0 * np.pi * v) - 0.5 * (y - m) ** 2 / v))
    return total


def select_sources(space: Space, target: Sequence[Trial], sources: Mapping[int, Sequence[Trial]],
                   names: Mapping[int, str], machines: Mapping[int, str], *, output_transform: str = "auto",
                   n_latent: int = 1, kernel: str = SURROGATE_KERNEL, restarts: int = 3,
                   seed: int = 0, scored: Sequence[Mapping[str, Any]] | None = None) -> SourceSelection:
    """Backward elimination of ``sources`` (source index -> its finished trials) by the held-out fit
    of this machine's finished ``target`` trials (module docstring). names, machines: per source,
    how it was given and its machine label(s), for the report. output_transform: the tuner's
    ("auto": log when every usable value is positive, the tuner's rule). scored: the task dicts whose
    runs are scored (a run with fidelity or auxiliary tasks: the tuned tasks at the target fidelity;
    this machine's other runs are fitted on, not scored); None: every task of ``target``. The
    callers log :meth:`SourceSelection.lines`."""
    target = [t for t in target if t.status.finished]
    everything = [*target, *(t for ts in sources.values() for t in ts)]
    keys = None if scored is None else {point_key(dict(t)) for t in scored}
    n_target = int(sum(t.ok for t in target if keys is None or point_key(t.task) in keys))
    what = "runs" if scored is None else "target runs"
    if not sources:
        return SourceSelection([], [], [], n_target, "no source to judge", what)
    if n_target < SELECT_MIN_RUNS:
        note = (f"sources not judged: {n_target} measured {what} on this machine, {SELECT_MIN_RUNS} needed; "
                f"every source kept")
        return SourceSelection(sorted(sources), [], [], n_target, note, what)
    tasks = list({point_key(t.task): t.task for t in target}.values())
    if keys is not None:  # the scored tasks first
        tasks = [t for t in tasks if point_key(t) in keys] + [t for t in tasks if point_key(t) not in keys]
    n_scored = None if keys is None else sum(point_key(t) in keys for t in tasks)
    values = np.array([t.value for t in everything if usable(t)], dtype=float)
    use_log = {"log": True, "none": False}.get(output_transform, log_possible([values]))

    def score(kept: Sequence[int]) -> float:
        others = [t for k in kept for t in sources[k]]
        return heldout_score(space, target, others, tasks, use_log, n_latent, kernel, restarts, seed, n_scored)

    kept = sorted(sources)
    current = score(kept)
    verdict: dict[int, tuple[float, float, bool]] = {}
    while kept:
        without = {k: score([j for j in kept if j != k]) for k in kept}
        worst = max(kept, key=lambda k: (without[k], -k))
        for k in kept:
            verdict[k] = (current, without[k], True)
        if without[worst] - current <= SELECT_MARGIN:
            break
        verdict[worst] = (current, without[worst], False)
        kept.remove(worst)
        current = without[worst]
    scores = [SourceScore(k, names.get(k, ""), machines.get(k, ""), len(sources[k]), *verdict[k])
              for k in sorted(sources)]
    dropped = sorted(k for k in sources if k not in kept)
    return SourceSelection(kept, dropped, scores, n_target, what=what)
