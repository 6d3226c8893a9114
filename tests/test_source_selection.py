"""Source selection by cross-validation (gptask.sources.selection): a source that makes this
machine's runs worse predicted is left out, a helpful one kept, and the verdicts are reported,
stored in the history and reused when the run resumes."""

import itertools
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import gptask as gt
from gptask.cli.main import main
from gptask.model.numerics import LCM
from gptask.model.numerics.defaults import SURROGATE_KERNEL
from gptask.model.numerics.priors import LCMPrior
from gptask.sources.selection import SELECT_MARGIN, SELECT_MIN_RUNS, heldout_score
from gptask.sources.multisource import MACHINE_DIM, SourceError
from gptask.model.surrogate.data import training_data
from gptask.data.trials import Status, Trial

sys.path.insert(0, str(Path(__file__).parent))
from problems_for_tests import counting_problem  # noqa: E402


def _grid(t, label, centre=None):
    """Every x in 0, 0.1, ..., 1 and k in 2, 4, 6 of the counting problem's quadratic at task t,
    measured on machine ``label``, with its minimum at x = ``centre`` (default t, as the problem's)."""
    c = t if centre is None else centre
    return [{"t": t, "x": x, "k": k, "value": 1.0 + (x - c) ** 2 + 0.05 * (k - 4) ** 2, "machine.label": label}
            for x, k in itertools.product([i / 10 for i in range(11)], (2, 4, 6))]


HELPFUL = _grid(0.3, "good") + _grid(0.7, "good")          # the problem itself, on other tasks
MISLEADING = _grid(0.3, "mis", 0.95) + _grid(0.7, "mis", 0.95)  # its minimum always near x = 0.95


def test_a_misleading_source_is_dropped_a_helpful_one_kept_and_a_resumed_run_reuses_the_verdict(tmp_path, capsys):
    calls, h = tmp_path / "calls.txt", tmp_path / "runs.sqlite"
    args = dict(n_initial=5, seed=0, sources=[HELPFUL, MISLEADING], select_sources=True, provenance="node",
                history=h, progress=False)
    r = gt.tune(counting_problem(str(calls)), [{"t": 0.5}], 8, **args)
    sel = r.source_selection
    assert sel.kept == [0] and sel.dropped == [1] and sel.target_runs == 5
    good, bad = sel.scores
    assert good.kept and good.gain > 0 and good.machine == "good" and good.measurements == len(HELPFUL)
    assert not bad.kept and bad.gain < -SELECT_MARGIN and bad.machine == "mis"
    assert any("dropped" in line and "mis" in line for line in sel.lines())
    # this machine's task comes first; the dropped source's measurements never entered the history
    assert r.tasks[0] == {"t": 0.5, MACHINE_DIM: "node"}
    assert {t[MACHINE_DIM] for t in r.tasks} == {"node", "good"}
    assert sum(t.task[MACHINE_DIM] == "good" for t in r.history) == len(HELPFUL)
    mine = [t for t in r.history if t.task[MACHINE_DIM] == "node"]
    assert len(mine) == 8 and len(calls.read_text().splitlines()) == 8  # the design runs count in the budget
    assert min(t.value for t in mine) < 1.05  # the optimum is 1.0 at x = 0.5, k = 4
    assert main(["show", str(h)]) == 0  # gptask show lists the verdicts
    shown = capsys.readouterr().out
    assert "select_sources=True" in shown and f"source #1 (mis, {len(MISLEADING)} measurements): dropped" in shown
    # resumed: the stored verdict is reused, nothing runs again
    again = gt.tune(counting_problem(str(calls)), [{"t": 0.5}], 8, **args)
    assert again.source_selection == sel and len(calls.read_text().splitlines()) == 8
    # other measurements of the same machines with the same history: refused, naming why (other
    # machines make another combined problem, which the history's signature refuses)
    with pytest.raises(SourceError, match="other sources"):
        gt.tune(counting_problem(), [{"t": 0.5}], 8, **{**args, "sources": [HELPFUL[:-3], MISLEADING]})


