"""A calibration factor that depends on where a point lies (issue 45): recorded fits, rules compared offline.

Session 39 (bench/coverage_after_tuning.py) found the library's one factor per task too wide after a tuning:
the folds' held-out points miss by more of their own sd's than new points do, and one factor for the whole
space is set by them. This bench compares rules whose factor depends on the point's variance (a power of it
relative to the prior, the library's since session 40; a variance plus a constant, ``affine``) with the one
factor, on the same fits and folds.

``run`` records, per case, in the model's units and without computing any rule:

* ``folds``: the library's own cross-validation (:meth:`LCM.held_out` with its defaults, as
  ``LCM.task_calibrations`` computes them): residual, latent variance, noise variance, task, the fold's prior
  variance; ``folds_<kind>`` (``--fold-kinds``, FOLD_KINDS) the same folds warm-started or conditioned, or on
  a model of levels grouped by configuration or not;
* ``test``: held-out configurations of each task: TEST_COLUMNS (the truth's and a new measurement's residual
  from the posterior mean, the full model's latent, noise and prior variance, the library's calibrated
  variances, the task); ``near`` (tuned cases): the same on configurations
  close to each task's best observed point (encoded best + N(0, NEAR_SD) per column, clipped; distinct and
  not observed, at most N_NEAR; on a recorded family its N_NEAR recorded configurations nearest to it), where a
  recommendation's interval is read;
* ``folds.lib``: the library's per-task factors (latent, noisy) where the model knows nothing of a point.

Cases: ``design:N`` (the tuner's initial design of N points per task, held-out points as
bench/calibration.py draws them) and ``tuned:N`` (a tuning of N runs per task, held-out points a Latin
hypercube per task, as bench/coverage_after_tuning.py scores the generated families, or on a recorded family
(convolution, pdgeqrf16) its configurations not observed); ``mf:<family>`` with case
``tuned:sf``, ``tuned:input`` or ``tuned:tasks``: a multi-fidelity family of bench/multifidelity_families.py
tuned as bench/coverage_after_tuning.py tunes it, held-out points uniform at the target and ``near`` each task's
best target run (session 42)::

    python bench/calibration_location.py run --families gen:0-9 --cases tuned:12,design:5,design:12 --seeds 0-4 --fold-kinds cond --out F
    python bench/calibration_location.py run --families quick --cases design:5,design:12,design:20,design:30 --seeds 0-9 --n-test 40 --fold-kinds "" --out F
    python bench/calibration_location.py analyse F [F2 ...] --rules raw,lib,shapes [--cells] [--json OUT]

Rules: ``lib`` the rule before session 40 (one factor per task), ``shapes`` the library's now (recomputed from
the folds: a factor that is a power of the point's variance relative to the prior), ``levels`` the library's
now on a model of fidelity levels (``mf:`` records of ``tuned:input``: the target's shapes from the target's
held-out points, session 41; ``levels_grouped`` on folds that hold out a configuration at every level at
once, the library's default there since, on records made before it with ``--fold-kinds grouped``), ``library``
the library's own recorded intervals (the constants at recording time), ``raw`` none; variants beside them.

``analyse`` prints, per rule and case kind, the counts the issue asks for (:func:`summary`): family-sizes
whose mean coverage of the 95 % interval (latent; noisy where recorded) is in 85-99 % and whose lowest seed is
at least 85 %, and for tuned cases each task-seed in 85-99 %, under, over.
Rows append (one JSON line per family-case-seed); a key already there is skipped.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np
from scipy.optimize import minimize

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from calibration_variants import COVER_OK, Z95, upper_factor  # noqa: E402
from row_files import parse_seeds  # noqa: E402

log = logging.getLogger("calibration_location")

NEAR_SD = 0.05
N_NEAR = 100


def _r(a: Any) -> list[float]:
    return [float(f"{x:.5g}") for x in np.asarray(a, float).ravel()]


#: the folds recorded beside the library's default: name -> fold_residuals' arguments
#: (a model of fidelity levels: "grouped" each configuration held out at every level at once, the library's default
#: there since session 41; "single" each run alone, its rule before; the same folds on other models)
FOLD_KINDS = {"warm": {"fresh": False, "refit": True}, "cond": {"refit": False}, "grouped": {"grouped": True},
              "single": {"grouped": False}}


def _fold_record(model: Any, kinds: tuple[str, ...] = tuple(FOLD_KINDS)) -> dict[str, Any]:
    """The library's folds (``folds``) and each of ``kinds`` of FOLD_KINDS (``folds_<kind>``)."""
    out = {}
    for name, kw in [("folds", {}), *((f"folds_{k}", FOLD_KINDS[k]) for k in kinds)]:
        h = model.held_out(**kw)
        out[name] = {"r": _r(h.r), "v": _r(h.v), "noise": _r(h.noise), "task": [int(x) for x in h.task],
                     "prior": _r(h.prior)}
    out["folds"]["lib"] = [_r(row) for row in model.task_calibration_factors()]
    return out


