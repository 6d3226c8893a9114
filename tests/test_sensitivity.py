"""gt.sensitivity: Sobol indices of the fitted model's mean, against analytic indices (Ishigami,
Sobol G), brute-force conditional variances on a mixed space, and the measured PDGEQRF timings."""

import csv
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import qmc

import gptask as gt
from gptask.insight import sensitivity
from gptask.insight.sensitivity import encoded_sample

ROOT = Path(__file__).resolve().parents[1]
PI = np.pi
#: the issue's target: within 0.05 of the analytic indices with a model fitted on 200 evaluations
TOL = 0.05


def _one_task_problem(params):
    return gt.Problem(gt.Space([gt.Real("t", 0.0, 1.0)]), gt.Space(params), lambda t, p: 0.0)


def _fit_on(problem, X, y, names):
    rows = [{"t": 0.5, **dict(zip(names, x)), "value": float(v)} for x, v in zip(X, y)]
    return gt.fit(problem, rows, progress=False, output_transform="none")


def ishigami(x, a=7.0, b=0.1):
    return np.sin(x[:, 0]) + a * np.sin(x[:, 1]) ** 2 + b * x[:, 2] ** 4 * np.sin(x[:, 0])


def ishigami_indices(a=7.0, b=0.1):
    """Analytic first-order and total indices (Ishigami and Homma 1990; Sobol' and Levitan 1999)."""
    v1 = 0.5 * (1 + b * PI ** 4 / 5) ** 2
    v2 = a ** 2 / 8
    v13 = 8 * b ** 2 * PI ** 8 / 225
    v = v1 + v2 + v13
    return np.array([v1, v2, 0.0]) / v, np.array([v1 + v13, v2, v13]) / v


def g_function(x, a):
    return np.prod((np.abs(4 * x - 2) + a) / (1 + a), axis=1)


def g_indices(a):
    vi = 1.0 / (3.0 * (1.0 + a) ** 2)
    v = np.prod(1.0 + vi) - 1.0
    total = np.array([vi[i] * np.prod(np.delete(1.0 + vi, i)) for i in range(len(a))]) / v
    return vi / v, total


def test_analytic_references_are_right():
    # the classical values: Ishigami S1 = (0.3139, 0.4424, 0), ST = (0.5576, 0.4424, 0.2437)
    s1, st = ishigami_indices()
    assert np.allclose(s1, [0.3139, 0.4424, 0.0], atol=1e-4)
    assert np.allclose(st, [0.5576, 0.4424, 0.2437], atol=1e-4)
    # and the G formulas against a plain Monte Carlo pick-freeze estimate on the function itself
    a = np.array([0.0, 1.0, 4.5])
    s1, st = g_indices(a)
    rng = np.random.default_rng(0)
    A, B = rng.random((200_000, 3)), rng.random((200_000, 3))
    fA, fB = g_function(A, a), g_function(B, a)
    var = np.var(np.concatenate([fA, fB]))
    for i in range(3):
        ABi = A.copy()
        ABi[:, i] = B[:, i]
        fABi = g_function(ABi, a)
        assert np.mean(fB * (fABi - fA)) / var == pytest.approx(s1[i], abs=0.01)
        assert 0.5 * np.mean((fA - fABi) ** 2) / var == pytest.approx(st[i], abs=0.01)


def test_ishigami_indices_from_a_model_of_200_evaluations():
    problem = _one_task_problem([gt.Real(f"x{k}", -PI, PI) for k in range(3)])
    X = qmc.scale(qmc.LatinHypercube(3, seed=1).random(200), [-PI] * 3, [PI] * 3)
    result = _fit_on(problem, X, ishigami(X), ["x0", "x1", "x2"])
    report = sensitivity(result, base=4096, scale="user")
    s1, st = ishigami_indices()
    assert report.names == ("x0", "x1", "x2")
    assert np.max(np.abs(report.mean.first - s1)) < TOL, (report.mean.first, s1)
    assert np.max(np.abs(report.mean.total - st)) < TOL, (report.mean.total, st)
    # one task: its indices are the mean; the intervals are positive and narrower than the tolerance
    assert np.array_equal(report.of(0).total, report.mean.total)
    assert np.all(report.mean.total_conf > 0) and np.all(report.mean.total_conf < TOL)
    assert report.ranking()[0] == "x0" and report.fixable() == []


