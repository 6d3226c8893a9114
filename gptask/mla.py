"""The multitask learning autotuner (MLA): ask/tell over a task set, and ``tune`` as a loop over it.

One iteration: fit one LCM jointly on every task's data (warm-started from the previous fit), then
for every task that still has budget maximise log-EI of *its* output with PSO, and evaluate one new
configuration per task. Before the first fit each task gets its own Latin hypercube of
``n_initial`` feasible configurations (heterotopic sampling).

Failed evaluations (exception, NaN, inf, timeout) are stored with their reason, never proposed
again, and shown to the model as the worst value observed for that task (see
:mod:`gptask.transforms`), so the search learns to stay away from failing regions.

Reproducibility: the task LHS, each task's initial design and each search draw their randomness from
``np.random.SeedSequence([seed, stage, task, count])``; a resumed run therefore asks for the same
points an uninterrupted run would have (up to the warm start of the model fit).
"""

from __future__ import annotations

import logging
import numbers
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .acquisition import log_ei
from .evaluate import EvaluationFailed, Evaluator, Outcome, _as_finite
from .history import History, HistoryMismatch
from .models import LCM
from .parallel import allgather_json, allgather_rows, bcast_json, blas_threads_per_rank, collective, my_items, rank_size
from .problem import Problem
from .recommend import is_confirmation
from .result import TuningResult
from .sampling import feasible_lhs, lhs_points, point_key
from .search import maximize
from .space import Space
from .transforms import OutputTransform

__all__ = ["Proposal", "Tuner", "tune", "training_data"]

log = logging.getLogger(__name__)

_STAGE_TASKS, _STAGE_INITIAL, _STAGE_SEARCH, _STAGE_FIT = 0, 1, 2, 3


def _rng(seed: int, *keys: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence([int(seed), *map(int, keys)]))


def _int_seed(seed: int, *keys: int) -> int:
    return int(np.random.SeedSequence([int(seed), *map(int, keys)]).generate_state(1)[0])


@dataclass(frozen=True)
class Proposal:
    """A configuration to evaluate: task index, the task dict, the parameter dict, and why
    ("initial" for the design, "search" for an acquisition maximiser)."""

    task_index: int
    task: dict
    params: dict
    source: str


