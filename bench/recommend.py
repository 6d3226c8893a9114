"""Noise-robust recommendations (issue 12): the re-measured value of ``result.recommend(i, confirm=K)``'s
pick against that of ``result.best(i)``'s pick (the luckiest single launch while tuning).

For every run: ``gt.tune`` the tasks, then per task three picks:

* ``raw``: ``best(i)``, the configuration of the lowest single evaluation;
* ``post``: ``recommend(i)``, the lowest posterior mean among the evaluated configurations (no runs);
* ``conf``: ``recommend(i, confirm=K)``, the top 3 by posterior mean and the raw best re-measured K
  times each (round robin), the lowest minimum of those runs (the default ``aggregate``);
* ``conf_median``: the same confirmation runs, the lowest median (``aggregate="median"``; no new run).

Then every pick of every task is RE-MEASURED ``--remeasure`` times through the same objective,
interleaved: round r measures each task's four picks once, in an order rotated by r, so a slow
phase of the machine hits every pick alike; identical picks are measured separately all the same.
The re-measurements are independent of the confirmation runs (no selection bias). Reported per
task: the medians of the re-measurements, and the ratios raw/conf, raw/conf_median and raw/post
(> 1: the recommendation is faster); for a synthetic family also the noise-free values of the picks.

Targets of the runs (from the repository root; timed runs under the shared lock)::

    flock /tmp/gptask-bench.lock .venv/bin/python bench/recommend.py synthetic --family mixed --rel-sd 0.3 \\
        --tasks 6 --budget 16 --seeds 0,1,2 --remeasure 9
    flock /tmp/gptask-bench.lock .venv/bin/python bench/recommend.py scalapack --tasks 4 --budget 12 --m-max 1500
    flock /tmp/gptask-bench.lock .venv/bin/python bench/recommend.py collectives --tasks 4 --budget 12
    flock /tmp/gptask-bench.lock .venv/bin/python bench/recommend.py io --tasks 3 --budget 10

Each writes its raw data as JSON (``--json``, default ``bench/data/recommend_<kind>.json``) and
prints a markdown table; ``report --json FILE ...`` prints the tables again.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import gptask as gt  # noqa: E402
from gptask.problem.functions import FAMILIES, with_noise  # noqa: E402
from machine import describe_machine  # noqa: E402

PICKS = ("raw", "post", "conf", "conf_median")
DATA = ROOT / "bench" / "data"


class Meter:
    """The objective, counting its calls (what the tuner and the recommendation see)."""

    def __init__(self, objective: Any) -> None:
        self.objective, self.calls = objective, 0

    def __call__(self, task: dict, params: dict) -> float:
        self.calls += 1
        return self.objective(task, params)


def metered(problem: gt.Problem) -> tuple[gt.Problem, Meter]:
    meter = Meter(problem.objective)
    return gt.Problem(problem.task_space, problem.param_space, meter, constraints=problem.constraints,
                      constants=problem.constants, name=problem.name), meter


def measure(problem: gt.Problem, task: dict, params: dict) -> float | None:
    """One run through the objective; None when it fails (as the tuner would record it)."""
    out = gt.Evaluator(problem.objective)(task, params)
    return out.value if out.status == "complete" else None


def run_once(problem: gt.Problem, tasks: Any, budget: int, seed: int, confirm: int, remeasure: int,
             truth: Any = None) -> dict[str, Any]:
    """Tune, pick three ways, re-measure every pick ``remeasure`` times interleaved (see module doc)."""
    prob, meter = metered(problem)
    t0 = time.perf_counter()
    res = gt.tune(prob, tasks=tasks, budget=budget, n_initial=budget // 2, seed=seed, progress=False)
    tune_s, tune_calls = time.perf_counter() - t0, meter.calls
    rows, t0 = [], time.perf_counter()
    for i, task in enumerate(res.tasks):
        post = res.recommend(i)
        conf = res.recommend(i, confirm=confirm)
        conf_median = res.recommend(i, confirm=confirm, aggregate="median")  # the same runs, no new one
        rows.append({"task": task, "raw": res.best(i)[0], "raw_value": res.best(i)[1],
                     "post": post.params, "post_predicted": post.predicted,
                     "conf": conf.params, "conf_value": conf.confirmed, "conf_basis": conf.basis,
                     "conf_median": conf_median.params, "conf_median_value": conf_median.confirmed,
                     "candidates": [{"params": c.params, "predicted": c.predicted, "confirmations": c.confirmations,
                                     "failures": c.failures} for c in conf.candidates],
                     "remeasured": {k: [] for k in PICKS}})
    confirm_s, confirm_calls = time.perf_counter() - t0, meter.calls - tune_calls
    t0 = time.perf_counter()
    for r in range(remeasure):
        for row in rows:
            order = PICKS[r % len(PICKS):] + PICKS[: r % len(PICKS)]
            for k in order:
                row["remeasured"][k].append(measure(problem, row["task"], row[k]))
    remeasure_s = time.perf_counter() - t0
    for row in rows:
        for k in PICKS:
            ok = [v for v in row["remeasured"][k] if v is not None]
            row[f"{k}_remeasured"] = float(np.median(ok)) if ok else None
            if truth is not None:
                row[f"{k}_true"] = float(truth(row["task"], row[k]))
    return {"seed": seed, "budget": budget, "confirm": confirm, "remeasure": remeasure, "tune_s": tune_s,
            "tune_calls": tune_calls, "confirm_s": confirm_s, "confirm_calls": confirm_calls,
            "remeasure_s": remeasure_s, "rows": rows, "loadavg": os.getloadavg()}


def summary(runs: list[dict], label: str) -> str:
    """Markdown: per task the re-measured medians and ratios, then the geometric mean ratios."""
    has_truth = any("raw_true" in row for run in runs for row in run["rows"])
    head = ("| seed | task | raw pick: tuning value | re-measured median raw / post / conf / conf_median "
            "| raw / conf | raw / conf_median | raw / post |")
    if has_truth:
        head += " noise-free raw / post / conf / conf_median |"
    lines = [f"**{label}**", "", head, "|" + "---|" * (head.count("|") - 1)]
    ratios: dict[str, list[float]] = {k: [] for k in PICKS[1:]}
    same = {k: 0 for k in PICKS[1:]}
    for run in runs:
        for row in run["rows"]:
            m = {k: row[f"{k}_remeasured"] for k in PICKS}
            task = ", ".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}" for k, v in row["task"].items())
            r = {k: (m["raw"] / m[k] if m["raw"] is not None and m[k] is not None else None) for k in PICKS[1:]}
            for k in PICKS[1:]:
                same[k] += row[k] == row["raw"]
                if r[k] is not None:
                    ratios[k].append(r[k])
            cell = " / ".join("-" if m[k] is None else f"{m[k]:.4g}" for k in PICKS)
            fmt = {k: "-" if r[k] is None else f"{r[k]:.3f}" for k in PICKS[1:]}
            line = (f"| {run['seed']} | {task} | {row['raw_value']:.4g} | {cell} | {fmt['conf']} | "
                    f"{fmt['conf_median']} | {fmt['post']} |")
            if has_truth:
                line += " " + " / ".join(f"{row[f'{k}_true']:.4g}" for k in PICKS) + " |"
            lines.append(line)

    def gm(v: list[float]) -> float:
        return float(np.exp(np.mean(np.log(v)))) if v else float("nan")

    n = sum(len(run["rows"]) for run in runs)
    lines += ["", "geometric mean of the re-measured raw / pick (> 1: the pick is faster), over "
              f"{n} tasks: " + ", ".join(f"{k} **{gm(ratios[k]):.3f}** (same pick as raw on {same[k]}, faster on "
                                       f"{sum(x > 1 for x in ratios[k])}, slower on {sum(x < 1 for x in ratios[k])})"
                                       for k in ("conf", "conf_median", "post"))]
    if has_truth:
        t = {k: np.mean([row[f"{k}_true"] for run in runs for row in run["rows"]]) for k in PICKS}
        lines.append("mean noise-free value: " + ", ".join(f"{k} {t[k]:.5g}" for k in PICKS))
    cost = [(run["tune_calls"], run["confirm_calls"], run["tune_s"], run["confirm_s"], run["remeasure_s"])
            for run in runs]
    lines.append("runs: tuning " + ", ".join(f"{c[0]}" for c in cost) + "; confirmation "
                 + ", ".join(f"{c[1]}" for c in cost) + "; seconds tune / confirm / re-measure: "
                 + ", ".join(f"{c[2]:.0f} / {c[3]:.0f} / {c[4]:.0f}" for c in cost)
                 + "; load average at the end " + ", ".join(f"{run['loadavg'][0]:.1f}" for run in runs))
    return "\n".join(lines)


def _synthetic(a: argparse.Namespace) -> tuple[list[dict], str]:
    make, _ = FAMILIES[a.family]
    clean = make()
    runs = []
    for s in map(int, a.seeds.split(",")):
        noisy = with_noise(clean, a.rel_sd, seed=1000 + s)
        runs.append(run_once(noisy, a.tasks, a.budget, s, a.confirm, a.remeasure, truth=clean.objective))
        print(f"seed {s} done", file=sys.stderr, flush=True)
    return runs, f"{a.family} + heavy-tailed noise (rel. sd {a.rel_sd}), {a.tasks} tasks x {a.budget} runs"


def _scalapack(a: argparse.Namespace) -> tuple[list[dict], str]:
    from apps.scalapack_qr.problem import problem

    pb = problem(m_max=a.m_max, repeats=2, timeout=20)
    runs = [run_once(pb, a.tasks, a.budget, int(s), a.confirm, a.remeasure) for s in a.seeds.split(",")]
    return runs, f"ScaLAPACK PDGEQRF (real runs, m, n <= {a.m_max}), {a.tasks} LHS tasks x {a.budget} runs"


def _collectives(a: argparse.Namespace) -> tuple[list[dict], str]:
    from apps.mpi_collectives import problem

    pb = problem(colls=["allreduce"], max_procs=4)
    runs = [run_once(pb, a.tasks, a.budget, int(s), a.confirm, a.remeasure) for s in a.seeds.split(",")]
    return runs, f"MPI allreduce (MPICH algorithms, real runs), {a.tasks} LHS tasks x {a.budget} runs"


def _io(a: argparse.Namespace) -> tuple[list[dict], str]:
    from apps.io_accelerators.problem import named_task, problem

    pb = problem("sro", "real", seed=0)
    names = ["SRO.1", "SRO.2", "SRO.3"][: a.tasks]
    tasks = [named_task(n) for n in names]
    runs = [run_once(pb, tasks, a.budget, int(s), a.confirm, a.remeasure) for s in a.seeds.split(",")]
    return runs, f"I/O small-read prefetcher (real runs, cold page cache), tasks {', '.join(names)} x {a.budget} runs"


def main(argv: list[str] | None = None) -> int:
    from threadpoolctl import threadpool_limits

    threadpool_limits(1)
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("kind", choices=("synthetic", "scalapack", "collectives", "io", "report"))
    ap.add_argument("--family", default="mixed", choices=sorted(FAMILIES))
    ap.add_argument("--rel-sd", type=float, default=0.3)
    ap.add_argument("--tasks", type=int, default=4)
    ap.add_argument("--budget", type=int, default=12)
    ap.add_argument("--seeds", default="0")
    ap.add_argument("--confirm", type=int, default=3)
    ap.add_argument("--remeasure", type=int, default=5)
    ap.add_argument("--m-max", type=int, default=1500)
    ap.add_argument("--json", nargs="*", default=None)
    a = ap.parse_args(argv)
    if a.kind == "report":
        for path in a.json or []:
            data = json.loads(Path(path).read_text())
            print(summary(data["runs"], data["label"]) + "\n")
        return 0
    t0 = time.time()
    runs, label = {"synthetic": _synthetic, "scalapack": _scalapack, "collectives": _collectives, "io": _io}[a.kind](a)
    out = Path(a.json[0]) if a.json else DATA / f"recommend_{a.kind}{'_' + a.family if a.kind == 'synthetic' else ''}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    payload = {"label": label, "argv": sys.argv[1:], "machine": describe_machine(),
               "started_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(t0)), "wall_s": time.time() - t0,
               "runs": runs}
    out.write_text(json.dumps(payload, indent=1, default=str))
    print(summary(runs, label))
    print(f"\n(raw data: {out}; {payload['wall_s']:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
