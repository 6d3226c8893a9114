"""Several sources: measurements of the same problem made on other machines, in one model.

``gt.tune(problem, tasks, ..., sources=[...])`` and ``gt.predict_optimum(result, task, sources=[...])``
take histories, tuning or fit results, model files and measurement files (CSV, or a list of dicts,
with ``machine.*`` columns) of the *same* problem measured elsewhere. Each machine becomes a value of
one more task dimension, the categorical :data:`MACHINE_DIM` ("machine"), so that every
(task, machine) pair is a task of the one multitask model (LCM): the sources' trials are tasks
the model learns from and that take no new run, this machine's tasks are tuned (the machine-as-a-
category design of issue 24; machines described by features are not built). With
``select_sources=True`` the sources are first judged by cross-validation on this machine's runs and
those that hurt are left out (:mod:`gptask.sources.selection`).

* **Machines.** Every measurement carries its machine record (:mod:`gptask.data.provenance`); records
  of the same machine (:func:`~gptask.data.provenance.same_machine`) share one category, labelled by the
  record's ``label``, else its first accelerator model, else its CPU model (``#2``, ``#3`` appended
  when two machines would share a text). The machine that runs ``gt.tune`` is the record of its
  ``provenance`` ("auto": this process's); ``predict_optimum`` predicts for ``machine=`` (a label of
  a source, or a record/label of a machine with no run: a category the model has no data for).
* **Listed configurations.** A problem with ``candidates`` (a recorded or partly measured space)
  keeps its list for this machine's tasks; a source's task lists what that source measured, and a
  source's rows are checked against the problem's constraints only (another machine ran its own
  list: the 2-core and the 16-core PDGEQRF campaigns of ``bench/cross_machine.py``).
* **Large sources.** ``source_points="auto"`` (the default): when the other machines' measurements
  are more than :data:`SOURCE_POINTS_AUTO` in all, each of their tasks is summarised to an equal
  share of that many (at least :data:`SOURCE_POINTS_MIN`): its best quarter and the rest drawn at
  random (:mod:`gptask.model.source_summary`; the log says how many were kept). An integer sets the
  share per task, None keeps every measurement (the exact model then refuses more than
  ``EXACT_FIT_MAX_POINTS``). Measurements of this machine are never summarised.
* **A new machine of a task the sources ran.** Where other machines measured the same task (the
  same task values), a tuned task starts with the configurations best on average over them, measured
  by all and failed on none (:mod:`gptask.results.consensus`), and its first ten searched runs (then every
  other) choose among the next ones (:mod:`gptask.tuning.sourced`); when every tuned task is such a
  task, the default ``n_initial`` is TLA2's, 30 % of the budget; ``predict_optimum`` for a machine
  with no run values each candidate by the sources' measurements where they have one, those the
  summary left out of the model included. When they have one everywhere (complete campaigns of the
  other machines: every allowed configuration measured on each), the pick is their ranking and no
  model is fitted for it: the prediction (a :class:`~gptask.transfer.tla1.LazyPrediction`) fits the
  model when its ``value``, ``value_std``, ``std`` or ``raw`` is first read (issue 46).
* **Work kept.** ``predict_optimum(..., cache=DIR)`` keeps each source's measurements (read and
  checked) and the fitted model in the folder ``DIR`` by content (:mod:`gptask.sources.cache`): a
  second call with the same sources reads and fits nothing, a changed row is read and fitted again.
  A resumed ``gt.tune`` finds the sources' trials in its history (imported once) and reuses the
  stored hyperparameters when its data are those they were fitted on; it reads the sources again.
* **Bad sources** are refused with :class:`SourceError` naming the source: another problem
  (the signatures differ: parameters, tasks, constants, constraints; each difference named), another
  unit of the objective, trials without a machine record (unless ``Source(data, machine=...)`` names
  their machine: the explicit mapping), a model file of another problem or written by a newer
  gptask, a model file of a task measured on several machines (give its history), a problem that
  already has a ``machine`` task dimension.
* **Model files** (``save_model``; a shipped model of ``models/``) bring the data their model was
  fitted on: the encoded configurations decoded, the values mapped back from model units (equal to
  the measured ones to rounding), each task's machine from the file's provenance (a file written
  before gptask recorded machines needs ``gt.Source(path, machine=...)``). What the model saw is
  what comes in: repeated launches already reduced to one value per configuration, and a failed
  run that the model saw as its task's worst value comes in as that value.
* **Fidelity.** A problem with fidelity runs its fidelity schedule (:mod:`gptask.tuning.fidelity`):
  this machine's tasks first, level by level as its proposer lays them out, then the sources'
  tasks; a source's measurement is data of the fidelity in its task row (:func:`note_levels`), and
  the sources' measurements cost nothing against ``cost_budget`` (docs/fidelity.md). Auxiliary
  tasks (``aux_tasks=``, with or without fidelity) are this machine's tasks of that layout: they
  run, and their runs cost; one a source measured on another machine is a task of its own beside
  the source's, one it measured on this machine starts from those measurements (:func:`note_aux_tasks`).
  ``select_sources=True`` runs the fidelity schedule's designs first and judges the sources by
  every run of them (:data:`SELECT_TARGET_RUNS_ONLY`).
* **Histories.** With sources, ``history=`` holds the combined problem (the task space plus
  ``machine``): the sources' trials are imported into it once (an import of the same trials again
  adds nothing), so a killed run resumes as any other. A history of the problem itself is refused
  by signature.

Over 500 lines on purpose: it plans a run with sources (the combined problem, the summary caps, the
consensus designs, the selection) and drives it; reading is :mod:`.measurements`'s.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..results.consensus import consensus_order
from .cache import SourceCache
from .measurements import Measurement, Source, SourceError, read_measurements, shown_name
from ..problem.definition import Problem
from ..data.run_header import RunHeader, write_source_selection
from ..data.provenance import ProvenanceError, check_record, flatten, resolve_record, same_machine, this_machine
from ..results.result import LazyModelResult, TuningResult
from .selection import SourceSelection, select_sources as select_by_cv
from ..space.dimensions import Categorical, Space
from ..data.trials import SOURCE_BROUGHT, Status, Trial, point_key

__all__ = ["Source", "SourceError", "MACHINE_DIM", "SOURCE_POINTS_AUTO", "SOURCE_POINTS_MIN",
           "machine_labels", "combined_problem",
           "tune_with_sources", "predict_optimum", "target_tasks", "note_levels", "note_aux_tasks",
           "SELECT_TARGET_RUNS_ONLY", "SELECT_TARGET_DESIGN_SHARE"]

log = logging.getLogger(__name__)

#: the task dimension that holds the machine, with sources
MACHINE_DIM = "machine"
#: source_points="auto": sources of other machines holding more measurements than this in all are
#: summarised (:mod:`gptask.model.source_summary`) to this many, shared equally by their tasks, and never
#: fewer than SOURCE_POINTS_MIN per task (a fit of the exact model at 1,000 points takes seconds on 2
#: cores, at 5,000 hours)
AUTO = "auto"
SOURCE_POINTS_AUTO, SOURCE_POINTS_MIN = 1000, 50


# ---- machines as a task dimension -----------------------------------------------------------------------
def _short(record: Mapping[str, Any]) -> str:
    if record.get("label"):
        return str(record["label"])
    if record.get("accelerators"):
        return re.sub(r"\s*\(\d+\s*MiB\)$", "", str(record["accelerators"][0])).strip()
    return str(record.get("cpu") or record.get("host") or "machine")


def machine_labels(records: Sequence[Mapping[str, Any]]) -> list[str]:
    """One category label per record (module docstring): records of the same machine get the same
    label, different machines different ones."""
    firsts: list[tuple[Mapping[str, Any], str]] = []
    out: list[str] = []
    for k, record in enumerate(records):
        if k and record == records[k - 1]:  # the measurements of one source repeat its record
            out.append(out[-1])
            continue
        for first, label in firsts:
            if same_machine(first, record):
                out.append(label)
                break
        else:
            base, k = _short(record), 2
            label = base
            while any(label == other for _, other in firsts):
                label, k = f"{base} #{k}", k + 1
            firsts.append((record, label))
            out.append(label)
    return out


class _WithoutMachine:
    """A function of the task (and params) called without the machine dimension (picklable, for
    executors)."""

    def __init__(self, fn: Any, dim: str) -> None:
        self.fn, self.dim = fn, dim

    def __call__(self, task: Mapping[str, Any], *args: Any) -> Any:
        return self.fn({k: v for k, v in task.items() if k != self.dim}, *args)


class _CandidatesByMachine:
    """The candidates of a combined problem with listed configurations: a task of a source lists
    what that source measured on it (``measured``: task key -> params; filled by the plan), any
    other task asks the problem's own candidates without the machine dimension (picklable)."""

    def __init__(self, own: Any, dim: str, measured: dict[str, list[dict]]) -> None:
        self.own, self.dim, self.measured = own, dim, measured

    def __call__(self, task: Mapping[str, Any]) -> list[dict]:
        listed = self.measured.get(point_key(dict(task)))
        if listed is not None:
            return listed
        if not callable(self.own):
            return list(self.own)
        return self.own({k: v for k, v in task.items() if k != self.dim})


