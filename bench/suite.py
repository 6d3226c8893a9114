"""The benchmark suite on which every change to gptask's model or search is judged (issue 23).

Families (bench/suite_families.py): recorded campaigns (the 6-GPU convolution kernel of the FAIR
benchmark hub, the 16-core PDGEQRF timings as a partial landscape), COCO's bbob functions with
instances as tasks (8 functions x dimensions 2, 5, 10), and the project's own analytic families.
Methods: gptask's MLA over all tasks jointly (``mla``) and on each task alone (``mla_alone``), and
the peers of bench/suite_peers.py (random, Optuna's GPSampler, scikit-optimize, Kernel Tuner's
strategies where a family has cache files), each with the same budget of runs per task.

Score: per task the normalised regret of the best value found, ``(best - f_opt) / (f_ref - f_opt)``
(0 at the optimum, 1 at the median of the allowed space; a task where every run failed scores 1;
on a noisy generated family ``best`` is the noise-free value of the configuration measured best),
averaged over the tasks of a run; and, for the positive (time) objectives, the fraction of the
optimum's performance ``f_opt / best``. Over seeds: the mean and the worst seed.

    python bench/suite.py run --families quick --methods mla,mla_alone,random,optuna_gp,skopt \\
        --seeds 0-4 --jobs 2 --out bench/results_suite.jsonl
    python bench/suite.py report bench/results_suite.jsonl --out bench/results_suite.md
    python bench/suite.py compare F... --base mla@OLD --new mla@NEW   # paired by seed, with standard errors

Runs are appended to the JSON-lines file one by one and skipped when already there (resume). Use
``--tag NAME`` to keep the runs of a code version or setting apart (the method shows as
``mla@NAME``) and compare them in one report. Peers need bench/peers_setup.sh's .bench-venv.
"""

from __future__ import annotations

import argparse
import gzip
import json
import logging
import multiprocessing as mp
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

log = logging.getLogger("suite")

MLA_METHODS = ("mla", "mla_alone")


def _parse_list(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


def _parse_seeds(text: str) -> list[int]:
    out: list[int] = []
    for part in _parse_list(text):
        if "-" in part:
            a, b = part.split("-")
            out += list(range(int(a), int(b) + 1))
        else:
            out.append(int(part))
    return out


def _families(text: str) -> list[str]:
    from suite_families import GROUPS, known

    out: list[str] = []
    for name in _parse_list(text):
        for f in GROUPS.get(name, [name]):
            if not known(f):
                raise SystemExit(f"unknown family {f!r}; groups: {sorted(GROUPS)}")
            if f not in out:
                out.append(f)
    return out


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              cwd=Path(__file__).resolve().parents[1], check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


# ---- one run --------------------------------------------------------------------------------------------
def run_mla(fam: Any, budget: int, seed: int, alone: bool, options: dict[str, Any]) -> dict[str, Any]:
    import gptask as gt

    t0, c0 = time.perf_counter(), time.process_time()
    groups = [[t] for t in fam.tasks] if alone else [fam.tasks]
    values: list[list[float | None]] = []
    params: list[list[dict]] = []
    for tasks in groups:
        opts = dict(options)
        if "proposer_options" in opts:  # a new proposer for every run (one proposer serves one tuner)
            from gptask.tuning.proposer import make_proposer

            opts["proposer"] = make_proposer(opts["proposer"], opts.pop("proposer_options"))
        res = gt.tune(fam.problem, tasks=tasks, budget=budget, seed=seed, progress=False, **opts)
        for i in range(len(tasks)):
            trials = sorted((t for t in res.history if t.task_index == i), key=lambda t: t.id)
            values.append([t.value if t.status is gt.Status.COMPLETE else None for t in trials])
            params.append([dict(t.params) for t in trials])
    out = {"values": values, "tuner_seconds": time.perf_counter() - t0, "tuner_cpu_seconds": time.process_time() - c0}
    if fam.latent is not None:  # a noisy family is scored by the latent value of the best measured run
        out["params"] = params
    return out


PROPOSERS_DIR = Path(__file__).resolve().parent / "proposers"


def load_proposer(name: str) -> None:
    """Import ``bench/proposers/NAME.py``, which registers the proposer ``NAME`` with gptask."""
    import importlib.util

    path = PROPOSERS_DIR / f"{name}.py"
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in PROPOSERS_DIR.glob("*.py")))
        raise SystemExit(f"--proposer {name}: no file {path} (known: {known})")
    spec = importlib.util.spec_from_file_location(f"bench_proposer_{name}", path)
    assert spec is not None and spec.loader is not None
    spec.loader.exec_module(importlib.util.module_from_spec(spec))


