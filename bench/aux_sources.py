"""Auxiliary tasks with sources (issue 44, item 4): does a campaign with fidelity and a source gain or
lose target regret when it also runs auxiliary tasks of its own? The setting of
bench/archive/fidelity_sources.py (its source campaign, checkpoints and regret), with the families built
with :data:`N_INSTANCES` = 6 instances so that one instance is neither tuned nor the source's:

* ``mf_sources``: ``gt.tune(problem_with_fidelity, tasks, sources=[rows], cost_budget=...)``, as main;
* ``mf_sources_aux``: the same with ``aux_tasks=[instance 5]`` (a task nobody measured);
* ``mf_sources_aux_src``: the same with ``aux_tasks=[instance 2]``, a task the source measured (on the
  machine "earlier"; the auxiliary task runs it on "here");
* ``mf_aux``: ``aux_tasks=[instance 5]`` without the source (what the source adds to it);
* ``mf_sources_aux_design5``: ``mf_sources_aux`` with the target's design half of ``n_initial``
  (``TARGET_DESIGN_SHARE = 0.5``, the default before session 31), beside the same source (made by
  today's default): what the rule itself changes, the source held fixed.

The auxiliary tasks' runs count in the cost clock (they are this campaign's runs); regret is of the tuned
instances (0, 1) only.

    nice -n 5 python bench/aux_sources.py run --families currin,park --seeds 0-4 --out bench/results/aux_sources.json
    nice -n 5 python bench/archive/aux_cheap_only.py --families currin,park --seeds 0-4 --out bench/results/aux_sources.json
    python bench/aux_sources.py report --out bench/results/aux_sources.json --md bench/results/aux_sources.md

Two trees side by side (rows of the code before a change and after it, run seed by seed into two files):
``python bench/aux_sources.py compare --before BEFORE.json --after AFTER.json`` prints per family and
method the regret of both at each checkpoint, the worst seed, the largest excess of one seed, and
when the tuned tasks' first target runs ended (fraction of the cost).

Rows are saved as they finish and skipped when present: a killed run resumes.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent / "archive"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import fidelity_sources as fs  # noqa: E402
import multifidelity_families as mff  # noqa: E402
from module_constants import constants_set  # noqa: E402
from row_files import load_rows, parse_seeds, save_rows  # noqa: E402

log = logging.getLogger("aux_sources")

#: the families' instances: TUNED and SOURCE_TASKS as in fidelity_sources, instance 5 the auxiliary one
N_INSTANCES = 6
fs.N_INSTANCES = N_INSTANCES  # a setting of the benchmark module (its family() reads it), not of gptask
AUX_NEW, AUX_SOURCE = 5, 2
METHODS = ("mf_sources", "mf_sources_aux", "mf_sources_aux_src", "mf_aux", "mf_sources_aux_design5")
#: a method run as another with constants of gptask/tuning/fidelity.py set (the source made before, by the default)
VARIANTS = {"mf_sources_aux_design5": ("mf_sources_aux", {"TARGET_DESIGN_SHARE": 0.5})}
#: rows of bench/archive/aux_cheap_only.py (the auxiliary task at the cheapest level only) in the same file
REPORTED = (*METHODS, "mf_sources_aux_cheap", "mf_sources_aux_wait_all")


def run_method(method: str, name: str, budget: float, seed: int) -> tuple[list[list[float]], dict[str, Any]]:
    """This campaign's complete runs in history order, ``[instance, fidelity, cost, value]`` (the
    auxiliary task's included: they are on the cost clock), and facts of the run."""
    import gptask as gt

    fam = fs.family(name)
    tasks = [{"instance": i} for i in fs.TUNED]
    rows = [dict(r) for r in fs.source_rows(name, budget)]
    if method in VARIANTS:
        from gptask.tuning import fidelity as fm

        base, values = VARIANTS[method]
        with constants_set(fm, values):
            return run_method(base, name, budget, seed)
    kw: dict[str, Any] = dict(cost_budget=budget * len(tasks), seed=seed, progress=False, provenance="here")
    if method != "mf_aux":
        kw["sources"] = [rows]
    if method in ("mf_sources_aux", "mf_aux"):
        kw["aux_tasks"] = [{"instance": AUX_NEW}]
    elif method == "mf_sources_aux_src":
        kw["aux_tasks"] = [{"instance": AUX_SOURCE}]
    elif method != "mf_sources":
        raise SystemExit(f"aux_sources: unknown method {method!r}; known: {', '.join(METHODS)}")
    res = gt.tune(fs._problem(fam, True), tasks, **kw)
    evals = []
    for t in sorted(res.history, key=lambda t: t.id):
        if t.source == "source" or t.status is not gt.Status.COMPLETE:
            continue
        s = float(t.task["fidelity"])
        evals.append([int(t.task["instance"]), s, fam.cost(s), float(t.value)])
    aux = [e for e in evals if e[0] not in fs.TUNED]
    facts = {"cost_spent": float(sum(e[2] for e in evals)), "aux_cost": float(sum(e[2] for e in aux)),
             "aux_runs": len(aux), "target_runs": sum(e[1] >= mff.TARGET and e[0] in fs.TUNED for e in evals),
             "source_rows": len(rows) if "sources" in kw else 0}
    return evals, facts


