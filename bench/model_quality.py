"""Model quality: held-out prediction of gptask's LCM against BoTorch's MultiTaskGP, GPy's LCM and
independent per-task GPs, on synthetic multitask data and on real PDGEQRF timings.

Models (each fitted on the same standardised data, 1 BLAS / torch thread):

* ``LCM default``: :class:`gptask.model.numerics.LCM` as the tuner fits it on its first iteration (its
  ``n_latent``, ``kernel`` and ``restarts``, read from :class:`gptask.Tuner`) with ``fit``'s default
  options. Where ``LCM.fit`` has a ``prior`` keyword (found with ``inspect.signature``, so this
  script runs on checkouts before and after it) the row is named after the settings and the default
  prior, a row ``LCM prior=None`` (maximum likelihood) is added and, when the tuner's model differs
  from the one before issue 12 (Q = min(tasks, 4), RBF), that model under the default prior.
* ``BoTorch MultiTaskGP``: bench/mtbo.py's ``fit_multitask_gp`` (BoTorch's defaults); skipped above
  ``--botorch-max-n`` training points (one fit took 17 minutes at 400 points on the shared machine).
* ``GPy LCM``: ``GPy.util.multioutput.LCM`` built as in bench/lcm_fit.py (Q = min(tasks, 4) RBF
  kernels, W rank 1, kernel variances fixed to 1: the tuner's model before issue 12), GPy's default
  fit (``optimize()``: one start, maximum likelihood, 1000 iterations);
  skipped above ``--gpy-max-n`` training points (it takes many minutes there).
* ``GP per task``: :class:`gptask.model.numerics.GP` on each task alone (``GP.fit`` defaults).
* ``reference: training mean +- sd``: no model, N(0, 1) in standardised units for every point; a
  model with RMSE above its (about 1) predicts worse than the task's mean.

``--label TEXT`` appends ``[TEXT]`` to the gptask rows, so that runs of two checkouts merged with
``--merge`` show side by side; ``--gptask-only`` leaves out the peers' rows (BoTorch, GPy), whose
results do not change with gptask's code.

Data sets (``--sets``):

* ``FAMILY:TxN`` for a family of :mod:`gptask.problem.functions` (e.g. ``hartmann6:20x20``): T tasks drawn
  as a Latin hypercube of the family's task space (seeded by the data seed), N training and
  ``--n-test`` held-out configurations per task, both uniform in the encoded unit cube (snapped to
  valid values), observed with Gaussian noise of sd ``NOISE_REL`` times the task's spread of values
  (over 1000 uniform points).
* ``mix6:TxN``: the 6-input synthetic family of bench/lcm_fit.py (3 shared sinusoids mixed with
  task-specific weights), same noise rule.
* ``pdgeqrf``: the 16-core PDGEQRF timings of ``apps/scalapack_qr/data/xeon16/runs.csv`` (8
  tasks, ~74 launches each), 5-fold cross-validation within each task (every fold leaves a fifth of
  every task's launches out; all tasks train together), target log(time), parameters encoded with
  ``apps.scalapack_qr``'s parameter space for 16 cores (mb, nb: log-scale integers; nproc, p, nth:
  integers). Also reported: MAPE of ``exp(predicted mean)`` in seconds and the Spearman rank
  correlation of predicted and measured log times per task (mean over tasks).

Outputs are standardised per task with the training points' mean and sd; metrics are in those units
over all held-out points of all tasks: RMSE, NLPD (mean negative log density of the held-out value
under the predictive normal including the noise) and coverage (fraction inside the central 95 %
predictive interval including the noise). Each seed draws new data (synthetic) or new folds (pdgeqrf).

Run from the repository root (``.bench-venv`` has BoTorch and GPy; ``bash bench/peers_setup.sh``)::

    PYTHONPATH=. .bench-venv/bin/python bench/model_quality.py --sets hartmann6:10x10,mix6:10x10,pdgeqrf \\
        --seeds 0,1,2 --json bench/results_model_quality.json --out bench/results_model_quality.md

As in bench/quality.py, results are merged into ``--json`` as each (set, seed, model) finishes,
``--resume`` skips those already there and ``--merge a.json b.json --out x.md`` reports on several files.
"""

from __future__ import annotations

import argparse
import csv
import inspect
import logging
import math
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.stats import spearmanr

from gptask.problem.functions import FAMILIES
from gptask.tuning.mla import Tuner, resolve_tasks
from gptask.model.numerics import GP, LCM

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import records  # noqa: E402

