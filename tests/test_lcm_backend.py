"""Array backends (issue 16): the torch backend equals numpy's to 1e-8 relative in float64 for the
likelihood, gradient, predictions, block updates and fits; both gradient paths (kernels kept or
recomputed) agree; the gradient pass's memory does not grow with Q; the numpy path never imports
torch. The torch tests run on the CPU build (and on CUDA where a GPU is present); without torch
they are skipped."""

import subprocess
import sys
import tracemalloc

import numpy as np
import pytest

import gptask.model.numerics.lcm as lcm_mod
from gptask.model.numerics import LCM, CholeskyError, lml_and_grad
from gptask.model.numerics.backend import get_backend

from lcm_helpers import make_data, random_params

KEYS = ("lengthscale", "W", "kappa", "noise")
RTOL = 1e-8


def _devices():
    try:
        import torch
    except ImportError:
        return [pytest.param("cpu", marks=pytest.mark.skip(reason="torch is not installed"))]
    cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
    return ["cpu", pytest.param("cuda", marks=cuda)]


DEVICES = _devices()


@pytest.fixture(autouse=True)
def one_torch_thread():
    """torch's CPU thread pool spins on a loaded machine like OpenBLAS's (fit/extend cap it
    themselves; condition/predict do not)."""
    try:
        import torch
    except ImportError:
        yield
        return
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


def _close(a, b, rtol=RTOL, atol=1e-12):
    np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)


def test_numpy_path_never_imports_torch():
    code = ("import sys, numpy as np\n"
            "from gptask.model.numerics import LCM\n"
            "rng = np.random.default_rng(0)\n"
            "m = LCM(2, 'matern52').fit([rng.random((6, 2)), rng.random((5, 2))],"
            " [rng.random(6), rng.random(5)], restarts=1, maxiter=20)\n"
            "m.predict(0, rng.random((3, 2))); m.append(1, rng.random((1, 2)), [0.5])\n"
            "m.extend(rng.random((2, 2)), [0.1, 0.2], restarts=1)\n"
            "assert 'torch' not in sys.modules, 'the numpy backend imported torch'\n")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=300)


def test_backend_arguments_are_checked():
    with pytest.raises(ValueError, match="backend must be one of"):
        LCM(1, backend="jax")
    with pytest.raises(ValueError, match="numpy backend runs on the CPU only"):
        LCM(1, backend="numpy", device="cuda")
    with pytest.raises(ValueError, match="device must be a string"):
        get_backend("numpy", device=0)
    m = LCM(1)
    assert (m.backend, m.device) == ("numpy", "cpu")


