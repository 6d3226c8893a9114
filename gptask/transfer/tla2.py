"""TLA2: quick tuning of a new task from a tuned model (:func:`tune_new_task`, :class:`NewTaskTuner`).

GPTune paper (shared/seeds/004) sec. 5, with the choices below made explicit. TLA2 runs on the
ask/tell engine of :mod:`gptask.tuning`: :class:`NewTaskTuner` is a :class:`~gptask.tuning.Tuner`
whose tasks are the tuned ones followed by the new one, which alone takes trials, and
:func:`tune_new_task` is the loop every tuner shares (:func:`gptask.tuning.loop.run`). So it has
the same history (PENDING trials, resume, several processes on one file), executors
(``executor=``, ``max_in_flight=``: the new task's proposals are spread by fantasies), noise
policies and pruner, failure capture and MPI rules (rank 0 alone writes) as ``gt.tune``.

1. The initial design: the TLA1 prediction itself; then the tuned tasks' best configurations
   that are allowed on the new task, least predicted value on it first (what a user would re-run
   first on a new machine, ranked by the model; on the recorded convolution campaign,
   ``bench/leave_one_gpu_out.py``, without them a new GPU fell behind simply re-running the other
   GPUs' best configurations: BENCHMARKS.md, issue 24; keeping only those predicted no worse than
   the TLA1 prediction lost most of that gain, since a new GPU's predictions are a blend); then,
   for the rest of ``n_initial``, centred sampling
   (paper sec. 5.2.1 with its per-dimension variant): distinct feasible draws of
   ``N(centre, diag(sigma^2))`` in the encoded cube (out-of-cube or infeasible draws redrawn),
   with, per encoded column ``j``::

       ell_j   = (sum_q v_q / l_qj^2 / sum_q v_q) ** -1/2     (v_q = mean_i B_q[i, i])
       sigma_j = clip(max(ell_j / 2, s_j), 0.02, 1.0)

   ``l_qj`` are the LCM length scales, ``ell_j`` their variance-weighted effective value and
   ``s_j`` the TLA1 std of that column: within half a length scale the objective is strongly
   correlated (RBF correlation 0.88), so the design explores the basin the prediction points to,
   wider when TLA1 itself is unsure. A short length scale (a sensitive parameter) gives a narrow
   spread, as the paper proposes.
2. ``LCM.extend`` adds the task: old hyperparameters and the old Cholesky factor are kept, only
   the new task's W rows, kappa and noise are learned.
3. EI + PSO on the new task (the engine's search, its initial swarm seeded with the new task's
   best point, the TLA1 prediction and the tuned tasks' best configurations); each new result is
   added with ``LCM.append`` (block update, hyperparameters fixed), not a refit. The old tasks'
   data are the tuned model's: their trials in the history, if it holds any, are not read again.
   *Cross-task picks*, on a listed or enumerated discrete space (``Problem.domain``): the first
   search proposal and then every other one (:data:`PICK_EVERY`) chooses by EI among the
   :data:`PICK_TOP` best configurations of every tuned task that the new task allows and has not
   run (a task's next best where an earlier task offers the same configuration: tasks tuned
   jointly with the joint search's own cross-task picks often share their bests), instead of
   searching the whole space (the whole space once they are all run). A model
   extended by a handful of runs predicts a new machine poorly where its landscape is unlike the
   tuned ones; the tuned tasks' near-best configurations are the candidates a performance
   engineer would try next, and EI still ranks them by what the new task's runs taught the model.
   On the recorded convolution campaign (a GPU held out, the other five tuned;
   ``bench/leave_one_gpu_out.py``, 10 seeds) they raised the fraction of the optimum after 10 runs
   from 0.751 (worst seed 0.617) to 0.823 (0.711; BENCHMARKS.md, issue 24; 0.787 since the
   source GPUs are tuned with the joint search's own picks, whose run-free pick rose from 0.549
   to 0.685). Continuous spaces get
   none: there one task's best point is rarely another's (on the transfer benchmark's sphere
   family, whose optimum moves with the task, picks cost regret at 10 runs), and the search's
   swarm already starts from the tuned tasks' best points.

The new task's output transform: log if the old tasks used log, then the per-task affine map
*transferred* from the old tasks: its ``mu`` and ``log sigma`` are predicted at the new task by
single-output GPs over the encoded tasks fitted to the old tasks' ``mu_i`` and ``log sigma_i``.
It is not estimated from the new task's own data: the centred design samples near-optimal
values, and standardising by them puts the GP's prior mean (0) at the near-optimal level, so EI
would chase variance far from the prediction (observed on the sphere family before this choice).
The transform is fixed for the whole TLA2 run, refits included. A failed run of the new task is
shown as its worst measured value (before it has one, the worst of any task: the engine's rule).

``refit``: "never" (default: only block updates); an integer k (a full refit of every
hyperparameter, warm-started, after every k-th new evaluation); "auto": a full refit when the
model stops predicting the new task, judged by the one-step-ahead standardised error
``e = (z - mean) / std`` of each new observation *before* it is appended (a sequential
leave-future-out check that costs nothing): when the mean of ``e^2`` over the last
``DRIFT_WINDOW`` observations exceeds ``DRIFT_E2`` (a calibrated model gives 1) and at least
``DRIFT_WINDOW`` evaluations passed since the last refit (the engine's
:class:`~gptask.model.surrogate.updates.RefitPolicy`). Also in "auto": when the model already holds
``AUTO_MAX_EXTENDED`` tasks added by extension since its last full fit (chained TLA2 results), the
new task's initial design triggers a full refit instead of an extension.
"""

