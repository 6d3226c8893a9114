"""The proposer of ``gt.tune(..., sources=...)`` (:mod:`gptask.sources.multisource`): a :class:`Tuner` with a
:class:`ConsensusProposer` has a model holding every task of the combined problem but proposes only
for the tasks of this machine; the sources' tasks are data it learns from.

A tuned task that the sources measured on other machines (a new machine's run of a task they all
ran) starts its initial design with the configurations best on average over them (``designs``,
:func:`gptask.results.consensus.consensus_order`), then the Tuner's own design; its first
:data:`CONSENSUS_FIRST` searched runs, then every :data:`CONSENSUS_EVERY`-th, choose by the
acquisition among the next :data:`CONSENSUS_WINDOW` configurations of that order it has not run
(the others search the whole space). Figures on the recorded convolution campaign (each GPU a new
machine, the other five GPUs' complete campaigns as sources): BENCHMARKS.md, issue 24."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from ..results.result import TuningResult
from .proposer import Proposer, consensus_window, designs_first, register_proposer
from .tuner import Tuner

__all__ = ["ConsensusProposer", "DesignTuner"]


class ConsensusProposer(Proposer):
    """proposes: the indices of the tasks that take new trials; designs: per task index, the
    configurations its initial design starts with (best first)."""

    name = "consensus"

    def __init__(self, proposes: Iterable[int], designs: Mapping[int, Sequence[dict]] | None = None) -> None:
        super().__init__(local_probe_after=None)  # no local probe: not measured with the sources' consensus window
        self._proposes = frozenset(int(i) for i in proposes)
        self._orders = {int(i): list(d) for i, d in (designs or {}).items() if d}

    def proposes_for(self, i: int) -> bool:
        return i in self._proposes

    def initial_design(self, i: int) -> list[dict]:
        """The problem's default first when it has one, then the configurations of ``designs`` for
        task ``i``, then the default proposer's design, ``n_initial`` in all (deterministic)."""
        design = super().initial_design(i)
        order = self._orders.get(i)
        if not order:
            return design
        return designs_first(order, design, self.tuner.defaults[i], self.tuner.n_initial)

    def search_among(self, i: int) -> np.ndarray | None:
        """For a task with a consensus order, its first CONSENSUS_FIRST searched runs and every
        CONSENSUS_EVERY-th after: the next CONSENSUS_WINDOW configurations of the order it has not
        run, encoded (m, D); otherwise the default proposer's (cross-task picks)."""
        window = consensus_window(self.tuner, i, self._orders.get(i))
        return window if window is not None else super().search_among(i)


register_proposer(ConsensusProposer.name, ConsensusProposer)


class DesignTuner(Tuner):
    """Runs its tasks' initial designs and nothing more (no model, no search): the first phase of
    ``gt.tune(..., sources=..., select_sources=True)``, whose runs the sources are judged by. The
    arguments are those of :class:`Tuner` (its proposer a :class:`ConsensusProposer`), the budget
    the whole run's (stored as such); its history stays open when it closes (the run goes on in it).
    With a proposer that says which tasks are still in their design (``in_design(i)``: the
    :class:`~gptask.tuning.fidelity.FidelityProposer` of a run with fidelity or auxiliary tasks, whose
    designs differ in size by level and wait for one another), a task closes once its design is
    claimed."""
    def closed_reason(self, i: int) -> str | None:
        in_design = getattr(self.proposer, "in_design", None)
        if callable(in_design):
            if not in_design(i):
                return f"initial design of {len(self.initial_design(i))} runs done"
        elif self.count(i) >= self.n_initial:
            return f"initial design of {self.n_initial} runs done"
        return super().closed_reason(i)

    def close(self, release: bool = True) -> None:
        if release and self.mirror.storage is not None:
            self.release()

    def result(self, lazy_model: bool = False) -> TuningResult:
        """The design's runs, without a model (none is fitted before the sources are judged;
        ``lazy_model`` is :meth:`Tuner.result`'s and changes nothing here)."""
        self.refresh()
        return TuningResult(self.problem, list(self.tasks), self.records, pending=self.pending)
