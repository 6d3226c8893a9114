"""The ask/tell engine: training data, proposals, the :class:`Tuner` and the ``tune`` loop.

* :mod:`.data`: finished trials -> what the model sees (the value rule, imputation, the data key)
* :mod:`.propose`: initial designs and acquisition searches per task (spread over MPI ranks)
* :mod:`.tuner`: :class:`Tuner`, the ask/tell contract on top of a :class:`gptask.storage.Storage`
* :mod:`.loop`: :func:`tune`, stop criteria, evaluations on ranks, signals
* :mod:`.progress`: a bar on a terminal, a log line per iteration otherwise
* :mod:`.settings`: the engine's constants and seeding rule
"""

from .loop import tune
from .tuner import Tuner, resolve_tasks

__all__ = ["Tuner", "tune", "resolve_tasks"]
