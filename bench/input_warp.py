"""A learned input warp against the short intervals near each best (issue 45, session 43).

Session 42 found the intervals near each task's best target run too short on the multi-fidelity families
(borehole, currin, park; bench/calibration_location.py's ``near`` points), with or without fidelity, where the
folds do not see it and no stationary kernel covers both the near points and the uniform ones. Its candidate
was a learned input warp: each column x in [0, 1] mapped by the Kumaraswamy CDF w(x) = 1 - (1 - x^a)^b
(BoTorch's ``Warp``), which can stretch the space near a bound or near the data and so shorten the effective
length scale there. This bench measures it before any library change.

Per family, kind and seed: the tuning of bench/coverage_after_tuning.py (``input``: with fidelity, the levels
as inputs, the default; ``sf``: the target alone); its final data refitted twice by the library's LCM (the
tuned model's prior, 4 starts, seed 0):

* ``none``: on the inputs as they are;
* ``kuma``: on warped inputs, (log a, log b) per column under N(0, 0.75) each (BoTorch's concentration
  prior), learned by maximum a posteriori: L-BFGS-B over the warp at the unwarped fit's hyperparameters
  (:meth:`LCM.condition`, finite differences), then the LCM refitted from them on the warped inputs; two rounds.

Each task is scored at the target on ``near`` points (100 configurations around its best target run, encoded best
+ N(0, 0.05) per column, clipped; the generator 2000 + seed of bench/calibration_location.py) and on 300
uniform ones (1000 + seed): coverage of the raw 95 % latent interval (``LCM.predict``) and of the calibrated one
users see (``LCM.predict_calibrated``: the folds refit the LCM on the warped inputs, the warp kept), and the
posterior mean's RMSE, in the model's units; the fit's log posterior (the warp's prior included)::

    python bench/input_warp.py run --families borehole,currin,park,hartmann3,branin --kinds input --seeds 0-4 --out F
    python bench/input_warp.py run --families borehole,park --kinds sf --seeds 0-4 --out F
    python bench/input_warp.py summary F

``cv`` chooses, per tuning, between the warp and none by 5-fold held-out log density (:func:`cv_scores`, the warp
learned again in each fold); ``summary F C`` then scores that choice as the arm ``kuma_cv``::

    python bench/input_warp.py cv --families borehole,currin,park,hartmann3,branin --kinds input --seeds 0-9 --out C
    python bench/input_warp.py summary F C

``local`` scores, as the arm ``local``, a one-task LCM fitted on each task's runs nearest its best (:func:`local_rows`,
near points only)::

    python bench/input_warp.py local --families borehole,currin,park,hartmann3,branin --kinds input --seeds 0-9 --out L
    python bench/input_warp.py summary F C L

Rows append, one JSON line per (family, kind, seed, arm, task), or per (family, kind, seed) for ``cv``; a (family,
kind, seed) already there is skipped. Results: bench/results/input_warp.jsonl, input_warp_cv.jsonl,
input_warp_local.jsonl, bench/results/calibrated.md (section "A learned input warp").
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from scipy.optimize import minimize

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import coverage_after_tuning as cat  # noqa: E402
import multifidelity_families as mff  # noqa: E402
from calibration_location import NEAR_SD, N_NEAR  # noqa: E402
from calibration_variants import COVER_OK, Z95  # noqa: E402
from gptask.model.numerics.lcm import LCM  # noqa: E402
from gptask.transfer.predict import as_transfer_model  # noqa: E402
from row_files import done_keys, parse_seeds  # noqa: E402

log = logging.getLogger("input_warp")

#: the warp's inputs are kept this far inside (0, 1) (BoTorch's Warp does the same)
EPS = 1e-6
#: sd of log a and log b (BoTorch's LogNormal(0, 0.75 ** 0.5) concentration priors)
PRIOR_SD = 0.75 ** 0.5
#: box of log a, log b
LOG_BOUND = 2.5
#: alternations of (warp at fixed hyperparameters, LCM refit at the warp)
ROUNDS = 2
N_UNIFORM = 300
ARMS = ("none", "kuma", "kuma_cv", "local")
#: folds of the cross-validated choice (cmd_cv) and the nats by which the warp must win it
CV_FOLDS, CV_MARGIN = 5, 0.0
#: the arm "local" (local_rows): the share of a task's runs nearest its best that its local model is fitted on
LOCAL_SHARE, LOCAL_MIN = 0.5, 8


def warp(X: np.ndarray, phi: np.ndarray) -> np.ndarray:
    """X (n, d) in [0, 1] warped column by column; phi (2 d,): log a then log b."""
    d = X.shape[1]
    a, b = np.exp(phi[:d]), np.exp(phi[d:])
    x = EPS + (1 - 2 * EPS) * np.clip(X, 0.0, 1.0)
    return 1.0 - (1.0 - x ** a) ** b


def warp_log_prior(phi: np.ndarray) -> float:
    return float(-0.5 * np.sum((phi / PRIOR_SD) ** 2))


def empty_like(model: LCM) -> LCM:
    """An LCM with ``model``'s settings and no data."""
    return LCM(model.n_latent, model.kernel, model.rank, backend=model.backend, device=model.device,
               levels=model.levels)


