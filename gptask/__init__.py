"""gptask: multitask and transfer-learning Gaussian-process autotuning for HPC applications.

Public API (see shared design): spaces (``Real``, ``Integer``, ``Categorical``, ``Ordinal``,
``Boolean``, ``Space``),
``Problem``, ``tune`` (MLA, batch tuning of a task set), ``Tuner`` (ask/tell), ``Trial`` and
``Status`` (what ask returns and the history holds), ``Evaluator``;
transfer to new tasks: ``predict_optimum`` (TLA1), ``predict``, ``transfer_accuracy``,
``tune_new_task`` (TLA2), ``load_model`` (model files written by ``result.save_model``);
insight: ``sensitivity`` (Sobol indices of every parameter on the model's mean);
existing measurements: ``fit`` (a result and its model from a CSV file or a list of dicts, no run),
``import_runs`` (into a history that ``tune`` then continues); other machines' measurements:
``tune(..., sources=[...])`` (:mod:`gptask.api.campaign`), ``predict_optimum(..., sources=[...])``, ``Source``
(:mod:`gptask.sources.multisource`).
"""

from .evaluation.evaluate import EvaluationFailed, Evaluator, Outcome
from .problem.definition import Problem
from .results.result import TuningResult
from .space.dimensions import Boolean, Categorical, Integer, Ordinal, Real, Space
from .data.trials import Proposal, Status, Trial

from . import _moved  # old module paths (issue 41): one release with a DeprecationWarning

_moved.install()

__version__ = "0.1.0"

__all__ = ["Problem", "Space", "Real", "Integer", "Categorical", "Ordinal", "Boolean", "tune", "Tuner", "Proposal", "Trial", "Status",
           "TuningResult", "Evaluator", "Outcome", "EvaluationFailed", "predict_optimum", "predict",
           "tune_new_task", "transfer_accuracy", "Prediction", "load_model", "fit", "import_runs", "TuningAborted", "Source",
           "sensitivity"]


def __getattr__(name: str):
    # the tuner pulls in the model layer (scipy, pyswarms); import it on first use
    if name == "tune":
        from .api.campaign import tune

        return tune
    if name in ("predict_optimum", "Source"):  # with sources= (gptask.sources.multisource), else the plain ones
        from .sources import multisource as sources

        return getattr(sources, name)
    if name == "Tuner":
        from . import tuning

        return getattr(tuning, name)
    if name in ("predict", "transfer_accuracy", "Prediction"):
        from . import transfer

        return getattr(transfer, name)
    if name in ("fit", "import_runs"):
        from .sources import importing

        return getattr(importing, name)
    if name == "TuningAborted":
        from .evaluation.failed_runs import TuningAborted

        return TuningAborted
    if name == "tune_new_task":
        from .transfer import tla2

        return tla2.tune_new_task
    if name == "sensitivity":
        from .insight import sensitivity

        return sensitivity
    if name == "load_model":
        from .transfer import model_io

        return model_io.load_model
    if f"gptask.{name}" in _moved.MOVED:  # an old module reached as an attribute (gt.importing): warns, one release
        import importlib

        return importlib.import_module(f"gptask.{name}")
    raise AttributeError(f"module 'gptask' has no attribute {name!r}")
