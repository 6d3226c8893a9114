"""Issue 46: run-free answers from large sources (batched row checks, cached reading and fit)."""

from __future__ import annotations

import numpy as np
import pytest

import gptask as gt
from gptask.sources.importing.rows import DataError, read_rows


def _problem(candidates: bool = False) -> gt.Problem:
    tasks = gt.Space([gt.Integer("m", 1, 100), gt.Categorical("alg", ["a", "b"])])
    params = gt.Space([gt.Integer("mb", 1, 16), gt.Integer("p", 1, 4), gt.Categorical("kind", ["x", "y", "z"])])
    listed = None
    if candidates:
        listed = [{"mb": mb, "p": p, "kind": k} for mb in range(1, 17, 3) for p in (1, 2, 4) for k in ("x", "z")]
    return gt.Problem(tasks, params, lambda t, c: 1.0, candidates=listed,
                      constraints=["mb * p <= m", "kind != 'y' or p > 1", lambda c: c["mb"] != 7],
                      constants={"cores": 4})


@pytest.mark.parametrize("candidates", [False, True])
def test_infeasible_rows_agrees_with_violated_point_by_point(candidates):
    problem = _problem(candidates)
    rng = np.random.default_rng(3)
    tasks = [{"m": int(rng.integers(1, 40)), "alg": str(rng.choice(["a", "b"]))} for _ in range(400)]
    params = [{"mb": int(rng.integers(1, 17)), "p": int(rng.integers(1, 5)), "kind": str(rng.choice(["x", "y", "z"]))}
              for _ in range(400)]
    batch = problem.infeasible_rows(tasks, params)
    brute = np.array([bool(problem.violated(t, p)) for t, p in zip(tasks, params)])
    assert batch.any() and not batch.all()
    np.testing.assert_array_equal(batch, brute)


def test_read_rows_names_every_bad_row_in_order_as_before():
    problem = _problem()
    data = [{"m": 10, "alg": "a", "mb": 5, "p": 2, "kind": "x", "value": 1.0},   # fine
            {"m": 10, "alg": "a", "mb": 6, "p": 2, "kind": "x", "value": 1.0},   # mb * p > m
            {"m": 10, "alg": "a", "mb": 99, "p": 2, "kind": "x", "value": 1.0},  # outside the space
            {"m": 10, "alg": "b", "mb": 7, "p": 1, "kind": "x", "value": 1.0}]   # the callable refuses
    with pytest.raises(DataError) as info:
        read_rows(problem, data)
    lines = str(info.value).splitlines()[1:]
    assert [line.split(":")[0].strip() for line in lines] == ["data[1]", "data[2]", "data[3]"]
    assert "violates constraint #0 (mb * p <= m)" in lines[0] and "outside" in lines[1]
    assert "violates constraint #2" in lines[2]
    kept = read_rows(problem, data, skip_invalid=True)
    assert [r.line for r in kept] == [0]


def _grid_problem() -> gt.Problem:
    tasks = gt.Space([gt.Categorical("kernel", ["conv"])])
    params = gt.Space([gt.Integer("x", 0, 10), gt.Categorical("k", [2, 4, 6])])
    return gt.Problem(tasks, params, lambda t, c: 1.0)


MACHINE_OPTIMA = {"a": 2, "b": 3, "c": 8}


def _measured(machine: str, drop: int = 0) -> list[dict]:
    """Every configuration of the grid problem measured on ``machine`` (its optimum x at
    MACHINE_OPTIMA, k = 4), less every ``drop``-th one."""
    rows = [{"kernel": "conv", "x": x, "k": k, "machine.label": machine,
             "value": 1.0 + 0.3 * (x - MACHINE_OPTIMA[machine]) ** 2 + 0.2 * (k - 4) ** 2}
            for x in range(11) for k in (2, 4, 6)]
    return [r for j, r in enumerate(rows) if not drop or j % drop]


