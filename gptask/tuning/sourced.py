"""The tuner of ``gt.tune(..., sources=...)`` (:mod:`gptask.sources`): a :class:`Tuner` whose
model holds every task of the combined problem but which proposes only for the tasks of this
machine; the sources' tasks are data it learns from."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .tuner import Tuner

__all__ = ["SourcedTuner"]


class SourcedTuner(Tuner):
    """proposes: the indices of the tasks that take new trials; the other arguments are those of
    :class:`Tuner`."""

    def __init__(self, *args: Any, proposes: Iterable[int], **kwargs: Any) -> None:
        self._proposes = frozenset(int(i) for i in proposes)
        super().__init__(*args, **kwargs)

    def proposes_for(self, i: int) -> bool:
        return i in self._proposes