FORMAT = "gptask-bench-model-quality/1"
#: observation noise sd of the synthetic sets, relative to each task's spread of values
NOISE_REL = 0.05
#: the 16-core PDGEQRF timings (a copy of /work/shared/data/pdgeqrf_xeon16/runs.csv, identical)
PDGEQRF_CSV = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "apps", "scalapack_qr", "data",
                           "xeon16", "runs.csv")
PDGEQRF_CORES = 16
FOLDS = 5
Z95 = 1.959963984540054
REFERENCE = "reference: training mean +- sd"
#: the tuner's surrogate before issue 12 (n_latent = min(tasks, 4), RBF); GPy's LCM is built so
OLD_N_LATENT_CAP, OLD_KERNEL = 4, "rbf"
#: the rows that do not depend on gptask's code (--gptask-only leaves them out)
PEER_MODELS = ("BoTorch MultiTaskGP", "GPy LCM")

#: predictor(i, X (n, d)) -> (mean (n,), variance of a new observation (n,)), standardised units
Predictor = Callable[[int, np.ndarray], tuple[np.ndarray, np.ndarray]]


@dataclass
class Split:
    """One train/test split. X_*[i]: (n_i, d) in [0, 1]; z_*[i]: (n_i,) standardised with task i's
    training mean and sd (``stats[i]``); for pdgeqrf ``z`` is of log(time)."""

    X_train: list[np.ndarray]
    z_train: list[np.ndarray]
    X_test: list[np.ndarray]
    z_test: list[np.ndarray]
    stats: list[tuple[float, float]]


# ---- data -------------------------------------------------------------------------------------------
def _standardised(y_train: list[np.ndarray], y_test: list[np.ndarray]):
    from mtbo import standardise

    z_train, stats = standardise(y_train)
    return z_train, [(y - mu) / sd for y, (mu, sd) in zip(y_test, stats)], stats


def _family_truth(family: str, n_tasks: int, seed: int):
    """(truth f(i, X) -> (n,) for X (n, d) encoded, the encoded space's sampler u -> X, d)."""
    if family == "mix6":
        from lcm_fit import D, truth

        return truth(n_tasks, seed), (lambda u: u), D
    problem = FAMILIES[family][0]()
    space = problem.param_space
    tasks = resolve_tasks(problem, n_tasks, seed)

    def f(i: int, X: np.ndarray) -> np.ndarray:
        return np.array([problem.objective(tasks[i], p) for p in space.decode(X)])

    return f, (lambda u: space.snap(u)), space.n_columns


def synthetic_split(family: str, n_tasks: int, n_train: int, n_test: int, seed: int) -> Split:
    """``n_tasks`` tasks of ``family`` ("mix6" or a gptask.problem.functions family) with ``n_train`` noisy
    training and ``n_test`` noisy held-out points per task, uniform in the encoded space."""
    f, sample, d = _family_truth(family, n_tasks, seed)
    rng = np.random.default_rng([seed, 1])
    X_tr, X_te, y_tr, y_te = [], [], [], []
    for i in range(n_tasks):
        spread = float(np.std(f(i, sample(rng.random((1000, d))))))
        for X_list, y_list, n in ((X_tr, y_tr, n_train), (X_te, y_te, n_test)):
            X = sample(rng.random((n, d)))
            X_list.append(X)
            y_list.append(f(i, X) + NOISE_REL * spread * rng.standard_normal(n))
    z_tr, z_te, stats = _standardised(y_tr, y_te)
    return Split(X_tr, z_tr, X_te, z_te, stats)


def pdgeqrf_data(path: str = PDGEQRF_CSV) -> tuple[list[tuple[int, int]], list[np.ndarray], list[np.ndarray]]:
    """The launches of ``path`` per task (m, n): tasks, encoded parameters (n_i, 5), times (n_i,) s."""
    from apps.scalapack_qr import problem

    space = problem(backend="model", cores=PDGEQRF_CORES, nodes=1, m_max=4000).param_space
    rows: dict[tuple[int, int], list[dict]] = {}
    with open(path) as fh:
        for r in csv.DictReader(fh):
            rows.setdefault((int(r["m"]), int(r["n"])), []).append(r)
    tasks = list(rows)
    X = [space.encode([{k: int(r[k]) for k in space.names} for r in rows[t]]) for t in tasks]
    times = [np.array([float(r["time"]) for r in rows[t]]) for t in tasks]
    return tasks, X, times


