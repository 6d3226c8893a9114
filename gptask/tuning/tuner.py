"""The ask/tell engine: a multitask tuner whose state lives in its history.

Contract
--------
* ``ask(n)`` writes its proposals to the history as PENDING trials before returning them
  (:class:`~gptask.data.trials.Trial`, with ids). First come trials whose holder died or released them
  (re-proposed as they were), then each task's initial Latin hypercube (round robin over tasks),
  then log-EI maximisers for tasks in their search phase, in rounds: each round gives one proposal
  to each task that takes new trials (fewest trials first), and the next round searches again with
  the proposals of the previous ones in flight. Every PENDING trial, this tuner's or another
  process's, enters the model the search uses as a fantasy (kriging believer,
  :mod:`.fantasy`), so several proposals for one task, or a proposal made while others run, are
  spread out instead of piling onto one EI maximiser. The search waits for a finished trial of
  every task (the LCM needs data for each). On listed or enumerated domains every other search of
  a task that the model predicts poorly chooses among the other tasks' best configurations
  (cross-task picks, :mod:`.crosstask`).
* The model is brought up to date only when finished trials arrived since, by this process or any
  other sharing the history (asking twice never refits twice): by a full (warm-started) fit, or by
  cheap block appends between full fits as ``refit_every`` and ``refit_on_drift`` say
  (:mod:`.updates`; the default refits on every change, as the synchronous loop always did).
* ``tell(trial, result)`` records the result of a PENDING trial of this history, exactly once: a
  second tell, an unknown id, or a trial from another history is a clear error. It may come from
  another process than the one that asked (the history, not the process, holds the trial).
* Several processes (several batch jobs, several ``gptask tune`` commands) may share a history:
  each claim is one transaction that checks the per-task budget and whether the configuration is
  already claimed, so each configuration runs once and the budget holds across all of them. A
  process's PENDING trials are given back when it dies (see :mod:`gptask.data.storage.owner`).
* A problem with a default configuration (``Problem(default=...)``) has it measured first on every
  task (source "default"), before the Latin hypercube, and also on a task whose initial phase is
  already over (imported runs, see :func:`gptask.import_runs`) while its budget allows one more trial.
* A task takes no new trials once it holds ``budget`` trials, once its ``target`` is reached, or
  once every feasible configuration has been claimed (a small discrete space: the task is closed in
  the history with that reason, the run goes on). The run is ``done`` when every task is finished
  that way and no trial is pending.

With ``comm`` (mpi4py), every rank calls the same methods with the same arguments: rank 0 alone
reads and writes the history and broadcasts what it read as JSON; model restarts and per-task
searches are spread over the ranks.

Over 500 lines on purpose: the ask/tell contract (re-proposals, initial designs, search rounds,
claims, tells exactly once) is one class; what to run next is its proposer's (:mod:`.proposer`).
"""

from __future__ import annotations

import dataclasses
import logging
import numbers
import os
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

from ..results.baseline import defaults_of, record_defaults
from ..core.checks import check_int, check_seconds
from ..evaluation import journal as result_journal
from ..evaluation.evaluate import Outcome
from ..evaluation.failed_runs import FailureWatch
from ..model.numerics import LCM
from ..model.numerics.defaults import SURROGATE_N_LATENT
from ..model.surrogate import ModelSettings, SearchView, Surrogate
from ..model.surrogate.group import HistoryMeta, OutputModels, OutputsView, transform_for
from ..model.surrogate.updates import RefitPolicy
from ..core.parallel import rank_size
from ..problem.definition import Problem
from ..problem.fidelity import COST_OUTPUT, check_cost, run_cost_of
from ..data.provenance import check_history, resolve_record
from ..data.run_header import (RunHeader, run_settings, write_cost_from, write_fidelity_layout, write_seed,
                               write_settings, write_unit)
from ..results.result import LazyModelResult, TuningResult
from ..space.sampling import lhs_points
from ..data.storage import HistoryMismatch, Owner, Storage, open_storage
from ..data.storage.owner import holder_alive
from ..data.trials import SOURCE_BROUGHT, Proposal, Status, Trial, params_key, point_key
from .config import TunerSettings
from .mirror import HistoryMirror, HistoryModels
from ..propose.proposals import initial_design, search_task, search_tasks
from .proposer import Proposer, make_proposer
from ..propose.steering import POOL_FACTOR, steer_design
from .settings import (CLAIM_ROUNDS, SEARCH_BLAS_THREADS, SOURCE_DEFAULT, SOURCE_INITIAL, SOURCE_SEARCH,
                       STAGE_SEARCH, STAGE_STEER, STAGE_TASKS, int_seed, rng)

__all__ = ["Tuner", "resolve_tasks", "check_int", "check_seconds"]

log = logging.getLogger(__name__)
#: :meth:`Tuner._search` without its ``among``: it asks :meth:`Tuner.search_among` itself
_ASK = object()


def resolve_tasks(problem: Problem, tasks: int | Sequence[Mapping[str, Any]], seed: int) -> list[dict]:
    """A list of validated task dicts: ``tasks`` itself, or an LHS of ``tasks`` points of the task space."""
    if isinstance(tasks, numbers.Integral) and not isinstance(tasks, bool):
        n = check_int("tasks", tasks, 1)
        return lhs_points(problem.task_space, n, rng(seed, STAGE_TASKS))
    if isinstance(tasks, Mapping) or not isinstance(tasks, Sequence) or isinstance(tasks, str):
        raise TypeError(f"tasks must be a number of tasks or a list of task dicts, got {tasks!r}")
    if len(tasks) == 0:
        raise ValueError("tasks must not be empty: give at least one task")
    out = [problem.task_space.validate(t, what=f"task #{i}") for i, t in enumerate(tasks)]
    keys = [point_key(t) for t in out]
    if len(set(keys)) != len(keys):
        raise ValueError(f"tasks must be distinct, got repeated tasks in {out}")
    return out


def _check_target(target: Any, n_tasks: int) -> list[float | None]:
    def one(v: Any, what: str) -> float | None:
        if v is None:
            return None
        if isinstance(v, bool) or not isinstance(v, numbers.Real) or not np.isfinite(float(v)):
            raise ValueError(f"{what} must be a finite number or None, got {v!r}")
        return float(v)

    if target is None or isinstance(target, numbers.Real):
        return [one(target, "target")] * n_tasks
    if isinstance(target, (str, Mapping)) or not isinstance(target, Sequence):
        raise TypeError(f"target must be a number, None, or one number (or None) per task, got {target!r}")
    if len(target) != n_tasks:
        raise ValueError(f"target must give one value per task: {n_tasks} tasks, got {len(target)} values")
    return [one(v, f"target[{i}]") for i, v in enumerate(target)]


