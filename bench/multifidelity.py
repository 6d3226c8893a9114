"""Multi-fidelity tuning judged by quality per second of machine time (issue 44): every method gets
the same cost budget on the families of bench/multifidelity_families.py, and is scored by the
target-fidelity regret of its incumbent at cost checkpoints.

Methods:

* ``gptask_sf``: gptask without fidelity, every run at the target fidelity, ``gt.tune`` over all
  tasks of a family with ``budget = cost_budget // target_cost`` runs per task;
* ``gptask_mf``: gptask with its fidelity API (``gt.Problem(..., fidelity=, target_fidelity=)``,
  ``gt.tune(..., cost_budget=)``), run only when ``inspect.signature(gt.Problem)`` has
  ``fidelity`` (else skipped with a line saying so); ``gptask_mf_base``: the same with the
  fidelity schedule before promotion (:data:`VARIANTS`), to measure a schedule side by side;
* peers, one task at a time with the per-task cost budget (bench venv /work/venvs/i44b, see
  bench/peers_setup.sh): ``smac_hb`` (SMAC3's MultiFidelityFacade, Hyperband intensifier),
  ``dehb`` (DEHB), ``optuna_hb`` (Optuna TPE with its HyperbandPruner: a trial runs at the rungs'
  fidelities in turn, reporting each, until pruned), ``bohb`` (HpBandSter's BOHB, where it installs).
  Hyperband-style peers run budget fractions as fidelities (the family's ``peer_budgets``: eta 10
  over the two levels 0.1 and 1 of a two-level family; rungs 1/9, 1/3, 1 for a continuous one).

Every run at fidelity s costs the family's ``cost(s)`` (simulated seconds; a run restarted at a
higher fidelity pays in full: no method continues a run). A run that would pass the budget is not
counted. Score at a checkpoint c (10/25/50/100 % of the budget): per task, the normalised regret
``(f(x) - f_opt) / (f_ref - f_opt)`` of the best run AT THE TARGET FIDELITY within cost c (the
functions are noise-free, so that run's value is its noise-free target value; 1, the median of the
space, before the first target run), averaged over the tasks. Over seeds: mean and worst seed.

    python bench/multifidelity.py run --families currin,hartmann3,borehole --methods gptask_sf \\
        --seeds 0-9 --out bench/results/fidelity.json
    /work/venvs/i44b/bin/python bench/multifidelity.py run --methods smac_hb,dehb,optuna_hb ...
    python bench/multifidelity.py report --out bench/results/fidelity.json [more.json ...] \\
        --md bench/results/fidelity.md --plot bench/results/fidelity

Rows (family, method, seed) are saved to the JSON file as they finish and skipped when present:
a killed run resumes.
"""

from __future__ import annotations

import argparse
import inspect
import logging
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import multifidelity_families as mff  # noqa: E402
from module_constants import constants_set  # noqa: E402
from row_files import load_rows, parse_seeds, save_rows  # noqa: E402

log = logging.getLogger("multifidelity")