def run_job(job: dict[str, Any]) -> dict[str, Any]:
    """Run one (family, budget, method, seed) job in this process; returns its record."""
    from threadpoolctl import threadpool_limits

    from suite_families import family

    logging.getLogger("gptask").setLevel(logging.ERROR)
    fam = family(job["family"])
    method = job["method"].split("@")[0]
    t0 = time.perf_counter()
    with threadpool_limits(limits=1):
        if method in MLA_METHODS:
            options = dict(job.get("options", {}))
            if "proposer" in options:  # a search variant of bench/proposers/ (spawned workers register it anew)
                load_proposer(options["proposer"])
            out = run_mla(fam, job["budget"], job["seed"], method == "mla_alone", options)
        else:
            from suite_peers import PEERS

            out = PEERS[method](fam, job["budget"], job["seed"])
            if fam.latent is None:
                out.pop("params", None)
    if "params" in out:  # numpy scalars as plain JSON values
        out["params"] = [[{k: v.item() if isinstance(v, np.generic) else v for k, v in p.items()} for p in run]
                         for run in out["params"]]
    return {**job, **out, "wall": time.perf_counter() - t0}


def _init_worker() -> None:
    os.environ.setdefault("OMP_NUM_THREADS", "1")


def _key(rec: dict[str, Any]) -> tuple:
    return (rec["family"], rec["budget"], rec["method"], rec["seed"])


def cmd_run(args: argparse.Namespace) -> int:
    out = Path(args.out)
    done = set()
    if out.exists():
        for line in out.read_text().splitlines():
            if line.strip():
                done.add(_key(json.loads(line)))
    from suite_families import family

    options = json.loads(args.options) if args.options else {}
    if args.proposer:
        load_proposer(args.proposer)  # a missing file is refused before any job
        options["proposer"] = args.proposer
        if args.proposer_options:
            options["proposer_options"] = json.loads(args.proposer_options)
    jobs = []
    for fname in _families(args.families):
        fam = family(fname)
        budgets = [int(b) for b in _parse_list(args.budgets)] if args.budgets else list(fam.budgets)
        for budget in budgets:
            for method in _parse_list(args.methods):
                if method.startswith("kt_") and fam.kernel_tuner is None:
                    continue
                label = f"{method}@{args.tag}" if args.tag and method in MLA_METHODS else method
                for seed in _parse_seeds(args.seeds):
                    job = {"family": fname, "budget": budget, "method": label, "seed": seed}
                    if _key(job) in done:
                        continue
                    if method in MLA_METHODS and options:
                        job["options"] = options
                    jobs.append(job)
    log.warning("%d jobs to run (%d already in %s)", len(jobs), len(done), out)
    commit = _commit()
    os.environ["OMP_NUM_THREADS"] = "1"
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    ctx = mp.get_context("spawn")
    with ctx.Pool(args.jobs, initializer=_init_worker, maxtasksperchild=1) as pool, open(out, "a") as fh:
        for k, rec in enumerate(pool.imap_unordered(run_job, jobs)):
            rec.update({"commit": commit, "host": platform.node(), "date": time.strftime("%Y-%m-%d %H:%M")})
            fh.write(json.dumps(rec) + "\n")
            fh.flush()
            log.warning("[%d/%d] %s budget %d %s seed %d: %.1f s", k + 1, len(jobs), rec["family"], rec["budget"],
                        rec["method"], rec["seed"], rec["wall"])
    return 0


# ---- scores ---------------------------------------------------------------------------------------------
def scores(rec: dict[str, Any], fam: Any) -> dict[str, float]:
    """Mean normalised regret over the tasks of one run (and the mean fraction of the optimum
    for positive objectives), at the run's budget."""
    regrets, fractions = [], []
    for i, vals in enumerate(rec["values"]):
        ok = [v for v in vals[: rec["budget"]] if v is not None]
        f_opt, f_ref = fam.f_opt[i], fam.f_ref[i]
        best = min(ok) if ok else None
        if best is not None and fam.latent is not None and "params" in rec:
            # what a user keeps is the configuration measured best; its worth is its noise-free value
            k = min((k for k, v in enumerate(vals[: rec["budget"]]) if v is not None), key=lambda k: vals[k])
            best = fam.latent(fam.tasks[i], rec["params"][i][k])
        regrets.append(1.0 if best is None else max(0.0, (best - f_opt) / (f_ref - f_opt)))
        if fam.positive:
            fractions.append(0.0 if best is None else f_opt / best)
    out = {"regret": float(np.mean(regrets))}
    if fractions:
        out["fraction"] = float(np.mean(fractions))
        out["fraction_per_task"] = fractions  # type: ignore[assignment]
    return out


