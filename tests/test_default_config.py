"""The user's default configuration: declared on the Problem (a dict or a function of the task), checked
at the boundary, measured first on every task, and reported as the gain of the best over it."""

import sys
from pathlib import Path

import numpy as np
import pytest

import gptask as gt
from gptask.data.storage import SQLiteStorage
from gptask.tuning import Tuner

sys.path.insert(0, str(Path(__file__).parent))
from problems_for_tests import BLOCKS_DEFAULT, blocks_problem, blocks_truth, counting_problem  # noqa: E402

FAST = dict(pso_particles=10, pso_iters=5, restarts=1)


def test_a_default_is_validated_where_it_is_declared_and_per_task():
    with pytest.raises(TypeError, match="default must be a dict"):
        blocks_problem(default=[8, "a", 0.5])
    with pytest.raises(ValueError, match="nb=0 is outside"):
        blocks_problem(default={"nb": 0, "alg": "a", "x": 0.5})
    with pytest.raises(ValueError, match="missing"):
        blocks_problem(default={"nb": 8})
    p = blocks_problem(default={"nb": 64, "alg": "a", "x": 0.5})
    assert p.default_for({"m": 100}) == {"nb": 64, "alg": "a", "x": 0.5}
    with pytest.raises(ValueError, match=r"violates constraint #0 \(blocks_fit\) for task \{'m': 20\}"):
        p.default_for({"m": 20})
    with pytest.raises(ValueError, match="violates"):  # refused before anything runs
        Tuner(p, tasks=[{"m": 100}, {"m": 20}], budget=3, **FAST)
    per_task = blocks_problem(default=lambda t: {"nb": min(64, t["m"]), "alg": "b", "x": 0.9})
    assert per_task.default_for({"m": 20}) == {"nb": 20, "alg": "b", "x": 0.9}
    assert blocks_problem().default_for({"m": 20}) is None
    # not part of the signature: a history or model file stays valid when the default changes
    assert p.signature() == blocks_problem().signature()


def test_the_tuner_measures_the_default_first_on_every_task(tmp_path):
    problem = blocks_problem(default=lambda task: {"nb": min(64, task["m"]), "alg": "b", "x": 0.9})
    with Tuner(problem, tasks=[{"m": 20}, {"m": 500}], budget=4, n_initial=3, history=tmp_path / "h.sqlite",
               **FAST) as tu:
        first = tu.ask()
        assert [(t.task_index, t.source, dict(t.params)) for t in first[:2]] == [
            (0, "default", {"nb": 20, "alg": "b", "x": 0.9}), (1, "default", {"nb": 64, "alg": "b", "x": 0.9})]
        assert [t.source for t in first[2:]] == ["initial"] * 4  # n_initial counts the default
        assert len({tuple(sorted(t.params.items())) for t in first if t.task_index == 1}) == 3
    with SQLiteStorage(tmp_path / "h.sqlite", read_only=True) as s:
        assert s.get_meta("defaults") == [{"nb": 20, "alg": "b", "x": 0.9}, {"nb": 64, "alg": "b", "x": 0.9}]


def test_results_report_the_gain_over_the_measured_default():
    result = gt.tune(blocks_problem(default=True), tasks=[{"m": 100}, {"m": 800}], budget=6, n_initial=3,
                     progress=False, **FAST)
    for i, task in enumerate(result.tasks):
        params, value = result.default(i)
        assert params == BLOCKS_DEFAULT and value == blocks_truth(task, BLOCKS_DEFAULT)
        best = result.best(i)[1]
        assert result.gain(i) == pytest.approx((value - best) / value) and result.gain(i) >= 0
        row = result.table()[i]
        assert row["default"] == value and row["gain"] == result.gain(i)
    # without a default: no such columns, and gain is None
    plain = gt.tune(counting_problem(), tasks=1, budget=3, n_initial=2, progress=False, **FAST)
    assert "default" not in plain.table()[0] and plain.default(0) is None and plain.gain(0) is None


def test_the_apps_declare_a_practitioner_s_default():
    from apps.io_accelerators.problem import DEFAULTS
    from apps.io_accelerators.problem import problem as io_problem
    from apps.mpi_collectives.problem import problem as coll_problem
    from apps.scalapack_qr.problem import problem as qr_problem

    qr16 = qr_problem(cores=16, m_max=4000, backend="model")
    assert qr16.default_for({"m": 2000, "n": 2000}) == {"mb": 64, "nb": 64, "nproc": 16, "p": 4, "nth": 1}
    assert qr16.default_for({"m": 128, "n": 200}) == {"mb": 32, "nb": 50, "nproc": 16, "p": 4, "nth": 1}
    assert qr_problem(cores=2, backend="model").default_for({"m": 500, "n": 500}) == {
        "mb": 64, "nb": 64, "nproc": 2, "p": 1, "nth": 1}
    assert qr_problem(cores=6, backend="model").default_for({"m": 500, "n": 500})["p"] == 2  # 2 x 3
    rng = np.random.default_rng(0)
    for cores in (1, 2, 6, 12, 16):  # feasible on every task of the space (default_for raises otherwise)
        pb = qr_problem(cores=cores, m_max=4000, backend="model")
        for m, n in rng.integers(128, 4001, size=(50, 2)):
            d = pb.default_for({"m": int(m), "n": int(n)})
            assert d["nproc"] == cores and d["nth"] == 1 and d["p"] <= d["nproc"] // d["p"]
    coll = coll_problem(colls="allreduce")
    assert coll.default_for({"size": 1024, "nprocs": 2})["algorithm"] == "auto"
    for acc in ("sro", "sbb"):
        pb = io_problem(acc, backend="model")
        assert pb.default == DEFAULTS[acc]
