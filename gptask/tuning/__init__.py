"""The ask/tell engine: training data, proposals, the :class:`Tuner` and the ``tune`` loop.

* :mod:`.data`: finished trials -> what the model sees (the value rule, imputation, the data key)
* :mod:`.propose`: initial designs and acquisition searches per task (spread over MPI ranks)
* :mod:`.fantasy`: pending trials in the search model (kriging believer, noise-free)
* :mod:`.updates`: block appends between full fits, and when a refit is due
* :mod:`.tuner`: :class:`Tuner`, the ask/tell contract on top of a :class:`gptask.data.storage.Storage`
* :mod:`.mirror`: the tuner's copy of its history on every rank (reads, claims, tells on rank 0)
* :mod:`.loop`: :func:`tune` and ``run`` (shared with TLA2), the serial loop, evaluations on ranks, signals
* :mod:`.asynchronous`: the loop over a ``concurrent.futures`` executor, ``max_in_flight`` trials running
* :mod:`.steps`: what both loops do alike (tell once, progress lines, waiting for other processes)
* :mod:`gptask.core.progress` (outside this package, shared with confirmation runs and fits): a bar on a
  terminal, a log line per iteration otherwise
* :mod:`.settings`: the engine's constants and seeding rule
"""

from .loop import tune
from .tuner import Tuner, resolve_tasks

__all__ = ["Tuner", "tune", "resolve_tasks"]
