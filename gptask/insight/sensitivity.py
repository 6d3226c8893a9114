"""Which parameters matter: Sobol indices of every parameter, computed on the fitted model's mean.

:func:`sensitivity` decomposes the variance of the model's posterior mean over the parameter space
into the shares of each parameter (a *dimension*: a categorical or an ordinal is one parameter,
however many encoded columns it has):

* first order ``S1``: the share of the variance explained by the parameter alone;
* total ``ST``: its share with all its interactions; a parameter with a small ``ST`` can be fixed
  at any value without changing the objective much (GPTune's Sobol analysis cut a 12-parameter
  Hypre space to 3 that way).

How: SALib (``SALib.sample.sobol``, Saltelli's scheme on a scrambled Sobol sequence, and
``SALib.analyze.sobol``, the Saltelli 2010 / Jansen estimators with bootstrap confidence
intervals) on ``[0, 1]^d``, one column per parameter. Column j is mapped to parameter j's values by
the dimension itself (:meth:`gptask.space.dimensions.Dimension.sample_columns`, then ``snap_columns``): the
input distribution is the one the search space defines, uniform on each dimension's encoded line
(log-uniform for ``log=True``), every allowed value of a discrete dimension equally likely,
parameters independent. The constraints are *not* applied (Sobol indices need independent inputs):
the model is evaluated over the whole box, and :attr:`SensitivityReport.infeasible_fraction` says
how much of that box the constraints forbid.

What is decomposed (``scale``): ``"model"`` (default), the model's mean in its own units: the
standardised log of the objective under the log output transform, so effects are relative (a
parameter that doubles the time counts the same on a small and a large task); a per-task affine
map changes no index, so these are also the indices of ``log(objective)``. ``"user"``: the
predicted median in the objective's units (seconds), where large values dominate.

Uncertainty: ``*_conf`` is the half-width of SALib's bootstrap confidence interval (level
``conf_level``) of the Monte Carlo estimate on the model's mean. The model's own uncertainty (how
well the mean fits the objective) is not in it: check the model's held-out accuracy
(:mod:`gptask.transfer.crossval`) before trusting the indices.

Over the task space: :attr:`SensitivityReport.mean` averages the tasks' indices (each task
weighted alike; a fresh scrambled sequence per task, so the per-task estimates are independent and
the half-width of the mean is ``sqrt(sum conf_i^2) / T``).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..core.checks import check_int
from ..core.labels import task_label
from ..core.seeding import int_seed
from ..space.dimensions import Space
from ..results.table import Table

__all__ = ["Indices", "SensitivityReport", "sensitivity", "encoded_sample", "check_base", "check_work",
           "DEFAULT_BASE",
           "FIXABLE_TOTAL", "MAX_EVALUATIONS", "SCALES"]

log = logging.getLogger(__name__)

#: base sample size N of Saltelli's scheme (a power of 2): N * (d + 2) model evaluations per task
DEFAULT_BASE = 1024
#: the most model evaluations (all tasks together) the command line asks for unless told otherwise
#: (--max-evaluations): the default base on 10 parameters and 160 tasks; on a 2-core node a few
#: thousand evaluations take a second
MAX_EVALUATIONS = 2_000_000
#: a parameter whose total index stays below this on every task can be fixed (the report says so)
FIXABLE_TOTAL = 0.05
#: what is decomposed (module docstring)
SCALES = ("model", "user")
#: bootstrap resamples of SALib's confidence intervals
RESAMPLES = 200
#: starts of the fit of the objective's model on the measured runs alone (:func:`objective_model`)
REFIT_RESTARTS = 3
#: model predictions per call of the LCM (bounds the memory of the cross-covariance)
CHUNK = 4096


@dataclass(frozen=True)
class Indices:
    """Sobol indices of one task (or their mean over tasks), one entry per parameter, in the
    order of ``names``: first (S1), total (ST), and the half-widths of their confidence intervals."""

    names: tuple[str, ...]
    first: np.ndarray
    first_conf: np.ndarray
    total: np.ndarray
    total_conf: np.ndarray

    def as_dict(self) -> dict[str, dict[str, float]]:
        """``{name: {"S1", "S1_conf", "ST", "ST_conf"}}`` (JSON-ready floats)."""
        return {n: {"S1": float(self.first[k]), "S1_conf": float(self.first_conf[k]),
                    "ST": float(self.total[k]), "ST_conf": float(self.total_conf[k])}
                for k, n in enumerate(self.names)}


@dataclass(frozen=True)
class SensitivityReport:
    """What :func:`sensitivity` found.

    names: the parameters; task_indices, tasks: the tasks analysed (indices into the result's
    tasks, and their dicts); per_task: their :class:`Indices`, in that order; mean: the mean over
    them; scale: "model" or "user" (module docstring); base: SALib's N; evaluations: model
    evaluations per task (``N * (d + 2)``); conf_level: of the intervals; infeasible_fraction:
    per task, the fraction of the sampled configurations that violate the constraints (None when
    the constraints are unknown, e.g. a result rebuilt from a history); left_out: finished runs
    without a usable value (failed, or beyond the value limit) left out of the model the indices
    are computed on (:func:`objective_model`); use_log: whether the model's units are the log of
    the objective (None: unknown).
    """

    names: tuple[str, ...]
    task_indices: tuple[int, ...]
    tasks: tuple[dict, ...]
    per_task: tuple[Indices, ...]
    mean: Indices
    scale: str
    base: int
    evaluations: int
    conf_level: float
    infeasible_fraction: tuple[float | None, ...]
    left_out: int = 0
    use_log: bool | None = None

    def of(self, task: int | Mapping[str, Any]) -> Indices:
        """The indices of one analysed task, by its index in the result or its dict."""
        for k, (i, t) in enumerate(zip(self.task_indices, self.tasks)):
            if (isinstance(task, Mapping) and dict(task) == dict(t)) or (not isinstance(task, Mapping) and task == i):
                return self.per_task[k]
        raise ValueError(f"task {task!r} was not analysed; analysed: {list(self.task_indices)}")

    def ranking(self) -> list[str]:
        """The parameters by decreasing mean total index."""
        return [self.names[k] for k in np.argsort(-self.mean.total, kind="stable")]

    def fixable(self, threshold: float = FIXABLE_TOTAL) -> list[str]:
        """Parameters whose total index (plus its half-width) is below ``threshold`` on every task
        analysed: fixing them at a good value costs little, and shrinks the space."""
        out = []
        for k, n in enumerate(self.names):
            if all(ix.total[k] + ix.total_conf[k] < threshold for ix in self.per_task):
                out.append(n)
        return out

    def table(self) -> Table:
        """One row per parameter: the mean S1 and ST over tasks with their half-widths, then each
        task's ST (``ST task k``), ranked by mean ST."""
        rows = []
        for n in self.ranking():
            k = self.names.index(n)
            row: dict[str, Any] = {"parameter": n, "S1": float(self.mean.first[k]),
                                   "S1 +-": float(self.mean.first_conf[k]), "ST": float(self.mean.total[k]),
                                   "ST +-": float(self.mean.total_conf[k])}
            if len(self.per_task) > 1:
                for i, ix in zip(self.task_indices, self.per_task):
                    row[f"ST task {i}"] = float(ix.total[k])
            rows.append(row)
        return Table(rows)

    def describe(self) -> str:
        """Two lines for people: what was decomposed, then the tasks."""
        if self.scale == "user":
            what = "the model's predicted median in the objective's units"
        elif self.use_log is None:
            what = "the model's mean in model units"
        else:
            what = ("the model's mean in model units (the standardised log of the objective)" if self.use_log else
                    "the model's mean in model units (the standardised objective; no log transform)")
        if self.left_out:
            what += (f", conditioned on the measured runs only ({self.left_out} failed or unusable run(s) left "
                     "out: the search's model sees them as the task's worst value, the objective does not)")
        tasks = "; ".join(f"{i}: {task_label(t)}" for i, t in zip(self.task_indices, self.tasks))
        return (f"Sobol indices of {what}; N = {self.base} ({self.evaluations} model evaluations per task), "
                f"{round(100 * self.conf_level)} % bootstrap intervals; mean over {len(self.tasks)} task(s)\n"
                f"tasks: {tasks}")

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready summary: settings, the mean and each task's indices per parameter."""
        return {"scale": self.scale, "base": self.base, "evaluations": self.evaluations,
                "conf_level": self.conf_level, "parameters": list(self.names), "mean": self.mean.as_dict(),
                "tasks": [{"task_index": i, "task": dict(t), "indices": ix.as_dict(), "infeasible_fraction": f}
                          for i, t, ix, f in zip(self.task_indices, self.tasks, self.per_task,
                                                 self.infeasible_fraction)],
                "left_out": self.left_out, "use_log": self.use_log, "fixable": self.fixable()}


