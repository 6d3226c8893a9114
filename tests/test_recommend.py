"""TuningResult.recommend: the posterior-mean pick, confirmation runs (counted, stored, reused,
never against the tuning budget), failures, errors, the CLI, and the benefit on noisy objectives
measured against the noise-free truth."""

import numpy as np
import pytest

import gptask as gt
from gptask import cli
from gptask.problem.functions import FAMILIES, with_noise
from gptask.results.recommend import Recommendation
from gptask.data.storage import SQLiteStorage
from gptask.data.trials import CONFIRM_SOURCE, Status


def stored_confirmations(path):
    """The confirmation runs in the history file, read as a separate process would."""
    with SQLiteStorage(path, read_only=True) as h:
        return h.confirmations()


def stored_trials(path):
    with SQLiteStorage(path, read_only=True) as h:
        return h.trials()


def bowl_problem(noise_sd=0.0, seed=0, calls=None, fail_when=None):
    """A positive 2-parameter bowl whose centre moves with the task, optionally with heavy-tailed
    multiplicative noise; ``calls`` (a list) records every objective call, ``fail_when(params)``
    makes a call raise."""
    tasks = gt.Space([gt.Real("t", 0.0, 1.0)])
    params = gt.Space([gt.Real("x", 0.0, 1.0), gt.Integer("k", 1, 8)])

    def truth(task, p):
        return 1.0 + (p["x"] - 0.2 - 0.6 * task["t"]) ** 2 + 0.02 * (p["k"] - 5) ** 2

    base = gt.Problem(tasks, params, truth, name="bowl")
    noisy = with_noise(base, noise_sd, seed) if noise_sd else base

    def objective(task, p):
        if calls is not None:
            calls.append((dict(task), dict(p)))
        if fail_when is not None and fail_when(p):
            raise RuntimeError("launch crashed")
        return noisy.objective(task, p)

    return gt.Problem(tasks, params, objective, name="bowl"), truth


TASKS = [{"t": 0.1}, {"t": 0.8}]


def _tune(problem, history=None, budget=8, seed=0, **options):
    return gt.tune(problem, tasks=TASKS, budget=budget, n_initial=5, seed=seed, history=history, progress=False,
                   **options)


def test_pick_is_the_lowest_posterior_mean_of_the_evaluated_configurations():
    problem, _ = bowl_problem(noise_sd=0.2)
    res = _tune(problem)
    for i in range(2):
        rec = res.recommend(i)
        assert isinstance(rec, Recommendation) and rec.confirm == 0 and rec.basis == "posterior mean"
        # independent of recommend's own code path: every distinct evaluated configuration, by hand
        configs = {tuple(sorted(r["params"].items())): r["params"] for r in res.records(i)}
        X = problem.param_space.encode(list(configs.values()))
        mean, var = res.model.predict(i, X)
        k = int(np.argmin(mean))
        assert rec.params == list(configs.values())[k]
        assert rec.predicted == pytest.approx(float(res.transform.backward(i, mean[k])))
        assert rec.predicted_std > 0
        assert (rec.raw_best_params, rec.raw_best_value) == res.best(i)
        assert len(rec.candidates) == 3 and rec.candidates[0].params == rec.params
        preds = [c.predicted for c in rec.candidates]
        assert preds == sorted(preds)
        with pytest.raises(AttributeError):
            rec.params = {}  # frozen


def test_confirm_runs_exactly_k_per_candidate_records_them_and_reuses_them(tmp_path):
    calls = []
    problem, _ = bowl_problem(noise_sd=0.2, calls=calls)
    path = tmp_path / "runs.sqlite"
    res = _tune(problem, history=path)
    n_tuning = len(calls)
    assert n_tuning == 2 * 8
    rec = res.recommend(1, confirm=3)
    confirm_calls = calls[n_tuning:]
    cand = [c.params for c in rec.candidates]
    # the 3 best by posterior mean, and the single best launch's configuration if not among them
    assert cand[:3] == [c.params for c in res.recommend(1).candidates[:3]]
    assert rec.raw_best_params in cand and len(cand) == 3 + (rec.raw_best_params not in cand[:3])
    assert len(confirm_calls) == 3 * len(cand)
    assert [p for _, p in confirm_calls] == cand * 3  # round robin: 1, 2, 3, 1, 2, 3, ...
    assert all(t == TASKS[1] for t, _ in confirm_calls)
    assert rec.basis == "confirmed min" and rec.aggregate == "min"
    assert all(len(c.confirmations) == 3 and not c.failures for c in rec.candidates)
    assert rec.confirmed == min(min(c.confirmations) for c in rec.candidates) == rec.pick.spread[0]
    assert rec.median == float(np.median(rec.pick.confirmations))
    lo, hi = rec.pick.spread
    assert lo <= rec.median <= hi and rec.pick.iqr >= 0
    # committed to the history with their own source, apart from the tuning evaluations
    stored = stored_confirmations(path)
    assert len(stored) == 3 * len(cand) and all(r.task_index == 1 and r.source == CONFIRM_SOURCE for r in stored)
    assert len(stored_trials(path)) == n_tuning  # not trials
    assert sorted(r["value"] for r in stored) == sorted(v for c in rec.candidates for v in c.confirmations)
    assert len(res.history) == n_tuning and len(res.confirmations) == 3 * len(cand)
    assert res.best(1) == (rec.raw_best_params, rec.raw_best_value)  # best() ignores confirmation runs
    # a second call reuses them; a larger k runs only the missing ones
    again = res.recommend(1, confirm=3)
    assert len(calls) == n_tuning + 3 * len(cand) and again.params == rec.params
    res.recommend(1, confirm=4)
    assert len(calls) == n_tuning + 4 * len(cand)
    # another summary of the same runs: no new run, the lowest median wins
    by_median = res.recommend(1, confirm=4, aggregate="median")
    assert len(calls) == n_tuning + 4 * len(cand) and by_median.basis == "confirmed median"
    assert by_median.confirmed == by_median.median == min(c.median for c in by_median.candidates)


