"""Fit the per-unit times of the analytic cost MODEL (eq. 18-19) on real runs of this machine.

As in the GPTune paper (sec. 6.1), only square-block runs (``mb == nb``) are used for fitting;
all other runs (``mb != nb``) are held out for validation. The fit is non-negative least squares
on rows scaled by ``1 / measured time``, i.e. it minimises the sum of squared *relative* errors
(run times span two orders of magnitude; an unscaled fit would only care about the slowest runs).

    python -m apps.scalapack_qr.fit_model collect --out apps/scalapack_qr/data/fit_runs.csv
    python -m apps.scalapack_qr.fit_model fit      # reads data/{fit_runs,grid_*}.csv, writes model_coefficients.json
    python -m apps.scalapack_qr.fit_model compare  # real time of the model's favourite grid point

``collect`` runs, for a few tasks, every square block size in 4..256 on every feasible
(nproc, p, nth), plus half as many random non-square configurations (held out).
"""

from __future__ import annotations

import argparse
import glob
import json
import random
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from scipy.optimize import nnls
from scipy.stats import spearmanr

from .costmodel import COEFFICIENTS_FILE, FACTORS, CostModel, feature_matrix
from .grid import configurations, machine_description, read_csv, run_configurations

__all__ = ["fit", "relative_errors", "main"]

DATA_DIR = Path(__file__).resolve().parent / "data"
COLLECT_TASKS = ((1000, 1000), (1500, 1500), (1500, 700))
COLLECT_BLOCKS = (4, 8, 16, 32, 64, 128, 256)


def fit(rows: Sequence[dict[str, Any]]) -> dict[str, float]:
    """Non-negative per-unit times (seconds per flop/division/message/word) from measured rows."""
    if not rows:
        raise ValueError("fit: no rows to fit")
    X = feature_matrix(list(rows))
    y = np.array([float(r["time"]) for r in rows])
    if np.any(~(y > 0)):
        raise ValueError("fit: every measured time must be > 0")
    scale = np.max(X, axis=0)
    scale[scale == 0] = 1.0
    A = (X / scale) / y[:, None]
    coef, _ = nnls(A, np.ones_like(y))
    return {f: float(c / s) for f, c, s in zip(FACTORS, coef, scale)}


def relative_errors(model: CostModel, rows: Sequence[dict[str, Any]]) -> np.ndarray:
    """``|predicted - measured| / measured`` per row, shape ``(len(rows),)``."""
    pred = model.predict_rows(list(rows))
    meas = np.array([float(r["time"]) for r in rows])
    return np.abs(pred - meas) / meas


def _summary(model: CostModel, rows: Sequence[dict[str, Any]]) -> dict[str, float]:
    if not rows:
        return {"n": 0}
    err = relative_errors(model, rows)
    pred = model.predict_rows(list(rows))
    meas = np.array([float(r["time"]) for r in rows])
    corr = float(np.corrcoef(pred, meas)[0, 1]) if len(rows) > 2 else float("nan")
    rank = float(spearmanr(pred, meas).statistic) if len(rows) > 2 else float("nan")
    return {
        "n": len(rows),
        "mean_relative_error": float(np.mean(err)),
        "median_relative_error": float(np.median(err)),
        "correlation": corr,
        "rank_correlation": rank,
    }