def encoded_sample(space: Space, unit: np.ndarray) -> np.ndarray:
    """Encoded configurations (n, space.n_columns) of ``unit`` (n, len(space)) draws in [0, 1],
    column j for dimension j, each mapped by its dimension (module docstring) and snapped to a
    valid value (integers rounded, one value of a list)."""
    unit = np.asarray(unit, dtype=float)
    if unit.ndim != 2 or unit.shape[1] != len(space):
        raise ValueError(f"expected draws of shape (n, {len(space)}), got {unit.shape}")
    out = np.empty((len(unit), space.n_columns))
    for j, (d, sl) in enumerate(zip(space.dimensions, space.column_slices())):
        out[:, sl] = d.snap_columns(d.sample_columns(unit[:, j]))
    return out


def _parts(source: Any) -> tuple[Any, Any, Space, list[dict], Any]:
    """(LCM, output transform, parameter space, tasks, problem or None) of a result or a model."""
    model = getattr(source, "model", None)
    transform = getattr(source, "transform", None)
    problem = getattr(source, "problem", None)
    space = getattr(source, "param_space", None) or getattr(problem, "param_space", None)
    tasks = getattr(source, "tasks", None)
    if space is None or tasks is None:
        raise TypeError(f"sensitivity needs a gptask.TuningResult or a model from gt.load_model, "
                        f"got {type(source).__name__}")
    if model is None or transform is None:
        raise ValueError("sensitivity needs a fitted model: this result has none yet (no fit was made; a "
                         "history needs its first model fit after the initial designs)")
    return model, transform, space, [dict(t) for t in tasks], problem