def test_sobol_g_indices_from_a_model_of_200_evaluations():
    a = np.array([0.0, 1.0, 4.5, 9.0, 99.0, 99.0])
    names = [f"x{k}" for k in range(len(a))]
    problem = _one_task_problem([gt.Real(n, 0.0, 1.0) for n in names])
    X = qmc.LatinHypercube(len(a), seed=1).random(200)
    result = _fit_on(problem, X, g_function(X, a), names)
    report = sensitivity(result, base=4096, scale="user")
    s1, st = g_indices(a)
    assert np.max(np.abs(report.mean.first - s1)) < TOL, (report.mean.first, s1)
    assert np.max(np.abs(report.mean.total - st)) < TOL, (report.mean.total, st)
    # the two parameters with a = 99 (ST 0.0008) can be fixed; x0 (ST 0.79) and x1 (0.24) cannot
    assert set(report.fixable()) >= {"x4", "x5"} and not {"x0", "x1"} & set(report.fixable())


def test_model_units_equal_user_units_without_the_log_transform():
    problem = _one_task_problem([gt.Real(f"x{k}", -PI, PI) for k in range(3)])
    X = qmc.scale(qmc.LatinHypercube(3, seed=2).random(120), [-PI] * 3, [PI] * 3)
    result = _fit_on(problem, X, ishigami(X), ["x0", "x1", "x2"])
    model, user = sensitivity(result, base=256), sensitivity(result, base=256, scale="user")
    # a per-task affine map of the output changes no index
    assert np.allclose(model.mean.first, user.mean.first, atol=1e-9)
    assert np.allclose(model.mean.total, user.mean.total, atol=1e-9)


def _mixed_problem():
    params = [gt.Real("x", 0.0, 1.0), gt.Categorical("alg", ["a", "b", "c"]),
              gt.Ordinal("block", [16, 32, 64, 128, 256], log=True), gt.Boolean("pin")]
    return gt.Problem(gt.Space([gt.Real("t", 0.0, 1.0)]), gt.Space(params), lambda t, p: 0.0)


def _mixed_value(p, t):
    return (1.0 + t) * p["x"] ** 2 + 1.5 * (p["alg"] == "b") + 0.3 * np.log2(p["block"]) * (1 + p["pin"])


def test_indices_are_per_parameter_and_match_brute_force_conditional_variances():
    """On a mixed space (a categorical of 3 columns, an ordinal with indicator columns, a boolean),
    the index of each *parameter* equals Var(E[f | x_i]) / Var(f) of the model's mean computed by
    brute force: every value of a discrete parameter fixed in turn, averaged over a large sample."""
    problem = _mixed_problem()
    space = problem.param_space
    assert space.n_columns > len(space)  # several columns per parameter
    rng = np.random.default_rng(3)
    rows = []
    for t in (0.2, 0.8):
        for u in rng.random((60, 4)):
            p = space.decode(encoded_sample(space, u[None, :]))[0]
            rows.append({"t": t, **p, "value": _mixed_value(p, t)})
    result = gt.fit(problem, rows, progress=False, output_transform="none")
    report = sensitivity(result, base=2048)
    assert report.names == ("x", "alg", "block", "pin")
    assert len(report.per_task) == 2 and len(report.mean.first) == 4

    i = 0
    big = encoded_sample(space, rng.random((40_000, 4)))
    f = result.model.predict(i, big)[0]
    var = np.var(f)
    for k, d in enumerate(space.dimensions):
        sl = space.column_slices()[k]
        if d.values() is not None:  # discrete: E[f | value] for every value, equally likely
            cond = []
            for col in d.encode(d.values()):
                fixed = big.copy()
                fixed[:, sl] = col
                cond.append(np.mean(result.model.predict(i, fixed)[0]))
            brute = np.var(cond) / var
        else:  # continuous: 64 equal bins of x
            u = big[:, sl][:, 0]
            bins = np.minimum((u * 64).astype(int), 63)
            means = np.array([f[bins == b].mean() for b in range(64)])
            brute = np.var(means) / var
        assert report.of(i).first[k] == pytest.approx(brute, abs=0.03), (d.name, report.of(i).first[k], brute)


