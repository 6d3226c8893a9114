"""Peer tuners of the benchmark suite (bench/suite.py), each run one task at a time with the same
budget as gptask, on the same problem objects.

Every runner takes ``(family, budget, seed)`` and returns ``{"values": [[v or None, ...] per task],
"tuner_seconds": s}``: each task's measured values in evaluation order (None for a failed run).

* ``random``: distinct configurations drawn uniformly from the allowed ones (the listed domain of a
  discrete or recorded family; uniform in the box otherwise).
* ``optuna_gp``: Optuna's GPSampler (``n_startup_trials`` = half the budget, as gptask's initial
  design). ``skopt``: scikit-optimize's ``Optimizer`` with a GP and EI (the same initial share).
  Ordered lists (``gt.Ordinal``) are given to both as integers over the list's index (the idiom of
  ``2 ** trial.suggest_int(...)``), categoricals as categoricals. Where the allowed configurations
  are a list (restrictions, recorded campaigns), a suggestion is run as the nearest allowed
  configuration not run yet (distance in gptask's encoding) and the peer is told its value at the
  suggestion: the peer spends no run on a disallowed or repeated point, as gptask does not.
* Kernel Tuner's strategies (``kt_<strategy>``), where a family has Kernel Tuner cache files:
  ``tune_kernel(..., simulation_mode=True, cache=...)`` with the kernel's own restrictions, the
  first ``budget`` distinct configurations it evaluated counted (failed ones included: a real
  campaign pays for them). ``bayes_opt`` runs ``method="ei"`` with an initial sample of a quarter of
  the budget (its default spends 20 evaluations on its initial sample).
* ``botorch_mtgp``: BoTorch's ``MultiTaskGP`` + ``LogExpectedImprovement`` over all tasks jointly
  (:func:`run_botorch_mtgp`, bench/mtbo.py's model and acquisition; needs torch and botorch).
"""

from __future__ import annotations

import json
import logging
import random as pyrandom
import tempfile
import time
import warnings
from collections import Counter, OrderedDict
from pathlib import Path
from typing import Any

import numpy as np

import gptask as gt
from gptask.space.dimensions import Categorical, Integer, Ordinal, Real
from gptask.data.trials import params_key

from suite_families import Family, kernel_tuner_cache

log = logging.getLogger("suite.peers")

KT_STRATEGIES = ("genetic_algorithm", "random_sample", "bayes_opt", "dual_annealing")
_MAX_REDRAWS = 1000


class _Task:
    """One task of a family seen by a peer: its domain (or None) and the configurations run."""

    def __init__(self, fam: Family, i: int) -> None:
        self.fam, self.task = fam, fam.tasks[i]
        self.problem = fam.problem
        self.space = fam.problem.param_space
        self.domain = fam.problem.domain(self.task)
        self.run_keys: set = set()
        self.run: list[dict] = []
        self.values: list[float | None] = []

    def evaluate(self, params: dict) -> float | None:
        """Run ``params`` (counted); the value, or None when the run failed."""
        self.run_keys.add(params_key(params))
        self.run.append(dict(params))
        try:
            v = float(self.problem.objective(self.task, params))
            v = v if np.isfinite(v) else None
        except gt.EvaluationFailed:
            v = None
        self.values.append(v)
        return v

    def nearest_allowed(self, params: dict) -> dict | None:
        """The allowed configuration not run yet nearest to ``params`` (itself when allowed and
        new); None when every allowed one was run. Without a domain: ``params`` when feasible and new."""
        if self.domain is None:
            ok = self.problem.is_feasible(self.task, params) and params_key(params) not in self.run_keys
            return params if ok else None
        enc = self.space.encode([params])[0]
        avail = self.domain.available(self.space.encode(self.run) if self.run else None)
        if not len(avail):
            return None
        d = np.sum((self.domain.encoded[avail] - enc) ** 2, axis=1)
        return self.domain.params([avail[int(np.argmin(d))]])[0]

    def random_allowed(self, rng: np.random.Generator) -> dict | None:
        if self.domain is not None:
            return self.nearest_allowed(self.domain.params([int(rng.integers(len(self.domain)))])[0])
        for _ in range(_MAX_REDRAWS):
            p = self.space.decode(rng.random((1, self.space.n_columns)))[0]
            if self.problem.is_feasible(self.task, p) and params_key(p) not in self.run_keys:
                return p
        return None


# ---- random -----------------------------------------------------------------------------------------
def run_random(fam: Family, budget: int, seed: int) -> dict[str, Any]:
    t0 = time.perf_counter()
    out, run_params = [], []
    for i in range(len(fam.tasks)):
        task = _Task(fam, i)
        rng = np.random.default_rng([seed, i, 7])
        if task.domain is not None:
            order = rng.permutation(len(task.domain))[:budget]
            for p in task.domain.params(order):
                task.evaluate(p)
        else:
            while len(task.values) < budget:
                p = task.random_allowed(rng)
                if p is None:
                    break
                task.evaluate(p)
        out.append(task.values)
        run_params.append(task.run)
    return {"values": out, "params": run_params, "tuner_seconds": time.perf_counter() - t0}


