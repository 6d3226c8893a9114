import logging
import os

import numpy as np

import gptask as gt
from gptask.search import maximize


def bumpy(x):
    """A 2-D multimodal function on the unit square, vectorised; global max near (0.7, 0.25)."""
    a = np.exp(-((x[:, 0] - 0.7) ** 2 + (x[:, 1] - 0.25) ** 2) / 0.01)
    b = 0.8 * np.exp(-((x[:, 0] - 0.2) ** 2 + (x[:, 1] - 0.8) ** 2) / 0.02)
    return a + b + 0.05 * np.sin(20 * x[:, 0])


def test_pso_finds_brute_force_maximum():
    s = gt.Space([gt.Real("a", 0, 1), gt.Real("b", 0, 1)])
    g = np.stack(np.meshgrid(np.linspace(0, 1, 401), np.linspace(0, 1, 401)), -1).reshape(-1, 2)
    brute = bumpy(g).max()
    res = maximize(bumpy, s, seed=0, n_particles=30, iters=60)
    assert res.value >= brute - 1e-3
    assert abs(res.params["a"] - 0.7) < 0.02 and abs(res.params["b"] - 0.25) < 0.02


def test_integer_categorical_space_matches_exhaustive_search():
    s = gt.Space([gt.Integer("k", 1, 12), gt.Categorical("c", ["u", "v", "w"])])
    weight = {"u": 0.0, "v": 2.0, "w": 1.0}

    def acq(x):
        pts = s.decode(x)
        return np.array([-(p["k"] - 7) ** 2 + weight[p["c"]] for p in pts], dtype=float)

    every = [{"k": k, "c": c} for k in range(1, 13) for c in "uvw"]
    best = max(every, key=lambda p: -(p["k"] - 7) ** 2 + weight[p["c"]])
    assert maximize(acq, s, seed=1).params == best
    # excluded best -> the next best feasible, never the excluded one; constraint honoured
    res = maximize(acq, s, seed=1, exclude=s.encode([best]), is_feasible=lambda p: p["c"] != "w")
    assert res.params != best and res.params["c"] != "w"
    allowed = [p for p in every if p != best and p["c"] != "w"]
    assert -(res.params["k"] - 7) ** 2 + weight[res.params["c"]] == max(-(p["k"] - 7) ** 2 + weight[p["c"]] for p in allowed)


def test_everything_excluded_falls_back_to_random_feasible_or_raises():
    s = gt.Space([gt.Integer("k", 1, 3)])
    res = maximize(lambda x: -x[:, 0], s, seed=0, exclude=s.encode([{"k": 1}, {"k": 2}]))
    assert res.params == {"k": 3}


def test_same_seed_same_result_and_global_rng_untouched():
    s = gt.Space([gt.Real("a", 0, 1), gt.Real("b", 0, 1)])
    np.random.seed(123)
    before = np.random.get_state()[1].copy()
    r1 = maximize(bumpy, s, seed=5, iters=10)
    assert np.array_equal(np.random.get_state()[1], before)
    r2 = maximize(bumpy, s, seed=5, iters=10)
    assert r1.params == r2.params


def test_pyswarms_import_leaves_logging_and_cwd_alone(tmp_path):
    # a fresh interpreter, so pyswarms is really imported by our search code
    import subprocess
    import sys

    code = (
        "import logging, numpy as np, gptask as gt\n"
        "from gptask.search import maximize\n"
        "h = list(logging.getLogger().handlers)\n"
        "maximize(lambda x: -x[:, 0], gt.Space([gt.Real('a', 0, 1)]), seed=0, iters=2)\n"
        "assert logging.getLogger().handlers == h, logging.getLogger().handlers\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert not (tmp_path / "report.log").exists()
