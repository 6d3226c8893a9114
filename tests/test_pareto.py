"""Pareto fronts, hypervolumes and EHVI against independent references: brute-force dominance,
inclusion-exclusion hypervolumes, Monte Carlo point counts and Monte Carlo expectations."""

import itertools

import numpy as np
import pytest
from scipy.stats import norm

from gptask.model.acquisition import log_ehvi, log_ei, log_prob_below
from gptask.model.pareto import hypervolume, hypervolume_improvement, non_dominated, nondominated_boxes


def brute_non_dominated(Y):
    n = len(Y)
    out = []
    for b in range(n):
        dom = any(np.all(Y[a] <= Y[b]) and np.any(Y[a] < Y[b]) for a in range(n) if a != b)
        out.append(not dom)
    return np.array(out)


def hv_inclusion_exclusion(front, ref):
    """Union of the boxes [p, ref] by inclusion-exclusion (exact; 2^n terms, n <= 12)."""
    front = [p for p in np.asarray(front, float) if np.all(p < ref)]
    total = 0.0
    for k in range(1, len(front) + 1):
        for S in itertools.combinations(front, k):
            corner = np.max(np.array(S), axis=0)
            total += (-1) ** (k + 1) * np.prod(np.clip(ref - corner, 0, None))
    return total


@pytest.mark.parametrize("d", [2, 3, 4])
def test_non_dominated_matches_brute_force(d):
    rng = np.random.default_rng(d)
    for _ in range(5):
        Y = rng.integers(0, 5, size=(15, d)).astype(float)  # ties and duplicates on purpose
        assert np.array_equal(non_dominated(Y), brute_non_dominated(Y))


@pytest.mark.parametrize("d,n", [(2, 9), (3, 8), (4, 7)])
def test_hypervolume_matches_inclusion_exclusion(d, n):
    rng = np.random.default_rng(10 * d + n)
    ref = np.full(d, 1.1)
    for _ in range(4):
        Y = rng.random((n, d))
        assert hypervolume(Y, ref) == pytest.approx(hv_inclusion_exclusion(Y, ref), rel=1e-12, abs=1e-14)


def test_hypervolume_of_a_known_front():
    # ZDT1's front f2 = 1 - sqrt(f1), reference (1, 1): the dominated area is 1 - 1/3 = 2/3; a dense
    # sample of the front gets within its discretisation error from below
    f1 = np.linspace(0, 1, 2001)
    front = np.column_stack([f1, 1 - np.sqrt(f1)])
    hv = hypervolume(front, np.array([1.0, 1.0]))
    assert 2 / 3 - 1e-3 < hv <= 2 / 3


@pytest.mark.parametrize("d", [2, 3])
def test_boxes_cover_exactly_the_free_region_once(d):
    rng = np.random.default_rng(3 + d)
    front = rng.random((7, d))
    ref = np.full(d, 1.2)
    lower, upper = nondominated_boxes(front, ref)
    Z = rng.uniform(-0.5, 1.2, size=(20000, d))
    free = ~np.any(np.all(front[None, :, :] <= Z[:, None, :], axis=2), axis=1)
    inside = np.all((Z[:, None, :] >= lower[None]) & (Z[:, None, :] < upper[None]), axis=2)
    assert inside.sum(axis=1).max() <= 1  # disjoint
    assert np.array_equal(inside.any(axis=1), free)
    if d == 2:
        assert len(lower) == len(front[non_dominated(front)]) + 1  # the staircase's strips


def test_improvement_is_the_difference_of_hypervolumes():
    rng = np.random.default_rng(0)
    front, ref = rng.random((6, 3)), np.full(3, 1.0)
    lower, upper = nondominated_boxes(front, ref)
    Y = rng.uniform(-0.2, 1.1, size=(25, 3))
    got = hypervolume_improvement(Y, lower, upper)
    want = [hv_inclusion_exclusion(np.vstack([front, y]), ref) - hv_inclusion_exclusion(front, ref) for y in Y]
    np.testing.assert_allclose(got, want, atol=1e-12)


@pytest.mark.parametrize("d", [2, 3])
def test_log_ehvi_matches_monte_carlo(d):
    rng = np.random.default_rng(42 + d)
    front = rng.random((5, d))
    ref = np.full(d, 1.1)
    lower, upper = nondominated_boxes(front, ref)
    means = rng.uniform(0.0, 1.0, size=(4, d))
    stds = rng.uniform(0.05, 0.4, size=(4, d))
    got = np.exp(log_ehvi(means, stds, lower, upper))
    n = 40000
    for k in range(len(means)):
        samples = means[k] + stds[k] * rng.standard_normal((n, d))
        hvi = hypervolume_improvement(samples, lower, upper)
        mc, se = hvi.mean(), hvi.std() / np.sqrt(n)
        assert abs(got[k] - mc) < 4 * se + 1e-6, (k, got[k], mc, se)
        assert got[k] > 1e-4 or mc < 1e-4


def test_log_ehvi_of_one_objective_is_log_ei():
    mean, std = np.array([0.3, 1.0, 3.0, -2.0]), np.array([0.1, 0.5, 0.2, 1.0])
    lower, upper = nondominated_boxes(np.array([[0.5], [0.8]]), np.array([2.0]))
    np.testing.assert_allclose(log_ehvi(mean[:, None], std[:, None], lower, upper), log_ei(mean, std, 0.5),
                               rtol=1e-10)


def test_log_ehvi_stays_finite_far_from_the_front():
    lower, upper = nondominated_boxes(np.array([[0.0, 1.0], [1.0, 0.0]]), np.array([2.0, 2.0]))
    far = log_ehvi(np.array([[40.0, 40.0], [5.0, 5.0]]), np.array([[1.0, 1.0], [1.0, 1.0]]), lower, upper)
    assert np.all(np.isfinite(far)) and far[0] < far[1] < 0


def test_log_prob_below_is_the_normal_cdf():
    mean, std = np.array([0.0, 1.0, -3.0]), np.array([1.0, 0.5, 2.0])
    np.testing.assert_allclose(np.exp(log_prob_below(mean, std, 0.5)), norm.cdf((0.5 - mean) / std), rtol=1e-12)