def test_encoded_sample_gives_every_value_of_a_discrete_dimension_alike():
    space = _mixed_problem().param_space
    X = encoded_sample(space, np.random.default_rng(0).random((30_000, 4)))
    points = space.decode(X)
    assert np.allclose(space.snap(X), X)  # valid encodings only
    for name, values in (("alg", ["a", "b", "c"]), ("block", [16, 32, 64, 128, 256]), ("pin", [False, True])):
        counts = np.array([sum(p[name] == v for p in points) for v in values]) / len(points)
        assert np.allclose(counts, 1.0 / len(values), atol=0.015), (name, counts)
    with pytest.raises(ValueError, match=r"shape \(n, 4\)"):
        encoded_sample(space, np.zeros((3, 2)))


def test_bad_input_is_named():
    problem = _one_task_problem([gt.Real("x0", 0, 1), gt.Real("x1", 0, 1)])
    X = np.random.default_rng(0).random((12, 2))
    result = _fit_on(problem, X, X[:, 0] + X[:, 1] ** 2, ["x0", "x1"])
    with pytest.raises(ValueError, match="power of 2"):
        sensitivity(result, base=1000)
    with pytest.raises(ValueError, match="scale must be one of"):
        sensitivity(result, scale="seconds")
    with pytest.raises(ValueError, match=r"index in 0\.\.0, got 3"):
        sensitivity(result, task=3)
    with pytest.raises(ValueError, match=r"task \{'t': 0.9\} is not one of the model's tasks"):
        sensitivity(result, task={"t": 0.9})
    result.model = None
    with pytest.raises(ValueError, match="needs a fitted model"):
        sensitivity(result)
    with pytest.raises(TypeError, match="TuningResult or a model"):
        sensitivity(object())


def _data_first_order(path):
    """Per size, a model-free first-order index of each parameter from the measured random
    configurations: the correlation ratio of log(time) on the parameter's quartile bins."""
    by = defaultdict(list)
    with open(path) as fh:
        for r in csv.DictReader(fh):
            by[(int(r["m"]), int(r["n"]))].append(r)
    out = {}
    for size, rows in by.items():
        y = np.log([float(r["time"]) for r in rows])
        ratios = {}
        for name in ("mb", "nb", "nproc", "p", "nth"):
            x = np.array([float(r[name]) for r in rows])
            x = np.log(x) if name in ("mb", "nb") else x
            ids = np.digitize(x, np.quantile(x, [0.25, 0.5, 0.75]))
            ratios[name] = sum((ids == k).sum() * (y[ids == k].mean() - y.mean()) ** 2
                               for k in np.unique(ids)) / np.sum((y - y.mean()) ** 2)
        out[size] = ratios
    return out


@pytest.mark.slow
def test_pdgeqrf_16_core_model_agrees_with_the_measured_data():
    """The shipped 16-core PDGEQRF model (fitted on apps/scalapack_qr/data/xeon16/runs.csv): the
    column block size nb explains most of log(time) on every size, as the data's own (model-free)
    correlation ratios say; the row block size mb explains nothing the data can tell from noise and is
    reported fixable."""
    from apps.scalapack_qr import problem

    model = gt.load_model(ROOT / "models" / "pdgeqrf_xeon16.json",
                          problem=problem(cores=16, log_sizes=True, m_max=4000))
    report = sensitivity(model, base=512)
    data = _data_first_order(ROOT / "apps" / "scalapack_qr" / "data" / "xeon16" / "runs.csv")
    assert len(report.per_task) == 8 == len(data)
    for task, ix in zip(report.tasks, report.per_task):
        measured = data[(task["m"], task["n"])]
        assert ix.names[int(np.argmax(ix.total))] == "nb" == max(measured, key=measured.get)
        assert ix.total[ix.names.index("mb")] < 0.05 and measured["mb"] < 0.11  # 0.04: the noise floor of 4 bins
    assert "mb" in report.fixable() and "nb" not in report.fixable()
    # most of the box breaks a constraint (nproc * nth <= 16, p divides nproc): said, not hidden
    assert all(f is not None and f > 0.9 for f in report.infeasible_fraction)