def regret_curve(name: str, budget: float, evals: list[list[float]]) -> list[float]:
    """fidelity_sources' regret of the tuned instances at each checkpoint, the auxiliary task's runs
    on the same cost clock."""
    fam = fs.family(name)
    clock, marks = 0.0, []
    for i, s, c, y in evals:
        clock += c
        marks.append((clock / (budget * len(fs.TUNED)), int(i), s, y))
    out = []
    for cp in fs.CHECKPOINTS:
        best = {i: np.inf for i in fs.TUNED}
        for at, i, s, y in marks:
            if i in best and at <= cp + 1e-9 and s >= mff.TARGET - 1e-12:
                best[i] = min(best[i], y)
        out.append(float(np.mean([fam.normalised_regret(i, b) if np.isfinite(b) else 1.0 for i, b in best.items()])))
    return out


def run_rows(out: str, cmd: str, families: str, seeds: list[int], budget: float,
             methods: list[tuple[str, str]]) -> None:
    """Run every (family, seed, method) row not yet in ``out`` and append it there as it finishes (a
    killed run resumes); ``cmd``, the command line, is recorded once. families: comma separated;
    methods: (the row's method name, the :func:`run_method` it runs), side by side: every method of a
    seed before the next seed."""
    doc = load_rows(out)
    if cmd not in doc.setdefault("commands", []):
        doc["commands"].append(cmd)
        save_rows(out, doc)
    done = {(r["family"], r["method"], r["seed"], r["budget"]) for r in doc["rows"]}
    for name in [f.strip() for f in families.split(",") if f.strip()]:
        for seed in seeds:
            for label, m in methods:
                if (name, label, seed, budget) in done:
                    continue
                t0 = time.perf_counter()
                evals, facts = run_method(m, name, budget, seed)
                row = {"family": name, "method": label, "seed": seed, "budget": budget, "evals": evals,
                       "wall_seconds": time.perf_counter() - t0, **facts,
                       "regret": regret_curve(name, budget, evals)}
                doc = load_rows(out)
                doc["rows"].append(row)
                save_rows(out, doc)
                log.info("%s %s seed %d: regret %s (%d runs, %d aux, %.0f s)", name, label, seed,
                         " ".join(f"{r:.3g}" for r in row["regret"]), len(evals), facts["aux_runs"],
                         row["wall_seconds"])


def cmd_run(args: argparse.Namespace) -> int:
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    bad = [m for m in methods if m not in METHODS]
    if bad:
        print(f"aux_sources: unknown method(s) {bad}; known: {', '.join(METHODS)}", file=sys.stderr)
        return 2
    run_rows(args.out, "python bench/aux_sources.py " + " ".join(sys.argv[1:]), args.families, args.seeds,
             args.budget, [(m, m) for m in methods])
    return 0


