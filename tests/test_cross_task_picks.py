"""Cross-task picks of the joint search (gptask/tuning/crosstask.py): the offer against a brute-force
reading of the model's data, the gates, and what they do in a run: a configuration that is best on
one task and measured there is tried on another task at its first searched run when the landscape is
rugged, while a smooth landscape is searched exactly as without picks."""

import numpy as np

import gptask as gt
from gptask.model.numerics import LCM
from gptask.data.storage import SQLiteStorage
from gptask.data.trials import Status, Trial
from gptask.tuning import Tuner
from gptask.tuning.crosstask import best_rows, cross_task_picks, predicts_itself
from gptask.tuning.proposer import Proposer
from gptask.tuning.settings import CROSS_PICK_TOP

VALUES = list(range(0, 48, 4))  # 12 allowed values per parameter, 144 configurations
NEEDLE = {"x": 28, "y": 12}  # the best configuration of both tasks


def rugged(task, p):
    """A landscape with no structure (values 2-3 from a hash of the configuration), the needle at 1."""
    if (p["x"], p["y"]) == (NEEDLE["x"], NEEDLE["y"]):
        return 1.0
    seed = (VALUES.index(p["x"]) * 12 + VALUES.index(p["y"])) * 7 + (task["gpu"] == "b") * 3
    return 2.0 + np.random.default_rng(seed).random()


def smooth(task, p):
    shift = 8 if task["gpu"] == "a" else 20
    return 1.0 + ((p["x"] - shift) / 48) ** 2 + ((p["y"] - 24) / 48) ** 2


def problem(objective) -> gt.Problem:
    return gt.Problem(gt.Space([gt.Categorical("gpu", ["a", "b"])]),
                      gt.Space([gt.Ordinal("x", VALUES), gt.Ordinal("y", VALUES)]), objective, name="picks")


TASKS = [{"gpu": "a"}, {"gpu": "b"}]


def fitted(prob, objective, n=(8, 10), seed=0):
    """An LCM on n random configurations of each task (encoded), and task 0's domain."""
    rng = np.random.default_rng(seed)
    dom = prob.domain(TASKS[0])
    X, y = [], []
    for task, k in zip(TASKS, n):
        rows = rng.choice(len(dom), k, replace=False)
        X.append(dom.encode(rows))
        y.append(np.log([objective(task, p) for p in dom.params(rows)]))
    return LCM().fit(X, y, restarts=1, seed=seed), dom


def test_the_offer_is_each_other_tasks_best_configurations_once():
    prob = problem(rugged)
    model, dom = fitted(prob, rugged)
    assert not predicts_itself(model, 0)
    offer = cross_task_picks(model, 0, 0, dom)
    X, y = model.data()
    expect = X[1][np.argsort(y[1], kind="stable")[:CROSS_PICK_TOP]]  # brute force: task 1's lowest values
    np.testing.assert_array_equal(offer, expect)
    assert cross_task_picks(model, 0, 1, dom) is None  # every other searched run only
    assert cross_task_picks(model, 0, 2, dom) is not None
    assert cross_task_picks(model, 0, 0, None) is None  # continuous space: no picks


def test_the_two_offer_rules_on_tasks_that_share_their_best():
    """Three tasks: 0 and 1 share their best configuration (row 5), task 2's best is task 0's second
    (row 9). The joint search's rule offers each task's top 2 once; TLA2's refills a task's share
    with its next best where an earlier task already offered one."""
    dom = problem(rugged).domain(TASKS[0])
    X = [dom.encode([5, 9, 3]), dom.encode([7, 5, 11]), dom.encode([9, 2, 4])]
    y = [np.array([0.1, 0.2, 0.3]), np.array([0.3, 0.1, 0.2]), np.array([0.0, 0.5, 0.4])]
    assert best_rows(X, y, dom, 2) == [5, 9, 11, 4]  # task 1: 5 (offered) and 11; task 2: 9 (offered) and 4
    assert best_rows(X, y, dom, 2, refill=True) == [5, 9, 11, 7, 4, 2]  # task 1 refills with 7, task 2 with 2
    assert best_rows(X, y, dom, 2, skip=0) == [5, 11, 9, 4]
    assert best_rows([X[0], X[1][:0]], [y[0], y[1][:0]], dom, 2, refill=True) == [5, 9]  # a task without data


def test_no_picks_where_the_model_predicts_the_task_well_or_knows_too_little():
    prob = problem(smooth)
    model, dom = fitted(prob, smooth)
    assert predicts_itself(model, 0)
    assert cross_task_picks(model, 0, 0, dom) is None
    few, dom = fitted(problem(rugged), rugged, n=(3, 10))
    assert cross_task_picks(few, 0, 0, dom) is None


def run(tmp_path, objective, picks: bool, name: str) -> list[dict]:
    """Task a tuned (12 runs, 6 initial) beside task b's 20 imported runs, which include the needle;
    task a's configurations in run order."""
    prob = problem(objective)
    h = tmp_path / f"{name}.sqlite"
    dom = prob.domain(TASKS[1])
    rows = np.random.default_rng(1).choice(len(dom), 19, replace=False)
    b_runs = [NEEDLE] + [p for p in dom.params(rows) if p != NEEDLE][:19]
    with SQLiteStorage(h, prob.signature()) as s:
        s.set_tasks(TASKS)
        s.import_trials([Trial(0, 1, TASKS[1], p, Status.COMPLETE, objective(TASKS[1], p)) for p in b_runs])

    class WholeSpace(Tuner):
        def search_among(self, i):
            return None

    cls = Tuner if picks else WholeSpace
    # the local probe off: these tests are of the cross-task picks alone
    with cls(prob, TASKS, budget=20, n_initial=6, seed=2, history=h, provenance=None,
             proposer=Proposer(local_probe_after=None)) as tuner:
        while not tuner.done:
            for t in tuner.ask():
                tuner.tell(t, objective(t.task, t.params))
            if len(tuner.trials_of(0)) >= 12:
                break
        return [dict(t.params) for t in tuner.trials_of(0)][:12]


def test_a_rugged_task_tries_the_other_tasks_best_at_its_first_searched_run(tmp_path):
    with_picks = run(tmp_path, rugged, True, "picks")
    assert with_picks[6] == NEEDLE  # the first run after the 6 initial ones
    assert NEEDLE not in with_picks[:6]


def test_a_smooth_task_is_searched_as_without_picks(tmp_path):
    assert run(tmp_path, smooth, True, "picks") == run(tmp_path, smooth, False, "whole")
