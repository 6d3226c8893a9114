"""Calibration rules side by side on the same fits (issue 45): which cross-validated factor covers 85-99 %
at the worst seed of every family-size?

For every family, size and seed of ``--families/--sizes/--seeds`` this fits the tuner's own model once, as
bench/calibration.py does (the tuner's initial design of n points per task, its own fit and output
transform; ``--n-test`` held-out allowed configurations per task, their latent value and a new
measurement), and records, in the model's units:

* ``test``: per held-out point the latent and the measured residual (truth - posterior mean), the latent
  variance and the noise variance of the full model;
* ``warm`` and ``fresh``: :meth:`LCM.crossval_residuals` of the 5-fold cross-validation (seed 0, as
  ``LCM.calibration_factor``) with each fold started at the full fit (warm) or refitted from
  ``CALIBRATION_FRESH_STARTS`` random starts (fresh): residuals, latent and noise variances; ``cond``
  (with ``--folds``): each fold conditioned on the full fit's hyperparameters, not refitted.

Every rule of ``analyse`` is then a function of these arrays, so the rules are compared on the same fits
and the same folds (no refit per rule):

    export PYTHONPATH=$PWD OMP_NUM_THREADS=1
    nice -n 5 /work/venvs/i45b/bin/python bench/calibration_variants.py run --families quick --sizes 5,12,20,30 \\
        --seeds 0-9 --out /tmp/i45s/suite.jsonl
    python bench/calibration_variants.py analyse /tmp/i45s/suite.jsonl --markdown main,lib \
        --json bench/results/calibration_variants_suite.json

``lib`` is the library's rule (LCM.calibration_factors), ``main`` the one before it (bench/results/calibrated.md).

Runs append to ``--out`` (one JSON line per family-size-seed) and are skipped when already there.
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

log = logging.getLogger("calibration_variants")

Z95 = 1.959963984540054
COVER_OK = (0.85, 0.99)


def _r(a: np.ndarray) -> list[float]:
    return [float(f"{x:.5g}") for x in np.asarray(a, float)]


#: the folds ``record`` can take: name -> crossval_residuals' arguments
FOLDS = {"warm": {"fresh": False, "refit": True}, "fresh": {"fresh": True, "refit": True}, "cond": {"refit": False},
         "warm_x": {"fresh": False, "refit": True, "explore": True}, "fresh_x": {"fresh": True, "refit": True, "explore": True}}


def record(fam: Any, n: int, seed: int, n_test: int, folds: tuple[str, ...] = ("warm", "fresh")) -> dict[str, Any]:
    """The arrays of one family-size-seed (module docstring)."""
    from calibration import split

    t0 = time.perf_counter()
    data = split(fam, n, seed, n_test)
    tuner = data["tuner"]
    model, transform = tuner.model, tuner.transform
    space = fam.problem.param_space
    rec: dict[str, Any] = {"fit_s": time.perf_counter() - t0}
    rl, rn, vl, vn = [], [], [], []
    for i, p in enumerate(data["params"]):
        if not p:
            continue
        X = space.encode(p)
        m, v = model.predict(i, X)
        _, v2 = model.predict(i, X, include_noise=True)
        rl.append(transform.forward(i, data["latent"][i]) - m)
        rn.append(transform.forward(i, data["noisy"][i]) - m)
        vl.append(v)
        vn.append(v2 - v)
    rec["test"] = {"rl": _r(np.concatenate(rl)), "rn": _r(np.concatenate(rn)), "v": _r(np.concatenate(vl)),
                   "noise": _r(np.concatenate(vn))}
    for name in folds:
        t1 = time.process_time()
        r, v, nz = model.crossval_residuals(**FOLDS[name])
        rec[name] = {"r": _r(r), "v": _r(v), "noise": _r(nz), "cpu_s": time.process_time() - t1}
    tuner.close()
    return rec


def cmd_run(args: argparse.Namespace) -> int:
    from threadpoolctl import threadpool_limits

    from suite import _families, _parse_list, _parse_seeds
    from suite_families import family

    logging.getLogger("gptask").setLevel(logging.ERROR)
    threadpool_limits(1)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    done = {json.loads(line)["key"] for line in out.read_text().splitlines()} if out.exists() else set()
    for fname in _families(args.families):
        fam = family(fname)
        for n in (int(s) for s in _parse_list(args.sizes)):
            for seed in _parse_seeds(args.seeds):
                key = f"{fname}|{n}|{seed}"
                if key in done:
                    continue
                try:
                    rec = record(fam, n, seed, args.n_test, tuple(args.folds.split(",")))
                except Exception as exc:  # a failed fit is a result too
                    log.warning("%s: %s: %s", key, type(exc).__name__, exc)
                    rec = {"error": f"{type(exc).__name__}: {exc}"}
                with out.open("a") as fh:
                    fh.write(json.dumps({"key": key, **rec}) + "\n")
                log.warning("%s done", key)
    return 0


# ---- the rules --------------------------------------------------------------------------------------------
def quantile_factor(t: np.ndarray) -> float:
    """s with the empirical 95 % quantile of |t| / sqrt(s) at 1.96 (unclipped); nan without points."""
    return float((np.quantile(np.abs(t), 0.95) / Z95) ** 2) if t.size else float("nan")


def upper_factor(t: np.ndarray, level: float) -> float:
    """A one-sided ``level`` upper confidence bound on the variance ratio s of z-scores t ~ N(0, s):
    sum(t^2) / chi2.ppf(1 - level, t.size)."""
    from scipy.stats import chi2

    return float(np.sum(t ** 2) / chi2.ppf(1 - level, t.size)) if t.size else float("nan")


STATS: dict[str, Callable[[np.ndarray], float]] = {
    "q95": quantile_factor,
    "msq": lambda t: float(np.mean(t ** 2)) if t.size else float("nan"),
    "ub75": lambda t: upper_factor(t, 0.75),
    "ub90": lambda t: upper_factor(t, 0.90),
    "ub95": lambda t: upper_factor(t, 0.95),
    "q95ub75": lambda t: max(quantile_factor(t), upper_factor(t, 0.75)),
}


def split_factor(r: np.ndarray, v: np.ndarray, noise: np.ndarray, stat: Callable[[np.ndarray], float]) -> float:
    """s_l with stat(r / sqrt(s_l v + noise)) = 1: the factor applied to the latent part only, the noise
    as fitted (bisection in log s_l over [1e-4, 1e4])."""
    lo, hi = -4.0, 4.0
    f = lambda ls: stat(r / np.sqrt(10 ** ls * v + noise)) - 1.0
    if f(lo) <= 0:
        return 1e-4
    if f(hi) >= 0:
        return 1e4
    for _ in range(50):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if f(mid) > 0 else (lo, mid)
    return float(10 ** (0.5 * (lo + hi)))


def rule_vars(rec: dict[str, Any], n: int, rule: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """The latent and the noisy variance of the test points under ``rule``: fresh_below (the folds start
    afresh below this many points per task), floor (the lowest factor; floor_min_z: fewer held-out points
    than this keep floor 1), latent ("same": the noisy factor on both; "measured": a latent factor from the
    folds' residuals over the latent sd alone, the latent variance capped at the noisy one; "split": the
    factor on the latent part only, the noise as fitted)."""
    folds = rec[rule.get("fresh", "fresh")] if n < rule.get("fresh_below", 12) else rec[rule.get("warm", "warm")]
    r, v, nz = (np.array(folds[k]) for k in ("r", "v", "noise"))
    t = rec["test"]
    tv, tn = np.array(t["v"]), np.array(t["noise"])
    lo = rule.get("floor", 1.0) if r.size >= rule.get("floor_min_z", 0) else 1.0
    clip = lambda s: float(np.clip(s, lo, 64.0)) if r.size >= 8 else 1.0
    stat = STATS[rule.get("stat", "q95")]
    s = clip(stat(r / np.sqrt(v + nz)))
    kind = rule.get("latent", "same")
    if kind == "same":
        return s * tv, s * (tv + tn)
    if kind == "measured":
        sl = clip(stat(r / np.sqrt(v)))
        return np.minimum(sl * tv, s * (tv + tn)), s * (tv + tn)
    if kind == "split":
        sl = clip(split_factor(r, v, nz, stat))
        return sl * tv, sl * tv + tn
    raise ValueError(kind)


RULES: dict[str, dict[str, Any]] = {
    "main": {},
    "fresh20": {"fresh_below": 20},
    "fresh31": {"fresh_below": 31},
    "measured": {"latent": "measured"},
    "split": {"latent": "split"},
    "fresh20_measured": {"fresh_below": 20, "latent": "measured"},
    "fresh20_measured_floor0.5": {"fresh_below": 20, "latent": "measured", "floor": 0.5},
    "fresh20_measured_floor0.25": {"fresh_below": 20, "latent": "measured", "floor": 0.25},
    "fresh20_measured_floor0.5_z40": {"fresh_below": 20, "latent": "measured", "floor": 0.5, "floor_min_z": 40},
    "fresh20_measured_floor0.25_z40": {"fresh_below": 20, "latent": "measured", "floor": 0.25, "floor_min_z": 40},
}
for _stat in ("msq", "ub75", "ub90", "q95ub75"):
    for _f in ("", "_floor0.5", "_floor0.25"):
        RULES[f"fresh20_measured_{_stat}{_f}"] = {"fresh_below": 20, "latent": "measured", "stat": _stat,
                                                  **({"floor": float(_f[6:])} if _f else {})}
        RULES[f"fresh20_split_{_stat}{_f}"] = {"fresh_below": 20, "latent": "split", "stat": _stat,
                                               **({"floor": float(_f[6:])} if _f else {})}

for _f in ("0.5", "0.25"):
    for _z in (20, 40, 80):
        RULES[f"fresh20_measured_ub90_floor{_f}_z{_z}"] = {"fresh_below": 20, "latent": "measured", "stat": "ub90",
                                                          "floor": float(_f), "floor_min_z": _z}
RULES["fresh20_measured_ub95_floor0.25_z40"] = {"fresh_below": 20, "latent": "measured", "stat": "ub95",
                                                "floor": 0.25, "floor_min_z": 40}
RULES["fresh12_measured_ub90_floor0.25_z40"] = {"fresh_below": 12, "latent": "measured", "stat": "ub90",
                                                "floor": 0.25, "floor_min_z": 40}
RULES["main_ub90"] = {"stat": "ub90"}
#: the library's rule until session 40 (one factor for the space; since then a power of the point's variance,
#: bench/calibration_location.py's rule ``shapes``)
RULES["lib"] = RULES["fresh20_measured_ub90_floor0.25_z40"]
#: the library's rule with the folds from 20 points per task conditioned on the full fit, not refitted
#: (``--folds warm,cond``; session 34)
RULES["lib_cond"] = {**RULES["lib"], "warm": "cond"}
#: the library's rule with each fold's refit checked as the main fit is (``explore``: the collapse check;
#: ``--folds warm_x,fresh_x``)
RULES["lib_x"] = {**RULES["lib"], "warm": "warm_x", "fresh": "fresh_x"}


def coverage(rec: dict[str, Any], n: int, rule: dict[str, Any]) -> tuple[float, float]:
    vl, vn = rule_vars(rec, n, rule)
    t = rec["test"]
    return (float(np.mean(np.abs(t["rl"]) <= Z95 * np.sqrt(vl))), float(np.mean(np.abs(t["rn"]) <= Z95 * np.sqrt(vn))))


def analyse(paths: list[str], rules: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Per rule and family-size: mean, worst seed (farthest from 95 %) and lowest seed of latent and noisy
    coverage, and the counts of family-sizes: mean in 85-99 %, lowest seed (latent and noisy) >= 85 %,
    worst seed in 85-99 %."""
    recs: dict[tuple[str, int], list[dict]] = {}
    for p in paths:
        for line in Path(p).read_text().splitlines():
            rec = json.loads(line)
            if "error" in rec:
                continue
            f, n, _ = rec["key"].split("|")
            recs.setdefault((f, int(n)), []).append(rec)
    out: dict[str, Any] = {}
    for name, rule in rules.items():
        cells = {}
        n_mean = n_worst = n_low = 0
        try:
            cov = {key: np.array([coverage(rec, key[1], rule) for rec in rs]) for key, rs in recs.items()}
        except KeyError:  # folds this rule needs were not recorded (--folds)
            continue
        for (f, n), rs in sorted(recs.items()):
            c = cov[(f, n)]
            worst = [float(c[np.argmax(np.abs(c[:, k] - 0.95)), k]) for k in (0, 1)]
            mean = [float(x) for x in c.mean(axis=0)]
            cells[f"{f}|{n}"] = {"seeds": len(rs), "latent": mean[0], "noisy": mean[1], "latent_worst": worst[0],
                                 "noisy_worst": worst[1], "latent_lowest": float(c[:, 0].min()),
                                 "noisy_lowest": float(c[:, 1].min())}
            n_mean += all(COVER_OK[0] <= x <= COVER_OK[1] for x in mean)
            n_worst += all(COVER_OK[0] <= x <= COVER_OK[1] for x in worst)
            n_low += float(c.min()) >= COVER_OK[0]
        out[name] = {"rule": rule, "cells": cells, "mean_in": n_mean, "worst_in": n_worst, "lowest_ok": n_low,
                     "family_sizes": len(cells)}
    return out