# ---- parameter mapping for Optuna and scikit-optimize -----------------------------------------------------
def _to_user(d: Any, raw: Any) -> Any:
    """A peer's value of dimension ``d`` as a gptask value (an ordinal's index -> its value)."""
    if isinstance(d, Ordinal):
        return d.ordered[int(raw)]
    if isinstance(d, Integer):
        return int(raw)
    if isinstance(d, Real):
        return float(raw)
    return raw


def _optuna_suggest(trial: Any, d: Any) -> Any:
    if isinstance(d, Real):
        return trial.suggest_float(d.name, d.lo, d.hi, log=d.log)
    if isinstance(d, Integer):
        return trial.suggest_int(d.name, d.lo, d.hi, log=d.log)
    if isinstance(d, Ordinal):
        return trial.suggest_int(d.name, 0, len(d.ordered) - 1)
    if isinstance(d, Categorical):
        return trial.suggest_categorical(d.name, d.choices)
    raise TypeError(f"no Optuna mapping for {d!r}")


def run_optuna_gp(fam: Family, budget: int, seed: int) -> dict[str, Any]:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    t0 = time.perf_counter()
    objective_s = 0.0
    out, run_params = [], []
    dims = fam.problem.param_space.dimensions
    for i in range(len(fam.tasks)):
        task = _Task(fam, i)
        sampler = optuna.samplers.GPSampler(seed=seed * 1000 + i, n_startup_trials=max(1, budget // 2))
        study = optuna.create_study(sampler=sampler, direction="minimize")
        redraws = 0
        while len(task.values) < budget:
            trial = study.ask()
            raw = {d.name: _optuna_suggest(trial, d) for d in dims}
            params = task.nearest_allowed({d.name: _to_user(d, raw[d.name]) for d in dims})
            if params is None:
                study.tell(trial, state=optuna.trial.TrialState.FAIL)
                redraws += 1
                if redraws > _MAX_REDRAWS:
                    break
                continue
            s = time.perf_counter()
            v = task.evaluate(params)
            objective_s += time.perf_counter() - s
            if v is None:
                study.tell(trial, state=optuna.trial.TrialState.FAIL)
            else:
                study.tell(trial, v)
        out.append(task.values)
        run_params.append(task.run)
    return {"values": out, "params": run_params, "tuner_seconds": time.perf_counter() - t0 - objective_s}


def run_skopt(fam: Family, budget: int, seed: int) -> dict[str, Any]:
    import skopt
    from skopt.space import Categorical as SkCat, Integer as SkInt, Real as SkReal

    def sk_dim(d: Any) -> Any:
        if isinstance(d, Real):
            return SkReal(d.lo, d.hi, prior="log-uniform" if d.log else "uniform", name=d.name)
        if isinstance(d, Integer):
            return SkInt(d.lo, d.hi, prior="log-uniform" if d.log else "uniform", name=d.name)
        if isinstance(d, Ordinal):
            return SkInt(0, len(d.ordered) - 1, name=d.name)
        return SkCat(list(d.choices), name=d.name)

    t0 = time.perf_counter()
    objective_s = 0.0
    out, run_params = [], []
    dims = fam.problem.param_space.dimensions
    for i in range(len(fam.tasks)):
        task = _Task(fam, i)
        opt = skopt.Optimizer([sk_dim(d) for d in dims], base_estimator="GP", acq_func="EI",
                              n_initial_points=max(1, budget // 2), random_state=seed * 1000 + i)
        worst = None
        redraws = 0
        while len(task.values) < budget:
            x = opt.ask()
            params = task.nearest_allowed({d.name: _to_user(d, v) for d, v in zip(dims, x)})
            if params is None:
                redraws += 1
                if redraws > _MAX_REDRAWS or worst is None:
                    break
                opt.tell(x, worst)
                continue
            s = time.perf_counter()
            v = task.evaluate(params)
            objective_s += time.perf_counter() - s
            if v is not None:
                worst = v if worst is None else max(worst, v)
            opt.tell(x, v if v is not None else (worst if worst is not None else 0.0))
        out.append(task.values)
        run_params.append(task.run)
    return {"values": out, "params": run_params, "tuner_seconds": time.perf_counter() - t0 - objective_s}


# ---- Kernel Tuner ---------------------------------------------------------------------------------------
def run_kernel_tuner(strategy: str, fam: Family, budget: int, seed: int) -> dict[str, Any]:
    import kernel_tuner

    if fam.kernel_tuner is None:
        raise ValueError(f"family {fam.name} has no Kernel Tuner cache files")
    t0 = time.perf_counter()
    out = []
    options: dict[str, Any] = {"max_fevals": budget}
    if strategy == "bayes_opt":
        options.update({"method": "ei", "popsize": max(2, budget // 4)})
    workdir = Path(tempfile.gettempdir()) / "gptask-suite-kt"
    workdir.mkdir(exist_ok=True)
    for (path, restrictions), task in zip(fam.kernel_tuner, fam.tasks):
        cache = kernel_tuner_cache(path, workdir)
        data = json.loads(cache.read_text())
        tune_params = OrderedDict((k, data["tune_params"][k]) for k in data["tune_params_keys"])
        np.random.seed(seed)
        pyrandom.seed(seed)
        res, _ = kernel_tuner.tune_kernel(str(data.get("kernel_name") or "kernel"), "", tuple(data.get("problem_size") or (1,)), [], tune_params,
                                          restrictions=list(restrictions), strategy=strategy,
                                          strategy_options=dict(options), simulation_mode=True, cache=str(cache),
                                          verbose=False, quiet=True, objective="time")
        seen, values = set(), []
        names = list(fam.problem.param_space.names)
        for r in res:
            key = tuple(r[n] for n in names)
            if key in seen:
                continue
            seen.add(key)
            v = r.get("time")
            values.append(float(v) if isinstance(v, (int, float)) and np.isfinite(v) else None)
            if len(values) == budget:
                break
        out.append(values)
    return {"values": out, "tuner_seconds": time.perf_counter() - t0}


# ---- BoTorch MultiTaskGP + LogEI ----------------------------------------------------------------------------
def run_botorch_mtgp(fam: Family, budget: int, seed: int) -> dict[str, Any]:
    """BoTorch's multitask BO over all tasks jointly (bench/mtbo.py's model and acquisition: one
    ``MultiTaskGP`` fitted by ``fit_gpytorch_mll`` at BoTorch's defaults, warm-started from the last
    iteration, then ``LogExpectedImprovement`` per task maximised by ``optimize_acqf``). The initial
    design is gptask's own (``Tuner.initial_design``, half the budget), so the two multitask methods
    differ in model, acquisition and its optimiser only. Outputs standardised per task; a failed run
    is shown to the model as its task's worst value (as gptask does); a suggestion is run as the
    nearest allowed configuration not run yet (as for the other peers)."""
    from gptask.tuning.mla import Tuner

    from mtbo import _torch, fit_multitask_gp, hyperparameters, propose, standardise

    torch = _torch()
    torch.manual_seed(seed)
    t0 = time.perf_counter()
    objective_s = 0.0
    space = fam.problem.param_space
    T = len(fam.tasks)
    tasks = [_Task(fam, i) for i in range(T)]
    with Tuner(fam.problem, fam.tasks, budget, seed=seed) as tuner:
        designs = [tuner.initial_design(i) for i in range(T)]
    for task, design in zip(tasks, designs):
        for p in design:
            allowed = task.nearest_allowed(p)
            if allowed is not None:
                s = time.perf_counter()
                task.evaluate(allowed)
                objective_s += time.perf_counter() - s
    warm = None
    stopped: set[int] = set()
    caught: Counter = Counter()
    while True:
        active = [i for i in range(T) if len(tasks[i].values) < budget and i not in stopped and tasks[i].values]
        if not active:
            break
        X = [space.encode(t.run) for t in tasks]
        y = []
        for t in tasks:
            ok = [v for v in t.values if v is not None]
            worst = max(ok) if ok else 0.0
            y.append(np.array([worst if v is None else v for v in t.values], float))
        z, _ = standardise(y)
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")  # every warning recorded and counted in the run's record, not silenced
            model = fit_multitask_gp(X, [-v for v in z], warm)
            warm = hyperparameters(model)
            rows = [propose(model, space, i, T, float(np.max(-z[i]))) for i in active]
        caught.update(f"{w.category.__name__}: {str(w.message)[:80]}" for w in seen)
        for i, row in zip(active, rows):
            params = tasks[i].nearest_allowed(space.decode(row.reshape(1, -1))[0])
            if params is None:
                stopped.add(i)
                continue
            s = time.perf_counter()
            tasks[i].evaluate(params)
            objective_s += time.perf_counter() - s
    return {"values": [t.values for t in tasks], "params": [t.run for t in tasks],
            "tuner_seconds": time.perf_counter() - t0 - objective_s, "warnings": dict(caught)}


PEERS = {"random": run_random, "optuna_gp": run_optuna_gp, "skopt": run_skopt, "botorch_mtgp": run_botorch_mtgp,
         **{f"kt_{s}": (lambda fam, budget, seed, s=s: run_kernel_tuner(s, fam, budget, seed)) for s in KT_STRATEGIES}}
