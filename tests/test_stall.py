"""A stalled task leaves its basin on a listed domain (gptask.tuning.stall, issue 45)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import gptask as gt
from gptask.data.trials import Status, Trial
from gptask.space.dimensions import Space
from gptask.tuning.settings import SOURCE_INITIAL, SOURCE_SEARCH, STALL_RADIUS
from gptask.tuning.stall import far_rows, searched_since_best, stall_escape

NAMES = ["bx", "by", "tx", "ty", "ro"]
#: the stall length the rule was measured with (settings.STALL_AFTER is None: off by default)
AFTER = 3
VALUES = [[16, 32, 64, 128, 256], [1, 2, 4, 8], [1, 2, 3, 4], [1, 2, 3, 4], [0, 1]]


def _problem(objective=lambda t, p: 1.0):
    params = Space([gt.Ordinal("bx", VALUES[0]), gt.Ordinal("by", VALUES[1], log=True), gt.Ordinal("tx", VALUES[2]),
                    gt.Ordinal("ty", VALUES[3]), gt.Ordinal("ro", VALUES[4])])
    return gt.Problem(Space([gt.Categorical("gpu", ["a"])]), params, objective, constraints=["bx*by <= 512"])


def _trial(k: int, p: dict, value: float | None, source: str, status: Status = Status.COMPLETE) -> Trial:
    return Trial(id=k, task_index=0, task={"gpu": "a"}, params=p, status=status, value=value, source=source)


def test_far_rows_are_the_unclaimed_configurations_beyond_the_radius_by_brute_force():
    problem = _problem()
    domain = problem.domain({"gpu": "a"})
    every = domain.params(np.arange(len(domain)))
    rng = np.random.default_rng(0)
    incumbent = every[int(rng.integers(len(every)))]
    claimed = [every[int(k)] for k in rng.choice(len(every), size=25, replace=False)]
    enc = problem.param_space.encode
    for radius in (0, 1, 2, 3):
        got = {tuple(p.values()) for p in domain.params(far_rows(domain, enc([incumbent])[0], enc(claimed), radius))}
        taken = {tuple(p.values()) for p in claimed}
        brute = {c for c in itertools.product(*VALUES) if c[0] * c[1] <= 512 and c not in taken
                 and sum(a != incumbent[n] for a, n in zip(c, NAMES)) > radius}
        assert got == brute and brute


def test_searched_runs_since_the_best_count_failures_and_ignore_the_design_and_pending():
    problem = _problem()
    p = {"bx": 16, "by": 1, "tx": 1, "ty": 1, "ro": 0}
    trials = [_trial(0, p, 5.0, SOURCE_INITIAL), _trial(1, p, 3.0, SOURCE_INITIAL), _trial(2, p, 4.0, SOURCE_INITIAL),
              _trial(3, p, 3.5, SOURCE_SEARCH), _trial(4, p, None, SOURCE_SEARCH, Status.FAILED),
              _trial(5, p, None, SOURCE_SEARCH, Status.PENDING)]
    since, best = searched_since_best(trials, problem)
    assert (since, best.id) == (2, 1)
    since, best = searched_since_best(trials + [_trial(6, p, 2.0, SOURCE_SEARCH)], problem)
    assert (since, best.id) == (0, 6)
    assert searched_since_best(trials[4:5], problem) == (0, None)


def test_stall_escape_offers_far_configurations_only_after_enough_searched_runs_without_gain():
    problem = _problem()
    domain = problem.domain({"gpu": "a"})
    every = domain.params(np.arange(len(domain)))
    best = {"bx": 64, "by": 2, "tx": 2, "ty": 3, "ro": 1}
    trials = [_trial(0, best, 1.0, SOURCE_INITIAL)]
    trials += [_trial(k, every[k], 2.0, SOURCE_SEARCH) for k in range(1, AFTER)]
    assert stall_escape(problem, {"gpu": "a"}, trials, domain, after=AFTER) is None  # one short
    trials.append(_trial(AFTER, every[AFTER], 2.0, SOURCE_SEARCH))
    offer = stall_escape(problem, {"gpu": "a"}, trials, domain, after=AFTER)
    offered = problem.param_space.decode(offer)
    run = {tuple(t.params.values()) for t in trials}
    assert offered and all(sum(p[n] != best[n] for n in NAMES) > STALL_RADIUS for p in offered)
    assert not run & {tuple(p.values()) for p in offered}
    assert stall_escape(problem, {"gpu": "a"}, trials, None, after=AFTER) is None  # no listed domain: no escape


def test_a_tuned_needle_task_leaves_the_incumbent_basin_after_a_stall(monkeypatch):
    """A searched run of a listed one-task problem made after STALL_AFTER searched runs without gain,
    unless the run before it was such an escape, lies more than STALL_RADIUS parameters from the
    incumbent of that moment (read off the history)."""
    needle = {"bx": 256, "by": 1, "tx": 4, "ty": 4, "ro": 1}

    def objective(task, p):  # smooth bowl around a poor basin, plus a needle far from it
        if all(p[n] == needle[n] for n in NAMES):
            return 0.1
        return 1.0 + 0.1 * (np.log2(p["bx"]) - 5) ** 2 + 0.1 * np.log2(p["by"]) + 0.05 * (p["tx"] - 1) ** 2

    import gptask.tuning.stall as stall

    monkeypatch.setattr(stall, "STALL_AFTER", AFTER)  # the rule is off by default (settings.STALL_AFTER)
    res = gt.tune(_problem(objective), tasks=[{"gpu": "a"}], budget=24, n_initial=6, seed=1, progress=False)
    trials = sorted(res.history, key=lambda t: t.id)
    escapes, previous = 0, False
    for k, t in enumerate(trials):
        if t.source != SOURCE_SEARCH:
            continue
        since, best = searched_since_best(trials[:k], _problem())
        due = best is not None and since >= AFTER and not previous  # never two in a row
        if due:
            escapes += 1
            assert sum(t.params[n] != best.params[n] for n in NAMES) > STALL_RADIUS
        previous = due
    assert escapes >= 1
    assert len({tuple(t.params.values()) for t in trials}) == len(trials)


@pytest.mark.parametrize("radius", [1, 2])
def test_far_rows_keep_the_domains_order(radius):
    problem = _problem()
    domain = problem.domain({"gpu": "a"})
    rows = far_rows(domain, domain.encode([0])[0], None, radius)
    assert np.all(np.diff(rows) > 0) and 0 not in rows


def test_stall_after_none_turns_the_rule_off(monkeypatch):
    import gptask.tuning.stall as stall

    problem = _problem()
    domain = problem.domain({"gpu": "a"})
    every = domain.params(np.arange(len(domain)))
    trials = [_trial(0, every[0], 1.0, SOURCE_INITIAL)]
    trials += [_trial(k, every[k], 2.0, SOURCE_SEARCH) for k in range(1, 8)]
    assert stall.stall_escape(problem, {"gpu": "a"}, trials, domain, after=3) is not None
    monkeypatch.setattr(stall, "STALL_AFTER", None)
    assert stall.stall_escape(problem, {"gpu": "a"}, trials, domain) is None