def markdown(res: dict[str, Any], before: str, after: str) -> str:
    """Side by side per family-size: mean coverage (lowest seed) latent and noisy, rule ``before`` -> ``after``;
    in bold a mean outside 85-99 % or a lowest seed under 85 %."""
    b = lambda x, ok: f"{x}" if ok else f"**{x}**"
    lines = ["| family | points/task | seeds | latent before | latent after | noisy before | noisy after |",
             "|---|---|---|---|---|---|---|"]
    for key, c0 in res[before]["cells"].items():
        c1 = res[after]["cells"][key]
        f, n = key.split("|")
        cell = lambda c, k: b(f"{c[k]:.3f} ({c[k + '_lowest']:.3f}, {c[k + '_worst']:.3f})",
                              COVER_OK[0] <= c[k] <= COVER_OK[1] and c[k + "_lowest"] >= COVER_OK[0])
        lines.append(f"| {f} | {n} | {c0['seeds']} | {cell(c0, 'latent')} | {cell(c1, 'latent')} | {cell(c0, 'noisy')} | "
                     f"{cell(c1, 'noisy')} |")
    for name in (before, after):
        r = res[name]
        lines.append("")
        lines.append(f"{name}: mean in 85-99 % on {r['mean_in']} of {r['family_sizes']} family-sizes, lowest seed >= 85 % "
                     f"(latent and noisy) on {r['lowest_ok']}, worst seed (farthest from 95 %) in 85-99 % on {r['worst_in']}.")
    return "\n".join(lines)


