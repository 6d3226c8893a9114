"""Whether inputs a GPU programmer would derive help the LCM rank the convolution campaign (issue 23).

    PYTHONPATH=. python bench/archive/derived_inputs_ranking.py [RUNS_PER_TASK] [SEEDS]   (default 20 6)

The test of model_ranking.py (RUNS_PER_TASK random completed configurations per GPU, log times
standardised per GPU, gptask's LCM over all GPUs with the tuner's prior and kernel), fitted once on
the encoded parameters alone ("plain", which reproduces model_ranking.py's LCM line) and once with
four derived columns appended, scaled to [0, 1] over the campaign: log2 of the threads per block
(block_size_x * block_size_y), of the work per thread (tile_size_x * tile_size_y), of the shared-memory
tile ((block_size_x * tile_size_x + 14) * (block_size_y * tile_size_y + 14), 0 without shared memory)
and of the pixels per block. Printed: Spearman on the unseen configurations and the fraction of the
optimum of the best of the 5 predicted fastest, per seed, then the means (worst seed).
"""

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import model_ranking as mr  # noqa: E402
import suite_families as sf  # noqa: E402
from gptask.model.numerics import LCM  # noqa: E402
from gptask.model.numerics.defaults import SURROGATE_KERNEL  # noqa: E402
from gptask.model.numerics.priors import LCMPrior  # noqa: E402

FILTER_SIZE = 15  # the campaign's filter width and height


def derived(fam: sf.Family, t: int) -> np.ndarray:
    """The four derived inputs (n, 4) of task t's allowed configurations, in its domain's order."""
    dom = fam.problem.domain(fam.tasks[t])
    ps = dom.params(np.arange(len(dom)))

    def col(name: str) -> np.ndarray:
        return np.array([float(p[name]) for p in ps])

    bx, by, tx, ty = col("block_size_x"), col("block_size_y"), col("tile_size_x"), col("tile_size_y")
    halo = FILTER_SIZE - 1
    tile = np.log2((bx * tx + halo) * (by * ty + halo)) * col("use_shmem")
    return np.column_stack([np.log2(bx * by), np.log2(tx * ty), tile, np.log2(bx * tx * by * ty)])


def main(n: int, seeds: int) -> None:
    data = mr.campaign()
    fam = sf.family("convolution")
    T = len(data)
    extra = [derived(fam, t) for t in range(T)]
    lo, hi = np.min([d.min(0) for d in extra], 0), np.max([d.max(0) for d in extra], 0)
    inputs = {"plain": [data[t][0] for t in range(T)],
              "derived": [np.hstack([data[t][0], (extra[t] - lo) / (hi - lo)]) for t in range(T)]}
    res: dict[str, list[tuple[float, float]]] = {}
    for seed in range(seeds):
        idx, ys = mr.sample(data, n, seed)
        for name, X in inputs.items():
            prior = LCMPrior(dimension=7.0 if name == "plain" else 11.0)
            model = LCM(kernel=SURROGATE_KERNEL).fit([X[t][idx[t]] for t in range(T)], ys, restarts=3, seed=seed,
                                                     prior=prior)
            rho, frac = mr.scores([model.predict(t, X[t])[0] for t in range(T)], data, idx)
            res.setdefault(name, []).append((rho, frac))
            print(f"seed {seed} {name:8s} Spearman {rho:.3f}  best of top {mr.TOP} {frac:.3f}", flush=True)
    for name, v in res.items():
        a = np.array(v)
        print(f"{name:8s} Spearman {a[:, 0].mean():.3f} ({a[:, 0].min():.3f})  best of top {mr.TOP} "
              f"{a[:, 1].mean():.3f} ({a[:, 1].min():.3f})")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 20, int(sys.argv[2]) if len(sys.argv) > 2 else 6)