def learn_warp(model: LCM, Xs: list[np.ndarray], ys: list[np.ndarray]) -> tuple[Any, np.ndarray, Any]:
    """(the LCM refitted on warped inputs, phi (2 d,), the unwarped refit) for the data of ``model``."""
    d = Xs[0].shape[1]
    plain = empty_like(model).fit(Xs, ys, restarts=4, seed=0, prior=model.prior)
    fitted, phi = plain, np.zeros(2 * d)
    for _ in range(ROUNDS):
        params = fitted.get_params()

        def negative(ph: np.ndarray) -> float:
            try:
                ll = empty_like(model).condition([warp(X, ph) for X in Xs], ys, params).log_likelihood()
            except Exception:  # a warp that breaks the factorisation is out
                return 1e10
            return -(ll + warp_log_prior(ph))

        phi = minimize(negative, phi, method="L-BFGS-B", bounds=[(-LOG_BOUND, LOG_BOUND)] * (2 * d)).x
        fitted = empty_like(model).fit([warp(X, phi) for X in Xs], ys, restarts=4, seed=0, prior=model.prior,
                                   init=params)
    return fitted, phi, plain


def scoring_sets(fam: mff.MFFamily, tm: Any, Xs: list[np.ndarray], ys: list[np.ndarray], seed: int
              ) -> list[tuple[str, int, np.ndarray, np.ndarray]]:
    """(tag, task, encoded X (n, d), truth (n,) in the model's units) for the near and uniform points."""
    names = fam.objective.names
    near_rng, uniform_rng = np.random.default_rng(2000 + seed), np.random.default_rng(1000 + seed)
    sets = []
    for i in range(len(fam.tasks)):
        best = Xs[i][int(np.argmin(ys[i]))]  # the task's best run at the target
        cand = np.clip(best + NEAR_SD * near_rng.standard_normal((N_NEAR, best.size)), 0, 1)
        near = np.array([[float(c[k]) for k in names] for c in tm.param_space.decode(cand)])
        uniform = uniform_rng.random((N_UNIFORM, fam.dim))
        for tag, U in (("near", near), ("uniform", uniform)):
            X = tm.param_space.encode([dict(zip(names, map(float, u))) for u in U])
            sets.append((tag, i, X, tm.transform.forward(i, fam.objective.value(i, U, mff.TARGET))))
    return sets


def score(fam: mff.MFFamily, kind: str, seed: int) -> list[dict[str, Any]]:
    res = cat.tune(fam, kind, seed)
    model, tm = res.model, as_transfer_model(res)
    Xs, ys = model.data()
    sets = scoring_sets(fam, tm, Xs, ys, seed)
    t0 = time.time()
    warped, phi, plain = learn_warp(model, Xs, ys)
    seconds = time.time() - t0
    rows = []
    for arm, m, ph in (("none", plain, None), ("kuma", warped, phi)):
        lp = m.log_posterior() + (0.0 if ph is None else warp_log_prior(ph))
        by_task: dict[int, dict[str, Any]] = {}
        for tag, i, X, truth in sets:
            Xw = X if ph is None else warp(X, ph)
            mu, v = m.predict(i, Xw)
            mc, vc = m.predict_calibrated(i, Xw)
            row = by_task.setdefault(i, {"arm": arm, "task": i, "log_posterior": lp})
            row[f"{tag}_raw"] = float(np.mean(np.abs(truth - mu) <= Z95 * np.sqrt(v)))
            row[f"{tag}_cal"] = float(np.mean(np.abs(truth - mc) <= Z95 * np.sqrt(vc)))
            row[f"{tag}_rmse"] = float(np.sqrt(np.mean((truth - mu) ** 2)))
        for row in by_task.values():
            if ph is not None:
                d = ph.size // 2
                row.update(a=[round(float(x), 3) for x in np.exp(ph[:d])],
                           b=[round(float(x), 3) for x in np.exp(ph[d:])], seconds=round(seconds, 2))
            rows.append(row)
    return rows


