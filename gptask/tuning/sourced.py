"""The tuner of ``gt.tune(..., sources=...)`` (:mod:`gptask.sources`): a :class:`Tuner` whose
model holds every task of the combined problem but which proposes only for the tasks of this
machine; the sources' tasks are data it learns from.

A tuned task that the sources measured on other machines (a new machine's run of a task they all
ran) starts its initial design with the configurations best on average over them (``designs``,
:func:`gptask.consensus.consensus_order`), then the Tuner's own design; its first
:data:`CONSENSUS_FIRST` searched runs, then every :data:`CONSENSUS_EVERY`-th, choose by the
acquisition among the next :data:`CONSENSUS_WINDOW` configurations of that order it has not run
(the others search the whole space). Figures on the recorded convolution campaign (each GPU a new
machine, the other five GPUs' complete campaigns as sources): BENCHMARKS.md, issue 24."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from itertools import islice
from typing import Any

import numpy as np

from ..result import TuningResult
from ..trials import params_key
from .settings import CONSENSUS_EVERY, CONSENSUS_FIRST, CONSENSUS_WINDOW, SOURCE_SEARCH
from .tuner import Tuner

__all__ = ["SourcedTuner", "DesignTuner"]


class SourcedTuner(Tuner):
    """proposes: the indices of the tasks that take new trials; designs: per task index, the
    configurations its initial design starts with (best first); the other arguments are those of
    :class:`Tuner`."""

    def __init__(self, *args: Any, proposes: Iterable[int], designs: Mapping[int, Sequence[dict]] | None = None,
                 **kwargs: Any) -> None:
        self._proposes = frozenset(int(i) for i in proposes)
        self._orders = {int(i): list(d) for i, d in (designs or {}).items() if d}
        super().__init__(*args, **kwargs)

    def proposes_for(self, i: int) -> bool:
        return i in self._proposes

    def initial_design(self, i: int) -> list[dict]:
        """The problem's default first when it has one, then the configurations of ``designs`` for
        task ``i``, then the Tuner's design, ``n_initial`` in all (deterministic)."""
        fresh = i not in self._initial
        design = super().initial_design(i)
        order = self._orders.get(i)
        if fresh and order:
            default = self.defaults[i]
            head = ([] if default is None else [default]) + order[: self.n_initial]
            head = list({params_key(p): p for p in head}.values())[: self.n_initial]
            keys = {params_key(p) for p in head}
            self._initial[i] = design = (head + [p for p in design if params_key(p) not in keys])[: self.n_initial]
        return design

    def search_among(self, i: int) -> np.ndarray | None:
        """For a task with a consensus order, its first CONSENSUS_FIRST searched runs and every
        CONSENSUS_EVERY-th after: the next CONSENSUS_WINDOW configurations of the order it has not
        run, encoded (m, D); otherwise :meth:`Tuner.search_among`."""
        order = self._orders.get(i)
        mine = self.trials_of(i)
        searched = sum(1 for t in mine if t.source == SOURCE_SEARCH)
        if order and (searched < CONSENSUS_FIRST or searched % CONSENSUS_EVERY == 0):
            done = {params_key(t.params) for t in mine}
            window = list(islice((p for p in order if params_key(p) not in done), CONSENSUS_WINDOW))
            if window:
                return self.problem.param_space.encode(window)
        return super().search_among(i)


class DesignTuner(SourcedTuner):
    """Runs its tasks' initial designs and nothing more (no model, no search): the first phase of
    ``gt.tune(..., sources=..., select_sources=True)``, whose runs the sources are judged by. The
    arguments are those of :class:`SourcedTuner`, the budget the whole run's (stored as such); its
    history stays open when it closes (the run goes on in it)."""

    def closed_reason(self, i: int) -> str | None:
        if self.count(i) >= self.n_initial:
            return f"initial design of {self.n_initial} runs done"
        return super().closed_reason(i)

    def close(self, release: bool = True) -> None:
        if release and self.mirror.storage is not None:
            self.release()

    def result(self) -> TuningResult:
        """The design's runs, without a model (none is fitted before the sources are judged)."""
        self.refresh()
        return TuningResult(self.problem, list(self.tasks), self.records, pending=self.pending)
