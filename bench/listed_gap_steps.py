"""How far each searched run of a listed-space run moves from its task's incumbent (issue 45, the listed gap against
BoTorch; bench/results/listed_gap.md): per method, over the searched runs (after the initial design) of every task,
the share that are grid neighbours of the incumbent (one input one list step away), the mean number of list steps
(L1 over inputs) from the incumbent, the share that improved on it, and how many distinct configurations a run's
searched runs over all its tasks are, per searched run (1: no two tasks ran the same configuration; 1/T: the T
tasks moved in lockstep). Reads bench/suite.py's run files (their
``params``); families ``gen:<seed>`` with listed spaces only.

    python bench/listed_gap_steps.py runs.jsonl [--families gen:763,gen:837]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from suite_generated import draw_spec, parse_name  # noqa: E402


def steps(records: list[dict]) -> dict[tuple[str, str], dict[str, float]]:
    """(family, method) -> {"neighbour": share, "l1": mean list steps, "improved": share, "n": searched runs,
    "distinct": mean over runs of distinct searched configurations / searched runs}."""
    acc: dict[tuple[str, str], list[tuple[int, int, int]]] = defaultdict(list)
    distinct: dict[tuple[str, str], list[float]] = defaultdict(list)
    for r in records:
        seed = parse_name(r["family"])
        if seed is None or "params" not in r:
            continue
        spec = draw_spec(seed)
        if spec.space_kind != "listed":
            continue
        n_init = r["budget"] // 2
        keys = [tuple(sorted(p.items())) for run in r["params"] for p in run[n_init:]]
        if keys:
            distinct[(r["family"], r["method"])].append(len(set(keys)) / len(keys))
        for vals, params in zip(r["values"], r["params"]):
            idx = np.array([[d.ordered.index(p[d.name]) for d in spec.dims] for p in params])
            for t in range(n_init, len(vals)):
                prev = [(v, k) for k, v in enumerate(vals[:t]) if v is not None]
                if not prev:
                    continue
                best_v, k = min(prev)
                l1 = int(np.abs(idx[t] - idx[k]).sum())
                acc[(r["family"], r["method"])].append((l1, int(vals[t] is not None and vals[t] < best_v), 1))
    out = {}
    for key, rows in acc.items():
        a = np.array(rows)
        out[key] = {"neighbour": float(np.mean(a[:, 0] == 1)), "l1": float(np.mean(a[:, 0])),
                    "improved": float(np.mean(a[:, 1])), "n": len(a),
                    "distinct": float(np.mean(distinct[key]))}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("inputs", nargs="+")
    ap.add_argument("--families", default="")
    a = ap.parse_args(argv)
    keep = set(a.families.split(",")) if a.families else None
    records = [json.loads(line) for f in a.inputs for line in Path(f).read_text().splitlines() if line.strip()]
    records = [r for r in records if keep is None or r["family"] in keep]
    print("| family | method | searched runs | grid neighbour of the incumbent | mean list steps from it | improved on it "
          "| distinct configurations per searched run |")
    print("|---|---|---|---|---|---|---|")
    for (fam, method), s in sorted(steps(records).items()):
        print(f"| {fam} | {method} | {s['n']} | {s['neighbour']:.2f} | {s['l1']:.2f} | {s['improved']:.2f} "
              f"| {s['distinct']:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