def test_a_run_stopped_during_its_designs_judges_nothing_and_the_resume_judges_on_them_all(tmp_path):
    """max_time with select_sources (it was refused: 'does not take ['max_time'] yet'): a run stopped before
    this machine's initial designs are done judges no source and imports none (a verdict on part of the designs
    would be stored for good); the resume runs the rest of the designs, judges on all 5 of them as an unstopped
    run does (the misleading source dropped), and runs nothing twice."""
    calls, h = tmp_path / "calls.txt", tmp_path / "runs.sqlite"
    args = dict(n_initial=5, seed=0, sources=[HELPFUL, MISLEADING], select_sources=True, provenance="node",
                history=h, progress=False)
    first = gt.tune(counting_problem(str(calls), sleep=0.3), [{"t": 0.5}], 8, max_time=0.5, **args)
    ran = len(calls.read_text().splitlines())
    assert ran < 5 and first.source_selection is None
    assert all(t.task[MACHINE_DIM] == "node" for t in first.history)  # no source's measurement imported
    r = gt.tune(counting_problem(str(calls)), [{"t": 0.5}], 8, **args)
    assert r.source_selection.kept == [0] and r.source_selection.dropped == [1]
    assert r.source_selection.target_runs == 5
    lines = calls.read_text().splitlines()
    assert len(lines) == 8 and len(set(lines)) == 8
    assert sum(t.task[MACHINE_DIM] == "good" for t in r.history) == len(HELPFUL)


def test_every_source_is_kept_while_this_machine_has_too_few_runs():
    r = gt.tune(counting_problem(), [{"t": 0.5}], SELECT_MIN_RUNS, n_initial=SELECT_MIN_RUNS - 1, seed=0,
                sources=[HELPFUL, MISLEADING], select_sources=True, provenance="node", progress=False)
    sel = r.source_selection
    assert sel.kept == [0, 1] and sel.dropped == [] and sel.scores == []
    assert "needed" in sel.note and sel.lines() == [sel.note]
    assert {t[MACHINE_DIM] for t in r.tasks} == {"node", "good", "mis"}


def test_selection_needs_sources():
    with pytest.raises(SourceError, match="needs sources"):
        gt.tune(counting_problem(), [{"t": 0.5}], 4, select_sources=True, progress=False)
    with pytest.raises(SourceError, match="needs sources"):
        gt.predict_optimum(None, {"t": 0.5}, select_sources=True)


def test_predict_optimum_with_selection_leaves_the_misleading_source_out():
    problem = counting_problem()
    here = gt.fit(problem, _grid(0.5, "node")[::4], mix_machines=True, progress=False, restarts=1)  # 9 runs
    kw = dict(sources=[HELPFUL, MISLEADING], machine="node", restarts=1)
    chosen = gt.predict_optimum(here, {"t": 0.5}, select_sources=True, **kw)
    blended = gt.predict_optimum(here, {"t": 0.5}, **kw)
    assert abs(chosen.params["x"] - 0.5) <= 0.1 and chosen.params["k"] == 4  # the optimum: 1.0 at x = 0.5, k = 4
    # the misleading machine's data no longer bend the predicted value there
    assert abs(chosen.value - 1.0) < 0.1 < abs(blended.value - 1.0)


def _trial(k, task, x, value):
    return Trial(id=k, task_index=0, task=task, params={"x": x, "k": 4}, status=Status.COMPLETE, value=value)


def test_heldout_score_is_the_sum_of_leave_one_out_log_densities_by_refactorisation():
    """heldout_score's closed-form leave-one-out against conditioning the fitted model on the other
    points, one at a time (same hyperparameters), and the normal log density of the held-out value."""
    space = counting_problem().param_space
    rng = np.random.default_rng(3)
    mine = {"t": 0.5, MACHINE_DIM: "node"}
    target = [_trial(k, mine, x, 1.0 + (x - 0.5) ** 2 + 0.01 * rng.standard_normal()) for k, x in
              enumerate(rng.random(7))]
    other = [_trial(10 + k, {"t": 0.3, MACHINE_DIM: "a"}, x, 1.0 + (x - 0.3) ** 2) for k, x in enumerate(rng.random(9))]
    got = heldout_score(space, target, other, [mine], use_log=True, restarts=1, seed=4)
    # the same fit by hand: this machine's task first, then the source's
    data = training_data([*target, *[replace(t, task_index=1) for t in other]], 2, space, True)
    model = LCM(kernel=SURROGATE_KERNEL).fit(data.X, data.y, restarts=1, seed=4, prior=LCMPrior(dimension=2.0))
    total = 0.0
    for k in range(len(target)):
        keep = np.arange(len(target)) != k
        held = LCM(kernel=SURROGATE_KERNEL).condition([data.X[0][keep], data.X[1]], [data.y[0][keep], data.y[1]], model.get_params())
        m, v = held.predict(0, data.X[0][k:k + 1], include_noise=True)
        total += float(-0.5 * np.log(2 * np.pi * v[0]) - 0.5 * (data.y[0][k] - m[0]) ** 2 / v[0])
    assert got == pytest.approx(total, rel=1e-6, abs=1e-6)