def cv_scores(model: LCM, Xs: list[np.ndarray], ys: list[np.ndarray], seed: int) -> tuple[float, float]:
    """(held-out log density without the warp, with it): CV_FOLDS folds of every task's runs, each predicted
    (a new measurement, noise included) by the LCM refitted on the other folds, the warp learned again on
    them (learn_warp); summed over the held-out runs, in the model's units."""
    rng = np.random.default_rng(3000 + seed)
    parts = [rng.permutation(len(y)) % CV_FOLDS for y in ys]
    total = np.zeros(2)
    for k in range(CV_FOLDS):
        keep = [p != k for p in parts]
        if any(m.sum() < 2 for m in keep):
            continue
        kx, ky = [X[m] for X, m in zip(Xs, keep)], [y[m] for y, m in zip(ys, keep)]
        warped, phi, plain = learn_warp(model, kx, ky)
        for j, (m, ph) in enumerate(((plain, None), (warped, phi))):
            for i, (X, y, mask) in enumerate(zip(Xs, ys, keep)):
                if mask.all():
                    continue
                Xh = X[~mask] if ph is None else warp(X[~mask], ph)
                mu, v = m.predict(i, Xh, include_noise=True)
                total[j] += float(np.sum(-0.5 * np.log(2 * np.pi * v) - 0.5 * (y[~mask] - mu) ** 2 / v))
    return float(total[0]), float(total[1])


def local_rows(fam: mff.MFFamily, name: str, kind: str, seed: int) -> list[dict[str, Any]]:
    """The arm ``local``: each tuned task's near points predicted by a one-task LCM (the tuned model's prior, 4
    starts) fitted on that task's LOCAL_SHARE of runs nearest its best (at least LOCAL_MIN); scored as
    :func:`score` scores the near points (the uniform ones are not its to predict: no uniform columns)."""
    res = cat.tune(fam, kind, seed)
    model, tm = res.model, as_transfer_model(res)
    Xs, ys = model.data()
    rows = []
    for tag, i, X, truth in scoring_sets(fam, tm, Xs, ys, seed):
        if tag != "near":
            continue
        best = Xs[i][int(np.argmin(ys[i]))]
        order = np.argsort(np.sum((Xs[i] - best) ** 2, axis=1))
        keep = order[:max(LOCAL_MIN, int(np.ceil(LOCAL_SHARE * len(order))))]
        local = LCM(1, model.kernel).fit([Xs[i][keep]], [ys[i][keep]], restarts=4, seed=0, prior=model.prior)
        mu, v = local.predict(0, X)
        mc, vc = local.predict_calibrated(0, X)
        rows.append({"arm": "local", "task": i, "runs": int(len(keep)),
                     "near_raw": float(np.mean(np.abs(truth - mu) <= Z95 * np.sqrt(v))),
                     "near_cal": float(np.mean(np.abs(truth - mc) <= Z95 * np.sqrt(vc))),
                     "near_rmse": float(np.sqrt(np.mean((truth - mu) ** 2)))})
    return rows


def cv_rows(fam: mff.MFFamily, name: str, kind: str, seed: int) -> list[dict[str, Any]]:
    """The cross-validated choice between the warp and none (:func:`cv_scores`) for one tuning: one row;
    :func:`summary` then scores the arm ``kuma_cv`` (the chosen arm's rows)."""
    model = cat.tune(fam, kind, seed).model
    Xs, ys = model.data()
    none, kuma = cv_scores(model, Xs, ys, seed)
    return [{"cv_none": none, "cv_kuma": kuma, "choice": "kuma" if kuma > none + CV_MARGIN else "none"}]


def each_tuning(args: argparse.Namespace, rows_of: Any) -> int:
    """``rows_of(family, name, kind, seed)`` for every (family, kind, seed) not in ``--out`` yet, its rows
    appended there (one JSON line each, with the family, kind and seed)."""
    out = Path(args.out)
    done = done_keys(out, ("family", "kind", "seed"))
    for name in args.families.split(","):
        fam = mff.family(name)
        for kind in args.kinds.split(","):
            for seed in args.seeds:
                if (name, kind, seed) in done:
                    continue
                t0 = time.time()
                rows = rows_of(fam, name, kind, seed)
                with out.open("a") as f:
                    for r in rows:
                        f.write(json.dumps({"family": name, "kind": kind, "seed": seed, **r}) + "\n")
                log.info("%s %s seed %d: %.0f s%s", name, kind, seed, time.time() - t0,
                         f" ({rows[0]['choice']})" if "choice" in rows[0] else "")
    return 0


