"""The convolution campaign's worst seed (issue 45): per method of a suite JSON-lines file, the fraction
of the optimum over seeds (mean, worst seed and the seed), per GPU, and paired differences against a
base method on the seeds both ran.

    python bench/convolution_worst.py F... --base mla@base [--budget 40] [--json OUT]
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from suite_families import family  # noqa: E402


def read(paths: list[str], budget: int) -> dict[str, dict[int, np.ndarray]]:
    """method -> seed -> fraction of the optimum per GPU (6,)."""
    fam = family("convolution")
    out: dict[str, dict[int, np.ndarray]] = {}
    for p in paths:
        opener = gzip.open if p.endswith(".gz") else open
        with opener(p, "rt") as fh:
            for line in fh:
                rec = json.loads(line)
                if rec["family"] != "convolution" or rec["budget"] != budget:
                    continue
                fr = [f / min(v for v in vals if v is not None) if any(v is not None for v in vals) else 0.0
                      for f, vals in zip(fam.f_opt, rec["values"])]
                out.setdefault(rec["method"], {})[int(rec["seed"])] = np.array(fr)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("inputs", nargs="+")
    ap.add_argument("--base", default="")
    ap.add_argument("--budget", type=int, default=40)
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    runs = read(args.inputs, args.budget)
    gpus = [t["gpu"].split()[-1] for t in family("convolution").tasks]
    summary = {}
    print(f"| method | seeds | mean | worst seed (seed) | {' | '.join(gpus)} | paired difference vs {args.base} (se) | won / lost |")
    print("|---|---|---|---|" + "---|" * len(gpus) + "---|---|")
    for method, by_seed in sorted(runs.items()):
        seeds = sorted(by_seed)
        per_seed = np.array([by_seed[s].mean() for s in seeds])
        per_gpu = np.mean([by_seed[s] for s in seeds], axis=0)
        w = int(np.argmin(per_seed))
        diff = ""
        row = {"seeds": seeds, "per_seed": per_seed.round(4).tolist(), "mean": float(per_seed.mean()),
               "worst": float(per_seed[w]), "worst_seed": seeds[w], "per_gpu": dict(zip(gpus, per_gpu.round(4).tolist()))}
        if args.base and method != args.base and args.base in runs:
            both = [s for s in seeds if s in runs[args.base]]
            d = np.array([by_seed[s].mean() - runs[args.base][s].mean() for s in both])
            if len(d) > 1:
                se = d.std(ddof=1) / np.sqrt(len(d))
                diff = f"{d.mean():+.3f} ({se:.3f}) on {len(d)} | {int((d > 0).sum())} / {int((d < 0).sum())}"
                row.update(paired_seeds=both, paired_diff=float(d.mean()), paired_se=float(se))
        summary[method] = row
        print(f"| {method} | {len(seeds)} | {per_seed.mean():.3f} | {per_seed[w]:.3f} ({seeds[w]}) | "
              + " | ".join(f"{g:.3f}" for g in per_gpu) + f" | {diff or '-'} |")
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=1) + "\n")


if __name__ == "__main__":
    main()