def objective_model(source: Any, model: Any, transform: Any, seed: int = 0) -> tuple[Any, int]:
    """(the model of the objective alone, the number of runs left out): an LCM like ``model``
    fitted on the usable measurements of ``source``'s history only, under ``transform``
    (``REFIT_RESTARTS`` starts, one of them from ``model``'s hyperparameters).

    The tuner's model also holds the failed runs (and values beyond the limit) it was shown as
    their task's worst value (:mod:`gptask.model.surrogate.data`): a guide for the search, not values
    of the objective. Decomposed, those imputed walls take the variance (on a campaign where a
    third of the runs failed, a parameter the objective ignores got a total index of 0.79). Merely
    re-conditioning the model without them is not enough: its hyperparameters were fitted to the
    wall (a short length scale across it), so over the failed region, where nothing was measured,
    its mean still swings (0.34 for that parameter); a fit on the measurements alone gives 0.
    A source without a history (a model file) is returned as it is, with 0: its imputed points
    cannot be told apart."""
    from ..model.numerics import LCM
    from ..model.numerics.priors import LCMPrior
    from ..model.surrogate.data import usable
    from ..model.surrogate.group import project

    history = getattr(source, "history", None)
    problem = getattr(source, "problem", None)
    if not history or problem is None:
        return model, 0
    spec = getattr(problem, "outputs", None)
    name = None if spec is None else spec.modelled[0]
    seen = [t for t in project(history, name, 1.0 if name is None else spec.sign(name)) if t.status.finished]
    left_out = sum(not usable(t) for t in seen)
    if not left_out:
        return model, 0
    space = problem.param_space
    X, y = [], []
    for i in range(model.n_tasks):
        mine = [t for t in seen if t.task_index == i and usable(t)]
        X.append(space.encode([t.params for t in mine]) if mine else np.empty((0, space.n_columns)))
        y.append(np.asarray(transform.forward(i, np.array([float(t.value) for t in mine])), dtype=float)
                 if mine else np.empty(0))
    if sum(len(v) for v in y) == 0:
        return model, 0
    fresh = LCM(n_latent=model.n_latent, kernel=model.kernel, rank=model.rank, levels=model.levels)
    fitted = fresh.fit(X, y, restarts=REFIT_RESTARTS, seed=int_seed(seed, 2), init=model.get_params(),
                       prior=LCMPrior(dimension=float(len(space))))
    log.info("sensitivity: the objective's model refitted on %d measured runs (%d failed or unusable left out)",
             sum(len(v) for v in y), left_out)
    return fitted, left_out


