"""``gt.tune``: the one entry point of batch tuning, with every option a named keyword.

It chooses between the plain loop (:func:`gptask.tuning.loop.tune`) and tuning with other
machines' measurements (``sources=``, :mod:`gptask.sources.multisource`); both receive exactly the options given
here, so ``help(gt.tune)``, ``inspect.signature`` and an IDE show what a user may pass.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..model.numerics.defaults import SURROGATE_KERNEL
from ..problem.definition import Problem
from ..tuning.proposer import Proposer

if TYPE_CHECKING:
    from ..results.result import TuningResult
    from ..data.storage import Storage

__all__ = ["tune", "AUTO"]

#: the value of an option whose default depends on the others (stated in each option's line)
AUTO = "auto"


def tune(
    problem: Problem,
    tasks: int | Sequence[Mapping[str, Any]] = 4,
    budget: int | None = None,
    n_initial: int | None = None,
    seed: int = 0,
    history: str | Path | Storage | None = None,
    repeats: int = 1,
    aggregate: str = "min",
    n_latent: int | None = None,
    progress: bool = True,
    timeout: float | None = None,
    comm: Any = None,
    parallel_evaluations: bool = False,
    noise: Any = None,
    pruner: Any = None,
    max_time: float | None = None,
    target: Any = None,
    executor: Any = None,
    max_in_flight: int | None = None,
    max_failures: int | str | None = AUTO,
    *,
    kernel: str = SURROGATE_KERNEL,
    restarts: int = 3,
    refit_restarts: int = 1,
    pso_particles: int = 40,
    pso_iters: int = 40,
    refit_every: int | None | str = AUTO,
    refit_on_drift: bool | str = AUTO,
    output_transform: str = AUTO,
    provenance: Any = AUTO,
    mix_machines: bool = False,
    failure_model: bool | float = True,
    device: str | None = None,
    ei_draws: int = 0,
    proposer: Proposer | str | type | None = None,
    sources: Sequence[Any] | None = None,
    source_points: int | str | None = AUTO,
    select_sources: bool = False,
    cache: str | os.PathLike | None = None,
    cost_budget: float | None = None,
    aux_tasks: Sequence[Mapping[str, Any]] | None = None,
    journal: str | os.PathLike | bool | None = None,
) -> TuningResult:
    """Tune ``problem`` for a set of tasks with MLA (one multitask model over all tasks); returns a
    :class:`~gptask.results.result.TuningResult`.

    The run:

    - tasks: a number of tasks (Latin hypercube over the task space) or a list of task dicts.
    - budget: evaluations per task in total, initial design included (None: 20; with
      ``cost_budget``, as many as the cost budget allows, at most 200 per task and fidelity level).
    - cost_budget: seconds of summed run cost after which no run starts, checked before each
      run (runs in flight finish; the runs not started stay pending for a resume with a larger one);
      with ``budget`` both are limits, whichever is reached first. A run's cost is
      ``problem.run_cost`` of it, its ``"cost"`` output, or its measured wall time
      (docs/fidelity.md).
    - aux_tasks: task dicts tuned only for what they teach the tuned ones (their initial designs
      run, no recommendation; cheap tasks such as small matrices). With sources they are this
      campaign's tasks (they run here, and their cost counts); one a source measured on this machine
      starts from those measurements (docs/fidelity.md).
    - n_initial: initial design size per task (None: half the budget; with sources, where every
      tuned task is one the sources measured, 30 % of it).
    - seed: the seed of designs, fits and searches; a history remembers it.
    - history: a SQLite file, a ``postgresql://user@host:port/db?schema=NAME`` URL (a history
      several hosts share), or an open storage: the same call on the same history resumes a killed
      run, and several processes may run it at once (each configuration runs once).
    - journal: a folder where every finished run's result is written before its commit to the
      history, so that a campaign killed in between commits it on the resume instead of running it
      again (:mod:`gptask.evaluation.journal`). None (the default): ``<history>.results`` beside a
      SQLite file; none for a PostgreSQL history (a warning says so once): give a folder on a file
      system every tuner host shares (and, with ``comm`` and parallel_evaluations, every rank's
      host: each rank journals the runs it did). False: none. A folder that is a file or cannot be
      written is refused before any run.

    Evaluation:

    - repeats, aggregate: launches per evaluation and how they are combined ("min", "median", ...).
    - timeout: seconds per launch (None: no limit); such launches run in a child process group.
    - noise, pruner: a :mod:`gptask.evaluation.noise` policy (instead of ``repeats``) and a pruning rule.
    - max_time: seconds for the whole call; unfinished trials stay PENDING for the next call.
    - target: a task stops once its best value is <= target (a number, or one per task).
    - max_failures: stop when the first evaluations all fail alike ("auto": after n + min(n, 5)
      such failures for n tasks, at least 3; a number; None or 0: never).
    - progress: a bar on a terminal, else a log line per iteration; False for none.

    Where it runs:

    - comm: an mpi4py communicator; call ``tune`` on every rank (model restarts and searches are
      spread over the ranks). parallel_evaluations: evaluations round robin over the ranks.
    - executor, max_in_flight: a :class:`concurrent.futures.Executor` and how many trials to keep
      running on it (the asynchronous loop; the objective must be defined at module level).

    The model and the search:

    - n_latent: latent functions of the LCM (None: min(tasks, the default)).
    - kernel: "rbf" or "matern52". restarts, refit_restarts: fit starts (first fit, refits).
    - pso_particles, pso_iters: the particle swarm of the acquisition search.
    - refit_every: a full refit every this many results ("auto": every iteration in the serial
      loop; max(open tasks, max_in_flight) results with an executor). refit_on_drift: refit early
      when the model drifts ("auto": yes with an executor and refit_every "auto", else no).
    - output_transform: "auto" (log of positive outputs or not, decided once by likelihood), "log"
      or "none".
    - failure_model: model the probability that a run fails (True), not (False), or a number p:
      also steer designs away from configurations failing with probability above 1 - p.
    - device: None (numpy on the CPU) or "cuda" (the torch backend).
    - ei_draws: average the search's log-EI over the fit and this many Laplace draws of its
      hyperparameters (0, the default: the fit alone; measured in bench/results/suite.md).
    - proposer: what to run next (:mod:`gptask.tuning.proposer`): None for the default multitask
      search, a :class:`~gptask.tuning.proposer.Proposer` or a registered name (with sources, a
      name only; its factory then receives the tuned tasks and their consensus designs); with
      fidelity or aux_tasks, a subclass of :class:`~gptask.tuning.fidelity.FidelityProposer` (the
      class: the run makes it with its layout).

    Machines and other machines' measurements:

    - provenance: the machine record stored with every trial ("auto": this process's; a record or
      a label; None: none). mix_machines: accept this machine's trials in a history holding another
      machine's.
    - sources: histories, results, model files or measurement files of the same problem measured
      on other machines, learned from in one model (:mod:`gptask.sources.multisource`). Not yet with comm,
      parallel_evaluations, noise or pruner. With a
      problem with fidelity, the fidelity schedule runs as without sources, and a source's runs at
      each fidelity level are the model's data of that level (docs/fidelity.md); their cost is not
      counted against ``cost_budget``.
    - source_points: the most measurements of one source task the model takes ("auto", a number or
      None for all).
    - select_sources: judge the sources by this machine's initial designs and leave out those that
      hurt (``result.source_selection``); with fidelity or aux_tasks, the designs of the fidelity
      schedule.
    - cache: with sources, a folder keeping the sources' measurements read and the fit of the
      result's model by content (:mod:`gptask.sources.cache`): a resumed or repeated run on the same
      data reads no source and fits no model it already fitted. The result's model of a run with
      sources is fitted when first read (:class:`~gptask.results.result.LazyModelResult`).
    """
    from ..evaluation.evaluate import Evaluator
    from ..sources import multisource as sourced
    from ..tuning.loop import tune as tune_here

    check_problem = getattr(executor, "check_problem", None)  # e.g. SlurmSteps' fidelity_resources
    if callable(check_problem):
        check_problem(problem)
    by_level = None  # the fidelity proposer of a problem with fidelity or aux_tasks
    if problem.fidelity is not None or aux_tasks:
        from ..tuning.fidelity import FidelityProposer, prepare

        if proposer is not None and not (isinstance(proposer, type) and issubclass(proposer, FidelityProposer)):
            raise ValueError("a problem with fidelity or aux_tasks chooses its runs with the fidelity proposer "
                             f"(gptask.tuning.fidelity); proposer={proposer!r} cannot be given with it (a subclass "
                             "of FidelityProposer, the class, can)")
        # with sources too: the fidelity schedule, the sources' runs at each level data of that level
        problem, tasks, proposer = prepare(problem, tasks, aux_tasks, seed, proposer)
        by_level = proposer
    budget, n_initial = _budget(budget, n_initial, cost_budget, tasks)

    tuner_options: dict[str, Any] = dict(
        kernel=kernel, restarts=restarts, refit_restarts=refit_restarts, pso_particles=pso_particles,
        pso_iters=pso_iters, output_transform=output_transform, provenance=provenance,
        mix_machines=mix_machines, failure_model=failure_model, device=device, ei_draws=ei_draws, journal=journal)
    if not (isinstance(refit_every, str) and refit_every == AUTO):
        tuner_options["refit_every"] = refit_every
    if not (isinstance(refit_on_drift, str) and refit_on_drift == AUTO):
        tuner_options["refit_on_drift"] = refit_on_drift
    loop_options: dict[str, Any] = dict(
        comm=comm, parallel_evaluations=parallel_evaluations, noise=noise, pruner=pruner, max_time=max_time,
        executor=executor, max_in_flight=max_in_flight)
    if sources is None:
        tuner_options["proposer"] = proposer
        if not (isinstance(source_points, str) and source_points == AUTO):
            raise sourced.SourceError("source_points= sets how many measurements of each source task the model "
                                      "takes; it needs sources=")
        if select_sources:
            raise sourced.SourceError(sourced.NEEDS_SOURCES)
        if cache is not None:
            raise sourced.SourceError(f"cache= keeps the sources' measurements and the fit on them; it needs sources= "
                                      f"(got cache={cache!r})")
        evaluator = Evaluator(problem.objective, repeats=repeats, aggregate=aggregate, timeout=timeout, noise=noise,
                              pruner=pruner, outputs=problem.outputs)
        return tune_here(problem, tasks, budget, n_initial, seed, history, evaluator=evaluator, progress=progress,
                         max_time=max_time, parallel_evaluations=parallel_evaluations, executor=executor,
                         max_in_flight=max_in_flight, n_latent=n_latent, comm=comm, target=target,
                         max_failures=max_failures, cost_budget=cost_budget, **tuner_options)
    used = [k for k in sourced.UNSUPPORTED if loop_options[k] not in (None, False)]
    if used:
        raise sourced.SourceError(f"gt.tune(..., sources=...) does not take {used} yet")
    return sourced.tune_with_sources(
        problem, tasks, budget, n_initial, seed, history, repeats, aggregate, timeout, progress, sources,
        source_points=source_points, select_sources=select_sources, proposer=None if by_level is not None else proposer,
        cache=cache, n_latent=n_latent, target=target, fidelity=by_level, cost_budget=cost_budget,
        max_failures=max_failures, max_time=max_time, executor=executor, max_in_flight=max_in_flight, **tuner_options)


def _budget(budget: int | None, n_initial: int | None, cost_budget: float | None,
            tasks: Any) -> tuple[int, int | None]:
    """The per-task ``budget`` and ``n_initial`` of a call: 20 and the tuner's default without a
    cost budget; with one and no budget, COST_BUDGET_RUNS per task (fewer where the exact model
    could not hold them all) and an initial design of 10."""
    from ..model.numerics import defaults
    from ..tuning.fidelity import COST_BUDGET_RUNS

    if budget is not None:
        return budget, n_initial
    if cost_budget is None:
        return 20, n_initial
    n_tasks = tasks if isinstance(tasks, int) and not isinstance(tasks, bool) else len(tasks)
    budget = max(2, min(COST_BUDGET_RUNS, defaults.EXACT_FIT_MAX_POINTS // max(1, n_tasks)))
    return budget, min(budget, 10) if n_initial is None else n_initial