def pdgeqrf_splits(seed: int, folds: int = FOLDS) -> tuple[list[Split], list[np.ndarray]]:
    """``folds`` splits of the PDGEQRF log times (within-task folds, seeded permutation per task),
    and per fold the held-out measured times (list over tasks of (n_test_i,) seconds)."""
    _, X, times = pdgeqrf_data()
    rng = np.random.default_rng([seed, 2])
    fold_of = [rng.permutation(len(t)) % folds for t in times]
    splits, held = [], []
    for k in range(folds):
        tr = [f != k for f in fold_of]
        z_tr, z_te, stats = _standardised([np.log(t[m]) for t, m in zip(times, tr)],
                                          [np.log(t[~m]) for t, m in zip(times, tr)])
        splits.append(Split([x[m] for x, m in zip(X, tr)], z_tr, [x[~m] for x, m in zip(X, tr)], z_te, stats))
        held.append([t[~m] for t, m in zip(times, tr)])
    return splits, held


# ---- models -----------------------------------------------------------------------------------------
def tuner_lcm_settings(n_tasks: int) -> tuple[int, int, str]:
    """(n_latent, restarts, kernel) of the tuner's first LCM fit over ``n_tasks`` tasks, read from a
    :class:`gptask.Tuner` (so the rows follow the tuner's defaults wherever they are defined)."""
    problem = FAMILIES["sphere"][0]()
    tuner = Tuner(problem, [{"s": k / n_tasks} for k in range(n_tasks)], budget=2)
    settings = tuner.n_latent, tuner.restarts, tuner.kernel
    getattr(tuner, "close", lambda: None)()
    return settings


@dataclass(frozen=True)
class LCMRow:
    """One LCM row: ``n_latent_cap`` / ``kernel`` None take the tuner's; ``options`` go to ``fit``."""

    name: str
    n_latent_cap: int | None = None
    kernel: str | None = None
    options: tuple[tuple[str, Any], ...] = ()


def lcm_rows() -> list[LCMRow]:
    """The tuner's LCM with ``fit``'s defaults; once ``fit`` has a ``prior`` keyword (found with
    inspect.signature) also its maximum-likelihood twin and, when the tuner's model is no longer
    the one before issue 12, that model (Q = min(tasks, 4), RBF) under the default prior."""
    params = inspect.signature(LCM.fit).parameters
    if "prior" not in params:
        return [LCMRow("LCM default (ML)")]
    default = params["prior"].default
    q, _, kern = tuner_lcm_settings(100)
    rows = [LCMRow(f"LCM default (Q={q}, {kern}, prior={default!r})")]
    if default is not None:
        rows.append(LCMRow(f"LCM prior=None (Q={q}, {kern})", options=(("prior", None),)))
        if (q, kern) != (OLD_N_LATENT_CAP, OLD_KERNEL):
            rows.append(LCMRow(f"LCM prior={default!r} (Q={OLD_N_LATENT_CAP}, {OLD_KERNEL})", OLD_N_LATENT_CAP,
                               OLD_KERNEL))
    return rows


def fit_lcm(split: Split, seed: int, row: LCMRow) -> Predictor:
    T = len(split.X_train)
    n_latent, restarts, kernel = tuner_lcm_settings(T)
    if row.n_latent_cap is not None:
        n_latent = min(T, row.n_latent_cap)
    m = LCM(n_latent=n_latent, kernel=row.kernel or kernel).fit(split.X_train, split.z_train, restarts=restarts,
                                                               seed=seed, **dict(row.options))
    return lambda i, X: m.predict(i, X, include_noise=True)


def fit_gp_per_task(split: Split, seed: int) -> Predictor:
    models = [GP().fit(X, z, seed=seed) for X, z in zip(split.X_train, split.z_train)]
    return lambda i, X: models[i].predict(X, include_noise=True)


def fit_botorch(split: Split, seed: int) -> Predictor:
    from mtbo import _torch, fit_multitask_gp, predict

    _torch().manual_seed(seed)
    model = fit_multitask_gp(split.X_train, split.z_train)
    return lambda i, X: predict(model, i, X, observation_noise=True)


