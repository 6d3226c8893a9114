"""A task's fidelity levels on its cheapest level's scale (gptask.model.surrogate.data.shared_scales)
and as levels of its base task in the model (FidelityProposer.model_structure, LEVEL_MODEL "input";
bench/fidelity_kernel.py): checked against the means and spreads worked out by hand from the same
values, and against the layout of the tuner's tasks."""

import numpy as np
import pytest

from gptask.data.trials import Status, Trial
from gptask.model.surrogate.data import shared_scales, training_data
from gptask.model.transforms import OutputTransform
from gptask.space.dimensions import Real, Space
from gptask.tuning import fidelity as fm

SPACE = Space([Real("x", 0.0, 1.0)])
CHEAP = {0.1: 3.0, 0.3: 5.0, 0.5: 4.0, 0.7: 8.0, 0.9: 10.0}  # x -> value at the cheap level (task 1)
TARGET = {0.3: 9.5, 0.7: 14.0, 0.2: 30.0}  # x -> value at the target (task 0); 0.2 the cheap level never ran


def trials(target=TARGET, cheap=CHEAP, failed_target=()):
    out = []
    for i, values in ((1, cheap), (0, target)):
        for x, v in values.items():
            out.append(Trial(len(out), i, {"n": i}, {"x": x}, Status.COMPLETE, v))
    for x in failed_target:
        out.append(Trial(len(out), 0, {"n": 0}, {"x": x}, Status.FAILED, None, reason="crashed"))
    return out


@pytest.mark.parametrize("use_log", [False, True])
def test_a_level_takes_the_cheap_spread_and_the_cheap_mean_moved_by_the_paired_difference(use_log):
    f = np.log if use_log else (lambda v: v)
    cheap = np.array([f(v) for v in CHEAP.values()])
    paired = np.mean([f(TARGET[x]) - f(CHEAP[x]) for x in (0.3, 0.7)])  # 0.2 has no cheap run
    data = training_data(trials(failed_target=(0.4,)), 2, SPACE, use_log, scale_from=(1, None))
    tr = data.transform
    assert tr.sigma[0] == pytest.approx(np.std(cheap)) and tr.sigma[1] == pytest.approx(np.std(cheap))
    assert tr.mu[1] == pytest.approx(np.mean(cheap))
    assert tr.mu[0] == pytest.approx(np.mean(cheap) + paired)
    z = [(f(v) - np.mean(cheap) - paired) / np.std(cheap) for v in TARGET.values()]
    assert np.allclose(data.y[0][:3], z)
    assert data.y[0][3] == pytest.approx(max(z))  # the failed run: the task's worst, on the shared scale
    own = training_data(trials(), 2, SPACE, use_log)  # the rule before: each task on its own
    assert own.transform.sigma[0] == pytest.approx(np.std([f(v) for v in TARGET.values()]))


def test_without_shared_configurations_or_a_reference_a_level_keeps_what_it_can():
    base = OutputTransform.fit([np.array(list(TARGET.values())), np.array(list(CHEAP.values()))], use_log=False)
    apart = trials(target={0.25: 7.0, 0.65: 11.0})  # no configuration in common: its own mean, the cheap spread
    tr = shared_scales(base, apart, (1, None))
    assert tr.mu[0] == pytest.approx(9.0) and tr.sigma[0] == pytest.approx(np.std(list(CHEAP.values())))
    lone = trials(cheap={0.3: 5.0})  # a reference of one value has no spread to give: unchanged
    tr = shared_scales(base, lone, (1, None))
    assert tr.mu[0] == base.mu[0] and tr.sigma[0] == base.sigma[0]
    tr = shared_scales(base, trials(), (None, None))
    assert np.array_equal(tr.mu, base.mu) and np.array_equal(tr.sigma, base.sigma)


def test_the_fidelity_proposer_makes_levels_of_its_base_tasks_and_leaves_sources_alone(monkeypatch):
    p = fm.FidelityProposer(n_tuned=2, n_aux=1, n_levels=3)  # tasks: 3 base x 3 levels (9), sources after
    monkeypatch.setattr(fm, "LEVEL_MODEL", "tasks")
    assert p.model_structure(9) == ((), None)  # LEVEL_MODEL "tasks", the rule before: each (task, level) its own
    monkeypatch.undo()
    assert fm.LEVEL_MODEL == "input"  # the default
    scale_from, (group, level) = p.model_structure(9)
    assert scale_from == (6, 7, 8, 6, 7, 8, None, None, None)  # each level on its cheapest level's scale
    assert group == (0, 1, 2) * 3 and level == (0.0,) * 3 + (0.5,) * 3 + (1.0,) * 3
    assert p.model_structure(11) == ((), None)  # with 2 sources' tasks: every task its own
    assert fm.FidelityProposer(n_tuned=2, n_aux=0, n_levels=1).model_structure(2) == ((), None)
    monkeypatch.setattr(fm, "LEVEL_MODEL", "kernel")
    with pytest.raises(ValueError, match="LEVEL_MODEL must be"):
        p.model_structure(9)
