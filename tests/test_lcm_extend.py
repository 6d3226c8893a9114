"""extend (new task, TLA2) and append (new points): exact block updates, no refactorisation."""

import numpy as np
import pytest

from gptask.model.numerics import LCM, lml_and_grad

from lcm_helpers import make_data, random_params


def _base(kern="rbf", rank=1, Q=2, sizes=(6, 5, 7), seed=0):
    Xs, ys = make_data(list(sizes) + [4], d=2, seed=seed)
    p = random_params(Q, len(sizes), 2, rank=rank, seed=seed)
    m = LCM(Q, kern, rank=rank).condition(Xs[:-1], ys[:-1], p)
    return m, Xs, ys


def _assert_same_model(a, b, Xt):
    assert a.log_likelihood() == pytest.approx(b.log_likelihood(), rel=1e-8, abs=1e-8)
    for i in range(b.n_tasks):
        for u, v in zip(a.predict(i, Xt), b.predict(i, Xt)):
            np.testing.assert_allclose(u, v, rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("kern,rank", [("rbf", 1), ("matern52", 2)])
def test_extend_is_exact_and_never_refactors(kern, rank, factor_sizes):
    m, Xs, ys = _base(kern, rank)
    N = m.n_points.sum()
    factor_sizes.clear()
    e = m.extend(Xs[-1], ys[-1], restarts=2, seed=1)
    assert max(factor_sizes) == len(ys[-1]) < N  # only new-task blocks were factorised
    assert e.n_factorizations == m.n_factorizations and e.n_block_updates == 1
    assert e.n_tasks == m.n_tasks + 1
    p_old, p_new = m.get_params(), e.get_params()
    np.testing.assert_array_equal(p_new["lengthscale"], p_old["lengthscale"])
    np.testing.assert_array_equal(p_new["W"][:, :-1], p_old["W"])
    np.testing.assert_array_equal(p_new["kappa"][:, :-1], p_old["kappa"])
    np.testing.assert_array_equal(p_new["noise"][:-1], p_old["noise"])
    scratch = LCM(m.n_latent, kern, rank=rank).condition(Xs, ys, p_new)
    _assert_same_model(e, scratch, np.random.default_rng(2).random((5, 2)))
    # the original model is untouched
    assert m.n_tasks == 3


def test_extend_finds_a_stationary_point_of_the_full_likelihood():
    """Only the new task's parameters move, so at the optimum the full-model gradient (checked
    against finite differences elsewhere) w.r.t. them vanishes unless a bound is active."""
    m, Xs, ys = _base(seed=3)
    e = m.extend(Xs[-1], ys[-1], restarts=3, seed=0)
    p = e.get_params()
    _, g = lml_and_grad(Xs, ys, p)
    assert np.all(np.abs(g["W"][:, -1]) < 1e-3)
    s2 = np.mean(np.concatenate(ys) ** 2)
    interior = p["kappa"][:, -1] > 1e-7 * s2
    assert np.all(np.abs((g["kappa"][:, -1] * p["kappa"][:, -1])[interior]) < 1e-3)
    if p["noise"][-1] > 1e-5 * s2:
        assert abs(g["noise"][-1] * p["noise"][-1]) < 1e-3
    # and it beats new-task parameters taken from an old task
    q = e.get_params()
    q["W"][:, -1], q["kappa"][:, -1], q["noise"][-1] = q["W"][:, 0], q["kappa"][:, 0], q["noise"][0]
    assert e.log_likelihood() >= LCM(2).condition(Xs, ys, q).log_likelihood()


def test_extend_after_fit_with_one_point_new_task():
    Xs, ys = make_data([6, 6, 1], d=2, seed=4)
    m = LCM(1).fit(Xs[:2], ys[:2], restarts=1, maxiter=80)
    e = m.extend(Xs[2], ys[2], restarts=1)
    scratch = LCM(1).condition(Xs, ys, e.get_params())
    _assert_same_model(e, scratch, Xs[0])


def test_append_is_exact_and_never_refactors(factor_sizes):
    m, Xs, ys = _base(seed=5)
    rng = np.random.default_rng(5)
    X_add, y_add = rng.random((3, 2)), rng.standard_normal(3)
    factor_sizes.clear()
    a = m.append(1, X_add, y_add)
    assert factor_sizes == [3]
    assert a.n_factorizations == m.n_factorizations
    Xs2 = [Xs[0], np.vstack([Xs[1], X_add]), Xs[2]]
    ys2 = [ys[0], np.concatenate([ys[1], y_add]), ys[2]]
    scratch = LCM(2).condition(Xs2, ys2, m.get_params())
    _assert_same_model(a, scratch, rng.random((4, 2)))
    X_back, y_back = a.data()
    np.testing.assert_array_equal(X_back[1], Xs2[1])
    np.testing.assert_array_equal(y_back[1], ys2[1])


def test_extend_then_append_to_the_new_task(factor_sizes):
    m, Xs, ys = _base(seed=6)
    e = m.extend(Xs[-1][:2], ys[-1][:2], restarts=1)
    factor_sizes.clear()
    a = e.append(3, Xs[-1][2:], ys[-1][2:])
    assert factor_sizes == [2]
    assert a.n_block_updates == 2
    scratch = LCM(2).condition(Xs, ys, e.get_params())
    _assert_same_model(a, scratch, np.random.default_rng(6).random((4, 2)))


def test_block_update_bad_input():
    m, Xs, ys = _base(seed=7)
    with pytest.raises(ValueError, match="X_new must have 2 columns"):
        m.extend(np.zeros((2, 3)), np.zeros(2))
    with pytest.raises(ValueError, match="y_new has 3 values"):
        m.extend(np.zeros((2, 2)), np.zeros(3))
    with pytest.raises(ValueError, match="y_add contains NaN"):
        m.append(0, np.zeros((1, 2)), [np.nan])
    with pytest.raises(ValueError, match="task index"):
        m.append(3, np.zeros((1, 2)), [0.0])
    with pytest.raises(RuntimeError, match="no data"):
        LCM(1).extend(np.zeros((1, 2)), [0.0])