def _cmd_collect(args: argparse.Namespace) -> int:
    from .problem import problem

    pb = problem(repeats=args.repeats)
    rng = random.Random(args.seed)
    runs = []
    for m, n in COLLECT_TASKS:
        task = {"m": m, "n": n}
        all_cfg = configurations(pb, task, COLLECT_BLOCKS)
        square = [c for c in all_cfg if c["mb"] == c["nb"]]
        other = [c for c in all_cfg if c["mb"] != c["nb"]]
        runs += [(task, c) for c in square + rng.sample(other, min(len(square) // 2, len(other)))]
    rng.shuffle(runs)

    def progress(i: int, total: int, params: dict, row: dict) -> None:
        print(f"[{i}/{total}] {row['m']}x{row['n']} {params} -> {row['time'] or row['reason']}",
              file=sys.stderr, flush=True)

    with open(args.out, "w", newline="") as fh:
        run_configurations(pb, runs, fh, header=f"cost-model fit runs, tasks {list(COLLECT_TASKS)}",
                           note="real ScaLAPACK runs; mb == nb rows fit the model, the rest validate it",
                           progress=progress)
    return 0


def _real_data_files() -> list[str]:
    """The real-run CSVs of data/: the fit collection and the grid sweeps."""
    return sorted(glob.glob(str(DATA_DIR / "fit_runs*.csv")) + glob.glob(str(DATA_DIR / "grid_*.csv")))


def _cmd_compare(args: argparse.Namespace) -> int:
    """For each real grid sweep: how good is the configuration the MODEL ranks first?"""
    model = CostModel.load(args.coefficients)
    files = args.data or sorted(glob.glob(str(DATA_DIR / "grid_*.csv")))
    for f in files:
        rows = [r for r in read_csv(f) if r["status"] == "complete" and r["time"]]
        pred = model.predict_rows(rows)
        meas = np.array([float(r["time"]) for r in rows])
        pick = int(np.argmin(pred))
        keys = ("mb", "nb", "nproc", "p", "nth")
        print(json.dumps({
            "file": Path(f).name,
            "real_optimum": {**{k: rows[int(np.argmin(meas))][k] for k in keys}, "time": float(meas.min())},
            "model_choice": {**{k: rows[pick][k] for k in keys}, "time": float(meas[pick])},
            "model_choice_over_optimum": float(meas[pick] / meas.min()),
            "model_choice_rank": int(np.sum(meas < meas[pick])) + 1,
            "rank_correlation": float(spearmanr(pred, meas).statistic),
            "mean_relative_error": float(np.mean(np.abs(pred - meas) / meas)),
        }))
    return 0


def _cmd_fit(args: argparse.Namespace) -> int:
    files = args.data or _real_data_files()
    rows = [r for f in files for r in read_csv(f) if r["status"] == "complete" and r["time"]]
    train = [r for r in rows if r["mb"] == r["nb"]]
    held = [r for r in rows if r["mb"] != r["nb"]]
    unit = fit(train)
    model = CostModel(unit)
    report = {
        "what": "per-unit times of the analytic cost MODEL of PDGEQRF (GPTune paper eq. 18-19), seconds",
        "unit_times": unit,
        "fit": _summary(model, train),
        "held_out": _summary(model, held),
        "data": [str(Path(f).name) for f in files],
        "computed_on": machine_description(),  # where the fit ran; the runs carry their own headers
        "method": "NNLS on rows scaled by 1/measured time (relative errors); fit rows mb == nb, held out mb != nb",
    }
    out = Path(args.out)
    out.write_text(json.dumps(report, indent=1) + "\n")
    print(json.dumps(report, indent=1))
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m apps.scalapack_qr.fit_model")
    sub = ap.add_subparsers(dest="command", required=True)
    co = sub.add_parser("collect", help="measure runs for the fit (real backend)")
    co.add_argument("--out", default=str(DATA_DIR / "fit_runs.csv"))
    co.add_argument("--repeats", type=int, default=2)
    co.add_argument("--seed", type=int, default=0)
    fi = sub.add_parser("fit", help="fit the unit times, write the coefficients file")
    fi.add_argument("--data", nargs="*", help="CSV files (default: every data/*.csv)")
    fi.add_argument("--out", default=str(COEFFICIENTS_FILE))
    cp = sub.add_parser("compare", help="real time of the MODEL's favourite grid configuration")
    cp.add_argument("--data", nargs="*", help="grid CSV files (default: data/grid_*.csv)")
    cp.add_argument("--coefficients", default=str(COEFFICIENTS_FILE))
    args = ap.parse_args(argv)
    handler = {"collect": _cmd_collect, "fit": _cmd_fit, "compare": _cmd_compare}
    return handler[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