def summarise(records: list[dict[str, Any]]) -> dict[tuple, dict[str, Any]]:
    """(family, budget, method) -> mean and worst seed of the regret (and fraction), seeds, s/run."""
    from suite_families import family

    cells: dict[tuple, list] = {}
    for rec in records:
        cells.setdefault((rec["family"], rec["budget"], rec["method"]), []).append(rec)
    out = {}
    for key, recs in cells.items():
        fam = family(key[0])
        sc = [scores(r, fam) for r in recs]
        reg = np.array([s["regret"] for s in sc])
        cell = {"regret": float(reg.mean()), "regret_worst": float(reg.max()), "seeds": len(recs),
                "seconds": float(np.mean([r["tuner_seconds"] for r in recs]))}
        if fam.positive:
            fr = np.array([s["fraction"] for s in sc])
            cell.update({"fraction": float(fr.mean()), "fraction_worst": float(fr.min())})
            cell["fraction_per_task"] = np.mean([s["fraction_per_task"] for s in sc], axis=0).tolist()
        out[key] = cell
    return out


def _method_order(methods: set[str]) -> list[str]:
    first = [m for m in sorted(methods) if m.split("@")[0] in MLA_METHODS]
    return first + sorted(m for m in methods if m not in first)


def read_rows(paths: list[str]) -> list[dict[str, Any]]:
    """The result rows of run files (JSON lines, plain or gzip-compressed as stored in suite_runs/)."""
    records = []
    for path in paths:
        raw = Path(path).read_bytes()
        text = (gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw).decode()
        records += [json.loads(line) for line in text.splitlines() if line.strip()]
    return records


def cmd_report(args: argparse.Namespace) -> int:
    from suite_families import family

    records = read_rows(args.inputs)
    if args.only:
        keep = set(_parse_list(args.only))
        records = [r for r in records if r["method"] in keep]
    summary = summarise(records)
    methods = _method_order({k[2] for k in summary})
    lines = ["# Benchmark suite", "",
             f"Mean normalised regret over tasks and seeds (worst seed in brackets; 0 = optimum, 1 = the median "
             f"of the allowed space); for time objectives the fraction of the optimum f_opt / best (worst "
             f"seed). Commits: {sorted({r.get('commit', '?') for r in records})}; "
             f"{len(records)} runs.", ""]
    lines.append("| family | runs/task | " + " | ".join(methods) + " |")
    lines.append("|---|---|" + "---|" * len(methods))
    fams = sorted({(k[0], k[1]) for k in summary}, key=lambda fb: (family(fb[0]).group, fb[0], fb[1]))
    for fname, budget in fams:
        row = [fname, str(budget)]
        cells = [summary.get((fname, budget, m)) for m in methods]
        best = min((c["regret"] for m, c in zip(methods, cells) if c), default=None)
        for c in cells:
            if c is None:
                row.append("-")
                continue
            text = f"{c['regret']:.3f} ({c['regret_worst']:.3f})"
            if "fraction" in c:
                text += f"<br>{c['fraction']:.3f} ({c['fraction_worst']:.3f})"
            if c["regret"] == best:
                text = f"**{text}**"
            row.append(text + ("" if c["seeds"] >= 5 else f" [{c['seeds']}]"))
        lines.append("| " + " | ".join(row) + " |")
    lines += ["", *_checks(summary, methods, args.mla)]
    text = "\n".join(lines) + "\n"
    if args.out:
        Path(args.out).write_text(text)
    print(text)
    return 0


def paired(records: list[dict[str, Any]], base: str, new: str) -> list[dict[str, Any]]:
    """Per (family, budget) where both methods ran common seeds: the paired per-seed difference of
    ``new`` against ``base`` in the family's score (the fraction of the optimum for time objectives,
    else minus the regret: positive means ``new`` is better), its mean, the standard error of the
    mean, and the seeds won and lost."""
    from suite_families import family

    by: dict[tuple, dict[str, dict[int, float]]] = {}
    for rec in records:
        if rec["method"] in (base, new):
            fam = family(rec["family"])
            sc = scores(rec, fam)
            value = sc["fraction"] if fam.positive else -sc["regret"]
            by.setdefault((rec["family"], rec["budget"]), {}).setdefault(rec["method"], {})[rec["seed"]] = value
    out = []
    for (fname, budget), cell in sorted(by.items()):
        seeds = sorted(set(cell.get(base, {})) & set(cell.get(new, {})))
        if not seeds:
            continue
        d = np.array([cell[new][k] - cell[base][k] for k in seeds])
        se = float(d.std(ddof=1) / np.sqrt(len(d))) if len(d) > 1 else float("nan")
        out.append({"family": fname, "budget": budget, "seeds": len(seeds), "mean": float(d.mean()), "se": se,
                    "wins": int((d > 0).sum()), "losses": int((d < 0).sum())})
    return out