def test_confirmation_runs_do_not_count_against_the_budget_on_resume(tmp_path):
    calls = []
    problem, _ = bowl_problem(noise_sd=0.2, calls=calls)
    path = tmp_path / "runs.sqlite"
    # a run stopped after 6 of 8 evaluations per task, then confirmed
    with gt.Tuner(problem, TASKS, budget=8, n_initial=5, seed=0, history=path) as tuner:
        while min(tuner.count(i) for i in range(2)) < 6:
            for trial in tuner.ask():
                tuner.tell(trial, problem.objective(trial.task, trial.params))
        partial = tuner.result()
    n_conf = 2 * sum(len(partial.recommend(i, confirm=2).candidates) for i in range(2))
    before = len(calls)
    assert len(stored_confirmations(path)) == n_conf
    # the resume runs exactly the 2 missing tuning evaluations per task
    res = _tune(problem, history=path)
    assert len(calls) - before == 4
    assert [len(res.records(i, status=None)) for i in range(2)] == [8, 8]
    assert len(res.confirmations) == n_conf
    assert all(r["source"] != CONFIRM_SOURCE for r in res.history)
    # a finished run resumed again runs nothing; its confirmations are reused, only missing ones run
    again = _tune(problem, history=path)
    assert len(calls) - before == 4
    ranked = [c.params for c in again.recommend(0).candidates]
    have = [sum(r["task_index"] == 0 and r["params"] == p for r in again.confirmations) for p in ranked]
    rec = again.recommend(0, confirm=2)
    assert len(calls) - before == 4 + sum(max(0, 2 - n) for n in have)
    assert [len(c.confirmations) for c in rec.candidates] == [max(2, n) for n in have]


def test_failed_confirmation_runs_are_recorded_and_never_raise(tmp_path):
    state = {"confirming": False}
    problem, _ = bowl_problem(noise_sd=0.2, fail_when=lambda p: state["confirming"])
    path = tmp_path / "runs.sqlite"
    res = _tune(problem, history=path)
    state["confirming"] = True
    rec = res.recommend(0, confirm=2)
    assert rec.basis == "posterior mean" and rec.params == res.recommend(0).params
    assert all(c.failures == ("RuntimeError: launch crashed",) * 2 and c.median is None for c in rec.candidates)
    n = len(rec.candidates)
    stored = stored_confirmations(path)
    assert len(stored) == 2 * n and all(r.status is Status.FAILED and "launch crashed" in r.reason for r in stored)
    # a failed run is an attempt: the same k runs nothing more, a larger k runs the missing attempts
    state["confirming"] = False
    assert res.recommend(0, confirm=2).basis == "posterior mean"
    assert len(res.confirmations) == 2 * n
    rec3 = res.recommend(0, confirm=3)
    assert rec3.basis == "confirmed min" and len(res.confirmations) == 3 * n
    assert all(len(c.confirmations) == 1 and len(c.failures) == 2 for c in rec3.candidates)


def test_recommend_errors_name_the_problem():
    problem, _ = bowl_problem()
    with gt.Tuner(problem, TASKS, budget=5, n_initial=5, seed=0) as tuner:
        for trial in tuner.ask():
            tuner.tell(trial, None if trial.task_index == 1 else problem.objective(trial.task, trial.params),
                       reason="crashed")
        res = tuner.result()
    with pytest.raises(ValueError, match=r"task 1 .* has no complete evaluation"):
        res.recommend(1)
    with pytest.raises(ValueError, match="task index"):
        res.recommend(2)
    with pytest.raises(ValueError, match="confirm must be >= 0"):
        res.recommend(0, confirm=-1)
    with pytest.raises(TypeError, match="confirm must be an integer"):
        res.recommend(0, confirm=1.5)
    with pytest.raises(ValueError, match="candidates must be >= 1"):
        res.recommend(0, candidates=0)
    with pytest.raises(ValueError, match="aggregate must be one of"):
        res.recommend(0, aggregate="best")
    assert res.recommend(0).params in [r["params"] for r in res.records(0)]