def combined_problem(problem: Problem, labels: Sequence[str], measured: dict[str, list[dict]] | None = None) -> Problem:
    """``problem`` with one more task dimension, the categorical :data:`MACHINE_DIM` over ``labels``;
    its objective, default and ``run_cost`` are called without it (the expanded problem of one with
    fidelity keeps its fidelity: the levels are values of its task rows). A problem with
    ``candidates`` keeps them for the tasks of this machine; a source's task lists the
    configurations in ``measured`` (task key -> params, of the combined task space)."""
    if MACHINE_DIM in problem.task_space.names or MACHINE_DIM in problem.param_space.names:
        raise SourceError(f"problem {problem.name!r} already has a {MACHINE_DIM!r} dimension: sources add it")
    for what in ("features", "cost_model"):
        if getattr(problem, what, None) is not None:
            raise SourceError(f"problem {problem.name!r} has {what}: sources do not support them yet")
    if problem.outputs is not None:
        raise SourceError(f"problem {problem.name!r} has named outputs {list(problem.outputs.names)}: sources "
                          "support one objective so far")
    choices = list(dict.fromkeys(labels))
    task_space = Space([*problem.task_space.dimensions, Categorical(MACHINE_DIM, choices)])
    default = problem.default
    if callable(default):
        default = _WithoutMachine(default, MACHINE_DIM)
    candidates = None if problem.candidates is None else _CandidatesByMachine(
        problem.candidates, MACHINE_DIM, {} if measured is None else measured)
    out = Problem(task_space, problem.param_space, _WithoutMachine(problem.objective, MACHINE_DIM),
                  constraints=problem.constraints, constants=problem.constants, name=problem.name, default=default,
                  unit=problem.unit, provenance=problem.provenance, candidates=candidates)
    if problem.fidelity is not None and set(problem.fidelity.names) <= set(problem.task_space.names):
        # the expanded problem of one with fidelity (Problem.expanded): its levels are values of task rows
        out.fidelity, out.target_fidelity = problem.fidelity, problem.target_fidelity
    if problem.run_cost is not None:
        out.run_cost = _WithoutMachine(problem.run_cost, MACHINE_DIM)
    return out


