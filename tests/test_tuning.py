"""The ask/tell contract, the value rule, stop criteria and the other promises of the tuning engine."""

import math
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import gptask as gt
from gptask.data.storage import HistoryMismatch, SQLiteStorage, TrialNotPending, UnknownTrial
from gptask.data.trials import Proposal, Status, Trial
from gptask.tuning import Tuner
from gptask.model.surrogate.data import training_data
from gptask.tuning.settings import VALUE_LIMIT

sys.path.insert(0, str(Path(__file__).parent))
from problems_for_tests import counting_problem, penalty_problem, tiny_discrete_problem  # noqa: E402

DATA = Path(__file__).parent / "data"
ROOT = Path(__file__).resolve().parents[1]
FAST = dict(pso_particles=10, pso_iters=5, restarts=1)


def run_design(tuner):
    ev = gt.Evaluator(tuner.problem.objective)
    for t in tuner.ask():
        tuner.tell(t, ev(t.task, t.params))


# ---- ask/tell contract ----------------------------------------------------------------------------


def test_ask_writes_pending_trials_before_returning_them(tmp_path):
    path = tmp_path / "h.sqlite"
    tu = Tuner(counting_problem(), tasks=2, budget=6, n_initial=3, seed=0, history=path, **FAST)
    asked = tu.ask()
    assert len(asked) == 6 and all(t.status is Status.PENDING and t.source == "initial" for t in asked)
    # another connection sees them at once, ids and all
    seen = SQLiteStorage(path).trials(status=Status.PENDING)
    assert [t.id for t in seen] == [t.id for t in asked]
    assert [t.task_index for t in asked] == [0, 1, 0, 1, 0, 1]  # round robin over tasks
    assert tu.ask() == []  # the whole design is held: nothing more to ask before results come
    assert len(tu.ask(2)) == 0


def test_tell_is_accepted_once_per_pending_trial_of_this_history(tmp_path):
    tu = Tuner(counting_problem(), tasks=2, budget=6, n_initial=3, seed=0, history=tmp_path / "a.sqlite", **FAST)
    other = Tuner(counting_problem(), tasks=2, budget=6, n_initial=3, seed=1, history=tmp_path / "b.sqlite", **FAST)
    a, b = tu.ask(2)
    other_trial = other.ask(1)[0]
    done = tu.tell(a, 2.5)
    assert done.status is Status.COMPLETE and done.value == 2.5 and done.id == a.id
    with pytest.raises(TrialNotPending, match="already told"):
        tu.tell(a, 3.0)
    with pytest.raises(UnknownTrial, match="trial 999"):
        tu.tell(999, 1.0)
    assert other_trial.id == a.id  # same id in both histories: the content tells them apart
    with pytest.raises(HistoryMismatch, match="another history"):
        tu.tell(other_trial, 1.0)
    with pytest.raises(TypeError, match="never asked"):
        tu.tell(Proposal(0, tu.tasks[0], {"x": 0.5, "k": 2}), 1.0)
    with pytest.raises(TypeError, match="integer id"):
        tu.tell("7", 1.0)
    # a task's count moves by exactly one per tell
    assert tu.count(0) == 1 and tu.count(1) == 0
    failed = tu.tell(b.id, float("nan"))
    assert failed.status is Status.FAILED and "NaN" in failed.reason and tu.count(1) == 1


