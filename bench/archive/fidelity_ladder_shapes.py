"""Which fidelity levels a continuous fidelity should get under a cost floor (issue 44, session 33):
gptask with fidelity on bench/multifidelity.py's families with the ladder 1, 1/3, 1/9, 1/27 (cost
0.1 + 0.9 s^2: 1, 0.2, 0.111, 0.101) cut to a fixed shape, the cost spacing of run_levels off
(LEVEL_COST_RATIO 1), rows as bench/multifidelity.py writes them (method ``gptask_mf_<shape>``):

* ``ends``: the target and 1/27 (what ``gptask_mf_cost3`` of bench/multifidelity.py runs); ``ends9``:
  the target and 1/9; ``mid``: 1, 1/3 and 1/27 (what today's default, ``gptask_mf``, runs: the rows are
  the same run for run);
* not here: 1, 1/3, 1/9 (the first version of the rule, 5628cd7) and 1, 1/3 (``MAX_LEVELS = 2``).

    python bench/archive/fidelity_ladder_shapes.py ends|ends9|mid hartmann3,branin 0-9 OUT.json
    python bench/multifidelity.py report --out OUT.json ...
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository

import multifidelity as mf  # noqa: E402
import multifidelity_families as mff  # noqa: E402
from module_constants import constants_set  # noqa: E402
from row_files import load_rows, parse_seeds, save_rows  # noqa: E402

import gptask.problem.definition as definition  # noqa: E402
from gptask.tuning import fidelity as fm  # noqa: E402

SHAPES = {"ends": (0, 3), "ends9": (0, 2), "mid": (0, 1, 3)}


def main() -> int:
    shape, families, seeds, out = sys.argv[1], sys.argv[2].split(","), parse_seeds(sys.argv[3]), sys.argv[4]
    keep = SHAPES[shape]
    ladder = definition.fidelity_levels
    definition.fidelity_levels = lambda f, t: (lambda L: [L[k] for k in keep] if len(L) == 4 else L)(ladder(f, t))
    method = f"gptask_mf_{shape}"
    for name in families:
        fam = mff.family(name)
        for seed in seeds:
            doc = load_rows(out)
            if any(r["family"] == name and r["method"] == method and r["seed"] == seed for r in doc["rows"]):
                continue
            t0 = time.perf_counter()
            with constants_set(fm, {"LEVEL_COST_RATIO": 1.0}):
                evals = mf.run_gptask_mf(fam, mf.DEFAULT_BUDGET, seed)
            row = {"family": name, "method": method, "seed": seed, "budget": mf.DEFAULT_BUDGET, "evals": evals,
                   "wall_seconds": time.perf_counter() - t0}
            row["regret"] = mf.regret_curve(fam, row)
            doc["rows"].append(row)
            save_rows(out, doc)
            print(name, method, seed, " ".join(f"{r:.3g}" for r in row["regret"]), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
