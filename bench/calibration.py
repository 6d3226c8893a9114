"""Calibration of the surrogate on the suite's families (issue 45): are 95 % intervals 95 %?

For every family of bench/suite_families.py (the existing ones and the generated ``gen:<seed>``), every
size (points per task, ``--sizes``, default 5, 10, 20, 30) and every seed:

* training data: per task, the tuner's own initial design of that many points (``Tuner.initial_design``, a
  Latin hypercube or a draw from the allowed list), measured (with the family's noise);
* held-out: ``--n-test`` allowed configurations per task drawn at random (not in the training data), with
  their latent (noise-free) value and a new measurement (latent plus a fresh draw of the family's noise;
  a family without noise: the same value);
* models, both on the same data in the same units:
  - ``gptask``: the tuner's own model, fitted by the tuner itself: a :class:`gptask.Tuner` is told the
    training values and fits (``fit_model``: the default LCM, prior, restarts and output transform,
    log or not chosen as in a run); its training data in model units (per task standardised, log where
    chosen) are what the peer gets;
  - ``gptask_cal``: the same model's calibrated predictive, the intervals users see
    (``LCM.predict_calibrated``: variances times the cross-validation factor);
  - ``botorch``: BoTorch's ``MultiTaskGP`` at its defaults (bench/mtbo.py's ``fit_multitask_gp``);
* scores in model units (coverage does not change under the monotone transform back):
  ``cover_latent``, the fraction of held-out latent values inside the central 95 % interval of the
  latent function; ``cover_noisy``, of new measurements inside the 95 % interval of a new measurement
  (noise included); ``nrmse``, per task the RMSE of the predicted mean against the latent values over
  the sd of those values, averaged over tasks (1: no better than the task's held-out mean).

    PYTHONPATH=. /work/venvs/i45b/bin/python bench/calibration.py run --families generated_small \\
        --sizes 5,10,20 --seeds 0-4 --json bench/results/calibration.json
    python bench/calibration.py report bench/results/calibration.json --out bench/results/calibration.md

Results are merged into ``--json`` as each (family, size, seed, model) finishes, and skipped when already
there (resume). BoTorch needs torch and botorch (bench/peers_setup.sh); ``--models gptask`` runs without.
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

log = logging.getLogger("calibration")

Z95 = 1.959963984540054
MODELS = ("gptask", "gptask_cal", "botorch")
DEFAULT_SIZES = "5,10,20,30"
#: held-out configurations per task
N_TEST = 40
#: acceptable coverage at 95 % nominal (issue 45)
COVER_OK = (0.85, 0.99)


def split(fam: Any, n: int, seed: int, n_test: int) -> dict[str, Any]:
    """Training and held-out data of family ``fam``: n points per task (the tuner's initial design) and
    n_test held-out ones. Returns the tuner (told the training values, model fitted), the held-out
    params per task, their latent values and new measurements (lists over tasks of (m_i,) arrays)."""
    import gptask as gt

    tuner = gt.Tuner(fam.problem, fam.tasks, budget=n, n_initial=n, seed=seed)
    while not tuner.done:
        asked = tuner.ask()
        if not asked:
            break
        for trial in asked:
            try:
                value = float(fam.problem.objective(trial.task, trial.params))
            except gt.EvaluationFailed:
                value = None
            tuner.tell(trial, value)
    tuner.fit_model()
    rng = np.random.default_rng([seed, n, 45])
    space = fam.problem.param_space
    held: list[tuple[int, dict, float, float]] = []
    obj = fam.problem.objective
    for i, task in enumerate(fam.tasks):
        seen = {json.dumps(t.params, sort_keys=True, default=str) for t in tuner.trials_of(i)}
        domain = fam.problem.domain(task)
        picks: list[dict] = []
        for _ in range(50 * n_test):
            if len(picks) == n_test:
                break
            if domain is not None:
                p = domain.params([int(rng.integers(len(domain)))])[0]
            else:
                p = space.decode(rng.random((1, space.n_columns)))[0]
                if not fam.problem.is_feasible(task, p):
                    continue
            key = json.dumps(p, sort_keys=True, default=str)
            if key in seen:
                continue
            try:
                f = float(fam.latent(task, p)) if fam.latent is not None else float(obj(task, p))
            except gt.EvaluationFailed:
                continue
            seen.add(key)
            picks.append(p)
            noise_sd = obj.noise_sd(i) if hasattr(obj, "noise_sd") else 0.0
            held.append((i, p, f, f + noise_sd * float(rng.standard_normal())))
    by_task = [[h for h in held if h[0] == i] for i in range(len(fam.tasks))]
    return {"tuner": tuner, "params": [[h[1] for h in b] for b in by_task],
            "latent": [np.array([h[2] for h in b]) for b in by_task],
            "noisy": [np.array([h[3] for h in b]) for b in by_task]}


def scores(pred_latent: list[tuple[np.ndarray, np.ndarray]], pred_noisy: list[tuple[np.ndarray, np.ndarray]],
           latent: list[np.ndarray], noisy: list[np.ndarray]) -> dict[str, float]:
    """Coverage of the latent values and of new measurements (95 % intervals), normalised RMSE.
    pred_*[i]: (mean (m_i,), variance (m_i,)) of task i; latent, noisy: (m_i,) each, model units."""
    inside_l, inside_n, nrmse = [], [], []
    for (m, v), (_, vn), f, y in zip(pred_latent, pred_noisy, latent, noisy):
        if not len(f):
            continue
        inside_l.append(np.abs(f - m) <= Z95 * np.sqrt(np.maximum(v, 0)))
        inside_n.append(np.abs(y - m) <= Z95 * np.sqrt(np.maximum(vn, 0)))
        sd = float(np.std(f))
        if len(f) > 2 and sd > 0:
            nrmse.append(float(np.sqrt(np.mean((m - f) ** 2))) / sd)
    return {"cover_latent": float(np.mean(np.concatenate(inside_l))),
            "cover_noisy": float(np.mean(np.concatenate(inside_n))),
            "nrmse": float(np.mean(nrmse)) if nrmse else float("nan"),
            "n_test": int(sum(len(f) for f in latent))}


def evaluate(fam: Any, n: int, seed: int, models: list[str], n_test: int) -> dict[str, dict[str, Any]]:
    """Scores of each model on one split (module docstring)."""
    t0 = time.perf_counter()
    data = split(fam, n, seed, n_test)
    tuner = data["tuner"]
    fit_s = time.perf_counter() - t0
    model, transform = tuner.model, tuner.transform
    space = fam.problem.param_space
    X_test = [space.encode(p) if p else np.zeros((0, space.n_columns)) for p in data["params"]]
    latent = [transform.forward(i, f) if len(f) else f for i, f in enumerate(data["latent"])]
    noisy = [transform.forward(i, y) if len(y) else y for i, y in enumerate(data["noisy"])]
    out: dict[str, dict[str, Any]] = {}
    if "gptask" in models:
        pl = [model.predict(i, X, include_noise=False) for i, X in enumerate(X_test)]
        pn = [model.predict(i, X, include_noise=True) for i, X in enumerate(X_test)]
        out["gptask"] = {**scores(pl, pn, latent, noisy), "fit_s": fit_s, "use_log": bool(transform.use_log)}
    if "gptask_cal" in models:
        t1 = time.process_time()
        factor = model.calibration_factor()
        cal_s = time.process_time() - t1
        pl = [model.predict_calibrated(i, X, include_noise=False) for i, X in enumerate(X_test)]
        pn = [model.predict_calibrated(i, X, include_noise=True) for i, X in enumerate(X_test)]
        out["gptask_cal"] = {**scores(pl, pn, latent, noisy), "factor": factor, "calibration_cpu_s": cal_s}
    tuner.close()
    if "botorch" in models:
        from mtbo import _torch, fit_multitask_gp, predict

        _torch().manual_seed(seed)
        train = tuner.surrogate.data
        t1 = time.perf_counter()
        bt = fit_multitask_gp(train.X, train.y)
        fit_b = time.perf_counter() - t1
        pl = [predict(bt, i, X, observation_noise=False) for i, X in enumerate(X_test)]
        pn = [predict(bt, i, X, observation_noise=True) for i, X in enumerate(X_test)]
        out["botorch"] = {**scores(pl, pn, latent, noisy), "fit_s": fit_b}
    return out


# ---- driver ---------------------------------------------------------------------------------------------
def cmd_run(args: argparse.Namespace) -> int:
    from threadpoolctl import threadpool_limits

    from suite import _families, _parse_list, _parse_seeds
    from suite_families import family

    logging.getLogger("gptask").setLevel(logging.ERROR)
    threadpool_limits(1)
    path = Path(args.json)
    data = json.loads(path.read_text()) if path.exists() else {"format": "gptask-bench-calibration/1", "runs": {}}
    models = _parse_list(args.models)
    for m in models:
        if m not in MODELS:
            raise SystemExit(f"--models: unknown model {m!r}; choose from {', '.join(MODELS)}")
    for fname in _families(args.families):
        fam = family(fname)
        for n in (int(s) for s in _parse_list(args.sizes)):
            for seed in _parse_seeds(args.seeds):
                key = f"{fname}|{n}|{seed}"
                todo = [m for m in models if m not in data["runs"].get(key, {})]
                if not todo:
                    continue
                try:
                    got = evaluate(fam, n, seed, todo, args.n_test)
                except Exception as exc:  # a failed fit is a result too: recorded, the rest goes on
                    log.warning("%s: %s: %s", key, type(exc).__name__, exc)
                    got = {m: {"error": f"{type(exc).__name__}: {exc}"} for m in todo}
                data["runs"].setdefault(key, {}).update(got)
                data.setdefault("meta", {})[key] = {"date": time.strftime("%Y-%m-%d %H:%M"), "tasks": len(fam.tasks)}
                tmp = path.with_suffix(".tmp")
                tmp.write_text(json.dumps(data, indent=1))
                tmp.replace(path)
                log.warning("%s: %s", key, "; ".join(
                    f"{m} latent {r.get('cover_latent', float('nan')):.2f} noisy {r.get('cover_noisy', float('nan')):.2f} "
                    f"nrmse {r.get('nrmse', float('nan')):.2f}" for m, r in got.items()))
    return 0


def summarise(runs: dict[str, dict[str, Any]]) -> dict[tuple, dict[str, Any]]:
    """(family, size, model) -> mean over seeds and the worst seed of each score (coverage: the seed
    farthest from 95 %; nrmse: the largest), seeds, failed fits."""
    cells: dict[tuple, list[dict]] = {}
    for key, by_model in runs.items():
        fname, n, _ = key.split("|")
        for m, r in by_model.items():
            cells.setdefault((fname, int(n), m), []).append(r)
    out = {}
    for k, rs in cells.items():
        ok = [r for r in rs if "error" not in r]
        cell: dict[str, Any] = {"seeds": len(ok), "errors": len(rs) - len(ok)}
        if ok:
            for s in ("cover_latent", "cover_noisy"):
                v = np.array([r[s] for r in ok])
                cell[s] = float(v.mean())
                cell[s + "_worst"] = float(v[np.argmax(np.abs(v - 0.95))])
            v = np.array([r["nrmse"] for r in ok])
            cell["nrmse"], cell["nrmse_worst"] = float(np.nanmean(v)), float(np.nanmax(v))
        out[k] = cell
    return out


def report(data: dict[str, Any]) -> str:
    summary = summarise(data["runs"])
    rows = sorted({(k[0], k[1]) for k in summary}, key=lambda fn: (not fn[0].startswith("gen:"), fn[0], fn[1]))
    models = [m for m in MODELS if any(k[2] == m for k in summary)]
    headline = "gptask_cal" if "gptask_cal" in models else "gptask"  # the intervals users see
    lines = ["| family | points/task | " + " | ".join(
        f"{m} latent | {m} noisy | {m} nRMSE" for m in models) + " |",
        "|---|---|" + "---|---|---|" * len(models)]
    n_ok = n_cells = n_worst_ok = 0
    for fname, n in rows:
        cells = []
        for m in models:
            c = summary.get((fname, n, m))
            if c is None or not c["seeds"]:
                cells += ["-"] * 3
                continue
            lat = f"{c['cover_latent']:.2f} ({c['cover_latent_worst']:.2f})"
            noi = f"{c['cover_noisy']:.2f} ({c['cover_noisy_worst']:.2f})"
            cells += [lat if COVER_OK[0] <= c["cover_latent"] <= COVER_OK[1] else f"**{lat}**",
                      noi if COVER_OK[0] <= c["cover_noisy"] <= COVER_OK[1] else f"**{noi}**",
                      f"{c['nrmse']:.2f} ({c['nrmse_worst']:.2f})" + (f" [{c['seeds']}]" if c["seeds"] < 5 else "")
                      + (f" {c['errors']} failed" if c["errors"] else "")]
            if m == headline:
                n_cells += 1
                n_ok += COVER_OK[0] <= c["cover_latent"] <= COVER_OK[1] and COVER_OK[0] <= c["cover_noisy"] <= COVER_OK[1]
                n_worst_ok += all(COVER_OK[0] <= c[k] <= COVER_OK[1] for k in ("cover_latent_worst", "cover_noisy_worst"))
        lines.append(f"| {fname} | {n} | " + " | ".join(cells) + " |")
    lines += ["", f"{headline}'s mean coverage within {COVER_OK[0]:.0%}-{COVER_OK[1]:.0%} (latent and noisy) on {n_ok} of "
              f"{n_cells} family-sizes (worst seed within on {n_worst_ok}); in bold: outside. Mean over seeds (worst seed in brackets: coverage "
              "farthest from 95 %, the largest nRMSE); [k]: k seeds."]
    return "\n".join(lines) + "\n"


def cmd_report(args: argparse.Namespace) -> int:
    runs: dict[str, Any] = {}
    for p in args.inputs:
        for key, by_model in json.loads(Path(p).read_text())["runs"].items():
            runs.setdefault(key, {}).update(by_model)
    text = report({"runs": runs})
    if args.out:
        Path(args.out).write_text(text)
    print(text)
    return 0


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(message)s")
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="fit and score, merging into --json")
    r.add_argument("--families", default="generated_small", help="family names or groups of bench/suite_families.py")
    r.add_argument("--sizes", default=DEFAULT_SIZES, help="points per task, comma separated")
    r.add_argument("--seeds", default="0-4")
    r.add_argument("--models", default=",".join(MODELS))
    r.add_argument("--n-test", type=int, default=N_TEST, help="held-out configurations per task")
    r.add_argument("--json", default="bench/results/calibration.json")
    r.set_defaults(func=cmd_run)
    p = sub.add_parser("report", help="the table of one or more --json files")
    p.add_argument("inputs", nargs="+")
    p.add_argument("--out", default=None)
    p.set_defaults(func=cmd_report)
    args = ap.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
