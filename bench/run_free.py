"""Run-free prediction from real measurements (issue 15), on the measured 16-core PDGEQRF timings
(apps/scalapack_qr/data/xeon16/runs.csv: 590 launches, 8 matrix sizes).

Subcommands (run from the repository root; each prints markdown tables, --json writes the numbers):

    python bench/run_free.py timing  [--repeats 3]
        import + fit of the 590 rows with gt.fit's defaults (as a user calls it), and the same with
        the first prediction of a new size (which fits the joint GP), wall seconds.
    python bench/run_free.py loto    [--n-latent 1] [--linear-sizes]
        leave-one-task-out with a full refit per held-out size: gt.fit on the other 7 sizes, then
        gt.predict of every measured configuration of the held-out size (nothing of it seen).
    python bench/run_free.py loto --no-features
        the same with the problem's features and cost model dropped: new sizes predicted by the GP
        over tasks (the route before the joint one).
    python bench/run_free.py noise
        the launch-to-launch spread of the data and the MAPE of a perfect predictor under it.
    python bench/run_free.py ceiling
        what the joint GP gets on a size it was trained on (5-fold within size, folds grouped by
        configuration), next to leave-one-size-out with the same fit on the same launches; and both
        against the medians of repeats.csv's 8-launch configurations instead of single launches.
    python bench/run_free.py pick
        leave-one-size-out of gt.predict_optimum: the joint model's pick for the held-out size against
        TLA1's configuration and the hand default, each valued by the joint GP fitted on all 8 sizes
        (the held-out one included) and by the measured time of the nearest measured configuration.
    python bench/run_free.py device
        the shipped model models/pdgeqrf_xeon16.json on 7 sizes it never saw, measured on other
        nodes of the same kind (apps/scalapack_qr/data/xeon16_device), and the configurations it
        recommends for 6 of them launched 10 times each against TLA1's and the hand default, and
        random configurations of 2 more launched 5 times each against their medians.
    python bench/run_free.py options
        the shipped model's checks (gptask.transfer.crossval: hyperparameters fitted on all sizes, the model
        re-conditioned per fold) for the model options a card may choose: sizes on a linear or a
        log scale x 1 or 2 latent processes.
    python bench/run_free.py costmodel
        leave-one-size-out with the paper's analytic cost model (unit times fitted on the other
        sizes): alone, and as the offset of one GP over (task, configuration).

Per held-out size: MAPE, Spearman rank correlation and 95 % interval coverage of the predicted times
of its measured configurations, and the measured time of the configuration ranked first relative to
the size's best measured time, next to the same ratio for the hand default (mb = nb = 64, 4 x 4
grid, 16 processes, one thread).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import gptask as gt  # noqa: E402
from apps.scalapack_qr import problem as pdgeqrf  # noqa: E402
from gptask.transfer.crossval import Z95, CVReport, HeldOut, interval95, leave_one_task_out, within_task_cv  # noqa: E402
from gptask.sources.importing import read_rows  # noqa: E402
from gptask.transfer.joint import JointModel  # noqa: E402
from gptask.transfer.model import joint_inputs  # noqa: E402

from machine import describe_machine  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / "apps" / "scalapack_qr" / "data" / "xeon16" / "runs.csv"
DEVICE_DATA = DATA.parents[1] / "xeon16_device"
#: the columns of a launch that name its size and configuration
CONFIG_COLUMNS = ("m", "n", "mb", "nb", "nproc", "p", "nth")
SHIPPED_MODEL = Path(__file__).resolve().parents[1] / "models" / "pdgeqrf_xeon16.json"


def make_problem(log_sizes: bool = True, features: bool = True) -> gt.Problem:
    """The 16-core PDGEQRF problem; ``features=False`` drops its features and cost model, so that new
    sizes are predicted by the GP over tasks (the route before the joint one)."""
    prob = pdgeqrf(cores=16, m_max=4000, log_sizes=log_sizes)
    if features:
        return prob
    return gt.Problem(prob.task_space, prob.param_space, prob.objective, prob.constraints, prob.constants,
                      prob.name, prob.default)


def rows_as_dicts(problem: gt.Problem) -> list[dict]:
    return [{**r.task, **r.params, "time": r.value} for r in read_rows(problem, DATA, value="time")]


def loadavg() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def table(report: CVReport, tasks: list[dict]) -> str:
    ranks = {r["task_index"]: r for r in report.ranking()}
    lines = ["| held-out size | configurations | MAPE | Spearman | 95 % coverage | top-ranked / best | default / best |",
             "|---|---|---|---|---|---|---|"]
    for r in report.by_task():
        k = ranks[r["task_index"]]
        t = tasks[r["task_index"]]
        lines.append(f"| {t['m']} x {t['n']} | {r['n']} | {r['mape']:.1%} | {r['spearman']:.3f} | {r['coverage']:.1%} | "
                     f"{k['top_over_best']:.3f} | {k['default_over_best']:.3f} |")
    s = report.summary()
    tops = [k["top_over_best"] for k in ranks.values()]
    dfl = [k["default_over_best"] for k in ranks.values()]
    lines.append(f"| **all** | {s['n_points']} | **{s['mape']:.1%}** | **{s['spearman']:.3f}** | {s['coverage']:.1%} | "
                 f"**{np.mean(tops):.3f}** | **{np.mean(dfl):.3f}** |")
    return "\n".join(lines)


def summary_row(name: str, report: CVReport) -> dict:
    s = report.summary()
    out = {"variant": name, **{k: s[k] for k in ("n_points", "mape", "spearman", "coverage")}}
    ranks = report.ranking()
    if report.method == "leave-one-task-out":
        out["top_over_best"] = float(np.mean([k["top_over_best"] for k in ranks]))
        out["default_over_best"] = float(np.mean([k["default_over_best"] for k in ranks]))
    return out


def cmd_timing(args: argparse.Namespace) -> dict:
    problem = make_problem()
    times = []
    for _ in range(args.repeats):
        before = loadavg()
        t0 = time.perf_counter()
        result = gt.fit(problem, DATA, value="time")
        fit_s = time.perf_counter() - t0
        gt.predict(result, {"m": 3000, "n": 3000}, {"mb": 64, "nb": 64, "nproc": 16, "p": 4, "nth": 1})
        times.append(time.perf_counter() - t0)
        print(f"import + fit: {fit_s:.1f} s, with the first prediction of a new size (the joint GP's fit): "
              f"{times[-1]:.1f} s (load before {before}, after {loadavg()}; {len(result.history)} configurations, "
              f"transform {'log' if result.transform.use_log else 'none'})")
    return {"seconds": times, "median": float(np.median(times))}


def cmd_loto(args: argparse.Namespace) -> dict:
    problem = make_problem(not args.linear_sizes, not args.no_features)
    rows = rows_as_dicts(problem)
    full = gt.fit(problem, rows, value="time", n_latent=args.n_latent, output_transform="log")
    tasks = full.tasks
    report = CVReport("leave-one-task-out", defaults=[None if (d := full.default(i)) is None else d[1]
                                                      for i in range(len(tasks))])
    for i, task in enumerate(tasks):
        t0 = time.perf_counter()
        others = [r for r in rows if {"m": r["m"], "n": r["n"]} != task]
        sub = gt.fit(problem, others, value="time", n_latent=args.n_latent, output_transform="log")
        mine = full.records(i)
        pred, sd = gt.predict(sub, task, [dict(r["params"]) for r in mine])
        lo, hi = interval95(True, pred, sd)
        report.points += [HeldOut(i, dict(r["params"]), float(r["value"]), float(p), float(a), float(b), i)
                          for r, p, a, b in zip(mine, pred, lo, hi)]
        print(f"held out {task}: refit + predictions {time.perf_counter() - t0:.0f} s (load {loadavg()})",
              file=sys.stderr)
    print(f"## Leave-one-task-out, refit per held-out size (n_latent={args.n_latent}, "
          f"{'linear' if args.linear_sizes else 'log'} sizes, "
          f"{'GP over tasks' if args.no_features else 'joint route with the features'})\n")
    print(table(report, tasks))
    return summary_row("refit", report)


def cmd_costmodel(args: argparse.Namespace) -> dict:
    """Leave-one-size-out with the paper's analytic cost model (eq. 18-19, apps/scalapack_qr/costmodel.py):
    its four unit times fitted by non-negative least squares on the relative errors of the other
    sizes' launches, (a) alone and (b) as an offset under one GP over (task, configuration) of the
    log time (LCM with one output, Matern-5/2, 2 restarts), prediction intervals from that GP."""
    from scipy.optimize import nnls
    from scipy.stats import spearmanr

    from apps.scalapack_qr.costmodel import feature_matrix
    from gptask.model.numerics import LCM

    problem = make_problem(True)
    rows = rows_as_dicts(problem)
    tnames, pnames = problem.task_space.names, problem.param_space.names
    tasks = [dict(zip(tnames, t)) for t in dict.fromkeys(tuple(r[k] for k in tnames) for r in rows)]
    tid = np.array([tasks.index({k: r[k] for k in tnames}) for r in rows])
    X = np.hstack([problem.task_space.encode([{k: r[k] for k in tnames} for r in rows]),
                   problem.param_space.encode([{k: r[k] for k in pnames} for r in rows])])
    y = np.array([r["time"] for r in rows])
    F = feature_matrix(rows)
    dflt = [problem.default_for(t) for t in tasks]
    report = CVReport("leave-one-task-out", defaults=[
        next((float(y[j]) for j in np.flatnonzero(tid == i) if all(rows[j][k] == v for k, v in (dflt[i] or {}).items())),
             None) for i in range(len(tasks))])
    alone = []
    for i in range(len(tasks)):
        tr, te = tid != i, tid == i
        unit, _ = nnls(F[tr] / y[tr, None], np.ones(int(tr.sum())))
        offset = np.log(np.maximum(F @ unit, 1e-300))
        model = np.exp(offset[te])
        alone.append((float(np.mean(np.abs(model - y[te]) / y[te])), float(spearmanr(model, y[te]).statistic),
                      float(y[te][np.argmin(model)] / y[te].min())))
        z = np.log(y) - offset
        mu, sd = z[tr].mean(), z[tr].std()
        gp = LCM(1, "matern52").fit([X[tr]], [(z[tr] - mu) / sd], restarts=2, seed=0)
        m, v = gp.predict(0, X[te], include_noise=True)
        med, s = np.exp(offset[te] + mu + sd * m), sd * np.sqrt(v)
        report.points += [HeldOut(i, {k: rows[j][k] for k in pnames}, float(y[j]), float(a), float(a * np.exp(-Z95 * b)),
                                  float(a * np.exp(Z95 * b)), i) for j, a, b in zip(np.flatnonzero(te), med, s)]
    a = np.array(alone)
    print(f"## (a) analytic model alone: MAPE {a[:, 0].mean():.1%} (mean over sizes), Spearman {a[:, 1].mean():.3f}, "
          f"top-ranked / best {a[:, 2].mean():.3f}\n")
    print("## (b) analytic model as the offset of one GP over (task, configuration)\n")
    print(table(report, tasks))
    return {"alone": {"mape": float(a[:, 0].mean()), "spearman": float(a[:, 1].mean()),
                      "top_over_best": float(a[:, 2].mean())}, "offset_gp": summary_row("offset GP", report)}


def cmd_options(args: argparse.Namespace) -> dict:
    out = []
    for log_sizes in (False, True):
        problem = make_problem(log_sizes)
        for n_latent in (1, 2):
            t0 = time.perf_counter()
            result = gt.fit(problem, DATA, value="time", n_latent=n_latent, output_transform="log")
            fit_s = time.perf_counter() - t0
            name = f"{'log' if log_sizes else 'linear'} sizes, n_latent={n_latent}"
            loto = leave_one_task_out(result)
            within = within_task_cv(result, 5, 0)
            out.append({**summary_row(name, loto), "within_mape": within.summary()["mape"],
                        "within_spearman": within.summary()["spearman"],
                        "within_coverage": within.summary()["coverage"], "fit_s": fit_s})
            print(f"## {name} (fit {fit_s:.0f} s, load {loadavg()})\n\n{table(loto, result.tasks)}\n", flush=True)
    print("| model options | LOTO MAPE | LOTO Spearman | LOTO coverage | top/best | within-task MAPE | "
          "within-task Spearman | within-task coverage |\n|---|---|---|---|---|---|---|---|")
    for r in out:
        print(f"| {r['variant']} | {r['mape']:.1%} | {r['spearman']:.3f} | {r['coverage']:.1%} | "
              f"{r['top_over_best']:.3f} | {r['within_mape']:.1%} | {r['within_spearman']:.3f} | "
              f"{r['within_coverage']:.1%} |")
    return {"variants": out}


def cmd_noise(args: argparse.Namespace) -> dict:
    """How well any predictor of single launches can do: the launch-to-launch spread of the data
    (log units) and the MAPE of a perfect predictor of the median under it, E|exp(s Z) - 1|."""
    import csv

    def groups(path: Path) -> list[np.ndarray]:
        by: dict[tuple, list[float]] = {}
        with open(path, newline="") as fh:
            for r in csv.DictReader(fh):
                by.setdefault(tuple(r[k] for k in CONFIG_COLUMNS), []).append(
                    float(r["time"]))
        return [np.log(v) for v in by.values() if len(v) > 1]

    z = np.random.default_rng(0).standard_normal(1_000_000)
    floor = lambda s: float(np.mean(np.abs(np.expm1(s * z))))  # noqa: E731
    rep = groups(DATA.parent / "repeats.csv")
    s_rep = float(np.sqrt(np.mean([np.var(g, ddof=1) for g in rep])))
    pairs = np.array([g[0] - g[1] for g in groups(DATA) if len(g) == 2])
    s_pair = float(np.std(pairs) / np.sqrt(2))
    s_pair_robust = float(1.4826 * np.median(np.abs(pairs - np.median(pairs))) / np.sqrt(2))
    out = {"repeats_sd": s_rep, "repeats_floor": floor(s_rep), "pairs": int(len(pairs)), "pairs_sd": s_pair,
           "pairs_floor": floor(s_pair), "pairs_sd_robust": s_pair_robust, "pairs_floor_robust": floor(s_pair_robust)}
    print("| launches | configurations | sd of log time per launch | MAPE of a perfect median |\n|---|---|---|---|")
    print(f"| repeats.csv (8 round-robin launches each) | {len(rep)} | {s_rep:.3f} | {floor(s_rep):.1%} |")
    print(f"| runs.csv (the campaign's two launches of the reference configurations) | {len(pairs)} | "
          f"{s_pair:.3f} (robust {s_pair_robust:.3f}) | {floor(s_pair):.1%} (robust {floor(s_pair_robust):.1%}) |")
    return out


def joint_fit_predict(problem: gt.Problem, train: list[dict], test: list[dict]) -> np.ndarray:
    """Fit the joint GP (gptask.transfer.joint, as gt.predict fits it) on the launches ``train`` and
    predict the log time of the rows ``test``: (len(test),) medians in log seconds."""

    def inputs(rows: list[dict]) -> tuple:
        tasks = [{k: r[k] for k in problem.task_space.names} for r in rows]
        return joint_inputs(problem, tasks, problem.param_space.encode([{k: r[k] for k in problem.param_space.names}
                                                                          for r in rows]))

    model = JointModel.fit(*inputs(train), np.log([r["time"] for r in train]))
    return model.predict(*inputs(test)[1:])[0]


def cmd_ceiling(args: argparse.Namespace) -> dict:
    """How far a prediction of a new size can be expected to go: the joint GP's MAPE on sizes whose
    own launches it was trained on (80 % of them, 5-fold, folds grouped by configuration so that no
    repeat of a held-out configuration is seen), next to leave-one-size-out with the same fit on the
    same launches; then both against the medians of repeats.csv (16 configurations x 8 launches)."""
    import csv

    problem = make_problem()
    rows = rows_as_dicts(problem)
    keys = CONFIG_COLUMNS
    config = [tuple(r[k] for k in keys) for r in rows]
    size = [(r["m"], r["n"]) for r in rows]
    log_t = np.log([r["time"] for r in rows])
    with open(DATA.parent / "repeats.csv", newline="") as fh:
        rep_rows = [{k: int(r[k]) for k in keys} | {"time": float(r["time"])} for r in csv.DictReader(fh)]
    rep_cfg = sorted({tuple(r[k] for k in keys) for r in rep_rows})
    rep = [dict(zip(keys, c)) for c in rep_cfg]
    rep_log_median = np.log([np.median([r["time"] for r in rep_rows if tuple(r[k] for k in keys) == c]) for c in rep_cfg])
    rep_launches = np.array([[rep_cfg.index(tuple(r[k] for k in keys)), np.log(r["time"])] for r in rep_rows])
    every = sorted(set(config) | set(rep_cfg))
    fold_of = {every[i]: j % 5 for j, i in enumerate(np.random.default_rng(0).permutation(len(every)))}
    groups_of = {"within size, 5-fold": lambda c: fold_of[c], "leave one size out": lambda c: c[:2]}

    def mape(pred: np.ndarray, truth: np.ndarray) -> float:
        return float(np.mean(np.abs(np.expm1(pred - truth))))

    out: dict = {}
    for scheme, group in groups_of.items():
        t0 = time.perf_counter()
        pred = np.empty(len(rows))
        rep_pred = np.empty(len(rep))
        for g in sorted({group(c) for c in config}):
            held = np.array([group(c) == g for c in config])
            train = [r for r, h in zip(rows, held) if not h]
            # a repeated configuration is predicted with its fold (its runs.csv launches unseen)
            mine = [j for j, c in enumerate(rep_cfg) if group(c) == g]
            test = [r for r, h in zip(rows, held) if h] + [rep[j] for j in mine]
            p = joint_fit_predict(problem, train, test)
            pred[held] = p[:held.sum()]
            rep_pred[mine] = p[held.sum():]
        per_size = {s: mape(pred[[x == s for x in size]], log_t[[x == s for x in size]]) for s in sorted(set(size))}
        rep_single = mape(rep_pred[rep_launches[:, 0].astype(int)], rep_launches[:, 1])
        out[scheme] = {"mape": mape(pred, log_t), "per_size": {f"{m}x{n}": v for (m, n), v in per_size.items()},
                       "repeats_vs_median": mape(rep_pred, rep_log_median), "repeats_vs_launches": rep_single,
                       "seconds": time.perf_counter() - t0}
    print("| scheme | launches | MAPE | per size | repeats.csv: vs medians | vs single launches |\n|---|---|---|---|---|---|")
    for scheme, o in out.items():
        sizes = ", ".join(f"{k} {v:.1%}" for k, v in o["per_size"].items())
        print(f"| {scheme} | {len(rows)} | {o['mape']:.1%} | {sizes} | {o['repeats_vs_median']:.1%} | "
              f"{o['repeats_vs_launches']:.1%} |")
    return out


def cmd_pick(args: argparse.Namespace) -> dict:
    """How good gt.predict_optimum's configuration for a new size is. No configuration it picks was
    measured, so each is valued two ways, both relative to the held-out size's best measured time:
    by the joint GP fitted on all 8 sizes (the held-out size's launches included; 14.5 % MAPE on
    configurations it did not see, `ceiling`) and by the measured time of the nearest measured
    configuration (encoded space)."""
    problem, plain = make_problem(), make_problem(features=False)
    rows = rows_as_dicts(problem)
    names = problem.param_space.names
    encode = problem.param_space.encode
    out = []
    print("| held-out size | joint model's pick | TLA1 configuration | oracle: pick / TLA1 / default | "
          "nearest measured: pick / TLA1 / default |\n|---|---|---|---|---|")
    for task in sorted({(r["m"], r["n"]) for r in rows}):
        task = {"m": task[0], "n": task[1]}
        others = [r for r in rows if (r["m"], r["n"]) != (task["m"], task["n"])]
        mine = [r for r in rows if (r["m"], r["n"]) == (task["m"], task["n"])]
        pick = gt.predict_optimum(gt.fit(problem, others, value="time"), task)
        tla1 = gt.predict_optimum(gt.fit(plain, others, value="time"), task)
        chosen = [pick.params, tla1.params, problem.default_for(task)]
        best = min(r["time"] for r in mine)
        oracle = np.exp(joint_fit_predict(problem, rows, [{**task, **c} for c in chosen])) / best
        measured = encode([{k: r[k] for k in names} for r in mine])
        nearest = [mine[int(np.argmin(np.linalg.norm(measured - encode([c])[0], axis=1)))]["time"] / best
                   for c in chosen]
        out.append({"task": task, "route": pick.route, "pick": pick.params, "tla1": tla1.params,
                    "oracle": oracle.tolist(), "nearest": nearest})
        text = lambda c: ", ".join(f"{k}={v}" for k, v in c.items())  # noqa: E731
        print(f"| {task['m']} x {task['n']} | {text(pick.params)} | {text(tla1.params)} | "
              f"{' / '.join(f'{v:.3f}' for v in oracle)} | {' / '.join(f'{v:.3f}' for v in nearest)} |")
    o, n = np.mean([r["oracle"] for r in out], axis=0), np.mean([r["nearest"] for r in out], axis=0)
    print(f"| **mean** | | | **{' / '.join(f'{v:.3f}' for v in o)}** | **{' / '.join(f'{v:.3f}' for v in n)}** |")
    return {"sizes": out, "oracle_mean": o.tolist(), "nearest_mean": n.tolist()}


def cmd_device(args: argparse.Namespace) -> dict:
    """The shipped 16-core model on sizes it never saw, measured on other nodes of the same kind
    (apps/scalapack_qr/data/xeon16_device/README.md): the leave-one-task-out figures of `loto` for
    each new size, the measured / predicted ratio (median over the size's launches) and the MAPE
    once it is divided out; then the medians of 10 launches of the configuration the model
    recommends, TLA1's and the hand default, relative to the default; then the predicted times of
    random configurations of 2 more new sizes against the medians of 5 launches each."""
    import csv

    from gptask.transfer.model_io import read_metadata

    problem = pdgeqrf(**read_metadata(SHIPPED_MODEL)["problem"]["options"])
    model = gt.load_model(SHIPPED_MODEL, problem=problem)
    rows = [r for r in read_rows(problem, DEVICE_DATA / "campaign_a.csv", value="time")
            if r.task == {"m": 3000, "n": 3000}] + read_rows(problem, DEVICE_DATA / "new_sizes_b.csv", value="time")
    tasks = [{"m": m, "n": n} for m, n in sorted({(r.task["m"], r.task["n"]) for r in rows})]
    defaults, scale, points = [], [], []
    for i, task in enumerate(tasks):
        mine = [r for r in rows if r.task == task]
        default = problem.default_for(task)
        defaults.append(next(r.value for r in mine if r.params == default))
        pred, sd = gt.predict(model, task, [r.params for r in mine])
        lo, hi = interval95(True, pred, sd)
        measured = np.array([r.value for r in mine])
        ratio = float(np.exp(np.median(np.log(measured / pred))))
        scale.append({"task": task, "measured_over_predicted": ratio,
                      "mape_scaled": float(np.mean(np.abs(ratio * pred - measured) / measured))})
        points += [HeldOut(i, r.params, r.value, float(p), float(a), float(b), i) for r, p, a, b in zip(mine, pred, lo, hi)]
    report = CVReport("leave-one-task-out", points=points, defaults=defaults)
    print("## The shipped model on new sizes, measured on other nodes of the same kind\n")
    print(table(report, tasks).replace("held-out size", "new size"))
    print("\n| new size | measured / predicted (median) | MAPE with that ratio divided out |\n|---|---|---|")
    for row in scale:
        print(f"| {row['task']['m']} x {row['task']['n']} | {row['measured_over_predicted']:.3f} | {row['mape_scaled']:.1%} |")
    with open(DEVICE_DATA / "picks_c.csv", newline="") as fh:
        launches = list(csv.DictReader(fh))
    by: dict[tuple, list[float]] = {}
    configs: dict[tuple, list[float]] = {}
    for r in launches:
        by.setdefault((int(r["m"]), int(r["n"]), r["label"]), []).append(float(r["time"]))
        configs.setdefault(tuple(int(r[k]) for k in CONFIG_COLUMNS), []).append(float(r["time"]))
    labels = ("joint", "tla1", "default", "sample_best")
    print("\n## Recommended configurations, 10 launches each (node C): median / the default's median\n")
    print("| size | " + " | ".join(labels) + " |\n|---|---|---|---|---|")
    picks = []
    for m, n in sorted({k[:2] for k in by}):
        d = np.median(by[(m, n, "default")])
        rel = {lab: float(np.median(by[(m, n, lab)]) / d) for lab in labels if (m, n, lab) in by}
        picks.append({"task": {"m": m, "n": n}, **rel})
        print(f"| {m} x {n} | " + " | ".join(f"{rel[lab]:.3f}" if lab in rel else "-" for lab in labels) + " |")
    mean = {lab: float(np.mean([p[lab] for p in picks])) for lab in labels[:3]}
    print("| **mean** | " + " | ".join(f"**{mean[lab]:.3f}**" for lab in labels[:3]) + " | |")
    medians = against_medians(model, problem, configs)
    print(f"\nPredicted times of these {medians['configurations']} configurations against their median of 10 "
          f"launches: MAPE {medians['mape_vs_median']:.1%} (against each launch: {medians['mape_vs_launches']:.1%}).")
    with open(DEVICE_DATA / "random_d.csv", newline="") as fh:
        random_launches = list(csv.DictReader(fh))
    print("\n## Random configurations of new sizes, 5 launches each (node D): predicted times against their medians\n")
    print("| new size | configurations | MAPE vs medians | vs single launches | Spearman | measured / predicted |\n"
          "|---|---|---|---|---|---|")
    rand = []
    for m, n in sorted({(int(r["m"]), int(r["n"])) for r in random_launches}):
        mine: dict[tuple, list[float]] = {}
        for r in random_launches:
            if (int(r["m"]), int(r["n"])) == (m, n):
                mine.setdefault(tuple(int(r[k]) for k in CONFIG_COLUMNS), []).append(float(r["time"]))
        row = {"task": {"m": m, "n": n}, **against_medians(model, problem, mine)}
        rand.append(row)
        print(f"| {m} x {n} | {row['configurations']} | {row['mape_vs_median']:.1%} | {row['mape_vs_launches']:.1%} | "
              f"{row['spearman']:.3f} | {row['measured_over_predicted']:.3f} |")
    return {"new_sizes": summary_row("device", report), "scale": scale, "picks": picks, "picks_mean": mean,
            "medians": medians, "random": rand}


def against_medians(model, problem: gt.Problem, launches: dict[tuple, list[float]]) -> dict:
    """The model's predicted times of configurations launched several times (``{(m, n, mb, nb, nproc,
    p, nth): [seconds, ...]}``) against each one's median and each launch: MAPE, Spearman of the
    predictions and medians, and the median ratio measured / predicted."""
    from scipy.stats import spearmanr

    keys = list(launches)
    pred = np.array([gt.predict(model, {"m": k[0], "n": k[1]}, dict(zip(problem.param_space.names, k[2:])))[0]
                     for k in keys])
    med = np.array([np.median(launches[k]) for k in keys])
    single = np.concatenate([np.abs(p - np.array(launches[k])) / np.array(launches[k]) for p, k in zip(pred, keys)])
    return {"configurations": len(keys), "mape_vs_median": float(np.mean(np.abs(pred - med) / med)),
            "mape_vs_launches": float(np.mean(single)), "spearman": float(spearmanr(pred, med)[0]),
            "measured_over_predicted": float(np.exp(np.median(np.log(med / pred))))}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("timing")
    t.add_argument("--repeats", type=int, default=3)
    lo = sub.add_parser("loto")
    lo.add_argument("--n-latent", type=int, default=1)
    lo.add_argument("--linear-sizes", action="store_true")
    lo.add_argument("--no-features", action="store_true", help="predict new sizes over tasks (no features)")
    sub.add_parser("options")
    sub.add_parser("costmodel")
    sub.add_parser("noise")
    sub.add_parser("ceiling")
    sub.add_parser("pick")
    sub.add_parser("device")
    for p in (t, lo, *(sub.choices[c] for c in ("options", "costmodel", "noise", "ceiling", "pick", "device"))):
        p.add_argument("--json", default=None, help="write the numbers here")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    print(f"machine: {describe_machine()}; load {loadavg()}; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}\n")
    out = {"timing": cmd_timing, "loto": cmd_loto, "options": cmd_options, "costmodel": cmd_costmodel,
           "noise": cmd_noise, "ceiling": cmd_ceiling,
           "pick": cmd_pick, "device": cmd_device}[args.cmd](args)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