def _check_int(name: str, value: Any, lo: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, got {value!r}")
    if value < lo:
        raise ValueError(f"{name} must be >= {lo}, got {value}")
    return int(value)


def resolve_tasks(problem: Problem, tasks: int | Sequence[Mapping[str, Any]], seed: int) -> list[dict]:
    """A list of validated task dicts: ``tasks`` itself, or an LHS of ``tasks`` points of the task space."""
    if isinstance(tasks, numbers.Integral) and not isinstance(tasks, bool):
        n = _check_int("tasks", tasks, 1)
        return lhs_points(problem.task_space, n, _rng(seed, _STAGE_TASKS))
    if isinstance(tasks, Mapping) or not isinstance(tasks, Sequence) or isinstance(tasks, str):
        raise TypeError(f"tasks must be a number of tasks or a list of task dicts, got {tasks!r}")
    if len(tasks) == 0:
        raise ValueError("tasks must not be empty: give at least one task")
    out = [problem.task_space.validate(t, what=f"task #{i}") for i, t in enumerate(tasks)]
    keys = [point_key(t) for t in out]
    if len(set(keys)) != len(keys):
        raise ValueError(f"tasks must be distinct, got repeated tasks in {out}")
    return out


def training_data(space: Space, records: Sequence[Mapping[str, Any]], n_tasks: int,
                  use_log: bool) -> tuple[list[np.ndarray], list[np.ndarray], OutputTransform]:
    """What the model is fitted on: per task, the encoded configurations ``(n_i, D)`` of its records
    (complete and failed) and their outputs ``(n_i,)`` through the output transform (log or not,
    then per-task standardisation), failed ones imputed with the task's worst transformed value
    (the worst over all tasks for a task without a complete one); and the transform."""
    X, values, failed = [], [], []
    for i in range(n_tasks):
        recs = [r for r in records if r["task_index"] == i]
        X.append(space.encode([r["params"] for r in recs]) if recs else np.empty((0, space.n_columns)))
        values.append(np.array([r["value"] for r in recs if r["status"] == "complete"], dtype=float))
        failed.append(np.array([r["status"] != "complete" for r in recs], dtype=bool))
    transform = OutputTransform.fit(values, use_log=use_log)
    z_all = [transform.forward(i, v) for i, v in enumerate(values) if v.size]
    global_worst = max((float(z.max()) for z in z_all), default=1.0)
    Y = []
    for i in range(n_tasks):
        z = np.empty(len(failed[i]))
        z_ok = transform.forward(i, values[i])
        z[~failed[i]] = z_ok
        z[failed[i]] = float(z_ok.max()) if z_ok.size else global_worst
        Y.append(z)
    return X, Y, transform


class Tuner:
    """Ask/tell multitask tuner. ``tune`` is a loop over it; batch-scheduler users drive it directly:

    >>> tuner = Tuner(problem, tasks=4, budget=20, n_initial=8, history="runs.sqlite")
    >>> while not tuner.done:
    ...     for p in tuner.ask():
    ...         tuner.tell(p, my_launcher(p.task, p.params))   # a float, an Outcome, or None (failed)
    """

    def __init__(
        self,
        problem: Problem,
        tasks: int | Sequence[Mapping[str, Any]],
        budget: int = 20,
        n_initial: int | None = None,
        seed: int = 0,
        history: str | Path | None = None,
        n_latent: int | None = None,
        kernel: str = "rbf",
        restarts: int = 3,
        refit_restarts: int = 1,
        pso_particles: int = 40,
        pso_iters: int = 40,
        output_transform: str = "auto",
        comm: Any = None,
    ) -> None:
        if not isinstance(problem, Problem):
            raise TypeError(f"problem must be a gptask.Problem, got {type(problem).__name__}")
        self.problem = problem
        self.budget = _check_int("budget", budget, 1)
        self.n_initial = min(self.budget, max(2, self.budget // 2)) if n_initial is None else _check_int(
            "n_initial", n_initial, 1)
        if self.n_initial > self.budget:
            raise ValueError(f"`n_initial <= budget` must hold, got n_initial={n_initial}, budget={budget}")
        self.seed = _check_int("seed", seed, 0)
        self.restarts = _check_int("restarts", restarts, 1)
        self.refit_restarts = _check_int("refit_restarts", refit_restarts, 1)
        self.pso_particles = _check_int("pso_particles", pso_particles, 2)
        self.pso_iters = _check_int("pso_iters", pso_iters, 1)
        if output_transform not in ("auto", "log", "none"):
            raise ValueError(f"output_transform must be 'auto', 'log' or 'none', got {output_transform!r}")
        self.output_transform = output_transform
        self.comm = comm
        self.rank, self.size = rank_size(comm)
        # rank 0 alone opens and writes the history; the other ranks receive its content as JSON
        self.history: History | None = None
        opened = collective(lambda: self._open_history(history, tasks) if self.rank == 0 else None,
                            comm, "opening the history")
        state = bcast_json(opened, comm)
        self.tasks: list[dict] = state["tasks"]
        self.records: list[dict] = state["records"]
        self.confirmations: list[dict] = state["confirmations"]
        self._warm = state["warm"]
        self.iteration = int(state["iteration"])
        # log of the outputs or not: fixed by the user, or decided once by likelihood ("auto")
        self._use_log: bool | None = {"log": True, "none": False}.get(output_transform, state["use_log"])
        self.n_tasks = len(self.tasks)
        if n_latent is None:
            n_latent = min(self.n_tasks, 4)
        self.n_latent = _check_int("n_latent", n_latent, 1)
        if kernel not in ("rbf", "matern52"):
            raise ValueError(f"kernel must be 'rbf' or 'matern52', got {kernel!r}")
        self.kernel = kernel
        if self.history is not None:
            self.history.set_meta("kernel", kernel)  # to rebuild the model from the file (gptask show)
        self.model: LCM | None = None
        self.transform: OutputTransform | None = None
        self._initial: dict[int, list[dict]] = {}

    def _open_history(self, path: str | Path | None, tasks: Any) -> dict[str, Any]:
        """Open (or create) the history, check it belongs to this run, and return its content."""
        history = History(path, self.problem.signature())
        stored_seed = history.get_meta("seed")
        if stored_seed is not None and stored_seed != self.seed:
            raise HistoryMismatch(
                f"history {path} was written with seed={stored_seed}, this run has seed={self.seed}; "
                "resume with the same seed or use another history file"
            )
        stored_tasks = history.tasks()
        if stored_tasks and isinstance(tasks, numbers.Integral) and not isinstance(tasks, bool):
            if tasks != len(stored_tasks):
                raise HistoryMismatch(f"history {path} holds {len(stored_tasks)} tasks, this run asks for {tasks}")
            task_list = stored_tasks
        else:
            task_list = resolve_tasks(self.problem, tasks, self.seed)
            history.set_tasks(task_list)
        history.set_meta("seed", self.seed)
        # confirmation runs (result.recommend(confirm=k)) are not tuning evaluations: no budget, no model
        records = history.records()
        state = {"tasks": history.tasks(), "records": [r for r in records if not is_confirmation(r)],
                 "confirmations": [r for r in records if is_confirmation(r)], "warm": history.last_model(),
                 "iteration": len(history.models()), "use_log": history.get_meta("use_log")}
        self.history = history
        return state

    # ---- bookkeeping -------------------------------------------------------------------------
    def _task_records(self, i: int) -> list[dict]:
        return [r for r in self.records if r["task_index"] == i]

    def count(self, i: int) -> int:
        """Finished evaluations (complete or failed) of task ``i``."""
        return sum(1 for r in self.records if r["task_index"] == i)

    @property
    def done(self) -> bool:
        return all(self.count(i) >= self.budget for i in range(self.n_tasks))

    def _feasible_for(self, i: int):
        task = self.tasks[i]
        return lambda p: self.problem.is_feasible(task, p)

    def _describe_constraints(self, i: int) -> str:
        names = ", ".join(self.problem.constraint_names()) or "no constraints"
        return f"{names} of problem {self.problem.name!r} for task {self.tasks[i]}"

    def initial_design(self, i: int) -> list[dict]:
        """Task ``i``'s own LHS of ``n_initial`` feasible configurations (deterministic in the seed)."""
        if i not in self._initial:
            self._initial[i] = feasible_lhs(
                self.problem.param_space, self.n_initial, _rng(self.seed, _STAGE_INITIAL, i),
                self._feasible_for(i), describe=self._describe_constraints(i),
            )
        return self._initial[i]

    # ---- ask ---------------------------------------------------------------------------------
    def ask(self) -> list[Proposal]:
        """The next configurations to evaluate: the rest of the initial designs if any task still
        needs them, otherwise one acquisition maximiser per task with budget left."""
        initial: list[Proposal] = []
        for i in range(self.n_tasks):
            need = self.n_initial - self.count(i)
            if need <= 0:
                continue
            done_keys = {point_key(r["params"]) for r in self._task_records(i)}
            todo = [p for p in self.initial_design(i) if point_key(p) not in done_keys][:need]
            initial += [Proposal(i, dict(self.tasks[i]), p, "initial") for p in todo]
        if initial:
            return initial
        active = [i for i in range(self.n_tasks) if self.count(i) < self.budget]
        if not active:
            return []
        self.fit_model()
        return self.propose(active)

    def propose(self, active: Sequence[int]) -> list[Proposal]:
        """One acquisition maximiser per task in ``active`` from the current model; the searches are
        spread over the ranks (task ``active[k]`` on rank ``k % size``) and gathered on all."""
        local = collective(lambda: {k: self._search(active[k]) for k in my_items(len(active), self.comm)},
                           self.comm, "acquisition search")
        rows = allgather_rows(local, len(active), self.problem.param_space.n_columns, self.comm)
        params = self.problem.param_space.decode(rows)
        return [Proposal(i, dict(self.tasks[i]), p, "search") for i, p in zip(active, params)]

    def _complete_values(self) -> list[np.ndarray]:
        return [np.array([r["value"] for r in self._task_records(i) if r["status"] == "complete"], dtype=float)
                for i in range(self.n_tasks)]

    def _model_data(self, use_log: bool) -> tuple[list[np.ndarray], list[np.ndarray], OutputTransform]:
        """Encoded inputs and transformed outputs per task (failed points imputed), and the transform."""
        return training_data(self.problem.param_space, self.records, self.n_tasks, use_log)

    def fit_model(self) -> LCM:
        """Fit the LCM on everything evaluated so far (warm-started); stores it in the history."""
        values = self._complete_values()
        positive = all(bool(np.all(v > 0)) for v in values)
        if self._use_log and not positive:
            log.warning("output_transform='log' needs positive values; a value <= 0 was observed, "
                        "so the outputs are modelled without the log")
            self._use_log = False
        if self._use_log is None and not positive:
            self._set_use_log(False)
        if self._use_log is None:
            model, transform, n_points = self._choose_transform(values)
        else:
            X, Y, transform = self._model_data(self._use_log)
            model, n_points = self._fit(X, Y), sum(len(x) for x in X)
        self.model, self.transform = model, transform
        self.iteration += 1
        if self.history is not None:
            params = {k: np.asarray(v).tolist() for k, v in model.get_params().items()}
            self.history.add_model(self.iteration, params, float(model.log_likelihood()))
        log.info("iteration %d: LCM fitted on %d points, log-likelihood %.4g", self.iteration, n_points,
                 model.log_likelihood())
        return model

    def _fit(self, X: list[np.ndarray], Y: list[np.ndarray], cold: bool = False) -> LCM:
        init = None
        if not cold and self.model is not None:
            init = self.model
        elif not cold and self._warm is not None:
            init = self._warm["params"]
        seed = _int_seed(self.seed, _STAGE_FIT, self.iteration)
        model = LCM(n_latent=self.n_latent, kernel=self.kernel)
        try:
            return model.fit(X, Y, restarts=self.refit_restarts if init is not None else self.restarts,
                             seed=seed, init=init, comm=self.comm)
        except Exception as exc:  # a warm start that no longer fits the data: start cold
            if init is None:
                raise
            log.warning("warm-started fit failed (%s); refitting from scratch", exc)
            return LCM(n_latent=self.n_latent, kernel=self.kernel).fit(
                X, Y, restarts=self.restarts, seed=seed, comm=self.comm)

    def _choose_transform(self, values: list[np.ndarray]) -> tuple[LCM, OutputTransform, int]:
        """output_transform="auto", first fit: model the outputs with and without the log and keep
        the one whose likelihood *of the observed values* is higher. Each fit's log-likelihood is of
        the standardised outputs z; the change of variables adds -sum(log sigma_i) per point, and
        -sum(log y) under the log, which puts both on the scale of y."""
        best = None
        for use_log in (True, False):
            X, Y, transform = self._model_data(use_log)
            model = self._fit(X, Y, cold=True)
            jacobian = sum(len(v) * np.log(transform.sigma[i]) + (np.sum(np.log(v)) if use_log else 0.0)
                           for i, v in enumerate(values))
            ll_y = float(model.log_likelihood() - jacobian)
            log.info("output transform %s: log-likelihood of the observed values %.6g",
                     "log" if use_log else "none", ll_y)
            if best is None or ll_y > best[0]:
                best = (ll_y, use_log, model, transform, sum(len(x) for x in X))
        assert best is not None
        self._set_use_log(best[1])
        return best[2], best[3], best[4]

    def _set_use_log(self, use_log: bool) -> None:
        self._use_log = bool(use_log)
        if self.history is not None:
            self.history.set_meta("use_log", self._use_log)

    def _search(self, i: int) -> np.ndarray:
        """Task ``i``'s next configuration, encoded: (D,) row. Runs on the rank that owns task i."""
        assert self.model is not None and self.transform is not None
        space = self.problem.param_space
        recs = self._task_records(i)
        ok = [r for r in recs if r["status"] == "complete"]
        model = self.model
        if ok:
            best = float(np.min(self.transform.forward(i, np.array([r["value"] for r in ok]))))
        else:
            best = float(np.min(model.predict(i, space.encode([r["params"] for r in recs]))[0]))

        def acquisition(x: np.ndarray) -> np.ndarray:
            mean, var = model.predict(i, x)
            return log_ei(mean, np.sqrt(np.maximum(var, 0.0)), best)

        init = self._incumbents(i)
        res = maximize(
            acquisition, space, seed=_int_seed(self.seed, _STAGE_SEARCH, i, len(recs)),
            is_feasible=self._feasible_for(i), exclude=space.encode([r["params"] for r in recs]),
            init=init, n_particles=self.pso_particles, iters=self.pso_iters,
        )
        return res.encoded

    def _incumbents(self, i: int) -> np.ndarray:
        """Encoded best configurations: task i's own first, then the other tasks' (transfer)."""
        order = [i] + [j for j in range(self.n_tasks) if j != i]
        best = []
        for j in order:
            ok = [r for r in self._task_records(j) if r["status"] == "complete"]
            if ok:
                best.append(min(ok, key=lambda r: r["value"])["params"])
        return self.problem.param_space.encode(best[: max(1, self.pso_particles // 4)]) if best else None

    # ---- tell --------------------------------------------------------------------------------
    def tell(self, proposal: Proposal, outcome: Outcome | float | None, reason: str = "") -> dict:
        """Record the result of ``proposal`` (committed to the history before returning).

        outcome: an :class:`Outcome`, a float (complete), or None (failed; give ``reason``).
        """
        if not isinstance(proposal, Proposal):
            raise TypeError(f"tell takes a Proposal from ask(), got {proposal!r}")
        if not 0 <= proposal.task_index < self.n_tasks:
            raise ValueError(f"task_index {proposal.task_index} is outside 0..{self.n_tasks - 1}")
        params = self.problem.param_space.validate(proposal.params, what="params")
        if not isinstance(outcome, Outcome):
            if outcome is None:
                outcome = Outcome(None, (), "failed", reason or "reported as failed")
            else:
                try:
                    v = _as_finite(outcome)
                    outcome = Outcome(v, (v,), "complete", "")
                except EvaluationFailed as exc:
                    outcome = Outcome(None, (), "failed", str(exc))
        rec_id = 0
        if self.history is not None:
            rec_id = self.history.add_evaluation(
                proposal.task_index, params, outcome.value, outcome.status, outcome.reason,
                outcome.samples, outcome.duration, proposal.source,
            )
        record = {
            "id": rec_id, "task_index": proposal.task_index, "task": dict(self.tasks[proposal.task_index]),
            "params": params, "value": outcome.value, "status": outcome.status, "reason": outcome.reason,
            "samples": list(outcome.samples), "duration": outcome.duration, "source": proposal.source,
        }
        self.records.append(record)
        return record

    def result(self) -> TuningResult:
        """The run so far. The model is brought up to date with every evaluation: fitted if there is
        none yet, otherwise conditioned on all data with its last hyperparameters (one factorisation)."""
        try:
            if self.model is None and any(r["status"] == "complete" for r in self.records):
                self.fit_model()
            elif self.model is not None and int(np.sum(self.model.n_points)) < len(self.records):
                X, Y, transform = self._model_data(bool(self._use_log))
                self.model = LCM(n_latent=self.n_latent, kernel=self.kernel).condition(
                    X, Y, params=self.model.get_params())
                self.transform = transform
        except (ValueError, np.linalg.LinAlgError) as exc:
            log.warning("final model update failed: %s", exc)
        return TuningResult(self.problem, list(self.tasks), list(self.records), self.model, self.transform,
                            confirmations=list(self.confirmations), store=self.history)


def tune(
    problem: Problem,
    tasks: int | Sequence[Mapping[str, Any]] = 4,
    budget: int = 20,
    n_initial: int | None = None,
    seed: int = 0,
    history: str | Path | None = None,
    repeats: int = 1,
    aggregate: str = "min",
    n_latent: int | None = None,
    progress: bool = True,
    timeout: float | None = None,
    comm: Any = None,
    parallel_evaluations: bool = False,
    noise: Any = None,
    pruner: Any = None,
    **tuner_options: Any,
) -> TuningResult:
    """Tune ``problem`` for a set of tasks with MLA; returns a :class:`TuningResult`.

    tasks: a number of tasks (Latin hypercube over the task space) or a list of task dicts.
    budget: evaluations per task in total (initial design included); n_initial: initial design size
    per task (default: half the budget). history: SQLite file; the same call with the same file
    resumes a killed run. repeats/aggregate: runs per evaluation and how they are combined.
    timeout: seconds per run (None: no limit). progress: a progress bar on a terminal.
    comm: an mpi4py communicator; call ``tune`` on every rank. Model restarts and per-task searches
    are spread over the ranks; evaluations run on rank 0 only, or, with
    ``parallel_evaluations=True`` (the objective is rank-local), round robin over the ranks.
    Rank 0 alone writes the history; every rank returns the same result.
    noise, pruner: a :mod:`gptask.noise` policy (instead of ``repeats``) and pruning rule; see
    :class:`gptask.evaluate.Evaluator`.
    tuner_options: kernel, restarts, refit_restarts, pso_particles, pso_iters, output_transform
    ("auto": log of positive outputs or not, decided once by likelihood; "log"; "none") (see :class:`Tuner`).
    """
    evaluator = Evaluator(problem.objective, repeats=repeats, aggregate=aggregate, timeout=timeout,
                          noise=noise, pruner=pruner)
    tuner = Tuner(problem, tasks, budget, n_initial, seed, history, n_latent=n_latent, comm=comm, **tuner_options)
    total = tuner.n_tasks * tuner.budget
    done = sum(min(tuner.count(i), tuner.budget) for i in range(tuner.n_tasks))
    bar = _progress_bar(progress and tuner.rank == 0, total, done)
    limits = None
    if comm is not None:
        from threadpoolctl import threadpool_limits

        limits = threadpool_limits(limits=blas_threads_per_rank(comm), user_api="blas")
    try:
        while not tuner.done:
            proposals = tuner.ask()
            if not proposals:
                break
            for p, outcome, told in _evaluate_all(tuner, evaluator, proposals, parallel_evaluations):
                if not told:
                    tuner.tell(p, outcome)
                if bar is not None:
                    bar.update(1)
    finally:
        if bar is not None:
            bar.close()
        if limits is not None:
            limits.unregister()
    return tuner.result()


def _evaluate_all(tuner: Tuner, evaluator: Evaluator, proposals: list[Proposal], parallel: bool):
    """Yield (proposal, outcome, already_told) in proposal order: serial, on rank 0 only, or round
    robin over the ranks."""
    if tuner.size == 1:
        for p in proposals:
            yield p, evaluator(p.task, p.params), False
        return
    if parallel:
        mine = collective(lambda: {k: _outcome_json(evaluator(proposals[k].task, proposals[k].params))
                                   for k in my_items(len(proposals), tuner.comm)}, tuner.comm, "evaluations")
        merged: dict[str, Any] = {}
        for part in allgather_json({str(k): v for k, v in mine.items()}, tuner.comm):
            merged.update(part)
        for k, p in enumerate(proposals):
            yield p, _outcome_from_json(merged[str(k)]), False
        return
    # rank 0 evaluates and records each result at once (committed before the next run); the others
    # receive the outcomes afterwards
    outcomes: list[dict] = []

    def run_on_root() -> None:
        if tuner.rank == 0:
            for p in proposals:
                o = evaluator(p.task, p.params)
                tuner.tell(p, o)
                outcomes.append(_outcome_json(o))

    collective(run_on_root, tuner.comm, "evaluations")
    shared = bcast_json(outcomes, tuner.comm)
    for p, o in zip(proposals, shared):
        yield p, _outcome_from_json(o), tuner.rank == 0


def _outcome_json(o: Outcome) -> dict:
    return {"value": o.value, "samples": list(o.samples), "status": o.status, "reason": o.reason,
            "duration": o.duration}


def _outcome_from_json(d: dict) -> Outcome:
    return Outcome(d["value"], tuple(d["samples"]), d["status"], d["reason"], float(d["duration"]))


def _progress_bar(progress: bool, total: int, initial: int):
    if not progress or not sys.stderr.isatty():
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, initial=initial, desc="gptask", unit="run", file=sys.stderr)