def test_a_consensus_pick_from_complete_sources_needs_no_prediction_of_the_seen_machines(monkeypatch):
    import gptask.transfer.tla1 as tla1

    calls = []
    real = tla1.predict_encoded
    monkeypatch.setattr(tla1, "predict_encoded", lambda tm, task, X: calls.append(len(X)) or real(tm, task, X))
    sources = [_measured(m) for m in MACHINE_OPTIMA]
    pred = gt.predict_optimum(None, {"kernel": "conv"}, sources=sources, machine="new", problem=_grid_problem(),
                              restarts=1)
    assert pred.route == "consensus" and calls == []
    # brute force: the configuration of least mean log value over the three machines' measurements
    by = {(r["x"], r["k"]): 0.0 for r in sources[0]}
    for rows in sources:
        for r in rows:
            by[(r["x"], r["k"])] += np.log(r["value"])
    x, k = min(by, key=by.get)
    assert (pred.params["x"], pred.params["k"]) == (x, k)


def test_a_consensus_pick_predicts_only_what_the_sources_did_not_measure(monkeypatch):
    import gptask.transfer.tla1 as tla1
    from gptask.results.consensus import consensus_scores, measured_values

    calls = []
    real = tla1.predict_encoded
    monkeypatch.setattr(tla1, "predict_encoded", lambda tm, task, X, **kw: calls.append(len(X)) or real(tm, task, X, **kw))
    problem = _grid_problem()
    sources = [_measured("a", drop=4), _measured("b", drop=5), _measured("c")]
    seen_tables = []
    real_pick = tla1._consensus_pick

    def spy(tm, task, unseen, feas, enc, measured=()):
        # the reference: every candidate predicted on every seen machine, then measurements put in
        C = tla1._consensus_candidates(tm, task, feas, enc)
        seen = [{**task, **dict(zip(unseen, v))} for v in zip(*unseen.values())]
        P = np.array([real(tm, t, C)[0] for t in seen])
        M = measured_values(measured, seen, tm.param_space.decode(C))
        seen_tables.append(C[int(np.argmin(consensus_scores(np.where(np.isnan(M), P, M))))])
        calls.clear()
        return real_pick(tm, task, unseen, feas, enc, measured)

    monkeypatch.setattr(tla1, "_consensus_pick", spy)
    pred = gt.predict_optimum(None, {"kernel": "conv"}, sources=sources, machine="new", problem=problem, restarts=1)
    assert pred.route == "consensus"
    missing = 33 - len(set(range(33)) & {j for j in range(33) if j % 4 and j % 5})  # some machine lacks these
    assert calls == [missing] * 3
    np.testing.assert_array_equal(pred.encoded, seen_tables[0])


def test_a_second_pick_with_the_same_sources_reads_and_fits_nothing_and_a_changed_row_is_read_again(
        monkeypatch, tmp_path):
    import gptask.sources.importing as importing
    import gptask.sources.multisource as multisource

    reads, fits = [], []
    real_read, real_fit = multisource.read_measurements, importing.fit
    monkeypatch.setattr(multisource, "read_measurements", lambda *a, **k: reads.append(1) or real_read(*a, **k))
    monkeypatch.setattr(importing, "fit", lambda *a, **k: fits.append(1) or real_fit(*a, **k))
    problem = _grid_problem()
    sources = [_measured("a"), _measured("b", drop=5), _measured("c")]
    ask = dict(sources=sources, machine="new", problem=problem, restarts=1)
    plain = gt.predict_optimum(None, {"kernel": "conv"}, **ask)
    assert (len(reads), len(fits)) == (3, 1)
    first = gt.predict_optimum(None, {"kernel": "conv"}, cache=tmp_path / "cache", **ask)
    assert (len(reads), len(fits)) == (6, 2)
    second = gt.predict_optimum(None, {"kernel": "conv"}, cache=tmp_path / "cache", **ask)
    assert (len(reads), len(fits)) == (6, 2)  # everything from the cache
    for p in (first, second):  # the same answer as without a cache
        assert p.params == plain.params and p.route == plain.route
        assert p.value == pytest.approx(plain.value, rel=1e-9) and p.value_std == pytest.approx(plain.value_std, rel=1e-9)
    assert sorted(f.name.split("-")[0] for f in (tmp_path / "cache").iterdir()) == ["measurements"] * 3 + ["model"]
    # one changed row: that source is read again, and the model fitted again
    changed = [dict(r) for r in sources[2]]
    changed[0]["value"] *= 1.5
    gt.predict_optimum(None, {"kernel": "conv"}, cache=tmp_path / "cache", **{**ask, "sources": sources[:2] + [changed]})
    assert (len(reads), len(fits)) == (7, 3)
    # a cached file that does not read back is read again, not trusted
    for f in (tmp_path / "cache").glob("measurements-*.json"):
        f.write_text("{")
    gt.predict_optimum(None, {"kernel": "conv"}, cache=tmp_path / "cache", **ask)
    assert len(reads) == 10


