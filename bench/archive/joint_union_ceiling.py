"""How much better cross-task choices could do in a joint convolution run (issue 23's targets).

    PYTHONPATH=. python bench/archive/joint_union_ceiling.py --budget 40 --seeds 0-31

The six GPUs of the recorded convolution campaign are tuned jointly (``gt.tune``, the default, the
budget per GPU, the seed's run, as ``bench/suite.py`` does). Then, looking at each GPU's recording
(an oracle no tuner has), two fractions of its optimum:

* ``own``: the best the GPU's own runs reached (the suite's score);
* ``union``: the best on that GPU of *every* configuration any of the six measured in the run
  (about 6 x budget of them), as if each GPU had also run, for free, whichever of the others' runs
  suits it best.

``union`` bounds what any rule for sharing configurations between the GPUs can add to the run's
searches without running anything new: a method that reaches more must find configurations none of
the six GPUs measured. Prints a line per seed and the means over GPUs and seeds (worst seed).
With ``--where``, also a line for each GPU that another GPU's runs would lift by more than
``MARGIN`` of its optimum: which GPU ran the best such configuration, and its rank there (1: that
GPU's fastest).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import gptask as gt  # noqa: E402
from gptask.sources.replay import read_recording  # noqa: E402
from gptask.data.trials import point_key  # noqa: E402
from run_free_sources import fractions  # noqa: E402
from suite_families import CONVOLUTION_DIR, CONVOLUTION_GPUS, family  # noqa: E402

MARGIN = 0.02


def ranked_runs(res: gt.TuningResult, n_tasks: int) -> list[list[dict]]:
    """Per task, the configurations of its completed runs, fastest first."""
    return [[t.params for t in sorted((t for t in res.history if t.task_index == j and t.status is gt.Status.COMPLETE),
                                      key=lambda t: t.value)] for j in range(n_tasks)]


def where(ranked: list[list[dict]], recs: list, own: np.ndarray) -> list[str]:
    """For each GPU another GPU's runs would lift by more than MARGIN: where the best of them ran."""
    out = []
    for i, rec in enumerate(recs):
        best = None
        for j, runs in enumerate(ranked):
            if j == i or not runs:
                continue
            got = fractions(rec, runs)
            top = float(got.max())
            if top > own[i] + MARGIN and (best is None or top > best[0]):
                best = (top, j, int(np.argmax(got)) + 1)
        if best is not None:
            out.append(f"  {CONVOLUTION_GPUS[i]} {own[i]:.3f} -> {best[0]:.3f}: {CONVOLUTION_GPUS[best[1]]}'s "
                       f"rank {best[2]}")
    return out


def own_and_union(budget: int, seed: int, fam, recs, show_where: bool = False) -> tuple[np.ndarray, np.ndarray, int]:
    """(own (6,), union (6,), configurations measured by any GPU) for one joint run."""
    res = gt.tune(fam.problem, tasks=fam.tasks, budget=budget, seed=seed, progress=False)
    ranked = ranked_runs(res, len(recs))
    union = list({point_key(t.params): t.params for t in res.history}.values())
    own = np.array([fractions(rec, runs).max() for rec, runs in zip(recs, ranked)])
    best = np.array([fractions(rec, union).max() for rec in recs])
    if show_where:
        print("\n".join(where(ranked, recs, own)))
    return own, best, len(union)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget", type=int, default=40, help="runs per GPU")
    ap.add_argument("--seeds", default="0-31", help="a range A-B")
    ap.add_argument("--where", action="store_true", help="where the configurations that lift a GPU ran")
    args = ap.parse_args(argv)
    a, b = (int(x) for x in args.seeds.split("-"))
    fam = family("convolution")
    recs = [read_recording(CONVOLUTION_DIR / f"{g}.json.gz") for g in CONVOLUTION_GPUS]
    own, union = [], []
    for seed in range(a, b + 1):
        o, u, n = own_and_union(args.budget, seed, fam, recs, args.where)
        own.append(o)
        union.append(u)
        print(f"seed {seed}: {n} configurations measured; own {o.mean():.3f}, union {u.mean():.3f}", flush=True)
    print(f"{args.budget} runs per GPU, seeds {a}-{b}; fraction of the optimum per GPU ({', '.join(CONVOLUTION_GPUS)}), "
          "mean (worst seed)")
    for name, table in (("own", np.array(own)), ("union", np.array(union))):
        print(f"{name:5s} " + " ".join(f"{x:.3f}" for x in table.mean(0))
              + f" | {table.mean():.3f} ({table.mean(1).min():.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
