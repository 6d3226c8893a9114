"""A look at the worst seeds of a method in a suite result file (issue 45): what went wrong.

For each (family, budget) of the file, the ``--worst`` seeds of gptask's ``mla`` with the largest
regret are run again (the same call as bench/suite.py's ``run_mla``, with a history in a temporary
SQLite file so that every fit's stored diagnostics can be read back) and shown task by task beside
a peer's run of the same seed (default ``botorch_mtgp``, whose initial design is gptask's own):

* ``init``: the normalised regret of the best configuration of the initial design (the runs whose
  source is "initial"), ``final``: at the budget (as bench/suite.py scores it), ``at``: the run
  (1-based, of that task) whose configuration was kept, ``best run``: the regret of the best
  configuration run (noise-free; below ``final`` on a noisy family when the noise hid it); the
  peer's final regret on the task;
* of the fits (``params['diagnostics']`` in the history, one per model iteration): how many flagged a
  collapsed length scale, how many were refitted away from one, the flags of the last fit, and the
  shortest length scale of the last fit (unit coordinates) with its relative noise.

A task whose ``init`` is already its ``final`` was not improved by the search at all; a collapsed or
flagged fit points at the model, a good fit with no progress at the search.

    python bench/suite_worst.py bench/results/generated_regret.jsonl --worst 2
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from suite import scores  # noqa: E402
from suite_families import family  # noqa: E402


def _regret(fam: Any, i: int, params: dict) -> float:
    value = fam.latent(fam.tasks[i], params) if fam.latent is not None else fam.problem.objective(fam.tasks[i], params)
    return max(0.0, (value - fam.f_opt[i]) / (fam.f_ref[i] - fam.f_opt[i]))


def _kept(trials: list) -> Any:
    """The trial a user keeps: the one measured best (None when none completed)."""
    ok = [t for t in trials if t.value is not None]
    return min(ok, key=lambda t: t.value) if ok else None


def rerun(fam: Any, budget: int, seed: int) -> dict[str, Any]:
    """gptask's joint run of (family, budget, seed) again, with its trials and its fits' diagnostics."""
    import gptask as gt

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "history.sqlite"
        res = gt.tune(fam.problem, tasks=fam.tasks, budget=budget, seed=seed, progress=False, history=str(path))
        with sqlite3.connect(path) as db:
            fits = [json.loads(row[0]).get("diagnostics") for row in db.execute("SELECT params FROM models ORDER BY id")]
    tasks = []
    for i in range(len(fam.tasks)):
        trials = sorted((t for t in res.history if t.task_index == i and t.status is gt.Status.COMPLETE),
                        key=lambda t: t.id)
        init = _kept([t for t in trials if t.source == "initial"])
        final = _kept(trials)
        tasks.append({"init": None if init is None else _regret(fam, i, dict(init.params)),
                      "final": None if final is None else _regret(fam, i, dict(final.params)),
                      "at": None if final is None else trials.index(final) + 1,
                      "best_run": min((_regret(fam, i, dict(t.params)) for t in trials), default=None),
                      "values": [t.value for t in trials], "params": [dict(t.params) for t in trials]})
    return {"tasks": tasks, "fits": [f for f in fits if f]}


def describe_fits(fits: list[dict]) -> str:
    if not fits:
        return "no stored fit"
    last = fits[-1]
    ls = np.asarray(last["lengthscales"], float)
    n_coll = sum(bool(f.get("collapsed")) for f in fits)
    n_refit = sum(bool(f.get("collapse_refit")) for f in fits)
    n_floor = sum(bool(f.get("at_floor")) for f in fits)
    flags = "; ".join(last.get("flags") or []) or "none"
    return (f"{len(fits)} fits, {n_refit} refitted away from a collapsed length scale ({n_floor} with a length scale "
            f"held at its floor), {n_coll} left with one; last fit: "
            f"shortest length scale {ls.min():.3g}, relative noise {np.min(last['noise']):.2g}-{np.max(last['noise']):.2g}, "
            f"flags: {flags}" + "".join(f"; fit {k + 1} collapsed: {'; '.join(f['collapsed'])}"
                                         for k, f in enumerate(fits) if f.get("collapsed")))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", help="a bench/suite.py JSON-lines file")
    ap.add_argument("--method", default="mla")
    ap.add_argument("--peer", default="botorch_mtgp")
    ap.add_argument("--worst", type=int, default=2, help="seeds per family-budget, worst first")
    ap.add_argument("--families", default="", help="only these families (comma separated)")
    args = ap.parse_args(argv)
    import logging

    logging.getLogger("gptask").setLevel(logging.ERROR)
    records = [json.loads(line) for line in Path(args.results).read_text().splitlines() if line.strip()]
    only = {f for f in args.families.split(",") if f}
    cells: dict[tuple, dict[str, dict[int, dict]]] = {}
    for rec in records:
        if only and rec["family"] not in only:
            continue
        cells.setdefault((rec["family"], rec["budget"]), {}).setdefault(rec["method"], {})[rec["seed"]] = rec
    for (fname, budget), by in sorted(cells.items()):
        if args.method not in by:
            continue
        fam = family(fname)
        regret = {s: scores(r, fam)["regret"] for s, r in by[args.method].items()}
        peer = {s: r for s, r in by.get(args.peer, {}).items()}
        for seed in sorted(regret, key=regret.get, reverse=True)[: args.worst]:
            run = rerun(fam, budget, seed)
            again = float(np.mean([t["final"] if t["final"] is not None else 1.0 for t in run["tasks"]]))
            peer_tasks = None
            if seed in peer:
                p = peer[seed]
                peer_tasks = [scores({**p, "values": [p["values"][i]], "params": [p["params"][i]]},
                                     _one_task(fam, i))["regret"] for i in range(len(fam.tasks))]
            print(f"\n### {fname}, {budget} runs/task, seed {seed}: {args.method} {regret[seed]:.3f} "
                  f"(rerun {again:.3f})" + (f", {args.peer} {np.mean(peer_tasks):.3f}" if peer_tasks else "")
                  + f"; mean over seeds {np.mean(list(regret.values())):.3f}\n")
            print("| task | init | final | at run | best run | " + args.peer + " |\n|---|---|---|---|---|---|")
            for i, t in enumerate(run["tasks"]):
                pt = "-" if peer_tasks is None else f"{peer_tasks[i]:.3f}"
                print(f"| {i} | {t['init']:.3f} | {t['final']:.3f} | {t['at']} | {t['best_run']:.3f} | {pt} |")
            print("\nFits: " + describe_fits(run["fits"]))
    return 0


def _one_task(fam: Any, i: int) -> Any:
    """``fam`` restricted to its task ``i`` (for scoring one task of a run)."""
    from dataclasses import replace

    return replace(fam, tasks=[fam.tasks[i]], f_opt=[fam.f_opt[i]], f_ref=[fam.f_ref[i]])


if __name__ == "__main__":
    sys.exit(main())
