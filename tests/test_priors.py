"""Priors and MAP fitting: densities against scipy.stats, gradients against finite differences, the
fitted MAP point is a stationary point of likelihood + prior, and extend() maximises the same
posterior as a brute-force optimisation of the conditioned full model."""

import math

import numpy as np
import pytest
from scipy.optimize import minimize
from scipy.stats import norm

from gptask.model.numerics import LCM, LCMPrior, lml_and_grad
from gptask.model.numerics.defaults import LENGTHSCALE_BOUNDS
from gptask.model.numerics.priors import resolve_prior

from lcm_helpers import make_data, random_params

KEYS = ("lengthscale", "W", "kappa", "noise")


def reference_log_prior(p, s2, pr):
    d = p["lengthscale"].shape[1]
    Q, _, r = p["W"].shape
    return (norm.logpdf(np.log(p["lengthscale"]), pr.lengthscale_loc + 0.5 * math.log(d),
                        pr.lengthscale_scale).sum()
            + norm.logpdf(p["W"], 0.0, pr.w_scale * math.sqrt(s2 / (Q * r))).sum()
            + norm.logpdf(np.log(p["kappa"] / s2), pr.kappa_loc, pr.kappa_scale).sum()
            + norm.logpdf(np.log(p["noise"] / s2), pr.noise_loc, pr.noise_scale).sum())


@pytest.mark.parametrize("rank,s2", [(1, 1.0), (2, 0.3)])
def test_log_density_matches_scipy_and_its_gradient_finite_differences(rank, s2):
    p = random_params(Q=2, T=3, d=4, rank=rank, seed=rank)
    pr = LCMPrior()
    value, grads = pr.log_density(p, s2)
    assert value == pytest.approx(reference_log_prior(p, s2, pr), rel=1e-12)
    for key in KEYS:
        def f(v, key=key):
            q = dict(p)
            q[key] = v.reshape(p[key].shape)
            return pr.log_density(q, s2)[0]

        fd = np.array([(f(p[key].ravel() + e) - f(p[key].ravel() - e)) / 2e-6
                       for e in np.eye(p[key].size) * 1e-6])
        np.testing.assert_allclose(grads[key].ravel(), fd, rtol=1e-6, atol=1e-7, err_msg=key)


def test_a_fidelity_level_column_has_its_own_prior_against_scipy_and_finite_differences():
    """log_density(levels=True): the last length-scale column (a TaskLevels level's) is N(log
    level_lengthscale, lengthscale_scale^2), the others centred for one column fewer."""
    p = random_params(Q=2, T=3, d=4, seed=5)
    pr = LCMPrior()
    value, grads = pr.log_density(p, 0.7, levels=True)
    ls = np.log(p["lengthscale"])
    inputs = dict(p, lengthscale=p["lengthscale"][:, :3])
    want = (reference_log_prior(inputs, 0.7, pr)
            + norm.logpdf(ls[:, 3], math.log(pr.level_lengthscale), pr.lengthscale_scale).sum())
    assert value == pytest.approx(want, rel=1e-12)
    fd = np.array([(pr.log_density(dict(p, lengthscale=(p["lengthscale"].ravel() + e).reshape(2, 4)), 0.7, levels=True)[0]
                    - pr.log_density(dict(p, lengthscale=(p["lengthscale"].ravel() - e).reshape(2, 4)), 0.7, levels=True)[0])
                   / 2e-6 for e in np.eye(8) * 1e-6])
    np.testing.assert_allclose(grads["lengthscale"].ravel(), fd, rtol=1e-6, atol=1e-7)
    with pytest.raises(ValueError, match="level_lengthscale must be > 0"):
        LCMPrior(level_lengthscale=0.0)


def test_prior_spec_and_validation():
    assert resolve_prior(None) is None
    assert resolve_prior("default") == LCMPrior()
    custom = LCMPrior(noise_loc=-6.0)
    assert resolve_prior(custom) is custom
    with pytest.raises(ValueError, match="prior must be"):
        resolve_prior("map")
    with pytest.raises(ValueError, match="noise_scale must be > 0"):
        LCMPrior(noise_scale=0.0)
    with pytest.raises(ValueError, match="finite"):
        LCMPrior(kappa_loc=float("nan"))
    assert LCMPrior.from_json(custom.to_json()) == custom
    with pytest.raises(ValueError, match="unknown LCMPrior fields"):
        LCMPrior.from_json({"bogus": 1.0})
    Xs, ys = make_data([5, 5], d=2, seed=1)
    with pytest.raises(ValueError, match="prior must be"):
        LCM(1).fit(Xs, ys, prior="strong")


def _theta_gradient(m, Xs, ys):
    """d(LL + log prior)/d(log positive params, W) at the model's hyperparameters."""
    p = m.get_params()
    s2 = float(np.mean(np.concatenate(ys) ** 2))
    _, g = lml_and_grad(Xs, ys, p, m.kernel)
    _, gp = m.prior.log_density(p, s2)
    return {k: (g[k] + gp[k]) * (1.0 if k == "W" else p[k]) for k in KEYS}