def test_without_a_model_the_pick_is_the_best_mean_observed_value():
    problem, _ = bowl_problem()
    with gt.Tuner(problem, TASKS, budget=5, n_initial=5, seed=0) as tuner:
        for trial in tuner.ask():
            tuner.tell(trial, problem.objective(trial.task, trial.params))
        res = gt.TuningResult(problem, tuner.tasks, tuner.records)  # no model
    rec = res.recommend(0)
    assert rec.basis == "observed mean (no model)" and rec.predicted is None
    assert (rec.params, rec.pick.observed[0]) == res.best(0)


@pytest.mark.parametrize("kernel", ["rbf", "matern52"])
def test_show_prints_the_recommendation_beside_the_raw_best(tmp_path, capsys, kernel):
    problem, _ = bowl_problem(noise_sd=0.2)
    path = tmp_path / "runs.sqlite"
    res = _tune(problem, history=path, kernel=kernel)
    n_conf = 2 * len(res.recommend(0, confirm=2).candidates)
    assert cli.main(["show", str(path)]) == 0
    out = capsys.readouterr().out
    assert f"evaluations: 16  pending: 0  confirmation runs: {n_conf}" in out
    assert "raw best" in out and "recommended" in out and "predicted" in out and "confirmed min" in out
    # the table rebuilt from the file agrees with the live result
    with SQLiteStorage(path, read_only=True) as h:
        rebuilt = cli.result_from_history(h)
    rows = cli.recommendation_table(rebuilt)
    for i in range(2):
        live = res.recommend(i)
        assert {k: rows[i][k] for k in live.params} == live.params
        assert rows[i]["predicted"] == pytest.approx(live.predicted, rel=1e-6)
        assert rows[i]["raw best"] == res.best(i)[1]


def test_show_without_a_model_says_so(tmp_path, capsys):
    problem, _ = bowl_problem()
    path = tmp_path / "runs.sqlite"
    with gt.Tuner(problem, TASKS, budget=8, n_initial=5, seed=0, history=path) as tuner:
        for trial in tuner.ask():
            tuner.tell(trial, problem.objective(trial.task, trial.params))
    assert cli.main(["show", str(path)]) == 0
    assert "recommended: none yet" in capsys.readouterr().out


# ---- the benefit, against the noise-free truth ------------------------------------------------------
@pytest.mark.slow
def test_confirmed_recommendation_beats_the_luckiest_launch_on_a_noisy_family():
    """The mixed family (an integer, a categorical, a real) with heavy-tailed run-time noise
    (``with_noise``, rel. sd 0.3), 4 tasks x 12 runs, 6 seeds: the noise-free value of
    ``recommend(i, confirm=3)``'s pick is lower on average than that of ``best(i)``'s. Not vacuous:
    the picks differ on several tasks, and the worst candidate by the same confirmation runs loses."""
    clean = FAMILIES["mixed"][0]()
    raw, rec, worst, differ = [], [], [], 0
    for seed in range(6):
        res = gt.tune(with_noise(clean, 0.3, seed=100 + seed), tasks=4, budget=12, n_initial=12, seed=seed,
                      progress=False)
        for i, task in enumerate(res.tasks):
            r = res.recommend(i, confirm=3)
            raw.append(clean.objective(task, r.raw_best_params))
            rec.append(clean.objective(task, r.params))
            worst.append(clean.objective(task, max(r.candidates, key=lambda c: c.confirmed_by(r.aggregate)).params))
            differ += r.params != r.raw_best_params
    assert differ >= 4
    assert np.mean(rec) < np.mean(raw) < np.mean(worst), (np.mean(rec), np.mean(raw), np.mean(worst))


# ---- one recommendation everywhere (issue 27) -----------------------------------------------------
DEFAULT = {"x": 0.5, "k": 4}


def staged_problem(calls, state, favour):
    """The bowl with a default configuration, in seconds; while ``state["confirming"]`` the
    objective returns 1.0 for ``favour(task, params)`` and 2.0 for anything else (a machine on
    which the re-launches tell a clear story), recording every call in ``calls``."""
    tasks = gt.Space([gt.Real("t", 0.0, 1.0)])
    params = gt.Space([gt.Real("x", 0.0, 1.0), gt.Integer("k", 1, 8)])

    def objective(task, p):
        calls.append((dict(task), dict(p)))
        if state.get("confirming"):
            return 1.0 if favour(task, p) else 2.0
        return 1.0 + (p["x"] - 0.2 - 0.6 * task["t"]) ** 2 + 0.02 * (p["k"] - 5) ** 2

    return gt.Problem(tasks, params, objective, name="staged", default=DEFAULT, unit="s")