@dataclass
class _Plan:
    problem: Problem
    source_tasks: list[dict]
    trials: list[Trial]
    records: list[dict]
    target_label: str
    names: dict[int, str] = field(default_factory=dict)  # per source item, how it was given (for reports)
    measured: list[Trial] = field(default_factory=list)  # every measurement, before the summary


def _source_cap(source_points: Any, n_points: int, n_tasks: int) -> int | None:
    """Measurements kept per source task (None: all) for ``source_points`` ("auto", a positive
    integer or None) when the other machines' tasks hold ``n_points`` in ``n_tasks`` tasks."""
    if source_points is None:
        return None
    if isinstance(source_points, str) and source_points == AUTO:
        if n_points <= SOURCE_POINTS_AUTO:
            return None
        return max(SOURCE_POINTS_MIN, SOURCE_POINTS_AUTO // max(1, n_tasks))
    if isinstance(source_points, bool) or not isinstance(source_points, int) or source_points < 1:
        raise SourceError(f"source_points must be 'auto', a positive number of measurements per source task or None "
                          f"(all), got {source_points!r}")
    return int(source_points)


def _summarised(trials: list[Trial], records: list[dict], others: set[int],
                cap: int | None) -> tuple[list[Trial], list[dict]]:
    """``trials`` (and their ``records``) with every task in ``others`` cut to ``cap`` measurements
    (:mod:`gptask.model.source_summary`)."""
    from ..model.source_summary import BEST_SHARE, summary_indices

    if cap is None:
        return trials, records
    by_task: dict[int, list[int]] = {}
    for k, t in enumerate(trials):
        by_task.setdefault(t.task_index, []).append(k)
    big = {i: ks for i, ks in by_task.items() if i in others and len(ks) > cap}
    if not big:
        return trials, records
    drop: set[int] = set()
    for ks in big.values():
        keep = set(summary_indices([trials[k].value if trials[k].status is Status.COMPLETE else None for k in ks],
                                   cap).tolist())
        drop.update(k for j, k in enumerate(ks) if j not in keep)
    log.info("sources: %d task(s) of more than %d measurements summarised to %d each (the %d best, the rest drawn "
             "at random), %d of %d measurements kept; source_points= sets how many", len(big), cap, cap,
             int(cap * BEST_SHARE), len(trials) - len(drop), len(trials))
    kept = [k for k in range(len(trials)) if k not in drop]
    return [trials[k] for k in kept], [records[k] for k in kept]


def _plan(problem: Problem, sources: Sequence[Any], target: Mapping[str, Any],
          extra_labels: Sequence[str] = (), source_points: Any = AUTO, cache: SourceCache | None = None) -> _Plan:
    if isinstance(sources, (str, os.PathLike, Source, TuningResult)) or not isinstance(sources, Sequence):
        raise SourceError(f"sources must be a list of histories, results or data, got {type(sources).__name__}")
    if not sources:
        raise SourceError("sources must not be empty (leave sources out to tune without them)")
    names = {k: f" ({name})" if (name := shown_name(item)) else "" for k, item in enumerate(sources)}
    def read(k: int, item: Any) -> list[Measurement]:
        if cache is None:
            return read_measurements(problem, item, f"#{k}" + names[k])
        return cache.measurements(problem, item, lambda: read_measurements(problem, item, f"#{k}" + names[k]))

    measured = [(k, m) for k, item in enumerate(sources) for m in read(k, item)]
    records = [m.machine for _, m in measured]
    labels = machine_labels([*records, dict(target)])
    target_label = labels[-1]
    measured_params: dict[str, list[dict]] = {}  # the candidates of the sources' tasks
    seen_params: set[tuple[str, str]] = set()
    cp = combined_problem(problem, [*labels, *extra_labels], measured_params)
    tasks: dict[str, int] = {}
    source_tasks: list[dict] = []
    trials: list[Trial] = []
    checked: dict[tuple, tuple[dict, tuple]] = {}  # the measurements of one task repeat it: validated once
    for (k, m), label in zip(measured, labels):
        once = (point_key(m.task), label)
        if once not in checked:
            task = cp.task_space.validate({**m.task, MACHINE_DIM: label}, what=f"source #{k} task")
            checked[once] = (task, point_key(task))
        task, key = checked[once]
        if key not in tasks:
            tasks[key] = len(source_tasks)
            source_tasks.append(task)
        pkey = (key, point_key(m.params))
        if label != target_label and pkey not in seen_params:  # this machine's tasks keep the problem's list
            seen_params.add(pkey)
            measured_params.setdefault(key, []).append(dict(m.params))
        trials.append(Trial(id=0, task_index=tasks[key], task=task, params=m.params, status=m.status, value=m.value,
                            samples=m.samples, reason="" if m.status is Status.COMPLETE else f"{m.status.value} in "
                            f"source #{k}", extra={"source": k}, source=SOURCE_BROUGHT))
    log.info("sources: %d measurements of %d machine(s) (%s) in %d task(s); this machine: %s", len(trials),
             len(set(labels[:-1])), ", ".join(sorted(set(labels[:-1]))), len(source_tasks), target_label)
    others = {i for i, t in enumerate(source_tasks) if t[MACHINE_DIM] != target_label}
    cap = _source_cap(source_points, sum(t.task_index in others for t in trials), len(others))
    measured = trials
    trials, records = _summarised(trials, records, others, cap)
    return _Plan(cp, source_tasks, trials, records, target_label, names,
                 measured)


def target_tasks(result: TuningResult) -> list[int]:
    """The indices of the tasks of a ``gt.tune(..., sources=...)`` result that hold runs of its own
    (trials not brought by a source): the tuned ones; the others are only its sources' tasks."""
    return sorted({t.task_index for t in result.history if t.source != SOURCE_BROUGHT})


# ---- the entry points -------------------------------------------------------------------------------------
#: with fidelity or auxiliary tasks, select_sources=True judges the sources by the held-out fit of
#: every run of this machine's designs (False: every level's and the auxiliary tasks' runs, as
#: without them) or of the tuned tasks' target-fidelity runs only (True). False: 12 seeds, a source
#: of the same function and one of random values, the designs of n_initial 10 (5 target runs): the
#: source that relates adds +5.9 nats on average (dropped on 2 of 12 seeds), the random one -0.4
#: (dropped on 3); scored on the 5 target runs alone, -0.1 and +0.5 (dropped on 3 and 1): too few
#: runs to tell them apart (bench/results/select_fidelity_scoring.md)
SELECT_TARGET_RUNS_ONLY = False
#: with fidelity, select_sources=True runs a target design of this share of ``n_initial`` (5 runs of
#: 10; the fidelity schedule's own default is 2, gptask.tuning.fidelity.TARGET_DESIGN_SHARE): the
#: sources are judged by the designs' runs, and with 2 target runs the source of the same function
#: in tests/test_aux_sources.py was dropped beside the random one
SELECT_TARGET_DESIGN_SHARE = 0.5
#: the error of select_sources=True without sources
NEEDS_SOURCES = "select_sources=True judges the sources by this machine's runs; it needs sources="
#: gt.tune arguments that the sources path does not take yet (gptask.api.campaign.tune refuses them)
UNSUPPORTED = ("comm", "parallel_evaluations", "noise", "pruner")


def tune_with_sources(problem: Problem, tasks: Any, budget: int, n_initial: int | None, seed: int, history: Any,
                      repeats: int, aggregate: str, timeout: float | None, progress: bool, sources: Sequence[Any],
                      provenance: Any = "auto", mix_machines: bool = False, source_points: Any = AUTO,
                      select_sources: bool = False, proposer: str | None = None,
                      cache: str | os.PathLike | None = None, fidelity: Any = None,
                      max_time: float | None = None, executor: Any = None, max_in_flight: int | None = None,
                      **options: Any) -> TuningResult:
    """``gt.tune(..., sources=...)`` (:func:`gptask.api.campaign.tune` checks its options first): the problem's
    tasks are tuned on this machine (``provenance``) in one model with the sources' measurements. The
    result's tasks are the sources' tasks (``machine`` = their machine) followed by the tuned ones
    (``machine`` = this one; with ``select_sources=True`` the tuned ones first, then the kept
    sources' tasks); :func:`target_tasks` lists the tuned ones. ``history`` then holds the combined
    problem. proposer: the name of a registered proposer (:mod:`gptask.tuning.proposer`) built with
    ``proposes`` (the tuned tasks' indices) and ``designs`` (their consensus orders) for this run;
    None: :class:`~gptask.tuning.sourced.ConsensusProposer`. ``options``: the Tuner's (``target``,
    ``max_failures``, ``kernel``, ``cost_budget``, ...). fidelity: for a problem with fidelity or
    auxiliary tasks, the :class:`~gptask.tuning.fidelity.FidelityProposer` of
    :func:`gptask.tuning.fidelity.prepare` (``problem`` the expanded problem, ``tasks`` its task rows,
    docs/fidelity.md): it chooses the runs, and this machine's task rows come first in the result,
    level by level as it lays them out, then the sources' tasks; a source's measurement at a
    fidelity level is data of that level (its fidelity values are in its task row), never a
    target run (:func:`note_levels`). max_time, executor, max_in_flight: the loop's, as without sources
    (:func:`gptask.tuning.loop.loop_options`), for the designs run before the sources are judged too; a run
    stopped before those designs are done (max_time, a Slurm signal) judges nothing and imports no source: it
    returns those runs, and the resume goes on."""
    from ..evaluation.evaluate import Evaluator
    from ..data.storage import HistoryMismatch, Storage, open_storage
    from ..tuning.loop import loop_options, run, set_async_refits
    from ..tuning.settings import new_task_initial
    from ..tuning.proposer import Proposer, make_proposer
    from ..tuning.sourced import ConsensusProposer
    from ..tuning.tuner import Tuner, resolve_tasks

    if isinstance(proposer, Proposer):
        raise SourceError("with sources=, give proposer= as a registered name: the proposer is made for the run "
                          "with the tasks it proposes for and their consensus designs")
    target = resolve_record(provenance, problem)
    if target is None:
        raise SourceError("tuning with sources needs this machine's record: provenance=None is not allowed")
    store = None if cache is None else SourceCache(cache)
    plan = _plan(problem, sources, target, source_points=source_points, cache=store)  # mixing machines is asked for here
    if fidelity is not None:
        note_levels(plan, problem, fidelity.levels)
    mine = [plan.problem.task_space.validate({**t, MACHINE_DIM: plan.target_label})
            for t in resolve_tasks(problem, tasks, seed)]
    if fidelity is not None:
        note_aux_tasks(plan, problem, mine, fidelity)
    # the tuned tasks (with auxiliary tasks, the first of ``mine``, their layout's)
    tuned = mine if fidelity is None else mine[:fidelity.n_tuned]
    # their consensus designs: without fidelity, auxiliary tasks or not (with fidelity levels the
    # schedule's designs: cheap level first, promotion)
    designs = _consensus_designs(plan, tuned) if fidelity is None or fidelity.n_levels == 1 else {}
    if fidelity is not None:
        fidelity.start_from(_by_index(designs, mine))
    if n_initial is None and isinstance(budget, int) and not isinstance(budget, bool) and budget >= 1 \
            and len(designs) == len({point_key(t) for t in tuned}):
        n_initial = new_task_initial(budget)  # every tuned task is a new machine's run of a measured task
    own = not isinstance(history, Storage)
    try:
        storage = open_storage(history, plan.problem.signature())
    except HistoryMismatch as exc:
        raise SourceError(_resume_mismatch(exc, plan)) from None
    evaluator = Evaluator(plan.problem.objective, repeats=repeats, aggregate=aggregate, timeout=timeout)
    tuner_args = dict(provenance=target, mix_machines=True, **options)
    selection = None
    try:
        loop = loop_options(evaluator, max_time, executor, max_in_flight)
        if select_sources:
            if fidelity is not None:
                fidelity.target_design_share = SELECT_TARGET_DESIGN_SHARE
            selection, stopped = _selection(plan, mine, storage, evaluator, budget, n_initial, seed, progress,
                                            tuner_args, _by_index(designs, mine), fidelity, loop)
            if selection is None:
                log.info("sources: stopped before this machine's initial designs were done: nothing judged, no "
                         "source imported yet; the resumed run goes on")
                return stopped
            trials, records = _kept(plan, selection)
            all_tasks = mine + [t for t in {point_key(t.task): t.task for t in trials}.values() if t not in mine]
        elif fidelity is not None:  # the fidelity proposer's layout first (its task indices), then the sources'
            trials, records = plan.trials, plan.records
            all_tasks = mine + [t for t in plan.source_tasks if t not in mine]
        else:
            trials, records = plan.trials, plan.records
            all_tasks = plan.source_tasks + [t for t in mine if t not in plan.source_tasks]
        storage.set_tasks(all_tasks)
        index = {point_key(t): i for i, t in enumerate(all_tasks)}
        storage.import_trials([replace(t, task_index=index[point_key(t.task)]) for t in trials], records)
        proposes = {i for i, t in enumerate(all_tasks) if t in mine}
        made = fidelity if fidelity is not None else make_proposer(
            proposer or ConsensusProposer.name, {"proposes": proposes, "designs": _by_index(designs, all_tasks)})
        fit_path = None
        if store is not None:
            model_options = {k: options.get(k) for k in ("kernel", "n_latent", "restarts", "output_transform",
                                                         "failure_model", "device")}
            finished = [t for t in storage.trials() if t.status.finished]
            fit_path = store.fit_path(plan.problem, finished, {**model_options, "seed": seed})
            if store.restore_fit(fit_path, storage):
                log.info("cache: the model's last fit on these data taken from %s", fit_path)
        with Tuner(plan.problem, all_tasks, budget, n_initial, seed, storage, proposer=made, **tuner_args) as tuner:
            set_async_refits(tuner, loop["max_in_flight"], tuner_args)
            result = run(tuner, evaluator, progress=progress, lazy_model=True, **loop)
        result.source_selection = selection
        if store is not None and isinstance(result, LazyModelResult):
            done = store.fit_path(plan.problem, result.history, {**model_options, "seed": seed})
            result.on_fit(lambda record: store.keep_fit(done, record))
        return result
    finally:
        if own:
            storage.close()


def note_levels(plan: _Plan, problem: Problem, levels: Sequence[Mapping[str, Any]] | None = None) -> None:
    """Log the sources' measurements of ``plan`` that are at no fidelity level of the run (``levels``,
    :func:`gptask.tuning.fidelity.run_levels`; None: the ladder of ``problem``, an expanded problem
    with fidelity, :meth:`Problem.expanded`). The rule (docs/fidelity.md): a
    measurement at one of the levels is data of that level (its fidelity values are in its task
    row); at another value of the fidelity space (an earlier campaign's other ladder or target) it
    is a task of its own that the model relates to the levels, as it relates the sources' other
    tasks; a value outside the fidelity space, or a source without the fidelity values, is refused
    when read, naming the source."""
    if problem.fidelity is None:
        return
    names = problem.fidelity.names
    levels = problem.fidelity_levels() if levels is None else list(levels)
    keys = {point_key(level) for level in levels}
    other: dict[int, set[tuple]] = {}
    for t in plan.measured:
        got = {k: t.task[k] for k in names}
        if point_key(got) not in keys:
            other.setdefault(int(t.extra["source"]), set()).add(tuple(got.items()))
    for k, values in sorted(other.items()):
        log.info("sources: source #%d%s has measurements at fidelity %s, none of the levels %s: tasks of their own "
                 "that the model relates to the levels", k, plan.names.get(k, ""),
                 ", ".join(str(dict(v)) for v in sorted(values)), levels)


def note_aux_tasks(plan: _Plan, problem: Problem, mine: Sequence[Mapping[str, Any]], fidelity: Any) -> None:
    """Log each auxiliary task (of ``fidelity``'s layout of ``mine``, this machine's task rows) that
    a source of ``plan`` measured (the same task values, fidelity aside). The rule (docs/fidelity.md):
    measured on another machine, it is a task of its own that runs here too (the model relates the
    machines through it); measured on this machine, those measurements are its data (the task row
    is the same), and its design runs only the points they lack."""
    names = {MACHINE_DIM, *(problem.fidelity.names if problem.fidelity is not None else ())}
    def values(task: Mapping[str, Any]) -> dict:
        return {k: v for k, v in task.items() if k not in names}

    aux = {point_key(values(t)): values(t) for i, t in enumerate(mine) if not fidelity.is_target(i)
           and fidelity.role(i) == "auxiliary"}
    seen: dict[tuple, set[tuple[int, str]]] = {}
    for t in plan.measured:
        key = point_key(values(t.task))
        if key in aux:
            seen.setdefault(key, set()).add((int(t.extra["source"]), str(t.task[MACHINE_DIM])))
    for key, by in seen.items():
        for k, machine in sorted(by):
            if machine == plan.target_label:
                log.info("sources: auxiliary task %s was measured by source #%d%s on this machine (%s): those "
                         "measurements are its data, its design runs only the points they lack", aux[key], k,
                         plan.names.get(k, ""), machine)
            else:
                log.info("sources: auxiliary task %s was measured by source #%d%s on %s: it runs here too, a task "
                         "of its own on this machine (the model relates the machines through it)", aux[key], k,
                         plan.names.get(k, ""), machine)


def _resume_mismatch(exc: Exception, plan: _Plan) -> str:
    """The error of a history of an earlier ``gt.tune(..., sources=...)`` that this call cannot
    resume (``exc``, the storage's mismatch with the signature the history holds), in words: which
    machines (the sources' and this one) it was tuned with and which this call brings, removed,
    added or in another order; the storage's own message when the machines agree (another problem)."""
    stored = getattr(exc, "stored", None)
    if stored is None:
        return str(exc)
    before = next((d.get("choices") for d in stored.get("task_space") or []
                   if isinstance(d, dict) and d.get("name") == MACHINE_DIM), None)
    now = next(list(d.choices) for d in plan.problem.task_space.dimensions if d.name == MACHINE_DIM)
    if before is None or list(before) == now:
        return str(exc)
    where = getattr(exc, "where", "") or "given"
    removed = [m for m in before if m not in now]
    added = [m for m in now if m not in before]
    what = "; ".join(filter(None, [
        f"removed {removed}" if removed else "", f"added {added}" if added else "",
        "the same machines in another order" if not removed and not added else ""]))
    return (f"history {where} was tuned with the machines {list(before)} (the sources' in the order given, then "
            f"this machine's); this call gives {now}: {what}. Resume it with the same sources in the same order, "
            "or give a new history for another set of sources")


def _consensus_designs(plan: _Plan, mine: list[dict]) -> dict[tuple, list[dict]]:
    """Per task of ``mine`` (by its point_key) that other machines measured (the same task values):
    the configurations all of them measured and none failed, best on average first
    (:func:`gptask.results.consensus.consensus_order`), those this machine may run."""
    out: dict[tuple, list[dict]] = {}
    by_task: dict[tuple, list[Trial]] = {}
    for t in plan.measured:
        by_task.setdefault(point_key(t.task), []).append(t)
    for task in mine:
        values = {k: v for k, v in task.items() if k != MACHINE_DIM}
        alike = [t for t in plan.source_tasks if t[MACHINE_DIM] != plan.target_label
                 and {k: v for k, v in t.items() if k != MACHINE_DIM} == values]
        theirs = [t for a in alike for t in by_task.get(point_key(a), [])]
        listed = consensus_order(theirs, alike)
        refused = plan.problem.infeasible_rows([task] * len(listed), listed) if listed else []
        order = [p for p, out in zip(listed, refused) if not out]  # those this machine may run
        if order:
            log.info("sources: task %s starts with the configurations best on average over %d other machine(s) "
                     "(%d measured by all, none failed)", task, len(alike), len(order))
            out[point_key(task)] = order
    return out


def _by_index(designs: dict[tuple, list[dict]], tasks: list[dict]) -> dict[int, list[dict]]:
    """``designs`` keyed by the index of their task in ``tasks``."""
    return {i: designs[point_key(t)] for i, t in enumerate(tasks) if point_key(t) in designs}


def _fingerprint(plan: _Plan) -> list[list]:
    """Per source item: its index and how many measurements of which machines it brought."""
    counts: dict[int, dict[str, int]] = {}
    for t in plan.trials:
        by = counts.setdefault(int(t.extra["source"]), {})
        by[t.task[MACHINE_DIM]] = by.get(t.task[MACHINE_DIM], 0) + 1
    return [[k, [[m, n] for m, n in sorted(by.items())]] for k, by in sorted(counts.items())]


def _selection(plan: _Plan, mine: list[dict], storage: Any, evaluator: Any, budget: int, n_initial: int | None,
               seed: int, progress: bool, tuner_args: dict, designs: dict[int, list[dict]],
               fidelity: Any = None, loop: Mapping[str, Any] | None = None
               ) -> tuple[SourceSelection | None, TuningResult | None]:
    """select_sources=True: this machine's initial designs run first (no model, no source), then
    each source is judged by them (:func:`gptask.sources.selection.select_sources`); the outcome is
    kept in the history, so a resumed run reuses it (and refuses other sources). fidelity: the
    run's :class:`~gptask.tuning.fidelity.FidelityProposer` (a problem with fidelity or auxiliary
    tasks): the designs are its schedule's (cheap level first, promotion, cost-trimmed cheaper
    designs; the first target run picked from this campaign's cheap runs, no source being judged
    yet), run by a proposer of the same layout, and the sources are judged by the held-out fit of
    every run of them, as without fidelity (with SELECT_TARGET_RUNS_ONLY, of the tuned tasks'
    target-fidelity runs only, the others fitted on). loop: :func:`gptask.tuning.loop.run`'s stop_at, executor
    and max_in_flight for the designs. Returns (the selection, None), or (None, the designs' result) when the run
    stopped before they were done (nothing judged or written: the resume runs the rest, then judges)."""
    from ..tuning.fidelity import FidelityProposer
    from ..tuning.loop import run, set_async_refits
    from ..tuning.sourced import ConsensusProposer, DesignTuner

    stored = RunHeader.read(storage).source_selection
    if stored is not None:
        if stored.get("fingerprint") != _fingerprint(plan):
            raise SourceError(f"history {getattr(storage, 'path', '')} selected among other sources than these "
                              "(their number, machines or measurements differ): give the same sources, or another "
                              "history")
        return SourceSelection.from_json(stored["selection"]), None
    log.info("sources: this machine's initial designs run first; the sources are judged by them")
    proposer = ConsensusProposer(range(len(mine)), designs) if fidelity is None else FidelityProposer(
        fidelity.n_tuned, fidelity.n_aux, fidelity.n_levels, fidelity.orders, fidelity.target_design_share,
        fidelity.levels)
    with DesignTuner(plan.problem, mine, budget, n_initial, seed, storage, proposer=proposer, **tuner_args) as design:
        set_async_refits(design, (loop or {}).get("max_in_flight"), tuner_args)
        designed = run(design, evaluator, progress=progress, **(loop or {}))
        if not design.done:  # stopped (max_time, a Slurm signal): judge on the whole designs, at the resume
            return None, designed
        settings = design.surrogate.settings
    target, by_source, labels = _split(plan)
    target += [t for t in storage.trials() if t.status.finished]
    scored = [t for i, t in enumerate(mine) if fidelity.is_target(i)] \
        if fidelity is not None and SELECT_TARGET_RUNS_ONLY else None
    n = len(by_source)
    log.info("sources: judging %d source(s) by this machine's %d design runs%s (at most %d model fits)", n,
             sum(t.ok for t in target), "" if scored is None else ", scored on the tuned tasks' target runs",
             n * (n + 1) // 2 + 1)
    selection = _judged(plan, target, by_source, labels, output_transform=settings.output_transform,
                        kernel=settings.kernel, n_latent=settings.n_latent, restarts=settings.restarts, seed=seed,
                        scored=scored)
    write_source_selection(storage, _fingerprint(plan), selection.to_json())
    return selection, None


def _judged(plan: _Plan, target: list[Trial], by_source: dict[int, list[Trial]], labels: dict[int, str],
            **model_options: Any) -> SourceSelection:
    """:func:`gptask.sources.selection.select_sources` on the plan's sources, each verdict logged."""
    selection = select_by_cv(plan.problem.param_space, target, by_source, plan.names, labels, **model_options)
    for line in selection.lines():
        log.info("sources: %s", line)
    return selection


def _split(plan: _Plan) -> tuple[list[Trial], dict[int, list[Trial]], dict[int, str]]:
    """The plan's trials of this machine; the others by source item; each item's machine label(s)."""
    target = [t for t in plan.trials if t.task[MACHINE_DIM] == plan.target_label]
    by_source: dict[int, list[Trial]] = {}
    for t in plan.trials:
        if t.task[MACHINE_DIM] != plan.target_label:
            by_source.setdefault(int(t.extra["source"]), []).append(t)
    labels = {k: ", ".join(sorted({t.task[MACHINE_DIM] for t in ts})) for k, ts in by_source.items()}
    return target, by_source, labels


def _kept_trial(plan: _Plan, selection: SourceSelection, trial: Trial) -> bool:
    """Whether ``trial`` is of this machine or of a source ``selection`` keeps."""
    return trial.task[MACHINE_DIM] == plan.target_label or int(trial.extra["source"]) in selection.kept


def _kept(plan: _Plan, selection: SourceSelection) -> tuple[list[Trial], list[dict]]:
    """The plan's trials (and records) of this machine and of the sources ``selection`` keeps."""
    rows = [k for k, t in enumerate(plan.trials) if _kept_trial(plan, selection, t)]
    return [plan.trials[k] for k in rows], [plan.records[k] for k in rows]


def predict_optimum(source: Any, task: Mapping[str, Any], *, sources: Sequence[Any] | None = None,
                    machine: Any = None, source_points: Any = AUTO, select_sources: bool = False,
                    consensus: bool = True, cache: str | os.PathLike | None = None, **fit_options: Any) -> Any:
    """``gt.predict_optimum``: :func:`gptask.transfer.tla1.predict_optimum` itself without
    ``sources``. With them: ``source`` (a TuningResult, or None for no run on the machine to
    predict for) and ``sources`` are fitted as one model (``gt.fit`` on the combined problem,
    ``fit_options`` passed on), and the prediction is for ``task`` on ``machine`` (a record or
    label; default this process's); source_points: as for ``gt.tune``; consensus: for a machine (or
    any category) no measurement has, the configuration best on average over the known ones (False:
    TLA1's blend of their optima; :func:`gptask.transfer.tla1.predict_optimum`). cache: a folder
    where the sources' measurements and the fitted model are kept by content
    (:mod:`gptask.sources.cache`): a second call with the same sources reads and fits nothing.
    Returns the :class:`~gptask.transfer.Prediction`, whose task holds the ``machine`` label."""
    from ..transfer.tla1 import LazyPrediction, measured_consensus, predict_optimum as predict_here

    if sources is None:
        if select_sources:
            raise SourceError(NEEDS_SOURCES)
        return predict_here(source, task, consensus=consensus)
    if source is not None and not isinstance(source, TuningResult):
        raise SourceError("predict_optimum with sources takes a TuningResult (or None) first: a model file holds no "
                          "measurements to combine")
    items = list(sources) + ([source] if source is not None else [])
    problem = fit_options.pop("problem", None) or (source.problem if source is not None else None)
    if problem is None:
        raise SourceError("predict_optimum(None, task, sources=...) needs problem=: the problem the sources measure")
    if isinstance(sources, (str, os.PathLike, Source, TuningResult)):
        raise SourceError(f"sources must be a list of histories, results or data, got {type(sources).__name__}")
    try:
        target = this_machine() if machine is None else check_record(machine, "machine")
    except ProvenanceError as exc:
        raise SourceError(str(exc)) from None
    store = None if cache is None else SourceCache(cache)
    plan = _plan(problem, items, target, source_points=source_points, cache=store)
    trials, records, measured = plan.trials, plan.records, plan.measured
    if select_sources:
        target_runs, by_source, labels = _split(plan)
        model_options = {k: fit_options[k] for k in ("kernel", "n_latent", "restarts", "seed", "output_transform")
                         if fit_options.get(k) is not None}
        selection = _judged(plan, target_runs, by_source, labels, **model_options)
        trials, records = _kept(plan, selection)
        measured = [t for t in measured if _kept_trial(plan, selection, t)]
    rows = [{**t.task, **t.params, "value": t.value, "status": t.status.value,
             **flatten(records[k])} for k, t in enumerate(trials)]
    progress = fit_options.pop("progress", False)
    want = plan.problem.task_space.validate({**problem.task_space.validate(dict(task)),
                                             MACHINE_DIM: plan.target_label})
    def full() -> Any:
        return predict_here(_fitted(plan.problem, rows, store, progress, fit_options), want, consensus=consensus,
                            measured=measured)

    enc = None
    if consensus and problem.features is None and problem.cost_model is None:
        tuned = list({point_key(t.task): t.task for t in trials}.values())  # the model's tasks, all with data
        enc = measured_consensus(plan.problem, want, tuned, measured)
    if enc is None:
        return full()
    params = plan.problem.param_space.decode(enc[None, :])[0]
    log.info("sources: the consensus pick for %s is decided by the sources' measurements (every candidate measured "
             "on every machine); the model is fitted when the prediction's value or std is read", want)
    return LazyPrediction(full, task=want, params=params, encoded=enc, projected=False,
                          feasible=bool(plan.problem.is_feasible(want, params)), route="consensus")


def _fitted(problem: Problem, rows: list[dict], store: SourceCache | None, progress: bool,
            fit_options: dict[str, Any]) -> Any:
    """The model of ``gt.fit`` on ``rows`` of the combined ``problem``: loaded from ``store`` when
    these rows were fitted with these options before, else fitted (and kept there)."""
    from ..transfer.model_io import ModelFileError, load_model, save_model
    from .importing import fit

    path = None if store is None else store.model_path(problem, rows, fit_options)
    if path is not None and path.is_file():
        try:
            return load_model(path, problem=problem)
        except ModelFileError as exc:
            log.warning("cache: %s; fitting again", exc)
    result = fit(problem, rows, status="status", mix_machines=True, progress=progress, **fit_options)
    if store is not None and path is not None:
        store.fits += 1
        save_model(result, path, accuracy=False)
    return result
