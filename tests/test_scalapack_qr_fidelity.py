"""PDGEQRF with a size fidelity (issue 44): problem(size_fractions=...) runs scaled matrices."""

from __future__ import annotations

import numpy as np
import pytest

import gptask as gt
from apps.scalapack_qr import costmodel, problem
from apps.scalapack_qr.problem import SIZE_FIDELITY
from gptask.data.trials import Status

from test_scalapack_qr import reference_matrix

FAST = dict(restarts=1, refit_restarts=1, pso_particles=12, pso_iters=8, progress=False)
CONFIG = {"mb": 16, "nb": 8, "nproc": 2, "p": 2, "nth": 1}


def test_size_fidelity_declares_the_fraction_with_the_full_matrix_as_target():
    pb = problem(backend="model", size_fractions=[0.25, 0.5])
    assert pb.fidelity.names == [SIZE_FIDELITY] and pb.target_fidelity == {SIZE_FIDELITY: 1.0}
    # from the full matrix outwards: the last level, where the cheap design runs, is the smallest
    assert pb.fidelity_levels() == [{SIZE_FIDELITY: 1.0}, {SIZE_FIDELITY: 0.5}, {SIZE_FIDELITY: 0.25}]
    assert problem(backend="model").fidelity is None  # the classic problem is unchanged
    assert pb.name == "scalapack_pdgeqrf_MODEL_size_fidelity"


@pytest.mark.parametrize("bad", [[1.0], [0.0], [-0.5], [float("nan")], [True], [], "0.5", 0.5])
def test_size_fractions_outside_0_1_are_refused_naming_the_value(bad):
    with pytest.raises(ValueError, match="size_fractions") as err:
        problem(backend="model", size_fractions=bad)
    assert repr(bad[0] if isinstance(bad, list) and bad else bad) in str(err.value)


def test_model_backend_at_a_fraction_predicts_the_scaled_matrix():
    task, full = {"m": 1000, "n": 600}, problem(backend="model")
    pb = problem(backend="model", size_fractions=[0.5])
    half = pb.objective(task, {**CONFIG, SIZE_FIDELITY: 0.5})
    # reference: the classic problem on the 500 x 300 task, and the cost model's own formula
    assert half == pytest.approx(full.objective({"m": 500, "n": 300}, CONFIG), rel=1e-12)
    model = costmodel.CostModel.load()
    assert half == pytest.approx(model.predict(500, 300, 16, 8, 2, 1, 1), rel=1e-12)
    assert pb.objective(task, {**CONFIG, SIZE_FIDELITY: 1.0}) == pytest.approx(full.objective(task, CONFIG))
    with pytest.raises(ValueError, match=r"size_fraction must be a number in \(0, 1\], got 2"):
        pb.objective(task, {**CONFIG, SIZE_FIDELITY: 2})


@pytest.mark.mpi
def test_real_run_at_a_low_fraction_factors_the_scaled_matrix():
    pb = problem(repeats=1, size_fractions=[0.25])
    value = pb.objective({"m": 400, "n": 400}, {**CONFIG, SIZE_FIDELITY: 0.25})
    rec = pb.objective.last_record
    assert (rec["m"], rec["n"]) == (100, 100) and value == rec["time"] > 0
    # the 100 x 100 matrix was factored: sum log|R_jj| = log|det A| (numpy, independent of ScaLAPACK)
    assert rec["logabsdiag_r"] == pytest.approx(np.linalg.slogdet(reference_matrix(100, 100))[1], rel=1e-9)


@pytest.mark.mpi
def test_tune_with_size_fidelity_runs_both_sizes_and_costs_their_wall_time():
    pb = problem(m_max=400, repeats=1, timeout=30, size_fractions=[0.25])
    # the cheap level's design runs first, then the target's (its best cheap configuration promoted):
    # a cost budget that does not bind, so that the run reaches the target's design
    r = gt.tune(pb, [{"m": 400, "n": 400}], cost_budget=600.0, budget=3, n_initial=2, seed=0, **FAST)
    fractions = sorted(t.task[SIZE_FIDELITY] for t in r.history)
    assert fractions[0] == 0.25 and fractions[-1] == 1.0  # the initial designs at both levels
    cheap = [t for t in r.history if t.task[SIZE_FIDELITY] == 0.25]
    target = sorted((t for t in r.history if t.task[SIZE_FIDELITY] == 1.0), key=lambda t: t.id)
    assert max(t.id for t in cheap[:2]) < target[0].id  # promotion: the target waited for the cheap design
    assert target[0].params == min(cheap[:2], key=lambda t: (t.value, t.id)).params
    for t in r.history:
        assert t.status is Status.COMPLETE and t.extra["cost"] == pytest.approx(t.duration) and t.duration > 0
    assert r.cost_spent == pytest.approx(sum(t.duration for t in r.history))
    params, value = r.best(0)
    assert pb.is_feasible({"m": 400, "n": 400}, params) and value > 0
