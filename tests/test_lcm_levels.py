"""The LCM of fidelity levels (gptask.model.numerics.TaskLevels): tasks that are levels of fewer base
tasks share their base task's coregionalisation and carry their level as one more kernel input.

References: the plain LCM of the base tasks with the level written as a last input column (the same
model when every level of a base task has the same noise), finite differences of the likelihood, a
dense Gaussian-process posterior written out here, and conditioning from scratch."""

import numpy as np
import pytest

from gptask.model.numerics import LCM, TaskLevels, lml_and_grad
from gptask.model.numerics.defaults import WILD_RANGES
from gptask.model.numerics.kernels import kernel as k_fn
from lcm_helpers import make_data

# 2 base tasks at 2 levels: tasks 0, 1 at the target (0), tasks 2, 3 at the cheap level (1)
LEVELS = TaskLevels((0, 1, 0, 1), (0.0, 0.0, 1.0, 1.0))
NOISE = np.array([0.02, 0.05, 0.02, 0.05])  # one noise per base task: the plain model can hold it


def data(seed=0):
    Xs, ys = make_data([4, 5, 9, 8], seed=seed)
    return Xs, ys


def params(seed=0, Q=2, noise=NOISE):
    rng = np.random.default_rng(seed)
    return {"lengthscale": rng.uniform(0.3, 1.2, (Q, 3)), "W": rng.standard_normal((Q, 2, 1)),
            "kappa": rng.uniform(0.05, 0.5, (Q, 2)), "noise": np.array(noise, float)}


def plain(Xs, ys):
    """The base tasks' data with the level as a last column: (X_list, y_list) of 2 tasks."""
    X = [np.vstack([np.hstack([Xs[i], np.full((len(Xs[i]), 1), LEVELS.level[i])]) for i in (b, b + 2)])
         for b in (0, 1)]
    y = [np.concatenate([ys[b], ys[b + 2]]) for b in (0, 1)]
    return X, y