def show_rows(path):
    with SQLiteStorage(path, read_only=True) as h:
        return cli.recommendation_table(cli.result_from_history(h))


def test_show_recommends_what_the_confirmation_runs_chose_with_the_default_relaunched(tmp_path, capsys):
    calls, state, second = [], {}, {}
    problem = staged_problem(calls, state, lambda task, p: second.get(task["t"]) == p)
    path = tmp_path / "runs.sqlite"
    res = _tune(problem, history=path)
    n_tuning = len(calls)
    recs = []
    for i in range(2):
        ranked = res.recommend(i, progress=False).candidates
        second[TASKS[i]["t"]] = dict(ranked[1].params)  # the confirmation runs favour the model's second pick
        state["confirming"] = True
        recs.append(res.recommend(i, confirm=3, progress=False))
        state["confirming"] = False
        rec = recs[-1]
        confirm_calls = [p for _, p in calls[n_tuning:]][-3 * len(rec.candidates):]
        cand = [c.params for c in rec.candidates]
        assert DEFAULT in cand and confirm_calls == cand * 3  # the default round robin with the others
        assert rec.params == ranked[1].params != ranked[0].params and rec.basis == "confirmed min"
        # like for like: the minimum of the default's re-launches against the pick's, from the file
        runs = [r for r in stored_confirmations(path) if r.task_index == i]
        d_min = min(r.value for r in runs if r.params == DEFAULT)
        p_min = min(r.value for r in runs if r.params == rec.params)
        assert (d_min, p_min) == (2.0, 1.0)
        assert rec.gain == pytest.approx((d_min - p_min) / d_min) and rec.gain_basis == "confirmation runs"
        assert not rec.is_default and rec.default_value == d_min and rec.unit == "s"
    # gptask show, from the file alone, recommends the same configurations with the same gains
    rows = show_rows(path)
    for i, rec in enumerate(recs):
        assert {k: rows[i][k] for k in rec.params} == rec.params and rows[i]["gain"] == pytest.approx(rec.gain)
        assert rows[i]["pick"] == "tuned" and rows[i]["basis"] == "confirmed min"
    assert cli.main(["show", str(path)]) == 0
    out = capsys.readouterr().out
    assert "unit: s" in out and "best (s)" in out and "value (s)" in out and "default (s)" in out
    assert "50.0 %" in out and "0.5\n" not in out  # gains in percent, as the apps print them
    # the model file carries the same recommendation
    model = tmp_path / "m.json"
    res.save_model(model, accuracy=False)
    from gptask.transfer.model_io import read_recommendations

    stored = read_recommendations(model)
    assert [s["params"] for s in stored] == [r.params for r in recs]
    assert [s["gain"] for s in stored] == pytest.approx([r.gain for r in recs])
    assert all(s["unit"] == "s" and s["is_default"] is False for s in stored)


def test_a_recommended_default_says_so(tmp_path, capsys):
    calls, state = [], {}
    problem = staged_problem(calls, state, lambda task, p: p == DEFAULT)
    path = tmp_path / "runs.sqlite"
    res = _tune(problem, history=path)
    state["confirming"] = True
    rec = res.recommend(0, confirm=2, progress=False)
    assert rec.is_default and rec.params == DEFAULT and rec.gain == 0.0
    assert rec.describe().startswith("the default configuration: 1 s (confirmed min), gain over the default 0.0 %")
    assert show_rows(path)[0]["pick"] == "default"
    # without confirmation runs the gain compares both values as measured while tuning
    plain = res.recommend(1, progress=False)
    measured = {tuple(sorted(r["params"].items())): r["value"] for r in res.records(1)}
    d, p = measured[tuple(sorted(DEFAULT.items()))], measured[tuple(sorted(plain.params.items()))]
    assert plain.gain_basis == "as measured while tuning" and plain.gain == pytest.approx((d - p) / d)


def test_confirmation_runs_report_progress(tmp_path, caplog):
    import logging

    calls, state = [], {}
    problem = staged_problem(calls, state, lambda task, p: False)
    res = _tune(problem, history=tmp_path / "runs.sqlite")
    caplog.set_level(logging.INFO, logger="gptask.core.progress")
    rec = res.recommend(0, confirm=2)
    lines = [r.getMessage() for r in caplog.records if "confirmation run" in r.getMessage()]
    n = 2 * len(rec.candidates)
    assert len(lines) == n and lines[0].startswith(f"task 0 (t=0.1): confirmation run 1/{n}, ")
    assert any(", the default: " in ln for ln in lines) and lines[-1].endswith(" s")