CHECKPOINTS = (0.10, 0.25, 0.50, 1.00)
#: the per-task cost budget, in target-fidelity runs (the target costs 1 s)
DEFAULT_BUDGET = 15
DEFAULT_FAMILIES = "currin,currin_noinfo,park,borehole,hartmann3,hartmann6,branin"
METHODS = ("gptask_sf", "gptask_mf", "gptask_mf_base", "gptask_mf_early", "gptask_mf_whole", "gptask_mf_cheap", "gptask_mf_cheap15", "gptask_mf_cheap08", "gptask_mf_pooled", "gptask_mf_pooled_rho", "gptask_mf_own", "gptask_mf_every2", "gptask_mf_every4", "gptask_mf_every6", "gptask_mf_cs05", "gptask_mf_cs1", "gptask_mf_own03", "gptask_mf_own1", "gptask_mf_targets", "gptask_mf_promote5", "gptask_mf_design3", "gptask_mf_design2", "gptask_mf_design3_lhs", "gptask_mf_design5", "gptask_mf_inter1", "gptask_mf_ladder", "gptask_mf_cost3", "gptask_mf_input", "gptask_mf_tasks", "gptask_mf_mean", "gptask_mf_mean_open", "gptask_mf_mean_judged", "gptask_mf_mean_judged04", "smac_hb", "dehb", "optuna_hb", "bohb")
#: gptask_mf with the fidelity schedule's constants (gptask/tuning/fidelity.py) set otherwise, to
#: measure a schedule side by side with the default: gptask_mf_base is the schedule before promotion
#: (the target's design the first 40 % of its Latin hypercube, run alongside the cheap designs);
#: gptask_mf_early promotes once the cheap design's first runs cost half a target run (issue 44's
#: 10 % checkpoint: every task's first target run within it), the cheap design's rest after (the
#: default since: PROMOTE_AFTER_COST); gptask_mf_whole the whole cheap design first (the default before);
#: gptask_mf_cheap / gptask_mf_cheap15 / gptask_mf_cheap08 the cheap design sized by the cost budget
#: (CHEAP_DESIGN_SHARE 0.11 / 0.15 / 0.08: 16 / 22 / 12 runs per task at 15 target-run costs per task and a
#: 1:10 cost ratio, not n_initial's 10);
#: gptask_mf_pooled the target's first run the LCM's pick from every task's cheap runs (POOLED_FIRST),
#: gptask_mf_pooled_rho from the tasks the LCM correlates with it at 0.5 or more only (POOLED_FIRST_RHO:
#: the default since); gptask_mf_own the first run the best of the task's own first stage (the default before);
#: gptask_mf_every4 / _every6 / _cs05 / _cs1 the target's cadence (TARGET_EVERY 4, 6; cost-balanced at 0.5 / 1
#: target run); gptask_mf_own03 / _own1 the cheapest level's own searches worth 0.3 / 1 target run between
#: the target's (CHEAP_SEARCH_SHARE 0.3: the default since session 29), gptask_mf_targets without them (the
#: targets search alone, the default before); gptask_mf_design2 / _design3 / _design5 the target's design
#: a fifth (the default since session 31) / 3 tenths / half of n_initial (TARGET_DESIGN_SHARE; the default
#: before: 3 promoted points, then 2 Latin hypercube ones), gptask_mf_promote5 half with all 5 promoted,
#: gptask_mf_design3_lhs 3 tenths with 1 promoted (PROMOTE 1); gptask_mf_inter1 one design point per
#: level between the cheapest and the target, not 2 (INTERMEDIATE_DESIGN; only the continuous fidelities of
#: hartmann3 and branin have such levels)
VARIANTS = {"gptask_mf_base": {"PROMOTE": 0, "TARGET_DESIGN_SHARE": 0.4, "PROMOTE_AFTER_COST": None},
            "gptask_mf_early": {"PROMOTE_AFTER_COST": 0.5},
            "gptask_mf_whole": {"PROMOTE_AFTER_COST": None},
            "gptask_mf_cheap15": {"CHEAP_DESIGN_SHARE": 0.15},
            "gptask_mf_cheap": {"CHEAP_DESIGN_SHARE": 0.11},
            "gptask_mf_cheap08": {"CHEAP_DESIGN_SHARE": 0.08},
            "gptask_mf_pooled": {"POOLED_FIRST": True, "POOLED_FIRST_RHO": None},
            "gptask_mf_own": {"POOLED_FIRST": False},
            "gptask_mf_pooled_rho": {"POOLED_FIRST": True, "POOLED_FIRST_RHO": 0.5},
            "gptask_mf_every4": {"TARGET_EVERY": 4},
            "gptask_mf_every6": {"TARGET_EVERY": 6},
            "gptask_mf_every2": {"TARGET_EVERY": 2},
            "gptask_mf_cs05": {"TARGET_EVERY": 30, "TARGET_COST_SHARE": 0.5},
            "gptask_mf_cs1": {"TARGET_EVERY": 30, "TARGET_COST_SHARE": 1.0},
            "gptask_mf_own03": {"CHEAP_SEARCH_SHARE": 0.3},
            "gptask_mf_own1": {"CHEAP_SEARCH_SHARE": 1.0},
            "gptask_mf_targets": {"CHEAP_SEARCH_SHARE": None},
            "gptask_mf_promote5": {"PROMOTE": 5, "TARGET_DESIGN_SHARE": 0.5},
            "gptask_mf_design3": {"TARGET_DESIGN_SHARE": 0.3},
            "gptask_mf_design2": {"TARGET_DESIGN_SHARE": 0.2},
            "gptask_mf_design3_lhs": {"TARGET_DESIGN_SHARE": 0.3, "PROMOTE": 1},
            "gptask_mf_design5": {"TARGET_DESIGN_SHARE": 0.5},
            "gptask_mf_inter1": {"INTERMEDIATE_DESIGN": 1},
            # the fidelity levels priced by run_cost (session 33): 1 keeps the whole ladder (the rule before),
            # 3 (ETA) the target and the cheapest level of a continuous fidelity under the cost floor
            "gptask_mf_ladder": {"LEVEL_COST_RATIO": 1.0},
            "gptask_mf_cost3": {"LEVEL_COST_RATIO": 3.0},
            # the levels of a base task as one more kernel input of its coregionalisation (session 38,
            # bench/results/fidelity_kernel.md section 5; the default since session 39, so gptask_mf), and
            # each (task, level) a task of the LCM (the rule before)
            "gptask_mf_input": {"LEVEL_MODEL": "input"},
            "gptask_mf_tasks": {"LEVEL_MODEL": "tasks"}}
