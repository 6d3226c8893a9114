"""Collapsed fits over whole tuning runs (issue 45): each run of gptask's ``mla`` (bench/suite.py's call, a history in
a temporary file) read back fit by fit: how many fits' winners had a length scale shorter than the gap between its
input's values (collapsed), how many were refitted with the floor (defaults.LENGTHSCALE_GAP_FLOOR), how many held a
length scale at it, how many were left collapsed, and the run's regret. One JSON line per run.

    PYTHONPATH=$PWD .venv/bin/python bench/collapse_count.py --families gen:6,gen:11 --seeds 1,2 --budget 12
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from suite_families import family  # noqa: E402
from suite_worst import rerun  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--families", required=True)
    ap.add_argument("--seeds", default="1,2")
    ap.add_argument("--budget", type=int, default=12)
    ap.add_argument("--tag", default="")
    a = ap.parse_args(argv)
    logging.getLogger("gptask").setLevel(logging.ERROR)
    for name in a.families.split(","):
        fam = family(name)
        for seed in [int(s) for s in a.seeds.split(",")]:
            run = rerun(fam, a.budget, seed)
            fits = run["fits"]
            regret = float(np.mean([t["final"] if t["final"] is not None else 1.0 for t in run["tasks"]]))
            print(json.dumps({"family": name, "seed": seed, "budget": a.budget, "tag": a.tag, "fits": len(fits),
                              "refitted": sum(bool(f.get("collapse_refit")) for f in fits),
                              "at_floor": sum(bool(f.get("at_floor")) for f in fits),
                              "left_collapsed": sum(bool(f.get("collapsed")) for f in fits),
                              "left_collapsed_fits": [k + 1 for k, f in enumerate(fits) if f.get("collapsed")],
                              "regret": round(regret, 4)}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