def fit_gpy(split: Split, seed: int) -> Predictor:
    from lcm_fit import gpy_lcm

    g = gpy_lcm(split.X_train, split.z_train, min(len(split.X_train), OLD_N_LATENT_CAP))
    np.random.seed(seed)
    g.optimize()

    def predictor(i: int, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        idx = np.full((len(X), 1), i)
        mean, var = g.predict(np.hstack([X, idx]), Y_metadata={"output_index": idx})
        return mean[:, 0], var[:, 0]

    return predictor


def fit_constant(split: Split, seed: int) -> Predictor:
    """The reference every model should beat: each task's training mean and variance (0 and 1)."""
    return lambda i, X: (np.zeros(len(X)), np.ones(len(X)))


def models(label: str) -> dict[str, Callable[[Split, int], Predictor]]:
    """Row name -> fit(split, seed); gptask rows carry ``[label]`` when given."""
    tag = f" [{label}]" if label else ""
    out: dict[str, Callable[[Split, int], Predictor]] = {
        row.name + tag: (lambda split, seed, r=row: fit_lcm(split, seed, r)) for row in lcm_rows()}
    out["BoTorch MultiTaskGP"] = fit_botorch
    out["GPy LCM"] = fit_gpy
    out["GP per task" + tag] = fit_gp_per_task
    out[REFERENCE] = fit_constant
    return out


# ---- metrics ----------------------------------------------------------------------------------------
def predict_split(predictor: Predictor, split: Split) -> list[tuple[np.ndarray, np.ndarray]]:
    """(mean, variance) per task at its held-out points."""
    return [predictor(i, X) for i, X in enumerate(split.X_test)]


def scores(z: np.ndarray, mean: np.ndarray, var: np.ndarray) -> dict[str, float]:
    """RMSE, NLPD and 95 % coverage of held-out values z (n,) under N(mean, var) (n,) each."""
    var = np.maximum(var, 1e-12)
    err = z - mean
    return {"rmse": float(np.sqrt(np.mean(err**2))),
            "nlpd": float(np.mean(0.5 * np.log(2 * math.pi * var) + 0.5 * err**2 / var)),
            "coverage": float(np.mean(np.abs(err) <= Z95 * np.sqrt(var))), "n_test": int(z.size)}


def evaluate_synthetic(fit: Callable[[Split, int], Predictor], split: Split, seed: int) -> dict[str, Any]:
    t0 = time.perf_counter()
    predictor = fit(split, seed)
    fit_s = time.perf_counter() - t0
    pred = predict_split(predictor, split)
    out = scores(np.concatenate(split.z_test), np.concatenate([p[0] for p in pred]),
                 np.concatenate([p[1] for p in pred]))
    return {**out, "fit_s": fit_s}


def evaluate_pdgeqrf(fit: Callable[[Split, int], Predictor], splits: list[Split], held: list[list[np.ndarray]],
                     seed: int) -> dict[str, Any]:
    """Cross-validated scores (all folds' held-out points pooled), MAPE of exp(mean) in seconds,
    Spearman correlation of predicted and measured log time per task (mean over tasks), and the
    mean fit time per fold."""
    z, mean, var, fit_s = [], [], [], []
    per_task: dict[int, list[tuple[np.ndarray, np.ndarray]]] = {}
    ape = []
    for split, times in zip(splits, held):
        t0 = time.perf_counter()
        predictor = fit(split, seed)
        fit_s.append(time.perf_counter() - t0)
        for i, (m, v) in enumerate(predict_split(predictor, split)):
            mu, sd = split.stats[i]
            z.append(split.z_test[i])
            mean.append(m)
            var.append(v)
            per_task.setdefault(i, []).append((mu + sd * m, np.log(times[i])))
            ape.append(np.abs(np.exp(mu + sd * m) - times[i]) / times[i])
    rho = [spearmanr(np.concatenate([a for a, _ in v]), np.concatenate([b for _, b in v])).statistic
           for v in per_task.values()]
    out = scores(np.concatenate(z), np.concatenate(mean), np.concatenate(var))
    return {**out, "fit_s": float(np.mean(fit_s)), "mape": float(np.mean(np.concatenate(ape))),
            "spearman": float(np.mean(rho))}


# ---- driver -----------------------------------------------------------------------------------------
def _parse_set(text: str) -> tuple[str, int, int]:
    """"FAMILY:TxN" -> (family, T, N); "pdgeqrf" -> ("pdgeqrf", 0, 0)."""
    if text == "pdgeqrf":
        return "pdgeqrf", 0, 0
    family, _, size = text.partition(":")
    if family != "mix6" and family not in FAMILIES:
        raise SystemExit(f"unknown family {family!r} in set {text!r}; choose from mix6, {', '.join(FAMILIES)}")
    try:
        T, N = (int(v) for v in size.lower().split("x"))
    except ValueError:
        raise SystemExit(f"set {text!r}: expected FAMILY:TxN (e.g. hartmann6:20x20) or pdgeqrf") from None
    return family, T, N


def _n_train(family: str, n_tasks: int, n: int) -> int:
    """Training points of one fit of a set (pdgeqrf: of the first fold)."""
    if family == "pdgeqrf":
        splits, _ = pdgeqrf_splits(0)
        return sum(len(x) for x in splits[0].X_train)
    return n_tasks * n


def _too_large(name: str, n_train: int, args: argparse.Namespace) -> bool:
    """GPy and BoTorch are skipped above their --*-max-n training points (a fit takes an hour there)."""
    limit = {"GPy LCM": args.gpy_max_n, "BoTorch MultiTaskGP": args.botorch_max_n}.get(name)
    return limit is not None and n_train > limit


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sets", default="hartmann6:10x10,mix6:10x10,pdgeqrf",
                    help="comma list of FAMILY:TxN (FAMILY: mix6 or one of gptask.problem.functions) and pdgeqrf")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--n-test", type=int, default=50, help="held-out points per task (synthetic sets)")
    ap.add_argument("--models", default=None, help="comma list of row names (default: all)")
    ap.add_argument("--gptask-only", action="store_true",
                    help="only the rows that depend on gptask's code (LCM, GP per task, the reference)")
    ap.add_argument("--gpy-max-n", type=int, default=500, help="skip GPy above this many training points")
    ap.add_argument("--botorch-max-n", type=int, default=500, help="skip BoTorch above this many training points")
    ap.add_argument("--label", default="", help="appended to the gptask rows' names, e.g. a commit")
    ap.add_argument("--json", default=None, help="raw results file, merged into as each fit finishes")
    ap.add_argument("--resume", action="store_true", help="skip (set, seed, model) already in --json")
    ap.add_argument("--merge", nargs="+", default=None, metavar="JSON", help="run nothing: merge and report")
    ap.add_argument("--pending", action="store_true",
                    help="run nothing: print how many fits --json lacks; exit status 3 when none")
    ap.add_argument("--out", default=None, help="markdown report (of everything in --json)")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    if args.merge:
        records.write_report(report(records.merged(args.merge, args.json)), args.out)
        return 0

    from threadpoolctl import threadpool_limits

    threadpool_limits(1)
    available = models(args.label)
    chosen = list(available) if args.models is None else [m.strip() for m in args.models.split(",")]
    if args.gptask_only:
        chosen = [m for m in chosen if m not in PEER_MODELS]
    for m in chosen:
        if m not in available:
            raise SystemExit(f"unknown model {m!r}; choose from {list(available)}")
    sets = [_parse_set(s.strip()) + (s.strip(),) for s in args.sets.split(",") if s.strip()]
    seeds = [int(s) for s in args.seeds.split(",")]
    if args.pending:
        known = records.read(args.json).get("sets", {}) if args.json and os.path.exists(args.json) else {}
        n = sum(name not in known.get(text, {}).get("seeds", {}).get(str(seed), {})
                and not _too_large(name, _n_train(family, T, N), args)
                for family, T, N, text in sets for seed in seeds for name in chosen)
        print(n)
        return 0 if n else 3
    results = records.Results(FORMAT, "model_quality.py", argv, args.json)
    for family, T, N, text in sets:
        n_train = _n_train(family, T, N)
        for seed in seeds:
            if family == "pdgeqrf":
                splits, held = pdgeqrf_splits(seed)
            else:
                split = synthetic_split(family, T, N, args.n_test, seed)
            done = results.data.get("sets", {}).get(text, {}).get("seeds", {}).get(str(seed), {})
            for name in chosen:
                if args.resume and name in done:
                    continue
                if _too_large(name, n_train, args):
                    continue
                load = records.load_average()
                if family == "pdgeqrf":
                    out = evaluate_pdgeqrf(available[name], splits, held, seed)
                else:
                    out = evaluate_synthetic(available[name], split, seed)
                out.update(load_start=load, load_end=records.load_average(), n_train=n_train)
                results.add({"sets": {text: {"seeds": {str(seed): {name: out}}}}})
                print(f"[{text} seed {seed}] {name:28s} RMSE {out['rmse']:.3f} NLPD {out['nlpd']:.3f} "
                      f"cover {out['coverage']:.2f} fit {out['fit_s']:.1f} s", file=sys.stderr, flush=True)
    records.write_report(report(results.finish()), args.out)
    return 0