def cmd_analyse(args: argparse.Namespace) -> int:
    res = analyse(args.inputs, RULES)
    for name, r in res.items():
        print(f"{name:38s} mean in 85-99 %: {r['mean_in']:2d}/{r['family_sizes']}  lowest seed >= 85 %: "
              f"{r['lowest_ok']:2d}  worst seed in 85-99 %: {r['worst_in']:2d}")
    if args.table:
        for name in args.table.split(","):
            print(f"\n{name}")
            for k, c in res[name]["cells"].items():
                print(f"  {k:28s} latent {c['latent']:.3f} ({c['latent_worst']:.3f})  noisy {c['noisy']:.3f} ({c['noisy_worst']:.3f})")
    if args.markdown:
        print("\n" + markdown(res, *args.markdown.split(",")))
    if args.json:
        Path(args.json).write_text(json.dumps({"format": "gptask-bench-calibration-variants/1", "inputs": args.inputs,
                                               "rules": res}, indent=1))
    return 0


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(message)s")
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--families", default="quick")
    r.add_argument("--sizes", default="5,12,20,30")
    r.add_argument("--seeds", default="0-9")
    r.add_argument("--n-test", type=int, default=40)
    r.add_argument("--folds", default="warm,fresh", help="the folds to record: warm, fresh, cond (conditioned)")
    r.add_argument("--out", required=True)
    r.set_defaults(func=cmd_run)
    a = sub.add_parser("analyse")
    a.add_argument("inputs", nargs="+")
    a.add_argument("--json", default=None)
    a.add_argument("--markdown", default=None, help="BEFORE,AFTER: the side-by-side table of two rules")
    a.add_argument("--table", default=None, help="rules whose per-family-size table to print, comma separated")
    a.set_defaults(func=cmd_analyse)
    args = ap.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
