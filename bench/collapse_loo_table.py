"""Side-by-side table of two tags of bench/suite.py runs (issue 45, the collapse rule): per family and budget, each
tag's mean normalised regret over seeds (worst seed), the paired difference (positive: the second tag better) with its
standard error, seeds won / lost, and whether every run's measured values are identical bit for bit.

    .venv/bin/python bench/collapse_loo_table.py main.jsonl after.jsonl --base mla@main --new mla@after
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from suite import scores  # noqa: E402
from suite_families import family  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("inputs", nargs="+")
    ap.add_argument("--base", required=True)
    ap.add_argument("--new", required=True)
    a = ap.parse_args(argv)
    by: dict[tuple, dict[str, dict[int, tuple[float, list]]]] = {}
    for path in a.inputs:
        for line in Path(path).read_text().splitlines():
            if line.strip():
                rec = json.loads(line)
                if rec["method"] in (a.base, a.new):
                    reg = scores(rec, family(rec["family"]))["regret"]
                    by.setdefault((rec["family"], rec["budget"]), {}).setdefault(rec["method"], {})[rec["seed"]] = (
                        reg, rec["values"])
    print(f"| family | runs/task | seeds | {a.base}: mean (worst) | {a.new}: mean (worst) | {a.new} better by (se) | "
          "seeds won / lost | values identical |")
    print("|---|---|---|---|---|---|---|---|")
    for (fname, budget), cell in sorted(by.items()):
        seeds = sorted(set(cell.get(a.base, {})) & set(cell.get(a.new, {})))
        if not seeds:
            continue
        b = np.array([cell[a.base][k][0] for k in seeds])
        n = np.array([cell[a.new][k][0] for k in seeds])
        d = b - n
        se = float(d.std(ddof=1) / np.sqrt(len(d))) if len(d) > 1 else float("nan")
        same = sum(cell[a.base][k][1] == cell[a.new][k][1] for k in seeds)
        print(f"| {fname} | {budget} | {len(seeds)} | {b.mean():.3f} ({b.max():.3f}) | {n.mean():.3f} ({n.max():.3f}) | "
              f"{d.mean():+.4f} ({se:.4f}) | {int((d > 0).sum())} / {int((d < 0).sum())} | {same} of {len(seeds)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
