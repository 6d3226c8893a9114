"""Issue 25: one fit of the failure model on many finished trials, with and without its fit limit.

    PYTHONPATH=. python bench/failure_fit_scale.py [--sizes 1000,2000]

The family of tests/test_failure_model.py (a failure region a + b > 1.3 - 0.5 t over two reals) on
five tasks, ``n / 5`` random runs each; prints the seconds of one ``FailureModel.update`` with the
default :data:`gptask.model.surrogate.failure_model.FIT_MAX_POINTS` and with no limit, and the points fitted.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

import gptask.model.surrogate.failure_model as failure  # noqa: E402
from test_failure_model import PARAMS, TASKS, trials_on  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000,2000")
    args = ap.parse_args(argv)
    limit = failure.FIT_MAX_POINTS
    try:
        for n in (int(v) for v in args.sizes.split(",")):
            trials = trials_on([{"t": x} for x in np.linspace(0, 1, 5)], n // 5, np.random.default_rng(0))
            for cap in (limit, None):
                failure.FIT_MAX_POINTS = cap if cap is not None else len(trials)
                model = failure.FailureModel(PARAMS, TASKS)
                t0 = time.perf_counter()
                model.update(trials)
                print(f"{len(trials)} trials, limit {cap}: {time.perf_counter() - t0:.1f} s, "
                      f"{model.fitted.X.shape[0]} fitted")
    finally:
        failure.FIT_MAX_POINTS = limit
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
