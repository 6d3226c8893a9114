"""Issue 24: PDGEQRF across machines: another machine's measurements as sources, against none.

    PYTHONPATH=. python bench/cross_machine.py run [--seeds 0-4] [--out bench/results_cross_machine.json]
    PYTHONPATH=. python bench/cross_machine.py report [--out ...]   (the markdown table of the JSON file)

Two machines measured the project's own PDGEQRF driver (``apps/scalapack_qr``):

* **xeon2**, the 2-core development guest (``apps/scalapack_qr/data/grid_m*_n*.csv``: every block
  size in 1, 2, 4, ..., 256 for mb and nb with every process layout on 2 cores, four sizes, 2026-11-22);
* **xeon16**, a 16-core Xeon node (``apps/scalapack_qr/data/xeon16/runs.csv``, a copy of
  ``shared/data/pdgeqrf_xeon16``: about 74 configurations per size drawn at random from the 16-core
  space, eight sizes from 1000 x 1000 to 4000 x 4000, 2026-11-22).

One problem describes both (tasks m, n on a log scale in [128, 4000]; mb, nb log integers in
[1, 256], nproc, p, nth in [1, 16]); each machine's measurements are its partial landscape: the
tuner may propose only the configurations that machine measured for a task (``candidates``), and
a run is the recorded time (the fastest of repeated launches).

Two directions (5 seeds by default; BENCHMARKS.md gives 10), 30 runs per tuned task (6 initial), scored after
15 and 30:

* **16 cores tuned, 2-core sources**: the eight xeon16 sizes tuned with ``gt.tune`` alone, and
  with ``sources=`` the xeon2 measurements (40 configurations per size drawn once, seed 0, from
  each of its four grids: a 2-core campaign of the kind a user has on file, 160 measurements);
* **2 cores tuned, 16-core sources**: the four xeon2 sizes tuned alone, and with the xeon16
  measurements as sources (40 per size, 320).

A third arm gives the same sources with ``select_sources=True``: this machine's initial designs
run first and judge the source by leave-one-out (``gptask.sources.selection``), which keeps or drops it.

Score per tuned size: the fraction of the optimum's performance reached, ``best recorded time of
the size / best time found``; per seed the mean over the sizes; over seeds the mean and the worst.
What the sources gain or cost is reported per size and per budget.
"""

from __future__ import annotations

import csv
import logging
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import gptask as gt  # noqa: E402
from row_files import command_line, load_rows, save_rows  # noqa: E402
from suite_families import PDGEQRF16_RUNS, Lookup  # noqa: E402
from suite_families import landscape as partial_landscape  # noqa: E402

log = logging.getLogger("bench.cross_machine")

DATA = ROOT / "apps" / "scalapack_qr" / "data"
TASK_NAMES, PARAM_NAMES = ("m", "n"), ("mb", "nb", "nproc", "p", "nth")
BUDGETS, BUDGET, N_INITIAL = (15, 30), 30, 6
#: configurations per size taken from a machine's measurements when it is a source
SOURCE_PER_TASK = 40
#: the third arm: the sources judged by this machine's initial designs (``select_sources=True``)
SELECT = "select"
MACHINES = {
    "xeon2": {"label": "xeon2", "cpu": "Intel(R) Xeon(R) Processor", "cores": 2},
    "xeon16": {"label": "xeon16", "cpu": "Intel(R) Xeon(R) Processor", "cores": 16},
}
DIRECTIONS = {"16 cores tuned, 2-core sources": ("xeon16", "xeon2"),
              "2 cores tuned, 16-core sources": ("xeon2", "xeon16")}

Table = dict[tuple, dict[tuple, float]]


def _rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(line for line in fh if not line.startswith("#")))


def landscape(machine: str) -> Table:
    """Task (m, n) -> configuration (mb, nb, nproc, p, nth) -> the fastest recorded time (s)."""
    if machine == "xeon16":
        rows = _rows(PDGEQRF16_RUNS)
    else:
        rows = [r for path in sorted(DATA.glob("grid_m*_n*.csv")) for r in _rows(path)
                if r.get("status", "complete") == "complete"]
    return partial_landscape(rows, list(TASK_NAMES), list(PARAM_NAMES))


def problem(table: Table) -> gt.Problem:
    tasks = gt.Space([gt.Integer("m", 128, 4000, log=True), gt.Integer("n", 128, 4000, log=True)])
    params = gt.Space([gt.Integer("mb", 1, 256, log=True), gt.Integer("nb", 1, 256, log=True),
                       gt.Integer("nproc", 1, 16), gt.Integer("p", 1, 16), gt.Integer("nth", 1, 16)])
    lookup = Lookup(table, list(TASK_NAMES), list(PARAM_NAMES))
    return gt.Problem(tasks, params, lookup, candidates=lookup.measured, name="pdgeqrf_recorded", unit="s")


def source_rows(table: Table, machine: str) -> list[dict[str, Any]]:
    """SOURCE_PER_TASK configurations of every task of ``table`` (drawn once, seed 0), as rows with
    the machine's record in ``machine.*`` columns."""
    rng = np.random.default_rng(0)
    out = []
    for t, configs in sorted(table.items()):
        keys = sorted(configs)
        for k in rng.choice(len(keys), size=min(SOURCE_PER_TASK, len(keys)), replace=False):
            c = keys[int(k)]
            out.append({**dict(zip(TASK_NAMES, t)), **dict(zip(PARAM_NAMES, c)), "value": configs[c],
                        **{f"machine.{key}": v for key, v in MACHINES[machine].items()}})
    return out