# ---- report -----------------------------------------------------------------------------------------
def _set_order(name: str) -> tuple:
    family, T, N = _parse_set(name)
    return (family == "pdgeqrf", T * N, family)


def _model_rows(by_seed: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per model: the metrics averaged over seeds, the worst seed's RMSE and NLPD, coverage range."""
    rows: dict[str, dict[str, Any]] = {}
    names = sorted({m for r in by_seed.values() for m in r},
                   key=lambda m: (m == REFERENCE, not m.startswith("LCM"), m))
    for m in names:
        runs = [r[m] for r in by_seed.values() if m in r]
        avg = {k: float(np.mean([r[k] for r in runs])) for k in runs[0] if isinstance(runs[0][k], (int, float))}
        avg.update(n_seeds=len(runs), rmse_worst=max(r["rmse"] for r in runs),
                   nlpd_worst=max(r["nlpd"] for r in runs), cov_min=min(r["coverage"] for r in runs),
                   cov_max=max(r["coverage"] for r in runs))
        rows[m] = avg
    return rows


def _set_table(name: str, by_seed: dict[str, dict[str, Any]]) -> list[str]:
    rows = _model_rows(by_seed)
    fitted = [r for m, r in rows.items() if m != REFERENCE] or list(rows.values())
    best_rmse = min(r["rmse"] for r in fitted)
    best_nlpd = min(r["nlpd"] for r in fitted)
    best_cov = min(abs(r["coverage"] - 0.95) for r in fitted)
    real = name == "pdgeqrf"
    n_train = int(next(iter(rows.values()))["n_train"])
    lines = [f"## {name}", "", f"{n_train} training points; seeds {', '.join(sorted(by_seed, key=int))}; "
             "mean over seeds (worst seed in brackets); best fitted model in bold; "
             "ratios against the best fitted model.", "",
             "| model | seeds | RMSE (worst) | RMSE / best | NLPD (worst) | NLPD - best | 95 % coverage [range] "
             "| fit s |" + (" MAPE (s) | Spearman |" if real else ""),
             "|---|---|---|---|---|---|---|---|" + ("---|---|" if real else "")]

    def bold(text: str, flag: bool) -> str:
        return f"**{text}**" if flag else text

    best_mape = min(r.get("mape", np.inf) for r in fitted)
    best_rho = max(r.get("spearman", -np.inf) for r in fitted)
    for m, r in rows.items():
        cells = [bold(f"{r['rmse']:.3f} ({r['rmse_worst']:.3f})", r["rmse"] == best_rmse),
                 f"{r['rmse'] / best_rmse:.3f}",
                 bold(f"{r['nlpd']:.3f} ({r['nlpd_worst']:.3f})", r["nlpd"] == best_nlpd),
                 f"{r['nlpd'] - best_nlpd:+.3f}",
                 bold(f"{r['coverage']:.3f} [{r['cov_min']:.2f}, {r['cov_max']:.2f}]",
                      abs(r["coverage"] - 0.95) == best_cov),
                 f"{r['fit_s']:.1f}"]
        if real:
            cells += [bold(f"{r['mape']:.3f}", r["mape"] == best_mape),
                      bold(f"{r['spearman']:.3f}", r["spearman"] == best_rho)]
        lines.append(f"| {m} | {r['n_seeds']} | " + " | ".join(cells) + " |")
    return lines + [""]


def report(data: dict[str, Any]) -> str:
    lines = ["# Model quality: held-out prediction, gptask LCM vs BoTorch MultiTaskGP, GPy LCM, per-task GPs",
             "", "Runs:", ""]
    for r in data.get("runs", []):
        lines.append(f"- `{r['command']}`: {r['started']} to {r.get('finished', '(unfinished)')} UTC, load "
                     f"average {r['load_start']} at start, {r.get('load_end', '?')} at end; {r['machine']}")
    lines += ["", "- RMSE and NLPD in units of each task's training standard deviation (of log time for "
              "pdgeqrf), over all held-out points of all tasks; NLPD and coverage use the predictive "
              "distribution of a new observation (noise included); coverage: share of held-out values "
              "inside the central 95 % interval (best: closest to 0.95)",
              "- fit s: one fit (pdgeqrf: mean over the 5 folds), 1 BLAS / torch thread, shared machine",
              f"- synthetic sets: observation noise sd {NOISE_REL} x the task's spread of values, held-out "
              "points uniform per task; pdgeqrf: 5-fold cross-validation within each task of log(time)", ""]
    for name in sorted(data.get("sets", {}), key=_set_order):
        lines += _set_table(name, data["sets"][name]["seeds"])
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
