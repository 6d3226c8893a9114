"""The tuner's model of one objective over its tasks: what is fitted, when, and what a search sees.

A :class:`Surrogate` owns the life of the LCM a tuner searches on, apart from the trial bookkeeping
of :class:`gptask.tuning.Tuner` (which only tells it which trials exist):

* the output transform (:mod:`gptask.model.transforms`): log or not, decided once by likelihood under
  ``"auto"`` and switched off for good when a value <= 0 arrives;
* full fits of the LCM on the training data of :mod:`.data` (warm-started from the last
  hyperparameters, cold with more restarts when that fails, or the hyperparameters another process
  stored for exactly these data reused), and block appends between them (:mod:`.updates`);
* what a search sees: the model with every pending trial as a fantasy and each task's incumbent
  (:mod:`.fantasy`), per task.

It reaches the history only through a :class:`ModelStore` (the tuner's, which under MPI reads and
writes on rank 0 alone). Other tuners change what the model is by subclassing: TLA2's new-task
surrogate (:mod:`gptask.transfer.tla2`) extends a tuned model instead of fitting one
(:meth:`Surrogate.full_fit`) and keeps a transferred transform (:meth:`Surrogate.transform_stale`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from ..acquisition import log_ei_averaged
from ..numerics import LCM, TaskLevels
from ..numerics import defaults as model_defaults
from ..numerics.priors import LCMPrior
from ...core.seeding import STAGE_FIT, int_seed
from ..source_summary import summary_indices
from ...space.dimensions import Space
from ..transforms import OutputTransform
from ...data.trials import Trial
from .data import TrainingData, log_possible, training_data, usable, usable_values
from .fantasy import believed_best, with_fantasies
from .updates import ModelState, RefitPolicy

__all__ = ["Surrogate", "ModelStore", "ModelSettings", "SearchView"]

log = logging.getLogger(__name__)


class ModelStore(Protocol):
    """Where a surrogate keeps what outlives a process: the fitted hyperparameters (to warm-start
    and to reuse across processes sharing a history) and the output transform chosen."""

    def last_model(self) -> dict | None:
        """The last stored fit: {"params": ..., "data_key": ...}, or None."""

    def add_model(self, iteration: int, params: dict, log_likelihood: float, data_key: str) -> None:
        """Store a new fit."""

    def set_use_log(self, use_log: bool) -> None:
        """Store the output transform chosen (log or not)."""


@dataclass(frozen=True)
class ModelSettings:
    """How the LCM is fitted. n_latent, kernel: the model; restarts: starts of a cold fit;
    refit_restarts: of a warm-started one; output_transform: "auto", "log" or "none"; seed: the
    run's seed (each fit draws from ``(seed, STAGE_FIT, iteration)``); device: where the LCM
    computes (None: numpy on the CPU; a torch device such as "cuda": the torch backend there,
    equal to numpy's to rounding, :mod:`gptask.model.numerics.backend`); ei_draws: Laplace draws of the
    hyperparameters after each fit that the search's log-EI is averaged over (0: none);
    scale_from: per task, the task whose output scale it takes (:func:`.data.shared_scales`; empty:
    each task its own); levels: ``(group, level)`` of a :class:`~gptask.model.numerics.TaskLevels`, the
    tasks as fidelity levels of fewer base tasks (None: every task its own)."""

    n_latent: int
    kernel: str
    restarts: int
    refit_restarts: int
    output_transform: str
    seed: int
    device: str | None = None
    ei_draws: int = 0
    scale_from: tuple[int | None, ...] = ()
    levels: tuple[tuple[int, ...], tuple[float, ...]] | None = None

    def key(self) -> list:
        """What changes a fit's result besides the data (folded into the data key)."""
        return ([self.n_latent, self.kernel] + ([list(self.scale_from)] if self.scale_from else [])
                + ([[list(v) for v in self.levels]] if self.levels else []))


@dataclass(frozen=True)
class SearchView:
    """What a search of task i maximises the acquisition on: ``model`` (the LCM with every pending
    trial as a noise-free fantasy) and ``best[i]``, the incumbent in model units (believed values
    of pending trials included; None when the task has no measured value); ``draws``: the same model
    under each Laplace draw of the hyperparameters (``ModelSettings.ei_draws``; empty: none), over
    which, with ``model``, :meth:`log_ei` averages."""

    model: Any
    best: list[float | None]
    draws: list = field(default_factory=list)

    def log_ei(self, i: int, best: float) -> Callable[[np.ndarray], np.ndarray] | None:
        """Task ``i``'s log of the EI averaged over ``model`` and ``draws`` (incumbent ``best`` in model
        units), a function of encoded configurations (n, D) -> (n,); None without draws."""
        if not self.draws:
            return None
        models = [self.model, *self.draws]

        def acquisition(x: np.ndarray) -> np.ndarray:
            preds = [m.predict(i, x) for m in models]
            means = np.array([m for m, _ in preds])
            stds = np.sqrt(np.maximum(np.array([v for _, v in preds]), 0.0))
            return log_ei_averaged(means, stds, best)

        return acquisition


class Surrogate:
    """The model of one objective over ``n_tasks`` tasks of parameter space ``space`` (module
    docstring). use_log: the transform stored by an earlier run (None: not decided);
    iteration: fits stored so far; comm: an mpi4py communicator for the fit's restarts."""

    def __init__(self, space: Space, n_tasks: int, settings: ModelSettings, store: ModelStore,
                 policy: RefitPolicy, use_log: bool | None = None, iteration: int = 0, comm: Any = None) -> None:
        self.space, self.n_tasks, self.settings, self.store = space, n_tasks, settings, store
        self.policy = policy
        self.comm = comm
        self.iteration = int(iteration)
        self._use_log: bool | None = {"log": True, "none": False}.get(settings.output_transform, use_log)
        # a transform forced by the settings is recorded at the first fit, so that a result rebuilt from
        # the history alone (gptask.results.rebuild) knows it
        self._recorded = use_log is not None and use_log == self._use_log
        self.model: LCM | None = None
        self.transform: OutputTransform | None = None
        self.state: ModelState | None = None
        self.data: TrainingData | None = None
        #: every model update made: {"kind", "seconds", "n_points", "reason"}
        self.updates: list[dict] = []
        #: the Laplace draws of the last fit's hyperparameters (ModelSettings.ei_draws), and the seconds
        #: each set of draws took
        self.draws: list[dict] = []
        self.draw_seconds: list[float] = []

    # ---- the output transform ------------------------------------------------------------------
    @property
    def use_log(self) -> bool | None:
        """Whether the model sees log(values) (None: not decided yet)."""
        return self._use_log

    def settle_log(self, records: Sequence[Trial]) -> bool | None:
        """The transform for the next fit of the finished ``records``: True/False, or None when
        "auto" must still decide."""
        values = usable_values(records, self.n_tasks)
        if not any(v.size for v in values):
            return bool(self._use_log)  # nothing measured yet: decide later
        if not log_possible(values) and self._use_log is not False:
            if self._use_log:
                log.warning("the log output transform needs positive values; a value <= 0 was observed, "
                            "so the outputs are modelled without the log from now on")
            self._set_use_log(False)
        return self._use_log

    def _set_use_log(self, use_log: bool) -> None:
        self._use_log = bool(use_log)
        self.store.set_use_log(self._use_log)
        self._recorded = True

    def transform_stale(self, records: Sequence[Trial], new: Sequence[Trial]) -> str | None:
        """Why the transform frozen at the last full fit cannot take the finished trials ``new``
        (a full fit is then due), or None: the log transform was switched off, or a task gets its
        first measured value (its frozen mean and std were placeholders)."""
        assert self.state is not None
        use_log = self.settle_log(records)
        if use_log is None or use_log != self.state.transform.use_log:
            return "the output transform changed"
        for t in new:
            if usable(t) and self.state.measured[t.task_index].size == 0:
                return f"task {t.task_index} has its first measured value"
        return None

    # ---- updates -------------------------------------------------------------------------------
    def update(self, model_trials: Sequence[Trial], trials: Sequence[Trial]) -> LCM:
        """The model brought up to date with ``model_trials`` (the finished trials it is built on;
        ``trials``: every trial of the run, pending ones included) and returned.

        Nothing happens when no trial finished since the last update. Otherwise the new trials are
        appended (block update under the frozen transform), unless the refit policy or
        :meth:`transform_stale` make a full fit due (:meth:`full_fit`). Each update is listed in
        ``updates``."""
        state = self.state
        if state is None or state.model is not self.model:
            return self._refit(model_trials, trials, "first fit" if self.model is None else "the model was replaced")
        if not state.ids <= {t.id for t in model_trials}:
            return self._refit(model_trials, trials, "runs left the model")
        new = [t for t in model_trials if t.id not in state.ids]
        if not new:
            return self.model
        t0 = time.perf_counter()
        reason = self.transform_stale(model_trials, new) or state.absorb(new, self.policy, self.space)
        if reason is not None:
            return self._refit(model_trials, trials, reason)
        self.model = state.model
        self._log_update("append", t0, f"{len(new)} new result(s)")
        return self.model

    def _refit(self, model_trials: Sequence[Trial], trials: Sequence[Trial], reason: str) -> LCM:
        t0 = time.perf_counter()
        kind = self.full_fit(model_trials, trials)
        self._log_update(kind, t0, reason)
        assert self.model is not None
        return self.model

    def _log_update(self, kind: str, t0: float, reason: str) -> None:
        assert self.model is not None
        self.updates.append({"kind": kind, "seconds": time.perf_counter() - t0,
                             "n_points": int(self.model.n_points.sum()), "reason": reason})
        log.debug("model update: %s (%s), %d points", kind, reason, self.updates[-1]["n_points"])

    def install(self, model: LCM, transform: OutputTransform, trials: Sequence[Trial],
                measured: Sequence[np.ndarray]) -> None:
        """Make ``model`` the surrogate's model (what :meth:`full_fit` does with a new fit): it holds
        the finished ``trials`` under ``transform``; measured: per task, the model values (k_i,) of
        its measured points (the incumbents and the imputation of later appends)."""
        self.model, self.transform = model, transform
        self.state = ModelState(model, transform, trials, measured)

    def full_fit(self, model_trials: Sequence[Trial], trials: Sequence[Trial]) -> str:
        """Fit the LCM from scratch on every finished trial (warm-started from the last
        hyperparameters), or reuse the hyperparameters another process stored for exactly these
        data; a new fit is stored. Returns the kind of update, "fit" or "reuse"."""
        use_log = self.settle_log(model_trials)
        if use_log is None:
            model, data = self._choose_transform(trials)
        else:
            if not self._recorded:
                self._set_use_log(use_log)
            data = self._training_data(trials, use_log)
            last = self.store.last_model()
            if last is not None and last.get("data_key") == data.key:
                model = self._new_model().condition(data.X, data.y, params=last["params"])
                self._install_data(model, data, model_trials)
                return "reuse"
            model = self._fit(data)
        self._install_data(model, data, model_trials)
        self._draw(model)
        self.iteration += 1
        params = {k: np.asarray(v).tolist() for k, v in model.get_params().items()}
        params["diagnostics"] = model.fit_record()  # what a model rebuilt from the history reports (issue 45)
        if model.levels is not None:  # and what it is a model of (LEVEL_MODEL "input")
            params["levels"] = model.levels.to_json()
        if self.settings.scale_from:
            params["scale_from"] = list(self.settings.scale_from)
        ll = float(model.log_likelihood())
        self.store.add_model(self.iteration, params, ll, data.key)
        log.info("iteration %d: LCM fitted on %d points, log-likelihood %.4g", self.iteration, data.n_points, ll)
        return "fit"

    def _draw(self, model: LCM) -> None:
        """The Laplace draws of ``model``'s fitted hyperparameters the searches average over (none
        unless ``settings.ei_draws``); seeded by ``(seed, STAGE_FIT, iteration)``."""
        n = self.settings.ei_draws
        if not n:
            return
        t0 = time.perf_counter()
        self.draws = model.laplace_draws(n, seed=int_seed(self.settings.seed, STAGE_FIT, self.iteration, 1))
        self.draw_seconds.append(time.perf_counter() - t0)
        log.debug("%d Laplace draws of the hyperparameters in %.3f s", len(self.draws), self.draw_seconds[-1])

    def _training_data(self, trials: Sequence[Trial], use_log: bool) -> TrainingData:
        """The :class:`TrainingData` of ``trials`` under these settings (their key, the levels' shared scales)."""
        return training_data(trials, self.n_tasks, self.space, use_log, self.settings.key(), self.settings.scale_from)

    def _new_model(self) -> LCM:
        levels = self.settings.levels
        return LCM(n_latent=self.settings.n_latent, kernel=self.settings.kernel, device=self.settings.device,
                   levels=None if levels is None else TaskLevels(*levels))

    @property
    def prior(self) -> LCMPrior:
        """The fit's prior: the default one, with the length-scale centre scaled by the number of
        parameters rather than of encoded columns (:class:`gptask.model.numerics.priors.LCMPrior`)."""
        return LCMPrior(dimension=float(len(self.space)))

    def _install_data(self, model: LCM, data: TrainingData, model_trials: Sequence[Trial]) -> None:
        self.data = data
        self.install(model, data.transform, model_trials, [y[m] for y, m in zip(data.y, data.measured)])

    def _fit(self, data: TrainingData, cold: bool = False) -> LCM:
        s = self.settings
        init: Any = None
        if not cold and self.model is not None:
            init = self.model
        elif not cold:
            last = self.store.last_model()
            init = None if last is None else last["params"]
            stored_tasks = None if init is None else np.shape(init.get("noise", ()))[:1]
            if stored_tasks and stored_tasks[0] != len(data.X):  # a resume that added tasks: nothing to warm-start
                log.info("the history's last model is of %d tasks and this run has %d: fitted afresh",
                         stored_tasks[0], len(data.X))
                init = None
        seed = int_seed(s.seed, STAGE_FIT, self.iteration)
        if init is None and data.n_points > model_defaults.SUBSET_FIT_ABOVE:
            return self._fit_from_subset(data, seed)
        try:
            return self._new_model().fit(data.X, data.y, restarts=s.refit_restarts if init is not None else s.restarts,
                                         seed=seed, init=init, comm=self.comm, prior=self.prior)
        except (np.linalg.LinAlgError, ValueError) as exc:  # a warm start that no longer fits: start cold
            if init is None:
                raise
            log.warning("warm-started fit failed (%s); refitting from scratch", exc)
            return self._new_model().fit(data.X, data.y, restarts=s.restarts, seed=seed, comm=self.comm,
                                         prior=self.prior)

    def _fit_from_subset(self, data: TrainingData, seed: int) -> LCM:
        """A cold fit on many points (more than ``SUBSET_FIT_ABOVE``): every start on a subset of about
        ``SUBSET_POINTS`` (each task's best quarter of its share and a uniform draw of the rest,
        :func:`gptask.model.source_summary.summary_indices`), then one start on all the points from the
        subset's hyperparameters, at most ``SUBSET_REFINE_ITERS`` iterations."""
        share = max(1, model_defaults.SUBSET_POINTS // self.n_tasks)
        Xs, ys = [], []
        for X, y, measured in zip(data.X, data.y, data.measured):
            keep = summary_indices([float(v) if m else None for v, m in zip(y, measured)], share, seed)
            Xs.append(X[keep])
            ys.append(y[keep])
        t0 = time.perf_counter()
        start = self._new_model().fit(Xs, ys, restarts=self.settings.restarts, seed=seed, comm=self.comm,
                                      prior=self.prior, calibrate=False)  # widened once, after the refinement
        t1 = time.perf_counter()
        model = self._new_model().fit(data.X, data.y, restarts=1, seed=seed, init=start, comm=self.comm,
                                      prior=self.prior, maxiter=model_defaults.SUBSET_REFINE_ITERS, explore=False)
        log.info("fit on %d points started from a subset of %d: %.1f s on the subset, %.1f s refining on all",
                 data.n_points, sum(len(y) for y in ys), t1 - t0, time.perf_counter() - t1)
        return model

    def _choose_transform(self, trials: Sequence[Trial]) -> tuple[LCM, TrainingData]:
        """output_transform="auto", first fit: model the outputs with and without the log and keep
        the one whose likelihood *of the observed values* is higher (:meth:`_values_log_likelihood`).

        Each transform is first probed by a short fit (``TRANSFORM_PROBE_ITERS`` iterations of one
        start); when the probes differ by at least ``TRANSFORM_PROBE_MARGIN`` nats the winner alone
        is fitted fully (the same cold fit, seed and model as before, at half the cost); otherwise,
        and on more than ``SUBSET_FIT_ABOVE`` points (fitted from a subset, no probe), both are fitted
        fully and compared as before."""
        datas = {use_log: self._training_data(trials, use_log) for use_log in (True, False)}
        gap = 0.0
        if datas[True].n_points <= model_defaults.SUBSET_FIT_ABOVE:  # above, fitted from a subset: no probe
            probes = {use_log: self._values_log_likelihood(self._probe(data), data) for use_log, data in datas.items()}
            gap = probes[True] - probes[False]
            log.info("output transform probes (%d iterations): log-likelihood of the observed values %.6g with the "
                     "log, %.6g without", model_defaults.TRANSFORM_PROBE_ITERS, probes[True], probes[False])
        if abs(gap) >= model_defaults.TRANSFORM_PROBE_MARGIN:
            use_log = bool(gap > 0)
            data = datas[use_log]
            model = self._fit(data, cold=True)
            log.info("output transform %s: decided by the probes (%.3g nats apart), log-likelihood of the observed "
                     "values %.6g", "log" if use_log else "none", abs(gap), self._values_log_likelihood(model, data))
            self._set_use_log(use_log)
            return model, data
        best = None
        for use_log in (True, False):
            data = datas[use_log]
            model = self._fit(data, cold=True)
            ll_y = self._values_log_likelihood(model, data)
            log.info("output transform %s: log-likelihood of the observed values %.6g", "log" if use_log else "none", ll_y)
            if best is None or ll_y > best[0]:
                best = (ll_y, use_log, model, data)
        assert best is not None
        self._set_use_log(best[1])
        return best[2], best[3]

    def _probe(self, data: TrainingData) -> LCM:
        """A short cold fit of ``data`` (one start, ``TRANSFORM_PROBE_ITERS`` iterations, no
        exploration): what :meth:`_choose_transform` compares the transforms by."""
        seed = int_seed(self.settings.seed, STAGE_FIT, self.iteration)
        return self._new_model().fit(data.X, data.y, restarts=1, seed=seed, comm=self.comm, prior=self.prior,
                                     maxiter=model_defaults.TRANSFORM_PROBE_ITERS, explore=False)

    @staticmethod
    def _values_log_likelihood(model: LCM, data: TrainingData) -> float:
        """The log-likelihood of the observed values under ``model`` fitted on ``data``. The fit's
        log-likelihood is of the standardised outputs z; the change of variables adds
        -sum(log sigma_i) per measured point, and -sum(log y) under the log, which puts both
        transforms on the scale of y."""
        use_log = data.transform.use_log
        jacobian = sum(len(v) * np.log(data.transform.sigma[i]) + (np.sum(np.log(v)) if use_log else 0.0)
                       for i, v in enumerate(data.values))
        return float(model.log_likelihood() - jacobian)

    def current(self, model_trials: Sequence[Trial], trials: Sequence[Trial]) -> tuple[LCM, OutputTransform]:
        """The model conditioned on every finished trial with its last hyperparameters (one
        factorisation; a fit when there is none, or when conditioning fails), and its transform:
        what a result reports."""
        use_log = self.settle_log(model_trials)
        if self.model is None or use_log is None:
            model = self.update(model_trials, trials)
            assert self.transform is not None
            return model, self.transform
        data = self._training_data(trials, use_log)
        if self.data is not None and data.key == self.data.key and self.state is not None \
                and self.state.since_fit == 0:
            assert self.transform is not None
            return self.model, self.transform
        try:
            model = self._new_model().condition(data.X, data.y, params=self.model.get_params())
        except (ValueError, np.linalg.LinAlgError) as exc:
            log.warning("conditioning on the last evaluations failed (%s); refitting", exc)
            model = self._fit(data)
        self._install_data(model, data, model_trials)
        return model, data.transform

    # ---- what a search sees ----------------------------------------------------------------------
    def search_view(self, pending: Sequence[np.ndarray]) -> SearchView:
        """The model with ``pending[i]`` ((p_i, D) encoded configurations of task i still running)
        as fantasies, and each task's incumbent counting their believed values (:mod:`.fantasy`)."""
        assert self.model is not None and self.state is not None
        model, believed = with_fantasies(self.model, pending)
        noise_sd = np.sqrt(self.model.get_params()["noise"])
        best = [self.state.best_z(i) if not believed[i].size else
                believed_best(self.state.best_z(i), believed[i], float(noise_sd[i]))
                for i in range(self.n_tasks)]
        return SearchView(model, best, self._draw_views(pending))

    def _draw_views(self, pending: Sequence[np.ndarray]) -> list[LCM]:
        """The model's data conditioned under each of ``draws`` (the hyperparameters held since the last
        fit), with ``pending`` as fantasies at each one's means; a draw that does not factorise is left out."""
        if not self.draws or self.model is None:
            return []
        X, y = self.model.data()
        out = []
        for params in self.draws:
            try:
                m = self._new_model().condition(X, y, params=params)
            except (np.linalg.LinAlgError, ValueError):
                continue
            out.append(with_fantasies(m, pending)[0])
        return out
