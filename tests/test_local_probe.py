"""The local probe of a stalled task's incumbent (gptask/tuning/probe.py, issue 45's listed trap; the default
proposer's after 2 stalled searches): the rows offered against a brute-force reading of the grid, the stall count,
and what the rule does in a run: every search of a stalled task that was not a probe itself proposes an unrun
one-step neighbour of the task's incumbent along the least-tried input; the offers of one round read as
configurations where the tasks' domains differ."""

import itertools
import sys
from pathlib import Path

import numpy as np
import pytest

import gptask as gt
from gptask.data.trials import Status, Trial
from gptask.space.domain import Domain
from gptask.tuning import Tuner
from gptask.tuning.probe import probe_rows, stalled_for
from gptask.tuning.proposer import Proposer, make_proposer
from gptask.tuning.settings import LOCAL_PROBE_AFTER, SOURCE_INITIAL, SOURCE_SEARCH

sys.path.insert(0, str(Path(__file__).parent))
from problems_for_tests import capped_problem  # noqa: E402

SIZES = (4, 3, 5)


def grid() -> Domain:
    space = gt.Space([gt.Ordinal(f"x{k}", list(range(n))) for k, n in enumerate(SIZES)])
    return Domain(space, np.array(list(itertools.product(*[range(n) for n in SIZES]))))


def brute_probe(inc: tuple, own: set, seen: set) -> set:
    """The rule read off the grid by hand: the unrun configurations one list step from ``inc`` in one input, along
    the inputs whose line through ``inc`` holds the fewest seen configurations."""
    every = list(itertools.product(*[range(n) for n in SIZES]))
    line = [sum(1 for c in seen if c != inc and all((c[k] == inc[k]) != (k == d) for k in range(3)))
            for d in range(3)]
    near = [c for c in every if sum(abs(a - b) for a, b in zip(c, inc)) == 1 and c not in own]
    if not near:
        return set()
    axis = {c: next(k for k in range(3) if c[k] != inc[k]) for c in near}
    least = min(line[axis[c]] for c in near)
    return {c for c in near if line[axis[c]] == least}


def test_the_probe_rows_are_the_brute_force_rule_on_random_grids():
    dom = grid()
    every = [tuple(int(v) for v in r) for r in dom.index]
    row = {c: k for k, c in enumerate(every)}
    rng = np.random.default_rng(0)
    sizes = []
    for _ in range(200):
        inc = every[int(rng.integers(len(every)))]
        seen = {every[k] for k in rng.choice(len(every), int(rng.integers(0, 30)), replace=False)}
        own = {inc} | {c for c in seen if rng.random() < 0.5}
        got = {every[r] for r in probe_rows(dom, row[inc], [row[c] for c in own], [row[c] for c in seen])}
        assert got == brute_probe(inc, own, seen)
        sizes.append(len(got))
    assert max(sizes) > 1
    # by hand: inputs 0 and 1 were tried on the incumbent's lines, input 2 not: both its steps are offered
    assert {every[r] for r in probe_rows(dom, row[(1, 1, 2)], [row[(1, 1, 2)]], [row[(0, 1, 2)], row[(1, 0, 2)]])} \
        == {(1, 1, 1), (1, 1, 3)}
    # a configuration two steps away is on no line; a corner whose neighbours the task ran has nothing to offer
    far = probe_rows(dom, row[(1, 1, 2)], [], [row[(0, 0, 2)]])
    assert {every[r] for r in far} == brute_probe((1, 1, 2), set(), set())
    assert probe_rows(dom, row[(0, 0, 0)], [row[(1, 0, 0)], row[(0, 1, 0)], row[(0, 0, 1)]], []) == []


def test_the_stall_count_is_the_searched_runs_after_the_best():
    def trial(k, value, source=SOURCE_SEARCH, status=Status.COMPLETE):
        return Trial(k, 0, {"t": 0}, {"x": k}, status, value, source=source)

    trials = [trial(0, 3.0, SOURCE_INITIAL), trial(1, 2.0, SOURCE_INITIAL), trial(2, 2.5),
              trial(3, None, status=Status.FAILED), trial(4, 1.0), trial(5, 1.5), trial(6, 4.0),
              trial(7, None, status=Status.PENDING)]
    assert stalled_for(trials[:4]) == (1, {"x": 1})  # a failed run does not count, a design best does
    assert stalled_for(trials) == (2, {"x": 4})
    assert stalled_for([trial(0, None, status=Status.FAILED)]) == (0, None)