from __future__ import annotations

import logging
import numbers
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..core.checks import check_int, check_seconds
from ..evaluation.evaluate import Evaluator
from ..model.numerics import LCM
from ..results.result import TuningResult
from ..space.sampling import centred_normal_points
from ..core.seeding import STAGE_CENTRED, STAGE_EXTEND, STAGE_REFIT, int_seed, rng
from ..data.storage import Owner
from ..model.transforms import OutputTransform
from ..data.trials import Trial, point_key
from ..model.surrogate import ModelSettings, Surrogate
from ..model.surrogate.updates import RefitPolicy
from ..tuning import Tuner
from ..tuning.proposer import Proposer
from ..tuning.asynchronous import check_executor
from ..tuning.crosstask import best_rows
from ..model.surrogate.data import usable
from ..tuning.loop import run
from ..tuning.settings import new_task_initial
from .model import ScalarGP, TransferModel, as_transfer_model
from .predict import predict_encoded
from .tla1 import Prediction, predict_optimum

__all__ = ["TransferResult", "NewTaskTuner", "NewTaskProposer", "tune_new_task", "sampling_spread"]

log = logging.getLogger(__name__)

#: centred sampling: spread = clip(max(ell / 2, tla1 std), SPREAD_MIN, SPREAD_MAX) per column
SPREAD_MIN, SPREAD_MAX = 0.02, 1.0
#: "auto": a full refit instead of an extension once this many tasks were added by extension
AUTO_MAX_EXTENDED = 3
#: cross-task picks on discrete spaces: every PICK_EVERY-th search proposal (the first after the
#: initial design, then every other) chooses by the acquisition among the PICK_TOP best
#: configurations of every tuned task that the new task has not run (module docstring, step 3;
#: on the convolution campaign, 5 seeds, the top 3 every third proposal reached 0.80 after 10 runs,
#: the top 2 every other proposal 0.83)
PICK_EVERY, PICK_TOP = 2, 2


