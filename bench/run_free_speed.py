"""Issue 46: the time and memory of a run-free pick from large sources, before and after, side by side.

    PYTHONPATH=. python bench/run_free_speed.py run [--sizes 5000,20000,50000,100000] [--held A100]
        [--before /work/wt/old46] [--seeds 0] [--out bench/results/run_free_speed.json]
    PYTHONPATH=. python bench/run_free_speed.py report [--out ...]

The five other GPUs' convolution campaigns (``data/hub_convolution``, as ``bench/run_free_sources.py``
builds them) as ``gt.Source`` rows, resampled to ``size`` measurements in all: each GPU's share drawn
with replacement from its campaign (seeded), so that a configuration may be measured several times
(the repeats are grouped into one run as ``gt.fit`` groups them): ``--resample draw``, the default.
``--resample complete`` keeps the structure of the campaigns: each GPU's whole campaign once (every
configuration measured on every GPU, as in the recorded data) and the rest of its share drawn with
replacement (repeats); a share smaller than a campaign is a draw without replacement (incomplete).
A pick on complete sources is decided by their measurements and fits no model (issue 46); on drawn
ones, some configurations lack a GPU's measurement and the model predicts them. Each (size, code) pair runs in its
own process (``one``): the code is this checkout ("after") or the checkout given by ``--before``
(e.g. a worktree of main, "before"), imported through ``GPTASK_BENCH_ROOT``. Measured in that
process: a numpy Cholesky of a 3000 x 3000 matrix (the reference; best of 3), then
``gt.predict_optimum(None, task, sources=..., machine=held, problem=...)``: its wall time, as a
ratio to the reference (and, "cached", the second of two calls with ``cache=``), and the peak resident memory of the process (``resource.getrusage``) less
what it held before the call; the configuration picked (the same before and after).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = Path(os.environ.get("GPTASK_BENCH_ROOT", HERE.parent)).resolve()
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

SIZES = (5000, 20000, 50000, 100000)
REFERENCE_N = 3000


def cholesky_seconds() -> float:
    """Best of 3 numpy Cholesky factorisations of a 3000 x 3000 matrix, in seconds."""
    import numpy as np

    a = np.random.default_rng(0).standard_normal((REFERENCE_N, REFERENCE_N))
    m = a @ a.T + REFERENCE_N * np.eye(REFERENCE_N)
    best = np.inf
    for _ in range(3):
        t = time.perf_counter()
        np.linalg.cholesky(m)
        best = min(best, time.perf_counter() - t)
    return float(best)


def one(size: int, held: str, seed: int, cached: bool = False, mode: str = "draw") -> dict[str, Any]:
    """One pick with ``size`` resampled source measurements, in this process (module docstring);
    cached: the second of two calls with ``cache=`` (a new folder), the first not timed; mode: how
    the campaigns are resampled ("draw" or "complete", module docstring)."""
    from dataclasses import replace

    import numpy as np

    import gptask as gt
    from gptask.sources.replay import read_recording, replay_problem
    from source_scale import TASK, source_rows
    from suite_families import CONVOLUTION_DIR, CONVOLUTION_RESTRICTIONS
    from suite_families import CONVOLUTION_GPUS as GPUS

    recordings = {g: read_recording(CONVOLUTION_DIR / f"{g}.json.gz") for g in GPUS}
    rec = replace(recordings[held], label=TASK["kernel"])
    prob = replay_problem([rec], CONVOLUTION_RESTRICTIONS, task_name="kernel", name="convolution")
    others = [g for g in GPUS if g != held]
    rng = np.random.default_rng(seed)
    sources = []
    for g in others:
        rows = source_rows(recordings[g], g)
        share = size // len(others)
        if mode == "draw":
            picks = rng.choice(len(rows), share, replace=True)
        elif share <= len(rows):
            picks = np.sort(rng.choice(len(rows), share, replace=False))
        else:
            picks = np.concatenate([np.arange(len(rows)), rng.choice(len(rows), share - len(rows), replace=True)])
        sources.append(gt.Source([rows[k] for k in picks], status="status"))
    options: dict[str, Any] = {}
    if cached:  # a first call fills the cache; the second is timed
        import tempfile

        options["cache"] = tempfile.mkdtemp(prefix="run_free_speed_")
        gt.predict_optimum(None, TASK, sources=sources, machine=held, problem=prob, **options)
    c0 = time.process_time()
    reference = cholesky_seconds()
    reference_cpu = (time.process_time() - c0) / 3.0
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0, c0 = time.perf_counter(), time.process_time()
    pred = gt.predict_optimum(None, TASK, sources=sources, machine=held, problem=prob, **options)
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"size": size, "mode": mode, "held": held, "seed": seed, "seconds": seconds, "cholesky_seconds": reference,
            "ratio": seconds / reference,
            "cpu_seconds": cpu, "cholesky_cpu_seconds": reference_cpu, "cpu_ratio": cpu / reference_cpu, "peak_mib": peak / 1024.0, "added_mib": (peak - before) / 1024.0,
            "params": pred.params, "route": pred.route,
            # a pick the measurements decided fits its model when the value is read: not read here
            "value": pred.value if getattr(pred, "model_fitted", True) else None, "gptask": gt.__file__}


def run(sizes: list[int], held: str, seeds: list[int], before: str | None, out: str, mode: str = "draw",
        codes_run: str = "after,cached,before") -> None:
    from row_files import load_rows, save_rows

    doc = load_rows(out)
    codes = [("after", str(HERE.parent)), ("cached", str(HERE.parent))] + ([("before", before)] if before else [])
    codes = [(code, root) for code, root in codes if code in codes_run.split(",")]
    for seed in seeds:
        for size in sizes:
            for code, root in codes:
                if any(r["size"] == size and r["seed"] == seed and r["code"] == code and r["held"] == held
                       and r.get("mode", "draw") == mode for r in doc["rows"]):
                    continue
                env = {**os.environ, "GPTASK_BENCH_ROOT": root, "PYTHONPATH": root}
                done = subprocess.run([sys.executable, __file__, "one", "--size", str(size), "--held", held,
                                       "--seed", str(seed), "--resample", mode]
                                      + (["--cached"] if code == "cached" else []), env=env,
                                      capture_output=True, text=True, check=True)
                row = {"code": code, **json.loads(done.stdout.strip().splitlines()[-1])}
                print(json.dumps(row), flush=True)
                doc["rows"].append(row)
                save_rows(out, doc)


def report(doc: dict[str, Any]) -> str:
    rows = doc["rows"]
    lines = ["| source measurements | before: s (x Cholesky) | after: s (x Cholesky) | after, second call with "
             "cache=: s (x Cholesky) | after: CPU s (x Cholesky's CPU) | speed-up (worst seed) | before: peak MiB "
             "(added) | after: peak MiB (added) | same pick |", "|---|---|---|---|---|---|---|---|---|"]
    for mode, size in sorted({(r.get("mode", "draw"), r["size"]) for r in rows}):
        def of(code: str) -> list[dict]:
            return [r for r in rows if r["size"] == size and r["code"] == code and r.get("mode", "draw") == mode]

        b, a, c = of("before"), of("after"), of("cached")

        def cell(rs: list[dict]) -> str:
            if not rs:
                return "-"
            worst = max(rs, key=lambda r: r["ratio"])
            return f"{worst['seconds']:.1f} ({worst['ratio']:.0f}x)"

        def cpu(rs: list[dict]) -> str:
            rs = [r for r in rs if "cpu_seconds" in r]
            if not rs:
                return "-"
            worst = max(rs, key=lambda r: r["cpu_ratio"])
            return f"{worst['cpu_seconds']:.1f} ({worst['cpu_ratio']:.1f}x)"

        def mem(rs: list[dict]) -> str:
            return "-" if not rs else f"{max(r['peak_mib'] for r in rs):.0f} ({max(r['added_mib'] for r in rs):.0f})"

        pairs = [(x, y) for x in b for y in a if x["seed"] == y["seed"]]
        speed = "-" if not pairs else f"{min(x['ratio'] / y['ratio'] for x, y in pairs):.1f}"
        same = "-" if not pairs else ("yes" if all(x["params"] == y["params"] for x, y in pairs + [(x, y) for x in b
                                                                                              for y in c]) else "NO")
        lines.append(f"| {size:,} ({mode}) | {cell(b)} | {cell(a)} | {cell(c)} | {cpu(a)} | {speed} | {mem(b)} | {mem(a)} | {same} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("command", choices=["run", "report", "one"])
    ap.add_argument("--sizes", default=",".join(map(str, SIZES)))
    ap.add_argument("--size", type=int, default=SIZES[0])
    ap.add_argument("--held", default="A100")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--seeds", default="0")
    ap.add_argument("--before", default=None)
    ap.add_argument("--cached", action="store_true")
    ap.add_argument("--resample", choices=["draw", "complete"], default="draw")
    ap.add_argument("--codes", default="after,cached,before", help="which of after, cached, before to run")
    ap.add_argument("--out", default=str(HERE / "results" / "run_free_speed.json"))
    args = ap.parse_args(argv)
    if args.command == "one":
        import logging

        logging.disable(logging.WARNING)
        print(json.dumps(one(args.size, args.held, args.seed, args.cached, args.resample)))
    elif args.command == "run":
        run([int(s) for s in args.sizes.split(",")], args.held, [int(s) for s in args.seeds.split(",")], args.before,
            args.out, args.resample, args.codes)
    else:
        from row_files import load_rows

        print(report(load_rows(args.out)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
