"""What complete knowledge of the other GPUs gives a new one (issue 24's leave-one-GPU-out targets).

    PYTHONPATH=. python bench/archive/logo_ceiling.py

For each GPU of the recorded convolution campaign held out in turn, configurations are chosen from
the *complete* measurements of the other five (every allowed configuration each, 21,000 in all;
the tuned sources of ``bench/leave_one_gpu_out.py`` have 40 runs each) by simple rules, without
looking at the held-out GPU, and scored as the fraction of its optimum reached by the best of them:

* ``optima``: the other GPUs' true optima (5 runs; the issue's "oracle", 0.87);
* ``consensus k``: the k configurations of least mean log time over the other GPUs (the run-free
  rule of gptask/transfer/tla1.py, on measurements instead of a model), k = 1, 5, 10;
* ``top 2 each``: each other GPU's two fastest (10 runs);
* ``optima + consensus 5``: both (10 runs at most).

Only configurations that ran on all six GPUs are candidates (a failed one on any is left out).
Also per rule: whether the five GPUs of one vendor alone do better (they do not).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from gptask.sources.replay import read_recording  # noqa: E402
from suite_families import CONVOLUTION_DIR, CONVOLUTION_GPUS  # noqa: E402

VENDOR = {"A100": "nvidia", "A4000": "nvidia", "A6000": "nvidia", "MI250X": "amd", "W6600": "amd", "W7800": "amd"}


def times() -> np.ndarray:
    """(6, n) seconds of the configurations every GPU lists, NaN where one failed."""
    recs = [read_recording(CONVOLUTION_DIR / f"{g}.json.gz") for g in CONVOLUTION_GPUS]
    keys = sorted(set.intersection(*[set(r.results) for r in recs]), key=str)
    return np.array([[v if isinstance(v := r.results[k], (int, float)) else np.nan for k in keys] for r in recs])


def consensus(T: np.ndarray, rows: list[int]) -> np.ndarray:
    """Column order by mean log time over ``rows`` (configurations failing on any of them last)."""
    L = np.log(T[rows])
    score = np.where(np.isnan(L).any(axis=0), np.inf, np.nan_to_num(L).mean(axis=0))
    return np.argsort(score, kind="stable")


def fraction(T: np.ndarray, h: int, picks: list[int]) -> float:
    got = T[h, picks]
    return float(np.nanmin(T[h]) / np.nanmin(got)) if np.isfinite(got).any() else 0.0


def main() -> int:
    T = times()
    n = len(CONVOLUTION_GPUS)
    rules: dict[str, list[float]] = {}
    for h, gpu in enumerate(CONVOLUTION_GPUS):
        others = [j for j in range(n) if j != h]
        same = [j for j in others if VENDOR[CONVOLUTION_GPUS[j]] == VENDOR[gpu]]
        optima = [int(np.nanargmin(T[j])) for j in others]
        order = consensus(T, others)
        picks = {
            "optima (5 runs)": optima,
            "consensus 1 (run-free)": list(order[:1]),
            "consensus 1, same vendor only": list(consensus(T, same)[:1]),
            "consensus 5": list(order[:5]),
            "consensus 10": list(order[:10]),
            "top 2 each (10 runs)": [int(k) for j in others for k in np.argsort(np.nan_to_num(T[j], nan=np.inf))[:2]],
            "optima + consensus 5 (10 runs)": optima + list(order[:5]),
        }
        for name, p in picks.items():
            rules.setdefault(name, []).append(fraction(T, h, [int(k) for k in p]))
    print("| rule | " + " | ".join(CONVOLUTION_GPUS) + " | mean | worst |")
    print("|---|" + "---|" * (n + 2))
    for name, got in rules.items():
        print(f"| {name} | " + " | ".join(f"{v:.3f}" for v in got) + f" | {np.mean(got):.3f} | {min(got):.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