#: a test record's columns: residuals of the truth (rl) and of a new measurement (rn), the model's latent and
#: noise variances, the task's prior variance, the library's calibrated latent and noisy variances, the task
TEST_COLUMNS = ("rl", "rn", "v", "noise", "prior", "cal_l", "cal_n", "task")


def _test_record(model: Any, tm: Any, parts: list[tuple]) -> dict[str, Any]:
    """parts: (task, encoded X (n, D), noise-free truth (n,), a new measurement there (n,) or None), both in
    user units; the record's columns are TEST_COLUMNS."""
    cols: dict[str, list[np.ndarray]] = {k: [] for k in TEST_COLUMNS}
    for i, X, truth, measured in parts:
        if len(X) == 0:
            continue
        m, var = model.predict(i, X)
        full = lambda x: np.full(len(m), float(x))
        cols["rl"].append(tm.transform.forward(i, truth) - m)
        cols["rn"].append(tm.transform.forward(i, truth if measured is None else measured) - m)
        cols["v"].append(var)
        cols["noise"].append(full(model.get_params()["noise"][i]))
        cols["prior"].append(full(model.task_covariance()[i, i]))
        cols["cal_l"].append(model.predict_calibrated(i, X)[1])
        cols["cal_n"].append(model.predict_calibrated(i, X, include_noise=True)[1])
        cols["task"].append(full(i))
    out = {k: _r(np.concatenate(c)) if c else [] for k, c in cols.items()}
    out["task"] = [int(x) for x in out["task"]]
    return out


