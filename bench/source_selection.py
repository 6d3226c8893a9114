"""Issue 24: does ``select_sources=True`` drop a source that misleads and keep one that helps?

    PYTHONPATH=. python bench/source_selection.py run [--seeds 0-9] [--out bench/results_source_selection.json]
    PYTHONPATH=. python bench/source_selection.py report [--out ...]

A family with a known optimum: task ``a`` in [0, 1], parameters x, y in [0, 1], the time
``1 + (x - c)^2 + 2 (y - d)^2`` with its minimum 1 at c = 0.2 + 0.6 a, d = 0.7 - 0.3 a. This
machine tunes a = 0.3 and 0.7 (12 runs each, 6 of them the initial design). Two other machines
measured 40 random configurations (drawn once) at a = 0.1, 0.5 and 0.9 each:

* **twin**: the same function (a machine whose best configurations are this one's);
* **shifted**: the same bowl with its minimum at x = 0.95 - 0.1 a, y = 0.1 (a machine whose
  landscape looks alike but whose best configurations are elsewhere).

Arms: no source, each source alone, both, and the three source arms with ``select_sources=True``.
Score: the regret ``best - 1`` after 12 runs, mean over the two tasks; over seeds the mean and the
worst seed; for the selected arms, how often each source was kept.
"""

from __future__ import annotations

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

log = logging.getLogger("bench.source_selection")

BUDGET, TARGET_TASKS, SOURCE_TASKS, PER_SOURCE_TASK = 12, (0.3, 0.7), (0.1, 0.5, 0.9), 40
HERE = {"label": "here", "cores": 2}
#: arm -> (source names, select_sources)
ARMS = {"none": ((), False), "twin": (("twin",), False), "shifted": (("shifted",), False),
        "both": (("twin", "shifted"), False), "twin, selected": (("twin",), True),
        "shifted, selected": (("shifted",), True), "both, selected": (("twin", "shifted"), True)}


def _time(a: float, x: float, y: float) -> float:
    return 1.0 + (x - (0.2 + 0.6 * a)) ** 2 + 2.0 * (y - (0.7 - 0.3 * a)) ** 2


def _shifted(a: float, x: float, y: float) -> float:
    return 1.0 + (x - (0.95 - 0.1 * a)) ** 2 + 2.0 * (y - 0.1) ** 2


def problem() -> gt.Problem:
    return gt.Problem(gt.Space([gt.Real("a", 0.0, 1.0)]), gt.Space([gt.Real("x", 0.0, 1.0), gt.Real("y", 0.0, 1.0)]),
                      lambda t, p: _time(t["a"], p["x"], p["y"]), name="bowl_across_machines", unit="s")


def source_rows(name: str) -> list[dict[str, Any]]:
    """The machine's measurements (the same for every seed), with its record in machine.* columns."""
    fn = {"twin": _time, "shifted": _shifted}[name]
    rng = np.random.default_rng({"twin": 100, "shifted": 101}[name])
    return [{"a": a, "x": float(x), "y": float(y), "value": fn(a, float(x), float(y)), "machine.label": name,
             "machine.cores": 8} for a in SOURCE_TASKS for x, y in rng.random((PER_SOURCE_TASK, 2))]


def run_one(arm: str, seed: int) -> dict[str, Any]:
    names, select = ARMS[arm]
    tasks = [{"a": a} for a in TARGET_TASKS]
    t0 = time.perf_counter()
    if names:
        res = gt.tune(problem(), tasks, BUDGET, seed=seed, progress=False, provenance=HERE,
                      sources=[source_rows(n) for n in names], select_sources=select)
    else:
        res = gt.tune(problem(), tasks, BUDGET, seed=seed, progress=False)
    best = [min(t.value for t in res.history if t.ok and t.task.get("machine", "here") == "here"
                and t.task["a"] == a) for a in TARGET_TASKS]
    row = {"arm": arm, "seed": seed, "regret": float(np.mean(best)) - 1.0, "seconds": time.perf_counter() - t0}
    if res.source_selection is not None:
        row["kept"] = [names[k] for k in res.source_selection.kept]
    return row


def cmd_run(seeds: list[int], out: str) -> None:
    doc = load_rows(out)
    done = {(r["arm"], r["seed"]) for r in doc["rows"]}
    for seed in seeds:
        for arm in ARMS:
            if (arm, seed) in done:
                continue
            row = run_one(arm, seed)
            doc["rows"].append(row)
            log.info("%s, seed %d: regret %.2g%s", arm, seed, row["regret"],
                     f", kept {row['kept']}" if "kept" in row else "")
            save_rows(out, doc)


def report(doc: dict) -> str:
    lines = ["| sources | mean regret after 12 runs | worst seed | kept (of the seeds) |", "|---|---|---|---|"]
    for arm in ARMS:
        rows = [r for r in doc["rows"] if r["arm"] == arm]
        if not rows:
            continue
        reg = np.array([r["regret"] for r in rows])
        kept = ""
        if ARMS[arm][1]:
            kept = ", ".join(f"{n} {sum(n in r['kept'] for r in rows)}" for n in ARMS[arm][0])
        lines.append(f"| {arm} | {reg.mean():.4f} | {reg.max():.4f} | {kept} |")
    n = len({r["seed"] for r in doc["rows"]})
    return "\n".join([f"{n} seeds; regret = best time found - 1 (the optimum), mean over the two tasks.", "", *lines])


def main(argv: list[str] | None = None) -> int:
    return command_line(__doc__.split("\n")[0], ROOT / "bench" / "results_source_selection.json", cmd_run, report,
                        argv, quiet=("gptask.model.numerics.lcm", "gptask.data.provenance"))


if __name__ == "__main__":
    sys.exit(main())
