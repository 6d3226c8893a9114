"""Cost-aware multitask tuning over fidelity levels and auxiliary tasks (issue 44, docs/fidelity.md).

The run's tasks are laid out as ``(level, base task)``: base tasks are the tuned tasks then the
auxiliary ones, levels the problem's fidelity levels, target first
(:meth:`gptask.problem.definition.Problem.fidelity_levels`); the tuner's task ``level * n_base + b``
is base task ``b`` at that level, so its first tasks are the tuned tasks at the target fidelity and
``result.best(k)`` speaks of them. In the LCM the levels of a base task share its coregionalisation
and differ by one more kernel input, their place in the ladder (:data:`LEVEL_MODEL`, :meth:`FidelityProposer.model_structure`):
the fit learns how far the levels relate.

:class:`FidelityProposer` (the tuner's proposer slot) chooses what to buy:

* initial designs (:meth:`FidelityProposer._plan`): a tuned task's cheapest level runs its whole
  Latin hypercube first (with :data:`PROMOTE_AFTER_COST`, the target's first run, the best of the
  cheap runs costing half of it, comes between that design's first runs and its rest); the target
  level then runs :data:`TARGET_DESIGN_SHARE` of its size, the :data:`PROMOTE` best configurations
  of the cheap runs first (:meth:`FidelityProposer._promote`, Hyperband's promotion), the levels between :data:`INTERMEDIATE_DESIGN` of the target's points
  (shared configurations, to judge the levels on), the cheaper designs cut to
  :data:`LOW_DESIGN_SHARE` of the cost budget when ``run_cost`` prices them (one point per level kept);
* then, per tuned task and round, the configuration is the maximiser of the target's acquisition
  (in turn with the cheapest level's own searches, :data:`CHEAP_SEARCH_SHARE`) and
  :meth:`FidelityProposer.place` picks its level: the target at least every
  :data:`TARGET_EVERY`-th searched run (Hyperband's and GPTuneBand's share of full-fidelity
  runs: the recommendation comes from target runs only), otherwise the level of most value of
  information per cost at x, ``cov(f_l, f_t)^2 / (var(f_l) + noise_l) / cost_l`` from the LCM's
  posterior cross-covariance (MF-GP-UCB / MISO style);
* the guard: once the target has :data:`JUDGE_AFTER` complete runs, a level (or an auxiliary task)
  whose correlation with the target is below :data:`RHO_MIN` on :data:`GUARD_CONFIRM` model updates
  in a row, by the rank correlation of the configurations it shares with the target where there are
  at least :data:`MIN_COMMON`, else by the model, is not bought while that lasts and its runs leave
  the model (logged, and listed in ``result.fidelity["dropped"]``);
* auxiliary tasks run their initial designs only: data that teaches the tuned tasks; with fidelity
  levels, their levels above the cheapest after every tuned task's first target run
  (:data:`AUX_AFTER_TARGET`, :data:`AUX_WAIT_CHEAPEST`).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..core.seeding import STAGE_CHEAP, STAGE_PRICE, rng
from ..data.trials import Status, params_key, point_key
from ..propose.proposals import initial_design
from ..problem.definition import Problem
from ..problem.fidelity import ETA, check_cost, cost_spaced, role_of
from .proposer import Proposer, consensus_window, designs_first
from .settings import SOURCE_SEARCH

__all__ = ["TARGET_EVERY", "CHEAP_SEARCH_SHARE", "FAILED_LEVEL_STOP", "TARGET_DESIGN_SHARE", "INTERMEDIATE_DESIGN", "LOW_DESIGN_SHARE", "PROMOTE", "PROMOTE_AFTER_COST", "CHEAP_DESIGN_SHARE", "CHEAP_DESIGN_MAX", "POOLED_FIRST", "POOLED_FIRST_RHO", "POOLED_SOURCES", "SOURCE_BEST_FIRST", "AUX_AFTER_TARGET", "AUX_WAIT_CHEAPEST", "RHO_MIN", "RHO_REBUY", "REBUY_CONFIRM", "MIN_COMMON", "JUDGE_AFTER", "GUARD_CONFIRM", "COST_BUDGET_RUNS", "PRICE_POINTS", "LEVEL_COST_RATIO", "LEVEL_MODEL", "FidelityProposer", "expand_tasks", "run_levels",
           "prepare", "fidelity_tuner",
           "guard_drops", "level_correlations", "spearman"]

log = logging.getLogger(__name__)

#: at least every TARGET_EVERY-th searched run of a tuned task is at the target fidelity; with
#: TARGET_COST_SHARE a number, also as soon as the cheaper runs since the last target run cost that
#: share of a target run (a cost-balanced schedule; None: off)
TARGET_EVERY, TARGET_COST_SHARE = 3, None
#: with a number, once its design is done a tuned task's cheapest level searches on its own (the
#: maximiser of its own acquisition) until its searched runs since the target's last searched run cost
#: CHEAP_SEARCH_SHARE of a target run (the target's mean cost), and only then does the target search
#: (None: only the targets search, the cheaper levels run the targets' maximisers, about 7-15 % of the
#: cost). bench/results/fidelity.md (10 seeds, 0.3 against None): regret at 25 % of the budget borehole
#: 0.549 -> 0.109, park 0.366 -> 0.091, currin 0.222 -> 0.160; park at 100 % 0.076 -> 0.045; the others
#: within noise (the uninformative currin_noinfo +0.024, se 0.027, at 50 %); 1.0 lost at 50 % on currin.
#: With sources it needs SOURCE_BEST_FIRST (without: regret at 10 % currin 0.163 -> 0.448, park 0.060 ->
#: 0.378 given an earlier campaign run with it as the source); on PDGEQRF within noise
#: (bench/results/fidelity_app_cheap_search.md). Under LEVEL_MODEL "input" (session 39, 10 seeds) None is
#: higher at 6 family-checkpoints (borehole at 25 % +0.246, park at 25 % +0.142), lower at none; 1.0 lower at
#: 4 (borehole at 100 % 0.086 -> 0.047, park at 50 / 100 %), higher at 4 (currin and currin_noinfo at 25 %,
#: branin at 100 % +0.008)
CHEAP_SEARCH_SHARE: float | None = 0.3
#: a cheaper level or auxiliary task whose last FAILED_LEVEL_STOP finished runs all failed is bought by
#: no search (neither the cheapest level's own nor a target's placed there): its failures teach the
#: target nothing, and runs that fail at once cost next to nothing, so the cost share and the value of
#: information per cost alone would buy them until the task's budget (tests/test_fidelity.py: 196
#: failed runs of a cheapest level whose cost output was invalid)
FAILED_LEVEL_STOP = 3
#: a level or auxiliary task whose correlation with the target is below this is not bought again
RHO_MIN = 0.3
#: the rank correlation on configurations run at both a level and the target counts from this many
MIN_COMMON = 5
#: the guard judges a level once its target has this many complete runs, and drops it after this
#: many low judgements in a row (one per model update): the first fits on a few runs are rough (on a
#: fidelity that ranks like the target, the first fit after the initial designs gave 0.15, the
#: later ones 0.93-0.97: bench/fidelity_choices.py)
JUDGE_AFTER, GUARD_CONFIRM = 6, 2
#: a dropped level or auxiliary task is bought again only after REBUY_CONFIRM judgements in a row at
#: or above RHO_REBUY (a hysteresis: one noisy judgement at the threshold no longer moves the level's
#: runs back into the model). With RHO_MIN and 1, the rule before, a helper saw the 250 x 250 level of
#: PDGEQRF dropped 19 and bought again 12 times in 5 tunings (session 29); rerun side by side in session
#: 30 (budget 150 s, seeds 0-4) the rule before dropped it 6 times and bought it again once, this one 9
#: and 4 times (rank correlations of 0.67 on the shared runs), regret within that bench's noise
RHO_REBUY, REBUY_CONFIRM = 0.4, 2
#: initial designs: a tuned task's target level runs TARGET_DESIGN_SHARE of its design's size (at
#: least 2 points), the cheapest level all of it, each level between INTERMEDIATE_DESIGN of the
#: target's points (the LCM needs data of every task); the cheaper levels' and auxiliary tasks'
#: designs together cost at most LOW_DESIGN_SHARE of ``cost_budget`` (by ``run_cost``, when the problem
#: gives one: points are left out, each task keeping one). 0.2 (2 of n_initial 10: the promoted first
#: run and the best other cheap run; the target's searches begin after them) against 0.5 (5: 3 promoted,
#: then 2 Latin hypercube points spread for the guard's first rank correlation; the guard now judges
#: by the model until MIN_COMMON runs are shared): bench/results/fidelity.md, session 31 (10 seeds,
#: 6 families): regret at 1/3 of the budget currin 0.160 -> 0.066, hartmann3 0.311 -> 0.194, branin
#: 0.203 -> 0.156, borehole 0.109 -> 0.095; at 50 % 0.002-0.181 lower on every family; at 100 % park
#: 0.045 -> 0.034, the others within noise (branin +0.010, se 0.010); 0.3 (3 points, all promoted)
#: lost branin's final (+0.042, se 0.010), 1 promoted and 2 spread points lost 0.15-0.19 at 25 %
TARGET_DESIGN_SHARE, INTERMEDIATE_DESIGN, LOW_DESIGN_SHARE = 0.2, 2, 0.2
#: promotion (Hyperband's, GPTuneBand's): a tuned task's target and intermediate levels wait for its
#: cheapest level's design to finish, then the target's design begins with the PROMOTE best
#: configurations of that design (by their cheap values), the rest its Latin hypercube's next points
#: (spread for the guard's rank correlation); 0: the Latin hypercube alone, run alongside
PROMOTE = 3
#: with a number (and a ``run_cost``), a tuned task's first target run does not wait for the whole
#: cheap design: once the cheapest level's first design runs have cost PROMOTE_AFTER_COST of one
#: target run (at least one run; a design cheaper than that runs whole first), the best of them runs
#: at the target; then the cheap design's rest, then the target's other design points, promoted
#: from all of it (the first stays first). None: the whole cheap design first. 0.5: every task's
#: first target run within 1.5 target-run costs (bench/results/fidelity.md: 10 % of the budget
#: 0.20-0.32 lower on every informative family, 25-100 % the same within noise)
PROMOTE_AFTER_COST: float | None = 0.5
#: with a number (and ``cost_budget`` and a ``run_cost``), a tuned task's cheapest level's design
#: is as many runs as CHEAP_DESIGN_SHARE of the task's share of the cost budget buys (``cost_budget
#: / n_tuned`` over the price of its first design point), at least ``n_initial`` and at most
#: CHEAP_DESIGN_MAX times it (and the task's budget): ``n_initial`` points of the Latin hypercube the
#: target shares, then a second hypercube's; model-free promotion picks better from more cheap runs
#: (bench/results/fidelity_bounds.md: at 25 % of the budget about 27 cheap runs to 1 target run per
#: task). None: ``n_initial`` runs. With the cheap searches on (session 30, 10 seeds), 0.11 lowered regret
#: at 25 % by 0.065-0.098 on currin, hartmann3 and branin but raised borehole's at 50 % by 0.009 (se 0.003)
#: and the uninformative currin_noinfo's at 25 % by 0.070 (se 0.037): not the default; the same trade with
#: the target design of 2 (session 31: borehole +0.006, se 0.002, at 25 %, currin_noinfo +0.023, 0.015, at 100 %);
#: and under LEVEL_MODEL "input" (session 39, 20 seeds, 7 families): 0.11 lower at 25 % on currin (-0.055),
#: hartmann3 (-0.057), branin (-0.065) and the unseen hartmann6 (-0.060), higher at 100 % on park (+0.009,
#: se 0.004) and at 50 / 100 % on branin (+0.007 / +0.003); 0.08 within noise
CHEAP_DESIGN_SHARE: float | None = None
CHEAP_DESIGN_MAX = 3
#: with PROMOTE_AFTER_COST, a tuned task's first target run is the configuration of lowest LCM
#: posterior mean at its cheapest level among the finished cheap runs of every tuned task (an LCM
#: fitted on those cheap levels alone, each task's values standardised; the other tasks' runs
#: teach this one's through the coregionalisation) instead of the best of its own first stage
#: (bench/results/fidelity_bounds.md: at 10 % the pooled pick beats a task's own best of 5). False:
#: its own best. bench/results/fidelity.md (gptask_mf_pooled_rho): at 10 % of the budget currin
#: -0.109, borehole -0.095, park -0.145, the rest and 25-100 % within noise or lower
POOLED_FIRST = True
#: the LCM of that pick: restarts of its fit; another task's runs are candidates only where the
#: LCM's correlation of its cheap level with this task's is at least POOLED_FIRST_RHO (None: all;
#: all lost on branin at 10 %, +0.342)
POOLED_FIRST_RESTARTS, POOLED_FIRST_RHO = 2, 0.5
#: with sources (``gt.tune(..., sources=...)``), the pooled first pick's LCM also holds the sources'
#: tasks (their runs at every level), and their runs are candidates where that LCM correlates their
#: task with the tuned task's cheapest level at POOLED_FIRST_RHO or more (an earlier campaign's
#: best configurations of similar tasks). False: the tuned tasks' cheap runs only.
#: bench/results/fidelity_sources.md (10 seeds): at 10 % of the budget currin 0.426 -> 0.117, park
#: 0.434 -> 0.057 with a source of the family's other tasks; with a source that does not relate
#: (branin's values given as currin's) 0.426 -> 0.449, at 100 % 0.007 -> 0.014
POOLED_SOURCES = True
#: with sources and fidelity levels, each tuned task's cheapest level first runs the best configuration
#: of each of the sources' target-fidelity tasks, at most SOURCE_BEST_FIRST of them (None or 0: none),
#: in place of its design's first points: the pooled first pick then knows this task's cheap values
#: where the sources found their targets' optima. Without it, the pick's LCM may relate this task's five
#: first-stage runs to a source's clustered runs too weakly (below POOLED_FIRST_RHO) to take any source
#: run (bench/results/fidelity.md, session 29: currin seed 0, correlations 0.13-0.47 with the sources'
#: tasks against 0.64-0.92). With CHEAP_SEARCH_SHARE 0.3, 1 against neither (10 seeds, regret at 10 /
#: 25 %): currin 0.163 / 0.058 -> 0.052 / 0.013, park 0.060 / 0.060 -> 0.054 / 0.054; a source that
#: does not relate (branin's values as currin's) 0.459 / 0.224 -> 0.495 / 0.133, one that ranks the
#: other way 0.393 / 0.194 -> 0.424 / 0.093; 3 in place of design points lost 0.23 at 10 % on the latter
SOURCE_BEST_FIRST: int | None = 1
#: with fidelity levels, an auxiliary task's design waits until every tuned task has a finished
#: target run (or its target is closed): it runs after the tuned tasks' first target runs, before
#: any search (the LCM needs a point of every task). With AUX_WAIT_CHEAPEST False, its cheapest level
#: runs from the first round and only its levels above wait. AUX_AFTER_TARGET False: every level of
#: it from the first round, its target-level point before any tuned task's target run.
#: bench/results/aux_sources.md (currin, park, 10 seeds, beside a source): the tuned tasks' first
#: target runs ended at 20 % of the cost (both off), 11 % (the levels above waiting), 8 % (all of it
#: waiting, as without an auxiliary task); regret at 10 % 1.000 -> 0.597 -> 0.163 on currin, 1.000 ->
#: 0.500 -> 0.057 on park, 25-100 % within 0.003 on every seed; without the source (30 seeds) the same
#: at 10-50 %, at 100 % currin +0.008 (se 0.007) with all of it waiting (one seed 0.222 against 0.013),
#: +0.000 with the levels above only. The default keeps the cheapest level in the first round: the
#: worst seed at 100 % matters more than the first tenth of the cost
AUX_AFTER_TARGET = True
AUX_WAIT_CHEAPEST = False
#: with ``cost_budget`` and no ``budget``, each task and level takes at most this many runs (the cost
#: budget is what stops the run; the exact model's size caps it further, see gptask.tune)
COST_BUDGET_RUNS = 200
#: the configurations per task at which ``run_cost`` prices the fidelity levels (:func:`run_levels`)
PRICE_POINTS = 5
#: when ``run_cost`` prices the levels, a level that costs less than LEVEL_COST_RATIO times the next
#: cheaper level kept is left out (:func:`~gptask.problem.fidelity.cost_spaced`, :func:`run_levels`): a
#: cost floor (a launch, a set-up; 0.1 + 0.9 s^2 of the MF-GP literature) makes the ladder's lowest
#: levels cost about the same. The square root of ETA: under that floor the ladder 1, 1/3, 1/9, 1/27
#: (costs 1, 0.2, 0.111, 0.101) runs 1, 1/3 and 1/27 (1/9 costs 1.1x 1/27; 1/3 costs 2x); 1 keeps the
#: whole ladder (the rule before). bench/results/fidelity.md, session 33 (20 seeds, regret at 50 / 100 %
#: of the budget): hartmann3 -0.018 / -0.008, branin -0.030 / -0.008, hartmann6 -0.034 / +0.000 (se 0.013),
#: 10 % and 25 % unchanged; keeping the dearer level of such a near pair (1, 1/3, 1/9) lost hartmann6's
#: worst seed at 100 % (0.130 -> 0.329); ETA (1 and 1/27) gained at 25 % on hartmann3 and less later
LEVEL_COST_RATIO = math.sqrt(ETA)
#: how the model holds a base task's fidelity levels. "tasks": each (task, level) a task of the LCM,
#: standardised on its own values (the rule so far). "input": a task x fidelity product
#: (:class:`gptask.model.numerics.TaskLevels`): the levels of a base task share its coregionalisation,
#: the level's position in the ladder (0 at the target, 1 at the cheapest) is one more kernel input with
#: a length scale of its own, and each level is standardised on its cheapest level's scale, the mean moved
#: by the paired difference at the configurations both ran (:func:`gptask.model.surrogate.data.shared_scales`).
#: bench/results/fidelity_kernel.md, section 5: better target picks than "tasks" on 10 of 24
#: family-regimes, worse on none; tuning (bench/results/fidelity.md, session 38, 10-20 seeds, 7 families,
#: the level's own length-scale prior defaults.PRIOR_LEVEL_LS, without which the guard kept random cheap
#: rankings): lower beyond 2 standard errors at 8 family-checkpoints from 50 % of the budget on (hartmann3
#: at 50 % 0.044 -> 0.007, branin 0.057 -> 0.024, hartmann6 0.337 -> 0.225; at 100 % hartmann6 0.055 ->
#: 0.025, branin 0.018 -> 0.003), higher at none; 10 % and 25 % the same (promoted runs); PDGEQRF within
#: that bench's noise (bench/results/fidelity_app_level_prior.json). The default since session 39, once
#: the whole test suite passed with it. Runs with sources keep "tasks" (the sources' tasks are no levels
#: of this run's)
LEVEL_MODEL = "input"


def expand_tasks(levels: Sequence[Mapping[str, Any]], tasks: Sequence[Mapping[str, Any]],
                 aux: Sequence[Mapping[str, Any]]) -> list[dict]:
    """The run's task rows: every base task (``tasks`` then ``aux``) at every fidelity level of
    ``levels`` (:func:`run_levels`; ``[{}]`` without fidelity), level by level, target first
    (``[{**task, **level}, ...]``)."""
    base = [dict(t) for t in tasks] + [dict(t) for t in aux]
    return [{**t, **level} for level in levels for t in base]


def run_levels(problem: Problem, tasks: Sequence[Mapping[str, Any]], seed: int,
               expanded: Problem | None = None) -> list[dict[str, Any]]:
    """The fidelity levels a run of ``problem`` on base tasks ``tasks`` lays out, target first: the
    problem's ladder (:meth:`Problem.fidelity_levels`), cut to levels spaced in cost
    (:func:`~gptask.problem.fidelity.cost_spaced`) when ``run_cost`` prices them. A level's price is
    the median of ``run_cost`` over the tasks and PRICE_POINTS configurations of each (the same
    configurations at every level, a Latin hypercube of the task's target row); the whole ladder
    when a price cannot be had (no ``run_cost``, no feasible configuration, an invalid cost).
    expanded: ``problem.expanded()`` when the caller has it (its domains are then built once)."""
    levels = problem.fidelity_levels()
    if len(levels) < 3 or problem.run_cost is None or not tasks:
        return levels
    expanded = problem.expanded() if expanded is None else expanded
    priced: list[list[float]] = []  # per configuration, its price at each level
    try:
        for b, task in enumerate(tasks):
            rows = [{**task, **level} for level in levels]
            points = initial_design(expanded, rows[0], PRICE_POINTS, rng(seed, STAGE_PRICE, b),
                                    f"the constraints of problem {problem.name!r} for task {rows[0]}")
            priced += [[check_cost(problem.run_cost(expanded.merged(row, p)), "run_cost") for row in rows]
                       for p in points]
    except Exception as exc:  # noqa: BLE001 - the user's run_cost or constraints; a run reports them itself
        log.info("the fidelity levels are the whole ladder %s: their run_cost was not had (%s: %s)", levels,
                 type(exc).__name__, exc)
        return levels
    price = np.median(np.asarray(priced, dtype=float), axis=0)
    kept = cost_spaced(price, LEVEL_COST_RATIO)
    if len(kept) < len(levels):
        log.info("fidelity levels %s of the ladder %s: priced %s s by run_cost, those costing less than %.2g times "
                 "the cheaper level kept are left out", [levels[k] for k in kept], levels,
                 [float(f"{c:.3g}") for c in price], LEVEL_COST_RATIO)
    return [levels[k] for k in kept]


def prepare(problem: Problem, tasks: Any, aux_tasks: Sequence[Mapping[str, Any]] | None, seed: int,
            proposer_class: type[FidelityProposer] | None = None) -> tuple[Problem, list[dict], FidelityProposer]:
    """What a tuner of a problem with fidelity levels or auxiliary tasks runs: the expanded problem
    (:meth:`Problem.expanded`), the task rows (:func:`expand_tasks`) and the proposer. tasks: a
    number of tasks or a list of task dicts, as ``gt.tune`` takes them; aux_tasks: task dicts, each
    different from the tuned tasks (ValueError naming one that is not); proposer_class: a subclass
    of :class:`FidelityProposer` that answers a question its own way (None: the class itself), made
    with the run's layout (TypeError for another class)."""
    from .tuner import resolve_tasks

    base = resolve_tasks(problem, tasks, seed)
    aux = _aux_tasks(problem, aux_tasks)
    clash = [t for t in aux if t in base]
    if clash:
        raise ValueError(f"aux_tasks must differ from the tuned tasks, got {clash[0]} in both")
    expanded = problem.expanded()
    levels = run_levels(problem, base, seed, expanded)
    cls = FidelityProposer if proposer_class is None else proposer_class
    if not (isinstance(cls, type) and issubclass(cls, FidelityProposer)):
        raise TypeError(f"a problem with fidelity or aux_tasks takes a subclass of "
                        f"gptask.tuning.fidelity.FidelityProposer as its proposer (the class), got {cls!r}")
    proposer = cls(len(base), len(aux), len(levels), levels=levels)
    return expanded, expand_tasks(levels, base, aux), proposer


def _aux_tasks(problem: Problem, aux_tasks: Any) -> list[dict]:
    """``aux_tasks`` validated against the problem's task space: a list of distinct task dicts
    (ValueError or TypeError naming ``aux_tasks`` and the offending entry)."""
    if aux_tasks is None:
        return []
    if isinstance(aux_tasks, (Mapping, str)) or not isinstance(aux_tasks, Sequence):
        raise TypeError(f"aux_tasks must be a list of task dicts, got {aux_tasks!r}")
    out = []
    for k, t in enumerate(aux_tasks):
        if not isinstance(t, Mapping):
            raise TypeError(f"aux_tasks #{k} must be a task dict, got {t!r}")
        out.append(problem.task_space.validate(t, what=f"aux_tasks #{k}"))
    if len({point_key(t) for t in out}) != len(out):
        raise ValueError(f"aux_tasks must be distinct, got repeated tasks in {out}")
    return out


def fidelity_tuner(problem: Problem, tasks: Any, aux_tasks: Sequence[Mapping[str, Any]] | None = None,
                   budget: int = 20, n_initial: int | None = None, seed: int = 0, history: Any = None,
                   **options: Any) -> Any:
    """An ask/tell :class:`~gptask.tuning.tuner.Tuner` of a problem with fidelity levels or
    auxiliary tasks (what ``gt.tune`` drives): its trials' ``task`` rows hold the fidelity values;
    evaluate them with ``tuner.problem.objective(trial.task, trial.params)``, which hands the user's
    objective the fidelity in its params. options: the Tuner's (``cost_budget``, settings)."""
    from .tuner import Tuner

    expanded, rows, proposer = prepare(problem, tasks, aux_tasks, seed)
    return Tuner(expanded, rows, budget, n_initial, seed, history, proposer=proposer, **options)


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    """Spearman's rank correlation of two (n,) arrays (ties by average rank; 0 for a constant one),
    rounded to 12 decimals: on few runs it takes a few exact values (0.3 on 5 runs, sum of squared rank
    differences 14), which the guard compares with its thresholds; unrounded, 0.3 came out as
    0.29999999999999993 and a level was dropped as "0.30, below 0.3"."""
    ra = _ranks(np.asarray(a, dtype=float))
    rb = _ranks(np.asarray(b, dtype=float))
    sa, sb = ra.std(), rb.std()
    if sa == 0 or sb == 0:
        return 0.0
    return round(float(np.mean((ra - ra.mean()) * (rb - rb.mean())) / (sa * sb)), 12)


def _ranks(x: np.ndarray) -> np.ndarray:
    order = np.argsort(x, kind="mergesort")
    r = np.empty(len(x))
    r[order] = np.arange(len(x), dtype=float)
    for v in np.unique(x):  # average rank of ties
        m = x == v
        if m.sum() > 1:
            r[m] = r[m].mean()
    return r


def guard_drops(dropped: bool, judged: Sequence[float]) -> bool:
    """The guard's verdict on a level or auxiliary task: whether it is dropped after its judgements
    ``judged`` (correlations with its target, oldest first), given whether it was dropped before the
    last one: dropped after GUARD_CONFIRM in a row below RHO_MIN, bought again after REBUY_CONFIRM in
    a row at or above RHO_REBUY, else as before."""
    if not dropped:
        return len(judged) >= GUARD_CONFIRM and all(r < RHO_MIN for r in judged[-GUARD_CONFIRM:])
    return not (len(judged) >= REBUY_CONFIRM and all(r >= RHO_REBUY for r in judged[-REBUY_CONFIRM:]))


def level_correlations(model: Any, target: int, others: Sequence[int]) -> dict[int, float]:
    """The LCM's correlation between task ``target`` and each of ``others`` at one configuration:
    ``C[i, t] / sqrt(C[i, i] C[t, t])`` with ``C`` the task covariance at one configuration (``sum_q B_q``,
    the coregionalisation, without :class:`~gptask.model.numerics.TaskLevels`)."""
    C = model.task_covariance()
    out = {}
    for i in others:
        den = math.sqrt(max(C[i, i] * C[target, target], 1e-300))
        out[i] = float(C[i, target] / den)
    return out


class FidelityProposer(Proposer):
    """What a fidelity / auxiliary-task run buys next (module docstring).

    n_tuned, n_aux: the tuned and auxiliary base tasks; n_levels: the fidelity levels (1: none).
    orders: with one level (auxiliary tasks without fidelity, ``gt.tune(..., sources=...)``), per
    tuned task index the sources' consensus order of configurations (best first): its design begins
    with them and its searches choose among them as :class:`~gptask.tuning.sourced.ConsensusProposer`'s
    do (:func:`~gptask.tuning.proposer.consensus_window`); ignored with fidelity levels.
    target_design_share: the share of ``n_initial`` a tuned task's target design runs (None:
    :data:`TARGET_DESIGN_SHARE`; ``select_sources=True`` sets more, its sources being judged by
    the designs' runs).
    """

    name = "fidelity"

    def __init__(self, n_tuned: int, n_aux: int, n_levels: int,
                 orders: Mapping[int, Sequence[dict]] | None = None, target_design_share: float | None = None,
                 levels: Sequence[Mapping[str, Any]] | None = None) -> None:
        super().__init__(local_probe_after=None)  # no local probe: not measured with the fidelity schedule
        self.n_tuned, self.n_aux, self.n_levels = n_tuned, n_aux, n_levels
        #: the fidelity values of each level, target first (:func:`run_levels`; None: the problem's ladder)
        self.levels = None if levels is None else [dict(lv) for lv in levels]
        if self.levels is not None and len(self.levels) != n_levels:
            raise ValueError(f"FidelityProposer: {n_levels} levels asked, {len(self.levels)} given ({self.levels})")
        self.target_design_share = target_design_share
        #: tuned task index -> the sources' consensus order (one level only: :meth:`start_from`)
        self.orders: dict[int, list[dict]] = {}
        self.start_from(orders)
        self.n_base = n_tuned + n_aux
        #: the tasks it lays out (level by level); the tuner's tasks after them are a source's
        #: (``gt.tune(..., sources=...)``): data the model learns from, that take no run
        self.n_own = n_levels * self.n_base
        #: task index -> why it is not bought again (the guard)
        self.dropped: dict[int, str] = {}
        #: task index -> the correlations with its target measured when last judged
        self.correlation: dict[int, dict[str, float]] = {}
        self._designs: dict[int, list[dict]] = {}
        self._full: dict[int, list[dict]] = {}  # base task -> its whole Latin hypercube
        self._waits_for: dict[int, int] = {}  # task -> the cheapest level's task whose design it waits for
        self._promoted: set[int] = set()  # tasks whose designs :meth:`_promote` ordered
        self._stage: dict[int, int] = {}  # cheapest level's task -> its design runs before the first promotion
        self._first: set[int] = set()  # targets whose first design point came from that first stage
        self._renew: set[int] = set()  # targets whose design the tuner has to read again
        self._size: dict[int, int] = {}  # cheapest level's task -> its design's size when sized by cost
        self._judged_model: Any = None
        self._judged: dict[int, list[float]] = {}  # task index -> its judged correlations, oldest first
        self._targets_begun = False  # every tuned task has a finished target run (AUX_AFTER_TARGET)

    def start_from(self, orders: Mapping[int, Sequence[dict]] | None) -> None:
        """Set ``orders`` (the class docstring's; before the tuner asks for its designs): kept for
        the tuned tasks of a run of one level, ignored with fidelity levels."""
        self.orders = ({int(i): list(d) for i, d in (orders or {}).items() if d and 0 <= int(i) < self.n_tuned}
                       if self.n_levels == 1 else {})

    # ---- layout ------------------------------------------------------------------------------
    def layout(self) -> dict[str, int]:
        """What the history keeps of the layout (:func:`gptask.data.run_header.write_fidelity_layout`)."""
        return {"n_tuned": self.n_tuned, "n_aux": self.n_aux, "n_levels": self.n_levels}

    def base_of(self, i: int) -> tuple[int, int]:
        """Task ``i`` as ``(base task, level)`` (level 0: the target)."""
        return i % self.n_base, i // self.n_base

    def target_of(self, i: int) -> int:
        """The target-fidelity task of task ``i``'s base task (for an auxiliary task, the tuned
        task it is judged against: the first one)."""
        b, _ = self.base_of(i)
        return b

    def is_target(self, i: int) -> bool:
        """Whether task ``i`` is a tuned task at the target fidelity (what results speak of)."""
        return i < self.n_tuned

    def role(self, i: int) -> str:
        """What task ``i``'s runs are, as histories and exports mark them: "target" (a tuned task at
        the target fidelity), "low fidelity" or "auxiliary"."""
        return role_of(i, self.n_tuned, self.n_aux)

    # ---- the proposer's questions -----------------------------------------------------------
    def initial_design(self, i: int) -> list[dict]:
        if not self._designs:
            self._designs = self._plan()
        if i in self._waits_for and i not in self._promoted:
            self._promote(self.base_of(i)[0])
        return self._designs[i]

    def _plan(self) -> dict[int, list[dict]]:
        """Every task's initial design (module docstring): the target's first points, the
        cheapest level the whole design, the levels between a few of the target's points, all
        shared configurations; the cheaper levels' designs trimmed to LOW_DESIGN_SHARE of the cost
        budget when ``run_cost`` prices them. With PROMOTE, the tuned tasks' target and intermediate
        levels wait for their cheapest level's design (:meth:`_promote` orders their points then)."""
        tu = self.tuner
        out: dict[int, list[dict]] = {}
        self._full = {b: Proposer.initial_design(self, b) for b in range(self.n_base)}
        for b, order in self.orders.items():  # one level: the sources' consensus first
            self._full[b] = designs_first(order, self._full[b], tu.defaults[b], tu.n_initial)
        full = self._full
        share = TARGET_DESIGN_SHARE if self.target_design_share is None else self.target_design_share
        n_t = max(2, math.ceil(share * tu.n_initial))
        for i in range(self.n_own):
            b, level = self.base_of(i)
            if level == 0:
                out[i] = full[b][:n_t] if (b < self.n_tuned and self.n_levels > 1) else full[b]
                continue
            keep = len(full[b]) if level == self.n_levels - 1 else min(INTERMEDIATE_DESIGN, len(full[b]))
            design = [p for p in full[b] if tu.problem.is_feasible(tu.tasks[i], p)] or Proposer.initial_design(self, i)
            out[i] = design[:max(1, keep)]
            if level == self.n_levels - 1 and b < self.n_tuned:
                out[i] = self._sized(i, out[i])
        out = self._trim(out)
        self._size = {j: len(out[j]) for j in self._size}
        self._source_bests_in(out)
        if PROMOTE > 0 and self.n_levels > 1:
            cheap = (self.n_levels - 1) * self.n_base
            self._waits_for = {lv * self.n_base + b: cheap + b for b in range(self.n_tuned)
                               for lv in range(self.n_levels - 1)}
            self._stage = {cheap + b: n for b in range(self.n_tuned)
                           if (n := self._stage_size(out[b], out[cheap + b], cheap + b)) < len(out[cheap + b])}
        return out

    def _source_bests_in(self, out: dict[int, list[dict]]) -> None:
        """SOURCE_BEST_FIRST: each tuned task's cheapest-level design in ``out`` (changed in place)
        begins with the sources' best target configurations (:meth:`_source_bests`, those feasible
        at its target and there), in place of its first Latin hypercube points (its size kept): they
        are run in the first stage, before the target's first run is picked."""
        bests = self._source_bests()
        tu, cheap = self.tuner, (self.n_levels - 1) * self.n_base
        for b in range(self.n_tuned) if bests else ():
            j = cheap + b
            mine = [p for p in bests if all(tu.problem.is_feasible(tu.tasks[i], p) for i in (b, j))]
            out[j] = designs_first(mine, out[j], None, len(out[j]))

    def _sized(self, j: int, design: list[dict]) -> list[dict]:
        """Cheap task ``j``'s design (``design``, n_initial points) grown to what
        CHEAP_DESIGN_SHARE of its tuned task's share of the cost budget buys (at most
        CHEAP_DESIGN_MAX n_initial and the task's budget): a second Latin hypercube's points after
        ``design``'s (new configurations only); unchanged without a cost budget or a price."""
        tu = self.tuner
        budget = getattr(tu, "cost_budget", None)
        if CHEAP_DESIGN_SHARE is None or budget is None or not design:
            return design
        price = self._price(j, design[0])
        if price is None or price <= 0:
            return design
        want = int(math.floor(CHEAP_DESIGN_SHARE * float(budget) / self.n_tuned / price + 1e-9))
        n = min(max(want, len(design)), int(CHEAP_DESIGN_MAX * tu.n_initial), tu.budget)
        if n <= len(design):
            return design
        seen = {params_key(p) for p in design}
        extra = [p for p in initial_design(tu.problem, tu.tasks[j], n - len(design), rng(tu.seed, STAGE_CHEAP, j),
                                           tu.describe_constraints(j)) if params_key(p) not in seen]
        out = (design + extra)[:n]
        self._size[j] = len(out)
        log.info("task %d: the cheapest level's design is %d runs (%.2g of the cost budget per task)", j, len(out),
                 CHEAP_DESIGN_SHARE)
        return out

    def design_size(self, i: int) -> int:
        """Task ``i``'s design runs: as many as its planned design holds (a target's share of
        ``n_initial``, a cheapest level's sized by the cost budget (:meth:`_sized`), ...), so that a
        tuner that plans again on a resume (a new process, ``gptask ask``) claims no design point
        beyond them where the history's runs changed a promotion."""
        if not self._designs:
            self._designs = self._plan()
        design = self._designs.get(i)
        return self._size.get(i, self.tuner.n_initial if design is None else len(design))

    def _stage_size(self, target: list[dict], design: list[dict], j: int) -> int:
        """How many of cheap task ``j``'s design runs the promotion waits for: all of them, or
        with PROMOTE_AFTER_COST and a ``run_cost``, the first ones costing at most that share of
        the target's first design point (at least one)."""
        if PROMOTE_AFTER_COST is None or not target or not design:
            return len(design)
        b = self.base_of(j)[0]
        top = self._price(b, target[0])
        prices = [self._price(j, p) for p in design]
        if top is None or any(c is None for c in prices):
            return len(design)
        n, spent = 0, 0.0
        for c in prices:
            if n and spent + c > PROMOTE_AFTER_COST * top * (1 + 1e-9):
                break
            n, spent = n + 1, spent + c
        return n

    def waiting(self, i: int) -> bool:
        """Whether task ``i`` (a tuned task's target or intermediate level) still waits for its
        cheapest level's design to finish (every design run of it finished, failed ones too)."""
        if not self._designs:
            self._designs = self._plan()
        if self._aux_waits(i):
            return True
        j = self._waits_for.get(i)
        if j is None or i in self._promoted:
            return False
        if j in self._stage and self.base_of(i)[1] == 0:
            if i not in self._first:
                return not self._stage_done(j)
            if not self.tuner.trials_of(i):
                return False  # its first point, promoted from the first stage
        return not self._design_done(j)

    def _aux_waits(self, i: int) -> bool:
        """AUX_AFTER_TARGET: whether task ``i``, an auxiliary task's level (above its cheapest only,
        without AUX_WAIT_CHEAPEST), waits for every tuned task's first finished target run (a closed
        target counts as begun)."""
        b, level = self.base_of(i)
        if (not AUX_AFTER_TARGET or self._targets_begun or i >= self.n_own or b < self.n_tuned
                or self.n_levels == 1 or (level == self.n_levels - 1 and not AUX_WAIT_CHEAPEST)):
            return False
        tu = self.tuner
        self._targets_begun = all(any(t.status.finished for t in tu.trials_of(k)) or tu.closed_reason(k) is not None
                                  for k in range(self.n_tuned))
        return not self._targets_begun

    def _design_done(self, j: int) -> bool:
        """Whether cheap task ``j``'s whole design has run (every run finished, failed ones too)."""
        mine = self.tuner.trials_of(j)
        return not (len(mine) < len(self._designs[j]) or not all(t.status.finished for t in mine))

    def _stage_done(self, j: int) -> bool:
        """Whether cheap task ``j``'s first stage (PROMOTE_AFTER_COST) has finished."""
        return sum(t.status.finished for t in self._first_runs(j)) >= self._stage[j]

    def _first_runs(self, j: int) -> list:
        """Cheap task ``j``'s first-stage runs: its first runs by id (a resumed run sees the same)."""
        return sorted(self.tuner.trials_of(j), key=lambda t: t.id)[:self._stage[j]]

    def _promote(self, b: int) -> None:
        """Tuned base task ``b``'s target design: the PROMOTE best configurations of its cheapest
        level's finished design runs (feasible at the target), then its Latin hypercube's next
        points, as many as planned; each level between the target's first points likewise (shared
        configurations). With a first stage (PROMOTE_AFTER_COST): first the target's first point
        alone, the best of that stage's runs; once the whole cheap design has run, the rest, that
        point kept first. Deterministic in the history: a resumed run orders them the same way."""
        tu = self.tuner
        cheap = (self.n_levels - 1) * self.n_base + b
        staged = cheap in self._stage
        if staged and b not in self._first:
            pool = self._first_runs(cheap)
        elif staged and not self._design_done(cheap):
            return
        else:
            pool = tu.trials_of(cheap)
        runs = sorted((t for t in pool if t.status is Status.COMPLETE and t.value is not None),
                      key=lambda t: (t.value, t.id))
        best = [t.params for t in runs if tu.problem.is_feasible(tu.tasks[b], t.params)][:PROMOTE]
        n_t = len(self._designs[b])
        if staged and b not in self._first:
            pooled = self._pooled_first(b) if POOLED_FIRST else None
            best = [pooled] if pooled is not None else best[:1]
            self._designs[b] = (best + [p for p in self._full[b] if params_key(p) not in {params_key(q) for q in best}])[:n_t]
            self._first.add(b)
            if pooled is None:  # the pooled pick logs its own line
                log.info("task %d: the target's first run is the best of its cheapest level's first %d runs", b,
                         len(runs))
            return
        if staged:
            first = self._designs[b][0]
            best = [first] + [p for p in best if params_key(p) != params_key(first)][:PROMOTE - 1]
            self._renew.add(b)
        keys = {params_key(p) for p in best}
        target = (best + [p for p in self._full[b] if params_key(p) not in keys])[:n_t]
        for lv in range(self.n_levels - 1):
            i = lv * self.n_base + b
            if lv > 0:
                n_i = len(self._designs[i])
                self._designs[i] = ([p for p in target if tu.problem.is_feasible(tu.tasks[i], p)]
                                    or self._designs[i])[:n_i]
            else:
                self._designs[i] = target
            self._promoted.add(i)
        if best:
            log.info("task %d: the target's design begins with the %d best of its cheapest level's %d runs",
                     b, len(best), len(runs))

    def _pooled_first(self, b: int) -> dict | None:
        """Tuned task ``b``'s first target configuration from the finished cheap runs of every tuned
        task (POOLED_FIRST): the one of lowest posterior mean at ``b``'s cheapest level of an LCM
        fitted on the tuned tasks' cheapest levels (each task's values standardised; with
        POOLED_SOURCES, the sources' tasks too), among the runs of ``b``'s level and of the tasks it
        correlates with at POOLED_FIRST_RHO or more, feasible at ``b``'s target; None when fewer than
        two tasks have runs or the fit fails."""
        from ..model.numerics.lcm import LCM

        tu = self.tuner
        cheap = [(self.n_levels - 1) * self.n_base + c for c in range(self.n_tuned)]
        theirs = list(range(self.n_own, tu.n_tasks)) if POOLED_SOURCES else []  # the sources' tasks (data only)
        cheap += theirs
        runs = {j: [t for t in tu.trials_of(j) if t.status is Status.COMPLETE and t.value is not None] for j in cheap}
        mine = cheap[b]
        if not runs[mine] or sum(1 for j in cheap if runs[j]) < 2:
            return None
        order = [j for j in cheap if runs[j]]
        space = tu.problem.param_space
        X = [space.encode([t.params for t in runs[j]]) for j in order]
        ys = []
        for j in order:
            y = np.array([float(t.value) for t in runs[j]])
            ys.append((y - y.mean()) / (y.std() or 1.0))
        pool, seen = [], set()
        try:
            # with the sources' tasks, as many latent functions as the tuner's model has at most
            n_latent = min(len(order), getattr(tu, "n_latent", len(order))) if theirs else len(order)
            model = LCM(n_latent=n_latent).fit(X, ys, restarts=POOLED_FIRST_RESTARTS, seed=tu.seed, explore=False)
        except (ValueError, np.linalg.LinAlgError, FloatingPointError) as exc:
            log.warning("task %d: the pooled first pick failed (%s); its own best cheap run instead", b, exc)
            return None
        me = order.index(mine)
        rho = level_correlations(model, me, range(len(order)))
        for k, j in enumerate(order):
            if j != mine and POOLED_FIRST_RHO is not None and rho[k] < POOLED_FIRST_RHO:
                continue
            for t in runs[j]:
                key = params_key(t.params)
                if key not in seen and tu.problem.is_feasible(tu.tasks[b], t.params):
                    seen.add(key)
                    pool.append(t.params)
        if not pool:
            return None
        mean, _ = model.predict(me, space.encode(pool))
        pick = pool[int(np.argmin(mean))]
        log.info("task %d: the target's first run is the pooled pick of %d cheap runs of %d tasks", b, len(pool),
                 len(order))
        return pick

    def _source_targets(self) -> list[int]:
        """The sources' tasks (the tuner's tasks after :attr:`n_own`) at the target fidelity: those
        whose fidelity values (the task dimensions in which this run's levels differ) are the
        target's; none without fidelity levels."""
        tasks = self.tuner.tasks
        if self.n_levels == 1:
            return []
        keys = [k for k in tasks[0] if any(tasks[lv * self.n_base].get(k) != tasks[0][k]
                                           for lv in range(1, self.n_levels))]
        return [j for j in range(self.n_own, len(tasks)) if all(tasks[j].get(f) == tasks[0][f] for f in keys)]

    def _source_bests(self) -> list[dict]:
        """SOURCE_BEST_FIRST: the best finished configuration of each of the sources' target-fidelity
        tasks (:meth:`_source_targets`), in the sources' order, each once; empty without sources."""
        if not SOURCE_BEST_FIRST:
            return []
        out: dict[str, dict] = {}
        for j in self._source_targets():
            runs = [t for t in self.tuner.trials_of(j) if t.status is Status.COMPLETE and t.value is not None]
            if runs:
                best = min(runs, key=lambda t: (t.value, t.id))
                out.setdefault(params_key(best.params), best.params)
        return list(out.values())[:SOURCE_BEST_FIRST]

    def search_among(self, i: int) -> np.ndarray | None:
        """A tuned task with a consensus order (``orders``): its window of it
        (:func:`~gptask.tuning.proposer.consensus_window`); otherwise the default's."""
        window = consensus_window(self.tuner, i, self.orders.get(i)) if i in self.orders else None
        return window if window is not None else super().search_among(i)

    def design_open(self, i: int) -> bool:
        """A waiting task's design takes no points yet (:meth:`waiting`); with PROMOTE_AFTER_COST,
        a cheapest level's design past its first stage waits for its target's first run (or for
        the target to close)."""
        if self.waiting(i):
            return False
        n = self._stage.get(i)
        if n is None or len(self.tuner.trials_of(i)) < n:
            return True
        b = self.base_of(i)[0]
        return bool(self.tuner.trials_of(b)) or self.tuner.closed_reason(b) is not None

    def design_room(self, i: int) -> int | None:
        """With PROMOTE_AFTER_COST: a cheapest level's first stage's runs until its target's first
        run has begun (:meth:`design_open`), then all of it; that target one run until then."""
        if not self._designs:
            self._designs = self._plan()
        self._catch_up(i)
        if i in self._first and i not in self._promoted:
            return 1  # the first stage's best only, until the whole cheap design has run
        n = self._stage.get(i)
        if n is None or len(self.tuner.trials_of(i)) >= n and self.design_open(i):
            return None
        return n

    def design_renewed(self, i: int) -> bool:
        """A target whose first point came from the first stage takes its whole design once the
        cheap design has run (:meth:`_promote`): the tuner reads it again, once."""
        self._catch_up(i)
        if i in self._renew:
            self._renew.discard(i)
            return True
        return False

    def _catch_up(self, i: int) -> None:
        """Target ``i``'s second promotion once its cheap design has run (first stage: one point)."""
        if i in self._first and i not in self._promoted and self.tuner.trials_of(i) and not self.waiting(i):
            self._promote(self.base_of(i)[0])

    def _trim(self, designs: dict[int, list[dict]]) -> dict[int, list[dict]]:
        """``designs`` with the cheaper levels' and auxiliary tasks' points cut, last points of
        the most expensive tasks first, until they cost at most LOW_DESIGN_SHARE of the cost
        budget (each task keeps one point); unchanged without a cost budget or a ``run_cost``."""
        tu = self.tuner
        budget = getattr(tu, "cost_budget", None)
        if budget is None or tu.problem.run_cost is None:
            return designs
        low = [i for i in designs if not self.is_target(i)]
        cost = {i: [self._price(i, p) for p in designs[i]] for i in low}
        if any(c is None for v in cost.values() for c in v):
            return designs  # priced when they run (a clear error there)
        cap = LOW_DESIGN_SHARE * float(budget)
        while sum(sum(c) for c in cost.values()) > cap:
            cut = [i for i in low if len(cost[i]) > 1]
            if not cut:
                break
            i = max(cut, key=lambda i: (cost[i][-1], i))
            cost[i].pop()
            designs[i] = designs[i][:len(cost[i])]
        return designs

    def _in_initial(self, i: int) -> bool:
        return self.waiting(i) or len(self.tuner.trials_of(i)) < len(self.initial_design(i))

    def in_design(self, i: int) -> bool:
        """Whether task ``i`` (one it lays out) still has design points to claim or waits for
        another's design (:class:`~gptask.tuning.sourced.DesignTuner` closes it once not)."""
        return i < self.n_own and self._in_initial(i)

    def proposes_for(self, i: int) -> bool:
        if i in self.dropped or i >= self.n_own:
            return False
        if self._in_initial(i):
            return True
        if CHEAP_SEARCH_SHARE is not None and self.n_levels > 1:
            # after its design a tuned task's cheapest level and its target search in turn
            b, lv = self.base_of(i)
            cheap = (self.n_levels - 1) * self.n_base + b
            if b < self.n_tuned and lv in (0, self.n_levels - 1):
                owing = self._open(cheap) and self._cheap_owing(b, cheap)
                return owing if i == cheap else not owing
        # after the designs only the tuned tasks' targets search; :meth:`place` picks the level
        return self.is_target(i)

    def _cheap_owing(self, b: int, cheap: int) -> bool:
        """Whether tuned task ``b``'s cheapest level (task ``cheap``) has searched for less than
        CHEAP_SEARCH_SHARE of a target run's cost (the target's mean, seconds) since the target's last
        searched run (a run in flight counted at the level's mean cost)."""
        tu = self.tuner
        unit = self.mean_cost(b)
        if unit is None:
            return False
        last = max((t.id for t in tu.trials_of(b) if t.source == SOURCE_SEARCH), default=-1)
        each = self.mean_cost(cheap) or 0.0
        spent = 0.0
        for t in tu.trials_of(cheap):
            if t.source == SOURCE_SEARCH and t.id > last:
                cost = tu.cost_of(t) if t.status.finished else None
                spent += each if cost is None else cost
        return spent < CHEAP_SEARCH_SHARE * unit

    def model_structure(self, n_tasks: int) -> tuple[tuple[int | None, ...], tuple | None]:
        """With LEVEL_MODEL "input", several levels and no sources' tasks (``n_tasks`` is :attr:`n_own`):
        each level of a base task on its cheapest level's scale, and the levels as
        :class:`~gptask.model.numerics.TaskLevels` of the base tasks at their position in the ladder
        (0 the target, 1 the cheapest). Otherwise every task on its own (the proposer's default)."""
        if LEVEL_MODEL == "tasks" or self.n_levels == 1 or n_tasks != self.n_own:
            return super().model_structure(n_tasks)
        if LEVEL_MODEL != "input":
            raise ValueError(f"LEVEL_MODEL must be 'tasks' or 'input', got {LEVEL_MODEL!r}")
        cheapest = (self.n_levels - 1) * self.n_base
        scale_from = tuple(cheapest + j % self.n_base if j < cheapest else None for j in range(n_tasks))
        group = tuple(j % self.n_base for j in range(n_tasks))
        level = tuple((j // self.n_base) / (self.n_levels - 1) for j in range(n_tasks))
        return scale_from, (group, level)

    def place(self, i: int, x: np.ndarray, model: Any) -> int:
        """The task that runs configuration ``x`` (encoded (D,)), the maximiser of tuned task
        ``i``'s acquisition at the target fidelity on ``model`` (the search view): the target at
        least every TARGET_EVERY-th searched run, else the open level ``l`` of largest value of
        information per cost at x, ``cov(f_l, f_t)^2 / (var(f_l) + noise_l) / cost_l`` (the
        posterior variance a run at level l removes at the target, MF-GP-UCB / MISO style; for
        the target itself ``var(f_t)^2 / (var(f_t) + noise_t) / cost_t``) among the levels that
        have not run x yet."""
        self._judge()
        if not self.is_target(i) or self.n_levels == 1:
            return i
        tu = self.tuner
        b = i
        searched = sorted((t for lv in range(self.n_levels) for t in tu.trials_of(lv * self.n_base + b)
                           if t.source == SOURCE_SEARCH), key=lambda t: t.id)
        since, since_cost = 0, 0.0
        for t in reversed(searched):
            if t.task_index == i:
                break
            since += 1
            since_cost += (tu.cost_of(t) or 0.0) if t.status.finished else 0.0
        params = tu.problem.param_space.decode(np.asarray(x, dtype=float)[None])[0]
        cost0 = self._cost(i, params)
        if since >= TARGET_EVERY - 1 or (TARGET_COST_SHARE is not None and cost0 is not None
                                         and since_cost >= TARGET_COST_SHARE * cost0):
            return i
        key = params_key(params)
        X = np.asarray(x, dtype=float)[None]
        noise = model.get_params()["noise"]
        score = {}
        for lv in range(self.n_levels):
            j = lv * self.n_base + b
            if lv > 0 and (not self._open(j) or any(params_key(t.params) == key for t in tu.trials_of(j))):
                continue
            c = self._cost(j, params)
            if c is None:
                c = 1.0 if cost0 is None else cost0 / ETA ** lv
            cov = float(model.posterior_cross(i, j, X)[0])
            var = max(float(model.posterior_cross(j, j, X)[0]), 0.0)
            score[j] = cov ** 2 / max(var + float(noise[j]), 1e-300) / max(c, 1e-12)
        return max(score, key=lambda j: (score[j], -j))

    def _cost(self, i: int, params: Mapping[str, Any]) -> float | None:
        """A run's expected cost at task ``i``: ``run_cost`` of the point when the problem prices
        runs, else the task's mean measured cost (None before its first run)."""
        price = self._price(i, params)
        return price if price is not None else self.mean_cost(i)

    def _price(self, i: int, params: Mapping[str, Any]) -> float | None:
        """``run_cost`` of configuration ``params`` at task ``i`` before it runs (None without a
        ``run_cost`` or where it gives no valid cost: the run itself reports that)."""
        tu = self.tuner
        if tu.problem.run_cost is None:
            return None
        try:
            return check_cost(tu.problem.run_cost(tu.problem.merged(tu.tasks[i], params)), "run_cost")
        except (ValueError, TypeError, KeyError):
            return None

    def is_bought(self, i: int) -> bool:
        """Whether a search may buy a run of cheaper level or auxiliary task ``i`` now (:meth:`_open`)."""
        return self._open(i)

    def judgements(self, i: int) -> list[float]:
        """The guard's correlations of task ``i`` with its target, one per model it judged, oldest
        first (empty before the first: :meth:`_judge`)."""
        return list(self._judged.get(i, ()))

    def _open(self, i: int) -> bool:
        """Whether a search may buy a run of cheaper level ``i``: not dropped by the guard, not
        closed, under its budget, and its last FAILED_LEVEL_STOP finished runs did not all fail."""
        tu = self.tuner
        if i in self.dropped or tu.closed_reason(i) is not None or len(tu.trials_of(i)) >= tu.budget:
            return False
        last = [t for t in tu.trials_of(i) if t.status.finished][-FAILED_LEVEL_STOP:]
        return not (len(last) == FAILED_LEVEL_STOP and all(t.status is Status.FAILED for t in last))

    def mean_cost(self, i: int) -> float | None:
        """The mean cost in seconds of task ``i``'s finished runs (None before its first)."""
        costs = [c for t in self.tuner.trials_of(i) if t.status.finished
                 and (c := self.tuner.cost_of(t)) is not None]
        return float(np.mean(costs)) if costs else None

    watched_what = "evaluations at the target fidelity"

    def watched_tasks(self) -> list[int]:
        """The tuned tasks' targets (:meth:`Proposer.watched_tasks`)."""
        return list(range(self.n_tuned))

    def in_model(self, trial: Any) -> bool:
        """A dropped level's runs leave the model (they stay in the history), all but its first
        finished one: the LCM needs a point of every task, and one says little."""
        i = trial.task_index
        if i not in self.dropped:
            return True
        first = min((t.id for t in self.tuner.trials_of(i) if t.status.finished), default=None)
        return trial.id == first

    # ---- the guard ---------------------------------------------------------------------------
    def _judge(self) -> None:
        """Measure each cheaper level's and auxiliary task's correlation with its target (by the
        fitted model, and by ranks on shared configurations) at every new model, once the target
        has JUDGE_AFTER complete runs; a task low on GUARD_CONFIRM judgements in a row is dropped,
        and bought again when later ones are high (:func:`guard_drops`; the first fits on a few runs
        are rough)."""
        tu = self.tuner
        model = tu.model
        if model is None or model is self._judged_model:
            return
        self._judged_model = model
        for i in range(self.n_own):
            if self.is_target(i) or self._in_initial(i):
                continue
            target = self.target_of(i) if self.base_of(i)[0] < self.n_tuned else 0
            done = [t for t in tu.trials_of(target) if t.status is Status.COMPLETE]
            if self._in_initial(target) or len(done) < JUDGE_AFTER:
                continue
            rho = {"model": level_correlations(model, target, [i])[i]}
            mine = {params_key(t.params): t.value for t in tu.trials_of(i) if t.status is Status.COMPLETE}
            both = [(mine[k], t.value) for t in done if (k := params_key(t.params)) in mine]
            if len(both) >= MIN_COMMON:
                a, c = np.array(both).T
                rho["rank"] = spearman(a, c)
            self.correlation[i] = rho
            if i in self.dropped and "rank" not in rho:
                continue  # its runs left the model: only its shared runs can bring it back
            judged = self._judged.setdefault(i, [])
            judged.append(rho.get("rank", rho["model"]))  # the rank correlation where there are enough shared runs
            was = i in self.dropped
            if guard_drops(was, judged) == was:
                continue
            if was:
                del self.dropped[i]
                log.warning("task %d (%s) is bought again: its correlation with the target is %s, at or above %s "
                            "on %d fits in a row", i, tu.tasks[i], ", ".join(f"{v:.2f} by {k}" for k, v in rho.items()),
                            RHO_REBUY, REBUY_CONFIRM)
                continue
            why = (f"its correlation with the target ({tu.tasks[target]}) is "
                   + ", ".join(f"{v:.2f} by {'the model' if k == 'model' else f'rank on {len(both)} shared runs'}"
                               for k, v in rho.items()) + f", below {RHO_MIN}, on {GUARD_CONFIRM} fits in a row")
            self.dropped[i] = why
            log.warning("task %d (%s) is not bought again: %s", i, tu.tasks[i], why)

    def summary(self) -> dict[str, Any]:
        """What results report of the run (``TuningResult.fidelity``): the layout (``n_own``: its
        tasks, the sources' after them), the levels dropped by the guard and the correlations
        measured."""
        tu = self.tuner
        return {"n_tuned": self.n_tuned, "n_aux": self.n_aux, "n_own": self.n_own,
                "levels": self.levels if self.levels is not None else tu.problem.fidelity_levels(), "dropped": {int(i): r for i, r in self.dropped.items()},
                "correlation": {int(i): dict(r) for i, r in self.correlation.items()}}
