"""What run-free prediction for new matrix sizes learns PDGEQRF's time from (``Problem.features``,
``Problem.cost_model``; :mod:`gptask.transfer.joint`).

Each function takes the dict the constraints see (``m, n, mb, nb, nproc, p, nth`` and the
constants). The features are base-2 logs of what a block-cyclic Householder QR's time depends on
smoothly and what the task and parameter coordinates give only through their products and ratios:
the grid's shape, the blocks each process row and column owns (load balance, BLAS-3 efficiency),
the panels (sequential steps, one broadcast each), the cores used and the local matrix. The cost
model is the leading flop count divided by the cores used, so the GP learns the achieved rate.

Chosen by leave-one-size-out on the measured 16-core timings (``bench/run_free.py``): with these,
the joint GP's MAPE was 15-16 % against 17.3 % for the task and parameter coordinates alone.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

__all__ = ["point_features", "flops_per_core"]


def _shape(point: Mapping[str, Any]) -> tuple[float, float, float, float, float, float, float]:
    m, n, mb, nb = (float(point[k]) for k in ("m", "n", "mb", "nb"))
    nproc, p, nth = float(point["nproc"]), float(point["p"]), float(point["nth"])
    return m, n, mb, nb, p, nproc / p, nth


def point_features(point: Mapping[str, Any]) -> dict[str, float]:
    """``{name: value}``, base-2 logs (see the module docstring)."""
    m, n, mb, nb, p, q, nth = _shape(point)
    return {
        "log_p": math.log2(p),
        "log_q": math.log2(q),
        "log_threads": math.log2(nth),
        "log_row_blocks_per_process": math.log2(max(m / (mb * p), 1.0)),
        "log_col_blocks_per_process": math.log2(max(n / (nb * q), 1.0)),
        "log_panels": math.log2(min(m, n) / nb),
        "log_cores_used": math.log2(p * q * nth),
        "log_local_rows": math.log2(m / p),
        "log_local_cols": math.log2(n / q),
    }


def flops_per_core(point: Mapping[str, Any]) -> float:
    """Leading flops of the QR of an m x n matrix (``sum_j 4 (m - j)(n - j)`` over the ``min(m, n)``
    eliminated columns) divided by the cores used (``nproc * nth``): a cost model in flops."""
    m, n, _, _, p, q, nth = _shape(point)
    k = min(m, n)
    return 4.0 * (k * m * n - (m + n) * k * k / 2.0 + k ** 3 / 3.0) / (p * q * nth)