#: the run settings a history keeps, and how a resumed run that changes one is told
CHANGED_SETTINGS = {"budget": "a budget of {} runs per task", "failure_model": "failure_model={}",
                    "target": "target={}", "cost_budget": "a cost budget of {}"}


def warn_if_changed(path: Any, before: Mapping[str, Any], now: Mapping[str, Any]) -> None:
    """Log each run setting of ``now`` that differs from the one the history was tuned with
    (``gptask ask`` takes the history's when not given; ``gt.tune`` takes what the call says).
    Targets are compared task by task over the tasks both runs know (sources and new tasks add
    tasks to a history without changing the targets of the others)."""
    for key, words in CHANGED_SETTINGS.items():
        if key not in before:
            continue
        old, new = before[key], now.get(key)
        if key == "target" and isinstance(old, list) and isinstance(new, list):
            changed = old[: len(new)] != new[: len(old)]
        else:
            changed = old != new
        if changed:
            log.warning("history %s was tuned with %s; this run changes it to %s", path, words.format(old),
                        "none" if new is None else new)


def _check_journal_arg(journal: Any) -> None:
    """TypeError or ValueError for a ``journal=`` that is neither a path, None nor False (every rank)."""
    if journal is True:
        raise ValueError("journal=True is not an option: give a folder, None for the default (beside a SQLite "
                         "history) or False for no journal")
    if not isinstance(journal, (str, os.PathLike)):
        raise TypeError(f"journal must be a folder (a path), None for the default or False for none, got {journal!r}")
    if not os.fspath(journal):
        raise ValueError("journal must be a folder, got an empty path")


def _journal_folder(storage: Storage | None, journal: Any) -> tuple[Path | None, str | None]:
    """(the folder where this history's runs journal their results, or None; why there is none, for
    a history that outlives the process) for the ``journal=`` option (rank 0): None, the default:
    ``<file>.results`` beside a SQLite file, none for PostgreSQL or in memory; False: none; a path:
    its subfolder of this history (made and checked writable: ValueError naming it otherwise; the
    path itself checked already by the caller, :func:`~gptask.evaluation.journal.check_folder`).
    storage None: a history in memory."""
    path, url = getattr(storage, "path", None), getattr(storage, "url", None)
    if journal is False:
        return None, None
    if journal is None:
        if path is not None:
            return result_journal.journal_dir(path), None
        if url is None:
            return None, None
        return None, (f"history {url} has no result journal: a run that ends in the instant before this "
                      "process is killed (kill -9, scancel, the node lost) runs again on the resume; give "
                      "journal=FOLDER (gptask tune --journal DIR), on a file system every tuner host of the "
                      "campaign shares")
    if path is None and url is None:
        raise ValueError(f"journal={os.fspath(journal)!r} needs a history that outlives this process (a SQLite file "
                         "or a postgresql:// URL); this history is in memory")
    assert storage is not None
    return result_journal.check_folder(result_journal.history_folder(journal, storage.uid())), None


