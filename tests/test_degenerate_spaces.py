"""Dimensions with one value (``Real("x", 1, 1)``, ``Integer("k", 3, 3)``) or a handful of
representable ones (a Real a few ulps wide): tuning ends, as it does when a discrete space is used
up, instead of waiting forever for proposals that all decode to configurations already run.
Each run happens in a child process with a generous limit, so a hang fails the test instead of
stopping the suite."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import gptask as gt

ROOT = Path(__file__).resolve().parents[1]

RUN = """
import json, sys
import gptask as gt
params = gt.Space([{dims}])
problem = gt.Problem(gt.Space([gt.Real("t", 0.0, 1.0)]), params,
                     lambda task, p: 1.0 + sum((float(v) - task["t"]) ** 2 for v in p.values()), name="degenerate")
res = gt.tune(problem, tasks=2, budget=6, n_initial=3, seed=0, progress=False, pso_particles=10, pso_iters=4,
              restarts=1)
print(json.dumps({{"params": [[dict(r["params"]) for r in res.records(i, status=None)] for i in range(2)],
                  "closed": {{str(k): v for k, v in res.closed.items()}}}}))
"""


def tuned(dims: str) -> dict:
    out = subprocess.run([sys.executable, "-c", RUN.format(dims=dims)], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.splitlines()[-1])


@pytest.mark.parametrize("dim, value", [('gt.Real("x", 1.0, 1.0)', 1.0), ('gt.Integer("x", 3, 3)', 3),
                                        ('gt.Real("x", 2.0, 2.0, log=True)', 2.0)])
def test_a_single_valued_space_ends_after_its_one_configuration_per_task(dim, value):
    got = tuned(dim)
    for i in range(2):
        assert got["params"][i] == [{"x": value}]
        assert "every feasible configuration has been claimed" in got["closed"][str(i)]


def test_a_real_a_few_ulps_wide_ends_when_its_values_are_used_up():
    lo = 1.0
    hi = float(np.nextafter(np.nextafter(lo, 2.0), 2.0))  # three representable values: lo, lo + 1 ulp, hi
    got = tuned(f'gt.Real("x", {lo!r}, {hi!r})')
    for i in range(2):
        xs = [p["x"] for p in got["params"][i]]
        assert len(xs) == len(set(xs)) <= 3 and set(xs) <= {lo, float(np.nextafter(lo, 2.0)), hi}
        assert "every feasible configuration has been claimed" in got["closed"][str(i)]


def test_a_single_valued_dimension_beside_others_uses_the_whole_budget():
    got = tuned('gt.Real("x", 1.0, 1.0), gt.Real("y", 0.0, 1.0)')
    for i in range(2):
        assert len(got["params"][i]) == 6 and {p["x"] for p in got["params"][i]} == {1.0}
        assert len({p["y"] for p in got["params"][i]}) == 6
    assert got["closed"] == {}


@pytest.mark.parametrize("lo, hi", [(0.0, 1e-300), (0.0, 1e-13), (5.0, 5.0 + 1e-13)])
def test_a_real_narrower_than_the_history_tells_values_apart_is_one_configuration(lo, hi):
    got = tuned(f'gt.Real("x", {lo!r}, {hi!r})')
    for i in range(2):
        assert len(got["params"][i]) == 1
        assert "every feasible configuration has been claimed" in got["closed"][str(i)]


def test_snapping_a_real_gives_the_encoding_of_the_configuration_it_stands_for():
    from gptask.data.trials import point_key

    u = np.random.default_rng(0).random((50, 1))
    for dim in (gt.Real("x", 1.0, 1.0), gt.Real("x", 0.0, 1e-300), gt.Real("x", 1.0, float(np.nextafter(1.0, 2.0)))):
        snapped = dim.snap_columns(u)
        assert len({point_key({"x": v}) for v in dim.decode(u)}) == len(np.unique(snapped)) == 1
    for dim in (gt.Real("x", 0.5, 3.0), gt.Real("x", 1e-3, 1e3, log=True), gt.Real("x", -1e6, 1e6)):
        snapped = dim.snap_columns(u)
        values = dim.decode(snapped)  # moved by rounding to 12 decimals, or by an ulp of the encoding at most:
        np.testing.assert_allclose(values, dim.decode(u), rtol=1e-14, atol=5e-13)
        np.testing.assert_array_equal(dim.snap_columns(snapped), snapped)  # idempotent