def _tune_one(monkeypatch, lazy: bool) -> tuple[gt.TuningResult, list]:
    """gt.tune of the grid problem's new machine for one run with three machines as sources; the
    LCM fits made counted (``lazy=False``: the result's model fitted at the end, as before)."""
    from gptask.model.numerics import LCM
    from gptask.tuning.tuner import Tuner

    fits = []
    real_fit = LCM.fit
    monkeypatch.setattr(LCM, "fit", lambda self, *a, **k: fits.append(1) or real_fit(self, *a, **k))
    if not lazy:
        real_result = Tuner.result
        monkeypatch.setattr(Tuner, "result", lambda self, lazy_model=False: real_result(self))
    sources = [_measured(m, drop=4) for m in MACHINE_OPTIMA]
    r = gt.tune(_grid_problem(), [{"kernel": "conv"}], 1, seed=0, sources=sources, provenance="new",
                progress=False, restarts=1)
    return r, fits


def test_tune_with_sources_fits_the_results_model_only_when_it_is_read(monkeypatch):
    """Issue 46: after gt.tune(..., 1, sources=...) the result's model was 91 % of the call; it is
    now fitted when first read, the same model as the one fitted at the end of the run."""
    eager, eager_fits = _tune_one(monkeypatch, lazy=False)
    assert eager_fits and eager.model is not None
    monkeypatch.undo()
    lazy, fits = _tune_one(monkeypatch, lazy=True)
    assert fits == [] and not lazy.model_fitted  # the run itself fitted nothing: the one run is a design point
    assert [t.params for t in lazy.history] == [t.params for t in eager.history]
    assert lazy.transform.use_log == eager.transform.use_log and len(fits) == len(eager_fits)
    got, want = lazy.model.get_params(), eager.model.get_params()
    assert all(np.allclose(got[k], want[k]) for k in want)
    n = len(fits)
    assert lazy.model is lazy.model and len(fits) == n  # fitted once
    pred = gt.predict_optimum(lazy, lazy.tasks[0])
    assert pred.params == gt.predict_optimum(eager, eager.tasks[0]).params


def test_a_resumed_tune_with_sources_and_cache_reads_and_fits_nothing_it_did(monkeypatch, tmp_path):
    """Issue 46: gt.tune(..., sources=..., cache=DIR): the second call on the same history reads no
    source and fits no model (the first call's result's model, fitted when read, is kept in the
    cache and put in the history), with the same model; a changed source is read again."""
    import gptask.sources.multisource as multisource
    from gptask.model.numerics import LCM

    reads, fits = [], []
    real_read, real_fit = multisource.read_measurements, LCM.fit
    monkeypatch.setattr(multisource, "read_measurements", lambda *a, **k: reads.append(1) or real_read(*a, **k))
    monkeypatch.setattr(LCM, "fit", lambda self, *a, **k: fits.append(1) or real_fit(self, *a, **k))
    sources = [_measured(m, drop=4) for m in MACHINE_OPTIMA]
    args = dict(seed=0, sources=sources, provenance="new", progress=False, restarts=1,
                history=tmp_path / "h.sqlite", cache=tmp_path / "cache")
    first = gt.tune(_grid_problem(), [{"kernel": "conv"}], 1, **args)
    want = first.model.get_params()
    assert len(reads) == 3 and fits
    reads.clear(), fits.clear()
    again = gt.tune(_grid_problem(), [{"kernel": "conv"}], 1, **args)  # resumed: the budget is spent
    got = again.model.get_params()
    assert reads == [] and fits == []
    assert [t.id for t in again.history] == [t.id for t in first.history]
    assert all(np.allclose(got[k], want[k]) for k in want)
    changed = [sources[0][:-1]] + sources[1:]
    gt.tune(_grid_problem(), [{"kernel": "conv"}], 1, **{**args, "sources": changed, "history": tmp_path / "h2.sqlite"})
    assert len(reads) == 1  # only the changed source


def test_cache_without_sources_is_refused_naming_it(tmp_path):
    from gptask.sources.multisource import SourceError

    with pytest.raises(SourceError, match="cache= .* needs sources="):
        gt.tune(_grid_problem(), [{"kernel": "conv"}], 1, cache=tmp_path, progress=False)