def report(doc: dict[str, Any]) -> str:
    rows = doc["rows"]
    cells: dict[tuple[str, str], dict[int, list[float]]] = {}
    facts: dict[tuple[str, str], list[dict]] = {}
    for r in rows:
        cells.setdefault((r["family"], r["method"]), {})[r["seed"]] = r["regret"]
        facts.setdefault((r["family"], r["method"]), []).append(r)
    families = list(dict.fromkeys(r["family"] for r in rows))
    cps = " | ".join(f"{int(c * 100)} %" for c in fs.CHECKPOINTS)
    m = doc["machine"]
    lines = ["# Auxiliary tasks with sources: target regret per cost (issue 44, item 4)", "",
             f"Machine: {m.get('description', '?')}; load average {m.get('load_average', '?')}; date "
             f"{m.get('date', '?')}.", "", "Commands:", "", *[f"    {c}" for c in doc.get("commands", [])], "",
             f"Families of bench/multifidelity_families.py with {N_INSTANCES} instances; the source an earlier gptask "
             f"campaign with fidelity on instances {list(fs.SOURCE_TASKS)} (seed {fs.SOURCE_SEED}, machine "
             f"'earlier'); this campaign tunes instances {list(fs.TUNED)}; the auxiliary task is instance {AUX_NEW} "
             f"(mf_sources_aux, mf_aux) or instance {AUX_SOURCE}, one of the source's (mf_sources_aux_src). Budget: "
             f"{rows[0]['budget'] if rows else '?'} target-run costs per tuned task (cost ratio 1:10), the auxiliary "
             "task's runs counted. Normalised target-fidelity regret of the tuned tasks' best target run within the "
             "cost (1 before the first), mean over the tuned tasks; per cell the mean over seeds, the worst seed in "
             "brackets. The methods: see bench/aux_sources.py (mf_sources_aux_cheap: bench/archive/aux_cheap_only.py, the "
             "auxiliary task's design at the cheapest level only, one point at each other level; "
             "mf_sources_aux_wait_all: bench/archive/aux_wait_all.py, the whole auxiliary design after the tuned tasks' "
             "first target runs).", "",
             f"| family | method | seeds | aux cost share | {cps} | wall s (mean) |",
             "|" + " --- |" * (5 + len(fs.CHECKPOINTS))]
    for f in families:
        for meth in REPORTED:
            if (f, meth) not in cells:
                continue
            a = np.array(list(cells[(f, meth)].values()))
            cs = " | ".join(f"{mu:.3f} ({w:.3f})" for mu, w in zip(a.mean(0), a.max(0)))
            rs = facts[(f, meth)]
            share = np.mean([r["aux_cost"] / max(r["cost_spent"], 1e-12) for r in rs])
            lines.append(f"| {f} | {meth} | {len(a)} | {share:.1%} | {cs} | "
                         f"{np.mean([r['wall_seconds'] for r in rs]):.0f} |")
    for mine, other in (("mf_sources_aux", "mf_sources"), ("mf_sources_aux_src", "mf_sources"),
                        ("mf_sources_aux", "mf_aux"), ("mf_sources_aux_cheap", "mf_sources"),
                        ("mf_sources_aux_cheap", "mf_sources_aux"), ("mf_sources_aux_wait_all", "mf_sources_aux"),
                        ("mf_sources_aux_wait_all", "mf_sources")):
        if not any(m == mine for _, m in cells):
            continue
        lines += ["", f"## Side by side: {mine} against {other}", "",
                  "Per checkpoint, over the seeds run by both: the ratio of the mean regrets, the ratio of the "
                  f"worst seeds' regrets, the largest excess of one seed ({mine}'s regret minus {other}'s on the "
                  f"same seed), and on how many seeds {mine} is lower or equal.", "", f"| family | | {cps} |",
                  "|" + " --- |" * (2 + len(fs.CHECKPOINTS))]
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


def first_target_at(budget: float, evals: list[list[float]]) -> list[float]:
    """Per tuned instance, the fraction of the cost at which its first target run ended (on the clock
    of every run, the auxiliary task's included; 1 past the budget when it has none)."""
    clock, out = 0.0, {}
    for i, s, c, _ in evals:
        clock += c
        if int(i) in fs.TUNED and s >= mff.TARGET - 1e-12:
            out.setdefault(int(i), clock / (budget * len(fs.TUNED)))
    return [out.get(i, 1.0) for i in fs.TUNED]