def _task_indices(task: Any, tasks: list[dict], model: Any) -> list[int]:
    fitted = [i for i in range(len(tasks)) if model.n_points[i] > 0]
    if task is None:
        if not fitted:
            raise ValueError("sensitivity: no task has data in the model")
        return fitted
    if isinstance(task, Mapping):
        for i, t in enumerate(tasks):
            if dict(task) == t:
                task = i
                break
        else:
            raise ValueError(f"sensitivity: task {dict(task)} is not one of the model's tasks "
                             f"({'; '.join(task_label(t) for t in tasks)})")
    if isinstance(task, bool) or not isinstance(task, (int, np.integer)) or not 0 <= task < len(tasks):
        raise ValueError(f"sensitivity: task must be None, a task dict or an index in 0..{len(tasks) - 1}, "
                         f"got {task!r}")
    if int(task) not in fitted:
        raise ValueError(f"sensitivity: task {int(task)} ({task_label(tasks[int(task)])}) has no data in the model")
    return [int(task)]


def _mean_of(model: Any, transform: Any, i: int, X: np.ndarray, scale: str) -> np.ndarray:
    z = np.concatenate([model.predict(i, X[a:a + CHUNK])[0] for a in range(0, len(X), CHUNK)])
    return z if scale == "model" else np.asarray(transform.backward(i, z), dtype=float)