def sampling_spread(model: LCM, tla1_std: np.ndarray) -> np.ndarray:
    """Per encoded column spread of TLA2's centred sampling (module docstring formula): (D,)."""
    ls = model.lengthscales[:, :model.input_dim]  # (Q, D): a fidelity level's column left out
    B = model.coregionalization()
    v = np.array([float(np.mean(np.diagonal(B[q]))) for q in range(B.shape[0])])
    v = np.maximum(v, 1e-300)
    ell = (np.sum(v[:, None] / ls**2, axis=0) / np.sum(v)) ** -0.5
    return np.clip(np.maximum(ell / 2.0, np.asarray(tla1_std, float)), SPREAD_MIN, SPREAD_MAX)


@dataclass
class TransferResult(TuningResult):
    """A :class:`TuningResult` after TLA2: ``tasks`` are the tuned tasks plus the new one (last,
    index ``task_index``); ``model``/``transform`` cover all of them (the new task extended in).

    prediction: the TLA1 prediction the search started from; updates: one dict per model update
    ({"kind": "extend"|"append"|"refit", "seconds", "n_points", "reason"}); refits: how many full
    refits happened; known_best: best (params, value) per task, kept for tasks whose records are not
    in ``history`` (a model loaded from a file); extended_since_fit: tasks added by extension since
    the model's last full fit.
    """

    task_index: int = -1
    prediction: Prediction | None = None
    updates: list = field(default_factory=list)
    refits: int = 0
    known_best: list = field(default_factory=list)
    extended_since_fit: int = 0

    @property
    def task(self) -> dict:
        return self.tasks[self.task_index]

    def best_new(self) -> tuple[dict, float]:
        """(params, value) of the best complete evaluation of the new task."""
        return self.best(self.task_index)


def _check_refit(refit: Any) -> str | int:
    if refit in ("never", "auto"):
        return refit
    if isinstance(refit, numbers.Integral) and not isinstance(refit, bool) and refit >= 1:
        return int(refit)
    raise ValueError(f"refit must be 'never', 'auto' or an integer >= 1, got {refit!r}")


def _transferred_transform(tm: TransferModel, task: dict) -> OutputTransform:
    """The tuned tasks' output transform plus the new task's, predicted over tasks (module docstring)."""
    old = tm.transform
    task_X, x_new = tm.task_space.encode(tm.tasks), tm.task_space.encode([task])[0]
    mu, _ = ScalarGP.fit(task_X, old.mu, seed=1).predict(x_new[None, :])
    log_sigma, _ = ScalarGP.fit(task_X, np.log(old.sigma), seed=2).predict(x_new[None, :])
    sigma = float(max(np.exp(log_sigma[0]), 1e-12))
    return OutputTransform(old.use_log, np.append(old.mu, float(mu[0])), np.append(old.sigma, sigma))


