"""gptask's ``mla`` with one of BoTorch MultiTaskGP's modelling choices patched in, to find which difference makes
BoTorch win listed spaces with a narrow shared optimum (issue 45; bench/results/listed_gap.md). Runs
``bench/suite.py run`` with the patches of ``--variant`` applied in this process and in every spawned worker (they
are read from the environment at import, so a worker that re-imports this file applies them too):

* ``prior_cols``: the length-scale prior's centre scaled by the number of *encoded columns* (BoTorch's ``d``: an
  ordinal of 3-32 values has its position and one indicator column per value) instead of the number of parameters
  (``Surrogate.prior`` returns ``LCMPrior()``);
* ``noise_bt``: BoTorch's noise prior, log noise ~ N(-4, 1) (gptask: N(-5, 1.5^2)), same units (standardised outputs);
* ``no_ind``: ordinals encoded by their position alone, no indicator columns (``ORDINAL_MIN_INDICATED`` set past any
  list), for gptask only;
* ``ind_long``: the length-scale prior of an ordinal's indicator columns centred as ``prior_cols`` centres every
  column (by the number of encoded columns), every other column's as today (by the number of parameters);
* several, comma separated.

    PYTHONPATH=$PWD OMP_NUM_THREADS=1 nice -n 5 .venv/bin/python bench/archive/listed_gap_variants.py --variant no_ind \\
        run --families gen:763 --methods mla --seeds 0-4 --budgets 12 --jobs 1 --tag no_ind --out F

Patches gptask at run time (hence archive/): a variant worth keeping becomes a constant or option of gptask.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository

VARIANTS = ("prior_cols", "noise_bt", "no_ind", "ind_long")
_ENV = "GPTASK_LISTED_GAP_VARIANT"


def apply(names: list[str]) -> None:
    """Patch gptask for each of ``names`` (VARIANTS)."""
    unknown = [n for n in names if n not in VARIANTS]
    if unknown:
        raise SystemExit(f"--variant: unknown {unknown}; known: {', '.join(VARIANTS)}")
    import gptask.space.dimensions as dims
    from gptask.model.numerics.priors import LCMPrior
    from gptask.model.surrogate import core

    if "no_ind" in names:
        dims.ORDINAL_MIN_INDICATED = 10**9
    kw: dict = {}
    if "noise_bt" in names:
        kw.update(noise_loc=-4.0, noise_scale=1.0)
    by_columns = "prior_cols" in names
    if "ind_long" in names:
        core.Surrogate.prior = property(lambda self: _IndicatorsLong(self.space, **kw))
    elif kw or by_columns:
        core.Surrogate.prior = property(lambda self: LCMPrior(dimension=None if by_columns else float(len(self.space)),
                                                              **kw))


def _indicator_columns(space):
    """(n_columns,) True where a column is an ordinal's indicator column."""
    import numpy as np

    from gptask.space.dimensions import Ordinal

    mask = np.zeros(space.n_columns, dtype=bool)
    for d, sl in zip(space.dimensions, space.column_slices()):
        if isinstance(d, Ordinal) and d.indicators:
            mask[sl.start + 1:sl.stop] = True
    return mask


def _IndicatorsLong(space, **kw):  # noqa: N802 (a factory standing for a class)
    """An LCMPrior whose indicator columns' length scales are centred by the number of encoded columns."""
    import math

    import numpy as np

    from gptask.model.numerics import priors

    mask = _indicator_columns(space)

    class IndicatorsLong(priors.LCMPrior):
        def log_density(self, params, s2):
            ls = np.asarray(params["lengthscale"], float)
            d = ls.shape[1]
            loc = np.where(mask, self.lengthscale_loc + 0.5 * math.log(d), self.lengthscale_centre(d))
            v_ls, g_ls = priors._normal(np.log(ls), loc[None, :], self.lengthscale_scale)
            v_t, grads = self.task_log_density(params["W"], params["kappa"], params["noise"], s2)
            grads["lengthscale"] = g_ls / ls
            return v_ls + v_t, grads

    return IndicatorsLong(dimension=float(len(space)), **kw)


if os.environ.get(_ENV):
    apply(os.environ[_ENV].split(","))


def main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[0] != "--variant":
        raise SystemExit("usage: listed_gap_variants.py --variant NAME[,NAME] run ... (bench/suite.py's arguments)")
    os.environ[_ENV] = argv[1]
    apply(argv[1].split(","))
    import suite

    return suite.main(argv[2:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