def compare(before: dict[str, Any], after: dict[str, Any], alias: dict[str, str] | None = None) -> str:
    """Markdown tables: per family and method run in both files, each checkpoint's regret before and
    after (mean over the seeds both ran, worst seed in brackets), the largest excess of one seed
    (after minus before), seeds lower or equal, and the tuned tasks' first target runs (fraction of
    the cost: mean over tasks and seeds, the latest task's mean). alias: the after file's rows of
    method k compared as method v's (another method's rows standing for the code after)."""
    def cells(doc: dict[str, Any], names: dict[str, str]) -> dict[tuple[str, str], dict[int, dict]]:
        out: dict[tuple[str, str], dict[int, dict]] = {}
        for r in doc["rows"]:
            out.setdefault((r["family"], names.get(r["method"], r["method"])), {})[r["seed"]] = r
        return out

    b, a = cells(before, {}), cells(after, dict(alias or {}))
    cps = " | ".join(f"{int(c * 100)} %" for c in fs.CHECKPOINTS)
    lines = [f"| family | method | seeds | tree | {cps} | first target run (mean, latest task) |",
             "|" + " --- |" * (5 + len(fs.CHECKPOINTS)), ]
    for key in [k for k in b if k in a]:
        seeds = sorted(set(b[key]) & set(a[key]))
        if not seeds:
            continue
        for tree, rows in (("before", b[key]), ("after", a[key])):
            R = np.array([rows[s]["regret"] for s in seeds])
            F = np.array([first_target_at(rows[s]["budget"], rows[s]["evals"]) for s in seeds])
            cs = " | ".join(f"{mu:.3f} ({w:.3f})" for mu, w in zip(R.mean(0), R.max(0)))
            lines.append(f"| {key[0]} | {key[1]} | {len(seeds)} | {tree} | {cs} | {F.mean():.1%}, "
                         f"{F.max(1).mean():.1%} |")
        A = np.array([a[key][s]["regret"] for s in seeds])
        B = np.array([b[key][s]["regret"] for s in seeds])
        excess = " | ".join(f"{x:+.3f}" for x in (A - B).max(0))
        ahead = " | ".join(f"{int(k)}/{len(seeds)}" for k in (A <= B + 1e-12).sum(0))
        lines += [f"| {key[0]} | {key[1]} | | largest excess of a seed (after - before) | {excess} | |",
                  f"| {key[0]} | {key[1]} | | seeds after <= before | {ahead} | |"]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run")
    r.add_argument("--families", default="currin,park")
    r.add_argument("--methods", default=",".join(METHODS))
    r.add_argument("--seeds", type=parse_seeds, default=parse_seeds("0-4"))
    r.add_argument("--budget", type=float, default=fs.DEFAULT_BUDGET, help="cost budget per tuned task "
                   "(target-run costs)")
    r.add_argument("--out", default="bench/results/aux_sources.json")
    p = sub.add_parser("report")
    p.add_argument("--out", default="bench/results/aux_sources.json")
    p.add_argument("--md")
    c = sub.add_parser("compare")
    c.add_argument("--before", required=True)
    c.add_argument("--after", required=True)
    c.add_argument("--after-method", action="append", default=[], metavar="MINE:AS",
                   help="compare the after file's rows of method MINE as method AS's (repeatable)")
    args = ap.parse_args(argv)
    if args.command == "compare":
        alias = dict(a.split(":", 1) for a in args.after_method)
        print(compare(load_rows(args.before), load_rows(args.after), alias), end="")
        return 0
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("gptask").setLevel(logging.ERROR)
    if args.command == "run":
        if args.budget <= 0 or not np.isfinite(args.budget):
            print(f"aux_sources: --budget must be a positive number, got {args.budget}", file=sys.stderr)
            return 2
        return cmd_run(args)
    text = report(load_rows(args.out))
    print(text)
    if args.md:
        Path(args.md).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
