"""Asynchronous vs synchronous batch tuning on an executor, with heavy-tailed run times.

The objective is the ``branin`` multitask family of :mod:`gptask.problem.functions` (2 parameters, a 2-D
task space) whose every run *sleeps* first: a log-normal time of median ``--median`` seconds and
log-std ``--sigma`` (drawn from a generator seeded by the configuration and the run's seed, so a
configuration takes the same time in every mode). Sleeping uses no CPU, so 8 workers overlap on a
2-core machine; the tuner itself (model updates and searches) runs in the main process.

Modes, each with ``--tasks`` tasks x ``--budget`` runs, for every seed of ``--seeds``:

* ``serial``: ``gt.tune`` without an executor (one run at a time, in the tuner's process);
* ``async-K``: ``gt.tune(executor=ProcessPoolExecutor(K), max_in_flight=K)``, the asynchronous
  loop (block updates, a refit every max(tasks, K) results or on drift, fantasies);
* ``sync-K``: the synchronous batch loop on the same pool: ask one trial per open task, run them
  all on the K workers, wait for the last one, tell them, refit, again (GPTune's batch loop,
  written here with the public ask/tell API).

Reported per mode: wall time to finish the whole budget (pool start included) and the normalised
regret ``mean over tasks of (best found - f_opt) / (f_max - f_opt)`` (f_opt from
``branin_optimum``, f_max the largest value on a 201 x 201 grid). ``--update-bench`` also times the
model update between two proposals at 20 tasks x 20 points: one block append of a new result, the
fantasies of 8 pending trials, and a full (warm-started) refit for comparison.

Run from the repository root (the timed part under the machine lock)::

    flock /tmp/gptask-bench.lock env PYTHONPATH=. python bench/async_tuning.py --seeds 0,1,2 \\
        --workers 1,4,8 --out bench/results_async.jsonl
    flock /tmp/gptask-bench.lock env PYTHONPATH=. python bench/async_tuning.py --update-bench
    python bench/async_tuning.py --report bench/results_async.jsonl   # the tables of BENCHMARKS.md
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import hashlib
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import gptask as gt  # noqa: E402
from gptask.evaluation.evaluate import run_job  # noqa: E402
from gptask.problem.functions import branin_optimum, branin_problem  # noqa: E402
from gptask.tuning import Tuner, resolve_tasks  # noqa: E402
from gptask.model.surrogate.fantasy import with_fantasies  # noqa: E402
from machine import describe_machine  # noqa: E402


class SleepyBranin:
    """The branin family's value after a log-normal sleep (a module-level class: it pickles)."""

    def __init__(self, median: float, sigma: float, seed: int) -> None:
        self.median, self.sigma, self.seed = median, sigma, seed

    def duration(self, task: dict, params: dict) -> float:
        key = json.dumps([task, params, self.seed], sort_keys=True).encode()
        g = np.random.default_rng(int.from_bytes(hashlib.sha256(key).digest()[:8], "little"))
        return float(self.median * np.exp(self.sigma * g.standard_normal()))

    def __call__(self, task: dict, params: dict) -> float:
        time.sleep(self.duration(task, params))
        return branin_problem().objective(task, params)  # built here: its lambda does not pickle


def problem_for(median: float, sigma: float, seed: int) -> gt.Problem:
    base = branin_problem()
    return gt.Problem(base.task_space, base.param_space, SleepyBranin(median, sigma, seed), name=base.name)


def f_max(task: dict) -> float:
    x1, x2 = np.meshgrid(np.linspace(-5.0, 10.0, 201), np.linspace(0.0, 15.0, 201))
    f = branin_problem().objective
    return float(max(f(task, {"x1": float(a), "x2": float(b)}) for a, b in zip(x1.ravel(), x2.ravel())))


def regret(result: gt.TuningResult, refs: list[tuple[float, float]]) -> float:
    return float(np.mean([(result.best(i)[1] - fo) / (fm - fo) for i, (fo, fm) in enumerate(refs)]))


def sync_batch(problem: gt.Problem, pool: cf.Executor, args: argparse.Namespace, seed: int) -> gt.TuningResult:
    """The synchronous batch loop on ``pool``: one trial per open task, wait for all, tell, again."""
    ev = gt.Evaluator(problem.objective)
    with Tuner(problem, args.tasks, args.budget, args.n_initial, seed) as tuner:
        while not tuner.done:
            trials = tuner.ask(max(1, len(tuner.open_tasks())))
            jobs = [ev.job(t.task, t.params) for t in trials]
            for t, job, res in zip(trials, jobs, pool.map(run_job, jobs)):
                tuner.tell(t, ev.record(job, res))
        return tuner.result()


def run_mode(mode: str, args: argparse.Namespace, seed: int) -> dict:
    problem = problem_for(args.median, args.sigma, seed)
    kw = dict(tasks=args.tasks, budget=args.budget, n_initial=args.n_initial, seed=seed, progress=False)
    t0 = time.monotonic()
    if mode == "serial":
        res = gt.tune(problem, **kw)
    else:
        kind, k = mode.split("-")
        with cf.ProcessPoolExecutor(int(k)) as pool:
            if kind == "async":
                res = gt.tune(problem, executor=pool, max_in_flight=int(k), **kw)
            else:
                res = sync_batch(problem, pool, args, seed)
    wall = time.monotonic() - t0
    sleep = sum(problem.objective.duration(r.task, r.params) for r in res.history)
    return {"mode": mode, "seed": seed, "wall_s": wall, "sleep_s": sleep, "n": len(res.history), "result": res}


