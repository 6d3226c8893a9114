"""What transfer learns from: a tuned model (a tuning result or a saved model file), and TLA1's G_j.

:class:`TransferModel` holds everything transfer needs: the spaces, the problem signature, the tuned
tasks with their best configurations, the LCM and its output transform, and (fitted on first use)
the :class:`OptimaModel`. It is built from a tuning result (:meth:`TransferModel.from_result`, any
object with the fields of :class:`gptask.TuningResult`) or read from a model file by
:func:`gptask.load_model`.

:class:`OptimaModel` is the paper's G_j (shared/seeds/004, sec. 5): one single-output GP per
*encoded column* of the parameter space maps the encoded task (``task_space.encode``) to that
column of the encoded optimum. A single-output GP is the project's LCM with one task and one latent
process (``LCM(n_latent=1).fit([X], [y])``) on the column standardised to mean 0 and std 1
(:class:`ScalarGP`; a column that is the same for every task is predicted as that constant, std 0).

Imports: the model layer, spaces, transforms and trials only; never the tuning engine, the result
module or the model-file module, which all build on this one.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..model.numerics import LCM
from ..problem.definition import Problem
from ..data.provenance import data_provenance
from ..core.seeding import int_seed
from ..space.dimensions import Space
from ..model.transforms import OutputTransform
from ..data.trials import point_key
from .joint import JointModel

log = logging.getLogger(__name__)

__all__ = ["ScalarGP", "OptimaModel", "TransferModel", "as_transfer_model", "joint_inputs", "GP_RESTARTS", "GP_MAXITER",
           "ONE_TASK_STD",
           "OVER_TASKS_KERNEL", "OVER_TASKS_TREND", "OVER_TASKS_STARTS", "OVER_TASKS_CALIBRATE",
           "OVER_TASKS_FIT_POINTS"]

#: restarts of the small single-output GP fits (TLA1 G_j)
GP_RESTARTS = 2
#: L-BFGS-B iteration cap of those fits (and of the over-tasks GP's fit)
GP_MAXITER = 300
#: TLA1 from one tuned task: the std of each encoded column of the predicted optimum, that of a column uniform on
#: [0, 1] (one task says nothing of how the optimum moves with the task; TLA2 samples this widely around its best)
ONE_TASK_STD = 1.0 / np.sqrt(12.0)

# ---- the GP over tasks of new-task prediction (gptask.transfer.predict) -------------------------------
#: its kernel over the encoded tasks
OVER_TASKS_KERNEL = "rbf"
#: mean function: True, a linear trend in the encoded task coordinates (universal kriging) whenever
#: the tuned tasks outnumber its coefficients by 2 or more and their encodings span it; False, a
#: constant. Measured on the 16-core PDGEQRF timings, leave-one-size-out (bench/run_free.py loto,
#: BENCHMARKS.md): with the shared hyperparameters the fitted length scales are long (about the
#: width of the task space) and the constant-mean GP already follows the trend into the corners;
#: the linear trend gave MAPE 18.3 % against 17.7 %, Spearman 0.884 against 0.890 (worse at the
#: 1000 x 1000 corner, 22.6 % against 18.5 %), so it stays available but off
OVER_TASKS_TREND = False
#: its hyperparameters are fitted on the tuned tasks' values at (at most) this many of their observed
#: configurations, evenly spaced
OVER_TASKS_FIT_POINTS = 256
#: fixed starts of its REML fit, (log length scale of every task column, log nugget)
OVER_TASKS_STARTS = ((0.0, -3.0), (-1.2, -5.0), (1.1, -2.0))
#: multiply a new task's over-tasks variance by its leave-one-task-out factor (predict.over_tasks_factor,
#: the LCM's calibrated predictive done over tasks). Off: measured on known families (tests/test_transfer.py,
#: bench/results/calibrated.md: W(t, x) = sin(a t + b x) + c cos(2 a t x), 5/7/10 tuned tasks, 41 new tasks
#: x 30 configurations, 6 draws) the raw intervals already cover 94-100 % (the REML nugget absorbs what the
#: tasks do not explain); the factor, >= 1 by construction, was above 1 on 5 of 18 and took 94.1 % to 99.6 %
#: and 98.3 % to 100 %, past the 99 % the issue allows, and never raised a coverage below 95 %
OVER_TASKS_CALIBRATE = False


class ScalarGP:
    """A standardised single-output GP ``task encoding (n, c) -> value (n,)`` on the LCM engine.

    mu, sd: the standardisation of the targets; gp: the fitted one-task LCM, or None for a constant
    target (std ~ 0), kept as that constant with zero std.
    """

    def __init__(self, mu: float, sd: float, gp: LCM | None) -> None:
        self.mu, self.sd, self.gp = float(mu), float(sd), gp

    @classmethod
    def fit(cls, X: np.ndarray, y: np.ndarray, seed: int = 0, restarts: int = GP_RESTARTS,
            init: "ScalarGP | None" = None) -> "ScalarGP":
        """Fit on X (n, c) encoded tasks and y (n,) targets; ``init`` warm-starts the GP."""
        y = np.asarray(y, dtype=float)
        mu, sd = float(np.mean(y)), float(np.std(y))
        if len(y) < 2 or sd <= 1e-9 * max(1.0, abs(mu)):
            return cls(mu, 0.0, None)
        gp = LCM(n_latent=1, kernel="rbf")
        start = init.gp if init is not None and init.gp is not None else None
        gp.fit([X], [(y - mu) / sd], restarts=restarts, seed=seed, init=start, maxiter=GP_MAXITER)
        return cls(mu, sd, gp)

    def predict(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Mean and std (n,) at X (n, c), the std including the GP's noise term."""
        X = np.atleast_2d(X)
        if self.gp is None:
            return np.full(len(X), self.mu), np.zeros(len(X))
        m, v = self.gp.predict(0, X, include_noise=True)
        return self.mu + self.sd * m, self.sd * np.sqrt(np.maximum(v, 0.0))


