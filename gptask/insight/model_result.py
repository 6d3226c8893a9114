"""What insight reads: a tuning result rebuilt from a model file's own data, so that the one
recommendation rule (:mod:`gptask.results.recommend`) can be applied to a model file too.

A history file becomes a result through :func:`gptask.results.rebuild.result_from_history` (what ``gptask
show`` does); a model file holds its LCM's training data (encoded configurations and transformed
values per task), from which :func:`result_from_model` rebuilds the evaluated configurations and
their values. Failed runs the model imputed are among them with their imputed (pessimistic) values;
confirmation runs are not in a model file (its ``recommended`` entries hold what the rule chose
with them: :func:`stored_recommendations`).
"""

from __future__ import annotations


from ..evaluation.evaluate import EvaluationFailed
from ..sources.measurements import model_data
from ..problem.definition import Problem
from ..results.result import TuningResult
from ..space.dimensions import Space
from ..transfer import TransferModel
from ..data.trials import Status, Trial

__all__ = ["result_from_model", "problem_of", "MODEL_SOURCE"]

#: the ``source`` of the trials rebuilt from a model file's data
MODEL_SOURCE = "model data"


def problem_of(tm: TransferModel) -> Problem:
    """The model's problem when it was loaded with one, else a Problem rebuilt from the stored
    signature (spaces, constants, name; no objective, constraints or default)."""
    if tm.problem is not None:
        return tm.problem
    sig = tm.signature
    name = sig.get("name", "problem")

    def no_objective(task: dict, params: dict) -> float:
        raise EvaluationFailed(f"the problem {name!r} was rebuilt from a model file: its objective is not available")

    return Problem(Space.from_json(sig["task_space"]), Space.from_json(sig["param_space"]), no_objective,
                   constants=sig.get("constants") or {}, name=name)


def result_from_model(tm: TransferModel) -> TuningResult:
    """A :class:`TuningResult` of a loaded model: its problem (:func:`problem_of`), its tasks, one
    complete trial per training point of the LCM (decoded configuration, value in user units) and
    the model itself, so that ``recommend(result, i)`` ranks the evaluated configurations by the
    model's posterior mean as it does for a tuning run."""
    problem = problem_of(tm)
    trials = []
    for i, pairs in enumerate(model_data(tm)):
        for params, v in pairs:
            trials.append(Trial(id=len(trials) + 1, task_index=i, task=dict(tm.tasks[i]), params=params,
                                status=Status.COMPLETE, value=v, source=MODEL_SOURCE))
    return TuningResult(problem, [dict(t) for t in tm.tasks], trials, tm.model, tm.transform)
