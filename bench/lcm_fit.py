"""Benchmark: gptask's LCM fit vs GPy's LCM on the same data, side by side, and extend vs refit.

Run from the repository root, e.g.::

    nice -n 10 python bench/lcm_fit.py --sizes 10x10,20x10,50x20 --Q 3,5,10 --restarts 1 \
        --gpy-max-n 400 --extend-tasks 30

For every tasks x samples size and every Q, both libraries fit the same standardised synthetic data
(6 inputs) with the same number of restarts and the same BLAS thread cap; the table reports wall
time, final log marginal likelihood and the time ratio GPy / gptask. GPy's kernel variances are
fixed to 1, as in gptask (B_q carries the scale), so both maximise the same likelihood. GPy is
skipped above --gpy-max-n data points (it takes ~400 s for 50x20, Q=10, one start).

The extend section fits a model on (tasks - 1) tasks, then adds the last task either with
``LCM.extend`` (old hyperparameters fixed, block Cholesky update) or by refitting all tasks (cold,
and warm-started from the extended model), and reports times and the new task's prediction RMSE.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
import warnings

import numpy as np
from threadpoolctl import threadpool_limits

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from gptask.model.numerics import LCM, lml_and_grad  # noqa: E402

D = 6
#: the comparison with GPy is of maximum-likelihood fits: no prior, no exploration round
ML = {"prior": None, "explore": False}


def truth(n_tasks: int, seed: int):
    """A family of tasks: each mixes 3 shared smooth functions of 6 inputs with its own weights."""
    rng = np.random.default_rng(seed)
    freq = rng.uniform(0.0, 1.5, (3, D))
    phase = rng.uniform(0, 2 * np.pi, 3)
    mix = rng.standard_normal((n_tasks, 3))

    def f(i: int, X: np.ndarray) -> np.ndarray:
        u = np.sin(2 * np.pi * X @ freq.T + phase)  # (n, 3)
        return u @ mix[i] + 0.3 * X[:, 0]

    return f


def make_data(n_tasks: int, n: int, seed: int, noise: float = 0.05):
    """Standardised per task, as the tuner feeds the model. Returns X_list, y_list, f, (mu, sd)."""
    f = truth(n_tasks, seed)
    rng = np.random.default_rng(seed + 1)
    Xs, ys, stats = [], [], []
    for i in range(n_tasks):
        X = rng.random((n, D))
        y = f(i, X) + noise * rng.standard_normal(n)
        mu, sd = y.mean(), y.std() if n > 1 and y.std() > 0 else 1.0
        Xs.append(X)
        ys.append((y - mu) / sd)
        stats.append((mu, sd))
    return Xs, ys, f, stats


def gpy_lcm(Xs, ys, Q: int):
    """GPy's LCM over the tasks' data (Xs[i]: (n_i, d), ys[i]: (n_i,)): ``GPy.util.multioutput.LCM``
    with Q ARD RBF kernels, W rank 1, kernel variances fixed to 1 (B_q carries the scale, as in
    gptask), in ``GPCoregionalizedRegression``; not yet optimised."""
    import GPy

    d, T = Xs[0].shape[1], len(Xs)
    kl = [GPy.kern.RBF(d, ARD=True) for _ in range(Q)]
    K = GPy.util.multioutput.LCM(d, T, kl, W_rank=1)
    for part in [K] if Q == 1 else K.parts:
        part.parts[0].variance[:] = 1.0
        part.parts[0].variance.fix()
    return GPy.models.GPCoregionalizedRegression(Xs, [y[:, None] for y in ys], kernel=K)


def fit_gpy(Xs, ys, Q: int, restarts: int, seed: int, maxiter: int = 1000):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        g = gpy_lcm(Xs, ys, Q)
        np.random.seed(seed)
        t0 = time.perf_counter()
        g.optimize_restarts(num_restarts=restarts, verbose=False, robust=True, max_iters=maxiter)
        dt = time.perf_counter() - t0
    return dt, float(g.log_likelihood())


def load() -> str:
    return os.getloadavg().__repr__()


def bench_fit(args) -> list[str]:
    rows = ["| tasks x samples | N | Q | restarts | gptask fit s | gptask LL | gptask warm refit s "
            "| GPy fit s | GPy LL | GPy / gptask time | LL gptask - GPy | load (1, 5, 15 min) |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for size in args.sizes.split(","):
        T, n = (int(v) for v in size.lower().split("x"))
        Xs, ys, f, stats = make_data(T, n, args.seed)
        for Q in (int(v) for v in args.Q.split(",")):
            ld = load()
            t0 = time.perf_counter()
            m = LCM(Q).fit(Xs, ys, restarts=args.restarts, seed=args.seed, threads=args.threads,
                           maxiter=args.maxiter, **ML)
            t_ours = time.perf_counter() - t0
            # an MLA iteration: one new point per task, refit warm-started from the last model
            rng = np.random.default_rng(args.seed + 7)
            Xs2, ys2 = [], []
            for i, (x, y) in enumerate(zip(Xs, ys)):
                xn = rng.random((1, D))
                yn = (f(i, xn) + 0.05 * rng.standard_normal(1) - stats[i][0]) / stats[i][1]
                Xs2.append(np.vstack([x, xn]))
                ys2.append(np.concatenate([y, yn]))
            t0 = time.perf_counter()
            LCM(Q).fit(Xs2, ys2, restarts=1, seed=args.seed, init=m, threads=args.threads,
                       maxiter=args.maxiter, **ML)
            t_warm = time.perf_counter() - t0
            N = T * n
            if N <= args.gpy_max_n:
                with threadpool_limits(limits=args.threads, user_api="blas"):
                    t_gpy, ll_gpy = fit_gpy(Xs, ys, Q, args.restarts, args.seed, args.maxiter)
                cells = [f"{t_gpy:.2f}", f"{ll_gpy:.2f}", f"{t_gpy / t_ours:.1f}",
                         f"{m.log_likelihood() - ll_gpy:+.2f}"]
            else:
                cells = ["skipped", "", "", ""]
            row = (f"| {T}x{n} | {N} | {Q} | {args.restarts} | {t_ours:.2f} | "
                   f"{m.log_likelihood():.2f} | {t_warm:.2f} | " + " | ".join(cells) + f" | {ld} |")
            print(row, flush=True)
            rows.append(row)
    return rows


def bench_eval(args) -> list[str]:
    """One log-likelihood + full gradient evaluation each, at the same random hyperparameters."""
    import GPy

    rows = ["| tasks x samples | N | Q | gptask LL+grad s | GPy LL+grad s | GPy / gptask | "
            "LL difference | load (1, 5, 15 min) |", "|---|---|---|---|---|---|---|---|"]
    for size in args.sizes.split(","):
        T, n = (int(v) for v in size.lower().split("x"))
        Xs, ys, _, _ = make_data(T, n, args.seed)
        for Q in (int(v) for v in args.Q.split(",")):
            rng = np.random.default_rng(args.seed)
            p = {"lengthscale": rng.uniform(0.5, 2.0, (Q, D)), "W": rng.standard_normal((Q, T, 1)),
                 "kappa": rng.uniform(0.05, 0.5, (Q, T)), "noise": rng.uniform(0.01, 0.1, T)}
            ld = load()
            with threadpool_limits(limits=args.threads, user_api="blas"):
                times = []
                for _ in range(3):
                    t0 = time.perf_counter()
                    ll, _ = lml_and_grad(Xs, ys, p)
                    times.append(time.perf_counter() - t0)
                t_ours = min(times)
                kl = [GPy.kern.RBF(D, ARD=True) for _ in range(Q)]
                K = GPy.util.multioutput.LCM(D, T, kl, W_rank=1)
                for q, part in enumerate([K] if Q == 1 else K.parts):
                    part.parts[0].variance[:] = 1.0
                    part.parts[0].variance.fix()
                    part.parts[0].lengthscale[:] = p["lengthscale"][q]
                    part.B.W[:] = p["W"][q]
                    part.B.kappa[:] = p["kappa"][q]
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    g = GPy.models.GPCoregionalizedRegression(Xs, [y[:, None] for y in ys],
                                                              kernel=K)
                    for i in range(T):
                        getattr(g.mixed_noise, f"Gaussian_noise_{i}").variance[:] = p["noise"][i]
                    x = g.optimizer_array.copy()
                    times = []
                    for _ in range(3):
                        t0 = time.perf_counter()
                        g._objective_grads(x)  # what GPy's optimiser calls: LL and all gradients
                        times.append(time.perf_counter() - t0)
                t_gpy = min(times)
            row = (f"| {T}x{n} | {T * n} | {Q} | {t_ours:.4f} | {t_gpy:.4f} | "
                   f"{t_gpy / t_ours:.1f} | "
                   f"{ll - g.log_likelihood():.1e} | {ld} |")
            print(row, flush=True)
            rows.append(row)
    return rows


def _heldout(f, stats, T: int, n_test: int, seed: int):
    """Noise-free standardised truth at n_test fresh points per task: (list of X, list of y)."""
    rng = np.random.default_rng(seed + 300)
    Xt = [rng.random((n_test, D)) for _ in range(T)]
    return Xt, [(f(i, x) - stats[i][0]) / stats[i][1] for i, x in enumerate(Xt)]


def bench_trajectory(args) -> list[str]:
    """Log-likelihood against time for one start of each library, and time to reach GPy's LL.

    gptask's optimiser path is deterministic, so the parameters after k L-BFGS-B evaluations are
    exactly what ``fit(..., maxiter~k)`` would return; the table reads them off one long fit
    (recorded by wrapping the likelihood function) instead of refitting for every cap.
    """
    import GPy

    import gptask.model.numerics.lcm as lcm_mod

    rows = ["| tasks x samples | N | Q | fit | evaluations | time s | LL | held-out RMSE "
            "| GPy time / this time | LL - GPy LL | load at start |",
            "|---|---|---|---|---|---|---|---|---|---|---|"]
    for size in args.sizes.split(","):
        T, n = (int(v) for v in size.lower().split("x"))
        Xs, ys, f, stats = make_data(T, n, args.seed)
        Xt, yt = _heldout(f, stats, T, 100, args.seed)
        for Q in (int(v) for v in args.Q.split(",")):
            ld = load()
            trace: list[tuple[float, float, dict]] = []
            core = lcm_mod._lml_core

            def recording(bk, data, ls, W, kappa, noise, kern, want_grad):
                out = core(bk, data, ls, W, kappa, noise, kern, want_grad)
                if want_grad:
                    trace.append((time.perf_counter() - t0, out[0],
                                  {"lengthscale": ls.copy(), "W": W.copy(),
                                   "kappa": kappa.copy(), "noise": noise.copy()}))
                return out

            lcm_mod._lml_core = recording
            try:
                t0 = time.perf_counter()
                LCM(Q).fit(Xs, ys, restarts=1, seed=args.seed, threads=args.threads,
                           maxiter=args.maxiter, **ML)
                t_ours = time.perf_counter() - t0
            finally:
                lcm_mod._lml_core = core
            gpy_trace: list[tuple[float, float]] = []
            with threadpool_limits(limits=args.threads, user_api="blas"), \
                    warnings.catch_warnings():
                warnings.simplefilter("ignore")
                kl = [GPy.kern.RBF(D, ARD=True) for _ in range(Q)]
                Kg = GPy.util.multioutput.LCM(D, T, kl, W_rank=1)
                for part in [Kg] if Q == 1 else Kg.parts:
                    part.parts[0].variance[:] = 1.0
                    part.parts[0].variance.fix()
                g = GPy.models.GPCoregionalizedRegression(Xs, [y[:, None] for y in ys], kernel=Kg)
                objective = g._objective_grads

                def gpy_recording(x):
                    out = objective(x)
                    gpy_trace.append((time.perf_counter() - t0, -float(out[0])))
                    return out

                g._objective_grads = gpy_recording
                np.random.seed(args.seed)
                t0 = time.perf_counter()
                g.optimize_restarts(num_restarts=1, verbose=False, robust=True,
                                    max_iters=args.maxiter)
                t_gpy = time.perf_counter() - t0
                ll_gpy = float(g.log_likelihood())
                idx = np.concatenate([np.full(len(x), i) for i, x in enumerate(Xt)])
                mu = g.predict(np.hstack([np.vstack(Xt), idx[:, None]]),
                               Y_metadata={"output_index": idx[:, None].astype(int)})[0].ravel()
                rmse_gpy = float(np.sqrt(np.mean((mu - np.concatenate(yt)) ** 2)))

            def ours_row(label: str, k: int, t_k: float | None = None) -> str:
                t_at, ll_k, params = trace[k]
                t_k = t_at if t_k is None else t_k
                m = LCM(Q).condition(Xs, ys, params)
                mu = np.concatenate([m.predict(i, x)[0] for i, x in enumerate(Xt)])
                rmse = float(np.sqrt(np.mean((mu - np.concatenate(yt)) ** 2)))
                return (f"| {T}x{n} | {T * n} | {Q} | {label} | {k + 1} | {t_k:.1f} | {ll_k:.1f} "
                        f"| {rmse:.3f} | {t_gpy / t_k:.1f} | {ll_k - ll_gpy:+.1f} | {ld} |")

            lls = np.array([ll for _, ll, _ in trace])
            reach = np.flatnonzero(lls >= ll_gpy)
            best = int(np.argmax(lls))
            out = []
            if reach.size:
                out.append(ours_row("gptask, first evaluation at GPy's final LL", int(reach[0])))
            for cap in (100, 200):
                if cap < best:
                    out.append(ours_row(f"gptask after {cap} evaluations", cap - 1))
            out.append(ours_row(f"gptask full fit (maxiter {args.maxiter})", best, t_ours))
            out.append(f"| {T}x{n} | {T * n} | {Q} | GPy full fit (max_iters {args.maxiter}) "
                       f"| {len(gpy_trace)} | {t_gpy:.1f} | {ll_gpy:.1f} | {rmse_gpy:.3f} | 1.0 "
                       f"| 0 | {ld} |")
            for r in out:
                print(r, flush=True)
            rows += out
    return rows


def bench_extend(args) -> list[str]:
    T, n, Q = args.extend_tasks, args.extend_n, args.extend_Q
    Xs, ys, f, stats = make_data(T, n, args.seed + 100)
    rng = np.random.default_rng(args.seed + 200)
    Xt = rng.random((300, D))
    mu, sd = stats[-1]
    ref = (f(T - 1, Xt) - mu) / sd
    ld = load()
    base = LCM(Q).fit(Xs[:-1], ys[:-1], restarts=args.restarts, seed=args.seed,
                      threads=args.threads, **ML)
    t0 = time.perf_counter()
    ext = base.extend(Xs[-1], ys[-1], restarts=4, seed=args.seed, threads=args.threads)
    t_ext = time.perf_counter() - t0
    t0 = time.perf_counter()
    cold = LCM(Q).fit(Xs, ys, restarts=args.restarts, seed=args.seed, threads=args.threads, **ML)
    t_cold = time.perf_counter() - t0
    t0 = time.perf_counter()
    warm = LCM(Q).fit(Xs, ys, restarts=1, seed=args.seed, init=ext, threads=args.threads, **ML)
    t_warm = time.perf_counter() - t0

    def rmse(m):
        return float(np.sqrt(np.mean((m.predict(T - 1, Xt)[0] - ref) ** 2)))

    rows = [f"Extend vs refit: {T - 1} fitted tasks + 1 new task, {n} samples each, Q={Q}, "
            f"load {ld}.", "",
            "| method | time s | refit time / this | new-task RMSE (standardised) "
            "| LL (all tasks) |",
            "|---|---|---|---|---|",
            f"| extend (4 restarts, {2 * Q + 1} new-task params) | {t_ext:.3f} "
            f"| {t_cold / t_ext:.0f} "
            f"| {rmse(ext):.3f} | {ext.log_likelihood():.2f} |",
            f"| full refit, cold ({args.restarts} restarts) | {t_cold:.2f} | 1 | {rmse(cold):.3f} "
            f"| {cold.log_likelihood():.2f} |",
            f"| full refit, warm from extend (1 start) | {t_warm:.2f} | {t_cold / t_warm:.1f} "
            f"| {rmse(warm):.3f} | {warm.log_likelihood():.2f} |"]
    for r in rows:
        print(r, flush=True)
    return rows


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="10x10,20x10,50x20", help="tasks x samples, comma separated")
    ap.add_argument("--Q", default="3,5,10", help="latent counts, comma separated")
    ap.add_argument("--restarts", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--maxiter", type=int, default=1000,
                    help="L-BFGS-B iteration cap, both libraries")
    ap.add_argument("--gpy-max-n", type=int, default=400, help="skip GPy above this many points")
    ap.add_argument("--threads", type=int, default=1, help="BLAS threads for both libraries")
    ap.add_argument("--extend-tasks", type=int, default=30, help="0 skips the extend benchmark")
    ap.add_argument("--extend-n", type=int, default=10)
    ap.add_argument("--extend-Q", type=int, default=3)
    ap.add_argument("--no-fit", action="store_true", help="skip the fit comparison")
    ap.add_argument("--eval", action="store_true",
                    help="also time one LL+gradient evaluation per library (cheap at any size)")
    ap.add_argument("--trajectory", action="store_true",
                    help="LL against time for one start of each library (replaces the fit table)")
    ap.add_argument("--out", help="also write the markdown to this file")
    args = ap.parse_args(argv)
    head = [f"Date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; "
            f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs; "
            f"command: python {' '.join(sys.argv)}", ""]
    print("\n".join(head), flush=True)
    if args.trajectory:
        rows = bench_trajectory(args) + [""]
    else:
        rows = [] if args.no_fit else bench_fit(args) + [""]
    if args.eval:
        rows += bench_eval(args) + [""]
    if args.extend_tasks > 0:
        rows += bench_extend(args)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write("\n".join(head + rows) + "\n")


if __name__ == "__main__":
    main()