class Tuner:
    """Ask/tell multitask tuner; ``tune`` is a loop over it, and batch-scheduler users drive it directly:

    >>> with Tuner(problem, tasks=4, budget=20, n_initial=8, history="runs.sqlite") as tuner:
    ...     while not tuner.done:
    ...         for trial in tuner.ask():
    ...             tuner.tell(trial, my_launcher(trial.task, trial.params))  # float, Outcome or None

    Use it as a context manager (or call :meth:`close`): trials asked and not told are then
    released when you stop, and any process sharing the history takes them at once (otherwise
    they are held until this process ends).

    target: stop a task once its best value is <= target (a number, or one number or None per
    task). owner: who holds the asked trials (default: this process, alive while it runs;
    ``Owner.detached(...)`` for a shell that exits after asking). lease: seconds after which an
    asked trial that was not told is given to the next ``ask`` (None: never, while the owner lives).
    refit_every, refit_on_drift: the :class:`~gptask.model.surrogate.updates.RefitPolicy` of model updates
    (default 1, False: a full warm-started fit whenever results arrived; larger or None: block
    appends in between). ``updates`` lists every model update made (kind "fit", "reuse", "append",
    ..., seconds, n_points, reason). max_failures: when the first evaluations told all failed for
    the same reason, :meth:`tell` raises :class:`~gptask.evaluation.failed_runs.TuningAborted` after
    committing the last one ("auto": after ``n_tasks + min(n_tasks, 5)``; a number; None or 0:
    never; :mod:`gptask.evaluation.failed_runs`). provenance: the machine record stored with every trial told
    ("auto": this process's, with the problem's application versions; a record or label from
    :mod:`gptask.data.provenance`; None: none). mix_machines: allow trials of a machine the history has
    not seen next to those of another (:func:`gptask.data.provenance.check_history`; refused otherwise).
    failure_model: True (the default): once a run has failed, a classifier of the probability of
    success (:mod:`gptask.model.surrogate.failure_model`) weights every search and keeps it where success is at
    least 1/2 likely; a probability p with 1/2 <= p < 1: a cautious run, every proposal at least p
    likely to succeed, the initial designs' included (:mod:`gptask.propose.steering`): far fewer
    failed runs where failures cover a region of the space, a higher regret where the optimum lies
    on the failure boundary (BENCHMARKS.md, issue 25); False: failures imputed as the task's worst
    value. Refused before any run otherwise.
    device: where the LCM of every objective computes (None or "cpu": numpy; a torch device such
    as "cuda" or "cuda:1": the torch backend there, for models of tens of thousands of points;
    refused before any run when torch or the device is missing). journal: the folder where a run's
    result is written before its commit (:mod:`gptask.evaluation.journal`; None: ``<history>.results``
    beside a SQLite file, none for PostgreSQL or in memory; False: none; a folder: made when missing,
    this history's files in its subfolder ``history-<uid>``; a file or a folder that cannot be written:
    ValueError before any run). The other arguments are those of :func:`gptask.tune`.

    settings: the model and search settings as one :class:`~gptask.tuning.config.TunerSettings`
    (or its fields as keywords). proposer: what to run next (:mod:`gptask.tuning.proposer`: a
    :class:`~gptask.tuning.proposer.Proposer`, a registered name, or None for the default
    multitask search); the source-aware (:mod:`gptask.tuning.sourced`) and new-task
    (:mod:`gptask.transfer.tla2`) tuners are this tuner with their proposers. TLA2's tuner also
    brings its own model through the hooks :meth:`model_ready`, :meth:`model_trials`,
    :meth:`make_surrogate`, :meth:`result` and ``records_run`` (False: leave the run's seed,
    settings and models in the history alone).
    """

    #: whether this tuner checks and stores the run's seed, settings, output transform and fitted
    #: models in the history (a tuner adding a task to another run's history does not)
    records_run: bool = True

    def __init__(
        self,
        problem: Problem,
        tasks: int | Sequence[Mapping[str, Any]],
        budget: int = 20,
        n_initial: int | None = None,
        seed: int = 0,
        history: str | Path | Storage | None = None,
        settings: TunerSettings | None = None,
        *,
        proposer: Proposer | str | None = None,
        comm: Any = None,
        target: Any = None,
        owner: Owner | None = None,
        lease: float | None = None,
        cost_budget: float | None = None,
        journal: str | os.PathLike | bool | None = None,
        **options: Any,
    ) -> None:
        if not isinstance(problem, Problem):
            raise TypeError(f"problem must be a gptask.Problem, got {type(problem).__name__}")
        if problem.fidelity is not None and not set(problem.fidelity.names) <= set(problem.task_space.names):
            raise ValueError(f"problem {problem.name!r} has fidelity {problem.fidelity.names}: tune it with gt.tune or "
                             "ask and tell with gptask.tuning.fidelity.fidelity_tuner(problem, tasks, ...), which run "
                             "its fidelity levels (docs/fidelity.md)")
        if settings is not None and not isinstance(settings, TunerSettings):
            raise TypeError(f"settings must be a gptask.tuning.TunerSettings, got {type(settings).__name__}")
        unknown = sorted(set(options) - set(TunerSettings.field_names()))
        if unknown:
            raise TypeError(f"Tuner() got unexpected keyword argument(s) {unknown}; the settings are "
                            f"{', '.join(TunerSettings.field_names())}")
        settings = (settings or TunerSettings()).replace(**options) if options else (settings or TunerSettings())
        #: the model and search settings, checked (:class:`~gptask.tuning.config.TunerSettings`)
        self.settings = settings
        self.problem = problem
        self.machine = resolve_record(settings.provenance, problem)  # stored with every trial told
        self.mix_machines = settings.mix_machines
        self.budget = check_int("budget", budget, 1)
        self.n_initial = min(self.budget, max(2, self.budget // 2)) if n_initial is None else check_int(
            "n_initial", n_initial, 1)
        if self.n_initial > self.budget:
            raise ValueError(f"`n_initial <= budget` must hold, got n_initial={n_initial}, budget={budget}")
        self.seed = check_int("seed", seed, 0)
        self.restarts, self.refit_restarts = settings.restarts, settings.refit_restarts
        self.pso_particles, self.pso_iters = settings.pso_particles, settings.pso_iters
        if owner is not None and not isinstance(owner, Owner):
            raise TypeError(f"owner must be a gptask.data.storage.Owner, got {owner!r}")
        self.kernel = settings.kernel
        self.output_transform = settings.output_transform
        #: the failure_model option as given, in the history's JSON (True, False or p)
        self.failure_model: bool | float = settings.failure_model
        # failure_model=p, a number: design points steered too (gptask.propose.steering)
        self.steers_designs = not isinstance(self.failure_model, bool)
        self._steer_pool: dict[int, list[dict]] = {}
        self.device = settings.device
        #: what this tuner runs next (:mod:`gptask.tuning.proposer`)
        self.proposer = make_proposer(proposer)
        self.comm = comm
        self.rank, self.size = rank_size(comm)
        self.owner = owner if owner is not None else Owner.this_process("tune")
        self.lease = check_seconds("lease", lease)
        #: seconds of summed run cost after which no run starts (None: no limit; docs/fidelity.md)
        self.cost_budget = check_seconds("cost_budget", cost_budget)
        #: whether each told run's cost is stored (extra["cost"]): a run with a cost budget, fidelity or run_cost
        self.tracks_cost = (self.cost_budget is not None or problem.fidelity is not None
                            or problem.run_cost is not None)
        self._costs: dict[int, float | None] = {}  # finished trials' costs by id (cost_spent)
        # rank 0 alone opens and writes the history; the other ranks receive what it reads as JSON
        self.mirror = HistoryMirror(comm, self.owner, self.budget, self.lease)
        if journal is not None and journal is not False:
            _check_journal_arg(journal)  # the type on every rank; the folder itself on rank 0, when opening
        #: the folder where runs journal their results before the commit (rank 0; None: no journal,
        #: :meth:`journal_path`); journal_note: why a history that outlives this process has none
        self.journal_dir: Path | None = None
        self.journal_note: str | None = None
        policy = RefitPolicy(settings.refit_every, settings.refit_on_drift)
        self.failures = FailureWatch(settings.max_failures)  # stops a run whose first evaluations all fail alike
        state = self.mirror.on_root(lambda: self._open_history(history, tasks, target, journal), "opening the history")
        self.tasks: list[dict] = state["tasks"]
        self.n_tasks = len(self.tasks)
        try:
            self.target: list[float | None] = state["target"]  # checked against the history's tasks
            self.n_latent = check_int("n_latent", min(self.n_tasks, SURROGATE_N_LATENT) if settings.n_latent is None
                                      else settings.n_latent, 1)
            self.defaults = defaults_of(problem, self.tasks)  # each task's default, checked before any run
        except BaseException:
            self.mirror.close_storage()
            raise
        scale_from, levels = self.proposer.model_structure(self.n_tasks)
        model_settings = ModelSettings(self.n_latent, self.kernel, self.restarts, self.refit_restarts,
                                       transform_for(problem, self.output_transform), self.seed, self.device,
                                       settings.ei_draws, scale_from, levels)
        self.surrogate = self.make_surrogate(model_settings, policy, state["use_log"], int(state["iteration"]))
        meta = HistoryMeta(self.mirror.get_meta, self.mirror.set_meta if self.records_run else None)
        self.outputs = OutputModels(problem, self.tasks, self.surrogate, model_settings, policy, meta, comm,
                                    self.failure_model)
        self._search_view: SearchView | OutputsView | None = None
        self._initial: dict[int, list[dict]] = {}
        self._open = True
        self.proposer.bind(self)
        self.refresh()

    # ---- the history (rank 0 reads and writes it: .mirror) -------------------------------------
    def _open_history(self, path: Any, tasks: Any, target: Any, journal: Any = None) -> dict[str, Any]:
        if path is None and journal is not None and journal is not False:
            _journal_folder(None, journal)  # refused before anything is made
        root = None if journal is None or journal is False else result_journal.check_folder(journal)
        storage = open_storage(path, self.problem.signature())
        try:
            check_history(storage.machines(), self.machine, self.mix_machines,
                          f"history {getattr(storage, 'path', None) or path}")
            self.journal_dir, self.journal_note = _journal_folder(storage, journal if root is None else root)
            if self.journal_dir is not None:  # absolute: a worker in another working directory writes here too
                self.journal_dir = Path(os.path.abspath(self.journal_dir))
        except BaseException:
            storage.close()
            raise
        if not self.records_run:
            try:
                storage.set_tasks(resolve_tasks(self.problem, tasks, self.seed))
                checked = _check_target(target, len(storage.tasks()))
            except BaseException:
                storage.close()
                raise
            self.mirror.storage = storage
            return {"tasks": storage.tasks(), "target": checked, "use_log": None, "iteration": 0}
        try:
            header = RunHeader.read(storage)
            stored_seed = header.seed
            if stored_seed is not None and stored_seed != self.seed:
                raise HistoryMismatch(
                    f"history {path} was written with seed={stored_seed}, this run has seed={self.seed}; "
                    "resume with the same seed or use another history file")
            stored_tasks = storage.tasks()
            if stored_tasks and isinstance(tasks, numbers.Integral) and not isinstance(tasks, bool):
                if tasks != len(stored_tasks):
                    raise HistoryMismatch(f"history {path} holds {len(stored_tasks)} tasks, this run asks for {tasks}")
            else:
                storage.set_tasks(resolve_tasks(self.problem, tasks, self.seed))
            write_seed(storage, self.seed)
            record_defaults(storage, self.problem)
            write_unit(storage, getattr(self.problem, "unit", ""))
            checked = _check_target(target, len(storage.tasks()))
            settings = run_settings(self.budget, self.n_initial, self.kernel, self.failure_model, checked,
                                    self.cost_budget)
            warn_if_changed(path, header.settings, settings)
            write_settings(storage, settings)
            layout = getattr(self.proposer, "layout", None)  # a run with fidelity or auxiliary tasks
            if callable(layout):
                write_fidelity_layout(storage, **layout())
            if self.tracks_cost:
                write_cost_from(storage, self._cost_from())
        except BaseException:
            storage.close()
            raise
        self.mirror.storage = storage
        return {"tasks": storage.tasks(), "target": checked, "use_log": header.use_log,
                "iteration": len(storage.models())}

    def refresh(self) -> None:
        """Read every trial and task closure from the history (rank 0) onto every rank
        (:meth:`HistoryMirror.refresh`: after the first read, only what may have changed)."""
        self.mirror.refresh()

    def release(self) -> list[int]:
        """Give back this tuner's PENDING trials (they stay PENDING for whoever asks next)."""
        return self.mirror.release()

    def close(self, release: bool = True) -> None:
        """Close the history, first releasing this tuner's PENDING trials (they stay PENDING for the
        next ask) unless ``release`` is False (a detached owner keeps holding them). Idempotent;
        collective under MPI."""
        if not self._open:
            return
        self._open = False
        try:
            released = self.release() if release else []
            if released and self.rank == 0:
                log.info("%d trial(s) left pending for the next run: ids %s", len(released), released)
        finally:
            self.mirror.close_storage()
            result_journal.discard_if_empty(self.journal_dir)  # rank 0's; entries of unfinished runs stay

    def __enter__(self) -> "Tuner":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ---- state -------------------------------------------------------------------------------
    @property
    def trials(self) -> list[Trial]:
        """Every trial of the history as last read, in id order."""
        return self.mirror.trials

    @property
    def records(self) -> list[Trial]:
        """The finished trials (COMPLETE, FAILED, CENSORED), in id order."""
        return self.mirror.records

    @property
    def pending(self) -> list[Trial]:
        return self.mirror.pending

    def trials_of(self, i: int) -> list[Trial]:
        """Task ``i``'s trials in any state, in id order."""
        return self.mirror.of_task(i)

    def count(self, i: int) -> int:
        """Finished trials of task ``i``."""
        return self.mirror.count(i)

    def best_value(self, i: int) -> float | None:
        """The smallest COMPLETE value of task ``i`` (None when it has none); with named outputs,
        the best primary objective in its direction among the runs meeting every limit."""
        spec = self.problem.outputs
        ok = [t.value for t in self.trials_of(i) if t.status is Status.COMPLETE
              and (spec is None or spec.meets_limits(t.values))]
        if spec is not None and spec.sign(spec.primary) < 0:
            return max(ok) if ok else None
        return min(ok) if ok else None

    def closed_reason(self, i: int) -> str | None:
        """Why task ``i`` is finished (budget used, target reached, space exhausted), or None."""
        if self.count(i) >= self.budget:
            return f"budget of {self.budget} evaluations used"
        return self.stopped_early(i)

    def stopped_early(self, i: int) -> str | None:
        """Why task ``i`` takes no new trials before its budget is used (its target is reached, or
        every feasible configuration has been claimed), or None."""
        if i in self.mirror.closed:
            return self.mirror.closed[i]
        best, target = self.best_value(i), self.target[i]
        if target is not None and best is not None and best <= target:
            return f"target {target:g} reached ({best:.6g})"
        return None

    def proposes_for(self, i: int) -> bool:
        """Whether this tuner proposes trials for task ``i`` (its proposer says: every task by
        default; a source's or a tuned task is only what a new task learns from)."""
        return self.proposer.proposes_for(i)

    def open_tasks(self) -> list[int]:
        """The tasks this tuner proposes for that are not finished (budget, target, exhausted)."""
        return [i for i in range(self.n_tasks) if self.proposes_for(i) and self.closed_reason(i) is None]

    def _takes_new(self, i: int) -> bool:
        return self.proposes_for(i) and self.closed_reason(i) is None and len(self.trials_of(i)) < self.budget

    @property
    def done(self) -> bool:
        """True when every task this tuner proposes for is finished and none of them has a pending
        trial, or when the cost budget is spent and no live process holds a pending trial (those a
        spent budget left unstarted stay PENDING for a resume with a larger one); re-reads the history."""
        self.refresh()
        if self.cost_spent_up() and not self.held_pending():
            return True  # the trials a spent budget left unstarted stay PENDING, released, for a larger budget
        return not self.open_tasks() and not any(self.proposes_for(t.task_index) for t in self.pending)

    def held_pending(self) -> list[Trial]:
        """The PENDING trials a live process holds (this one's or another's sharing the history),
        not those released or left by a holder that died (:func:`~gptask.data.storage.owner.holder_alive`;
        a holder on another host counts as alive)."""
        now = time.time()
        return [t for t in self.pending if holder_alive(t.owner, None, now)]

    # ---- cost (docs/fidelity.md) ----------------------------------------------------------------
    def cost_of(self, trial: Trial) -> float | None:
        """A finished trial's cost in seconds (:func:`gptask.problem.fidelity.run_cost_of`)."""
        return run_cost_of(self.problem.run_cost, self.problem.merged(trial.task, trial.params), trial)

    def cost_spent(self) -> float:
        """The summed cost in seconds of every finished trial this campaign ran (the history's,
        less the measurements a source brought: :data:`~gptask.tuning.settings.SOURCE_BROUGHT`).
        Each finished trial's cost is worked out once (the loop asks before every run starts)."""
        costs = self._costs
        total = 0.0
        for t in self.records:
            if t.source == SOURCE_BROUGHT:
                continue
            if t.id not in costs:
                costs[t.id] = self.cost_of(t)
            c = costs[t.id]
            if c is not None:
                total += c
        return float(total)

    def cost_spent_up(self) -> bool:
        """Whether the summed cost has reached ``cost_budget`` (False without one)."""
        return self.cost_budget is not None and self.cost_spent() >= self.cost_budget

    def _cost_from(self) -> str:
        """Where a run's cost comes from (:data:`~gptask.data.run_header.COST_SOURCES`): the problem's
        ``run_cost``, else its ``"cost"`` output, else the run's wall time (:meth:`_with_cost`)."""
        if self.problem.run_cost is not None:
            return "run_cost"
        if COST_OUTPUT in (self.problem.outputs.names if self.problem.outputs is not None else ()):
            return "cost output"
        return "wall time"

    def _with_cost(self, trial_id: int, expected: Trial | None, outcome: Outcome) -> Outcome:
        """``outcome`` with its cost in ``extra["cost"]`` when this run tracks cost, and its role
        (``extra["fidelity"]``: "target", "low fidelity", "auxiliary") in a fidelity run; a ``"cost"``
        output that is not a finite number >= 0 makes it a failed run saying so. A ``run_cost``
        that returns such a value raises ValueError (the trial stays pending)."""
        role = getattr(self.proposer, "role", None)
        trial = expected or next((t for t in self.trials if t.id == trial_id), None)
        if trial is None or not (self.tracks_cost or role is not None):
            return outcome
        if not self.tracks_cost:  # auxiliary tasks without a cost: their runs are marked all the same
            return dataclasses.replace(outcome, extra={**outcome.extra, "fidelity": role(trial.task_index)})
        how = self._cost_from()
        if how == "run_cost":
            cost = check_cost(self.problem.run_cost(self.problem.merged(trial.task, trial.params)),
                              f"problem {self.problem.name!r}: run_cost of trial {trial_id}")
        elif how == "cost output":
            raw = outcome.values.get(COST_OUTPUT)
            if outcome.status is Status.FAILED and raw is None:
                cost = outcome.duration
            else:
                try:
                    cost = check_cost(raw, f"the {COST_OUTPUT!r} output")
                except ValueError as exc:
                    return Outcome(None, outcome.samples, Status.FAILED, str(exc), outcome.duration,
                                   {**outcome.extra, "cost": outcome.duration})
        else:
            cost = outcome.duration
        extra = {**outcome.extra, "cost": float(cost)}
        if role is not None:
            extra["fidelity"] = role(trial.task_index)  # marked in the history and exports
        return dataclasses.replace(outcome, extra=extra)

    # ---- ask ---------------------------------------------------------------------------------
    def describe_constraints(self, i: int) -> str:
        """Task ``i``'s constraints in words, for the error of a design that finds no feasible point."""
        names = ", ".join(self.problem.constraint_names()) or "no constraints"
        return f"{names} of problem {self.problem.name!r} for task {self.tasks[i]}"

    def initial_design(self, i: int) -> list[dict]:
        """Task ``i``'s initial configurations, asked of the proposer once and kept (a steered
        design replaces points of it: :meth:`_steered`)."""
        if i not in self._initial or self.proposer.design_renewed(i):
            self._initial[i] = list(self.proposer.initial_design(i))
        return self._initial[i]

    def _initial_todo(self, i: int) -> list[dict]:
        """Design points of task ``i`` still to claim (empty once its initial phase is over). The
        default configuration is claimed even after the initial phase until it has been measured."""
        if not self.proposer.design_open(i):
            return []
        mine = self.trials_of(i)
        need = self.proposer.design_size(i) - len(mine)
        room = self.proposer.design_room(i)
        if room is not None:
            need = min(need, room - len(mine))
        used = {params_key(t.params) for t in mine}
        todo = [p for p in self.initial_design(i) if params_key(p) not in used]
        if self.defaults[i] is not None and params_key(self.defaults[i]) not in used:
            return todo[: max(1, need)]  # the default leads the design
        return todo[: max(0, need)]

    def ask(self, n: int | None = None) -> list[Trial]:
        """New PENDING trials; see the module docstring for the order.

        n: at most this many: trials to re-propose, initial designs, then search rounds (one
        proposal per task and round, the earlier rounds' proposals in flight as fantasies), so n
        larger than the number of tasks gives several proposals per task. None: the natural next
        batch, as a synchronous loop wants it: every trial to re-propose, then the rest of the
        initial designs if any task still needs them, otherwise one search proposal per task that
        takes new trials. An empty list means nothing can be asked now: the run is done, the
        remaining budget is held by pending trials, or the search waits for a first result of
        every task."""
        if n is not None:
            n = check_int("n", n, 1)
        self.refresh()
        if self.cost_spent_up():
            return []  # the cost budget is spent: no run starts
        self._check_outputs_recorded()
        out = self._commit_journalled(self.mirror.reclaim(n))
        out += self._ask_initial(None if n is None else n - len(out))
        if n is None and any(t.source in (SOURCE_INITIAL, SOURCE_DEFAULT) for t in out):
            return out
        if n is None:  # the natural batch: one search proposal per task not served yet
            return out + self._search_round(self._search_tasks({t.task_index for t in out}, self.n_tasks))
        while len(out) < n:  # rounds: the proposals of one round are in flight (fantasies) in the next
            got = self._search_round(self._search_tasks(set(), n - len(out)))
            if not got:
                break
            out += got
        return out

    def journal_path(self, trial_id: int) -> str | None:
        """The file where a run of trial ``trial_id`` journals its result before it is committed
        (:mod:`gptask.evaluation.journal`, in ``journal_dir``); None without a journal (in memory, a
        PostgreSQL history without ``journal=``, ``journal=False``) or on a rank other than 0."""
        return None if self.journal_dir is None else result_journal.entry_in(self.journal_dir, trial_id)

    def _commit_journalled(self, reclaimed: list[Trial]) -> list[Trial]:
        """``reclaimed`` (trials just taken over from a holder that died or released them) less
        those whose run had ended and journalled its result before it was committed: those are
        committed now from the journal, not run again. Journal files of trials the history holds
        finished are removed (committed by a process killed before it removed them)."""
        def read() -> dict[str, Any]:
            folder = self.journal_dir
            files = {} if folder is None else result_journal.entries(folder, now=time.time())
            if not files:
                return {}
            finished = {t.id for t in self.mirror.records}
            for tid in sorted(set(files) & finished):
                result_journal.remove(files[tid])
            found: dict[str, Any] = {}
            for t in reclaimed:
                entry = result_journal.read(files[t.id]) if t.id in files else None
                if entry is None:
                    continue
                if not entry.matches(t.id, t.task, t.params):
                    log.warning("journal file %s is not trial %d's result (task %s, params %s there; %s, %s in the "
                                "history): removed, the trial runs again", entry.path, t.id, entry.task, entry.params,
                                t.task, t.params)
                    result_journal.remove(entry.path)
                    continue
                found[str(t.id)] = {"outcome": entry.outcome, "path": entry.path}
            return found

        found = self.mirror.on_root(read, "reading the result journal")
        if not found:
            return reclaimed
        rest = []
        for t in reclaimed:
            got = found.get(str(t.id))
            if got is None:
                rest.append(t)
                continue
            try:
                self.tell(t, Outcome.from_json(got["outcome"]))
            except ValueError as exc:  # e.g. a run_cost that refuses it: the trial runs again
                log.warning("trial %d's journalled result could not be committed (%s): it runs again", t.id, exc)
                rest.append(t)
            else:
                log.warning("trial %d (task %d, %s): its run had ended and journalled its result, and the process "
                            "that ran it ended before committing it: committed from %s, not run again",
                            t.id, t.task_index, dict(t.params), got["path"])
            if self.rank == 0:
                result_journal.remove(got["path"])
        return rest

    def _ask_initial(self, room: int | None) -> list[Trial]:
        """Design points round robin over tasks (the k-th point of every task before any k+1-th)."""
        out: list[Trial] = []
        for _ in range(CLAIM_ROUNDS):
            queues = self._steered({i: self._initial_todo(i) for i in range(self.n_tasks) if self._takes_new(i)})
            props: list[Proposal] = []
            for r in range(max((len(q) for q in queues.values()), default=0)):
                props += [Proposal(i, self.tasks[i], q[r], self._source(i, q[r])) for i, q in queues.items()
                          if r < len(q)]
            if room is not None:
                props = props[: room - len(out)]
            if not props:
                break
            got = self.mirror.claim(props)
            out += [t for t in got if t is not None]
            if all(t is not None for t in got):
                break
            self.refresh()  # another process claimed some of these first: look again
        return out

    def _steered(self, queues: dict[int, list[dict]]) -> dict[int, list[dict]]:
        """The design points still to claim per task (``queues``) with those the failure model
        expects to fail replaced (only under ``failure_model=p``; :mod:`gptask.propose.steering`);
        the replacements take their places in the tasks' designs."""
        failure = self.outputs.failure
        if not self.steers_designs or failure is None or not any(queues.values()):
            return queues
        failure.update(self.model_trials())
        if not failure.active:
            return queues
        out = {}
        for i, todo in queues.items():
            if i not in self._steer_pool:
                self._steer_pool[i] = initial_design(self.problem, self.tasks[i], POOL_FACTOR * self.n_initial,
                                                     rng(self.seed, STAGE_STEER, i), self.describe_constraints(i))
            default = self.defaults[i]
            swaps = steer_design(todo, set() if default is None else {params_key(default)}, self.tasks[i],
                                 self.problem.param_space, failure, failure.at_least, self._steer_pool[i],
                                 [t.params for t in self.trials_of(i)])
            if swaps:
                log.info("task %d: %d design point(s) the failure model expects to fail replaced", i, len(swaps))
                new = {params_key(todo[k]): p for k, p in swaps.items()}
                self._initial[i] = [new.get(params_key(p), p) for p in self._initial[i]]
            out[i] = [swaps.get(k, p) for k, p in enumerate(todo)]
        return out

    def _source(self, i: int, params: dict) -> str:
        default = self.defaults[i]
        return SOURCE_DEFAULT if default is not None and params_key(params) == params_key(default) else SOURCE_INITIAL

    def _search_tasks(self, skip: set[int], room: int) -> list[int]:
        """The tasks of the next search round: those in their search phase that take new trials,
        fewest trials first, at most ``room``; none until the model can be fitted. A task whose
        design waits (a fidelity run's target before its cheap design has run) does not search."""
        active = [i for i in range(self.n_tasks) if i not in skip and self._takes_new(i) and not self._initial_todo(i)
                  and self.proposer.design_open(i)]
        if room <= 0 or not active or not self.model_ready():
            return []
        return sorted(active, key=lambda i: (len(self.trials_of(i)), i))[:room]

    def _search_round(self, active: list[int]) -> list[Trial]:
        """One proposal for each task of ``active``, searched on the model with every pending trial
        as a fantasy, claimed in the history (searching again where another process was first)."""
        if not active:
            return []
        with threadpool_limits(limits=SEARCH_BLAS_THREADS, user_api="blas"):
            return self._search_round_on(active)

    def _search_round_on(self, active: list[int]) -> list[Trial]:
        self.fit_model()
        out: list[Trial] = []
        for _ in range(CLAIM_ROUNDS):
            self._believe_pending()
            # every rank asks the proposer for every task, in task order, before the searches are spread
            # over the ranks: a proposer's memory of the round (the local probe's offers) is then the
            # same on every rank and the same as a serial run's
            among = {i: self.search_among(i) for i in active}
            rows = search_tasks(active, lambda i: self._search(i, among[i]), self.problem.param_space.n_columns,
                                self.comm)
            for i, row in zip(active, rows):
                if row is None:
                    reason = (f"every feasible configuration has been claimed ({len(self.trials_of(i))} "
                              f"trials of a budget of {self.budget})")
                    if self.rank == 0:
                        log.warning("task %d (%s): %s; the task ends here", i, self.tasks[i], reason)
                    self.mirror.close_task(i, reason)
            found = [(i, row) for i, row in zip(active, rows) if row is not None]
            params = self.problem.param_space.decode(np.array([row for _, row in found])) if found else []
            assert self._search_view is not None
            at = [self.proposer.place(i, row, self._search_view.model) for i, row in found]
            got = self.mirror.claim([Proposal(j, self.tasks[j], p, SOURCE_SEARCH) for j, p in zip(at, params)])
            out += [t for t in got if t is not None]
            retry = [i for (i, _), t in zip(found, got) if t is None]
            if not retry:
                break
            self.refresh()
            active = [i for i in retry if self._takes_new(i)]
            if not active:
                break
        return out

    def _believe_pending(self) -> None:
        """The search view: the model with every PENDING trial not in it as a fantasy, and each
        task's incumbent counting its believed values (:meth:`Surrogate.search_view`)."""
        state = self.surrogate.state
        assert state is not None
        space = self.problem.param_space
        pending = [[t.params for t in self.pending if t.task_index == i and t.id not in state.ids]
                   for i in range(self.n_tasks)]
        self._search_view = self.outputs.search_view(
            [space.encode(p) if p else np.empty((0, space.n_columns)) for p in pending])

    def _search(self, i: int, among: np.ndarray | None | object = _ASK) -> np.ndarray | None:
        """Task ``i``'s next configuration, encoded (D,), or None when none is left. Runs on the
        rank that owns task i. among: what the search chooses from (:meth:`search_among`, asked
        here when not given)."""
        if among is _ASK:
            among = self.search_among(i)
        space = self.problem.param_space
        mine = self.trials_of(i)
        claimed = space.encode([t.params for t in mine])
        view = self._search_view
        assert view is not None
        acquisition = self.outputs.acquisition(view, i, claimed)
        if acquisition is None and isinstance(view, SearchView):  # one output: the proposer's, if it has one
            acquisition = self.proposer.acquisition(i, view.model)
        if acquisition is None and isinstance(view, SearchView) and view.draws:  # EI averaged over draws
            best = view.best[i]
            acquisition = view.log_ei(i, float(np.min(view.model.predict(i, claimed)[0])) if best is None else best)
        return search_task(view.model, i, self.problem, self.tasks[i], view.best[i], claimed,
                           self.incumbents(i), int_seed(self.seed, STAGE_SEARCH, i, len(mine)),
                           self.pso_particles, self.pso_iters, acquisition, among=among)

    def incumbents(self, i: int) -> np.ndarray | None:
        """Encoded configurations (m, D) placed in task ``i``'s initial swarm (the proposer's)."""
        return self.proposer.incumbents(i)

    def search_among(self, i: int) -> np.ndarray | None:
        """Encoded configurations (m, D) that task ``i``'s next search chooses from, None: the
        whole space (the proposer's; by default the cross-task picks)."""
        return self.proposer.search_among(i)

    # ---- the model (gptask.model.surrogate) ----------------------------------------------------------
    def make_surrogate(self, settings: ModelSettings, policy: RefitPolicy, use_log: bool | None,
                       iteration: int) -> Surrogate:
        """The model of the objective this tuner searches on (a hook: TLA2's tuner returns its
        new-task surrogate). use_log, iteration: what the history says of earlier fits."""
        return Surrogate(self.problem.param_space, self.n_tasks, settings,
                         HistoryModels(self.mirror, self.records_run), policy,
                         use_log=use_log, iteration=iteration, comm=self.comm)

    @property
    def model(self) -> LCM | None:
        """The model searched on (None before the first fit)."""
        return self.surrogate.model

    @property
    def transform(self) -> Any:
        """The output transform the model was fitted under."""
        return self.surrogate.transform

    @property
    def updates(self) -> list[dict]:
        """Every model update made: {"kind", "seconds", "n_points", "reason"}."""
        return self.surrogate.updates

    @property
    def policy(self) -> RefitPolicy:
        """When block appends give way to a full fit (:class:`gptask.model.surrogate.updates.RefitPolicy`)."""
        return self.surrogate.policy

    @policy.setter
    def policy(self, value: RefitPolicy) -> None:
        self.surrogate.policy = value

    @property
    def use_log(self) -> bool | None:
        """Whether the model sees log(values) (None: not decided yet)."""
        return self.surrogate.use_log

    def model_ready(self) -> bool:
        """Whether the model can be fitted: every task has a finished trial (the LCM needs data for
        each task; until then a search waits, the initial designs run)."""
        return len(self.mirror.tasks_with_results()) == self.n_tasks

    def model_trials(self) -> list[Trial]:
        """The finished trials the model is built on (every one the proposer lets in)."""
        return [t for t in self.records if self.proposer.in_model(t)]

    def fit_model(self) -> LCM:
        """The model brought up to date with every finished trial (:meth:`Surrogate.update`)."""
        if not self.model_ready():
            raise ValueError("the model needs a finished trial of every task: there is nothing to fit a model on yet")
        return self.outputs.update(self.model_trials(), [t for t in self.trials if self.proposer.in_model(t)])

    # ---- tell --------------------------------------------------------------------------------
    def tell(self, trial: Trial | int, result: Outcome | float | None, reason: str = "") -> Trial:
        """Record the result of PENDING ``trial`` (a Trial from ``ask`` or its id); committed to
        the history before returning the finished trial.

        result: an :class:`Outcome`, a number (complete; NaN or inf: failed), or None (failed,
        saying ``reason``); for a problem with named outputs a mapping of them instead of a number
        (a missing or extra key, or NaN under one: failed). Errors: TypeError for something that
        is not a trial, UnknownTrial for an id this history does not hold, TrialNotPending for a
        trial already told, HistoryMismatch for a trial asked from another history.
        """
        trial_id, expected = self._resolve(trial)
        outcome = self._with_cost(trial_id, expected, Outcome.of(result, reason, self.problem.outputs))
        self._check_outputs_told(trial_id, outcome)
        done = Trial.from_json(self.mirror.on_root(
            lambda: self.mirror.finish(trial_id, outcome, expected, self.machine).to_json(), "telling"))
        self.mirror.merge([done])
        self._watch_failures(done)
        return done

    def _watch_failures(self, done: Trial) -> None:
        """Count finished trial ``done`` in the failure watch when the proposer watches its task
        (:meth:`~gptask.tuning.proposer.Proposer.watched_tasks`; the limit from how many it watches,
        else from the tasks that propose). The tasks that propose are asked at every tell, watched or
        not: asking the fidelity proposer moves its schedule on (it promotes a target's design from
        the cheap runs finished when first asked after they are), and the benchmarks' figures were
        measured with it asked here (asked only at the next proposal, currin_noinfo's seed 1 starts
        at another first target run)."""
        proposing = sum(map(self.proposes_for, range(self.n_tasks)))
        watched = self.proposer.watched_tasks()
        if watched is not None and done.task_index not in watched:
            return
        n = len(watched) if watched is not None else proposing
        self.failures.observe(done, n, getattr(self.mirror.storage, "path", ""), what=self.proposer.watched_what)

    def _check_outputs_told(self, trial_id: int, outcome: Outcome) -> None:
        """ValueError when ``outcome`` is a complete (or censored) result of a problem with named
        outputs that lacks one of them (an Outcome built without ``values``): stored, it would
        leave the history without that output for good."""
        spec = self.problem.outputs
        if spec is None or outcome.status is Status.FAILED:
            return
        missing = spec.missing(outcome.values)
        if missing:
            raise ValueError(f"trial {trial_id}: a {outcome.status.value} result gives every output of the problem "
                             f"({', '.join(spec.names)}); it has no value of {', '.join(map(repr, missing))} "
                             f"(value {outcome.value!r}, values {dict(outcome.values)}); tell a mapping of every "
                             "output, or None for a failed run")

    def _check_outputs_recorded(self) -> None:
        """ValueError naming the first finished trial that is not failed but lacks an output of the
        problem (told as one number by a gptask that did not check it): the models of the outputs
        cannot be fitted on such a history."""
        spec = self.problem.outputs
        if spec is None:
            return
        for t in self.records:
            missing = spec.missing(t.values) if t.status is not Status.FAILED else []
            if missing:
                where = getattr(self.mirror.storage, "path", None)
                raise ValueError(f"trial {t.id} (task {t.task_index}) of history {where} is {t.status.value} with "
                                 f"value {t.value!r} but no value of {', '.join(map(repr, missing))}; the problem's "
                                 f"outputs are {', '.join(spec.names)}, and every one is modelled: this history "
                                 "cannot be asked from (a result told without them, as gptask tell once accepted); start a new one")

    def _resolve(self, trial: Any) -> tuple[int, Trial | None]:
        if isinstance(trial, Trial):
            return trial.id, trial
        if isinstance(trial, numbers.Integral) and not isinstance(trial, bool):
            return int(trial), None
        if isinstance(trial, Proposal):
            raise TypeError("tell takes a Trial returned by ask() (or its id); a Proposal was never asked")
        raise TypeError(f"tell takes a Trial returned by ask() or its integer id, got {trial!r}")

    def tell_local(self, trial: Trial, result: Outcome) -> Trial | None:
        """Rank 0's tell inside a collective step (no communication); other ranks do nothing and
        see the result at the next read of the history."""
        if self.rank != 0:
            return None
        done = self.mirror.finish(trial.id, self._with_cost(trial.id, trial, Outcome.of(result, outputs=self.problem.outputs)),
                                  trial, self.machine)
        self.mirror.keep_told(done)
        self._watch_failures(done)
        return done

    # ---- result ------------------------------------------------------------------------------
    def result(self, lazy_model: bool = False) -> TuningResult:
        """The run so far. The model is brought up to date with every finished trial: fitted if
        there is none yet, otherwise conditioned on all data with its last hyperparameters (one
        factorisation). If that fails the result has no model (never a model that silently lacks
        trials); the failure is logged as an error.

        lazy_model: when no model was fitted yet (every run a design point), a
        :class:`~gptask.results.result.LazyModelResult` whose model is fitted on these trials when
        first read, kept in memory, not in the history (what ``gt.tune`` returns, issue 46: after
        one run with large sources the fit was 91 % of the call); the tuner must not be used
        afterwards. Single process and one modelled output only; otherwise as without it."""
        self.refresh()
        model, transform, outputs = None, None, {}
        lazy = (lazy_model and self.comm is None and bool(self.records) and self.surrogate.model is None
                and not self.outputs.others and self.model_ready())
        if self.records and not lazy:
            try:
                outputs = self._current_models()
                model, transform = next(iter(outputs.values()))
            except (ValueError, np.linalg.LinAlgError) as exc:
                log.error("the final model could not be brought up to date (%s): the result has no model", exc)
        # confirmation runs (result.recommend) are kept apart from the trials; they go to the same file
        def read() -> dict:
            storage = self.mirror.storage
            return {"confirmations": [t.to_json() for t in storage.confirmations()],
                    "path": None if storage.path is None else str(storage.path),
                    "machines": {str(k): v for k, v in storage.machines().items()}}

        stored = self.mirror.on_root(read, "reading the confirmation runs")
        rest = dict(pending=self.pending, closed={i: r for i in range(self.n_tasks) if (r := self.stopped_early(i))},
                    confirmations=[Trial.from_json(d) for d in stored["confirmations"]],
                    history_file=None if stored["path"] is None else Path(stored["path"]),
                    machines={int(k): v for k, v in stored["machines"].items()},
                    fidelity=self.proposer.summary() if hasattr(self.proposer, "summary") else None,
                    cost_spent=self.cost_spent() if self.tracks_cost else None,
                    cost_budget=self.cost_budget)
        if lazy:
            return LazyModelResult(self._fit_later(), problem=self.problem, tasks=list(self.tasks),
                                   history=self.records, **rest)
        return TuningResult(self.problem, list(self.tasks), self.records, model, transform,
                            outputs={k: v for k, v in outputs.items() if k is not None}, **rest)

    def _fit_later(self) -> Callable[[], tuple[LCM | None, Any, dict, dict | None]]:
        """The fit of a :class:`LazyModelResult`: :meth:`_current_models` of the finished trials as
        they are now, the fit kept in memory (the history may be closed by then) and returned as its
        record."""
        model_trials, trials = list(self.model_trials()), [t for t in self.trials if self.proposer.in_model(t)]
        surrogate = self.surrogate
        memory = _KeptInMemory(surrogate.store.last_model())

        def fit() -> tuple[LCM | None, Any, dict, dict | None]:
            kept, surrogate.store = surrogate.store, memory
            meta, self.outputs.meta = self.outputs.meta, HistoryMeta(meta_absent, None)  # the history may be closed
            before = memory.last
            try:
                outputs = self.outputs.current(model_trials, trials)
            except (ValueError, np.linalg.LinAlgError) as exc:
                log.error("the final model could not be fitted (%s): the result has no model", exc)
                return None, None, {}, None
            finally:
                surrogate.store, self.outputs.meta = kept, meta
            model, transform = next(iter(outputs.values()))
            record = None if memory.last is before else {**memory.last, "use_log": surrogate.use_log}
            failure = None if self.outputs.failure is None else self.outputs.failure.settings()
            if record is not None and failure is not None:
                record["failure"] = failure
            return model, transform, {k: v for k, v in outputs.items() if k is not None}, record

        return fit

    def _current_models(self) -> dict[str | None, tuple[LCM, Any]]:
        if not self.model_ready():
            raise ValueError("the model needs a finished trial of every task")
        return self.outputs.current(self.model_trials(), [t for t in self.trials if self.proposer.in_model(t)])


def meta_absent(key: str) -> None:
    """No stored meta value (what a lazy result's fit reads once the history may be closed)."""
    return None


class _KeptInMemory:
    """A :class:`~gptask.model.surrogate.ModelStore` in memory: the fit of a lazy result's model,
    made when the run's history may be closed (:meth:`Tuner.result`)."""

    def __init__(self, last: dict | None) -> None:
        self.last = last

    def last_model(self) -> dict | None:
        return self.last

    def add_model(self, iteration: int, params: dict, log_likelihood: float, data_key: str) -> None:
        self.last = {"iteration": iteration, "params": params, "log_likelihood": log_likelihood, "data_key": data_key}

    def set_use_log(self, use_log: bool) -> None:
        pass
