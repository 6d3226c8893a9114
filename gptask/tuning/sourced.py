"""The tuner of ``gt.tune(..., sources=...)`` (:mod:`gptask.sources`): a :class:`Tuner` whose
model holds every task of the combined problem but which proposes only for the tasks of this
machine; the sources' tasks are data it learns from."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..result import TuningResult
from .tuner import Tuner

__all__ = ["SourcedTuner", "DesignTuner"]


class SourcedTuner(Tuner):
    """proposes: the indices of the tasks that take new trials; the other arguments are those of
    :class:`Tuner`."""

    def __init__(self, *args: Any, proposes: Iterable[int], **kwargs: Any) -> None:
        self._proposes = frozenset(int(i) for i in proposes)
        super().__init__(*args, **kwargs)

    def proposes_for(self, i: int) -> bool:
        return i in self._proposes


class DesignTuner(Tuner):
    """Runs its tasks' initial designs and nothing more (no model, no search): the first phase of
    ``gt.tune(..., sources=..., select_sources=True)``, whose runs the sources are judged by. The
    arguments are those of :class:`Tuner`, the budget the whole run's (stored as such); its history
    stays open when it closes (the run goes on in it)."""

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
