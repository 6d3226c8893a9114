"""Transfer to new problem instances: run-free prediction (TLA1) and quick tuning (TLA2).

* :mod:`.model`: :class:`TransferModel` (what transfer learns from) and TLA1's :class:`OptimaModel`
* :mod:`.predict`: :func:`predict`, the objective of a configuration on a tuned or new task
* :mod:`.tla1`: :func:`predict_optimum`, a configuration for a new task without running anything
* :mod:`.accuracy`: :func:`transfer_accuracy`, a leave-one-task-out report of how far to trust it
* :mod:`.tla2`: :func:`tune_new_task` and :class:`NewTaskTuner`, a new-task tuner on the ask/tell
  engine of :mod:`gptask.tuning`

Imports go one way: model <- predict <- tla1 <- accuracy, and tla2 on top of them and the tuning
engine. Model files (:mod:`gptask.transfer.model_io`) build on model and accuracy; nothing here reads or
writes files. The TLA2 names are resolved on first use, so that importing the rest (as model
files do) does not pull in the tuning engine.
"""

from .accuracy import AccuracyReport, transfer_accuracy
from .model import OptimaModel, TransferModel, as_transfer_model
from .predict import predict
from .tla1 import Prediction, predict_optimum

__all__ = ["Prediction", "OptimaModel", "TransferModel", "TransferResult", "AccuracyReport", "predict_optimum",
           "predict", "transfer_accuracy", "tune_new_task", "NewTaskTuner", "sampling_spread", "as_transfer_model"]

_TLA2 = ("TransferResult", "tune_new_task", "NewTaskTuner", "sampling_spread")


def __getattr__(name: str):
    if name in _TLA2:
        from . import tla2

        return getattr(tla2, name)
    raise AttributeError(f"module 'gptask.transfer' has no attribute {name!r}")
