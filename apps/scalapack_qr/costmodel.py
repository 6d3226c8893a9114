"""The analytic run-time MODEL of PDGEQRF from the GPTune paper (sec. 6.1, eq. 18-19).

This is a model, not a measurement: the paper reports 30-70 % average relative error for such
models. It is offered as ``backend="model"`` for cheap, wide sweeps and is labelled as such.

Eq. 18: ``time = C_f t_f + C_d t_d + C_m t_m + C_v t_v`` (flops, divisions, messages, words).
Eq. 19 (the "medium" model, square blocks ``b = mb = nb``)::

    flops     = 2 n^2 (3m - n) / (3 nproc) + b n^2 / (2 q) + 3 b n (2m - n) / (2 p) + b^2 n / (3 p)
    divisions = (m n - n^2 / 2) / p
    messages  = 3 n log2 p + (2 n / b) log2 q
    words     = (n^2 / q + b n) log2 p + ((m n - n^2 / 2) / p + b n / 2) log2 q

Extensions of ours, needed to evaluate the whole parameter space (documented, not from the paper):

* ``mb != nb``: terms divided by ``p`` (row distribution) use ``mb``, terms divided by ``q`` and
  the panel count ``n / b`` use ``nb``, ``b^2`` becomes ``mb * nb``; with ``mb == nb`` this is
  exactly eq. 19.
* BLAS threads: the leading (level-3 BLAS) flop term is divided by ``nth``; the other terms,
  dominated by level-2 panel work and communication, are not. With ``nth = 1`` this is eq. 19.
* wide matrices (``m < n``): eq. 19 assumes ``m >= n`` and goes negative for ``n > 2m``. The
  factorisation eliminates ``k = min(m, n)`` columns, so every sum over elimination steps runs to
  ``k`` instead of ``n`` (e.g. the leading flops are ``sum_j 4 (m - j)(n - j)`` for ``j < k``:
  ``2 n^2 (3m - n) / 3`` when ``k = n``, LAPACK's ``2 m^2 n - 2 m^3 / 3`` when ``k = m``). With
  ``m >= n`` this is exactly eq. 19.

The per-unit times ``t = (t_f, t_d, t_m, t_v)`` in seconds are fitted by non-negative least
squares on real runs of this machine (``fit_model.py``, data in ``data/``), stored in
``data/model_coefficients.json``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["FACTORS", "counts", "feature_matrix", "CostModel", "COEFFICIENTS_FILE"]

#: Names of the eq. 18 factors, in the order of the columns of :func:`feature_matrix`.
FACTORS = ("flops", "divisions", "messages", "words")
COEFFICIENTS_FILE = Path(__file__).resolve().parent / "data" / "model_coefficients.json"


def counts(m: int, n: int, mb: int, nb: int, p: int, q: int, nth: int = 1) -> dict[str, float]:
    """Eq. 19 counts for one configuration (per process, as in the paper).

    ``m, n``: matrix rows and columns; ``mb, nb``: block sizes; ``p x q``: process grid
    (``nproc = p q``); ``nth``: BLAS threads per process. Returns ``{factor: count}``.
    """
    for k, v in (("m", m), ("n", n), ("mb", mb), ("nb", nb), ("p", p), ("q", q), ("nth", nth)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise ValueError(f"counts: {k} must be a positive integer, got {v!r}")
    m, n, mb, nb, p, q, nth = (float(x) for x in (m, n, mb, nb, p, q, nth))
    nproc = p * q
    lp, lq = math.log2(p), math.log2(q)
    k = min(m, n)  # columns eliminated; k = n is eq. 19
    flops = (
        4 * (k * m * n - (m + n) * k**2 / 2 + k**3 / 3) / nproc / nth
        + nb * (k * n - k**2 / 2) / q
        + 3 * mb * k * (2 * m - k) / (2 * p)
        + mb * nb * k / (3 * p)
    )
    divisions = (m * k - k**2 / 2) / p
    messages = 3 * k * lp + (2 * k / nb) * lq
    words = ((2 * k * n - k**2) / q + nb * k) * lp + ((m * k - k**2 / 2) / p + mb * k / 2) * lq
    return {"flops": flops, "divisions": divisions, "messages": messages, "words": words}


def feature_matrix(rows: list[Mapping[str, Any]]) -> np.ndarray:
    """``(len(rows), 4)`` array of eq. 19 counts; each row needs m, n, mb, nb, p and nproc or q."""
    out = np.empty((len(rows), len(FACTORS)))
    for i, r in enumerate(rows):
        p = int(r["p"])
        q = int(r["q"]) if "q" in r else int(r["nproc"]) // p
        c = counts(int(r["m"]), int(r["n"]), int(r["mb"]), int(r["nb"]), p, q, int(r.get("nth", 1)))
        out[i] = [c[f] for f in FACTORS]
    return out


class CostModel:
    """Eq. 18 with fitted per-unit times: ``predict(...) = counts . t`` in seconds (a MODEL)."""

    def __init__(self, unit_times: Mapping[str, float], source: str = "") -> None:
        missing = [f for f in FACTORS if f not in unit_times]
        if missing:
            raise ValueError(f"CostModel: unit_times lacks {missing} (needs {list(FACTORS)})")
        bad = {f: unit_times[f] for f in FACTORS if not (float(unit_times[f]) >= 0.0)}
        if bad:
            raise ValueError(f"CostModel: unit times must be >= 0 seconds, got {bad}")
        self.unit_times = {f: float(unit_times[f]) for f in FACTORS}
        self.source = source

    @classmethod
    def load(cls, path: str | Path = COEFFICIENTS_FILE) -> "CostModel":
        path = Path(path)
        if not path.exists():
            raise FileNotFoundError(
                f"no fitted model coefficients at {path}; run `python -m apps.scalapack_qr.fit_model`"
            )
        data = json.loads(path.read_text())
        return cls(data["unit_times"], source=str(path))

    def predict(self, m: int, n: int, mb: int, nb: int, p: int, q: int, nth: int = 1) -> float:
        """Predicted PDGEQRF time in seconds (model, not measurement)."""
        c = counts(m, n, mb, nb, p, q, nth)
        return float(sum(c[f] * self.unit_times[f] for f in FACTORS))

    def predict_rows(self, rows: list[Mapping[str, Any]]) -> np.ndarray:
        """Predicted times, shape ``(len(rows),)``."""
        return feature_matrix(rows) @ np.array([self.unit_times[f] for f in FACTORS])
