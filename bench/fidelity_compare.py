"""Side by side, paired by seed: a gptask_mf variant of bench/multifidelity.py against main's default
(gptask_mf) per family and checkpoint (issue 44). Rows of the same (family, seed) pair up; the
difference is the variant's regret minus the default's, its mean and standard error over the seeds,
the worst seed of each. A row run twice (identical by determinism) is taken once.

    python bench/fidelity_compare.py --variant gptask_mf_cheap --runs bench/results/fidelity_cheap11_a.json \\
        bench/results/fidelity_cheap11_b.json bench/results/fidelity_staged.json
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from multifidelity import CHECKPOINTS  # noqa: E402
from row_files import load_rows  # noqa: E402


def table(rows: list[dict], variant: str, base: str = "gptask_mf") -> str:
    """A markdown table: family, checkpoint, seeds, base mean (worst), variant mean (worst), mean
    difference +- standard error, and a verdict: lower / higher beyond 2 standard errors, or noise."""
    cell: dict[tuple[str, str, int], list[float]] = {}
    for r in rows:
        if r["method"] in (variant, base):
            cell.setdefault((r["family"], r["method"], r["seed"]), r["regret"])
    fams = list(dict.fromkeys(k[0] for k in cell if k[1] == variant))
    out = [f"| family | checkpoint | seeds | {base} | {variant} | difference (se) | verdict |",
           "| --- | --- | --- | --- | --- | --- | --- |"]
    for f in fams:
        seeds = sorted(s for (g, m, s) in cell if g == f and m == variant and (g, base, s) in cell)
        if not seeds:
            continue
        a = np.array([cell[(f, base, s)] for s in seeds])
        b = np.array([cell[(f, variant, s)] for s in seeds])
        d = b - a
        for k, cp in enumerate(CHECKPOINTS):
            mu = d[:, k].mean()
            se = d[:, k].std(ddof=1) / np.sqrt(len(seeds)) if len(seeds) > 1 else float("nan")
            verdict = "lower" if mu < -2 * se else "higher" if mu > 2 * se else "noise"
            out.append(f"| {f} | {int(cp * 100)} % | {len(seeds)} | {a[:, k].mean():.3f} ({a[:, k].max():.3f}) | "
                       f"{b[:, k].mean():.3f} ({b[:, k].max():.3f}) | {mu:+.3f} ({se:.3f}) | {verdict} |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--variant", required=True)
    ap.add_argument("--base", default="gptask_mf")
    ap.add_argument("--runs", nargs="+", required=True)
    args = ap.parse_args(argv)
    rows = [r for p in args.runs for r in load_rows(p)["rows"]]
    print(table(rows, args.variant, args.base))
    return 0


if __name__ == "__main__":
    sys.exit(main())