PEERS = ("smac_hb", "dehb", "optuna_hb", "bohb")
#: what reports show, in order: the methods and the recorded rows of gptask's first fidelity proposer
#: (branch i44-fidelity, renamed from gptask_mf: bench/results/fidelity_mf_i44.json), not run any more
SHOWN = ("gptask_sf", "gptask_mf_i44", "gptask_mf_base", "gptask_mf_whole", "gptask_mf", "gptask_mf_early", "gptask_mf_cheap15", "gptask_mf_cheap", "gptask_mf_pooled", "gptask_mf_pooled_rho", "gptask_mf_own", *PEERS)
#: families with the same target as another: gptask_sf never runs a low fidelity, so its rows on
#: the other family are its rows here (the same function, tasks and seeds give the same runs)
SAME_TARGET = {"currin_noinfo": "currin"}

Eval = list  # [task index, fidelity, cost, value]


def has_fidelity_api() -> bool:
    import gptask as gt

    return "fidelity" in inspect.signature(gt.Problem).parameters


# ---- gptask ----------------------------------------------------------------------------------------------------
class _Target:
    """gptask_sf's objective: the family at its target fidelity (picklable)."""

    def __init__(self, objective: mff.MFObjective) -> None:
        self.objective = objective

    def __call__(self, task: dict, params: dict) -> float:
        return self.objective.target_value(task, params)


def sf_problem(fam: mff.MFFamily) -> Any:
    """The family at its target fidelity alone, as gptask_sf tunes it (a ``gt.Problem``)."""
    import gptask as gt

    return gt.Problem(fam.task_space(), fam.param_space(), _Target(fam.objective), name=f"{fam.name}_sf")