def _measured(fam: Any, i: int, truth: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A new measurement of task i at the truth (n,): plus the family's noise (none without ``noise_sd``)."""
    obj = fam.problem.objective
    sd = obj.noise_sd(i) if hasattr(obj, "noise_sd") else 0.0
    return truth + sd * rng.standard_normal(truth.shape)


def record_design(fam: Any, n: int, seed: int, n_test: int, kinds: tuple[str, ...]) -> dict[str, Any]:
    from calibration import split

    data = split(fam, n, seed, n_test)
    tuner = data["tuner"]
    model, transform = tuner.model, tuner.transform
    space = fam.problem.param_space

    class _TM:  # the transform under the name as_transfer_model gives it
        pass

    tm = _TM()
    tm.transform = transform
    parts = [(i, space.encode(p), data["latent"][i], data["noisy"][i]) for i, p in enumerate(data["params"]) if p]
    rec = {**_fold_record(model, kinds), "test": _test_record(model, tm, parts)}
    tuner.close()
    return rec


def _evaluated(configs: list[dict], value: Callable[[dict], float]) -> tuple[list[dict], np.ndarray]:
    """The configurations whose ``value`` could be read, and those values (a recorded failure is skipped)."""
    keep, vals = [], []
    for c in configs:
        try:
            vals.append(value(c))
        except Exception:  # noqa: BLE001 - a recorded failure or an unmeasured point is no test point
            continue
        keep.append(c)
    return keep, np.array(vals)


def record_tuned(fam: Any, runs: int, seed: int, n_test: int, kinds: tuple[str, ...]) -> dict[str, Any]:
    import gptask as gt
    from gptask.space.sampling import lhs_points
    from gptask.transfer.predict import as_transfer_model

    prob = fam.problem
    res = gt.tune(prob, fam.tasks, runs, seed=seed, progress=False)
    model, tm = res.model, as_transfer_model(res)
    rng = np.random.default_rng(1000 + seed)
    truth_of = fam.latent if fam.latent is not None else prob.objective
    space = tm.param_space
    Xs, ys = model.data()
    far, near = [], []
    for i, task in enumerate(fam.tasks):
        best = Xs[i][int(np.argmin(ys[i]))]
        seen = {json.dumps(c, sort_keys=True, default=str) for c in space.decode(Xs[i])}
        domain = prob.domain(task)
        if domain is not None:  # a recorded family: held-out points from its records only
            pool = [c for c in domain.params(list(range(len(domain))))
                    if json.dumps(c, sort_keys=True, default=str) not in seen]
            configs = [pool[k] for k in rng.choice(len(pool), min(n_test, len(pool)), replace=False)]
            dist = np.linalg.norm(space.encode(pool) - best, axis=1)
            cand = [pool[k] for k in np.argsort(dist)[:N_NEAR]]
        else:
            configs = lhs_points(prob.param_space, n_test, rng)
            cand = space.decode(np.clip(best + NEAR_SD * rng.standard_normal((4 * N_NEAR, best.size)), 0.0, 1.0))
        configs, truth = _evaluated(configs, lambda c: float(truth_of(task, c)))
        far.append((i, space.encode(configs), truth, _measured(fam, i, truth, rng)))
        keep, vals = [], []
        for c in cand:
            if len(keep) == N_NEAR:
                break
            key = json.dumps(c, sort_keys=True, default=str)
            if key in seen:  # distinct configurations, none of them observed
                continue
            seen.add(key)
            try:
                if not prob.is_feasible(task, c):
                    continue
                vals.append(float(truth_of(task, c)))
                keep.append(c)
            except Exception:  # noqa: BLE001 - a point the family cannot evaluate is skipped
                continue
        near.append((i, space.encode(keep) if keep else np.zeros((0, best.size)), np.array(vals),
                     _measured(fam, i, np.array(vals), rng)))
    rec = {**_fold_record(model, kinds), "test": _test_record(model, tm, far), "near": _test_record(model, tm, near)}
    return rec


def record_mf(name: str, kind: str, seed: int, n_test: int, kinds: tuple[str, ...]) -> dict[str, Any]:
    """A multi-fidelity family of bench/multifidelity_families.py tuned as bench/coverage_after_tuning.py
    does (``kind`` sf, input or tasks), its held-out points uniform at the target; ``near`` (session 42) the
    same around each task's best run at the target (its encoding plus N(0, NEAR_SD) per column, clipped; N_NEAR
    of them, none observed), where a recommendation's interval is read."""
    import coverage_after_tuning as cat
    import multifidelity_families as mff
    from gptask.transfer.predict import as_transfer_model

    fam = mff.family(name)
    res = cat.tune(fam, kind, seed)
    model, tm = res.model, as_transfer_model(res)
    rng = np.random.default_rng(1000 + seed)
    parts, near = [], []
    near_rng = np.random.default_rng(2000 + seed)  # apart: the uniform points as recorded before session 42
    Xs, ys = model.data()
    names = fam.objective.names
    for i in range(len(fam.tasks)):
        U = rng.random((n_test, fam.dim))
        X = tm.param_space.encode([dict(zip(names, map(float, u))) for u in U])
        parts.append((i, X, fam.objective.value(i, U, mff.TARGET), None))  # noise-free families
        best = Xs[i][int(np.argmin(ys[i]))]
        cand = np.clip(best + NEAR_SD * near_rng.standard_normal((N_NEAR, best.size)), 0.0, 1.0)
        cand = cand[~np.any(np.all(np.isclose(cand[:, None, :], Xs[i][None]), axis=2), axis=1)]
        U = np.array([[float(c[k]) for k in names] for c in tm.param_space.decode(cand)])
        near.append((i, tm.param_space.encode([dict(zip(names, map(float, u))) for u in U]),
                     fam.objective.value(i, U, mff.TARGET), None))
    return {**_fold_record(model, kinds), "test": _test_record(model, tm, parts), "near": _test_record(model, tm, near)}


def cmd_run(args: argparse.Namespace) -> int:
    from threadpoolctl import threadpool_limits

    from calibration_sources import parse_families
    from suite import _families
    from suite_families import family

    logging.getLogger("gptask").setLevel(logging.ERROR)
    threadpool_limits(1)
    out = Path(args.out)
    done = {json.loads(line)["key"] for line in out.read_text().splitlines() if line} if out.exists() else set()
    names = [f for part in args.families.split(",") for f in (parse_families(part) if part.startswith(("gen:", "mf:"))
                                                              else _families(part))]
    for fname in names:
        fam = None if fname.startswith("mf:") else family(fname)
        for case in args.cases.split(","):
            kind, n = case.split(":")
            for seed in args.seeds:
                key = f"{fname}|{case}|{seed}"
                if key in done:
                    continue
                t0 = time.time()
                try:
                    fk = tuple(filter(None, args.fold_kinds.split(",")))
                    if fam is None:  # mf:<family>, case tuned:<sf|input|tasks>
                        rec = record_mf(fname[3:], n, seed, args.n_test, fk)
                    else:
                        rec = (record_design if kind == "design" else record_tuned)(fam, int(n), seed, args.n_test, fk)
                except Exception as exc:  # noqa: BLE001 - a failed fit is a result too
                    log.warning("%s: %s: %s", key, type(exc).__name__, exc)
                    rec = {"error": f"{type(exc).__name__}: {exc}"}
                with out.open("a") as fh:
                    fh.write(json.dumps({"key": key, "seconds": round(time.time() - t0, 1), **rec}) + "\n")
                log.warning("%s done in %.0f s", key, time.time() - t0)
    return 0


# ---- the rules -------------------------------------------------------------------------------------------
CONF = 0.90
LO, HI = 0.25, 64.0
MIN_POINTS, SHRINK_MIN = 8, 40


def _ub(z2: np.ndarray) -> float:
    """One-sided CONF upper bound on the variance ratio of z-scores with squares z2."""
    return upper_factor(np.sqrt(z2), CONF)


def _clip(s: float, n: int) -> float:
    return float(np.clip(s, LO if n >= SHRINK_MIN else 1.0, HI))


def affine_fit(r: np.ndarray, v: np.ndarray) -> tuple[float, float]:
    """(a, c) maximising the likelihood of residuals r ~ N(0, a v + c), a > 0, c >= 0 (log space;
    c from 1e-8)."""
    def nll(p: np.ndarray) -> float:
        s = np.exp(p[0]) * v + np.exp(p[1])
        return float(np.sum(np.log(s) + r ** 2 / s))

    best = None
    for c0 in (1e-6, float(np.median(v)), float(np.mean(r ** 2))):
        a0 = max(float(np.mean(r ** 2 / v)), 1e-6)
        x = minimize(nll, np.log([a0, max(c0, 1e-8)]), method="L-BFGS-B",
                     bounds=[(np.log(1e-4), np.log(1e4)), (np.log(1e-8), np.log(1e4))])
        if best is None or x.fun < best.fun:
            best = x
    return float(np.exp(best.x[0])), float(np.exp(best.x[1]))


def power_fit(r: np.ndarray, v: np.ndarray) -> tuple[float, float]:
    """(a, p) maximising the likelihood of r ~ N(0, a v^p), p in [0, 1]."""
    def nll(q: np.ndarray) -> float:
        s = np.exp(q[0]) * v ** q[1]
        return float(np.sum(np.log(s) + r ** 2 / s))

    x = minimize(nll, [np.log(max(float(np.mean(r ** 2 / v)), 1e-6)), 1.0], method="L-BFGS-B",
                 bounds=[(np.log(1e-6), np.log(1e6)), (0.0, 1.0)])
    return float(np.exp(x.x[0])), float(x.x[1])


#: a rule: (the folds' arrays, the test points' arrays: TEST_COLUMNS) -> the calibrated (latent, noisy)
#: variances of the test points (n,), (n,)
Rule = Callable[[dict[str, np.ndarray], dict[str, np.ndarray]], tuple[np.ndarray, np.ndarray]]


def rule_raw(f: dict[str, np.ndarray], t: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    return t["v"], t["v"] + t["noise"]


def rule_library(f: dict[str, np.ndarray], t: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """The library's own calibrated variances (LCM.predict_calibrated), as recorded."""
    return t["cal_l"], t["cal_n"]


def rule_lib(f: dict[str, np.ndarray], t: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """The library's rule before session 40 (one factor per task: pooled on tasks of equal size, each task's
    smaller one otherwise): latent s v capped at the noisy factor's (v + n)."""
    v, n, task = t["v"], t["noise"], t["task"]
    r, fv, fn, ft = f["r"], f["v"], f["noise"], f["task"]
    if r.size < MIN_POINTS:
        return v, v + n
    sl, sn = _clip(_ub(r ** 2 / fv), r.size), _clip(_ub(r ** 2 / (fv + fn)), r.size)
    lat, noisy = np.empty_like(v), np.empty_like(v)
    counts = np.bincount(ft)
    unequal = counts[counts > 0].max() >= 1.5 * counts[counts > 0].min()
    for i in np.unique(task):
        a, b = sl, sn
        mine = ft == i
        if unequal and mine.sum() >= MIN_POINTS:
            a = min(a, _clip(_ub(r[mine] ** 2 / fv[mine]), int(mine.sum())))
            b = min(b, _clip(_ub(r[mine] ** 2 / (fv[mine] + fn[mine])), int(mine.sum())))
        k = task == i
        noisy[k] = b * (v[k] + n[k])
        lat[k] = np.minimum(a * v[k], noisy[k])
    return lat, noisy


def _shaped(fit: Callable[[np.ndarray, np.ndarray], Callable[[np.ndarray], np.ndarray]]) -> Rule:
    """A rule from a shape: ``fit(r, w)`` (the folds' residuals and variances w) returns the calibrated variance
    as a function of a variance; each times the CONF upper bound of its fitted z-scores' variance ratio and
    held to [lo, HI] x the raw variance (lo 1 under SHRINK_MIN held-out points, else LO); latent on v, noisy on
    v + n, the latent capped at the noisy."""
    def rule(f: dict[str, np.ndarray], t: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        v, n = t["v"], t["noise"]
        r, fv, fn = f["r"], f["v"], f["noise"]
        if r.size < MIN_POINTS:
            return v, v + n
        lo = LO if r.size >= SHRINK_MIN else 1.0
        out = []
        for w, x in ((fv, v), (fv + fn, v + n)):
            g = fit(r, w)
            k = _ub(r ** 2 / g(w))
            out.append(np.clip(k * g(x), lo * x, HI * x))
        return np.minimum(out[0], out[1]), out[1]
    return rule


def affine_shape(r: np.ndarray, w: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    a, c = affine_fit(r, w)
    return lambda x: a * x + c


def power_shape(r: np.ndarray, w: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    a, p = power_fit(r, w)
    return lambda x: a * x ** p


def scalar_shape(r: np.ndarray, w: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    """The library's shape (one factor), without its per-task rule: a check of _shaped."""
    return lambda x: x


def make_shapes(per_task: bool = True, levels: bool = False, **fit: float) -> Rule:
    """The library's rule recomputed from the folds (gptask.model.numerics.calibration: HeldOut.task_calibrations,
    TaskCalibration.variances), as with refitted folds: the pooled shapes and, with ``per_task`` on tasks of
    unequal size (CALIBRATION_UNEQUAL_TASKS, by held-out counts), each task of enough held-out points the smaller
    of those and its own at each point; with ``levels`` (a model of fidelity levels: ``mf:`` records of
    ``tuned:input``, whose test points all lie at the target), the target tasks (those of the test points) then
    the shapes of their own held-out points pooled (HeldOut.for_targets, as LCM.task_calibrations since session
    41); ``fit``: fit_shape's power_min and nats in place of the library's constants (for variants, and records
    made before a change of them)."""
    from gptask.model.numerics.calibration import HeldOut
    from gptask.model.numerics.defaults import CALIBRATION_UNEQUAL_TASKS

    def rule(f: dict[str, np.ndarray], t: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        if t["task"].size == 0:  # a part without points
            return t["v"], t["v"]
        held = HeldOut(f["r"], f["v"], f["noise"], f["task"], f["prior"])
        counts = np.bincount(held.task)
        counts = counts[counts > 0]
        unequal = per_task and counts.max() >= CALIBRATION_UNEQUAL_TASKS * counts.min()
        cals = held.task_calibrations(int(max(held.task.max(), t["task"].max())) + 1,
                                      "smaller" if unequal else None, **fit)
        if levels:
            cals = held.for_targets(cals, np.unique(t["task"]), **fit)
        lat, noisy = np.empty_like(t["v"]), np.empty_like(t["v"])
        for i in np.unique(t["task"]):
            k = t["task"] == i
            lat[k], noisy[k] = cals[i].variances(t["v"][k], t["noise"][k], t["prior"][k])
        return lat, noisy
    return rule


#: rule name -> (the folds it reads: "folds" the library's, "folds_warm", "folds_cond"; the rule)
RULES: dict[str, tuple[str, Rule]] = {"raw": ("folds", rule_raw), "lib": ("folds", rule_lib),
                                      "library": ("folds", rule_library), "shapes": ("folds", make_shapes()),
                                      "levels": ("folds", make_shapes(levels=True)),
                                      "power_prior": ("folds", make_shapes(False)),
                                      **{f"power_min{x}": ("folds", make_shapes(False, power_min=x)) for x in (0.25, 0.5, 0.75)},
                                      **{f"power_nats{x}": ("folds", make_shapes(False, nats=x)) for x in (0, 1, 2, 4)},
                                      "scalar": ("folds", _shaped(scalar_shape)),
                                      "affine": ("folds", _shaped(affine_shape)), "power": ("folds", _shaped(power_shape))}
for _k in FOLD_KINDS:
    RULES[f"lib_{_k}"] = (f"folds_{_k}", rule_lib)
    RULES[f"affine_{_k}"] = (f"folds_{_k}", _shaped(affine_shape))
    RULES[f"power_{_k}"] = (f"folds_{_k}", _shaped(power_shape))
    RULES[f"levels_{_k}"] = (f"folds_{_k}", make_shapes(levels=True))


def _arrays(d: dict[str, Any]) -> dict[str, np.ndarray]:
    return {k: np.asarray(d[k], dtype=int if k == "task" else float) for k in ("r", *TEST_COLUMNS) if k in d}


def coverages(rec: dict[str, Any], rule: tuple[str, Rule], part: str, noisy: bool = False) -> dict[int, float]:
    """Per task, the fraction of the ``part`` points inside the rule's 95 % interval of the latent function
    (or of a new measurement: ``noisy``)."""
    f, t = _arrays(rec[rule[0]]), _arrays(rec[part])
    var = rule[1](f, t)[1 if noisy else 0]
    inside = np.abs(t["rn" if noisy else "rl"]) <= Z95 * np.sqrt(var)
    return {int(i): float(inside[t["task"] == i].mean()) for i in np.unique(t["task"])}


def _group(key: str) -> str:
    """A record's group: design, tuned, or "mf tuned:<kind>" (multi-fidelity families)."""
    fam, case, _ = key.split("|")
    return f"mf {case}" if fam.startswith("mf:") else case.split(":")[0]


def summary(recs: list[dict[str, Any]], rules: list[str], cells: bool = False) -> list[str]:
    """The lines ``analyse`` prints (module docstring): per group, part (test, near) and which (latent,
    noisy where the records have the measurements), per rule the counts per family-size (coverage pooled
    over the tasks of a seed; mean and lowest seed) and, for tuned cases, per task-seed first."""
    lo, hi = COVER_OK
    lines = []
    for group in sorted({_group(r["key"]) for r in recs}):
        mine = [r for r in recs if _group(r["key"]) == group]
        per_rule_cells: dict[str, dict[str, list[float]]] = {}
        for part in (p for p in ("test", "near") if all(p in r for r in mine)):
            for noisy in (False, True) if all("rn" in r[part] for r in mine) else (False,):
                lines.append(f"\n{group} / {part} / {'noisy' if noisy else 'latent'}: {len(mine)} fits")
                for name in rules:
                    if any(RULES[name][0] not in r for r in mine):
                        lines.append(f"  {name:14s} (its folds were not recorded: --fold-kinds)")
                        continue
                    cov = [coverages(r, RULES[name], part, noisy) for r in mine]
                    if group != "design":  # per task-seed
                        c = np.array([x for cv in cov for x in cv.values()])
                        lines.append(f"  {name:14s} task-seeds {c.size:4d}: mean {c.mean():.3f}  in "
                                     f"{int(((c >= lo) & (c <= hi)).sum()):4d}  under {int((c < lo).sum()):4d}  over "
                                     f"{int((c > hi).sum()):4d}  lowest {c.min():.3f}")
                    by_cell: dict[str, list[float]] = {}
                    for r, cv in zip(mine, cov):
                        if not cv:  # no points of this part (a family whose near points all were observed)
                            continue
                        fam, case, _ = r["key"].split("|")
                        w = np.bincount(_arrays(r[part])["task"], minlength=max(cv) + 1)
                        by_cell.setdefault(f"{fam}|{case}", []).append(sum(cv[i] * w[i] for i in cv) / w.sum())
                    if cells and not noisy:
                        per_rule_cells[name] = by_cell
                    means = np.array([np.mean(c) for c in by_cell.values()])
                    lows = np.array([np.min(c) for c in by_cell.values()])
                    lines.append(f"  {name:14s} {'families' if group != 'design' else 'family-sizes':12s} {len(by_cell):3d}: mean in 85-99 % "
                                 f"{int(((means >= lo) & (means <= hi)).sum()):3d}  lowest seed >= 85 % "
                                 f"{int((lows >= lo).sum()):3d}  mean over 99 % {int((means > hi).sum()):3d}  "
                                 f"median of means {np.median(means):.3f}")
        if per_rule_cells:
            lines.append("\nper family-size, latent, mean (lowest seed): " + ", ".join(per_rule_cells))
            for key in next(iter(per_rule_cells.values())):
                lines.append(f"  {key:28s} " + "  ".join(f"{np.mean(c[key]):.3f} ({np.min(c[key]):.3f})"
                                                          for c in per_rule_cells.values()))
    return lines


def cmd_analyse(args: argparse.Namespace) -> int:
    recs = [json.loads(line) for p in args.inputs for line in Path(p).read_text().splitlines() if line]
    recs = [r for r in recs if "error" not in r]
    rules = args.rules.split(",") if args.rules else list(RULES)
    missing = [r for r in rules if r not in RULES]
    if missing:
        raise SystemExit(f"unknown rules {missing}; known: {sorted(RULES)}")
    print("\n".join(summary(recs, rules, args.cells)))
    if args.json:  # per record, rule and part: each task's coverage, latent and noisy (3 decimals)
        rows = []
        for r in recs:
            row: dict[str, Any] = {"key": r["key"]}
            for part in (p for p in ("test", "near") if p in r and r[p]["task"]):
                for name in rules:
                    if RULES[name][0] in r:
                        row[f"{name}|{part}"] = [[round(c, 3) for c in coverages(r, RULES[name], part, noisy).values()]
                                                 for noisy in (False, True)]
            rows.append(row)
        Path(args.json).write_text("\n".join(json.dumps(row, separators=(",", ":")) for row in rows) + "\n")
    return 0


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(message)s")
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--families", default="gen:0-9")
    r.add_argument("--cases", default="tuned:12")
    r.add_argument("--seeds", type=parse_seeds, default=parse_seeds("0-2"))
    r.add_argument("--n-test", type=int, default=200)
    r.add_argument("--fold-kinds", default="warm,cond", help="folds recorded beside the library's (FOLD_KINDS)")
    r.add_argument("--out", required=True)
    r.set_defaults(func=cmd_run)
    a = sub.add_parser("analyse")
    a.add_argument("inputs", nargs="+")
    a.add_argument("--rules", default=None)
    a.add_argument("--cells", action="store_true", help="print design cases per family-size")
    a.add_argument("--json", default=None, help="write each record's per-task coverages (JSON lines) here")
    a.set_defaults(func=cmd_analyse)
    args = ap.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