VALUES = list(range(8))
TASKS = [{"gpu": "a"}, {"gpu": "b"}, {"gpu": "c"}]


def bowl(task, p):
    """Smooth, one optimum per task near the middle: the tasks settle on it fast and then stall."""
    shift = {"a": 3, "b": 4, "c": 3}[task["gpu"]]
    return 1.0 + (p["x"] - shift) ** 2 / 16 + (p["y"] - 4) ** 2 / 16 + (p["z"] - 2) ** 2 / 16


def bowl_problem() -> gt.Problem:
    return gt.Problem(gt.Space([gt.Categorical("gpu", ["a", "b", "c"])]),
                      gt.Space([gt.Ordinal(n, VALUES) for n in ("x", "y", "z")]), bowl, name="probe-bowl")


class Recorder(Proposer):
    """The probing proposer, recording each probe's offer with the trials the task had then."""

    def __init__(self, after):
        super().__init__(local_probe_after=after)
        self.probes = []

    def _local_probe(self, i, mine, domain):
        rows = super()._local_probe(i, mine, domain)
        self.probes.append((i, len(mine), None if rows is None else domain.rows_of(rows).tolist()))
        return rows


def tune_by_hand(prob: gt.Problem, tasks: list[dict], proposer: Proposer) -> list[Trial]:
    """A 16-run-per-task campaign asked and told by hand; its trials in the order of their ids."""
    with Tuner(prob, tasks, budget=16, n_initial=4, seed=2, proposer=proposer, pso_particles=10, pso_iters=5) as tu:
        while True:
            got = tu.ask()
            if not got:
                break
            for t in got:
                tu.tell(t, prob.objective(t.task, t.params))
        return sorted(tu.records, key=lambda t: t.id)


def test_a_stalled_task_proposes_an_unrun_neighbour_of_its_incumbent_never_twice_in_a_row():
    prob = bowl_problem()
    rec = Recorder(after=1)
    history = tune_by_hand(prob, TASKS, rec)
    dom = prob.domain(TASKS[0])
    every = [tuple(int(v) for v in r) for r in dom.index]
    key = lambda p: (VALUES.index(p["x"]), VALUES.index(p["y"]), VALUES.index(p["z"]))  # noqa: E731
    probed = 0
    for i, n, rows in rec.probes:
        mine = [t for t in history if t.task_index == i][:n]
        searched = [k for k, t in enumerate(mine) if t.source == SOURCE_SEARCH]
        done = [t for t in mine if t.value is not None]
        best = min(done, key=lambda t: t.value)
        since = sum(1 for t in done[done.index(best) + 1:] if t.source == SOURCE_SEARCH)
        was_probe = bool(searched) and any(j == i and m == searched[-1] and r for j, m, r in rec.probes)
        if since < 1 or was_probe:
            assert rows is None
            continue
        inc = key(best.params)
        own = {key(t.params) for t in mine}
        expect = brute_probe_8(inc, own)
        if not expect:
            assert rows is None
            continue
        assert rows is not None and {every[r] for r in rows} <= expect
        nxt = [t for t in history if t.task_index == i][n]  # what the task ran: one of the offered rows
        assert nxt.source == SOURCE_SEARCH and key(nxt.params) in {every[r] for r in rows}
        probed += 1
    assert probed >= 3


def brute_probe_8(inc: tuple, own: set) -> set:
    """The unrun one-step neighbours of ``inc`` on the 8 x 8 x 8 grid (the line rule only narrows them)."""
    return {c for c in itertools.product(VALUES, VALUES, VALUES)
            if sum(abs(a - b) for a, b in zip(c, inc)) == 1 and c not in own}


