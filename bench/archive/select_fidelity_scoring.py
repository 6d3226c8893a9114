"""select_sources=True with fidelity: which of this machine's design runs should judge the sources?
Every run of the fidelity schedule's designs (every level's; the default) or the tuned tasks'
target-level runs alone (``gptask.sources.multisource.SELECT_TARGET_RUNS_ONLY = True``, which this
script sets: it belongs in bench/archive/).

The problem of tests/test_fidelity.py (tuned task n=2, iterations 1000 / 333 / 111 / 37, a cheap
level that ranks like the target), two sources: ``good`` (another machine's runs of tasks n=2, 3 at
1000 and 111, the same function) and ``bad`` (the same configurations with random values in
[0, 0.5], about the target's range). n_initial 10 (the target's design 5 runs, 19 design runs in all),
cost_budget 6.3 (the designs and a round). Per seed and scoring: the gain of each source (held-out
log density with it minus without it, nats, at the round that decided it) and the verdict.

    nice -n 5 python bench/archive/select_fidelity_scoring.py --seeds 0-11 --out bench/results/select_fidelity_scoring.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))

from row_files import parse_seeds  # noqa: E402


def run(seed: int, target_only: bool) -> dict:
    import gptask as gt
    from gptask.sources import multisource
    from test_fidelity import FAST, _source_rows, problem

    multisource.SELECT_TARGET_RUNS_ONLY = target_only
    good = _source_rows(1000) + _source_rows(111)
    rng = np.random.default_rng(seed)
    bad = [{**r, "value": float(rng.random() * 0.5), "machine.label": "bad"} for r in good]
    r = gt.tune(problem(), [{"n": 2}], sources=[good, bad], select_sources=True, cost_budget=6.3, n_initial=10,
                seed=seed, provenance="here", **FAST)
    s = r.source_selection
    return {"seed": seed, "scored": "target runs" if target_only else "every run", "runs": s.target_runs,
            "kept": s.kept, "gain": {str(x.source): x.gain for x in s.scores}}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=parse_seeds, default=parse_seeds("0-11"))
    ap.add_argument("--out", default="bench/results/select_fidelity_scoring.json")
    args = ap.parse_args(argv)
    rows = []
    for seed in args.seeds:
        for target_only in (False, True):
            t0 = time.perf_counter()
            row = run(seed, target_only)
            row["wall_seconds"] = time.perf_counter() - t0
            rows.append(row)
            print(json.dumps(row), flush=True)
    Path(args.out).write_text(json.dumps({"command": "python bench/archive/select_fidelity_scoring.py "
                                          + " ".join(sys.argv[1:]), "rows": rows}, indent=1))
    for scored in ("every run", "target runs"):
        mine = [r for r in rows if r["scored"] == scored]
        for k, name in (("0", "good"), ("1", "bad")):
            gains = [r["gain"][k] for r in mine]
            dropped = sum(int(k) not in r["kept"] for r in mine)
            print(f"{scored}: {name} mean gain {np.mean(gains):+.2f} nats (min {min(gains):+.1f}), dropped on "
                  f"{dropped} of {len(mine)} seeds")
    return 0


if __name__ == "__main__":
    sys.exit(main())