def test_a_pick_decided_by_complete_sources_fits_no_model_until_a_model_field_is_read(monkeypatch):
    """Issue 46: with every candidate measured on every seen machine the consensus pick is a ranking
    of the measurements; the model (75 % of the call) is fitted only when the prediction's value,
    value_std, std or raw is read, once, and they are those of the eager path."""
    import gptask.sources.importing as importing
    import gptask.sources.multisource as multisource
    import gptask.transfer.tla1 as tla1

    fits = []
    real_fit = importing.fit
    monkeypatch.setattr(importing, "fit", lambda *a, **k: fits.append(1) or real_fit(*a, **k))
    sources = [_measured(m) for m in MACHINE_OPTIMA]
    sources[1][5]["value"] = float("nan")  # a failed run: rules its configuration out
    sources[1][5]["status"] = "failed"
    for rows in sources:
        for r in rows:
            r.setdefault("status", "complete")
    ask = dict(sources=[gt.Source(rows, status="status") for rows in sources], machine="new",
               problem=_grid_problem(), restarts=1)
    lazy = gt.predict_optimum(None, {"kernel": "conv"}, **ask)
    assert isinstance(lazy, tla1.LazyPrediction) and fits == [] and not lazy.model_fitted
    assert lazy.route == "consensus" and lazy.feasible and not lazy.projected
    # brute force: least mean log value over the three machines, the failed configuration left out
    by = {(r["x"], r["k"]): 0.0 for r in sources[0]}
    for rows in sources:
        for r in rows:
            by[(r["x"], r["k"])] += np.log(r["value"]) if r["status"] == "complete" else np.inf
    assert (lazy.params["x"], lazy.params["k"]) == min(by, key=by.get)
    # the eager path: the same call with the measurement-only pick switched off
    monkeypatch.setattr(multisource, "measured_consensus", lambda *a: None, raising=False)
    monkeypatch.setattr(tla1, "measured_consensus", lambda *a: None)
    eager = gt.predict_optimum(None, {"kernel": "conv"}, **ask)
    assert type(eager) is tla1.Prediction and len(fits) == 1
    monkeypatch.undo()
    monkeypatch.setattr(importing, "fit", lambda *a, **k: fits.append(1) or real_fit(*a, **k))
    assert lazy.value == eager.value and len(fits) == 2 and lazy.model_fitted  # read: fitted then
    assert lazy.value_std == eager.value_std and lazy.std == eager.std and len(fits) == 2  # once
    np.testing.assert_array_equal(lazy.raw, eager.raw)
    np.testing.assert_array_equal(lazy.encoded, eager.encoded)
    assert (lazy.params, lazy.task, lazy.route, lazy.feasible, lazy.projected) == \
        (eager.params, eager.task, eager.route, eager.feasible, eager.projected)
    assert repr(lazy) == repr(eager)


def test_an_incomplete_source_or_a_known_machine_still_fits_the_model(monkeypatch):
    import gptask.sources.importing as importing
    import gptask.transfer.tla1 as tla1

    fits = []
    real_fit = importing.fit
    monkeypatch.setattr(importing, "fit", lambda *a, **k: fits.append(1) or real_fit(*a, **k))
    problem = _grid_problem()
    gap = gt.predict_optimum(None, {"kernel": "conv"}, sources=[_measured("a"), _measured("b", drop=5), _measured("c")],
                             machine="new", problem=problem, restarts=1)
    assert type(gap) is tla1.Prediction and gap.route == "consensus" and fits == [1]
    known = gt.predict_optimum(None, {"kernel": "conv"}, sources=[_measured(m) for m in MACHINE_OPTIMA],
                               machine="b", problem=problem, restarts=1)  # a machine with data: TLA1's own route
    assert type(known) is tla1.Prediction and known.route == "optima" and fits == [1, 1]


def test_point_key_fast_paths_keep_the_identity_of_equal_values():
    from gptask.data.trials import point_key

    assert point_key({"b": 1, "a": 0.1 + 0.2}) == point_key({"a": 0.3, "b": np.int64(1)}) == (("a", 0.3), ("b", 1))
    assert point_key({"a": np.float32(0.5)}) == point_key({"a": 0.5})
    assert type(point_key({"a": True})[0][1]) is bool and point_key({"a": "x"}) == (("a", "x"),)