def run_one(direction: str, seed: int, with_sources: bool | str) -> dict[str, Any]:
    """with_sources: False (none), True (the other machine's), or SELECT (them, judged first by
    ``select_sources=True``)."""
    target, other = DIRECTIONS[direction]
    table = landscape(target)
    prob = problem(table)
    tasks = [dict(zip(TASK_NAMES, t)) for t in sorted(table)]
    options: dict[str, Any] = dict(budget=BUDGET, n_initial=N_INITIAL, seed=seed, progress=False, max_failures=None)
    t0 = time.perf_counter()
    kept = None
    if with_sources:
        res = gt.tune(prob, tasks, sources=[source_rows(landscape(other), other)], provenance=MACHINES[target],
                      select_sources=with_sources == SELECT, **options)
        index = {tuple(t[k] for k in TASK_NAMES): i for i, t in enumerate(res.tasks) if t["machine"] == target}
        if res.source_selection is not None:
            kept = res.source_selection.kept
    else:
        res = gt.tune(prob, tasks, **options)
        index = {tuple(t[k] for k in TASK_NAMES): i for i, t in enumerate(res.tasks)}
    seconds = time.perf_counter() - t0
    out: dict[str, Any] = {}
    for b in BUDGETS:
        fractions = {}
        for t in sorted(table):
            done = [r["value"] for r in res.records(index[t])[:b]]
            fractions["x".join(map(str, t))] = min(table[t].values()) / min(done) if done else 0.0
        out[str(b)] = fractions
    row = {"direction": direction, "seed": seed, "sources": with_sources, "scores": out, "seconds": seconds}
    return row if kept is None else {**row, "kept": kept}


def cmd_run(seeds: list[int], out: str) -> None:
    doc = load_rows(out)
    done = {(r["direction"], r["seed"], r["sources"]) for r in doc["rows"]}
    for direction in DIRECTIONS:
        for seed in seeds:
            for with_sources in (False, True, SELECT):
                if (direction, seed, with_sources) in done:
                    continue
                row = run_one(direction, seed, with_sources)
                doc["rows"].append(row)
                log.info("%s, seed %d, sources %s: %s (%.0f s)", direction, seed, with_sources,
                         {b: round(float(np.mean(list(v.values()))), 3) for b, v in row["scores"].items()},
                         row["seconds"])
                save_rows(out, doc)


def report(doc: dict) -> str:
    lines = []
    for direction in DIRECTIONS:
        rows = [r for r in doc["rows"] if r["direction"] == direction]
        seeds = sorted({r["seed"] for r in rows if r["sources"]} & {r["seed"] for r in rows if not r["sources"]})
        if not seeds:
            continue
        by = {(r["sources"], r["seed"]): r["scores"] for r in rows}
        sizes = list(by[(False, seeds[0])][str(BUDGETS[0])])
        lines += [f"**{direction}** ({len(seeds)} seeds; fraction of the optimum, mean over seeds, worst seed in "
                  "brackets; the last row averages the sizes)", "",
                  "| size m x n | " + " | ".join(f"{b} runs: alone | {b}: with sources | {b}: gain" for b in BUDGETS) + " |",
                  "|---|" + "---|---|---|" * len(BUDGETS)]
        for size in [*sizes, "all sizes"]:
            cells = []
            for b in BUDGETS:
                def per_seed(src: bool) -> np.ndarray:
                    s = [by[(src, k)][str(b)] for k in seeds]
                    return np.array([np.mean(list(x.values())) if size == "all sizes" else x[size] for x in s])
                alone, with_src = per_seed(False), per_seed(True)
                cells += [f"{alone.mean():.3f} ({alone.min():.3f})", f"{with_src.mean():.3f} ({with_src.min():.3f})",
                          f"{with_src.mean() - alone.mean():+.3f}"]
            lines.append(f"| {size} | " + " | ".join(cells) + " |")
        secs = {src: np.mean([r["seconds"] for r in rows if r["sources"] == src]) for src in (False, True)}
        lines += ["", f"Tuner seconds per seed: alone {secs[False]:.0f}, with sources {secs[True]:.0f}.", ""]
        lines += _selected(rows, seeds, by)
    return "\n".join(lines)


def _selected(rows: list[dict], seeds: list[int], by: dict) -> list[str]:
    """The select_sources arm against the other two, over the sizes (when it was run)."""
    picked = {r["seed"]: r for r in rows if r["sources"] == SELECT and r["seed"] in seeds}
    if not picked:
        return []
    cells = []
    for b in BUDGETS:
        def mean(src: Any) -> np.ndarray:
            return np.array([np.mean(list((picked[k]["scores"] if src == SELECT else by[(src, k)])[str(b)].values()))
                             for k in sorted(picked)])
        got = {src: mean(src) for src in (False, True, SELECT)}
        cells.append(f"after {b} runs " + ", ".join(f"{name} {got[src].mean():.3f} ({got[src].min():.3f})" for name, src in
                                                     (("alone", False), ("with sources", True), ("selected", SELECT))))
    dropped = sum(not picked[k]["kept"] for k in picked)
    return [f"With `select_sources=True` ({len(picked)} seeds; the source dropped in {dropped}): "
            + "; ".join(cells) + ".", ""]


def main(argv: list[str] | None = None) -> int:
    return command_line(__doc__.split("\n")[0], ROOT / "bench" / "results_cross_machine.json", cmd_run, report, argv, quiet=())


if __name__ == "__main__":
    sys.exit(main())
