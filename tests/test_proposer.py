"""The proposer slot: a search variant is one class and one registration; the Tuner asks it what to
run next and keeps the bookkeeping; its settings are one typed object."""

import numpy as np
import pytest

import gptask as gt
from gptask.tuning import Tuner
from gptask.tuning.config import TunerSettings
from gptask.tuning.proposer import Proposer, make_proposer, proposer_names, register_proposer
from gptask.tuning.settings import SOURCE_SEARCH

LISTED = [{"x": x, "alg": a} for x in range(0, 32) for a in ("a", "b")]


def listed_problem() -> gt.Problem:
    def f(task, params):
        return 1.0 + (params["x"] - 20 * task["t"]) ** 2 / 100 + 0.3 * (params["alg"] == "b")

    return gt.Problem(gt.Space([gt.Real("t", 0.1, 1.0)]),
                      gt.Space([gt.Integer("x", 0, 31), gt.Categorical("alg", ["a", "b"])]), f,
                      name="listed-bowl")


class OnlyEvenX(Proposer):
    """Searches only among the configurations with an even x (a variant that restricts the search)."""

    name = "only-even"

    def search_among(self, i):
        tu = self.tuner
        done = {(t.params["x"], t.params["alg"]) for t in tu.trials_of(i)}
        rows = [p for p in LISTED if p["x"] % 2 == 0 and (p["x"], p["alg"]) not in done]
        return tu.problem.param_space.encode(rows)


def test_a_registered_proposer_decides_every_search_of_gt_tune():
    register_proposer("only-even", OnlyEvenX)
    assert "only-even" in proposer_names()
    res = gt.tune(listed_problem(), [{"t": 0.3}, {"t": 0.8}], budget=8, n_initial=4, seed=3, progress=False,
                  proposer="only-even", pso_particles=10, pso_iters=5)
    searched = [t for t in res.history if t.source == SOURCE_SEARCH]
    assert len(searched) == 8
    assert all(t.params["x"] % 2 == 0 for t in searched)
    # the same run with the default proposer searches odd x too (the variant really was asked)
    plain = gt.tune(listed_problem(), [{"t": 0.3}, {"t": 0.8}], budget=8, n_initial=4, seed=3, progress=False,
                    pso_particles=10, pso_iters=5)
    assert any(t.params["x"] % 2 for t in plain.history if t.source == SOURCE_SEARCH)
    # the initial designs are the default proposer's in both (only search_among was overridden)
    first = sorted((t.task_index, t.params["x"], t.params["alg"]) for t in res.history if t.source != SOURCE_SEARCH)
    again = sorted((t.task_index, t.params["x"], t.params["alg"]) for t in plain.history if t.source != SOURCE_SEARCH)
    assert first == again


def test_the_default_proposer_object_and_name_give_the_same_run_as_none():
    runs = [gt.tune(listed_problem(), 2, budget=6, n_initial=3, seed=5, progress=False, proposer=p,
                    pso_particles=10, pso_iters=5) for p in (None, "default", Proposer())]
    keys = [[(t.task_index, t.params["x"], t.params["alg"]) for t in sorted(r.history, key=lambda t: t.id)]
            for r in runs]
    assert keys[0] == keys[1] == keys[2]


def test_unknown_proposer_and_reused_proposer_are_refused():
    with pytest.raises(ValueError, match="no proposer named 'nope'; registered: .*default"):
        gt.tune(listed_problem(), 1, budget=2, proposer="nope", progress=False)
    with pytest.raises(TypeError, match="proposer must be"):
        make_proposer(3)
    shared = Proposer()
    with Tuner(listed_problem(), 1, budget=2, proposer=shared):
        with pytest.raises(ValueError, match="already serves another tuner"):
            Tuner(listed_problem(), 1, budget=2, proposer=shared)


def test_settings_are_one_checked_object_and_keywords_build_it():
    s = TunerSettings(pso_iters=7, kernel="matern52")
    with Tuner(listed_problem(), 1, budget=2, settings=s) as a, \
            Tuner(listed_problem(), 1, budget=2, pso_iters=7, kernel="matern52") as b:
        assert a.settings == b.settings == s
        assert (a.pso_iters, a.kernel) == (7, "matern52")
    with Tuner(listed_problem(), 1, budget=2, settings=s, pso_iters=9) as c:  # keywords change the object
        assert c.settings.pso_iters == 9 and c.settings.kernel == "matern52"
    with pytest.raises(TypeError, match="pso_iter'.*the settings are n_latent, kernel"):
        Tuner(listed_problem(), 1, budget=2, pso_iter=7)
    with pytest.raises(ValueError, match="kernel must be 'rbf' or 'matern52', got 'cubic'"):
        TunerSettings(kernel="cubic")
    with pytest.raises(ValueError, match="pso_particles"):
        TunerSettings(pso_particles=1)
    with pytest.raises(TypeError, match="settings must be"):
        Tuner(listed_problem(), 1, budget=2, settings={"pso_iters": 3})
    assert np.isclose(TunerSettings(failure_model=0.9).failure_model, 0.9)


def test_bench_suite_loads_a_proposer_file_and_gt_tune_runs_it():
    """bench/suite.py --proposer NAME: the file registers NAME; the variant's offer is searched."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "bench" / "suite.py"
    spec = importlib.util.spec_from_file_location("bench_suite_for_test", path)
    import sys

    sys.path.insert(0, str(path.parent))
    try:
        suite = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(suite)
        suite.load_proposer("consensus_picks")
    finally:
        sys.path.remove(str(path.parent))
    made = make_proposer("consensus_picks", {"cons": 3})
    assert type(made).__name__ == "ConsensusPicks" and made.cons == 3
    with pytest.raises(SystemExit, match="no file .*nope.py"):
        suite.load_proposer("nope")
