"""A summary of large sources: at most so many measurements per source task enter the model.

Sources can hold far more measurements than the exact LCM fits: the five source GPUs of the recorded
convolution campaign hold 21,810 (one likelihood evaluation of the exact model takes about 14 s at
5,000 points on 2 cores and grows as N^3). Each source task is summarised by a subset of its
measurements, chosen without a model:

* **the best quarter**: the ``keep // 4`` complete measurements of least value. Tuning cares about
  the good region; the model's predictions there are what ranks configurations of the new task;
* **the rest drawn uniformly** from the task's other measurements, failed ones included: an
  unbiased sample of the landscape, from which the model learns its length scales and how the
  tasks correlate.

Chosen on the recorded convolution campaign (a held-out GPU with 10 runs and the other five GPUs
as sources, 75 of 300 measurements kept per GPU; A100 and W7800 held out, 2 seeds each; the mean
rank correlation of the predicted and measured times of the held-out GPU's configurations): this
rule 0.63 (worst 0.54), a uniform draw alone 0.46 (worst 0.09), the best half and a uniform draw
0.46, the best half and the rest spread by farthest-point sampling in the encoded space 0.37 (the
farthest points of a space of indicator columns are its corners). ``bench/source_scale.py``
compares the rule with the exact model (BENCHMARKS.md, issue 24). Deterministic for a given
``seed`` and order of the measurements.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["summary_indices", "BEST_SHARE"]

#: the share of the kept measurements taken from the best ones
BEST_SHARE = 0.25


def summary_indices(values: Sequence[float | None], keep: int, seed: int = 0) -> np.ndarray:
    """Indices (sorted) of at most ``keep`` of one task's measurements (module docstring).

    values: (n,) their values, None for a failed measurement; keep: how many to keep (all of them
    when n <= keep); seed: the stream of the uniform draw."""
    n = len(values)
    if isinstance(keep, bool) or not isinstance(keep, (int, np.integer)) or keep < 1:
        raise ValueError(f"keep must be a positive number of measurements, got {keep!r}")
    if n <= keep:
        return np.arange(n)
    v = np.array([np.inf if x is None else float(x) for x in values])
    ok = np.flatnonzero(np.isfinite(v))
    best = ok[np.argsort(v[ok], kind="stable")[: int(keep * BEST_SHARE)]]
    rest = np.setdiff1d(np.arange(n), best)
    drawn = np.random.default_rng(seed).choice(rest, keep - best.size, replace=False)
    return np.sort(np.concatenate([best, drawn]))