def test_sensitivity_command_on_a_history_and_its_bad_input(tmp_path, capsys):
    import json

    from gptask.cli.main import main
    from gptask.problem.functions import demo_problem, sphere_problem

    h = tmp_path / "sphere.sqlite"
    gt.tune(sphere_problem(), tasks=2, budget=8, n_initial=5, seed=0, history=h, progress=False)
    assert main(["sensitivity", str(h), "--base", "256"]) == 0
    out = capsys.readouterr().out
    assert "Sobol indices of the model's mean in model units" in out and "ST task 1" in out
    assert main(["sensitivity", str(h), "--base", "256", "--task", "1", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [t["task_index"] for t in doc["tasks"]] == [1] and set(doc["mean"]) == {"x1", "x2", "x3"}

    def error(*args):
        assert main(["sensitivity", *map(str, args)]) == 2
        return capsys.readouterr().err

    assert "base must be a power of 2" in error(h, "--base", "1000")
    assert "index in 0..1, got 5" in error(h, "--task", "5")
    assert "over the task dimensions ['s']" in error(h, "--task", "q=1")
    imported = tmp_path / "imported.sqlite"  # measurements without a model fit
    gt.import_runs(sphere_problem(), [{"s": 0.5, "x1": 0.1, "x2": 0.2, "x3": 0.3, "value": 1.0}], imported)
    assert "needs a fitted model: this result has none yet" in error(imported)
    demo = tmp_path / "demo.sqlite"
    gt.tune(demo_problem(), tasks=2, budget=6, n_initial=4, seed=0, history=demo, progress=False)
    assert "a space of one parameter (x) has nothing to apportion" in error(demo)
    assert "no such file" in error(tmp_path / "none.sqlite")


def _imputed_result(n=120, seed=2):
    """A TuningResult whose model holds every failed run as the task's worst value (as a result
    rebuilt from a history does, gptask.results.rebuild): the objective 1 + x0 + 0.3 x1 (x2 has no effect:
    analytic ST = (1, 0.09, 0) / 1.09), runs failing where x2 > 0.5 (a memory limit decided by a
    parameter the objective ignores) and 5 % random crashes."""
    from gptask.model.numerics import LCM
    from gptask.model.surrogate.data import training_data

    problem = _one_task_problem([gt.Real(f"x{k}", 0.0, 1.0) for k in range(3)])
    X = qmc.LatinHypercube(3, seed=seed).random(n)
    crash = np.random.default_rng(seed).random(n) < 0.05
    trials = []
    for k, (x, c) in enumerate(zip(X, crash)):
        params = {"x0": float(x[0]), "x1": float(x[1]), "x2": float(x[2])}
        if x[2] > 0.5 or c:
            trials.append(gt.Trial(k + 1, 0, {"t": 0.5}, params, gt.Status.FAILED, reason="out of memory"))
        else:
            trials.append(gt.Trial(k + 1, 0, {"t": 0.5}, params, gt.Status.COMPLETE, 1.0 + x[0] + 0.3 * x[1]))
    data = training_data(trials, 1, problem.param_space, use_log=False)
    model = LCM().fit(data.X, data.y, restarts=2, seed=0)
    return gt.TuningResult(problem, [{"t": 0.5}], trials, model, data.transform)


def test_failed_runs_imputed_as_worst_values_do_not_enter_the_indices():
    # issue 40: on a campaign with failed runs the report gave the memory-limit parameters the
    # variance of the imputed failure wall (the dominant parameter's ST fell from 0.87 to 0.03);
    # the indices are of the objective's model, re-conditioned on the measured runs only
    result = _imputed_result()
    n_failed = sum(t.status is gt.Status.FAILED for t in result.history)
    assert n_failed > 40
    report = sensitivity(result, base=2048)
    _, st = np.array([1.0, 0.09, 0.0]) / 1.09, np.array([1.0, 0.09, 0.0]) / 1.09
    assert np.allclose(report.mean.total, st, atol=TOL), report.mean.total
    assert report.fixable() == ["x2"]
    assert report.left_out == n_failed
    assert f"{n_failed} failed" in report.describe()