def cmd_compare(args: argparse.Namespace) -> int:
    records = read_rows(args.inputs)
    lines = [f"{args.new} against {args.base}, paired by seed (fraction of the optimum for time objectives, "
             "else minus the regret; positive: better)", "",
             "| family | runs/task | seeds | mean difference | standard error | seeds won / lost |", "|---|---|---|---|---|---|"]
    for row in paired(records, args.base, args.new):
        beyond = abs(row["mean"]) > 2 * row["se"]  # outside two standard errors of no difference
        lines.append(f"| {row['family']} | {row['budget']} | {row['seeds']} | "
                     f"{'**' if beyond else ''}{row['mean']:+.4f}{'**' if beyond else ''} | {row['se']:.4f} | "
                     f"{row['wins']} / {row['losses']} |")
    print("\n".join(lines))
    return 0


def _checks(summary: dict[tuple, dict[str, Any]], methods: list[str], mla: str) -> list[str]:
    """The issue's targets, family by family, for the method ``mla``."""
    alone = mla.replace("mla", "mla_alone", 1)
    peers = [m for m in methods if m.split("@")[0] not in MLA_METHODS]
    rows = ["## Targets for " + mla, "", "| family | runs/task | joint <= alone | worst <= 2x mean | <= random | "
            "<= best peer (which) | worst <= 2x best peer |", "|---|---|---|---|---|---|---|"]
    n_best = n_cells = n_worst = n_peer = 0
    for (fname, budget, m), c in sorted(summary.items()):
        if m != mla:
            continue
        a = summary.get((fname, budget, alone))
        r = summary.get((fname, budget, "random"))
        peer = [(summary[(fname, budget, p)]["regret"], p) for p in peers if (fname, budget, p) in summary]
        best_peer = min(peer) if peer else None
        ok_best = best_peer is None or c["regret"] <= best_peer[0] + 1e-12
        n_cells += best_peer is not None  # a family-budget no peer ran is not counted either way
        n_best += best_peer is not None and ok_best
        # issue 45: the worst seed against the best peer's mean (what a user risks against what a peer gives)
        ok_worst = best_peer is None or c["regret_worst"] <= 2 * best_peer[0] + 1e-12
        n_peer += best_peer is not None
        n_worst += best_peer is not None and ok_worst
        worst_text = f" ({c['regret_worst']:.3f})"
        tick = lambda ok: "yes" if ok else "**no**"  # noqa: E731
        rows.append(f"| {fname} | {budget} | "
                    f"{'-' if a is None else tick(c['regret'] <= a['regret'] + 1e-12)} | "
                    f"{tick(c['regret_worst'] <= 2 * c['regret'] + 1e-12)} | "
                    f"{'-' if r is None else tick(c['regret'] <= r['regret'] + 1e-12)} | "
                    f"{'-' if best_peer is None else tick(ok_best) + f' ({best_peer[1]} {best_peer[0]:.3f})'} | "
                    f"{'-' if best_peer is None else tick(ok_worst) + worst_text} |")
    rows += ["", f"{mla} at or below the best peer on {n_best} of {n_cells} family-budgets "
                 f"({100 * n_best / max(n_cells, 1):.0f} %; target 80 %); worst seed at most 2x the best peer's "
                 f"mean on {n_worst} of {n_peer} (target: all)."]
    return rows


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(message)s")
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="run jobs, appending to --out")
    r.add_argument("--families", default="quick", help="family names or groups (all, recorded, bbob, own, quick)")
    r.add_argument("--methods", default="mla,mla_alone,random")
    r.add_argument("--seeds", default="0-4")
    r.add_argument("--budgets", default="", help="runs per task, comma separated (default: the family's)")
    r.add_argument("--jobs", type=int, default=2)
    r.add_argument("--tag", default="", help="label of gptask's runs (mla@TAG), to compare versions or settings")
    r.add_argument("--options", default="", help="JSON dict of gt.tune options for gptask's runs")
    r.add_argument("--proposer", default="", help="a search variant: bench/proposers/NAME.py (see its README)")
    r.add_argument("--proposer-options", default="", help="JSON dict of keyword options for the proposer's factory")
    r.add_argument("--out", default="bench/results_suite.jsonl")
    r.set_defaults(func=cmd_run)
    c = sub.add_parser("compare", help="two methods (e.g. mla@A and mla@B) paired by seed, family by family")
    c.add_argument("inputs", nargs="+")
    c.add_argument("--base", required=True)
    c.add_argument("--new", required=True)
    c.set_defaults(func=cmd_compare)
    p = sub.add_parser("report", help="tables and target checks from result files")
    p.add_argument("inputs", nargs="+")
    p.add_argument("--out", default=None)
    p.add_argument("--mla", default="mla", help="the gptask method the target checks are about (e.g. mla@after)")
    p.add_argument("--only", default="", help="methods to include, comma separated")
    p.set_defaults(func=cmd_report)
    args = ap.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