def cmd_cv(args: argparse.Namespace) -> int:
    return each_tuning(args, cv_rows)


def cmd_run(args: argparse.Namespace) -> int:
    return each_tuning(args, lambda fam, name, kind, seed: score(fam, kind, seed))


def summary(rows: list[dict[str, Any]]) -> str:
    """Per family-kind and arm: the mean gain in log posterior over ``none`` (where the arm has one), the mean
    RMSE near and uniform, task-seeds whose calibrated near coverage is at least COVER_OK[0], task-seeds whose
    calibrated uniform coverage is in COVER_OK / under it (an arm without uniform points: "-"); totals per arm."""
    lo, hi = COVER_OK
    lines = [f"{'family kind':18s} {'arm':8s} {'dLP':>6s} {'RMSE near':>9s} {'RMSE unif':>9s} "
             f"{'near ok':>8s} {'unif ok/under':>13s} {'near mean':>9s} {'unif mean':>9s}"]
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["family"], r["kind"]), []).append(r)
    totals = {arm: np.zeros(4, int) for arm in ARMS}

    def cell(value: float | None, fmt: str, width: int) -> str:
        return f"{'-':>{width}s}" if value is None else f"{value:{width}{fmt}}"

    for (fam, kind), rs in sorted(groups.items()):
        lp_none = {r["seed"]: r["log_posterior"] for r in rs if r["arm"] == "none"}
        for arm in ARMS:
            a = [r for r in rs if r["arm"] == arm]
            if not a:
                continue
            near = np.array([r["near_cal"] for r in a])
            uni = np.array([r["uniform_cal"] for r in a]) if all("uniform_cal" in r for r in a) else None
            seeds = sorted({r["seed"] for r in a})
            dlp = float(np.mean([next(r["log_posterior"] for r in a if r["seed"] == s) - lp_none[s] for s in seeds])) \
                if all("log_posterior" in r for r in a) else None
            counts = [int(np.sum(near >= lo)), len(near), 0 if uni is None else int(np.sum((uni >= lo) & (uni <= hi))),
                      0 if uni is None else int(np.sum(uni < lo))]
            totals[arm] += counts
            lines.append(f"{fam + ' ' + kind:18s} {arm:8s} {cell(dlp, '.1f', 6)} {np.mean([r['near_rmse'] for r in a]):9.3f} "
                         f"{cell(None if uni is None else np.mean([r['uniform_rmse'] for r in a]), '.3f', 9)} "
                         f"{counts[0]:4d}/{counts[1]:<3d} "
                         + (f"{'-':>13s}" if uni is None else f"{counts[2]:7d}/{counts[3]:<5d}")
                         + f" {near.mean():9.3f} {cell(None if uni is None else uni.mean(), '.3f', 9)}")
    for arm, (ok, n, uok, under) in totals.items():
        if n:
            lines.append(f"{arm}: near covered >= {lo:.0%} on {ok} of {n} task-seeds" + (
                "" if arm == "local" else f"; uniform in {lo:.0%}-{hi:.0%} on {uok}, under on {under}"))
    return "\n".join(lines)


def cmd_summary(args: argparse.Namespace) -> int:
    rows = [json.loads(line) for f in args.files for line in Path(f).read_text().splitlines() if line]
    choices = {(r["family"], r["kind"], r["seed"]): r["choice"] for r in rows if "choice" in r}
    scored = [r for r in rows if "arm" in r]
    # the cross-validated choice: per (family, kind, seed) the chosen arm's rows, as arm kuma_cv
    scored += [{**r, "arm": "kuma_cv"} for r in scored
               if choices.get((r["family"], r["kind"], r["seed"])) == r["arm"]]
    if choices:
        picked = sum(c == "kuma" for c in choices.values())
        print(f"cross-validated choice: the warp on {picked} of {len(choices)} (family, kind, seed)")
    print(summary(scored))
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name, func in (("run", cmd_run), ("cv", cmd_cv), ("local", lambda a: each_tuning(a, local_rows))):
        cmd = sub.add_parser(name)
        cmd.add_argument("--families", default="borehole,currin,park,hartmann3,branin")
        cmd.add_argument("--kinds", default="input")
        cmd.add_argument("--seeds", type=parse_seeds, default=parse_seeds("0-4"))
        cmd.add_argument("--out", required=True)
        cmd.set_defaults(func=func)
    summ = sub.add_parser("summary")
    summ.add_argument("files", nargs="+")
    summ.set_defaults(func=cmd_summary)
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    logging.getLogger("gptask").setLevel(logging.WARNING)  # the tunings' and fits' lines
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
