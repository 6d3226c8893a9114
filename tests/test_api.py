"""``gt.tune``'s signature is its real one: every option a named keyword with a default, each named
in the docstring, and each passed on to the loop or the Tuner it configures."""

import inspect

import pytest

import gptask as gt
from gptask.sources.multisource import SourceError
from gptask.tuning.loop import tune as loop_tune
from gptask.tuning.config import TunerSettings
from gptask.tuning.tuner import Tuner


def test_tune_signature_names_every_option_and_documents_it():
    params = inspect.signature(gt.tune).parameters
    assert not any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in params.values())
    doc = gt.tune.__doc__
    for name in list(params)[1:]:
        assert params[name].default is not inspect.Parameter.empty, name
        assert f"{name}" in doc, f"{name} is not described in gt.tune's docstring"


def test_tune_takes_every_option_of_the_loop_and_the_tuner():
    """Every keyword the plain loop and the Tuner accept (but the ones only the engine sets) is a
    keyword of gt.tune: nothing is reachable only through **options."""
    mine = set(inspect.signature(gt.tune).parameters)
    loop = {n for n, p in inspect.signature(loop_tune).parameters.items() if p.kind is not p.VAR_KEYWORD} - {"evaluator"}
    tuner = set(inspect.signature(Tuner.__init__).parameters) - {"self", "owner", "lease", "settings", "options"}
    assert loop - mine == set()
    assert tuner - mine == set()
    assert set(TunerSettings.field_names()) - mine == set()


def test_unknown_option_is_a_type_error_naming_it():
    problem = gt.Problem(gt.Space([gt.Real("x", 0, 1)]), gt.Space([gt.Real("t", 0, 1)]),
                         lambda task, params: params["x"])
    with pytest.raises(TypeError, match="pso_iter"):
        gt.tune(problem, 1, 2, pso_iter=3)  # a typo is refused, not ignored


def test_source_options_without_sources_are_refused():
    problem = gt.Problem(gt.Space([gt.Real("x", 0, 1)]), gt.Space([gt.Real("t", 0, 1)]),
                         lambda task, params: params["x"])
    with pytest.raises(SourceError, match="needs sources="):
        gt.tune(problem, 1, 2, source_points=10)
    with pytest.raises(SourceError, match="needs sources="):
        gt.tune(problem, 1, 2, select_sources=True)
    with pytest.raises(SourceError, match="does not take \\['pruner'\\]"):
        gt.tune(problem, 1, 2, sources=[[]], pruner=object())