def test_map_fit_is_a_stationary_point_of_likelihood_plus_prior():
    Xs, ys = make_data([7, 6, 8], d=2, seed=5)
    # calibrate=False: the optimum itself, before the widening of the variances moves it on purpose
    m = LCM(2).fit(Xs, ys, restarts=2, seed=0, maxiter=2000, calibrate=False)
    g = _theta_gradient(m, Xs, ys)
    p = m.get_params()
    inside = (p["lengthscale"] > 1.01 * LENGTHSCALE_BOUNDS[0]) & (p["lengthscale"] < 0.99 * LENGTHSCALE_BOUNDS[1])
    # the stall rule stops a start once it gains < 0.1 nat in 30 iterations: nearly stationary
    worst = max(np.max(np.abs(g["lengthscale"][inside])),
                *(np.max(np.abs(g[k])) for k in ("W", "kappa", "noise")))
    assert worst < 5e-2
    # the maximum-likelihood fit is far from stationary for likelihood + prior: the prior pulls
    ml = LCM(2).fit(Xs, ys, restarts=2, seed=0, maxiter=2000, prior=None)
    ml.prior = m.prior
    g_ml = _theta_gradient(ml, Xs, ys)
    assert max(np.max(np.abs(v)) for v in g_ml.values()) > 10 * worst


def test_extend_maximises_the_posterior_of_the_new_task_hyperparameters():
    """Reference: the new task's (w, log kappa, log noise) optimised by Nelder-Mead on the full
    model conditioned from scratch (log p(all) - log p(old) + prior of the new task's terms)."""
    Xs, ys = make_data([8, 7, 5], d=2, seed=11)
    base = LCM(2).fit(Xs[:2], ys[:2], restarts=2, seed=1, maxiter=500)
    ext = base.extend(Xs[2], ys[2], restarts=4, seed=0)
    p0 = base.get_params()
    s2 = base._s2 if hasattr(base, "_s2") else None
    ll_old = base.log_likelihood()

    def neg_post(theta):
        w, lk, ln = theta[:2].reshape(2, 1, 1), theta[2:4], theta[4]
        q = {"lengthscale": p0["lengthscale"], "W": np.concatenate([p0["W"], w], axis=1),
             "kappa": np.concatenate([p0["kappa"], np.exp(lk)[:, None]], axis=1),
             "noise": np.concatenate([p0["noise"], [np.exp(ln)]])}
        full = LCM(2).condition(Xs, ys, q)
        lp = base.prior.task_log_density(w, np.exp(lk)[:, None], np.array([np.exp(ln)]), s2)[0]
        return -(full.log_likelihood() - ll_old + lp)

    pe = ext.get_params()
    ours = np.concatenate([pe["W"][:, 2, 0], np.log(pe["kappa"][:, 2]), [np.log(pe["noise"][2])]])
    ref = min((minimize(neg_post, x0, method="Nelder-Mead", options={"maxiter": 4000, "xatol": 1e-6,
                                                                     "fatol": 1e-9})
               for x0 in (ours, np.array([0.5, -0.5, -2.0, -2.0, -3.0]))), key=lambda r: r.fun)
    assert neg_post(ours) <= ref.fun + 1e-4
    assert ext.prior == base.prior


def test_diagnose_names_bounds_floor_and_wild_predictions():
    Xs, ys = make_data([6, 6], d=2, seed=2)
    healthy = LCM(1).fit(Xs, ys, restarts=2, seed=0)
    assert healthy.diagnose() == []
    s2 = float(np.mean(np.concatenate(ys) ** 2))
    p = healthy.get_params()
    p["lengthscale"][0, 0] = LENGTHSCALE_BOUNDS[0]
    p["noise"][1] = 1e-6 * s2
    flagged = LCM(1).condition(Xs, ys, p).diagnose()
    assert any("lower bound" in f for f in flagged) and any("[1] on the floor" in f for f in flagged)
    # a huge variance with long length scales extrapolates a trend far beyond the observed values
    Xl = [np.array([[0.0, 0.0], [0.05, 0.05], [0.1, 0.1]])]
    yl = [np.array([0.0, 0.05, 0.1])]
    wild = LCM(1).condition(Xl, yl, {"lengthscale": np.array([[50.0, 50.0]]), "W": np.array([[[300.0]]]),
                                     "kappa": np.array([[1e-6]]), "noise": np.array([1e-8])})
    assert any("predictions of task(s) [0]" in f for f in wild.diagnose())


def test_a_flagged_fit_explores_fresh_starts_and_logs_it(monkeypatch, caplog):
    Xs, ys = make_data([6, 5], d=2, seed=3)
    calls = []
    real = LCM.diagnose

    def first_flagged(self):
        calls.append(1)
        return ["noise of task(s) [0] on the floor"] if len(calls) == 1 else real(self)

    monkeypatch.setattr(LCM, "diagnose", first_flagged)
    with caplog.at_level("INFO", logger="gptask.model.numerics.lcm"):
        m = LCM(1).fit(Xs, ys, restarts=1, seed=0, calibrate=False)  # the winner as found
    rep = m.fit_report
    assert rep.explored and rep.n_starts == 1 + 4 and rep.flags == ("noise of task(s) [0] on the floor",)
    assert rep.flags_after == tuple(real(m))
    assert "fresh starts" in caplog.text
    # the winner is the best of all starts by the MAP objective
    assert m.log_posterior() == pytest.approx(np.max(rep.objective), rel=1e-9)
    # explore=False: one round only, nothing checked
    calls.clear()
    quiet = LCM(1).fit(Xs, ys, restarts=1, seed=0, explore=False)
    assert not quiet.fit_report.explored and quiet.fit_report.n_starts == 1 and not calls
