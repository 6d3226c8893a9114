"""``gt.fit``: a tuning result, with its fitted model, from existing measurements; nothing is run.

The measurements are imported into a history in memory (:func:`~gptask.sources.importing.store.import_runs`)
and the tuning engine fits its model on them exactly as it would on its own trials (the same
training data rule, output transform choice and LCM fit: :class:`gptask.tuning.Tuner`). The result
is an ordinary :class:`~gptask.results.result.TuningResult`: ``predict_optimum``, ``predict``,
``transfer_accuracy``, ``tune_new_task`` and ``save_model`` take it as they take a tuning run's.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ...model.numerics.defaults import SURROGATE_KERNEL
from ...core.progress import Progress
from ...problem.definition import Problem
from ...results.result import TuningResult
from ...data.storage import open_storage
from ...data.trials import Status
from ...tuning import Tuner
from ..rows import check_problem
from .store import import_runs

__all__ = ["fit", "from_model"]

log = logging.getLogger(__name__)


def fit(problem: Problem, data: str | os.PathLike | Sequence[Mapping[str, Any]], value: str = "value", *,
        status: str | None = None, aggregate: str = "min", skip_invalid: bool = False, n_latent: int | None = None,
        kernel: str = SURROGATE_KERNEL, output_transform: str = "auto", restarts: int = 3,
        seed: int = 0, progress: bool = True, machine: Any = None, mix_machines: bool = False) -> TuningResult:
    """Fit the tuner's model to existing measurements; returns a :class:`TuningResult`.

    data: a CSV file path or a list of dicts, one row per measurement, with a column per task and
    parameter name and the ``value`` column (rules: :mod:`gptask.sources.rows`; bad rows raise a
    :class:`~gptask.sources.rows.DataError` naming each line). status: a column holding
    complete/failed/censored (None: all complete). aggregate: the value of repeated rows of one
    configuration ("min", as ``gt.tune`` does with repeats; "median"; "mean"); every row stays in
    the trial's ``samples``. n_latent, kernel, output_transform, restarts, seed: the model, as in
    :func:`gptask.tune` (restarts: starts of the cold fit). The tasks are those of the data, in order
    of first appearance; ``result.history`` holds one trial per configuration, source "imported".
    machine, mix_machines: the machine of rows without ``machine.*`` columns and whether rows of
    several machines may be fitted together (refused otherwise), as in :func:`import_runs`.
    progress: a line (``gptask.core.progress``) when the data is read and when the fit starts and ends
    (the fit takes seconds to a minute: 8 s for the 558 runs of 8 tasks of the shipped 16-core data).
    """
    t0 = time.perf_counter()
    storage = open_storage(None, check_problem(problem).signature())
    reporter = Progress(progress, 2, 0, desc="fit")
    try:
        try:
            report = import_runs(problem, data, storage, value=value, status=status, aggregate=aggregate,
                                 skip_invalid=skip_invalid, machine=machine, mix_machines=mix_machines)
            budget = max(sum(t.task_index == i for t in report.trials) for i in range(len(report.tasks)))
        except BaseException:
            storage.close()
            raise
        reporter.step(f"fit: {report.summary()}; fitting the model on them ({restarts} start(s)"
                      + (", the output transform probed both ways" if output_transform == "auto" else "") + ")")
        with Tuner(problem, report.tasks, budget=max(1, budget), seed=seed, history=storage, n_latent=n_latent,
                   kernel=kernel, restarts=restarts, output_transform=output_transform, provenance=None) as tuner:
            result = tuner.result()
        reporter.step(f"fit: model fitted in {time.perf_counter() - t0:.1f} s")
    finally:
        reporter.close()
    if result.model is None:
        raise ValueError("no model could be fitted to the imported data (see the log)")
    log.info("fit: %s; model fitted in %.1f s (%s transform)", report.summary(), time.perf_counter() - t0,
             "log" if result.transform.use_log else "no")
    return result


def from_model(model: Any, data: str | os.PathLike | Sequence[Mapping[str, Any]], value: str = "value", *,
               status: str | None = None, aggregate: str = "min") -> TuningResult:
    """A :class:`TuningResult` of a saved model and the measurements it was fitted on, without a
    refit: for held-out checks of a shipped model (:mod:`gptask.transfer.crossval`) and its tables.

    model: loaded with ``gt.load_model(path, problem=...)``; data, value, status, aggregate: the
    same as its ``gt.fit``. Raises ValueError when the data is not what the model holds (other
    tasks, configurations, order or values), TypeError for a model loaded without its problem.
    """
    problem = getattr(model, "problem", None)
    if problem is None:
        raise TypeError("from_model needs a model loaded with gt.load_model(path, problem=...)")
    report = import_runs(problem, data, None, value=value, status=status, aggregate=aggregate)
    if [dict(t) for t in model.tasks] != report.tasks:
        raise ValueError(f"the data's tasks {report.tasks} are not the model's {model.tasks}")
    Xs, ys = model.model.data()
    for i in range(len(report.tasks)):
        mine = [t for t in report.trials if t.task_index == i]
        ok = np.array([t.status is not Status.FAILED for t in mine], dtype=bool)
        X = problem.param_space.encode([t.params for t in mine]) if mine else np.empty((0, Xs[i].shape[1]))
        z = model.transform.forward(i, np.array([t.value for t in mine if t.status is not Status.FAILED]))
        if X.shape != Xs[i].shape or not np.allclose(X, Xs[i]) or not np.allclose(ys[i][ok], z):
            raise ValueError(f"task {i} ({report.tasks[i]}): the data's configurations or values are not those "
                             "the model was fitted on")
    return TuningResult(problem, report.tasks, report.trials, model.model, model.transform)
