"""Two bench proposers of issue 45's convolution worst seed (bench/proposers/thompson_stall.py,
bench/proposers/joint_design.py): the joint posterior draw against the model's own predictions (many draws'
mean, variance and one covariance against predict and the posterior cross-covariance computed by hand), and the
joint initial design (distinct configurations across the tasks, in each task's domain, reproducible, the default
first, farther apart than random draws)."""

import importlib.util
import itertools
from pathlib import Path

import numpy as np

import gptask as gt
from gptask.model.numerics import LCM
from gptask.tuning.proposer import make_proposer

ROOT = Path(__file__).resolve().parents[1]
VALUES = [0, 1, 2, 3, 4]
TASKS = [{"gpu": g} for g in ("a", "b", "c")]


def load(name: str):
    spec = importlib.util.spec_from_file_location(f"bench_proposer_{name}", ROOT / "bench" / "proposers" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def bowl(task, p):
    shift = {"a": 0, "b": 1, "c": 2}[task["gpu"]]
    return 1.0 + sum((p[n] - 2 - shift * (n == "x")) ** 2 for n in ("x", "y", "z"))


def bowl_problem(default=None) -> gt.Problem:
    return gt.Problem(gt.Space([gt.Categorical("gpu", ["a", "b", "c"])]),
                      gt.Space([gt.Ordinal(n, VALUES) for n in ("x", "y", "z")]), bowl, name="w28-bowl",
                      default=default)


def test_the_posterior_draw_has_the_models_mean_and_covariance():
    ts = load("thompson_stall")
    rng = np.random.default_rng(0)
    X = [rng.random((12, 2)), rng.random((9, 2))]
    y = [np.sin(4 * x[:, 0]) + x[:, 1] for x in X]
    y[1] = y[1] + 0.3
    m = LCM(1, rank=2).fit(X, y, restarts=2, seed=0)
    Xs = rng.random((6, 2))
    draws = ts.posterior_draws(m, 1, Xs, rng, n=20000)
    mean, var = m.predict(1, Xs)
    se = np.sqrt(var / len(draws))
    assert np.all(np.abs(draws.mean(axis=0) - mean) < 5 * se + 1e-9)
    np.testing.assert_allclose(draws.var(axis=0), var, rtol=0.05, atol=1e-6)
    # one off-diagonal entry against the posterior covariance computed from the data by hand
    Xa = np.vstack(X)
    task = np.r_[np.zeros(12, int), np.ones(9, int)]
    p = m.get_params()
    B = m.coregionalization()[0]
    ls = p["lengthscale"][0]

    def k(A, ta, C, tc):
        d2 = (((A[:, None, :] - C[None, :, :]) / ls) ** 2).sum(axis=2)
        return B[np.ix_(ta, tc)] * np.exp(-0.5 * d2)

    K = k(Xa, task, Xa, task) + np.diag(p["noise"][task])
    ks = k(Xa, task, Xs, np.ones(6, int))
    cov = k(Xs, np.ones(6, int), Xs, np.ones(6, int)) - ks.T @ np.linalg.solve(K, ks)
    np.testing.assert_allclose(np.diag(cov), var, rtol=1e-6, atol=1e-9)  # the hand-made reference is the model's
    emp = np.cov(draws[:, 0], draws[:, 1])[0, 1]
    assert abs(emp - cov[0, 1]) < 0.05 * np.sqrt(cov[0, 0] * cov[1, 1]) + 1e-9


class FakeTuner:
    """What a proposer reads to draw initial designs."""

    def __init__(self, problem, seed, n_initial=8, defaults=None):
        self.problem, self.tasks, self.n_tasks, self.n_initial = problem, TASKS, len(TASKS), n_initial
        self.budget, self.seed = 2 * n_initial, seed
        self.defaults = defaults or [None] * len(TASKS)

    def describe_constraints(self, i):
        return ""


def designs(options, seed, problem=None, defaults=None):
    load("joint_design")
    p = make_proposer("joint_design", options)
    p.bind(FakeTuner(problem or bowl_problem(), seed, defaults=defaults))
    return [p.initial_design(i) for i in range(len(TASKS))]


def key(c):
    return tuple(c[n] for n in ("x", "y", "z"))


def test_the_joint_design_is_distinct_across_tasks_reproducible_and_spread():
    every = set(itertools.product(VALUES, repeat=3))
    spread = {}
    for options in ({"candidates": 30}, {"candidates": 1}, {"candidates": 30, "joint": False}):
        gaps = []
        for seed in range(5):
            ds = designs(options, seed)
            assert ds == designs(options, seed)  # deterministic in the seed
            keys = [key(c) for d in ds for c in d]
            assert all(len(d) == 8 for d in ds) and set(keys) <= every
            if options.get("joint", True):
                assert len(set(keys)) == len(keys)  # no configuration in two tasks' designs
            else:
                assert all(len({key(c) for c in d}) == 8 for d in ds)
            pts = np.array(keys, dtype=float)
            dist = np.abs(pts[:, None, :] - pts[None, :, :]).sum(axis=2) + np.eye(len(pts)) * 99
            gaps.append(dist.min(axis=1).mean())  # mean distance to the nearest other design point
        spread[str(options)] = np.mean(gaps)
    assert spread[str({"candidates": 30})] > spread[str({"candidates": 1})] + 0.2
    # the problem's default stays first in each task's design, and in no other slot
    default = {"x": 2, "y": 2, "z": 2}
    ds = designs({"candidates": 30}, 0, bowl_problem(default=default), defaults=[default] * 3)
    assert all(d[0] == default and all(key(c) != key(default) for c in d[1:]) and len(d) == 8 for d in ds)


def test_a_campaign_with_the_bench_proposers_runs_its_budget():
    for name, options in (("joint_design", {"candidates": 30}), ("thompson_stall", {"after": 1, "mode": "only"})):
        load(name)
        p = make_proposer(name, options)
        res = gt.tune(bowl_problem(), TASKS, budget=12, n_initial=4, seed=1, progress=False, proposer=p,
                      pso_particles=10, pso_iters=5)
        assert len(res.history) == 36 and all(t.status is gt.Status.COMPLETE for t in res.history)
        if name == "thompson_stall":
            assert p.draws  # a stalled task's search took a posterior draw