class OptimaModel:
    """TLA1's G_j: one :class:`ScalarGP` per encoded parameter column.

    task_X: (n, c) encoded tasks; optima: (n, D) encoded best configurations of those tasks. From one
    tuned task (n = 1) every task's predicted optimum is that task's best, each column's std ONE_TASK_STD (0 at the
    tuned task).
    """

    def __init__(self, task_X: np.ndarray, optima: np.ndarray, gps: list[ScalarGP]) -> None:
        self.task_X, self.optima, self.gps = task_X, optima, gps

    @classmethod
    def fit(cls, task_X: np.ndarray, optima: np.ndarray, seed: int = 0,
            init: "OptimaModel | None" = None) -> "OptimaModel":
        """init: a fitted OptimaModel of the same space whose GPs warm-start these (1 restart each)."""
        task_X = np.asarray(task_X, dtype=float)
        optima = np.asarray(optima, dtype=float)
        if len(task_X) < 1:
            raise ValueError("TLA1 needs the best configuration of a tuned task, and no task has a successful run")
        if len(task_X) == 1:
            log.info("TLA1 from one tuned task: every task's predicted optimum is its best configuration, "
                     "with the std of a uniform column (%.3g, encoded)", ONE_TASK_STD)
            return cls(task_X, optima, [ScalarGP(float(v), 0.0, None) for v in optima[0]])
        gps = [ScalarGP.fit(task_X, optima[:, j], seed=int_seed(seed, j),
                            restarts=GP_RESTARTS if init is None else 1,
                            init=None if init is None else init.gps[j]) for j in range(optima.shape[1])]
        return cls(task_X, optima, gps)

    def predict(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Raw encoded optimum (D,) and its std (D,) at one encoded task x (c,)."""
        if len(self.task_X) == 1:  # the tuned task's own best is known; any other task's as uncertain as can be
            same = np.allclose(np.asarray(x, float), self.task_X[0], rtol=0.0, atol=1e-12)
            return self.optima[0].astype(float), np.full(self.optima.shape[1], 0.0 if same else ONE_TASK_STD)
        out = [g.predict(np.asarray(x, float).reshape(1, -1)) for g in self.gps]
        return np.array([m[0] for m, _ in out]), np.array([s[0] for _, s in out])


class TransferModel:
    """Everything transfer needs, from a tuning result or a model file (``load_model``).

    task_space, param_space: the spaces; signature: the problem signature (dict); tasks: tuned task
    dicts; best: per task ``(params, value)`` or None; model: the LCM (task i = tasks[i]);
    transform: its output transform; problem: the :class:`Problem` when known (a loaded model
    without ``problem=`` has no constraints and no objective); optima: the TLA1 GPs when already
    fitted (else fitted on first use of :attr:`optima`); accuracy: a stored held-out report summary
    (dict) or None; extended_since_fit: tasks added by ``LCM.extend`` since the model's last full fit;
    provenance: the machines its data were measured on (:func:`gptask.data.provenance.data_provenance`), or
    None when unknown (a model file written before machines were recorded); unit: the objective's
    unit (the problem's, else the one a model file stored; "" when unknown).
    """

    def __init__(self, task_space: Space, param_space: Space, signature: dict, tasks: list[dict],
                 best: list[tuple[dict, float] | None], model: LCM, transform: OutputTransform,
                 problem: Problem | None = None, optima: OptimaModel | None = None,
                 accuracy: dict | None = None, extended_since_fit: int = 0, joint: JointModel | None = None,
                 provenance: dict | None = None, unit: str = "") -> None:
        if not isinstance(model, LCM):
            raise ValueError("the result has no fitted model (no evaluation completed?)")
        if model.n_tasks != len(tasks):
            raise ValueError(f"the model has {model.n_tasks} tasks but {len(tasks)} tasks are listed")
        if transform is None or len(transform.mu) != len(tasks):
            raise ValueError("the result has no output transform matching its tasks")
        self.task_space, self.param_space = task_space, param_space
        self.signature, self.tasks, self.best = signature, tasks, best
        self.model, self.transform, self.problem = model, transform, problem
        self._optima = optima
        self._joint = joint
        self._warned_joint = False
        self.accuracy = accuracy
        self.extended_since_fit = int(extended_since_fit)
        self.provenance = provenance
        self.unit = str(getattr(problem, "unit", "") or unit or "")
        self._keys = {point_key(t): i for i, t in enumerate(tasks)}

    @classmethod
    def from_result(cls, result: Any) -> "TransferModel":
        """From a :class:`gptask.TuningResult` (or a TLA2 result): its problem, tasks, best
        configurations, model and transform."""
        best: list[tuple[dict, float] | None] = []
        known = getattr(result, "known_best", None) or []
        for i in range(len(result.tasks)):
            try:
                best.append(result.best(i))
            except ValueError:
                best.append(known[i] if i < len(known) else None)
        return cls(result.problem.task_space, result.problem.param_space, result.problem.signature(),
                   [dict(t) for t in result.tasks], best, result.model, result.transform, result.problem,
                   extended_since_fit=getattr(result, "extended_since_fit", 0),
                   provenance=data_provenance(result.history, getattr(result, "machines", None) or {},
                                              len(result.tasks)))

    @property
    def optima(self) -> OptimaModel:
        """The TLA1 GPs (fitted on first use)."""
        if self._optima is None:
            idx = [i for i, b in enumerate(self.best) if b is not None]
            tx = self.task_space.encode([self.tasks[i] for i in idx]) if idx else np.empty((0, 1))
            opt = self.param_space.encode([self.best[i][0] for i in idx]) if idx else np.empty((0, 1))
            self._optima = OptimaModel.fit(tx, opt)
        return self._optima

    @property
    def stored_joint(self) -> JointModel | None:
        """The joint new-task model when already fitted (or read from a model file), else None."""
        return self._joint

    def joint(self) -> JointModel | None:
        """The joint new-task model (:mod:`gptask.transfer.joint`), fitted on first use on the tuned
        tasks' data when the problem declares features or a cost model; None when it declares
        neither, or when an objective value is not positive (the model is in log units).

        A model file read without its problem has no features (they are code, not stored): it
        returns None then, with a warning, and new tasks are predicted over tasks."""
        problem = self.problem
        if self._joint is not None:
            if problem is None:
                if not self._warned_joint:
                    log.warning("this model predicts new tasks from its problem's features %s, which are code "
                                "and not stored: without the problem (gt.load_model(path, problem=...), "
                                "--problem) new tasks are predicted by the GP over tasks, less accurately",
                                self._joint.names)
                    self._warned_joint = True
                return None
            return self._joint
        if problem is None or not problem.describes_points:
            return None
        tuned = [j for j in range(len(self.tasks)) if self.model.n_points[j] > 0]
        Xs, ys = self.model.data()
        values = np.concatenate([self.transform.backward(j, ys[j]) for j in tuned])
        if not np.all(values > 0.0):
            return None
        tasks = [self.tasks[j] for j in tuned for _ in range(len(ys[j]))]
        self._joint = JointModel.fit(*joint_inputs(problem, tasks, np.vstack([Xs[j] for j in tuned])), np.log(values))
        return self._joint

    def task_index(self, task: Mapping[str, Any]) -> int | None:
        """Index of ``task`` among the tuned tasks, or None for a new task."""
        return self._keys.get(point_key(task))

    def validate_task(self, task: Any) -> dict:
        """``task`` checked against the model's task space; for a model of a run with fidelity
        (docs/fidelity.md) a task without the fidelity values is one at the target fidelity (they are
        filled in)."""
        target = self.target_fidelity
        if target and isinstance(task, Mapping):
            task = {**target, **task}
        return self.task_space.validate(task, what="task")

    @property
    def target_fidelity(self) -> dict | None:
        """The target fidelity of the problem of a run with fidelity, whose task rows hold the
        fidelity values (docs/fidelity.md); None otherwise."""
        target = getattr(self.problem, "target_fidelity", None)
        if not target:  # a model file read without its problem: its stored signature names the target
            stored = self.signature.get("fidelity") if isinstance(self.signature, Mapping) else None
            target = stored.get("target") if isinstance(stored, Mapping) else None
        if not isinstance(target, Mapping) or not target or any(n not in self.task_space.names for n in target):
            return None
        return dict(target)

    def check_at_target(self, task: Mapping[str, Any], what: str) -> None:
        """ValueError when ``task`` (validated) of a model of a run with fidelity is not at its
        target fidelity: ``what`` (e.g. tune_new_task) tunes a new task at the target only."""
        target = self.target_fidelity
        if target and any(task.get(k) != v for k, v in target.items()):
            given = {k: task.get(k) for k in target}
            raise ValueError(f"{what}: a new task is tuned at the target fidelity {target} (results speak of it "
                             f"only); got {given} in task {dict(task)}: leave the fidelity out or give the target's")

    def is_feasible(self, task: Mapping[str, Any]):
        """A feasibility judge for configurations of ``task``, or None when constraints are unknown."""
        if self.problem is None:
            return None
        return lambda p: self.problem.is_feasible(task, p)

    def constraint_text(self, task: Mapping[str, Any]) -> str:
        """The constraints of ``task``, named, for error messages."""
        if self.problem is None:
            return "the constraints"
        names = ", ".join(self.problem.constraint_names()) or "no constraints"
        return f"{names} for task {dict(task)}"

    def __repr__(self) -> str:
        return (f"TransferModel(problem={self.signature.get('name')!r}, tasks={len(self.tasks)}, "
                f"params={self.param_space.names})")


def joint_inputs(problem: Problem, tasks: list[dict], param_X: np.ndarray
                 ) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
    """What the joint model (:class:`~gptask.transfer.joint.JointModel`, its ``fit`` and ``predict``
    in this order) sees of the configurations ``(tasks[k], param_X[k])``, param_X (n, D) encoded:
    the problem's feature names, the (n, d_task) encoded tasks, param_X, the (n, k) features and the
    (n,) log cost estimates (None without a cost model)."""
    params = problem.param_space.decode(param_X)
    names, F = problem.feature_matrix(tasks, params)
    log_cost = np.log(problem.cost_estimates(tasks, params)) if problem.cost_model is not None else None
    return names, problem.task_space.encode(tasks), param_X, F, log_cost


#: the fields a tuning result must have to be transferred from (see TransferModel.from_result)
_RESULT_FIELDS = ("problem", "tasks", "history", "model", "transform", "best")
_CACHE: dict[int, tuple[Any, tuple, TransferModel]] = {}


def as_transfer_model(source: Any) -> TransferModel:
    """A :class:`TransferModel` from a tuning result (cached per result) or a TransferModel.

    A model file is read with :func:`gptask.load_model` first (this layer does no file I/O).
    """
    if isinstance(source, TransferModel):
        return source
    if isinstance(source, (str, bytes)) or hasattr(source, "__fspath__"):
        raise TypeError(f"got the path {source!r}: read a model file with gt.load_model(path, problem=...) "
                        "and pass the model it returns")
    if not all(hasattr(source, f) for f in _RESULT_FIELDS):
        raise TypeError(f"expected a TuningResult or a model loaded with gt.load_model, got {type(source).__name__}")
    key = (id(source.model), id(source.transform), len(source.history), len(source.tasks))
    hit = _CACHE.get(id(source))
    if hit is not None and hit[0]() is source and hit[1] == key:
        return hit[2]
    tm = TransferModel.from_result(source)
    if len(_CACHE) > 16:
        _CACHE.clear()
    _CACHE[id(source)] = (weakref.ref(source), key, tm)
    return tm
