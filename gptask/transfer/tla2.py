"""TLA2: quick tuning of a new task from a tuned model (:func:`tune_new_task`).

GPTune paper (shared/seeds/004) sec. 5, with the choices below made explicit.

1. Centred sampling (paper sec. 5.2.1 with its per-dimension variant): the initial design is the
   TLA1 prediction itself plus ``n_initial - 1`` distinct feasible draws of
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
3. EI + PSO on the new task (``search.maximize`` with ``acquisition.log_ei``); each new point is
   added with ``LCM.append`` (block update, hyperparameters fixed), not a refit.

The new task's output transform: log if the old tasks used log, then the per-task affine map
*transferred* from the old tasks: its ``mu`` and ``log sigma`` are predicted at the new task by
single-output GPs over the encoded tasks fitted to the old tasks' ``mu_i`` and ``log sigma_i``.
It is not estimated from the new task's own data: the centred design samples near-optimal
values, and standardising by them puts the GP's prior mean (0) at the near-optimal level, so EI
would chase variance far from the prediction (observed on the sphere family before this choice).
The transform is fixed for the whole TLA2 run, refits included.

``refit``: "never" (default: only block updates); an integer k (a full refit of every
hyperparameter, warm-started, after every k-th new evaluation); "auto": a full refit when the
model stops predicting the new task, judged by the one-step-ahead standardised error
``e = (z - mean) / std`` of each new observation *before* it is appended (a sequential
leave-future-out check that costs nothing): when the mean of ``e^2`` over the last
``AUTO_WINDOW`` observations exceeds ``AUTO_E2`` (a calibrated model gives 1) and at least
``AUTO_WINDOW`` evaluations passed since the last refit. Also in "auto": when the model already
holds ``AUTO_MAX_EXTENDED`` tasks added by extension since its last full fit (chained TLA2
results), the new task's initial design triggers a full refit instead of an extension.
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

from ..acquisition import log_ei
from ..evaluate import Evaluator
from ..models import LCM
from ..problem import Problem
from ..result import TuningResult
from ..sampling import centred_normal_points, point_key
from ..search import maximize
from ..seeding import STAGE_CENTRED, STAGE_EXTEND, STAGE_REFIT, int_seed, rng
from ..storage import HistoryMismatch, Owner, open_storage
from ..transforms import OutputTransform
from ..trials import Proposal, Trial
from .model import ScalarGP, as_transfer_model
from .tla1 import Prediction, predict_optimum

__all__ = ["TransferResult", "tune_new_task", "sampling_spread"]

log = logging.getLogger(__name__)

#: centred sampling: spread = clip(max(ell / 2, tla1 std), SPREAD_MIN, SPREAD_MAX) per column
SPREAD_MIN, SPREAD_MAX = 0.02, 1.0
#: "auto" refit rule (see module docstring)
AUTO_WINDOW = 3
AUTO_E2 = 4.0
AUTO_MAX_EXTENDED = 3
_STAGE_SEARCH = 21


def sampling_spread(model: LCM, tla1_std: np.ndarray) -> np.ndarray:
    """Per encoded column spread of TLA2's centred sampling (module docstring formula): (D,)."""
    ls = model.lengthscales  # (Q, D)
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
    ({"kind": "extend"|"append"|"refit", "seconds", "n_points"}); refits: how many full refits
    happened; known_best: best (params, value) per task, kept for tasks whose records are not in
    ``history`` (a model loaded from a file); extended_since_fit: tasks added by extension since
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


