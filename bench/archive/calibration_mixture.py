"""Per seed, what the intervals need and what the folds say (issue 45, bench/results/calibrated.md, session 28).

``run``: for each record of bench/calibration_variants.py's ``run`` in the family-sizes given, the same fit
(bench/calibration.py's ``split``), then at its held-out points the raw model and a mixture over
``--draws`` Laplace draws of its hyperparameters (:meth:`LCM.laplace_draws`, each conditioned on the same
data; mean of the means, variance by the law of total variance): raw latent coverage, and the least
multiplier of the variances that brings it to 85 %. ``table``: per family-size those needs over the seeds
and their rank correlation with the library's latent factor (rule ``lib`` of calibration_variants.py, from
the records' folds).

    PYTHONPATH=$PWD OMP_NUM_THREADS=1 python bench/archive/calibration_mixture.py run RECORDS.jsonl OUT.jsonl \\
        --family-sizes "bbob-f1-d5|5,convolution|12"
    python bench/archive/calibration_mixture.py table RECORDS.jsonl OUT.jsonl
"""

from __future__ import annotations

import argparse
import copy
import json
import logging
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from calibration_variants import RULES, Z95, rule_vars  # noqa: E402

#: multipliers of the variances searched for the least one reaching 85 % coverage
GRID = np.logspace(-1.5, 2, 300)


def need_and_cover(r: np.ndarray, v: np.ndarray) -> dict[str, float | None]:
    """Raw coverage of residuals r (n,) with variances v (n,), the least GRID multiplier covering 85 %."""
    cov = (np.abs(r)[None] <= Z95 * np.sqrt(GRID[:, None] * v[None])).mean(1)
    return {"cov1": float(np.mean(np.abs(r) <= Z95 * np.sqrt(v))),
            "need85": float(GRID[np.argmax(cov >= 0.85)]) if (cov >= 0.85).any() else None,
            "msq": float(np.mean(r ** 2 / v)), "rmse": float(np.sqrt(np.mean(r ** 2)))}


def run(records: str, out_path: str, wanted: set[str], draws: int) -> None:
    from threadpoolctl import threadpool_limits

    from calibration import split
    from suite_families import family

    logging.getLogger("gptask").setLevel(logging.ERROR)
    threadpool_limits(1)
    out = Path(out_path)
    done = {json.loads(line)["key"] for line in out.read_text().splitlines()} if out.exists() else set()
    fams = {}
    for line in Path(records).read_text().splitlines():
        rec = json.loads(line)
        f, n, seed = rec["key"].split("|")
        if "error" in rec or rec["key"] in done or f"{f}|{n}" not in wanted:
            continue
        fam = fams.setdefault(f, family(f))
        data = split(fam, int(n), int(seed), 40)
        tuner = data["tuner"]
        model, transform = tuner.model, tuner.transform
        Xs, ys = model.data()
        mixture = []
        for params in model.laplace_draws(draws, seed=int(seed)):
            sub = copy.deepcopy(model)
            sub.condition(Xs, ys, params=params)
            mixture.append(sub)
        parts = []
        for i, p in enumerate(data["params"]):
            if not p:
                continue
            X = fam.problem.param_space.encode(p)
            truth = transform.forward(i, data["latent"][i])
            m, v = model.predict(i, X)
            ms, vs = (np.array(a) for a in zip(*(sub.predict(i, X) for sub in mixture)))
            mm = ms.mean(0)
            parts.append((truth - m, v, truth - mm, (vs + ms ** 2).mean(0) - mm ** 2))
        r, v, rm, vm = (np.concatenate(a) for a in zip(*parts))
        res = {"key": rec["key"], "n_draws": len(mixture), "single": need_and_cover(r, v), "mix": need_and_cover(rm, vm)}
        tuner.close()
        with out.open("a") as fh:
            fh.write(json.dumps(res) + "\n")
        logging.warning("%s done", rec["key"])


def table(records: str, mixture_path: str) -> None:
    from scipy.stats import spearmanr

    recs = {json.loads(line)["key"]: json.loads(line) for line in Path(records).read_text().splitlines()}
    by: dict[tuple[str, int], list[tuple[float, ...]]] = {}
    for line in Path(mixture_path).read_text().splitlines():
        m = json.loads(line)
        f, n, _ = m["key"].split("|")
        rec = recs[m["key"]]
        vl, _ = rule_vars(rec, int(n), RULES["lib"])
        factor = float(np.median(vl / np.array(rec["test"]["v"])))
        by.setdefault((f, int(n)), []).append((factor, m["single"]["need85"], m["mix"]["need85"], m["single"]["cov1"],
                                               m["mix"]["cov1"]))
    print("| family | points/task | raw coverage, single fit / mixture (mean) | least multiplier to 85 % per seed, "
          "single fit | mixture | `lib`'s latent factor per seed | rank correlation of `lib`'s factor with the single "
          "fit's need |")
    print("|---|---|---|---|---|---|---|")
    rhos = []
    for (f, n), rows in sorted(by.items()):
        v = np.array(rows, float)
        rho = float(spearmanr(v[:, 0], v[:, 1])[0])
        rhos.append(rho)
        span = lambda c: f"{v[:, c].min():.1f} - {v[:, c].max():.1f} ({v[:, c].max() / v[:, c].min():.0f}x)"
        print(f"| {f} | {n} | {v[:, 3].mean():.2f} / {v[:, 4].mean():.2f} | {span(1)} | {span(2)} | "
              f"{v[:, 0].min():.1f} - {v[:, 0].max():.1f} | {rho:+.2f} |")
    print(f"\nmedian rank correlation {np.median(rhos):+.2f}, max {max(rhos):+.2f}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("records")
    r.add_argument("out")
    r.add_argument("--family-sizes", required=True, help='comma separated "family|n"')
    r.add_argument("--draws", type=int, default=32)
    t = sub.add_parser("table")
    t.add_argument("records")
    t.add_argument("mixture")
    args = ap.parse_args()
    if args.cmd == "run":
        run(args.records, args.out, set(args.family_sizes.split(",")), args.draws)
    else:
        table(args.records, args.mixture)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