def run_gptask_sf(fam: mff.MFFamily, budget: float, seed: int) -> list[Eval]:
    import gptask as gt

    problem = sf_problem(fam)
    runs = int(budget // fam.cost(mff.TARGET))
    res = gt.tune(problem, fam.tasks, budget=runs, seed=seed, progress=False)
    trials = sorted(res.history, key=lambda t: t.id)
    return [[t.task_index, mff.TARGET, fam.cost(mff.TARGET), float(t.value)] for t in trials
            if t.status is gt.Status.COMPLETE]


class _AtFidelity:
    """gptask_mf's objective: the family at the fidelity in params (picklable)."""

    def __init__(self, objective: mff.MFObjective) -> None:
        self.objective = objective

    def __call__(self, task: dict, params: dict) -> float:
        return float(self.objective(task, params)["y"])


class _RunCost:
    """gptask_mf's run_cost: the family's cost of the point's fidelity (seconds; picklable)."""

    def __init__(self, fam: mff.MFFamily) -> None:
        self.fn = fam.fn

    def __call__(self, point: dict) -> float:
        return self.fn.cost(float(point["fidelity"]))


def mf_problem(fam: mff.MFFamily) -> Any:
    """The family with its fidelity, as gptask_mf tunes it (a ``gt.Problem``): the cost of a run given by
    ``run_cost`` (the family's cost model)."""
    import gptask as gt

    return gt.Problem(fam.task_space(), fam.param_space(), _AtFidelity(fam.objective), name=f"{fam.name}_mf",
                      fidelity=fam.fidelity_space(), target_fidelity={"fidelity": mff.TARGET},
                      run_cost=_RunCost(fam))


def run_gptask_mf(fam: mff.MFFamily, budget: float, seed: int, proposer: Any = None) -> list[Eval]:
    """gptask with its fidelity API: the cost of a run given by ``run_cost`` (the family's cost
    model), ``cost_budget`` the per-task budget times the number of tasks. A run's fidelity is in
    its task row (``trial.task["fidelity"]``), its task the row's ``instance``. proposer: a subclass
    of FidelityProposer (None: the default)."""
    import gptask as gt

    res = gt.tune(mf_problem(fam), fam.tasks, cost_budget=budget * len(fam.tasks), seed=seed, progress=False,
                  proposer=proposer)
    out = []
    for t in sorted(res.history, key=lambda t: t.id):
        if t.status is not gt.Status.COMPLETE:
            continue
        s = float(t.task.get("fidelity", mff.TARGET))
        out.append([int(t.task["instance"]), s, fam.cost(s), float(t.value)])
    return out


# ---- peers (one task at a time) --------------------------------------------------------------------------------
class _Meter:
    """The evaluations of one task by a peer, with the cost spent; ``done`` once the budget is spent."""

    def __init__(self, fam: mff.MFFamily, i: int, budget: float) -> None:
        self.fam, self.i, self.budget = fam, i, budget
        self.spent, self.evals = 0.0, []

    def __call__(self, u: np.ndarray, s: float) -> float:
        c = self.fam.cost(s)
        y = float(self.fam.objective.value(self.i, np.asarray(u, dtype=float)[None], s)[0])
        self.spent += c
        if self.spent <= self.budget + 1e-9:
            self.evals.append([self.i, float(s), c, y])
        return y

    @property
    def done(self) -> bool:
        return self.spent >= self.budget - 1e-9


def _configspace(fam: mff.MFFamily, seed: int) -> Any:
    from ConfigSpace import ConfigurationSpace, Float

    cs = ConfigurationSpace(seed=seed)
    cs.add([Float(n, (0.0, 1.0)) for n in fam.objective.names])
    return cs


def _vec(fam: mff.MFFamily, config: Any) -> np.ndarray:
    return np.array([float(config[n]) for n in fam.objective.names])


def peer_smac_hb(fam: mff.MFFamily, i: int, budget: float, seed: int) -> list[Eval]:
    from smac import MultiFidelityFacade, Scenario
    from smac.runhistory.dataclasses import TrialValue

    meter = _Meter(fam, i, budget)
    b_min, eta = fam.peer_budgets()
    with tempfile.TemporaryDirectory() as tmp:
        scenario = Scenario(_configspace(fam, seed), deterministic=True, n_trials=100_000, min_budget=b_min,
                            max_budget=1.0, seed=seed, output_directory=Path(tmp) / "smac")
        intensifier = MultiFidelityFacade.get_intensifier(scenario, eta=eta)
        smac = MultiFidelityFacade(scenario, lambda config, seed=0, budget=1.0: 0.0, intensifier=intensifier,
                                   overwrite=True, logging_level=40)
        while not meter.done:
            info = smac.ask()
            y = meter(_vec(fam, info.config), fam.fidelity_for_budget(float(info.budget)))
            smac.tell(info, TrialValue(cost=y))
    return meter.evals


def peer_dehb(fam: mff.MFFamily, i: int, budget: float, seed: int) -> list[Eval]:
    from dehb import DEHB

    meter = _Meter(fam, i, budget)
    b_min, eta = fam.peer_budgets()
    with tempfile.TemporaryDirectory() as tmp:
        opt = DEHB(cs=_configspace(fam, seed), dimensions=fam.dim, min_fidelity=b_min, max_fidelity=1.0, eta=eta,
                   n_workers=1, output_path=tmp, seed=seed, log_level="ERROR")
        while not meter.done:
            job = opt.ask()
            config = job["config"]  # a Configuration in DEHB >= 0.1 (a vector in [0, 1]^d before)
            if isinstance(config, np.ndarray):
                config = opt.vector_to_configspace(config)
            y = meter(_vec(fam, config), fam.fidelity_for_budget(float(job["fidelity"])))
            opt.tell(job, {"fitness": y, "cost": fam.cost(fam.fidelity_for_budget(float(job["fidelity"])))})
    return meter.evals


def peer_optuna_hb(fam: mff.MFFamily, i: int, budget: float, seed: int) -> list[Eval]:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    meter = _Meter(fam, i, budget)
    b_min, eta = fam.peer_budgets()
    rungs = [b_min * eta**k for k in range(int(round(np.log(1 / b_min) / np.log(eta))) + 1)]
    steps = [int(round(r / b_min)) for r in rungs]
    study = optuna.create_study(sampler=optuna.samplers.TPESampler(seed=seed),
                                pruner=optuna.pruners.HyperbandPruner(min_resource=1, max_resource=steps[-1],
                                                                      reduction_factor=eta))
    while not meter.done:
        trial = study.ask()
        u = np.array([trial.suggest_float(n, 0.0, 1.0) for n in fam.objective.names])
        state, y = optuna.trial.TrialState.COMPLETE, None
        for r, step in zip(rungs, steps):
            if meter.done:
                state = optuna.trial.TrialState.FAIL
                break
            y = meter(u, fam.fidelity_for_budget(r))
            trial.report(y, step)
            if step < steps[-1] and trial.should_prune():
                state = optuna.trial.TrialState.PRUNED
                break
        study.tell(trial, y if state is optuna.trial.TrialState.COMPLETE else None, state=state)
    return meter.evals


def peer_bohb(fam: mff.MFFamily, i: int, budget: float, seed: int) -> list[Eval]:
    import hpbandster.core.nameserver as hpns
    from hpbandster.core.worker import Worker
    from hpbandster.optimizers import BOHB

    meter = _Meter(fam, i, budget)
    b_min, eta = fam.peer_budgets()

    class _W(Worker):
        def compute(self, config: dict, budget: float, **kwargs: Any) -> dict:
            if meter.done:
                return {"loss": float("inf"), "info": {}}
            return {"loss": meter(_vec(fam, config), fam.fidelity_for_budget(float(budget))), "info": {}}

    run_id = f"mf{seed}_{i}_{time.time_ns()}"
    ns = hpns.NameServer(run_id=run_id, host="127.0.0.1", port=None)
    host, port = ns.start()
    try:
        w = _W(nameserver=host, nameserver_port=port, run_id=run_id)
        w.run(background=True)
        bohb = BOHB(configspace=_configspace(fam, seed), run_id=run_id, nameserver=host, nameserver_port=port,
                    min_budget=b_min, max_budget=1.0, eta=eta)
        while not meter.done:
            bohb.run(n_iterations=1)
        bohb.shutdown(shutdown_workers=True)
    finally:
        ns.shutdown()
    return meter.evals


#: the targets' searches by the posterior mean (session 44): gptask_mf_mean always, gptask_mf_mean_open while one
#: of the target's cheaper levels is bought, gptask_mf_mean_judged (gptask_mf_mean_judged04) while one is bought
#: and was last judged by the guard at this correlation with it or more: (while_open, correlation)
MEAN_TARGETS = {"gptask_mf_mean": (False, None), "gptask_mf_mean_open": (True, None),
                "gptask_mf_mean_judged": (False, 0.7), "gptask_mf_mean_judged04": (False, 0.4)}


def mean_targets(while_open: bool = False, judged: float | None = None) -> type:
    """A FidelityProposer whose tuned tasks' targets search the configuration of lowest posterior mean at
    the target (pure exploitation; the cheap levels' own searches explore) instead of the expected
    improvement; with ``while_open`` only while one of the target's cheaper levels is bought (not dropped
    by the guard, under its budget), with ``judged`` only while such a level's last judgement by the
    guard is that correlation or more (before the first: EI)."""
    from gptask.tuning.fidelity import FidelityProposer

    class MeanTargets(FidelityProposer):
        def acquisition(self, i: int, model: Any) -> Any:
            if self.n_levels == 1 or not self.is_target(i):
                return None
            cheaper = [lv * self.n_base + i for lv in range(1, self.n_levels)]
            if while_open and not any(self.is_bought(j) for j in cheaper):
                return None
            if judged is not None and not any(self.is_bought(j) and self.judgements(j)
                                              and self.judgements(j)[-1] >= judged for j in cheaper):
                return None
            return lambda x: -model.predict(i, x)[0]

    return MeanTargets


def run_method(method: str, fam: mff.MFFamily, budget: float, seed: int) -> list[Eval]:
    if method == "gptask_sf":
        return run_gptask_sf(fam, budget, seed)
    if method == "gptask_mf":
        return run_gptask_mf(fam, budget, seed)
    if method in MEAN_TARGETS:
        return run_gptask_mf(fam, budget, seed, mean_targets(*MEAN_TARGETS[method]))
    if method in VARIANTS:
        from gptask.tuning import fidelity as fm

        with constants_set(fm, VARIANTS[method]):
            return run_gptask_mf(fam, budget, seed)
    peer = globals()[f"peer_{method}"]
    evals: list[Eval] = []
    for i in range(len(fam.tasks)):
        evals += peer(fam, i, budget, seed * 1000 + i)
    return evals


def available(method: str) -> str | None:
    """None when ``method`` can run here, else why not."""
    if method.startswith("gptask_mf") and not has_fidelity_api():
        return "gptask_mf skipped: gt.Problem has no `fidelity` argument in this gptask (issue 44's API not merged)"
    module = {"smac_hb": "smac", "dehb": "dehb", "optuna_hb": "optuna", "bohb": "hpbandster"}.get(method)
    if module:
        try:
            __import__(module)
        except Exception as exc:  # an old peer may fail on import with anything
            return f"{method} skipped: cannot import {module} ({type(exc).__name__}: {exc}); see bench/peers_setup.sh"
    return None


# ---- scores ----------------------------------------------------------------------------------------------------
#: the fractions of the budget at which the report looks for when gptask with fidelity first reaches gptask without
#: it at the end (issue 44's "1/3 of its cost")
REACH_GRID = tuple(float(x) for x in np.round(np.arange(0.01, 1.0001, 0.01), 2))


def regret_curve(fam: mff.MFFamily, row: dict[str, Any], checkpoints: tuple[float, ...] = CHECKPOINTS) -> list[float]:
    """Mean normalised target regret over the tasks at each checkpoint (fractions of the budget):
    on one clock over all tasks for gptask (its budget is for all tasks together), per task for
    the peers (each task its own budget)."""
    budget, n = row["budget"], len(fam.tasks)
    shared = row["method"].startswith("gptask")
    spent = np.zeros(n) if not shared else None
    total = 0.0
    best = np.full(n, np.inf)
    marks: list[tuple[float, int, float, float]] = []  # (clock, task, fidelity, value) in order
    for i, s, c, y in row["evals"]:
        if shared:
            total += c
            marks.append((total / (budget * n), i, s, y))
        else:
            spent[i] += c
            marks.append((spent[i] / budget, i, s, y))
    out = []
    for cp in checkpoints:
        best[:] = np.inf
        for clock, i, s, y in marks:
            if clock <= cp + 1e-9 and s >= mff.TARGET - 1e-12:
                best[i] = min(best[i], y)
        out.append(float(np.mean([fam.normalised_regret(i, b) if np.isfinite(b) else 1.0 for i, b in enumerate(best)])))
    return out


# ---- command line ----------------------------------------------------------------------------------------------
def cmd_run(args: argparse.Namespace) -> int:
    doc = load_rows(args.out)
    done = {(r["family"], r["method"], r["seed"], r["budget"]) for r in doc["rows"]}
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    for m in methods:
        if m not in METHODS:
            print(f"multifidelity: unknown method {m!r}; known: {', '.join(METHODS)}", file=sys.stderr)
            return 2
    runnable = []
    for m in methods:
        why = available(m)
        if why:
            print(why)
        else:
            runnable.append(m)
    for name in [f.strip() for f in args.families.split(",") if f.strip()]:
        fam = mff.family(name)
        for seed in args.seeds:
            for m in runnable:
                if (name, m, seed, args.budget) in done:
                    continue
                t0, c0 = time.perf_counter(), time.process_time()
                evals = run_method(m, fam, args.budget, seed)
                row = {"family": name, "method": m, "seed": seed, "budget": args.budget, "evals": evals,
                       "wall_seconds": time.perf_counter() - t0, "cpu_seconds": time.process_time() - c0}
                row["regret"] = regret_curve(fam, row)
                doc = load_rows(args.out)
                doc["rows"].append(row)
                save_rows(args.out, doc)
                log.info("%s %s seed %d: regret %s (%d runs, %.0f s)", name, m, seed,
                         " ".join(f"{r:.3g}" for r in row["regret"]), len(evals), row["wall_seconds"])
    return 0


def summary(rows: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    """(family, method) -> mean and worst-seed regret per checkpoint, seeds."""
    cells: dict[tuple[str, str], list[list[float]]] = {}
    for r in rows:
        cells.setdefault((r["family"], r["method"]), []).append(r["regret"])
    out = {}
    for key, curves in cells.items():
        a = np.array(curves)
        out[key] = {"mean": a.mean(0), "worst": a.max(0), "sem": a.std(0, ddof=1) / np.sqrt(len(a)) if len(a) > 1
                    else np.zeros(a.shape[1]), "seeds": len(a), "runs": None}
    return out


def report(rows: list[dict[str, Any]], machine: dict[str, Any], commands: list[str]) -> str:
    s = summary(rows)
    third: dict[tuple[str, str], list[float]] = {}
    fine: dict[tuple[str, str], list[list[float]]] = {}  # gptask_mf's regret on REACH_GRID, per seed
    for r in rows:
        if r["method"] == "gptask_mf":
            third.setdefault((r["family"], r["method"]), []).append(regret_curve(mff.family(r["family"]), r, (1 / 3,))[0])
            fine.setdefault((r["family"], r["method"]), []).append(regret_curve(mff.family(r["family"]), r, REACH_GRID))
    families = list(dict.fromkeys(r["family"] for r in rows))
    methods = [m for m in SHOWN if any(k[1] == m for k in s)]
    cps = " | ".join(f"{int(c * 100)} %" for c in CHECKPOINTS)
    lines = ["# Multi-fidelity tuning: target regret per cost (issue 44)", "",
             f"Machine: {machine.get('description', '?')}; date {machine.get('date', '?')}.", "",
             "Commands:", "", *[f"    {c}" for c in commands], "",
             "Normalised target-fidelity regret of the incumbent (best run at the target fidelity; 0 at the "
             "optimum, 1 at the median of the space, also before the first target run), mean over the "
             "tasks of a family; per cell: mean over seeds, worst seed in brackets. Budget: "
             f"{rows[0]['budget'] if rows else '?'} target-run costs per task.", "",
             f"| family | method | seeds | {cps} |", "|" + " --- |" * (4 + len(CHECKPOINTS) - 1)]
    for f in families:
        for m in methods:
            if (f, m) not in s:
                continue
            c = s[(f, m)]
            cells = " | ".join(f"{mu:.3f} ({w:.3f})" for mu, w in zip(c["mean"], c["worst"]))
            lines.append(f"| {f} | {m} | {c['seeds']} | {cells} |")
    lines += ["", "## Per family and checkpoint", "", side_by_side(s, families)]
    third_se = {k: float(np.std(v, ddof=1) / np.sqrt(len(v))) if len(v) > 1 else 0.0 for k, v in third.items()}
    lines += ["", "## Targets of the issue", ""] + targets(s, families, {k: float(np.mean(v)) for k, v in third.items()},
                                                             {k: np.mean(v, axis=0) for k, v in fine.items()}, third_se)
    return "\n".join(lines) + "\n"


def side_by_side(s: dict[tuple[str, str], dict[str, Any]], families: list[str]) -> str:
    """A table per family and checkpoint: mean regret of gptask with fidelity (and its schedule
    before, gptask_mf_whole or else gptask_mf_base, where run), without it, the best peer (named),
    and whether gptask_mf is ahead of the best peer ("win"), and the schedule before beside it."""
    prev = "gptask_mf_whole" if any(k[1] == "gptask_mf_whole" for k in s) else "gptask_mf_base"
    base = any(k[1] == prev for k in s)
    head = "| family | checkpoint | gptask_mf |" + (f" {prev} |" if base else "") + \
        " gptask_sf | best peer | mf ahead of the best peer |" + (" before ahead |" if base else "")
    lines = [head, "|" + " --- |" * (head.count("|") - 1)]
    wins = {"gptask_mf": [0, 0], prev: [0, 0]}
    for f in families:
        mf = s.get((f, "gptask_mf"))
        if mf is None:
            continue
        for k, cp in enumerate(CHECKPOINTS):
            peers = [(s[(f, p)]["mean"][k], p) for p in PEERS if (f, p) in s]
            best = min(peers) if peers else None
            cells = [f"{mf['mean'][k]:.3f}"]
            b = s.get((f, prev))
            if base:
                cells.append(f"{b['mean'][k]:.3f}" if b is not None else "-")
            sf = s.get((f, "gptask_sf"))
            cells.append(f"{sf['mean'][k]:.3f}" if sf is not None else "-")
            cells.append(f"{best[0]:.3f} ({best[1]})" if best else "-")
            for m, row in (("gptask_mf", mf), (prev, b)):
                if best is None or (m == prev and not base):
                    continue
                if row is None:
                    cells.append("-")
                    continue
                ahead = bool(row["mean"][k] < best[0])
                wins[m][0] += ahead
                wins[m][1] += 1
                cells.append("win" if ahead else "no")
            lines.append(f"| {f} | {int(cp * 100)} % | " + " | ".join(cells) + " |")
    lines.append("")
    lines.append(f"gptask_mf ahead of the best peer at {wins['gptask_mf'][0]}/{wins['gptask_mf'][1]} family-checkpoints"
                 + (f"; {prev} at {wins[prev][0]}/{wins[prev][1]}." if base else "."))
    return "\n".join(lines)


def targets(s: dict[tuple[str, str], dict[str, Any]], families: list[str],
            third: dict[tuple[str, str], float], fine: dict[tuple[str, str], np.ndarray] | None = None,
            third_se: dict[tuple[str, str], float] | None = None) -> list[str]:
    """The issue's targets, each said met or not (or not measurable yet). third: (family, method)
    -> mean regret at 1/3 of the budget; fine: (family, method) -> mean regret on REACH_GRID, for the fraction of
    the budget at which gptask_mf first reaches gptask_sf's final mean regret; third_se: the standard error of
    ``third`` over seeds (the difference from gptask_sf's final is given with its standard error)."""
    out = []
    if not any(k[1] == "gptask_mf" for k in s):
        out.append("- gptask with fidelity: not run (the fidelity API is not in this gptask yet); the targets "
                   "comparing it with gptask_sf and the peers are not measured.")
        return out
    n_ahead = n_cells = 0
    for f in families:
        sf, mf = s.get((f, "gptask_sf")), s.get((f, "gptask_mf"))
        peers = [s[(f, p)]["mean"] for p in PEERS if (f, p) in s]
        if mf is None:
            continue
        if peers:
            ahead = mf["mean"] < np.min(peers, axis=0)
            n_ahead, n_cells = n_ahead + int(ahead.sum()), n_cells + len(ahead)
            out.append(f"- {f}: gptask_mf ahead of the best peer at {int(ahead.sum())}/{len(ahead)} checkpoints.")
        if sf is None:
            continue
        informative = not f.endswith("_noinfo")
        if informative:
            half = [bool(a <= 0.5 * b) for a, b in zip(mf["mean"], sf["mean"])]
            ratio = " ".join(f"{a / b:.2f}" if b > 0 else "-" for a, b in zip(mf["mean"], sf["mean"]))
            out.append(f"- {f} (informative): mf/sf mean regret per checkpoint {ratio}; at most half at "
                       f"{sum(half)}/{len(half)} checkpoints: {'met' if all(half) else 'NOT met'}.")
            t = third.get((f, "gptask_mf"))
            if t is not None:
                ok = t <= sf["mean"][-1]
                curve = (fine or {}).get((f, "gptask_mf"))
                reach = None if curve is None else next(
                    (g for g, m in zip(REACH_GRID, curve) if m <= sf["mean"][-1]), None)
                se = np.hypot((third_se or {}).get((f, "gptask_mf"), 0.0), sf["sem"][-1])
                out.append(f"- {f}: gptask_mf at 1/3 of the budget {t:.3f} against gptask_sf's final "
                           f"{sf['mean'][-1]:.3f} (difference {t - sf['mean'][-1]:+.3f}, se {se:.3f}): "
                           f"{'met' if ok else 'NOT met'}" + (
                               "" if curve is None else f" (reached at {reach:.2f} of the budget)" if reach is not None
                               else " (not reached within the budget)") + ".")
        else:
            within = [bool(abs(a - b) <= 2 * np.hypot(sa, sb)) for a, b, sa, sb in
                      zip(mf["mean"], sf["mean"], mf["sem"], sf["sem"])]
            worse = [bool(a > b + 2 * np.hypot(sa, sb)) for a, b, sa, sb in
                     zip(mf["mean"], sf["mean"], mf["sem"], sf["sem"])]
            out.append(f"- {f} (uninformative): within 2 standard errors of gptask_sf at {sum(within)}/"
                       f"{len(within)} checkpoints, worse beyond them at {sum(worse)}: "
                       f"{'met' if not any(worse) else 'NOT met'} (never worse than seed noise).")
    if n_cells:
        out.append(f"- all families: gptask_mf ahead of the best peer at {n_ahead}/{n_cells} family-checkpoints "
                   f"({100 * n_ahead / n_cells:.0f} %; target >= 80 %): {'met' if n_ahead >= 0.8 * n_cells else 'NOT met'}.")
    return out


def plot(rows: list[dict[str, Any]], prefix: str) -> list[str]:
    """One figure per family: mean regret (log scale) against the fraction of the cost budget, worst
    seed dashed; returns the paths written."""
    import matplotlib.pyplot as plt

    s = summary(rows)
    paths = []
    for f in dict.fromkeys(r["family"] for r in rows):
        fig, ax = plt.subplots(figsize=(5, 3.6))
        for m in SHOWN:
            if (f, m) not in s:
                continue
            c = s[(f, m)]
            x = [100 * cp for cp in CHECKPOINTS]
            line, = ax.plot(x, np.maximum(c["mean"], 1e-6), marker="o", label=f"{m} ({c['seeds']} seeds)")
            ax.plot(x, np.maximum(c["worst"], 1e-6), ls="--", color=line.get_color(), alpha=0.5)
        ax.set_yscale("log")
        ax.set_xlabel("cost spent (% of budget)")
        ax.set_ylabel("normalised target regret")
        ax.set_title(f"{f}: mean (solid), worst seed (dashed)")
        ax.legend(fontsize=7)
        fig.tight_layout()
        path = f"{prefix}_{f}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        paths.append(path)
    return paths


def cmd_report(args: argparse.Namespace) -> int:
    rows, machine, commands = [], {}, []
    for path in args.out_files:
        doc = load_rows(path)
        rows += doc["rows"]
        machine = machine or doc["machine"]
        commands += doc.get("commands", [])
    seen: set[tuple] = set()
    unique = []
    for r in rows:  # a row run twice (a process restarted on another file): the first file's
        key = (r["family"], r["method"], r["seed"], r["budget"])
        if key not in seen:
            seen.add(key)
            unique.append(r)
    rows = unique
    have = {(r["family"], r["method"], r["seed"]) for r in rows}
    for r in list(rows):
        for alias, base in SAME_TARGET.items():
            if r["family"] == base and r["method"] == "gptask_sf" and (alias, "gptask_sf", r["seed"]) not in have:
                if any(q["family"] == alias for q in rows):
                    rows.append({**r, "family": alias})
    text = report(rows, machine, commands or ["(see bench/multifidelity.py)"])
    print(text)
    if args.md:
        Path(args.md).write_text(text)
    if args.plot:
        for p in plot(rows, args.plot):
            print(p)
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run")
    r.add_argument("--families", default=DEFAULT_FAMILIES)
    r.add_argument("--methods", default=",".join(METHODS))
    r.add_argument("--seeds", type=parse_seeds, default=parse_seeds("0-9"))
    r.add_argument("--budget", type=float, default=DEFAULT_BUDGET, help="cost budget per task (target-run costs)")
    r.add_argument("--out", default="bench/results/fidelity.json")
    p = sub.add_parser("report")
    p.add_argument("--out", dest="out_files", nargs="+", default=["bench/results/fidelity.json"])
    p.add_argument("--md")
    p.add_argument("--plot", help="path prefix of the figures (PREFIX_FAMILY.png)")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    for name in ("gptask", "smac", "dehb", "hpbandster", "optuna"):
        logging.getLogger(name).setLevel(logging.ERROR)
    if args.command == "run":
        if args.budget <= 0 or not np.isfinite(args.budget):
            print(f"multifidelity: --budget must be a positive number of seconds, got {args.budget}", file=sys.stderr)
            return 2
        doc = load_rows(args.out)
        cmd = "python bench/multifidelity.py " + " ".join(sys.argv[1:] if argv is None else argv)
        if cmd not in doc.setdefault("commands", []):
            doc["commands"].append(cmd)
            save_rows(args.out, doc)
        return cmd_run(args)
    return cmd_report(args)


if __name__ == "__main__":
    sys.exit(main())
