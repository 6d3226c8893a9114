"""Fidelity with sources (issue 44, item 4 of "works with what exists"): a new multi-fidelity campaign
that has an earlier campaign of the same family's other tasks as its source, judged like
bench/multifidelity.py by the target-fidelity regret at cost checkpoints.

Each family of bench/multifidelity_families.py is built with :data:`N_INSTANCES` instances. The
earlier campaign (the source) is gptask with fidelity on instances :data:`SOURCE_TASKS` at a cost
budget of ``--budget`` target-run costs per task (seed :data:`SOURCE_SEED`, machine "earlier"): its
runs at both fidelity levels, as measurement rows with the fidelity column. The new campaign tunes
instances :data:`TUNED` at ``--budget`` target-run costs per task (machine "here"), by

* ``mf_sources``: gptask with fidelity and the source (every level's runs in the model),
  ``gt.tune(problem_with_fidelity, tasks, sources=[rows], cost_budget=...)``: this branch;
  ``mf_sources_own``: the same with the target's first run picked from the tuned tasks' cheap runs
  only (``POOLED_SOURCES = False``; mf_sources picks it with the sources' tasks in the LCM too);
* ``sf_sources``: main's behaviour before it: a problem with fidelity tuned with sources ran at its
  target fidelity only, ``budget`` runs per task, with the source's target-fidelity runs only (a
  source with cheaper runs was refused); run here as the problem without fidelity (its objective at
  the target) with those rows, which main's test_fidelity showed to be the same run proposal for
  proposal;
* ``mf_alone``: gptask with fidelity, no source (what the source adds).

Regret at a checkpoint c (10/25/50/100 % of the budget): per tuned task the normalised regret of its
best target-fidelity run among this campaign's runs (the sources' cost nothing) within cost c, on
one clock over the tasks (the runs in the order of the history), mean over the tasks; 1 before a
task's first target run. Over seeds: mean and worst seed, and the per-seed ratio mf/sf.

    python bench/archive/fidelity_sources.py run --families currin,park --seeds 0-5 \\
        --out bench/results/fidelity_sources.json
    python bench/archive/fidelity_sources.py report --out bench/results/fidelity_sources.json \\
        --md bench/results/fidelity_sources.md

Rows (family, method, seed) are saved as they finish and skipped when present: a killed run resumes.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import multifidelity as mfb  # noqa: E402
import multifidelity_families as mff  # noqa: E402
from module_constants import constants_set  # noqa: E402
from row_files import load_rows, parse_seeds, save_rows  # noqa: E402

log = logging.getLogger("fidelity_sources")

CHECKPOINTS = mfb.CHECKPOINTS
N_INSTANCES = 5
TUNED = (0, 1)
SOURCE_TASKS = (2, 3, 4)
SOURCE_SEED = 1000
DEFAULT_BUDGET = 15.0
METHODS = ("mf_sources", "sf_sources", "mf_alone", "mf_sources_own", "mf_sources_design2", "mf_sources_design5")
#: mf_sources with constants of gptask/tuning/fidelity.py set otherwise (a schedule measured side by
#: side): mf_sources_own, the target's first run picked from the tuned tasks' cheap runs only, as
#: without sources (POOLED_SOURCES False: the default before; mf_sources picks it by an LCM that holds
#: the sources' tasks too, from their runs as well); mf_sources_design2, the target's design a fifth of
#: n_initial (TARGET_DESIGN_SHARE 0.2, the default since session 31; the source campaign is made by the
#: default either way); mf_sources_design5, the target's design half of n_initial (the default before
#: session 31) beside a source made by today's default
VARIANTS = {"mf_sources_own": {"POOLED_SOURCES": False}, "mf_sources_design2": {"TARGET_DESIGN_SHARE": 0.2},
            "mf_sources_design5": {"TARGET_DESIGN_SHARE": 0.5}}


@lru_cache(maxsize=None)
def family(name: str) -> mff.MFFamily:
    return mff.build(name, N_INSTANCES)


def _problem(fam: mff.MFFamily, fidelity: bool) -> Any:
    import gptask as gt

    if not fidelity:
        return gt.Problem(fam.task_space(), fam.param_space(), mfb._Target(fam.objective), name=f"{fam.name}_src")
    return gt.Problem(fam.task_space(), fam.param_space(), mfb._AtFidelity(fam.objective), name=f"{fam.name}_src",
                      fidelity=fam.fidelity_space(), target_fidelity={"fidelity": mff.TARGET},
                      run_cost=mfb._RunCost(fam))


class _Negated:
    """A misleading source's objective: another's values negated (it ranks every configuration the
    other way; picklable)."""

    def __init__(self, objective: Any) -> None:
        self.objective = objective

    def __call__(self, task: dict, params: dict) -> float:
        return -self.objective(task, params)


@lru_cache(maxsize=None)
def source_rows(name: str, budget: float, source: str = "") -> tuple[dict, ...]:
    """The earlier campaign's complete runs on SOURCE_TASKS, as measurement rows (fidelity column,
    machine "earlier"). source: "" for the family itself; a family of the same dimension (its
    function at this family's levels, given as this family's: a source that does not relate), or
    "negated" (this family's values negated: a source that ranks the other way)."""
    import gptask as gt

    fam = family(name)
    tasks = [{"instance": i} for i in SOURCE_TASKS]
    problem = _problem(fam, True)
    if source == "negated":
        problem.objective = _Negated(problem.objective)
    elif source:
        other = family(source)
        if other.dim != fam.dim:
            raise SystemExit(f"fidelity_sources: --source {source} has {other.dim} inputs, {name} {fam.dim}")
        problem.objective = mfb._AtFidelity(other.objective)
    res = gt.tune(problem, tasks, cost_budget=budget * len(tasks), seed=SOURCE_SEED, progress=False)
    rows = []
    for t in sorted(res.history, key=lambda t: t.id):
        if t.status is gt.Status.COMPLETE:
            rows.append({"instance": int(t.task["instance"]), "fidelity": float(t.task["fidelity"]), **t.params,
                         "value": float(t.value), "machine.label": "earlier"})
    return tuple(rows)


def run_method(method: str, name: str, budget: float, seed: int,
               source: str = "") -> tuple[list[list[float]], dict[str, Any]]:
    """This campaign's complete runs in history order, ``[instance, fidelity, cost, value]``, and
    facts of the run (source rows given, cost spent)."""
    import gptask as gt

    fam = family(name)
    tasks = [{"instance": i} for i in TUNED]
    rows = [dict(r) for r in source_rows(name, budget, source)]
    facts: dict[str, Any] = {}
    if method in VARIANTS:
        from gptask.tuning import fidelity as fm

        with constants_set(fm, VARIANTS[method]):
            return run_method("mf_sources", name, budget, seed, source)
    if method == "mf_sources":
        res = gt.tune(_problem(fam, True), tasks, sources=[rows], cost_budget=budget * len(tasks), seed=seed,
                      progress=False, provenance="here")
        facts["source_rows"] = len(rows)
    elif method == "mf_alone":
        res = gt.tune(_problem(fam, True), tasks, cost_budget=budget * len(tasks), seed=seed, progress=False,
                      provenance="here")
    elif method == "sf_sources":
        at_target = [{k: v for k, v in r.items() if k != "fidelity"} for r in rows if r["fidelity"] == mff.TARGET]
        res = gt.tune(_problem(fam, False), tasks, sources=[at_target], budget=int(budget // fam.cost(mff.TARGET)),
                      seed=seed, progress=False, provenance="here")
        facts["source_rows"] = len(at_target)
    else:
        raise SystemExit(f"fidelity_sources: unknown method {method!r}; known: {', '.join(METHODS)}")
    evals = []
    for t in sorted(res.history, key=lambda t: t.id):
        if t.source == "source" or t.status is not gt.Status.COMPLETE:
            continue
        s = float(t.task.get("fidelity", mff.TARGET))
        evals.append([int(t.task["instance"]), s, fam.cost(s), float(t.value)])
    facts["cost_spent"] = float(sum(e[2] for e in evals))
    facts["target_runs"] = sum(e[1] >= mff.TARGET for e in evals)
    return evals, facts


def regret_curve(name: str, budget: float, evals: list[list[float]]) -> list[float]:
    """Mean normalised target regret over TUNED at each checkpoint (module docstring)."""
    fam = family(name)
    clock, marks = 0.0, []
    for i, s, c, y in evals:
        clock += c
        marks.append((clock / (budget * len(TUNED)), int(i), s, y))
    out = []
    for cp in CHECKPOINTS:
        best = {i: np.inf for i in TUNED}
        for at, i, s, y in marks:
            if at <= cp + 1e-9 and s >= mff.TARGET - 1e-12:
                best[i] = min(best[i], y)
        out.append(float(np.mean([fam.normalised_regret(i, b) if np.isfinite(b) else 1.0 for i, b in best.items()])))
    return out


def cmd_run(args: argparse.Namespace) -> int:
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    bad = [m for m in methods if m not in METHODS]
    if bad:
        print(f"fidelity_sources: unknown method(s) {bad}; known: {', '.join(METHODS)}", file=sys.stderr)
        return 2
    doc = load_rows(args.out)
    cmd = "python bench/archive/fidelity_sources.py " + " ".join(sys.argv[1:])
    if cmd not in doc.setdefault("commands", []):
        doc["commands"].append(cmd)
        save_rows(args.out, doc)
    done = {(r["family"], r.get("source", ""), r["method"], r["seed"], r["budget"]) for r in doc["rows"]}
    for name in [f.strip() for f in args.families.split(",") if f.strip()]:
        for seed in args.seeds:
            for m in methods:  # side by side: every method of a seed before the next seed
                if (name, args.source, m, seed, args.budget) in done:
                    continue
                t0 = time.perf_counter()
                evals, facts = run_method(m, name, args.budget, seed, args.source)
                row = {"family": name, "source": args.source, "method": m, "seed": seed, "budget": args.budget,
                       "evals": evals, "wall_seconds": time.perf_counter() - t0, **facts,
                       "regret": regret_curve(name, args.budget, evals)}
                doc = load_rows(args.out)
                doc["rows"].append(row)
                save_rows(args.out, doc)
                log.info("%s %s seed %d: regret %s (%d runs, %d at the target, %.0f s)", name, m, seed,
                         " ".join(f"{r:.3g}" for r in row["regret"]), len(evals), facts["target_runs"],
                         row["wall_seconds"])
    return 0


def report(doc: dict[str, Any]) -> str:
    rows = doc["rows"]
    cells: dict[tuple[str, str], dict[int, list[float]]] = {}
    facts: dict[tuple[str, str], list[dict]] = {}
    def label(r: dict) -> str:
        return r["family"] + (f" (source: {r['source']})" if r.get("source") else "")

    for r in rows:
        cells.setdefault((label(r), r["method"]), {})[r["seed"]] = r["regret"]
        facts.setdefault((label(r), r["method"]), []).append(r)
    families = list(dict.fromkeys(label(r) for r in rows))
    cps = " | ".join(f"{int(c * 100)} %" for c in CHECKPOINTS)
    m = doc["machine"]
    lines = ["# Fidelity with sources: target regret per cost (issue 44, item 4)", "",
             f"Machine: {m.get('description', '?')}; load average {m.get('load_average', '?')}; date "
             f"{m.get('date', '?')}.", "", "Commands:", "", *[f"    {c}" for c in doc.get("commands", [])], "",
             f"Families of bench/multifidelity_families.py with {N_INSTANCES} instances; the source an earlier "
             f"gptask campaign with fidelity on instances {list(SOURCE_TASKS)} (seed {SOURCE_SEED}, its runs at "
             f"both levels); this campaign tunes instances {list(TUNED)}. Budget: {rows[0]['budget'] if rows else '?'} "
             "target-run costs per tuned task (cost ratio 1:10). Normalised target-fidelity regret of the best "
             "target run of this campaign within the cost (1 before the first), mean over the tuned tasks; per "
             "cell the mean over seeds, the worst seed in brackets. The methods: see bench/archive/fidelity_sources.py "
             "(sf_sources is main's behaviour before this branch).", "",
             f"| family | method | seeds | source rows | {cps} | wall s (mean) |",
             "|" + " --- |" * (5 + len(CHECKPOINTS))]
    for f in families:
        for meth in METHODS:
            if (f, meth) not in cells:
                continue
            a = np.array(list(cells[(f, meth)].values()))
            cs = " | ".join(f"{mu:.3f} ({w:.3f})" for mu, w in zip(a.mean(0), a.max(0)))
            rs = facts[(f, meth)]
            src = rs[0].get("source_rows", 0)
            lines.append(f"| {f} | {meth} | {len(a)} | {src} | {cs} | {np.mean([r['wall_seconds'] for r in rs]):.0f} |")
    for mine, other in (("mf_sources", "sf_sources"), ("mf_sources", "mf_sources_own"), ("mf_sources", "mf_alone"),
                        ("mf_sources_own", "mf_alone")):
        lines += ["", f"## Side by side: {mine} against {other}", "",
                  "Per checkpoint, over the seeds run by both: the ratio of the mean regrets, the ratio of the "
                  f"worst seeds' regrets, the largest excess of one seed ({mine}'s regret minus "
                  f"{other}'s on the same seed; per-seed ratios of regrets near 0 say nothing), and on how many "
                  f"seeds {mine} is lower or equal.", "", f"| family | | {cps} |",
                  "|" + " --- |" * (2 + len(CHECKPOINTS))]
        for f in families:
            a, b = cells.get((f, mine), {}), cells.get((f, other), {})
            seeds = sorted(set(a) & set(b))
            if not seeds:
                continue
            A, B = np.array([a[s] for s in seeds]), np.array([b[s] for s in seeds])
            mean = " | ".join(f"{x:.2f}" for x in A.mean(0) / np.maximum(B.mean(0), 1e-12))
            worst = " | ".join(f"{x:.2f}" for x in A.max(0) / np.maximum(B.max(0), 1e-12))
            excess = " | ".join(f"{x:+.3f}" for x in (A - B).max(0))
            ahead = " | ".join(f"{int(k)}/{len(seeds)}" for k in (A <= B + 1e-12).sum(0))
            lines += [f"| {f} | mean ratio | {mean} |", f"| {f} | worst-seed ratio | {worst} |",
                      f"| {f} | largest excess of a seed | {excess} |", f"| {f} | seeds lower or equal | {ahead} |"]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run")
    r.add_argument("--families", default="currin,park")
    r.add_argument("--methods", default=",".join(METHODS))
    r.add_argument("--seeds", type=parse_seeds, default=parse_seeds("0-5"))
    r.add_argument("--budget", type=float, default=DEFAULT_BUDGET, help="cost budget per task (target-run costs)")
    r.add_argument("--source", default="", help="the source's function: the family's own (default), another "
                   "family of the same dimension, or 'negated' (a source that does not relate or ranks the other way)")
    r.add_argument("--out", default="bench/results/fidelity_sources.json")
    p = sub.add_parser("report")
    p.add_argument("--out", default="bench/results/fidelity_sources.json")
    p.add_argument("--md")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("gptask").setLevel(logging.ERROR)
    if args.command == "run":
        if args.budget <= 0 or not np.isfinite(args.budget):
            print(f"fidelity_sources: --budget must be a positive number, got {args.budget}", file=sys.stderr)
            return 2
        return cmd_run(args)
    text = report(load_rows(args.out))
    print(text)
    if args.md:
        Path(args.md).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
