"""Benchmark: the LCM at large N on every backend here (numpy on the CPU, torch on CUDA when a GPU
is present): time of one log-likelihood + gradient evaluation, time of a full default fit, and
peak memory, against N = tasks x points.

Data: N / --per-task tasks of --per-task points each, 6 inputs, the 3-sinusoid family of
bench/lcm_fit.py (standardised per task), Q latent processes (rbf unless --kernel), rank 1.

Each (backend, N, measurement) runs in a fresh child process, so its peak resident memory
(``ru_maxrss``) and, on CUDA, ``torch.cuda.max_memory_allocated`` are its own; the table also gives
the child's RSS right before the measured work (interpreter, numpy/torch, data) to subtract.

* eval: ``lml_and_grad`` at fixed random hyperparameters; the minimum of --repeats runs after one
  warm-up (one run, no warm-up, from N = 10,000 on the CPU). BLAS threads: --threads (default: all
  the cores, as ``LCM.fit`` uses for large N). On CUDA the time includes the synchronisation.
* fit: ``LCM(Q, backend=, device=).fit(X_list, y_list)`` with every default (restarts, prior, the
  post-fit check's exploration round, iteration cap, stall rule, BLAS threads), up to --fit-max-n
  points on the CPU (all sizes on CUDA); the number of likelihood evaluations is counted.
* the first size also checks that torch's likelihood and gradient equal numpy's (max relative
  difference over all entries).

Run from the repository root, unchanged on a CPU machine and on a GPU node::

    python bench/lcm_scale.py --sizes 1000,2000,5000,10000,20000 --out bench/results_lcm_scale.md

On a GPU node (torch with CUDA in the environment: ``pip install -e '.[gpu]'`` with the torch build
for its CUDA) the same command adds the ``torch cuda`` rows and the numpy rows of that node's CPU,
the comparison the issue's targets are stated against. Without a GPU the script says so and prints
the command to run on one.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, HERE)


def _data(N: int, per_task: int, seed: int):
    from lcm_fit import make_data

    T = max(1, N // per_task)
    Xs, ys, _, _ = make_data(T, per_task, seed)
    return Xs, ys


def _params(Q: int, T: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    return {"lengthscale": rng.uniform(0.5, 2.0, (Q, 6)), "W": rng.standard_normal((Q, T, 1)),
            "kappa": rng.uniform(0.05, 0.5, (Q, T)), "noise": rng.uniform(0.01, 0.1, T)}


def _sync(device: str | None) -> None:
    if device and device.startswith("cuda"):
        import torch

        torch.cuda.synchronize()


def child(spec: dict) -> dict:
    """One measurement in this (fresh) process; returns a JSON-able dict."""
    from threadpoolctl import threadpool_limits

    import gptask.model.numerics.lcm as lcm_mod
    from gptask.model.numerics import LCM, lml_and_grad

    backend, device, N, Q = spec["backend"], spec["device"], spec["N"], spec["Q"]
    Xs, ys = _data(N, spec["per_task"], spec["seed"])
    if backend == "torch":
        import torch  # noqa: F401  (imported before the baseline RSS is read)

        if device.startswith("cuda"):
            torch.cuda.reset_peak_memory_stats()
    out = {"rss_before_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20}
    threads = spec["threads"] or os.cpu_count()
    with threadpool_limits(limits=threads, user_api="blas"):
        if spec["what"] == "eval":
            p = _params(Q, len(Xs), spec["seed"])
            reps = spec["repeats"] if (device.startswith("cuda") or N < 10000) else 1
            if reps > 1:
                lml_and_grad(Xs, ys, p, spec["kernel"], backend=backend, device=device)
                _sync(device)
            times = []
            for _ in range(reps):
                t0 = time.perf_counter()
                ll, g = lml_and_grad(Xs, ys, p, spec["kernel"], backend=backend, device=device)
                _sync(device)
                times.append(time.perf_counter() - t0)
            out.update(seconds=min(times), ll=ll, grads={k: v.tolist() for k, v in g.items()}
                       if spec.get("want_grads") else None, threads=threads)
        else:
            count = [0]
            core = lcm_mod._lml_core

            def counting(*args):
                count[0] += 1
                return core(*args)

            lcm_mod._lml_core = counting
            try:
                t0 = time.perf_counter()
                m = LCM(Q, spec["kernel"], backend=backend, device=device).fit(Xs, ys)
                _sync(device)
                out["seconds"] = time.perf_counter() - t0
            finally:
                lcm_mod._lml_core = core
            out.update(evaluations=count[0], starts=m.fit_report.n_starts,
                       log_posterior=m.log_posterior(), explored=m.fit_report.explored)
    out["rss_peak_gb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    if backend == "torch" and device.startswith("cuda"):
        import torch

        out["gpu_peak_gb"] = torch.cuda.max_memory_allocated() / 2**30
        out["gpu_name"] = torch.cuda.get_device_name()
    return out


def run_child(spec: dict, timeout: float) -> dict:
    cmd = [sys.executable, os.path.abspath(__file__), "--child", json.dumps(spec)]
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    if res.returncode != 0:
        tail = (res.stderr.strip().splitlines() or ["?"])[-1]
        return {"error": f"exit {res.returncode}: {tail[:200]}"}
    return json.loads(res.stdout.strip().splitlines()[-1])


def backends(choice: str) -> list[tuple[str, str]]:
    out = [("numpy", "cpu")]
    try:
        import torch
    except ImportError:
        torch = None
    if choice == "all" and torch is not None:
        out.append(("torch", "cpu"))
    if torch is not None and torch.cuda.is_available():
        out.append(("torch", "cuda"))
    return out


def machine() -> str:
    from machine import describe_machine

    line = describe_machine()
    try:
        import torch

        line += f"; torch {torch.__version__}"
        if torch.cuda.is_available():
            line += f", {torch.cuda.get_device_name()}"
    except ImportError:
        line += "; torch not installed"
    return line


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="1000,2000,5000,10000,20000", help="N values, comma separated")
    ap.add_argument("--per-task", type=int, default=20, help="points per task (N / this many tasks)")
    ap.add_argument("--Q", type=int, default=4)
    ap.add_argument("--kernel", default="rbf")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=0, help="BLAS threads for eval (0: all cores)")
    ap.add_argument("--backends", choices=("auto", "all"), default="auto",
                    help="auto: numpy, plus torch cuda when a GPU is present; all: also torch cpu")
    ap.add_argument("--fit-max-n", type=int, default=2000,
                    help="largest N for a full fit on the CPU (CUDA: every size)")
    ap.add_argument("--cpu-max-n", type=int, default=0,
                    help="largest N for the CPU (numpy) rows; 0: every size")
    ap.add_argument("--no-fit", action="store_true")
    ap.add_argument("--timeout", type=float, default=3600, help="seconds per measurement")
    ap.add_argument("--out", help="also write the markdown table to this file")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(child(json.loads(args.child))))
        return

    sizes = [int(v) for v in args.sizes.split(",")]
    which = backends(args.backends)
    head = [f"Date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {machine()}",
            f"command: python {' '.join(sys.argv)}", "",
            "| backend | device | N | tasks | Q | measurement | seconds | evaluations | s / evaluation "
            "| peak RSS GB (before work) | GPU peak GB | load (1 min) |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    print("\n".join(head), flush=True)
    rows = []
    base = {"Q": args.Q, "kernel": args.kernel, "seed": args.seed, "per_task": args.per_task,
            "repeats": args.repeats, "threads": args.threads}
    agree = []
    for N in sizes:
        for backend, device in which:
            if device == "cpu" and args.cpu_max_n and N > args.cpu_max_n:
                continue
            jobs = ["eval"]
            if not args.no_fit and (device == "cuda" or N <= args.fit_max_n):
                jobs.append("fit")
            for what in jobs:
                load = os.getloadavg()[0]
                spec = dict(base, N=N, backend=backend, device=device, what=what,
                            want_grads=(N == sizes[0] and what == "eval"))
                r = run_child(spec, args.timeout)
                T = max(1, N // args.per_task)
                if "error" in r:
                    row = (f"| {backend} | {device} | {N} | {T} | {args.Q} | {what} | {r['error']} "
                           f"| | | | | {load:.1f} |")
                else:
                    evals = r.get("evaluations", 1)
                    extra = ""
                    if what == "fit":
                        extra = f" ({r['starts']} starts{', explored' if r['explored'] else ''})"
                    row = (f"| {backend} | {device} | {N} | {T} | {args.Q} | {what}{extra} "
                           f"| {r['seconds']:.3f} | {evals} | {r['seconds'] / evals:.4f} "
                           f"| {r['rss_peak_gb']:.2f} ({r['rss_before_gb']:.2f}) "
                           f"| {r.get('gpu_peak_gb', float('nan')):.2f} | {load:.1f} |")
                    if r.get("grads") is not None:
                        agree.append((backend, device, r["ll"], r["grads"]))
                print(row, flush=True)
                rows.append(row)
    notes = [""]
    if len(agree) > 1:
        ll0, g0 = agree[0][2], agree[0][3]
        for backend, device, ll, g in agree[1:]:
            rel = max(abs(ll - ll0) / abs(ll0),
                      *(float(np.max(np.abs(np.subtract(g[k], g0[k])) / np.maximum(np.abs(g0[k]), 1e-300)))
                        for k in g0))
            notes.append(f"{backend} {device} vs numpy at N = {sizes[0]}: max relative difference of "
                         f"the likelihood and every gradient entry {rel:.1e}")
    if not any(d == "cuda" for _, d in which):
        notes.append("No CUDA device here (or torch without CUDA): the GPU rows are still to be measured. "
                     "On a GPU node, from the repository root, in an environment with gptask installed "
                     "(pip install -e '.[gpu]' with the torch build for that node's CUDA), run:")
        notes.append(f"    python bench/lcm_scale.py --sizes {args.sizes} --Q {args.Q} --fit-max-n 2000 "
                     "--out bench/results_lcm_scale_gpu.md")
    print("\n".join(notes), flush=True)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write("\n".join(head + rows + notes) + "\n")


if __name__ == "__main__":
    main()
