"""Tuner cost on 1 and 2 MPI ranks: LCM fit (restarts over ranks) and per-task searches (tasks over ranks).

    python bench/mpi_scaling.py --tasks 20 --samples 20 --restarts 4 --ranks 1,2

Launches itself under the pip wheel's ``mpiexec -n R`` for each R, with one BLAS thread per rank,
on the same synthetic data (the ``sphere`` family extended to 6 inputs), and prints seconds and
speed-ups. Run it on an otherwise idle machine: ratios on a loaded one mean little.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def worker(args: argparse.Namespace) -> None:
    sys.path.insert(0, str(ROOT))
    import numpy as np
    from mpi4py import MPI

    import gptask as gt
    from gptask.tuning.mla import Tuner

    comm = MPI.COMM_WORLD
    tasks = gt.Space([gt.Real("s", 0.0, 1.0)])
    params = gt.Space([gt.Real(f"x{j}", 0.0, 1.0) for j in range(6)])
    w = np.array([1.0, 4.0, 10.0, 2.0, 0.5, 3.0])

    def f(task, p):
        x = np.array([p[f"x{j}"] for j in range(6)])
        c = 0.3 + 0.4 * task["s"] * np.linspace(0.2, 1.0, 6)
        return float(1.0 + task["s"] + np.sum(w * (x - c) ** 2) + 0.1 * np.sin(10 * x[0]))

    problem = gt.Problem(tasks, params, f, name="scaling")
    tuner = Tuner(problem, tasks=args.tasks, budget=args.samples + 1, n_initial=args.samples, seed=0,
                  n_latent=args.latent, restarts=args.restarts, pso_particles=40, pso_iters=40, comm=comm)
    while True:
        props = tuner.ask()
        if props[0].source != "initial":
            break
        for p in props:
            tuner.tell(p, f(p.task, p.params))
    comm.Barrier()
    t0 = time.perf_counter()
    tuner.model = None  # cold fit with all restarts, as the first MLA iteration
    tuner.fit_model()
    comm.Barrier()
    t1 = time.perf_counter()
    tuner.propose(list(range(tuner.n_tasks)))
    comm.Barrier()
    t2 = time.perf_counter()
    if comm.Get_rank() == 0:
        print(json.dumps({"ranks": comm.Get_size(), "fit_s": t1 - t0, "search_s": t2 - t1,
                          "ll": tuner.model.log_likelihood()}))


def cost_model(sizes: list[int], latent: int) -> None:
    """Seconds per log-likelihood + gradient evaluation at N = tasks x samples (one BLAS thread)."""
    sys.path.insert(0, str(ROOT))
    import numpy as np
    from threadpoolctl import threadpool_limits

    from gptask.model.numerics.lcm import lml_and_grad

    print("| N = tasks x samples | seconds per LML+gradient | ratio to N^3 scaling from the first row |")
    print("|---|---|---|")
    first = None
    for n in sizes:
        T = max(2, n // 20)
        rng = np.random.default_rng(0)
        X = [rng.random((n // T, 6)) for _ in range(T)]
        y = [np.sin(3 * x.sum(1)) + 0.1 * rng.standard_normal(len(x)) for x in X]
        params = {"lengthscale": np.full((latent, 6), 0.5), "W": rng.standard_normal((latent, T, 1)),
                  "kappa": np.full((latent, T), 0.1), "noise": np.full(T, 0.01)}
        with threadpool_limits(1, user_api="blas"):
            lml_and_grad(X, y, params)
            reps = max(1, int(2e8 / n**2.5))
            t0 = time.perf_counter()
            for _ in range(reps):
                lml_and_grad(X, y, params)
            dt = (time.perf_counter() - t0) / reps
        first = first or (n, dt)
        print(f"| {n} | {dt:.4f} | {dt / (first[1] * (n / first[0]) ** 3):.2f} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", type=int, default=20)
    ap.add_argument("--samples", type=int, default=20)
    ap.add_argument("--restarts", type=int, default=4)
    ap.add_argument("--latent", type=int, default=3)
    ap.add_argument("--ranks", default="1,2")
    ap.add_argument("--cost-model", default="", help="comma list of N: time one LML+gradient at each")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.cost_model:
        cost_model([int(x) for x in args.cost_model.split(",")], args.latent)
        return
    if args.worker:
        worker(args)
        return
    mpiexec = str(Path(sys.executable).with_name("mpiexec"))
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    rows = []
    for r in [int(x) for x in args.ranks.split(",")]:
        cmd = [mpiexec, "-n", str(r), sys.executable, __file__, "--worker", "--tasks", str(args.tasks),
               "--samples", str(args.samples), "--restarts", str(args.restarts), "--latent", str(args.latent)]
        out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
    base = rows[0]
    print(f"# {platform.node()} {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}, {time.strftime('%Y-%m-%d %H:%M')}")
    print(f"# {args.tasks} tasks x {args.samples} samples, Q={args.latent}, {args.restarts} restarts, 6 inputs")
    print("| ranks | LCM fit (s) | fit speed-up | searches (s) | search speed-up | log-likelihood |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['ranks']} | {r['fit_s']:.2f} | {base['fit_s'] / r['fit_s']:.2f}x | {r['search_s']:.2f} | "
              f"{base['search_s'] / r['search_s']:.2f}x | {r['ll']:.4f} |")


if __name__ == "__main__":
    main()