class NewTaskProposer(Proposer):
    """What TLA2's new task runs (module docstring): a design centred on the TLA1 prediction, the
    tuned tasks' bests in the swarm and cross-task picks; the tuned tasks take no trials.

    transfer: the tuned model; task_index: the new task's index (after the tuned ones);
    prediction: TLA1's prediction for it."""

    name = "new-task"

    def __init__(self, transfer: TransferModel, task_index: int, prediction: Prediction) -> None:
        super().__init__()
        self.transfer, self.task_index, self.prediction = transfer, task_index, prediction
        self.old_data = transfer.model.data()
        self._picks: np.ndarray | None = None

    def proposes_for(self, i: int) -> bool:
        return i == self.task_index

    def initial_design(self, i: int) -> list[dict]:
        """The TLA1 prediction, the tuned tasks' best configurations (least predicted value on the
        new task first), and centred draws around the prediction for the rest of ``n_initial``
        (module docstring)."""
        if i != self.task_index:
            return []
        tu = self.tuner
        space, pred, task = tu.problem.param_space, self.prediction, tu.tasks[i]
        design = [pred.params]
        seen = {point_key(pred.params)}
        for params in self._ranked_bests(task):
            if len(design) >= tu.n_initial:
                break
            if point_key(params) not in seen:
                design.append(params)
                seen.add(point_key(params))
        if len(design) < tu.n_initial:
            std = np.array([pred.std[d.name] for d in space.dimensions for _ in range(d.n_columns)])
            design += centred_normal_points(space, pred.encoded, sampling_spread(self.transfer.model, std),
                                            tu.n_initial - len(design), rng(tu.seed, STAGE_CENTRED, i),
                                            self.transfer.is_feasible(task), exclude=seen,
                                            describe=self.transfer.constraint_text(task))
        return design

    def _ranked_bests(self, task: dict) -> list[dict]:
        """The tuned tasks' best configurations that are allowed on ``task``, least predicted value
        on it first (the model's prediction for the new task, as TLA1 makes it)."""
        feasible = self.transfer.is_feasible(task)
        bests = [dict(b[0]) for b in self.transfer.best if b is not None]
        bests = [p for p in bests if feasible is None or feasible(p)]
        if len(bests) < 2:
            return bests
        median, _ = predict_encoded(self.transfer, task, self.tuner.problem.param_space.encode(bests), calibrated=False)
        return [bests[k] for k in np.argsort(median, kind="stable")]

    def search_among(self, i: int) -> np.ndarray | None:
        """Cross-task picks (module docstring, step 3): on every PICK_EVERY-th search proposal, the
        tuned tasks' PICK_TOP best configurations each that are allowed on the new task, (m, D)
        encoded (none on a continuous space); None otherwise (the whole space is searched)."""
        searched = len(self.tuner.trials_of(i)) - self.tuner.n_initial
        if i != self.task_index or searched < 0 or searched % PICK_EVERY:
            return None
        if self._picks is None:
            self._picks = self._top_configurations(self.tuner.tasks[i])
        return self._picks

    def _top_configurations(self, task: dict) -> np.ndarray:
        """(m, D) encoded: every tuned task's PICK_TOP configurations of least model value (its
        data in the tuned model) among those in ``task``'s domain (which holds only what its
        constraints allow) and not offered by an earlier task; none (0, D) when the space is not a
        listed or enumerated one."""
        problem = self.tuner.problem
        domain = problem.domain(task)
        if domain is None:
            return np.empty((0, problem.param_space.n_columns))
        rows = best_rows(*self.old_data, domain, PICK_TOP, refill=True)  # none when no task has data
        return domain.encode(np.array(rows, dtype=np.int64))

    def incumbents(self, i: int) -> np.ndarray | None:
        """The new task's best point, the TLA1 prediction, then the tuned tasks' best configurations."""
        tu = self.tuner
        space = tu.problem.param_space
        rows = []
        ok = [t for t in tu.trials_of(self.task_index) if t.status.finished and t.ok]
        if ok:
            rows.append(space.encode([min(ok, key=lambda t: t.value).params])[0])
        rows.append(self.prediction.encoded)
        old = sorted((b for b in self.transfer.best if b is not None), key=lambda b: b[1])
        rows += list(space.encode([b[0] for b in old][: max(1, tu.pso_particles // 4)])) if old else []
        return np.vstack(rows)


class NewTaskTuner(Tuner):
    """The ask/tell tuner of one new task added to a tuned model (TLA2; module docstring): a
    :class:`~gptask.tuning.Tuner` whose proposer is a :class:`NewTaskProposer` and whose model is
    the tuned one extended by the new task (the model hooks below).

    source: a TuningResult (or TransferResult), or a model from ``gt.load_model(path, problem=...)``
    (the objective is needed); task: the new task (dict). Tasks are the tuned ones followed by the
    new one (index ``task_index``), which alone takes trials. budget, n_initial, history, refit,
    seed, comm, extend_restarts, refit_restarts, pso_particles, pso_iters: see :func:`tune_new_task`;
    owner, lease: as for :class:`~gptask.tuning.Tuner`. ``prediction`` is the TLA1 prediction the
    design is centred on.
    """

    records_run = False  # the run's seed, settings and models belong to the tuning that made the model

    def __init__(self, source: Any, task: Mapping[str, Any], budget: int = 20, n_initial: int | None = None,
                 history: Any = None, refit: str | int = "never", seed: int = 0, comm: Any = None, *,
                 extend_restarts: int = 4, refit_restarts: int = 1, pso_particles: int = 40, pso_iters: int = 40,
                 owner: Owner | None = None, lease: float | None = None, journal: Any = None) -> None:
        tm = as_transfer_model(source)
        if tm.problem is None:
            raise TypeError("tune_new_task needs the objective: load the model with load_model(path, problem=...)")
        task = tm.validate_task(task)
        tm.check_at_target(task, "tune_new_task")
        if tm.task_index(task) is not None:
            raise ValueError(f"task {task} is already tuned in this model; resume its tuning with gt.tune and its history")
        if n_initial is None and isinstance(budget, numbers.Integral) and not isinstance(budget, bool) and budget >= 1:
            n_initial = new_task_initial(int(budget))
        self.refit_mode = _check_refit(refit)
        self.extend_restarts = check_int("extend_restarts", extend_restarts, 1)
        self.source, self.transfer, self.task_index = source, tm, len(tm.tasks)
        # centred on TLA1 even for a category no tuned task has: starting from the consensus pick
        # instead lost 0.015 after 10 runs on the leave-one-GPU-out benchmark (BENCHMARKS.md, issue 24)
        self.prediction: Prediction = predict_optimum(tm, task, consensus=False)
        self.new_transform: OutputTransform = _transferred_transform(tm, task)
        every, drift = {"never": (None, False), "auto": (None, True)}.get(self.refit_mode, (self.refit_mode, False))
        self.old_data = tm.model.data()
        self.extended_since_fit, self.refits = tm.extended_since_fit, 0
        super().__init__(tm.problem, tm.tasks + [task], budget, n_initial, seed, history,
                         proposer=NewTaskProposer(tm, self.task_index, self.prediction),
                         n_latent=tm.model.n_latent, kernel=tm.model.kernel, refit_restarts=refit_restarts,
                         pso_particles=pso_particles, pso_iters=pso_iters,
                         output_transform="log" if tm.transform.use_log else "none", comm=comm,
                         owner=owner if owner is not None else Owner.this_process("tla2"), lease=lease,
                         refit_every=every, refit_on_drift=drift, failure_model=False, journal=journal)

    def model_ready(self) -> bool:
        return any(t.status.finished for t in self.trials_of(self.task_index))

    def model_trials(self) -> list[Trial]:
        return [t for t in self.trials_of(self.task_index) if t.status.finished]

    def make_surrogate(self, settings: ModelSettings, policy: RefitPolicy, use_log: bool | None,
                       iteration: int) -> Surrogate:
        return _NewTaskSurrogate(self, settings, policy)

    def result(self) -> TransferResult:
        """The tuned tasks and the new one: the model brought up to date with every new result."""
        self.refresh()
        model = None
        if self.model_ready():
            model = self.fit_model()
        else:
            log.error("no evaluation of the new task finished: the result has no model")
        T, tm = self.task_index, self.transfer
        mine = self.model_trials()
        old_records = list(self.source.history) if isinstance(self.source, TuningResult) else []
        ok = [t for t in mine if t.ok]
        known = list(tm.best) + [(dict(min(ok, key=lambda t: t.value).params), float(min(t.value for t in ok)))
                                 if ok else None]
        closed = {T: r} if (r := self.stopped_early(T)) else {}
        return TransferResult(self.problem, list(self.tasks), old_records + mine, model, self.new_transform,
                              pending=[t for t in self.pending if t.task_index == T], closed=closed, task_index=T,
                              prediction=self.prediction, updates=list(self.updates), refits=self.refits,
                              known_best=known, extended_since_fit=self.extended_since_fit)


class _NewTaskSurrogate(Surrogate):
    """TLA2's model: the tuned model extended by the new task (first full update), or refitted on
    the old data and the new task's; the new task's transform is the transferred one, fixed
    (module docstring). Its fits are not stored: the history's models are those of the run that
    made the tuned model."""

    def __init__(self, tuner: "NewTaskTuner", settings: ModelSettings, policy: RefitPolicy) -> None:
        super().__init__(tuner.problem.param_space, tuner.n_tasks, settings, _NoStore(), policy, comm=tuner.comm)
        self.tuner = tuner

    def transform_stale(self, records: Sequence[Trial], new: Sequence[Trial]) -> str | None:
        return None  # the transform is transferred and fixed (module docstring)

    def full_fit(self, model_trials: Sequence[Trial], trials: Sequence[Trial]) -> str:
        """Extend the tuned model by the new task (first time), or refit every hyperparameter on the
        old data and the new task's (warm-started from the current model)."""
        tuner = self.tuner
        X_new = self.space.encode([t.params for t in model_trials])
        z_new = self._model_values(model_trials)
        base = tuner.transfer.model
        extendable = base.levels is None  # fidelity levels of base tasks (LEVEL_MODEL "input"): no task to extend by
        if self.model is None and extendable and not (tuner.refit_mode == "auto"
                                                      and tuner.extended_since_fit >= AUTO_MAX_EXTENDED):
            model = base.extend(X_new, z_new, restarts=tuner.extend_restarts, seed=int_seed(tuner.seed, STAGE_EXTEND))
            tuner.extended_since_fit += 1
            kind = "extend"
        else:
            if self.model is not None:
                init = self.model.get_params()
            elif extendable:  # a chain of extensions: fit everything once, from a quick extension
                init = base.extend(X_new, z_new, restarts=1, seed=int_seed(tuner.seed, STAGE_EXTEND)).get_params()
            else:  # cold
                init = None
            model = self._refit_all(X_new, z_new, init, int_seed(tuner.seed, STAGE_REFIT, len(model_trials)))
            tuner.refits += 1
            tuner.extended_since_fit = 0
            kind = "refit"
            log.info("TLA2: full refit after %d new-task evaluations", len(model_trials))
        measured = [np.asarray(y) for y in tuner.old_data[1]]
        measured.append(np.array([z for t, z in zip(model_trials, z_new) if usable(t)]))
        assert tuner.new_transform is not None
        self.install(model, tuner.new_transform, model_trials, measured)
        return kind

    def _model_values(self, trials: Sequence[Trial]) -> np.ndarray:
        """The new task's results in model units (failed: its worst measured, else any task's worst)."""
        T, tr = self.tuner.task_index, self.tuner.new_transform
        assert tr is not None
        values = [float(t.value) if usable(t) else None for t in trials]
        pos = [v for v in values if v is not None and v > 0]
        floor = 0.5 * min(pos) if pos else 1e-300
        if tr.use_log and any(v is not None and v <= 0 for v in values):
            log.warning("a non-positive objective value under the log transform was clamped to %g", floor)
        z = [None if v is None else float(tr.forward(T, np.array([max(v, floor) if tr.use_log else v]))[0])
             for v in values]
        known = [v for v in z if v is not None]
        worst = max(known) if known else max(float(np.max(y)) for y in self.tuner.old_data[1] if len(y))
        return np.array([worst if v is None else v for v in z])

    def _refit_all(self, X_new: np.ndarray, z_new: np.ndarray, init: dict | None, seed: int) -> LCM:
        """Every hyperparameter fitted on the old data and the new task's, warm-started from ``init`` (None:
        cold, with at least 3 restarts); each task its own (a base model of fidelity levels included)."""
        tuner = self.tuner
        Xs, ys = list(tuner.old_data[0]) + [X_new], list(tuner.old_data[1]) + [z_new]
        base = tuner.transfer.model
        restarts = tuner.refit_restarts if init is not None else max(tuner.refit_restarts, 3)
        try:
            return LCM(base.n_latent, base.kernel, base.rank).fit(Xs, ys, restarts=restarts, seed=seed,
                                                                  init=init, comm=self.comm)
        except Exception as exc:  # noqa: BLE001 - a failed warm start: retry cold with more restarts
            log.warning("warm-started refit failed (%s); refitting from scratch", exc)
            return LCM(base.n_latent, base.kernel, base.rank).fit(Xs, ys, restarts=max(tuner.refit_restarts, 3),
                                                                  seed=seed, comm=self.comm)


class _NoStore:
    """A model store that keeps nothing (TLA2's fits belong to no run of the history)."""

    def last_model(self) -> dict | None:
        return None

    def add_model(self, iteration: int, params: dict, log_likelihood: float, data_key: str) -> None:
        return None

    def set_use_log(self, use_log: bool) -> None:
        return None


def tune_new_task(
    result: Any,
    task: Mapping[str, Any],
    budget: int = 20,
    n_initial: int | None = None,
    history: str | os.PathLike | None = None,
    refit: str | int = "never",
    seed: int = 0,
    comm: Any = None,
    *,
    repeats: int = 1,
    aggregate: str = "min",
    timeout: float | None = None,
    noise: Any = None,
    pruner: Any = None,
    executor: Any = None,
    max_in_flight: int | None = None,
    max_time: float | None = None,
    progress: bool = False,
    extend_restarts: int = 4,
    refit_restarts: int = 1,
    pso_particles: int = 40,
    pso_iters: int = 40,
    journal: str | os.PathLike | bool | None = None,
) -> TransferResult:
    """TLA2: tune one new task starting from a tuned model; returns a :class:`TransferResult`.

    result: a TuningResult (or TransferResult, to chain new tasks), or a model loaded with
    ``load_model(path, problem=...)`` (the objective is needed). task: the new task (dict).
    budget: evaluations of the new task, initial design included; n_initial: centred initial
    design size (default ``max(1, round(0.3 * budget))``; the first point is the TLA1 prediction).
    history: SQLite file receiving the evaluations (its task list is the tuned tasks followed by
    the new one: pass the MLA history to keep everything in one file; the same call resumes a
    killed run). refit: "never" | "auto" | k (module docstring). extend_restarts: restarts of
    ``LCM.extend``; refit_restarts: of a full refit; pso_particles, pso_iters: the acquisition search.
    repeats, aggregate, timeout, noise, pruner, executor, max_in_flight, max_time, progress, comm:
    as in :func:`gptask.tune` (the same loop runs: one trial of the new task at a time, or
    ``max_in_flight`` on the executor; under MPI rank 0 alone writes the history, full refits
    spread their restarts over the ranks). journal: where finished runs wait for their commit, as in
    :func:`gptask.tune`.
    """
    tm = as_transfer_model(result)
    if tm.problem is None:
        raise TypeError("tune_new_task needs the objective: load the model with load_model(path, problem=...)")
    if tm.problem.outputs is not None:
        raise ValueError(f"tune_new_task tunes problems whose objective returns one number; problem "
                         f"{tm.problem.name!r} names outputs {list(tm.problem.outputs.names)}: tune the new task "
                         "with gptask.tune and the other tasks instead")
    max_time = check_seconds("max_time", max_time)
    max_in_flight = check_executor(executor, max_in_flight, comm, False, (tm.problem.objective, noise, pruner))
    evaluator = Evaluator(tm.problem.objective, repeats=repeats, aggregate=aggregate, timeout=timeout, noise=noise,
                          pruner=pruner)
    stop_at = None if max_time is None else time.monotonic() + max_time
    with NewTaskTuner(result, task, budget, n_initial, history, refit, seed, comm,
                      extend_restarts=extend_restarts, refit_restarts=refit_restarts,
                      pso_particles=pso_particles, pso_iters=pso_iters, journal=journal) as tuner:
        return run(tuner, evaluator, progress=progress, stop_at=stop_at, executor=executor,
                   max_in_flight=max_in_flight)