def test_rows_of_one_machine_get_equal_records_that_share_nothing():
    from gptask.data.provenance import unflatten

    rows = [{"machine.label": "gpu", "machine.accelerators": '["A100"]', "machine.cores": "16"}] * 3
    seen: dict = {}
    got = [unflatten(r, f"row {k}", seen) for k, r in enumerate(rows)]
    assert got[0] == got[1] == got[2] == unflatten(rows[0]) == {"label": "gpu", "accelerators": ["A100"], "cores": 16}
    got[0]["accelerators"].append("V100")
    assert got[1]["accelerators"] == ["A100"] and unflatten(rows[0], "row", seen)["accelerators"] == ["A100"]
    with pytest.raises(Exception, match="row 9: column machine.cores"):
        unflatten({"machine.cores": "many"}, "row 9", seen)


def test_a_lazy_prediction_replaced_or_given_all_its_fields_is_a_plain_one():
    import dataclasses

    from gptask.transfer.tla1 import LazyPrediction, Prediction

    calls = []
    whole = Prediction(task={"t": 1}, params={"x": 2}, std={"x": 0.1}, value=3.0, value_std=0.5,
                       encoded=np.zeros(1), raw=np.ones(1), projected=False, feasible=True, route="consensus")
    lazy = LazyPrediction(lambda: calls.append(1) or whole, task={"t": 1}, params={"x": 2}, encoded=np.zeros(1),
                          projected=False, feasible=True, route="consensus")
    assert calls == [] and lazy.params == {"x": 2} and calls == []
    moved = dataclasses.replace(lazy, params={"x": 2})
    assert calls == [1] and moved.value == 3.0 and moved.model_fitted and lazy.std == {"x": 0.1}
    with pytest.raises(AttributeError):
        lazy.nothing
    wrong = LazyPrediction(lambda: whole, task={"t": 1}, params={"x": 5}, encoded=np.zeros(1), projected=False,
                           feasible=True, route="consensus")
    with pytest.raises(ValueError, match="not the pick made from the measurements"):
        wrong.value


def test_a_resumed_tune_with_sources_and_cache_fits_no_failure_classifier_again(monkeypatch, tmp_path):
    """Issue 46: sources with failed runs: the failure classifier fitted for the first call's result
    is kept in the cache with the model's fit; the resumed call puts it in its history and reuses
    it (no grid, no L-BFGS-B search: _fit_ard does not run), with the same probabilities."""
    import gptask.model.surrogate.failure_model as fm
    from gptask.data.run_header import read_failure_fit
    from gptask.data.storage import SQLiteStorage

    searches, fitted = [], []
    real_ard, real_update = fm._fit_ard, fm.FailureModel.update
    monkeypatch.setattr(fm, "_fit_ard", lambda *a: searches.append(1) or real_ard(*a))

    def update(self, trials):
        real_update(self, trials)
        if self.fitted is not None:
            fitted.append((self.last_fit, self.settings(), np.exp(self.fitted.log_prob_success(self.fitted.X))))

    monkeypatch.setattr(fm.FailureModel, "update", update)

    def with_failures(machine: str) -> gt.Source:
        rows = [{**r, "status": "failed", "value": None} if r["x"] >= 9 else {**r, "status": "complete"}
                for r in _measured(machine, drop=4)]
        return gt.Source(rows, status="status")

    sources = [with_failures(m) for m in MACHINE_OPTIMA]
    args = dict(seed=0, sources=sources, provenance="new", progress=False, restarts=1,
                history=tmp_path / "h.sqlite", cache=tmp_path / "cache")
    first = gt.tune(_grid_problem(), [{"kernel": "conv"}], 1, **args)
    first.model  # fitted when read, kept in the cache
    assert searches and fitted[-1][0] == "fitted"
    last = fitted[-1]
    searches.clear()
    again = gt.tune(_grid_problem(), [{"kernel": "conv"}], 1, **args)  # resumed: the budget is spent
    again.model
    assert searches == []
    assert fitted[-1][0] == "reused" and fitted[-1][1] == last[1]
    assert np.max(np.abs(fitted[-1][2] - last[2])) < 1e-9
    with SQLiteStorage(tmp_path / "h.sqlite") as s:
        assert read_failure_fit(s) == last[1]