def _check_count(name: str, value: Any, lo: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, got {value!r}")
    if value < lo:
        raise ValueError(f"{name} must be >= {lo}, got {value}")
    return int(value)


class _NewTaskData:
    """The new task's observations and its output transform (see module docstring).

    The transform is transferred, not estimated: ``mu`` and ``log sigma`` of the new task are
    predicted by GPs over the encoded tasks from the old tasks' transforms. (Standardising by the
    new task's own centred design would put the model's prior mean at the level of near-optimal
    values, and EI would then chase variance far from the prediction.)
    """

    def __init__(self, old: OutputTransform, task_X: np.ndarray, x_new: np.ndarray) -> None:
        self.old = old
        self.X: list[np.ndarray] = []
        self.values: list[float | None] = []
        mu, _ = ScalarGP.fit(task_X, old.mu, seed=1).predict(x_new[None, :])
        ls, _ = ScalarGP.fit(task_X, np.log(old.sigma), seed=2).predict(x_new[None, :])
        self.mu, self.sigma = float(mu[0]), float(max(np.exp(ls[0]), 1e-12))

    def _w(self, v: np.ndarray) -> np.ndarray:
        if self.old.use_log:
            pos = v[v > 0]
            floor = 0.5 * float(pos.min()) if pos.size else 1e-300
            if np.any(v <= 0):
                log.warning("a non-positive objective value under the log transform was clamped to %g", floor)
            return np.log(np.maximum(v, floor))
        return v

    def z(self, values: Sequence[float | None]) -> np.ndarray:
        """Model units for ``values`` (None = failed: the worst observed z, else +2)."""
        ok = np.array([v for v in self.values if v is not None], dtype=float)
        worst = float(np.max((self._w(ok) - self.mu) / self.sigma)) if ok.size else 2.0
        out = []
        for v in values:
            out.append(worst if v is None else float((self._w(np.array([v]))[0] - self.mu) / self.sigma))
        return np.array(out)

    def transform(self) -> OutputTransform:
        return OutputTransform(self.old.use_log, np.append(self.old.mu, self.mu), np.append(self.old.sigma, self.sigma))


class _NewTaskHistory:
    """TLA2's trials of the new task (index ``index``) in the history: each written as PENDING before
    its evaluation and finished after it, by rank 0 (``root``); every rank reads the finished ones
    (``stored``, in order) to resume a killed run."""

    def __init__(self, path: Any, problem: Problem, tasks: list[dict], index: int, root: bool) -> None:
        self.store = open_storage(path, problem.signature())
        self.store.set_tasks(tasks)
        self.index, self.root = index, root
        self.owner = Owner.this_process("tla2")
        self.stored = [t for t in self.store.trials(task_index=index) if t.status.finished]

    def run(self, task: dict, params: dict, source: str, evaluate: Any) -> Trial:
        """Claim, evaluate (``evaluate()`` -> Outcome) and record one configuration of the new task."""
        if not self.root:
            out = evaluate()
            return Trial(0, self.index, task, params, out.status, out.value, out.samples, out.reason, out.extra,
                         source, duration=out.duration)
        trial = self.store.add_trials([Proposal(self.index, task, params, source)], self.owner)[0]
        if trial is None:
            raise HistoryMismatch(f"history {self.store.path} already holds {params} for the new task {task} as a "
                                  "pending trial of a live process: is another TLA2 run using this history?")
        try:
            out = evaluate()
        except BaseException:
            self.store.release(self.owner)  # stays pending for the next run
            raise
        return self.store.finish(trial.id, out.status, out.value, out.samples, out.reason, out.extra, out.duration)

    def close(self) -> None:
        self.store.close()


def _full_fit(model: LCM, X_old: list, y_old: list, data: _NewTaskData, init_params: dict, restarts: int,
              seed: int, comm: Any) -> LCM:
    Xs = X_old + [np.vstack(data.X)]
    ys = y_old + [data.z(data.values)]
    new = LCM(model.n_latent, model.kernel, model.rank)
    try:
        return new.fit(Xs, ys, restarts=restarts, seed=seed, init=init_params, comm=comm)
    except Exception as exc:  # noqa: BLE001 - a failed warm start: retry cold with more restarts
        log.warning("warm-started refit failed (%s); refitting from scratch", exc)
        return LCM(model.n_latent, model.kernel, model.rank).fit(Xs, ys, restarts=max(restarts, 3), seed=seed,
                                                                  comm=comm)


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
    extend_restarts: int = 4,
    refit_restarts: int = 1,
    pso_particles: int = 40,
    pso_iters: int = 40,
) -> TransferResult:
    """TLA2: tune one new task starting from a tuned model; returns a :class:`TransferResult`.

    result: a TuningResult (or TransferResult, to chain new tasks), or a model loaded with
    ``load_model(path, problem=...)`` (the objective is needed). task: the new task (dict).
    budget: evaluations of the new task, initial design included; n_initial: centred initial
    design size (default ``max(1, round(0.3 * budget))``; the first point is the TLA1 prediction).
    history: SQLite file receiving the evaluations (its task list is the tuned tasks followed by
    the new one: pass the MLA history to keep everything in one file; the same call resumes a
    killed run). refit: "never" | "auto" | k (module docstring). repeats, aggregate, timeout: as in
    :func:`gptask.tune`. extend_restarts: restarts of ``LCM.extend``; refit_restarts: of a full
    refit; pso_particles, pso_iters: the acquisition search. comm: an mpi4py communicator: every
    rank runs the same loop (same seeds, same proposals, each rank evaluates), full refits spread
    their restarts over the ranks, and only rank 0 writes the history.
    """
    tm = as_transfer_model(result)
    problem = tm.problem
    if problem is None:
        raise TypeError("tune_new_task needs the objective: load the model with load_model(path, problem=...)")
    task = tm.validate_task(task)
    if tm.task_index(task) is not None:
        raise ValueError(f"task {task} is already tuned in this model; resume its tuning with gt.tune and its history")
    budget = _check_count("budget", budget, 1)
    n_initial = max(1, min(budget, int(round(0.3 * budget)))) if n_initial is None else _check_count(
        "n_initial", n_initial, 1)
    if n_initial > budget:
        raise ValueError(f"`n_initial <= budget` must hold, got n_initial={n_initial}, budget={budget}")
    refit = _check_refit(refit)
    seed = _check_count("seed", seed, 0)
    evaluator = Evaluator(problem.objective, repeats=repeats, aggregate=aggregate, timeout=timeout)
    space = problem.param_space
    feasible = tm.is_feasible(task)
    describe = tm.constraint_text(task)
    T = len(tm.tasks)
    root = comm is None or comm.Get_rank() == 0

    hist = _NewTaskHistory(history, problem, tm.tasks + [task], T, root)
    stored = list(hist.stored)
    old_records = list(result.history) if isinstance(result, TuningResult) else []
    new_records: list[Trial] = []

    def run(params: dict, source: str) -> dict:
        if stored:
            rec = stored.pop(0)
            if point_key(rec["params"]) != point_key(params) and source == "initial":
                log.info("resumed history differs from the design at %s; using the stored run", rec["params"])
            new_records.append(rec)
            return rec
        rec = hist.run(task, params, source, lambda: evaluator(task, params))
        new_records.append(rec)
        return rec

    # 1. TLA1 prediction and centred initial design
    pred = predict_optimum(tm, task)
    spread = sampling_spread(tm.model, np.array([pred.std[d.name] for d in space.dimensions
                                                 for _ in range(d.n_columns)]))
    design = [pred.params]
    if n_initial > 1:
        design += centred_normal_points(space, pred.encoded, spread, n_initial - 1, rng(seed, STAGE_CENTRED, T),
                                        feasible, exclude={point_key(pred.params)}, describe=describe)
    data = _NewTaskData(tm.transform, tm.task_space.encode(tm.tasks), tm.task_space.encode([task])[0])
    for p in design:
        rec = run(p, "initial")
        data.X.append(space.encode([rec["params"]]))
        data.values.append(rec["value"] if rec["status"] == "complete" else None)

    # 2. extend the model by the new task (or refit everything, see "auto")
    X_old, y_old = tm.model.data()
    updates: list[dict] = []
    refits = 0
    extended = tm.extended_since_fit
    t0 = time.perf_counter()
    if refit == "auto" and extended >= AUTO_MAX_EXTENDED:
        tmp = tm.model.extend(np.vstack(data.X), data.z(data.values), restarts=1, seed=int_seed(seed, STAGE_EXTEND))
        model = _full_fit(tm.model, X_old, y_old, data, tmp.get_params(), refit_restarts,
                          int_seed(seed, STAGE_REFIT, 0), comm)
        refits, extended, kind = 1, 0, "refit"
    else:
        model = tm.model.extend(np.vstack(data.X), data.z(data.values), restarts=extend_restarts,
                                seed=int_seed(seed, STAGE_EXTEND))
        extended, kind = extended + 1, "extend"
    updates.append({"kind": kind, "seconds": time.perf_counter() - t0, "n_points": int(model.n_points.sum())})

    # 3. EI + PSO on the new task, block updates between refits
    errors: list[float] = []
    since_refit = 0
    old_best = [b for b in tm.best if b is not None]
    anchors = space.encode([b[0] for b in sorted(old_best, key=lambda b: b[1])][: max(1, pso_particles // 4)]) \
        if old_best else None
    while len(data.values) < budget:
        X_seen = np.vstack(data.X)
        z_seen = data.z(data.values)
        ok = [k for k, v in enumerate(data.values) if v is not None]
        best_z = float(np.min(z_seen[ok])) if ok else float(np.min(model.predict(T, X_seen)[0]))
        if stored:
            params = stored[0]["params"]
        else:
            m_ = model

            def acquisition(x: np.ndarray, m_=m_, best_z=best_z) -> np.ndarray:
                mean, var = m_.predict(T, x)
                return log_ei(mean, np.sqrt(np.maximum(var, 0.0)), best_z)

            inc = [X_seen[ok[int(np.argmin(z_seen[ok]))]]] if ok else []
            init = np.vstack([*inc, pred.encoded[None, :]] + ([anchors] if anchors is not None else []))
            res = maximize(acquisition, space, seed=int_seed(seed, _STAGE_SEARCH, T, len(data.values)),
                           is_feasible=feasible, exclude=X_seen, init=init, n_particles=pso_particles,
                           iters=pso_iters)
            params = res.params
        x = space.encode([params])
        mean, var = model.predict(T, x, include_noise=True)
        rec = run(params, "search")
        x = space.encode([rec["params"]])
        data.X.append(x)
        data.values.append(rec["value"] if rec["status"] == "complete" else None)
        z_new = float(data.z([data.values[-1]])[0])
        errors.append((z_new - float(mean[0])) ** 2 / float(var[0]))
        since_refit += 1
        due = (isinstance(refit, int) and since_refit >= refit) or (
            refit == "auto" and since_refit >= AUTO_WINDOW and float(np.mean(errors[-AUTO_WINDOW:])) > AUTO_E2)
        t0 = time.perf_counter()
        if due:
            model = _full_fit(model, X_old, y_old, data, model.get_params(), refit_restarts,
                              int_seed(seed, STAGE_REFIT, len(data.values)), comm)
            refits += 1
            since_refit = 0
            extended = 0
            kind = "refit"
            log.info("TLA2: full refit after %d new-task evaluations", len(data.values))
        else:
            model = model.append(T, x, np.array([z_new]))
            kind = "append"
        updates.append({"kind": kind, "seconds": time.perf_counter() - t0, "n_points": int(model.n_points.sum())})

    hist.close()
    new_tr = data.transform()
    known = list(tm.best)
    ok_new = [r for r in new_records if r["status"] == "complete"]
    known.append((dict(min(ok_new, key=lambda r: r["value"])["params"]),
                  float(min(r["value"] for r in ok_new))) if ok_new else None)
    return TransferResult(problem, tm.tasks + [task], old_records + new_records, model, new_tr, task_index=T,
                          prediction=pred, updates=updates, refits=refits, known_best=known,
                          extended_since_fit=extended)
