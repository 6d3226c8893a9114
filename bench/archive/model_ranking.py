"""How well models fitted on random runs rank a recorded campaign's unseen configurations (issue 23).

    PYTHONPATH=. python bench/archive/model_ranking.py [RUNS_PER_TASK] [SEEDS]   (default 20 6)

On the convolution campaign (bench/suite_families.py), per seed: RUNS_PER_TASK random completed
configurations per GPU; fitted on them (log times standardised per GPU): gptask's LCM over all GPUs
(the tuner's prior and kernel), one GP per GPU, and scikit-learn's random forest and extra trees
(GPU one-hot as a feature), and, where torch is installed, the two free-form ICM models of
bench/archive/icm_kernels.py (product and additive kernels). Printed per model: the Spearman rank correlation of predicted and
measured times on every unseen completed configuration (mean over GPUs, then seeds; the worst seed
in brackets), and the fraction of the optimum of the best of the 5 unseen configurations predicted
fastest.
"""

import sys
from pathlib import Path

import numpy as np
from scipy.stats import spearmanr
from sklearn.ensemble import ExtraTreesRegressor, RandomForestRegressor

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import suite_families as sf  # noqa: E402
from gptask.model.numerics import LCM  # noqa: E402
from gptask.model.numerics.defaults import SURROGATE_KERNEL  # noqa: E402
from gptask.model.numerics.priors import LCMPrior  # noqa: E402

TOP = 5

try:
    from icm_kernels import FreeICM
except ImportError:  # torch missing
    FreeICM = None


def campaign() -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Per GPU: the encoded allowed configurations, their log times (NaN where failed), and a mask of the completed."""
    fam = sf.family("convolution")
    out = []
    for task in fam.tasks:
        dom = fam.problem.domain(task)
        vals = []
        for p in dom.params(np.arange(len(dom))):
            try:
                vals.append(float(fam.problem.objective(task, p)))
            except Exception:  # a failed configuration of the recording
                vals.append(np.nan)
        y = np.log(np.array(vals))
        out.append((dom.encode(np.arange(len(dom))), y, np.isfinite(y)))
    return out


def sample(data: list, n: int, seed: int) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Per GPU: the row numbers of ``n`` random completed configurations, and their log times
    standardised per GPU."""
    rng = np.random.default_rng(seed)
    idx = [rng.choice(np.flatnonzero(ok), n, replace=False) for _, _, ok in data]
    ys = [(y[i] - y[i].mean()) / y[i].std() for (_, y, _), i in zip(data, idx)]
    return idx, ys


def scores(preds: list[np.ndarray], data: list, idx: list[np.ndarray]) -> tuple[float, float]:
    """Mean over GPUs of the Spearman correlation of ``preds`` (per GPU, every configuration) with
    the measured times on the unseen completed configurations, and of the fraction of the optimum
    of the best of the TOP unseen configurations predicted fastest."""
    r, f = [], []
    for P, (_, y, ok), i in zip(preds, data, idx):
        unseen = ok.copy()
        unseen[i] = False
        r.append(spearmanr(P[unseen], y[unseen])[0])
        best = y[np.flatnonzero(unseen)[np.argsort(P[unseen])[:TOP]]].min()
        f.append(float(np.exp(np.nanmin(y) - best)))
    return float(np.mean(r)), float(np.mean(f))


def main(n: int, seeds: int) -> None:
    data = campaign()
    fam = sf.family("convolution")
    slices = fam.problem.domain(fam.tasks[0]).space.column_slices()
    T, dim = len(data), 7.0
    rho: dict[str, list[float]] = {}
    top: dict[str, list[float]] = {}
    for seed in range(seeds):
        idx, ys = sample(data, n, seed)
        Xs = [data[i][0][idx[i]] for i in range(T)]
        prior = LCMPrior(dimension=dim)
        joint = LCM(kernel=SURROGATE_KERNEL).fit(Xs, ys, restarts=3, seed=seed, prior=prior)
        preds = {"LCM, all GPUs": [joint.predict(i, data[i][0])[0] for i in range(T)],
                 "GP per GPU": [LCM(kernel=SURROGATE_KERNEL).fit([Xs[i]], [ys[i]], restarts=3, seed=seed, prior=prior)
                                .predict(0, data[i][0])[0] for i in range(T)]}
        F = np.vstack([np.hstack([Xs[i], np.tile(np.eye(T)[i], (n, 1))]) for i in range(T)])
        for name, cls in (("random forest", RandomForestRegressor), ("extra trees", ExtraTreesRegressor)):
            trees = cls(n_estimators=300, min_samples_leaf=2, max_features=0.5, random_state=seed).fit(F, np.concatenate(ys))
            preds[name] = [trees.predict(np.hstack([data[i][0], np.tile(np.eye(T)[i], (len(data[i][0]), 1))]))
                           for i in range(T)]
        if FreeICM is not None:
            X, t = np.vstack(Xs), np.repeat(np.arange(T), n)
            for kind in ("product", "additive"):
                icm = FreeICM(kind, T, X.shape[1], slices).fit(X, t, np.concatenate(ys), seed=seed)
                preds[f"free ICM, {kind}"] = [icm.predict(i, data[i][0]) for i in range(T)]
        for name, P in preds.items():
            r, f = scores(P, data, idx)
            rho.setdefault(name, []).append(r)
            top.setdefault(name, []).append(f)
    print(f"{n} random runs per GPU, {seeds} seeds: Spearman on the unseen (worst seed), best of the top {TOP}")
    for name in rho:
        print(f"  {name:24s} {np.mean(rho[name]):.3f} ({min(rho[name]):.3f})   {np.mean(top[name]):.3f}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 20, int(sys.argv[2]) if len(sys.argv) > 2 else 6)