def test_auto_threads_use_one_blas_thread_for_small_data_only(monkeypatch):
    from threadpoolctl import threadpool_info, threadpool_limits

    seen = []
    core = lcm_mod._lml_core

    def recording(*args):
        seen.append(max(i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"))
        return core(*args)

    monkeypatch.setattr(lcm_mod, "_lml_core", recording)
    Xs, ys = make_data([6, 5], d=2, seed=0)
    with threadpool_limits(limits=2, user_api="blas"):
        outer = max(i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas")
        LCM(1).fit(Xs, ys, restarts=1, maxiter=3, explore=False)
        assert set(seen) == {1}
        seen.clear()
        monkeypatch.setattr(lcm_mod, "BLAS_THREADS_MIN_N", 5)  # "large" data: threads left alone
        LCM(1).fit(Xs, ys, restarts=1, maxiter=3, explore=False)
        assert set(seen) == {outer}
        seen.clear()
        LCM(1).fit(Xs, ys, restarts=1, maxiter=3, explore=False, threads=1)
        assert set(seen) == {1}
    with pytest.raises(ValueError, match="threads must be"):
        LCM(1).fit(Xs, ys, threads="many")


def test_parallel_starts_give_the_serial_model(monkeypatch):
    """threads="auto" on small data runs the starts on worker threads (one BLAS thread each):
    the same fit, bit for bit, as one start after the other."""
    Xs, ys = make_data([7, 6, 5], d=2, seed=12)
    serial = LCM(2).fit(Xs, ys, restarts=3, seed=4, maxiter=40, threads=1)
    workers = []
    real = lcm_mod.ThreadPoolExecutor

    def recording(max_workers):
        workers.append(max_workers)
        return real(max_workers=max_workers)

    monkeypatch.setattr(lcm_mod, "_usable_cores", lambda: 3)
    monkeypatch.setattr(lcm_mod, "ThreadPoolExecutor", recording)
    par = LCM(2).fit(Xs, ys, restarts=3, seed=4, maxiter=40)
    assert workers and workers[0] == 3
    np.testing.assert_array_equal(par.fit_report.objective, serial.fit_report.objective)
    for key in KEYS:
        np.testing.assert_array_equal(par.get_params()[key], serial.get_params()[key])


@pytest.mark.parametrize("kern", ["rbf", "matern52"])
@pytest.mark.parametrize("cache", [True, False])
def test_recomputed_kernels_give_the_same_gradient(kern, cache, monkeypatch):
    """The gradient pass keeps the forward pass's K_q only within KERNEL_CACHE_BYTES; recomputing
    them must not change a bit of the result's meaning (same values to rounding)."""
    Xs, ys = make_data([5, 7, 3], d=2, seed=1)
    p = random_params(Q=3, T=3, d=2, rank=2, seed=1)
    ref = lml_and_grad(Xs, ys, p, kern)
    monkeypatch.setattr(lcm_mod, "KERNEL_CACHE_BYTES", 1 << 40 if cache else 0)
    ll, g = lml_and_grad(Xs, ys, p, kern)
    assert ll == pytest.approx(ref[0], rel=1e-12)
    for key in KEYS:
        _close(g[key], ref[1][key], rtol=1e-10)


def test_gradient_pass_memory_does_not_grow_with_latents(monkeypatch):
    """Peak memory of one likelihood + gradient evaluation (numpy, kernels recomputed): about
    2.25 N x N arrays whatever Q (the upper triangle in row blocks), where keeping every K_q would
    need Q + 3."""
    monkeypatch.setattr(lcm_mod, "KERNEL_CACHE_BYTES", 0)
    Xs, ys = make_data([100] * 6, d=3, seed=2)
    N = 600
    peaks = {}
    for Q in (1, 8):
        p = random_params(Q=Q, T=6, d=3, seed=2)
        tracemalloc.start()
        lml_and_grad(Xs, ys, p)
        peaks[Q] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    nn = 8 * N * N
    assert peaks[8] < 3.0 * nn, f"peak {peaks[8] / nn:.2f} N x N arrays at Q = 8"
    assert peaks[8] < peaks[1] + 0.5 * nn


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("kern,rank", [("rbf", 1), ("matern52", 2), ("rbf", 2)])
def test_torch_likelihood_and_gradient_equal_numpy(device, kern, rank):
    Xs, ys = make_data([6, 8, 1, 5], d=3, seed=3)
    p = random_params(Q=3, T=4, d=3, rank=rank, seed=3)
    ll, g = lml_and_grad(Xs, ys, p, kern)
    ll_t, g_t = lml_and_grad(Xs, ys, p, kern, backend="torch", device=device)
    assert ll_t == pytest.approx(ll, rel=RTOL)
    for key in KEYS:
        assert isinstance(g_t[key], np.ndarray)
        _close(g_t[key], g[key])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("kern", ["rbf", "matern52"])
def test_torch_with_row_blocks_equals_numpy(device, kern, monkeypatch):
    """torch forms whole matrices (one row block); its upper-triangle operations (inverse_lower,
    keep_upper_half_) still give numpy's likelihood and gradient when it is made to use blocks."""
    from gptask.model.numerics.torch_backend import TorchBackend

    monkeypatch.setattr(TorchBackend, "row_blocks", 8)
    Xs, ys = make_data([150, 90, 160, 7], d=3, seed=5)
    p = random_params(Q=2, T=4, d=3, seed=5)
    ll, g = lml_and_grad(Xs, ys, p, kern)
    ll_t, g_t = lml_and_grad(Xs, ys, p, kern, backend="torch", device=device)
    assert ll_t == pytest.approx(ll, rel=RTOL)
    for key in KEYS:
        _close(g_t[key], g[key], atol=1e-10)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("kern", ["rbf", "matern52"])
def test_torch_predictions_and_block_updates_equal_numpy(device, kern, tmp_path):
    Xs, ys = make_data([6, 5, 7, 4], d=2, seed=4)
    p = random_params(Q=2, T=3, d=2, rank=2, seed=4)
    m = LCM(2, kern, rank=2).condition(Xs[:3], ys[:3], p)
    mt = LCM(2, kern, rank=2, backend="torch", device=device).condition(Xs[:3], ys[:3], p)
    assert (mt.backend, mt.device.split(":")[0]) == ("torch", device)
    Xt = np.random.default_rng(4).random((6, 2))

    def same(a, b):
        assert b.log_likelihood() == pytest.approx(a.log_likelihood(), rel=RTOL)
        for i in range(a.n_tasks):
            for u, v in zip(a.predict(i, Xt, include_noise=True), b.predict(i, Xt, include_noise=True)):
                assert isinstance(v, np.ndarray)
                _close(v, u)
            for u, v in zip(a.predict_cov(i, Xt), b.predict_cov(i, Xt)):
                _close(v, u)

    same(m, mt)
    assert mt.diagnose() == m.diagnose()
    rng = np.random.default_rng(5)
    X_add, y_add = rng.random((3, 2)), rng.standard_normal(3)
    same(m.append(1, X_add, y_add), mt.append(1, X_add, y_add))
    e, et = m.extend(Xs[3], ys[3], restarts=2, seed=0), mt.extend(Xs[3], ys[3], restarts=2, seed=0)
    assert et.backend == "torch" and et.n_block_updates == 1
    for key in KEYS:  # the new task's hyperparameters come from the same optimiser path
        _close(et.get_params()[key], e.get_params()[key], rtol=1e-6, atol=1e-9)
    # the torch model after the block updates is the torch model conditioned from scratch
    scratch = LCM(2, kern, rank=2, backend="torch", device=device).condition(Xs, ys, et.get_params())
    same(scratch, et)
    # a torch model saves a plain file that loads onto numpy (and back onto torch)
    et.save(tmp_path / "t.npz")
    same(et, LCM.load(tmp_path / "t.npz"))
    same(et, LCM.load(tmp_path / "t.npz", backend="torch", device=device))


@pytest.mark.parametrize("device", DEVICES)
def test_torch_fit_follows_the_numpy_fit(device):
    Xs, ys = make_data([8, 6, 7], d=2, seed=6)
    kw = dict(restarts=2, seed=1, maxiter=25, explore=False)
    m = LCM(2).fit(Xs, ys, **kw)
    mt = LCM(2, backend="torch", device=device).fit(Xs, ys, **kw)
    _close(mt.fit_report.objective, m.fit_report.objective, rtol=1e-7)
    for key in KEYS:
        _close(mt.get_params()[key], m.get_params()[key], rtol=1e-5, atol=1e-8)
    assert mt.log_posterior() == pytest.approx(m.log_posterior(), rel=1e-7)


@pytest.mark.parametrize("device", DEVICES)
def test_torch_fit_starts_on_worker_threads_in_a_fresh_process(device):
    """The first torch factorisations of a process made by several worker threads at once (the
    fit's parallel starts): on CUDA torch's lazy loading of its linear-algebra library raised
    "lazy wrapper should be called at most once" on an H100 until the backend loaded it first."""
    code = ("import numpy as np\n"
            "import gptask.model.numerics.lcm as lcm_mod\n"
            "from gptask.model.numerics import LCM\n"
            "lcm_mod._usable_cores = lambda: 4\n"
            "rng = np.random.default_rng(0)\n"
            "Xs = [rng.random((6, 2)) for _ in range(3)]\n"
            "ys = [np.sin(3 * x[:, 0]) + x[:, 1] for x in Xs]\n"
            f"m = LCM(1, backend='torch', device={device!r}).fit(Xs, ys, restarts=4, maxiter=5)\n"
            "assert m.fit_report.n_starts >= 4, m.fit_report\n")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=300)


@pytest.mark.parametrize("device", DEVICES)
def test_torch_jitter_escalation_and_errors(device):
    Xs, ys = make_data([6, 6], d=2, seed=10)
    Xs = [np.vstack([x, x]) for x in Xs]
    ys = [np.concatenate([y, y]) for y in ys]
    p = random_params(1, 2, 2, seed=10)
    p["noise"] = np.full(2, 1e-300)  # duplicated points, no noise: singular
    m = LCM(1).condition(Xs, ys, p)
    mt = LCM(1, backend="torch", device=device).condition(Xs, ys, p)
    assert mt.jitter == m.jitter > 0
    assert mt.log_likelihood() == pytest.approx(m.log_likelihood(), rel=1e-6)
    bad = dict(p, W=np.full_like(p["W"], 1e200), kappa=np.full_like(p["kappa"], 1e300))
    with pytest.raises(CholeskyError, match="NaN or inf"):
        LCM(1, backend="torch", device=device).condition(Xs, ys, bad)
    bk = get_backend("torch", device)
    with pytest.raises(CholeskyError, match="not positive definite"):
        bk.cholesky(bk.asarray([[1.0, 2.0], [2.0, 1.0]]), "test matrix")


def test_cuda_request_without_a_gpu_is_refused():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present")
    with pytest.raises(ValueError, match="no CUDA device"):
        LCM(1, device="cuda")


def test_tune_on_the_torch_backend_proposes_what_numpy_proposes(monkeypatch, tmp_path):
    """gt.tune(..., device=...) runs every model of the run on the torch backend (here torch's CPU
    build stands in for a GPU: the device name "cuda" is mapped to it) and proposes what the numpy
    run proposes, to rounding; the history and the model-based prediction work on it too."""
    pytest.importorskip("torch")
    import gptask as gt
    import gptask.tuning.config as tuner_mod

    resolve = lcm_mod._resolve_backend
    monkeypatch.setattr(lcm_mod, "_resolve_backend",
                        lambda backend, device: get_backend("torch", "cpu") if device == "cuda" else resolve(backend, device))
    monkeypatch.setattr(tuner_mod, "check_device", lambda device: device)
    prob = gt.Problem(gt.Space([gt.Real("t", 0, 1)]), gt.Space([gt.Real("x", 0, 1), gt.Real("y", 0, 1)]),
                      lambda t, p: (p["x"] - t["t"]) ** 2 + (p["y"] - 0.3) ** 2 + 0.1)
    tasks = [{"t": 0.2}, {"t": 0.7}]
    on_numpy = gt.tune(prob, tasks, 10, seed=1, progress=False)
    on_torch = gt.tune(prob, tasks, 10, seed=1, progress=False, device="cuda", history=tmp_path / "h.sqlite")
    assert on_numpy.model.backend == "numpy" and on_torch.model.backend == "torch"
    a, b = ([[t.params["x"], t.params["y"]] for t in r.history] for r in (on_numpy, on_torch))
    np.testing.assert_allclose(b, a, atol=1e-6)
    p_numpy, p_torch = (gt.predict_optimum(r, {"t": 0.5}) for r in (on_numpy, on_torch))
    assert p_torch.value == pytest.approx(p_numpy.value, rel=1e-6)


@pytest.mark.parametrize("device", DEVICES)
def test_a_fidelity_run_on_the_torch_backend_proposes_what_numpy_proposes(device, monkeypatch):
    """A cost-budget run with a fidelity dimension (levels in the model, each proposal a level and a
    configuration by expected gain per unit cost) on the torch backend: the same runs at the same levels as on
    numpy, and the calibrated intervals of gt.predict agree. On "cpu" torch's CPU build stands in for the GPU
    (the device name "cuda" mapped to it); on "cuda" the run is on the GPU."""
    import gptask as gt
    import gptask.tuning.config as tuner_mod

    if device == "cpu":
        resolve = lcm_mod._resolve_backend
        monkeypatch.setattr(lcm_mod, "_resolve_backend", lambda backend, dev: get_backend("torch", "cpu")
                            if dev == "cuda" else resolve(backend, dev))
        monkeypatch.setattr(tuner_mod, "check_device", lambda dev: dev)
    prob = gt.Problem(gt.Space([gt.Integer("n", 1, 3)]), gt.Space([gt.Real("x", 0, 1), gt.Real("y", 0, 1)]),
                      lambda t, p: (p["x"] - 0.3) ** 2 + (p["y"] - 0.7) ** 2
                      + 0.3 * (1 - p["iterations"] / 1000) * (p["x"] + 0.2) + 0.05 * t["n"],
                      fidelity=gt.Space([gt.Integer("iterations", 10, 1000, log=True)]),
                      target_fidelity={"iterations": 1000}, run_cost=lambda point: point["iterations"] / 1000.0)
    kw = dict(cost_budget=5.0, n_initial=6, seed=2, restarts=1, refit_restarts=1, pso_particles=12, pso_iters=8,
              progress=False)
    on_numpy = gt.tune(prob, [{"n": 1}, {"n": 3}], **kw)
    on_torch = gt.tune(prob, [{"n": 1}, {"n": 3}], device="cuda", **kw)
    assert on_numpy.model.backend == "numpy" and on_torch.model.backend == "torch"
    runs = [[(t.task["n"], t.task["iterations"]) for t in r.history] for r in (on_numpy, on_torch)]
    assert runs[1] == runs[0] and len({it for _, it in runs[0]}) > 1  # the same levels bought, several of them
    a, b = ([[t.params["x"], t.params["y"]] for t in r.history] for r in (on_numpy, on_torch))
    np.testing.assert_allclose(b, a, atol=1e-6)
    at = [{"x": 0.3, "y": 0.7}, {"x": 0.9, "y": 0.1}]  # a tuned task: the LCM's calibrated intervals
    (mean, std), (mean_t, std_t) = (gt.predict(r, {"n": 3}, at) for r in (on_numpy, on_torch))
    _close(mean_t, mean, rtol=1e-6)
    _close(std_t, std, rtol=1e-3)  # the calibration's refitted folds follow the optimiser's path to ~1e-5


def test_tune_refuses_a_missing_device_before_any_run():
    """device= names a device that is not there: refused at the API boundary, nothing runs."""
    import gptask as gt

    calls = []
    prob = gt.Problem(gt.Space([gt.Real("t", 0, 1)]), gt.Space([gt.Real("x", 0, 1)]),
                      lambda t, p: calls.append(p) or p["x"])
    with pytest.raises(ValueError, match="device must be a string"):
        gt.tune(prob, 2, 4, progress=False, device=3)
    try:
        import torch
    except ImportError:
        with pytest.raises(ImportError, match="gpu"):
            gt.tune(prob, 2, 4, progress=False, device="cuda")
    else:
        if torch.cuda.is_available():
            pytest.skip("a CUDA device is present")
        with pytest.raises(ValueError, match="no CUDA device"):
            gt.tune(prob, 2, 4, progress=False, device="cuda")
    assert calls == []


@pytest.mark.parametrize("device", DEVICES)
def test_torch_calibrated_intervals_equal_numpy(device):
    """The intervals users read (predict_calibrated, task_calibration_factors) on torch equal numpy's: on a
    model of fidelity levels, whose folds hold out a configuration at every level at once and are refitted,
    the target's shape fitted to the target's own held-out points (sessions 40-41); and with folds conditioned
    on the model's hyperparameters (the rule above CALIBRATION_REFIT_MAX_POINTS points), each task's factor the
    larger of the pooled one and its own."""
    from gptask.model.numerics import TaskLevels

    rng = np.random.default_rng(7)
    levels = TaskLevels((0, 1, 0, 1), (0.0, 0.0, 1.0, 1.0))
    promoted = [rng.random((6, 2)) for _ in range(2)]
    Xs = promoted + [np.vstack([x, rng.random((14, 2))]) for x in promoted]
    ys = [np.sin(4 * X[:, 0]) + (i % 2) * X[:, 1] + (0.3 * np.cos(5 * X[:, 1]) if i < 2 else 0.0)
          + 0.02 * rng.standard_normal(len(X)) for i, X in enumerate(Xs)]
    kw = dict(restarts=2, seed=1, maxiter=40)
    m = LCM(1, "matern52", levels=levels).fit(Xs, ys, **kw)
    mt = LCM(1, "matern52", levels=levels, backend="torch", device=device).fit(Xs, ys, **kw)
    Xt = rng.random((7, 2))
    assert mt.task_calibration_factors() == pytest.approx(m.task_calibration_factors(), rel=1e-4)
    for i in (0, 1):
        for noise in (False, True):
            for u, v in zip(m.predict_calibrated(i, Xt, noise), mt.predict_calibrated(i, Xt, noise)):
                _close(v, u, rtol=1e-4, atol=1e-9)
    Xs, ys = make_data([30, 24, 8], d=2, seed=8)
    p = random_params(Q=2, T=3, d=2, rank=1, seed=8)
    m = LCM(2).condition(Xs, ys, p)
    mt = LCM(2, backend="torch", device=device).condition(Xs, ys, p)
    got, want = mt.task_calibrations(refit=False), m.task_calibrations(refit=False)
    _close(np.array([c.at_prior() for c in got]), np.array([c.at_prior() for c in want]))
    held, held_t = m.held_out(refit=False), mt.held_out(refit=False)
    for key in ("r", "v", "noise", "prior"):
        _close(getattr(held_t, key), getattr(held, key))