def test_extra_is_kept_and_a_trial_is_told_from_another_process(tmp_path):
    path = tmp_path / "h.sqlite"
    with Tuner(counting_problem(), tasks=1, budget=4, n_initial=2, seed=0, history=path, **FAST) as tu:
        t1, t2 = tu.ask()
        tu.tell(t1, gt.Outcome(1.5, (1.5, 1.7), "complete", extra={"node": "n07", "flops": 3.2e9}))
    # the first process has gone (its pending trial was released); a new one tells by id
    code = (f"from gptask.tuning import Tuner\nimport sys\nsys.path.insert(0, {str(ROOT / 'tests')!r})\n"
            "from problems_for_tests import counting_problem\n"
            f"t = Tuner(counting_problem(), tasks=1, budget=4, n_initial=2, seed=0, history={str(path)!r})\n"
            f"print(t.tell({t2.id}, 2.25).value)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert r.returncode == 0 and r.stdout.strip() == "2.25", r.stderr
    stored = {t.id: t for t in SQLiteStorage(path).trials()}
    assert stored[t1.id].extra == {"node": "n07", "flops": 3.2e9} and stored[t1.id].samples == (1.5, 1.7)
    assert stored[t2.id].value == 2.25


def test_asking_twice_never_refits_on_the_same_data(tmp_path):
    path = tmp_path / "h.sqlite"
    tu = Tuner(counting_problem(), tasks=2, budget=8, n_initial=3, seed=0, history=path, **FAST)
    run_design(tu)
    first = tu.ask()
    assert len(first) == 2 and all(t.source == "search" for t in first)
    n_models = len(SQLiteStorage(path).models())
    assert n_models == 1
    second = tu.ask()  # no tell in between: same data, no fit, new (different) proposals
    assert len(SQLiteStorage(path).models()) == 1
    assert {(t.task_index, tuple(sorted(t.params.items()))) for t in second}.isdisjoint(
        {(t.task_index, tuple(sorted(t.params.items()))) for t in first})
    # another process on the same history reuses the stored hyperparameters instead of fitting
    again = Tuner(counting_problem(), tasks=2, budget=8, n_initial=3, seed=0, history=path, **FAST)
    assert len(again.ask()) == 2 and len(SQLiteStorage(path).models()) == 1
    tu.tell(first[0], 1.0)
    tu.ask()
    assert len(SQLiteStorage(path).models()) == 2


def test_ask_n_and_the_budget_counting_pending_trials(tmp_path):
    tu = Tuner(counting_problem(), tasks=3, budget=3, n_initial=2, seed=0, history=tmp_path / "h.sqlite", **FAST)
    assert [t.task_index for t in tu.ask(4)] == [0, 1, 2, 0]
    assert len(tu.ask(10)) == 2  # the rest of the designs
    with pytest.raises(ValueError, match="n must be >= 1"):
        tu.ask(0)
    ev = gt.Evaluator(tu.problem.objective)
    for t in tu.pending:
        tu.tell(t, ev(t.task, t.params))
    assert len(tu.ask(10)) == 3 and tu.ask(10) == []  # one search per task, then the budget is held
    assert not tu.done
    for t in tu.pending:
        tu.tell(t, 1.0)
    assert tu.done and all(tu.count(i) == 3 for i in range(3))


# ---- values --------------------------------------------------------------------------------------


@pytest.mark.parametrize("weird", [1e308, -1e308, 1e-300, 5e-324, 1e200])
def test_any_finite_value_is_stored_as_given_and_cannot_break_the_model(weird):
    prob = counting_problem()

    def f(task, p):
        return weird if p["x"] > 0.7 else prob.objective(task, p)

    res = gt.tune(gt.Problem(prob.task_space, prob.param_space, f, name="counting"), tasks=2, budget=7,
                  n_initial=5, seed=0, progress=False, **FAST)
    assert len(res.history) == 14 and all(t.status is Status.COMPLETE for t in res.history)
    odd = [t for t in res.history if t.params["x"] > 0.7]
    assert odd and all(t.value == weird for t in odd)
    assert list(res.model.n_points) == [7, 7]
    for i in range(2):
        mean, var = res.model.predict(i, res.problem.param_space.encode([t.params for t in res.records(i)]))
        assert np.all(np.isfinite(mean)) and np.all(np.isfinite(var))


def test_the_value_rule_in_model_units():
    prob = counting_problem()
    space = prob.param_space
    tu = Tuner(prob, tasks=1, budget=8, n_initial=6, seed=0)
    values = [1.0, 2.0, 4.0, 1e308, None, 3.0]
    for t, v in zip(tu.ask(), values):
        tu.tell(t, v)
    data = training_data(tu.trials, 1, space, use_log=True)
    z = data.y[0]
    assert data.measured[0].tolist() == [True, True, True, False, False, True]
    measured = np.log([1.0, 2.0, 4.0, 3.0])
    assert np.allclose(z[data.measured[0]], (measured - measured.mean()) / measured.std())
    assert z[3] == z[4] == z.max() and np.all(np.isfinite(z))  # beyond VALUE_LIMIT and failed: the worst
    assert abs(z).max() <= math.sqrt(len(measured))
    assert VALUE_LIMIT < 1e308


def test_a_non_positive_value_after_the_log_transform_updates_the_final_model():
    prob = counting_problem()
    calls = []

    def f(task, p):
        calls.append(1)
        return -1.0 if len(calls) > 10 else prob.objective(task, p)  # the last batch goes <= 0

    res = gt.tune(gt.Problem(prob.task_space, prob.param_space, f, name="counting"), tasks=2, budget=6,
                  n_initial=4, seed=0, progress=False, output_transform="log", **FAST)
    assert res.model is not None and list(res.model.n_points) == [6, 6]
    assert res.transform.use_log is False


def test_a_v1_history_with_penalty_values_loads_and_resumes(tmp_path):
    path = tmp_path / "v1.sqlite"
    shutil.copy(DATA / "v1_penalty.sqlite", path)
    res = gt.tune(penalty_problem(), tasks=2, budget=8, n_initial=5, seed=0, history=path, progress=False, **FAST)
    assert len(res.history) == 16 and res.model is not None and list(res.model.n_points) == [8, 8]
    assert sum(t.value == 1e308 for t in res.history) >= 3  # the old penalties, kept as they were
    assert [t.id for t in res.history[:12]] == list(range(1, 13))


def test_a_v1_history_resumes_with_a_larger_budget(tmp_path):
    from problems_for_tests import failing_problem

    path = tmp_path / "v1.sqlite"
    shutil.copy(DATA / "v1_failing.sqlite", path)
    calls = []
    prob = failing_problem()
    counted = gt.Problem(prob.task_space, prob.param_space, lambda t, p: calls.append(1) or prob.objective(t, p),
                         name="failing")
    res = gt.tune(counted, tasks=2, budget=10, n_initial=5, seed=1, history=path, progress=False, **FAST)
    assert len(calls) == 4 and len(res.history) == 20
    assert sum(t.status is Status.FAILED for t in res.history) >= 2


# ---- stop criteria and tasks that end early ------------------------------------------------------


def test_max_time_stops_and_leaves_the_rest_pending_for_the_next_run(tmp_path):
    path = tmp_path / "h.sqlite"
    log = tmp_path / "calls.txt"
    prob = counting_problem(log=str(log), sleep=0.5)
    res = gt.tune(prob, tasks=3, budget=4, n_initial=2, seed=0, history=path, progress=False, max_time=0.6, **FAST)
    assert len(res.history) < 3 and res.pending  # the first batch of 3 cannot all start within 0.6 s
    assert all(t.owner is None for t in res.pending)  # released: any process may take them at once
    rest = gt.tune(prob, tasks=3, budget=4, n_initial=2, seed=0, history=path, progress=False, **FAST)
    assert len(rest.history) == 12 and not rest.pending
    assert len(log.read_text().splitlines()) == 12  # nothing ran twice


def test_max_time_stops_a_running_evaluation_under_timeout(tmp_path):
    prob = counting_problem(sleep=30.0)
    t0 = time.monotonic()
    res = gt.tune(prob, tasks=1, budget=3, n_initial=2, seed=0, history=tmp_path / "h.sqlite", progress=False,
                  timeout=60, max_time=1.0, **FAST)
    assert time.monotonic() - t0 < 30
    assert res.history == [] and len(res.pending) == 1


def test_target_ends_a_task_once_reached():
    res = gt.tune(counting_problem(), tasks=[{"t": 0.2}, {"t": 0.8}], budget=12, n_initial=4, seed=0,
                  progress=False, target=[1.3, None], **FAST)
    assert "target 1.3 reached" in res.closed[0] and res.best(0)[1] <= 1.3
    assert len(res.records(0, status=None)) < 12 and len(res.records(1, status=None)) == 12
    with pytest.raises(ValueError, match="one value per task"):
        gt.tune(counting_problem(), tasks=2, budget=4, progress=False, target=[1.0])


def test_an_exhausted_discrete_space_ends_the_task_not_the_run():
    res = gt.tune(tiny_discrete_problem(), tasks=2, budget=10, n_initial=3, seed=0, progress=False, **FAST)
    for i in range(2):
        ks = [t.params["k"] for t in res.records(i, status=None)]
        assert sorted(ks) == [1, 2, 3, 4]
        assert "every feasible configuration has been claimed" in res.closed[i]
    assert res.model is not None and res.best(0)[1] >= 1.0


def test_a_constraint_that_raises_is_reported_with_its_exception(caplog):
    prob = counting_problem()

    def typo(c):
        return c["kk"] < 3  # a typo: every call raises KeyError

    bad = gt.Problem(prob.task_space, prob.param_space, prob.objective, constraints=[typo])
    with pytest.raises(ValueError, match=r"typo.*raised KeyError: 'kk'"):
        gt.tune(bad, tasks=1, budget=4, progress=False)
    assert any("raised KeyError" in r.message for r in caplog.records)


def test_a_late_result_from_a_lapsed_holder_wins_and_the_run_goes_on(tmp_path, caplog):
    from gptask.data.storage import Owner

    path = tmp_path / "h.sqlite"
    prob = counting_problem()
    shell = Tuner(prob, tasks=1, budget=2, n_initial=2, seed=0, history=path, owner=Owner.detached("ask"), lease=0.2)
    first, second = shell.ask()
    shell.close(release=False)
    time.sleep(0.3)  # the leases lapse: the next tuner takes both trials over

    def objective(task, p):
        if p == dict(first.params):  # meanwhile the first holder's job reports after all
            SQLiteStorage(path).finish(first.id, Status.COMPLETE, 42.0)
        return prob.objective(task, p)

    res = gt.tune(gt.Problem(prob.task_space, prob.param_space, objective, name="counting"), tasks=1, budget=2,
                  n_initial=2, seed=0, history=path, progress=False, **FAST)
    assert [(t.id, t.status) for t in res.history] == [(first.id, Status.COMPLETE), (second.id, Status.COMPLETE)]
    assert res.history[0].value == 42.0 and res.history[1].attempts == 2
    assert any("already told" in r.message for r in caplog.records)


def test_two_tuners_on_one_history_each_see_every_trial_after_a_refresh(tmp_path):
    # each tuner re-reads only what changed since its last read; the other's claims, tells and
    # releases (older ids than its own newest claim among them) must all show up, in id order
    h = tmp_path / "h.sqlite"
    problem = counting_problem()
    with Tuner(problem, 2, budget=8, n_initial=4, seed=3, history=h, provenance=None) as a, \
            Tuner(problem, 2, budget=8, n_initial=4, seed=3, history=h, provenance=None) as b:
        def full():
            with SQLiteStorage(h, read_only=True) as s:
                return [(t.id, t.status, t.value, t.owner) for t in s.trials()]

        def seen(tuner):
            tuner.refresh()
            return [(t.id, t.status, t.value, t.owner) for t in tuner.trials]

        # another process writes a trial between a's read and a's claim (while a's model proposes):
        # a then holds a newer id than that trial's before its next read
        claim = a.mirror.storage.add_trials

        def another_first(*args, **kwargs):
            a.mirror.storage.add_trials = claim
            with SQLiteStorage(h) as other:
                other.import_trials([Trial(0, 1, a.tasks[1], {"x": 0.123, "k": 2}, Status.COMPLETE, 1.5)])
            return claim(*args, **kwargs)

        a.mirror.storage.add_trials = another_first
        rounds = 0
        while not (a.done and b.done) and rounds < 20:
            rounds += 1
            first = a.ask(1)
            second = b.ask(2)
            for k, t in enumerate(second):
                b.tell(t, None if k == 1 and rounds == 2 else problem.objective(t.task, t.params))
            for t in first:
                a.tell(t, problem.objective(t.task, t.params))
            if rounds == 3:
                b.ask(1)
                b.release()
            assert seen(a) == full() and seen(b) == full()
        assert a.done and b.done and len(full()) == 16
