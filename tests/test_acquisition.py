import numpy as np
import pytest
from scipy.stats import norm

from gptask.model.acquisition import expected_improvement, log_ei, log_h


def closed_form_ei(mu, sd, best):
    z = (best - mu) / sd
    return (best - mu) * norm.cdf(z) + sd * norm.pdf(z)


def test_ei_matches_closed_form_and_log_ei_matches_log():
    rng = np.random.default_rng(0)
    mu = rng.normal(size=500)
    sd = rng.uniform(0.05, 2.0, size=500)
    ref = closed_form_ei(mu, sd, 0.3)
    assert np.allclose(expected_improvement(mu, sd, 0.3), ref, rtol=1e-10, atol=1e-300)
    ok = ref > 1e-300
    assert np.allclose(log_ei(mu, sd, 0.3)[ok], np.log(ref[ok]), rtol=1e-9, atol=1e-9)


def test_ei_matches_monte_carlo():
    rng = np.random.default_rng(1)
    mu, sd, best = 0.2, 0.7, 0.0
    y = rng.normal(mu, sd, size=2_000_000)
    mc = np.mean(np.maximum(best - y, 0.0))
    se = np.std(np.maximum(best - y, 0.0)) / np.sqrt(y.size)
    assert abs(expected_improvement(np.array([mu]), np.array([sd]), best)[0] - mc) < 5 * se


def test_log_h_extreme_inputs_finite_and_monotone():
    z = -np.logspace(-3, 100, 2000)[::-1]  # from -1e100 up to -1e-3
    z = np.concatenate([z, np.linspace(0, 50, 200), [1e10, 1e100]])
    v = log_h(z)
    assert np.all(np.isfinite(v))
    assert np.all(np.diff(v) >= -1e-9)


def test_log_h_continuous_at_branch_points():
    for z0 in (-1.0, -1.0 / np.sqrt(np.finfo(float).eps)):
        a, b = log_h(np.array([z0 * (1 + 1e-9)]))[0], log_h(np.array([z0 * (1 - 1e-9)]))[0]
        assert abs(a - b) <= 1e-6 * max(1.0, abs(a))


def test_log_h_matches_high_precision_tail():
    # for z << 0, h(z) = phi(z) * (1/z^2 - 3/z^4 + 15/z^6 ...) (asymptotic series)
    z = np.array([-30.0, -300.0, -3000.0])
    series = norm.logpdf(z) + np.log(1 / z**2 - 3 / z**4 + 15 / z**6 - 105 / z**8 + 945 / z**10)
    assert np.allclose(log_h(z), series, rtol=1e-8)


def test_zero_std_is_floored_not_nan():
    v = log_ei(np.array([0.0, 1.0]), np.array([0.0, 0.0]), 0.5)
    assert np.all(np.isfinite(v))
    assert v[0] > v[1]