def _infeasible(problem: Any, task: dict, space: Space, X: np.ndarray) -> float | None:
    judge = getattr(problem, "is_feasible", None)
    if problem is None or not getattr(problem, "constraints", None) or judge is None:
        return None
    try:
        configs = space.decode(X[:: max(1, len(X) // 2048)])  # a subsample is enough for a fraction
        ok = [bool(judge(task, c)) for c in configs]
    except Exception:  # noqa: BLE001 - a result rebuilt without its objective may not judge; say unknown
        return None
    return 1.0 - float(np.mean(ok))


def check_base(base: int) -> int:
    """``base`` if it is a base sample size SALib takes (a power of 2 >= 16), else ValueError."""
    base = check_int("base", base, 16)
    if base & (base - 1):
        raise ValueError(f"sensitivity: base must be a power of 2 (Sobol sequences), got {base}")
    return base


def check_work(result: Any, task: int | Mapping[str, Any] | None = None, *, base: int = DEFAULT_BASE,
               max_evaluations: int = MAX_EVALUATIONS) -> int:
    """The model evaluations ``sensitivity(result, task, base=base)`` makes: ``base * (d + 2)`` per
    analysed task, d the number of parameters. Raises ValueError, before any work, for a base that
    is not a power of 2 >= 16, an unknown task, or more than ``max_evaluations`` evaluations (the
    message gives the count, the sample's memory and how to ask for more: ``--max-evaluations``)."""
    base = check_base(base)
    max_evaluations = check_int("max_evaluations", max_evaluations, 1)
    model, _, space, tasks, _ = _parts(result)
    chosen = _task_indices(task, tasks, model)
    per_task = base * (len(space) + 2)
    total = per_task * len(chosen)
    if total > max_evaluations:
        gb = per_task * len(space) * 8 / 1e9
        raise ValueError(f"--base {base} asks for {total:,} model evaluations ({base} x ({len(space)} parameters + 2) "
                         f"x {len(chosen)} task(s); each task's sample takes {gb:.2g} GB), more than the limit of "
                         f"{max_evaluations:,}: give a smaller --base (the default {DEFAULT_BASE} makes "
                         f"{DEFAULT_BASE * (len(space) + 2) * len(chosen):,}) or pass --max-evaluations {total} to "
                         "run it anyway")
    return total


def sensitivity(result: Any, task: int | Mapping[str, Any] | None = None, *, base: int = DEFAULT_BASE,
                scale: str = "model", seed: int = 0, conf_level: float = 0.95) -> SensitivityReport:
    """First-order and total Sobol indices of every parameter on the fitted model's mean.

    result: a :class:`gptask.TuningResult` (from ``gt.tune``, ``gt.fit`` or a history) or a model
    from :func:`gptask.load_model`. task: None, every task with data (and their mean; of a run with
    fidelity, its tuned tasks at the target only, as its recommendations); an index or a task dict,
    that task alone. base: SALib's N, a power of 2 (``base * (d + 2)`` model evaluations
    per task, d the number of parameters). scale: "model" or "user" (module docstring). seed: of
    the scrambled sequences and the bootstrap. conf_level: of the confidence intervals.
    Returns a :class:`SensitivityReport`. Raises ValueError for a result without a model, an unknown
    task, a base that is not a power of 2 >= 16, or a space of one parameter.
    """
    from SALib.analyze import sobol as sobol_analyze
    from SALib.sample import sobol as sobol_sample

    model, transform, space, tasks, problem = _parts(result)
    model, left_out = objective_model(result, model, transform, seed)
    base = check_int("base", base, 16)
    if base & (base - 1):
        raise ValueError(f"sensitivity: base must be a power of 2 (Sobol sequences), got {base}")
    if scale not in SCALES:
        raise ValueError(f"sensitivity: scale must be one of {SCALES}, got {scale!r}")
    if not 0.0 < conf_level < 1.0:
        raise ValueError(f"sensitivity: conf_level must lie in (0, 1), got {conf_level!r}")
    if len(space) < 2:
        raise ValueError(f"sensitivity: a space of one parameter ({space.names[0]}) has nothing to apportion")
    chosen = _task_indices(task, tasks, model)
    if task is None and getattr(result, "fidelity", None) is not None:  # the tuned tasks at the target only
        chosen = [i for i in chosen if not result.is_low_fidelity(i)] or chosen
    names = tuple(space.names)
    salib = {"num_vars": len(names), "names": list(names), "bounds": [[0.0, 1.0]] * len(names)}
    per_task, infeasible = [], []
    for i in chosen:
        unit = sobol_sample.sample(salib, base, calc_second_order=False, scramble=True, seed=int_seed(seed, i))
        X = encoded_sample(space, unit)
        y = _mean_of(model, transform, i, X, scale)
        if not np.all(np.isfinite(y)):
            raise ValueError(f"sensitivity: the model's mean is not finite on task {i} ({task_label(tasks[i])})")
        if float(np.var(y)) <= 1e-300:
            zeros = np.zeros(len(names))
            per_task.append(Indices(names, zeros, zeros, zeros, zeros))
            log.warning("sensitivity: the model's mean is constant on task %d: every index is 0", i)
        else:
            s = sobol_analyze.analyze(salib, y, calc_second_order=False, num_resamples=RESAMPLES,
                                      conf_level=conf_level, seed=int_seed(seed, i, 1))
            per_task.append(Indices(names, np.asarray(s["S1"], float), np.asarray(s["S1_conf"], float),
                                    np.asarray(s["ST"], float), np.asarray(s["ST_conf"], float)))
        infeasible.append(_infeasible(problem, tasks[i], space, X))
        log.info("sensitivity: task %d (%s) done (%d model evaluations)", i, task_label(tasks[i]), len(X))
    T = len(per_task)
    mean = Indices(names, np.mean([p.first for p in per_task], axis=0),
                   np.sqrt(np.sum([p.first_conf ** 2 for p in per_task], axis=0)) / T,
                   np.mean([p.total for p in per_task], axis=0),
                   np.sqrt(np.sum([p.total_conf ** 2 for p in per_task], axis=0)) / T)
    return SensitivityReport(names, tuple(chosen), tuple(tasks[i] for i in chosen), tuple(per_task), mean, scale,
                             base, base * (len(names) + 2), float(conf_level), tuple(infeasible), left_out,
                             getattr(transform, "use_log", None))