def update_bench(args: argparse.Namespace) -> dict:
    """Model update times at ``--update-tasks`` tasks x ``--update-points`` points."""
    problem = branin_problem()
    T, n = args.update_tasks, args.update_points
    tuner = Tuner(problem, T, n + 20, n, seed=0, refit_every=None)
    for t in tuner.ask(T * n):
        tuner.tell(t, problem.objective(t.task, t.params))
    t0 = time.perf_counter()
    tuner.fit_model()
    first_fit = time.perf_counter() - t0
    appends, fantasies = [], []
    for _ in range(args.update_reps):
        batch = tuner.ask(8)  # 8 trials in flight
        pending = [problem.param_space.encode([t.params for t in batch if t.task_index == i]) if
                   any(t.task_index == i for t in batch) else np.empty((0, problem.param_space.n_columns))
                   for i in range(T)]
        t0 = time.perf_counter()
        with_fantasies(tuner.model, pending)
        fantasies.append(time.perf_counter() - t0)
        tuner.tell(batch[0], problem.objective(batch[0].task, batch[0].params))
        t0 = time.perf_counter()
        tuner.fit_model()
        appends.append(time.perf_counter() - t0)
        assert tuner.updates[-1]["kind"] == "append"
        for t in batch[1:]:
            tuner.tell(t, problem.objective(t.task, t.params))
        tuner.fit_model()
    from gptask.model.surrogate.updates import RefitPolicy

    tuner.policy = RefitPolicy(1)
    t = tuner.ask(1)[0]
    tuner.tell(t, problem.objective(t.task, t.params))
    t0 = time.perf_counter()
    tuner.fit_model()
    refit = time.perf_counter() - t0
    return {"tasks": T, "points": n, "n_latent": tuner.n_latent, "kernel": tuner.kernel,
            "first_fit_s": first_fit, "append_s": appends, "fantasy_8_s": fantasies, "refit_s": refit,
            "n_points_at_refit": int(tuner.model.n_points.sum())}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tasks", type=int, default=8)
    p.add_argument("--budget", type=int, default=20)
    p.add_argument("--n-initial", type=int, default=10)
    p.add_argument("--median", type=float, default=1.0, help="median run time, seconds")
    p.add_argument("--sigma", type=float, default=1.0, help="log-std of the run time")
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--workers", default="1,4,8")
    p.add_argument("--modes", default="serial,async,sync", help="serial, async, sync (comma-separated)")
    p.add_argument("--out", default=None, help="append one JSON line per run here")
    p.add_argument("--update-bench", action="store_true", help="time the model updates instead")
    p.add_argument("--update-tasks", type=int, default=20)
    p.add_argument("--update-points", type=int, default=20)
    p.add_argument("--update-reps", type=int, default=10)
    p.add_argument("--report", default=None, help="print markdown tables of a --out file and stop")
    args = p.parse_args()
    if args.report:
        report([json.loads(line) for line in Path(args.report).read_text().splitlines() if line.strip()])
        return
    print(f"# {describe_machine()}; load average {os.getloadavg()}", flush=True)
    if args.update_bench:
        r = update_bench(args)
        print(json.dumps(r))
        print(f"{r['tasks']} tasks x {r['points']} points (Q={r['n_latent']}, {r['kernel']}): append of one result "
              f"median {statistics.median(r['append_s']) * 1e3:.1f} ms (max {max(r['append_s']) * 1e3:.1f}), "
              f"fantasies of 8 pending median {statistics.median(r['fantasy_8_s']) * 1e3:.1f} ms, full refit "
              f"{r['refit_s']:.2f} s, first fit {r['first_fit_s']:.2f} s; load {os.getloadavg()}")
        return
    seeds = [int(s) for s in args.seeds.split(",")]
    workers = [int(k) for k in args.workers.split(",")]
    modes = []
    for m in args.modes.split(","):
        modes += ["serial"] if m == "serial" else [f"{m}-{k}" for k in workers if not (m == "sync" and k == 1)]
    refs = {}
    for seed in seeds:
        tasks = resolve_tasks(branin_problem(), args.tasks, seed)
        refs[seed] = [(branin_optimum(t)[1], f_max(t)) for t in tasks]
    rows = []
    for seed in seeds:
        for mode in modes:
            load = os.getloadavg()
            r = run_mode(mode, args, seed)
            r["regret"] = regret(r.pop("result"), refs[seed])
            r["load"] = [load[0], os.getloadavg()[0]]
            rows.append(r)
            print(json.dumps(r), flush=True)
            if args.out:
                with open(args.out, "a") as fh:
                    fh.write(json.dumps({**r, "args": vars(args)}) + "\n")
    report(rows)


def report(rows: list[dict]) -> None:
    """Markdown: per mode the wall time and regret over seeds, and every run."""
    modes = list(dict.fromkeys(r["mode"] for r in rows))
    print("| mode | wall s, mean (per seed) | sleep s, mean | regret, mean +- sd (per seed) | sync / async wall |")
    print("|---|---|---|---|---|")
    for mode in modes:
        mine = [r for r in rows if r["mode"] == mode]
        wall, reg = [r["wall_s"] for r in mine], [r["regret"] for r in mine]
        peer = [r["wall_s"] for r in rows if r["mode"] == mode.replace("async", "sync")]
        ratio = f"{np.mean(peer) / np.mean(wall):.2f}x" if mode.startswith("async") and peer else ""
        print(f"| {mode} | {np.mean(wall):.0f} ({', '.join(f'{w:.0f}' for w in wall)}) | "
              f"{np.mean([r['sleep_s'] for r in mine]):.0f} | {np.mean(reg):.4f} +- {np.std(reg):.4f} "
              f"({', '.join(f'{g:.4f}' for g in reg)}) | {ratio} |")
    loads = [x for r in rows for x in r["load"]]
    print(f"\n{len(rows)} runs; 1-minute load average from {min(loads):.1f} to {max(loads):.1f} at their starts and ends")


if __name__ == "__main__":
    main()
