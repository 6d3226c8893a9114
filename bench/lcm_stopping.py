"""Benchmark: the L-BFGS-B iteration cap and stall rule of ``LCM.fit`` against held-out error.

A fit stops a start after ``maxiter`` iterations, or earlier when its objective (the log posterior)
gained less than ``nats`` over the last ``window`` iterations (gptask.model.numerics.defaults:
DEFAULT_MAXITER, STALL_WINDOW, STALL_NATS). A looser rule climbs further along the likelihood; this
script asks whether that buys better *predictions* of held-out points, which is what the tuner
needs from the model, and what it costs in time.

Step 1 (``record``): for each data set, the default fit's starts (keys 0..restarts-1) and its
exploration round's (the next EXPLORE_RESTARTS keys) run once under the loosest rule of interest
(``--record-maxiter``, ``--record-window``, ``--record-nats``; by default the rule of the code
before issue 16: 1000 / 30 / 0.1), and every iteration's hyperparameters and objective are kept
(an ``.npz`` per data set in ``--cache``), with the wall time of every evaluation.

Step 3 (``fit``): real fits, timed, under each of ``--rules`` (every other argument of
``LCM.fit`` at its default), with the fitted model's held-out RMSE and NLPD.

Step 2 (``report``): any tighter rule stops each start at a point of the same recorded path, so
the fit it would have returned is replayed exactly, post-fit check and exploration round
included: its winner's held-out RMSE and NLPD (standardised units, noise-free truth at
``--n-test`` points per task) and its time (the recorded evaluation times up to the stops).

Data sets (``--sets``, T tasks x n points, 6 inputs unless the family has fewer): ``mix6`` (the
3-sinusoid family of bench/lcm_fit.py at lower frequencies), ``hartmann6`` and ``branin`` (the
task families of gptask.problem.functions, tasks uniform in the task space); observations carry Gaussian
noise of sd 5 % of each task's spread; outputs standardised per task as the tuner does.

    PYTHONPATH=. python bench/lcm_stopping.py record --sets mix6:50x20,hartmann6:50x20 --seeds 0,1
    PYTHONPATH=. python bench/lcm_stopping.py report --sets mix6:50x20,hartmann6:50x20 --seeds 0,1
    PYTHONPATH=. python bench/lcm_stopping.py fit --sets mix6:50x20 --seeds 0 --rules 1000/30/0.1,100/10/1.0
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np
from threadpoolctl import threadpool_limits

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import gptask.model.numerics.lcm as lcm_mod  # noqa: E402
from gptask.model.numerics import LCM  # noqa: E402
from gptask.model.numerics.defaults import EXPLORE_RESTARTS  # noqa: E402

NOISE_REL = 0.05


def _family_data(name: str, T: int, n: int, n_test: int, seed: int):
    """(Xs, ys, Xt, yt): standardised training data and noise-free held-out truth per task."""
    rng = np.random.default_rng([seed, 16])
    if name == "mix6":
        d = 6
        freq = rng.uniform(0.0, 0.75, (3, d))
        phase = rng.uniform(0, 2 * np.pi, 3)
        mix = rng.standard_normal((T, 3))

        def f(i, X):
            return np.sin(2 * np.pi * X @ freq.T + phase) @ mix[i] + 0.3 * X[:, 0]
    else:
        from gptask.problem.functions import FAMILIES

        problem = FAMILIES[name][0]()
        ts, ps = problem.task_space, problem.param_space
        tasks = ts.decode(rng.random((T, len(ts))))
        d = len(ps)

        def f(i, X):
            return np.array([problem.objective(tasks[i], p) for p in ps.decode(ps.snap(X))])
    Xs, ys, Xt, yt = [], [], [], []
    for i in range(T):
        X, Xh, probe = rng.random((n, d)), rng.random((n_test, d)), rng.random((200, d))
        spread = float(np.std(f(i, probe))) or 1.0
        y = f(i, X) + NOISE_REL * spread * rng.standard_normal(n)
        mu, sd = float(y.mean()), float(y.std()) or 1.0
        Xs.append(X)
        ys.append((y - mu) / sd)
        Xt.append(Xh)
        yt.append((f(i, Xh) - mu) / sd)
    return Xs, ys, Xt, yt


def _parse_sets(text: str):
    out = []
    for item in text.split(","):
        name, size = item.split(":")
        T, n = (int(v) for v in size.lower().split("x"))
        out.append((name, T, n))
    return out


def _cache_path(args, name, T, n, seed) -> str:
    return os.path.join(args.cache, f"{name}_{T}x{n}_Q{args.Q}_{args.kernel}_s{seed}.npz")


def record(args) -> None:
    os.makedirs(args.cache, exist_ok=True)
    for name, T, n in _parse_sets(args.sets):
        for seed in (int(s) for s in args.seeds.split(",")):
            path = _cache_path(args, name, T, n, seed)
            if os.path.exists(path):
                print(f"{path}: already recorded", flush=True)
                continue
            Xs, ys, _, _ = _family_data(name, T, n, args.n_test, seed)
            paths: list[list[tuple[float, float, np.ndarray]]] = []
            real = lcm_mod._stall_callback

            def recording_callback():
                inner, trace, t0 = real(), [], [time.perf_counter()]
                paths.append(trace)

                def cb(intermediate_result):
                    now = time.perf_counter()
                    res = intermediate_result
                    trace.append((now - t0[0], -float(res.fun), np.array(res.x)))
                    t0[0] = now
                    inner(intermediate_result)

                return cb

            lcm_mod._stall_callback = recording_callback
            saved = (lcm_mod.DEFAULT_MAXITER, lcm_mod.STALL_WINDOW, lcm_mod.STALL_NATS)
            lcm_mod.STALL_WINDOW, lcm_mod.STALL_NATS = args.record_window, args.record_nats
            load = os.getloadavg()
            t0 = time.perf_counter()
            try:
                LCM(args.Q, args.kernel).fit(Xs, ys, restarts=args.restarts + EXPLORE_RESTARTS,
                                             seed=seed, explore=False, maxiter=args.record_maxiter,
                                             threads=args.threads)
            finally:
                lcm_mod._stall_callback = real
                _, lcm_mod.STALL_WINDOW, lcm_mod.STALL_NATS = saved
            wall = time.perf_counter() - t0
            arrays = {}
            for k, tr in enumerate(paths):
                arrays[f"t{k}"] = np.array([a for a, _, _ in tr])
                arrays[f"f{k}"] = np.array([b for _, b, _ in tr])
                arrays[f"x{k}"] = np.array([c for _, _, c in tr])
            np.savez(path, n_starts=len(paths), wall=wall, load=np.array(load), **arrays)
            its = [len(tr) for tr in paths]
            print(f"{path}: {len(paths)} starts, iterations {its}, {wall:.1f} s, load {load}",
                  flush=True)


def _stop(f: np.ndarray, maxiter: int, window: int, nats: float) -> int:
    """Index of the iteration where the rule stops a start whose objective path is f."""
    last = min(len(f), maxiter) - 1
    for i in range(window, last + 1):
        if f[i] - f[i - window] < nats:
            return i
    return last


def report(args) -> None:
    rules = [tuple(float(v) if j == 2 else int(v) for j, v in enumerate(r.split("/")))
             for r in args.rules.split(",")]
    rows = ["| rule maxiter/window/nats | sets x seeds | mean held-out RMSE | mean NLPD "
            "| mean fit time s (replayed) | mean iterations per start | explored |",
            "|---|---|---|---|---|---|---|"]
    per_rule = {r: [] for r in rules}
    detail = ["| data set | seed | rule | RMSE | NLPD | time s | log posterior |", "|---|---|---|---|---|---|---|"]
    for name, T, n in _parse_sets(args.sets):
        for seed in (int(s) for s in args.seeds.split(",")):
            path = _cache_path(args, name, T, n, seed)
            if not os.path.exists(path):
                print(f"{path}: not recorded, skipped", flush=True)
                continue
            Xs, ys, Xt, yt = _family_data(name, T, n, args.n_test, seed)
            z = np.load(path)
            K = int(z["n_starts"])
            paths = [(z[f"t{k}"], z[f"f{k}"], z[f"x{k}"]) for k in range(K)]
            lay = lcm_mod._Layout(args.Q, Xs[0].shape[1], T, 1, T)
            cache: dict = {}

            def model_at(k, i):
                if (k, i) not in cache:
                    ls, W, kappa, noise = lay.unpack(paths[k][2][i])
                    m = LCM(args.Q, args.kernel).condition(
                        Xs, ys, {"lengthscale": ls, "W": W, "kappa": kappa, "noise": noise})
                    cache[(k, i)] = m
                return cache[(k, i)]

            for rule in rules:
                stops = [_stop(p[1], *rule) for p in paths]
                first = list(range(args.restarts))
                best = max(first, key=lambda k: (paths[k][1][stops[k]], -k))
                used = first
                explored = bool(model_at(best, stops[best]).diagnose())
                if explored:
                    used = list(range(K))
                    best = max(used, key=lambda k: (paths[k][1][stops[k]], -k))
                m = model_at(best, stops[best])
                mu, var = zip(*(m.predict(i, x, include_noise=True) for i, x in enumerate(Xt)))
                mu, var, truth = np.concatenate(mu), np.concatenate(var), np.concatenate(yt)
                rmse = float(np.sqrt(np.mean((mu - truth) ** 2)))
                nlpd = float(np.mean(0.5 * np.log(2 * np.pi * var) + 0.5 * (truth - mu) ** 2 / var))
                secs = float(sum(np.sum(paths[k][0][: stops[k] + 1]) for k in used))
                its = float(np.mean([stops[k] + 1 for k in used]))
                per_rule[rule].append((rmse, nlpd, secs, its, explored))
                detail.append(f"| {name}:{T}x{n} | {seed} | {'/'.join(map(str, rule))} | {rmse:.4f} "
                              f"| {nlpd:.3f} | {secs:.1f} | {paths[best][1][stops[best]]:.2f} |")
    for rule, vals in per_rule.items():
        if not vals:
            continue
        a = np.array([v[:4] for v in vals])
        rows.append(f"| {'/'.join(map(str, rule))} | {len(vals)} | {a[:, 0].mean():.4f} | "
                    f"{a[:, 1].mean():.3f} | {a[:, 2].mean():.1f} | {a[:, 3].mean():.0f} | "
                    f"{sum(v[4] for v in vals)}/{len(vals)} |")
    text = "\n".join(rows + [""] + detail)
    print(text)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(text + "\n")


def fit(args) -> None:
    """Real default fits (every argument of LCM.fit at its default but restarts) under each rule,
    timed, with the held-out error of the fitted model: the figures to compare rules on."""
    rules = [tuple(float(v) if j == 2 else int(v) for j, v in enumerate(r.split("/")))
             for r in args.rules.split(",")]
    rows = ["| data set | seed | Q, kernel, restarts | rule maxiter/window/nats | fit s | evaluations "
            "| starts | held-out RMSE | NLPD | load (1 min) |", "|---|---|---|---|---|---|---|---|---|---|"]
    print("\n".join(rows), flush=True)
    saved = (lcm_mod.DEFAULT_MAXITER, lcm_mod.STALL_WINDOW, lcm_mod.STALL_NATS)
    core = lcm_mod._lml_core
    count = [0]

    def counting(*a):
        count[0] += 1
        return core(*a)

    lcm_mod._lml_core = counting
    try:
        for name, T, n in _parse_sets(args.sets):
            for seed in (int(s) for s in args.seeds.split(",")):
                Xs, ys, Xt, yt = _family_data(name, T, n, args.n_test, seed)
                for rule in rules:
                    lcm_mod.DEFAULT_MAXITER, lcm_mod.STALL_WINDOW, lcm_mod.STALL_NATS = rule
                    count[0] = 0
                    load = os.getloadavg()[0]
                    t0 = time.perf_counter()
                    m = LCM(args.Q, args.kernel).fit(Xs, ys, restarts=args.restarts, seed=seed)
                    secs = time.perf_counter() - t0
                    mu, var = zip(*(m.predict(i, x, include_noise=True) for i, x in enumerate(Xt)))
                    mu, var, truth = np.concatenate(mu), np.concatenate(var), np.concatenate(yt)
                    rmse = float(np.sqrt(np.mean((mu - truth) ** 2)))
                    nlpd = float(np.mean(0.5 * np.log(2 * np.pi * var) + 0.5 * (truth - mu) ** 2 / var))
                    row = (f"| {name}:{T}x{n} | {seed} | {args.Q}, {args.kernel}, {args.restarts} "
                           f"| {'/'.join(map(str, rule))} | {secs:.1f} | {count[0]} | {m.fit_report.n_starts} "
                           f"| {rmse:.4f} | {nlpd:.3f} | {load:.1f} |")
                    print(row, flush=True)
                    rows.append(row)
    finally:
        lcm_mod._lml_core = core
        lcm_mod.DEFAULT_MAXITER, lcm_mod.STALL_WINDOW, lcm_mod.STALL_NATS = saved
    if args.out:
        with open(args.out, "w") as fh:
            fh.write("\n".join(rows) + "\n")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("step", choices=("record", "report", "fit"))
    ap.add_argument("--sets", default="mix6:50x20,hartmann6:50x20,branin:50x20")
    ap.add_argument("--seeds", default="0,1")
    ap.add_argument("--Q", type=int, default=4)
    ap.add_argument("--kernel", default="rbf")
    ap.add_argument("--restarts", type=int, default=4, help="fit's restarts (its default: 4)")
    ap.add_argument("--threads", type=int, default=1, help="BLAS threads of record/report")
    ap.add_argument("--n-test", type=int, default=100)
    ap.add_argument("--record-maxiter", type=int, default=1000)
    ap.add_argument("--record-window", type=int, default=30)
    ap.add_argument("--record-nats", type=float, default=0.1)
    ap.add_argument("--rules", default="1000/30/0.1,300/30/0.1,200/30/0.1,150/30/0.1,100/30/0.1,"
                    "60/30/0.1,200/10/0.1,200/20/0.5,200/10/1.0,100/10/1.0,150/15/0.5")
    ap.add_argument("--cache", default="bench/.stopping_cache")
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    if args.step == "fit":  # LCM.fit's own default thread policy, as a user gets it
        fit(args)
        return
    with threadpool_limits(limits=args.threads, user_api="blas"):
        (record if args.step == "record" else report)(args)


if __name__ == "__main__":
    main()