def test_the_default_proposer_probes_after_two_stalled_searches_and_the_setting_is_checked():
    from gptask.tuning.fidelity import FidelityProposer
    from gptask.tuning.sourced import ConsensusProposer

    assert LOCAL_PROBE_AFTER == 2
    assert Proposer().local_probe_after == 2
    assert make_proposer("default", {"local_probe_after": None}).local_probe_after is None
    # the sources' and the fidelity schedule's proposers were measured without it
    assert ConsensusProposer([0]).local_probe_after is None
    assert FidelityProposer(1, 0, 2).local_probe_after is None
    for bad in (0, -1, 1.5, True, "2"):
        with pytest.raises(ValueError, match="local_probe_after"):
            Proposer(local_probe_after=bad)
    runs, probes = [], []
    for p in (Recorder(after=2), None, Recorder(after=None)):
        res = gt.tune(bowl_problem(), TASKS, budget=12, n_initial=4, seed=2, progress=False, proposer=p,
                      pso_particles=10, pso_iters=5)
        runs.append([(t.task_index, dict(t.params)) for t in sorted(res.history, key=lambda t: t.id)])
        probes.append(None if p is None else [r for r in p.probes if r[2] is not None])
    assert runs[0] == runs[1]  # the default is the probe after 2
    assert probes[0] and probes[2] == [] and runs[2] != runs[0]  # it probed, and that changed the run


CAPS = [{"cap": 21}, {"cap": 9}, {"cap": 11}]


def test_a_probe_reads_the_other_tasks_offers_as_configurations_when_the_tasks_domains_differ():
    # the offers of one round are configurations: another task's domain numbers them otherwise (PDGEQRF's main
    # job used to stop here with an IndexError, task 0's row 162898 read in task 1's domain of 145152)
    prob = capped_problem()
    rec = Recorder(after=1)
    history = tune_by_hand(prob, CAPS, rec)
    assert len(history) == 3 * 16
    assert all(sum(t.params[n] for n in "xyz") <= t.task["cap"] for t in history)
    domains = [prob.domain(c) for c in CAPS]
    assert len({len(d) for d in domains}) == 3
    offered = [(i, rows) for i, _, rows in rec.probes if rows]
    assert len({i for i, _ in offered}) >= 2  # probes of tasks with different domains, one round after another
    for i, rows in offered:
        for p in domains[i].params(rows):
            assert sum(p.values()) <= CAPS[i]["cap"]


def test_the_line_counts_of_a_probe_take_another_tasks_offer_by_its_configuration():
    # two tasks stalled at (3, 4, 2); task 0 (the whole grid) has run its x and z neighbours (2, 4, 2) and (3, 4, 1),
    # so it offers the y line; task 1 (x + y + z <= 9, its rows numbered otherwise) has run (2, 4, 2). Read by hand:
    # task 1's lines through (3, 4, 2) then hold x: (2, 4, 2), y: task 0's offer (3, 3, 2), z: task 0's run
    # (3, 4, 1), one each, so it offers its unrun neighbours on all three that its domain holds: (3, 3, 2) and
    # (3, 4, 1). Without task 0's offer it would offer (3, 3, 2) alone.
    from gptask.tuning.settings import SOURCE_INITIAL as INIT

    prob = capped_problem()

    def run(k, task, x, y, z, value, source=SOURCE_SEARCH):
        return Trial(k, task, CAPS[task], {"x": x, "y": y, "z": z}, Status.COMPLETE, value, source=source)

    trials = {0: [run(0, 0, 7, 7, 7, 5.0, INIT), run(1, 0, 3, 4, 2, 1.0), run(2, 0, 2, 4, 2, 2.0), run(3, 0, 3, 4, 1, 3.0)],
              1: [run(4, 1, 0, 0, 0, 5.0, INIT), run(5, 1, 3, 4, 2, 1.0), run(6, 1, 2, 4, 2, 2.0)]}

    class View:
        problem, n_tasks = prob, 2

        def trials_of(self, j):
            return trials[j]

    prop = Proposer(local_probe_after=1)
    prop.bind(View())
    offers = []
    for i in (0, 1):
        dom = prob.domain(CAPS[i])
        rows = prop._local_probe(i, trials[i], dom)
        offers.append({tuple(p[n] for n in "xyz") for p in dom.params(dom.rows_of(rows))})
    assert len(prob.domain(CAPS[0])) == 512 and len(prob.domain(CAPS[1])) < 512
    assert offers[0] == {(3, 3, 2), (3, 5, 2)}
    assert offers[1] == {(3, 3, 2), (3, 4, 1)}
