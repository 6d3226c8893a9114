"""Every output a tuner models, and the failure model, behind one interface the proposal step asks.

:class:`OutputModels` holds one :class:`~gptask.model.surrogate.Surrogate` per modelled output of the
problem (its objectives, then the outputs that only a limit names; :mod:`gptask.problem.objectives`),
each the same LCM over the tasks, plus the failure model (:mod:`.failure`). The tuner asks it
for three things: :meth:`OutputModels.update` (every model brought up to date with the finished
trials), :meth:`OutputModels.search_view` (each model with the pending trials as fantasies) and
:meth:`OutputModels.acquisition` (what a task's search maximises).

**One number, no failures: nothing changes.** For a classic problem whose runs never failed,
update and search view are those of the single surrogate, and the acquisition is None (the
search's own log-EI): the same proposals as without this layer, for the same seed.

**What each output's model sees** (:func:`project`): a trial whose value is the output's value
times its sign (+1 minimised, -1 maximised: a model always minimises), so the surrogate's rules
(:mod:`.data`) apply unchanged; a finished trial without that output is a failed one for it.
A failed trial that the failure model explains is left out of every output's data (the rule of
:mod:`.failure`), unless its task would be left without any trial.

**Output transform.** With several objectives, ``output_transform="auto"`` models every output
without the log (:func:`transform_for`): the hypervolume is taken in each task's standardised units,
which keep the proportions of the values a user's hypervolume compares; under the log the end of
the front where an objective nears 0 dominates the improvement (``log`` of ZDT1's ``f2 = 1 -
sqrt(f1)`` goes to ``-inf`` at ``f1 = 1``). Measured on the moved ZDT1 family of
bench/objectives.py (4 tasks, 40 runs each, seeds 0 and 1): hypervolume ratio 0.962 and 0.960
without the log, 0.922 with it (seed 0). One objective keeps "auto" (log of positive values, decided
by likelihood).

**Acquisitions** (per task ``i``, in each output's model units; all in log space and summed):

* one objective: log-EI, the incumbent being the best measured value that meets every limit
  (without limits, the search view's incumbent, believed values of pending trials included);
* several objectives: log-EHVI (:func:`gptask.model.acquisition.log_ehvi`, exact for the independent
  Gaussian predictions of the objectives' models) over the task's front: its measured points that
  meet every limit, and the believed values (posterior means) of its pending trials believed to
  meet them. The reference point is, per objective, the worst value of those points plus a tenth
  of their range (at least :data:`REF_MARGIN` model units); a task without such a point takes
  the other tasks' worst, or :data:`REF_DEFAULT` model units.
* each limit adds ``log P(limit met)`` under its output's model (the latent prediction);
* the failure model adds ``log P(success)``, penalised below 1/2 (:meth:`.failure.FailureModel.log_factor`;
  0 without a failure).

With limits and no measured point of the task meeting them, the improvement term is left out: the
search maximises the probability of meeting the limits (and of not failing) until one does.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..acquisition import log_ehvi, log_ei, log_prob_below
from ..numerics import LCM
from ...problem.objectives import Limit, Outputs
from ..pareto import nondominated_boxes
from ...space.dimensions import Space
from ..transforms import OutputTransform
from ...data.run_header import (read_failure_fit, read_output_model, read_use_log, write_failure_fit,
                                 write_output_model, write_use_log)
from ...data.trials import Status, Trial
from .core import ModelSettings, SearchView, Surrogate
from .data import usable
from .failure_model import FailureModel, success_threshold
from .updates import RefitPolicy

__all__ = ["OutputModels", "OutputsView", "HistoryMeta", "project", "transform_for", "REF_MARGIN", "REF_DEFAULT"]

log = logging.getLogger(__name__)

#: the smallest margin of the EHVI reference point beyond the worst point, in model units
REF_MARGIN = 0.1
#: the reference point's coordinate when no task has a point yet, in model units
REF_DEFAULT = 2.0


def transform_for(problem: Any, requested: str) -> str:
    """The output transform the models of ``problem``'s outputs use when ``requested`` ("auto",
    "log" or "none"): "none" for "auto" with several objectives (module docstring), else ``requested``."""
    spec = problem.outputs
    if requested == "auto" and spec is not None and len(spec.objectives) > 1:
        return "none"
    return requested


@dataclass(frozen=True)
class HistoryMeta:
    """Reading and writing JSON values of the run's history (``Storage.get_meta``/``set_meta``),
    as the tuner does it (on rank 0, broadcast); ``set`` is None for a tuner that does not
    record its run. Read and written through :mod:`gptask.data.run_header` (``get_meta``/``set_meta``)."""

    get: Callable[[str], Any]
    set: Callable[[str, Any], None]

    def get_meta(self, key: str) -> Any:
        return self.get(key)

    def set_meta(self, key: str, value: Any) -> None:
        self.set(key, value)


class _MetaModelStore:
    """The :class:`~gptask.model.surrogate.ModelStore` of a named output other than the primary one: its
    last fit and transform kept in the history's meta under ``model:<name>`` and ``use_log:<name>``
    (the models table holds the primary objective's fits, as for a classic problem)."""

    def __init__(self, meta: HistoryMeta, name: str) -> None:
        self.meta, self.name = meta, name

    def last_model(self) -> dict | None:
        return read_output_model(self.meta, self.name)

    def add_model(self, iteration: int, params: dict, log_likelihood: float, data_key: str) -> None:
        write_output_model(self.meta, self.name, iteration, params, log_likelihood, data_key)

    def set_use_log(self, use_log: bool) -> None:
        write_use_log(self.meta, use_log, self.name)


def project(trials: Sequence[Trial], name: str | None, sign: float = 1.0) -> list[Trial]:
    """``trials`` as the model of output ``name`` sees them (module docstring); ``name`` None: the
    trials themselves (a classic problem)."""
    if name is None:
        return list(trials)
    out = []
    for t in trials:
        if t.status is Status.PENDING or t.status is Status.FAILED:
            out.append(t)
        elif name in t.values:
            out.append(t.replace(value=sign * float(t.values[name])))
        else:
            out.append(t.replace(status=Status.FAILED, value=None, reason=t.reason or f"no value of {name!r}"))
    return out


@dataclass(frozen=True)
class OutputsView:
    """What the searches of one round see: ``model`` and ``best`` of the primary output (as a
    :class:`~gptask.model.surrogate.SearchView`), ``views`` per modelled output, and per output and task
    the believed model values (p_i,) of the pending configurations ``pending[i]`` (p_i, D)."""

    model: Any
    best: list[float | None]
    views: dict[str, SearchView]
    believed: dict[str, list[np.ndarray]]
    pending: list[np.ndarray]


class OutputModels:
    """The models of a problem's outputs over ``tasks`` (module docstring).

    primary: the tuner's surrogate, the model of the primary objective (or of the one number);
    settings, policy, comm: those of the other outputs' surrogates; meta: the history's meta values
    (their fits and transforms); failure_model: whether failures are modelled (False: imputed
    as the worst value, as before), or the least probability of success the acquisition accepts
    (:func:`.failure.success_threshold`).
    """

    def __init__(self, problem: Any, tasks: Sequence[Mapping[str, Any]], primary: Surrogate,
                 settings: ModelSettings, policy: RefitPolicy, meta: HistoryMeta, comm: Any = None,
                 failure_model: bool | float = True) -> None:
        self.spec: Outputs | None = problem.outputs
        self.space: Space = problem.param_space
        self.tasks = [dict(t) for t in tasks]
        self.primary = primary
        self.names: tuple[str, ...] = self.spec.modelled if self.spec is not None else ()
        self.others: dict[str, Surrogate] = {}
        for name in self.names[1:]:
            stored = read_output_model(meta, name)
            self.others[name] = Surrogate(self.space, len(self.tasks), settings, _MetaModelStore(meta, name), policy,
                                          use_log=read_use_log(meta, name),
                                          iteration=0 if stored is None else int(stored.get("iteration", 0)),
                                          comm=comm)
        at_least = success_threshold(failure_model)
        self.failure = None if at_least is None else FailureModel(self.space, problem.task_space, at_least)
        #: the history's meta values the failure model's settings are kept in (its ``set`` None: not kept)
        self.meta = meta
        self._kept_failure: dict | None = None
        if self.failure is not None:
            stored = read_failure_fit(meta)
            if self.failure.restore(stored):
                self._kept_failure = stored
        self.records: list[Trial] = []  # the finished trials the models hold (explained failures left out)

    # ---- the models ----------------------------------------------------------------------------
    def surrogates(self) -> dict[str | None, Surrogate]:
        """Every output's surrogate, the primary first (key None for a classic problem)."""
        first = self.names[0] if self.names else None
        return {first: self.primary, **self.others}

    def _sign(self, name: str | None) -> float:
        return 1.0 if name is None or self.spec is None else self.spec.sign(name)

    @property
    def failure_active(self) -> bool:
        """Whether the failure model is fitted (the data hold a failed trial)."""
        return self.failure is not None and self.failure.active

    def _kept(self, trials: Sequence[Trial]) -> list[Trial]:
        """``trials`` without the failed ones the failure model explains, unless that would leave a
        task without any finished trial (the same list when nothing is dropped)."""
        if not self.failure_active:
            return list(trials)
        assert self.failure is not None
        drop = {t.id for t in trials if t.status is Status.FAILED and self.failure.explains(t)}
        if not drop:
            return list(trials)
        left = {t.task_index for t in trials if t.status.finished and t.id not in drop}
        return [t for t in trials if t.id not in drop or t.task_index not in left]

    def update(self, model_trials: Sequence[Trial], trials: Sequence[Trial]) -> LCM:
        """Bring the failure model and every output's model up to date (``model_trials``: the
        finished trials the models are built on; ``trials``: every trial); returns the primary model."""
        self._update_failure(model_trials)
        kept, every = self._kept(model_trials), self._kept(trials)
        self.records = kept
        model = None
        for name, s in self.surrogates().items():
            got = s.update(project(kept, name, self._sign(name)), project(every, name, self._sign(name)))
            model = got if model is None else model
        assert model is not None
        return model

    def current(self, model_trials: Sequence[Trial], trials: Sequence[Trial]) -> dict[str | None, tuple[LCM, OutputTransform]]:
        """Every output's model conditioned on every finished trial (:meth:`Surrogate.current`), the
        primary first: what a result reports."""
        self._update_failure(model_trials)
        kept, every = self._kept(model_trials), self._kept(trials)
        self.records = kept
        return {name: s.current(project(kept, name, self._sign(name)), project(every, name, self._sign(name)))
                for name, s in self.surrogates().items()}

    def _update_failure(self, model_trials: Sequence[Trial]) -> None:
        """Bring the failure model up to date and keep its fitted settings in the history when they
        changed (:mod:`.failure_model`: a resumed run reuses them)."""
        if self.failure is None:
            return
        self.failure.update(model_trials)
        settings = self.failure.settings()
        if settings is not None and settings != self._kept_failure and self.meta.set is not None:
            write_failure_fit(self.meta, settings)
            self._kept_failure = settings

    # ---- searches ------------------------------------------------------------------------------
    @property
    def plain(self) -> bool:
        """One number and no failure model in use: the single surrogate's search, unchanged."""
        return self.spec is None and not self.failure_active

    def search_view(self, pending: Sequence[np.ndarray]) -> SearchView | OutputsView:
        """The search view of every output (:meth:`Surrogate.search_view`) with ``pending[i]``
        (p_i, D) encoded pending configurations of task i as fantasies."""
        if self.plain:
            return self.primary.search_view(pending)
        views, believed = {}, {}
        for name, s in self.surrogates().items():
            key = name if name is not None else ""
            views[key] = s.search_view(pending)
            assert s.model is not None
            believed[key] = [s.model.predict(i, P)[0] if len(P) else np.empty(0) for i, P in enumerate(pending)]
        first = views[self.names[0] if self.names else ""]
        return OutputsView(first.model, first.best, views, believed, [np.asarray(P) for P in pending])

    def acquisition(self, view: SearchView | OutputsView, i: int,
                    claimed: np.ndarray) -> Callable[[np.ndarray], np.ndarray] | None:
        """What task ``i``'s search maximises (module docstring), or None for the search's own
        log-EI (the plain case). claimed: (k, D) encoded trials of the task (the incumbent of a
        task without a measured value is the smallest predicted mean there)."""
        if not isinstance(view, OutputsView):
            return None
        task = self.tasks[i]
        terms: list[Callable[[np.ndarray], np.ndarray]] = []
        if self.failure_active:
            failure = self.failure
            assert failure is not None
            terms.append(lambda x: failure.log_factor(task, x))
        limits = self.spec.limits if self.spec is not None else ()
        terms += [self._limit_term(view, i, lim) for lim in limits]
        improvement = self._improvement(view, i, claimed)
        if improvement is not None:
            terms.insert(0, improvement)

        def acquisition(x: np.ndarray) -> np.ndarray:
            x = np.atleast_2d(x)
            total = np.zeros(len(x))
            for term in terms:
                total = total + term(x)
            return total

        return acquisition

    def _limit_term(self, view: OutputsView, i: int, lim: Limit) -> Callable[[np.ndarray], np.ndarray]:
        """``log P(limit met)`` under the limited output's model, in its model units."""
        s = self.others.get(lim.output, self.primary)
        sign = self._sign(lim.output)
        w_bound = sign * lim.bound
        upper = (lim.op == "<=") == (sign > 0)  # the modelled w = sign * y must stay below w_bound
        tr = s.transform
        assert tr is not None
        if tr.use_log and w_bound <= 0:
            const = -np.inf if upper else 0.0  # log w can never be below log(<= 0); always above it
            return lambda x: np.full(len(np.atleast_2d(x)), max(const, -1e6))
        z_bound = float(tr.forward(i, np.array([w_bound]))[0])
        model = view.views[lim.output].model

        def term(x: np.ndarray) -> np.ndarray:
            mean, var = model.predict(i, x)
            std = np.sqrt(np.maximum(var, 0.0))
            return log_prob_below(mean, std, z_bound) if upper else log_prob_below(-mean, std, -z_bound)

        return term

    def _feasible_points(self, i: int) -> list[Trial]:
        """Task ``i``'s measured trials in the models that meet every limit."""
        mine = [t for t in self.records if t.task_index == i and t.status is not Status.FAILED and usable(t)]
        if self.spec is None or not self.spec.limits:
            return mine
        return [t for t in mine if self.spec.meets_limits(t.values)]

    def _z(self, name: str, trials: Sequence[Trial], i: int) -> np.ndarray:
        """Model values (k,) of output ``name`` of ``trials`` of task ``i`` (NaN where undefined)."""
        s = self.others.get(name, self.primary)
        tr = s.transform
        assert tr is not None
        w = np.array([self._sign(name) * float(t.values[name]) for t in trials])
        with np.errstate(invalid="ignore", divide="ignore"):
            return tr.forward(i, w) if len(w) else np.empty(0)

    def _improvement(self, view: OutputsView, i: int, claimed: np.ndarray) -> Callable[[np.ndarray], np.ndarray] | None:
        if self.spec is None or len(self.spec.objectives) == 1:
            return self._ei(view, i, claimed)
        return self._ehvi(view, i)

    def _ei(self, view: OutputsView, i: int, claimed: np.ndarray) -> Callable[[np.ndarray], np.ndarray] | None:
        model = view.model
        if self.spec is not None and self.spec.limits:
            points = self._feasible_points(i)
            if not points:
                return None
            best = float(np.nanmin(self._z(self.names[0], points, i)))
        else:
            best = view.best[i]
            if best is None:
                best = float(np.min(model.predict(i, claimed)[0]))

        averaged = view.views[self.names[0] if self.names else ""].log_ei(i, best)  # over the draws, if any
        if averaged is not None:
            return averaged

        def term(x: np.ndarray) -> np.ndarray:
            mean, var = model.predict(i, x)
            return log_ei(mean, np.sqrt(np.maximum(var, 0.0)), best)

        return term

    def _front(self, view: OutputsView, i: int) -> np.ndarray:
        """Task ``i``'s points (k, d) in the objectives' model units (module docstring)."""
        assert self.spec is not None
        objectives = self.spec.objectives
        points = self._feasible_points(i)
        rows = [np.column_stack([self._z(n, points, i) for n in objectives])] if points else []
        P = view.pending[i]
        if len(P):
            believed = np.column_stack([view.believed[n][i] for n in objectives])
            ok = np.ones(len(P), dtype=bool)
            for lim in self.spec.limits:  # believed to meet the limit: its believed value does
                s = self.others.get(lim.output, self.primary)
                assert s.transform is not None
                sign = self._sign(lim.output)
                w = s.transform.backward(i, view.believed[lim.output][i]) * sign
                ok &= np.array([lim.met(float(v)) for v in w])
            rows.append(believed[ok])
        Y = np.vstack(rows) if rows else np.empty((0, len(objectives)))
        return Y[np.all(np.isfinite(Y), axis=1)]

    def _reference(self, view: OutputsView, i: int, Y: np.ndarray) -> np.ndarray:
        d = len(self.spec.objectives) if self.spec is not None else 1
        if not len(Y):
            others = [self._front(view, j) for j in range(len(self.tasks)) if j != i]
            others = [o for o in others if len(o)]
            if not others:
                return np.full(d, REF_DEFAULT)
            Y = np.vstack(others)
        hi, lo = Y.max(axis=0), Y.min(axis=0)
        return hi + np.maximum(0.1 * (hi - lo), REF_MARGIN)

    def _ehvi(self, view: OutputsView, i: int) -> Callable[[np.ndarray], np.ndarray] | None:
        assert self.spec is not None
        Y = self._front(view, i)
        if self.spec.limits and not len(self._feasible_points(i)):
            return None
        ref = self._reference(view, i, Y)
        lower, upper = nondominated_boxes(Y, ref)
        models = [view.views[n].model for n in self.spec.objectives]

        def term(x: np.ndarray) -> np.ndarray:
            preds = [m.predict(i, x) for m in models]
            mean = np.column_stack([p[0] for p in preds])
            std = np.column_stack([np.sqrt(np.maximum(p[1], 0.0)) for p in preds])
            return log_ehvi(mean, std, lower, upper)

        return term