def test_the_likelihood_and_predictions_are_the_plain_lcm_of_the_base_tasks_with_the_level_as_an_input():
    Xs, ys = data()
    p = params()
    ll, _ = lml_and_grad(Xs, ys, p, "matern52", levels=LEVELS)
    Xp, yp = plain(Xs, ys)
    p_plain = dict(p, noise=NOISE[:2])
    ll_plain, _ = lml_and_grad(Xp, yp, p_plain, "matern52")
    assert ll == pytest.approx(ll_plain, rel=1e-10)
    m = LCM(2, "matern52", levels=LEVELS).condition(Xs, ys, p)
    ref = LCM(2, "matern52").condition(Xp, yp, p_plain)
    U = np.random.default_rng(1).random((6, 2))
    for i in range(4):
        mean, var = m.predict(i, U, include_noise=True)
        mean_r, var_r = ref.predict(LEVELS.group[i], np.hstack([U, np.full((6, 1), LEVELS.level[i])]), include_noise=True)
        np.testing.assert_allclose(mean, mean_r, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(var, var_r, rtol=1e-9, atol=1e-12)
    assert m.input_dim == 2 and m.n_tasks == 4 and m.lengthscales.shape == (2, 3)
    assert [X.shape[1] for X in m.data()[0]] == [2, 2, 2, 2]


def test_the_gradient_matches_finite_differences_with_a_noise_per_level():
    Xs, ys = data(seed=3)
    p = params(seed=4, noise=[0.01, 0.04, 0.09, 0.03])
    _, g = lml_and_grad(Xs, ys, p, "rbf", levels=LEVELS)
    eps = 1e-6
    for key in ("lengthscale", "W", "kappa", "noise"):
        num = np.zeros_like(p[key])
        for idx in np.ndindex(p[key].shape):
            up = {k: v.copy() for k, v in p.items()}
            dn = {k: v.copy() for k, v in p.items()}
            up[key][idx] += eps
            dn[key][idx] -= eps
            num[idx] = (lml_and_grad(Xs, ys, up, "rbf", levels=LEVELS)[0]
                        - lml_and_grad(Xs, ys, dn, "rbf", levels=LEVELS)[0]) / (2 * eps)
        np.testing.assert_allclose(g[key], num, rtol=1e-5, atol=1e-6)


def test_cross_covariances_and_task_covariance_match_a_dense_posterior():
    Xs, ys = data(seed=5)
    p = params(seed=6, Q=1, noise=[0.01, 0.04, 0.09, 0.03])
    m = LCM(1, "rbf", levels=LEVELS).condition(Xs, ys, p)
    C = p["W"][0] @ p["W"][0].T + np.diag(p["kappa"][0])  # (G, G)
    ls = p["lengthscale"][0]
    rows = [(i, np.hstack([X, np.full((len(X), 1), LEVELS.level[i])])) for i, X in enumerate(Xs)]

    def cov(a, b):  # prior covariance of (task a, inputs A) and (task b, inputs B), inputs with their level
        (i, A), (j, B) = a, b
        return C[LEVELS.group[i], LEVELS.group[j]] * k_fn("rbf", A, B, ls)
    K = np.block([[cov(a, b) for b in rows] for a in rows]) + np.diag(np.concatenate(
        [np.full(len(X), p["noise"][i]) for i, X in enumerate(Xs)]))
    x = np.array([[0.3, 0.6], [0.8, 0.1]])
    for i, j in ((0, 2), (1, 3), (0, 1), (2, 2)):
        at_i = (i, np.hstack([x, np.full((2, 1), LEVELS.level[i])]))
        at_j = (j, np.hstack([x, np.full((2, 1), LEVELS.level[j])]))
        ki = np.vstack([cov(r, at_i) for r in rows])
        kj = np.vstack([cov(r, at_j) for r in rows])
        want = np.diagonal(cov(at_i, at_j)) - np.einsum("nm,nm->m", ki, np.linalg.solve(K, kj))
        np.testing.assert_allclose(m.posterior_cross(i, j, x), want, rtol=1e-8, atol=1e-10)
    u = np.array(LEVELS.level)
    want_tc = C[np.ix_(LEVELS.group, LEVELS.group)] * np.exp(-0.5 * (u[:, None] - u[None, :]) ** 2 / ls[-1] ** 2)
    np.testing.assert_allclose(m.task_covariance(), want_tc, rtol=1e-12)


def test_append_fit_save_load_and_subset_keep_the_levels(tmp_path):
    Xs, ys = data(seed=7)
    m = LCM(1, "matern52", levels=LEVELS).fit(Xs, ys, restarts=2, seed=0)
    x_new, y_new = np.array([[0.2, 0.9]]), np.array([0.4])
    appended = m.append(2, x_new, y_new)
    Xs2 = [X if i != 2 else np.vstack([X, x_new]) for i, X in enumerate(Xs)]
    ys2 = [y if i != 2 else np.concatenate([y, y_new]) for i, y in enumerate(ys)]
    again = LCM(1, "matern52", levels=LEVELS).condition(Xs2, ys2, m.get_params())
    U = np.random.default_rng(2).random((5, 2))
    for i in range(4):
        np.testing.assert_allclose(appended.predict(i, U)[0], again.predict(i, U)[0], rtol=1e-8, atol=1e-10)
    m.save(tmp_path / "m.npz")
    loaded = LCM.load(tmp_path / "m.npz")
    assert loaded.levels == LEVELS
    np.testing.assert_array_equal(loaded.predict(1, U)[0], m.predict(1, U)[0])
    sub = m.subset([3, 1])  # base task 1 at both levels
    assert sub.levels == TaskLevels((0, 0), (1.0, 0.0))
    q = m.get_params()  # by hand: base task 1's row of W and kappa, the noises of tasks 3 and 1
    by_hand = {"lengthscale": q["lengthscale"], "W": q["W"][:, [1]], "kappa": q["kappa"][:, [1]], "noise": q["noise"][[3, 1]]}
    ref = LCM(1, "matern52", levels=TaskLevels((0, 0), (1.0, 0.0))).condition([Xs[3], Xs[1]], [ys[3], ys[1]], by_hand)
    np.testing.assert_allclose(sub.predict(1, U)[0], ref.predict(1, U)[0], rtol=1e-12)
    assert len(m.laplace_draws(2, seed=0)) == 2


@pytest.mark.parametrize("group, level, match", [
    ((0, 2), (0.0, 1.0), "every base task"),
    ((0, 1), (0.0,), "one group and one level per task"),
    ((0, 0), (0.0, float("nan")), "finite"),
])
def test_bad_levels_are_refused_with_what_is_wrong(group, level, match):
    with pytest.raises(ValueError, match=match):
        TaskLevels(group, level)


def test_a_model_of_levels_refuses_data_of_another_task_count_and_extend():
    Xs, ys = data()
    with pytest.raises(ValueError, match="4 tasks but the model's TaskLevels 2"):
        LCM(1, levels=TaskLevels((0, 0), (0.0, 1.0))).fit(Xs, ys, restarts=1)
    with pytest.raises(ValueError, match="levels must be a TaskLevels"):
        LCM(1, levels=((0, 1), (0.0, 1.0)))
    m = LCM(1, levels=LEVELS).condition(Xs, ys, params(Q=1))
    with pytest.raises(ValueError, match="cannot"):
        m.extend(np.random.default_rng(0).random((3, 2)), np.zeros(3))


def test_a_target_of_two_runs_predicting_its_cheap_levels_spread_is_not_wild():
    """The post-fit check of wild predictions judges a level against every level of its base task: a
    target of two nearby runs whose cheap level spans a wide range rightly predicts that range (the
    model before judged it against its own two values and flagged nearly every fit of the tuner's)."""
    rng = np.random.default_rng(3)
    f = lambda U: np.sin(6.0 * U[:, 0]) + U[:, 1]  # noqa: E731
    U_cheap, U_target = rng.random((20, 2)), np.array([[0.30, 0.50], [0.32, 0.52]])
    levels = TaskLevels((0, 0), (0.0, 1.0))
    p = {"lengthscale": np.array([[0.3, 0.5, 5.0]]), "W": np.array([[[1.0]]]), "kappa": np.array([[0.01]]),
         "noise": np.array([1e-4, 1e-4])}
    m = LCM(1, "matern52", levels=levels).condition([U_target, U_cheap], [f(U_target), f(U_cheap)], p)
    P = np.random.default_rng(0).random((64, 2))
    mean = m.predict(0, P)[0]
    own = f(U_target)
    assert np.ptp(mean) > (1 + 2 * WILD_RANGES) * np.ptp(own)  # wild against the target's own two values
    assert not [flag for flag in m.diagnose() if flag.startswith("predictions of task")]
