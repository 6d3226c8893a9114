"""A tuning result rebuilt from a history file alone (no problem code): what ``gptask show``,
``gptask report`` and the other read-only commands work from."""

from __future__ import annotations

import math
from typing import Any

__all__ = ["result_from_history"]


def result_from_history(history: Any) -> Any:
    """A :class:`gptask.TuningResult` rebuilt from a history (a Storage) without its problem: the
    spaces from the signature, the finished trials, the confirmation runs, and the model conditioned
    on every finished trial with the last stored hyperparameters (None before the first fit), the
    recorded default configurations and unit (a history that records no output transform for a
    stored fit gets the one the tuner takes by default for its problem). Its objective cannot be
    run (confirmation runs would fail) and its constraints are not known."""
    from .baseline import stored_defaults
    from ..evaluation.evaluate import EvaluationFailed
    from ..data.run_header import RunHeader, read_cost_from, read_fidelity_layout, stored_unit
    from ..data.trials import point_key
    from ..model.numerics import LCM, TaskLevels
    from ..problem.definition import Problem
    from .result import TuningResult
    from ..space.dimensions import Space
    from ..model.surrogate.data import training_data
    from ..model.surrogate.group import project, transform_for

    sig = history.signature
    name = sig.get("name", "problem")

    def no_objective(task: dict, params: dict) -> float:
        raise EvaluationFailed(f"the problem {name!r} was rebuilt from a history: its objective is not available")

    tasks = history.tasks()
    stored = stored_defaults(history)
    defaults = {point_key(t): d for t, d in zip(tasks, stored)}
    default = (lambda task: defaults[point_key(task)]) if stored and all(d is not None for d in stored) else None
    named = sig.get("outputs")  # a problem with named outputs (gptask.problem.objectives)
    declared = {} if not named else {
        "objectives": [tuple(o) for o in named["objectives"]], "outputs": list(named["names"]),
        "constraints_out": {k: tuple(v) for k, v in (named.get("limits") or {}).items()}}
    problem = Problem(Space.from_json(sig["task_space"]), Space.from_json(sig["param_space"]), no_objective,
                      constants=sig.get("constants") or {}, name=name, default=default, unit=stored_unit(history),
                      **declared)
    fidelity = sig.get("fidelity")
    if isinstance(fidelity, dict) and fidelity.get("space") and isinstance(fidelity.get("target"), dict):
        # a run with fidelity stores the problem the tuner ran (Problem.expanded: the fidelity dimensions in the
        # task space) with its fidelity: the rebuilt problem is that one, so a task given without the fidelity
        # is one at the target (gt.predict, predict_optimum), as on the run's own result
        problem.fidelity = Space.from_json(fidelity["space"])
        problem.target_fidelity = dict(fidelity["target"])
    finished = [t for t in history.trials() if t.status.finished]
    spec = problem.outputs
    header = RunHeader.read(history, () if spec is None else spec.modelled[1:])
    kernel = header.kernel or "rbf"
    fits = {None: (history.last_model(), header.use_log)} if spec is None else {
        name: (history.last_model(), header.use_log) if k == 0 else
        (header.output_models[name], header.output_use_log[name])
        for k, name in enumerate(spec.modelled)}
    # a history of a gptask that did not record a transform forced by the settings: the one the tuner
    # takes by default ("none" with several objectives, gptask.model.surrogate.group.transform_for)
    inferred = {"log": True, "none": False}.get(transform_for(problem, "auto"))
    models = {}
    for out, (last, use_log) in fits.items():
        use_log = inferred if use_log is None and last is not None else use_log
        if last is None or use_log is None or not finished:
            models[out] = (None, None)
            continue
        seen = project(finished, out, 1.0 if spec is None or out is None else spec.sign(out))
        # a fit of fidelity levels (LEVEL_MODEL "input") stores its levels and the levels' shared scales
        stored_levels, scale_from = last["params"].get("levels"), tuple(last["params"].get("scale_from") or ())
        data = training_data(seen, len(tasks), problem.param_space, bool(use_log), scale_from=scale_from)
        W = last["params"]["W"]  # nested lists (Q, T or G, rank)
        levels = None if stored_levels is None else TaskLevels(stored_levels["group"], stored_levels["level"])
        model = LCM(n_latent=len(W), kernel=kernel, rank=len(W[0][0]), levels=levels).condition(
            data.X, data.y, params=last["params"])
        model.recorded_fit = last["params"].get("diagnostics")  # the fit's diagnostics (None: an older history)
        if model.recorded_fit is not None:
            model.prior = _stored_prior(problem)
        models[out] = (model, data.transform)
    model, transform = next(iter(models.values()))
    # the tuner's tracks_cost (a cost budget, fidelity, a run_cost: the runs of a history it wrote say where from)
    counts_cost = (header.cost_budget is not None or problem.fidelity is not None
                   or read_cost_from(history) is not None)
    return TuningResult(problem, tasks, finished, model, transform, confirmations=history.confirmations(),
                        machines=history.machines(), fidelity=_fidelity_layout(sig, tasks, finished,
                                                                                   read_fidelity_layout(history)),
                        outputs={k: v for k, v in models.items() if k is not None and v[0] is not None},
                        cost_spent=_cost_spent(finished, counts_cost), cost_budget=header.cost_budget)


def _cost_spent(finished: list, counts_cost: bool) -> float | None:
    """The summed cost of the finished runs, less the measurements a source brought, as the tuner counts it
    (gptask.tuning.tuner.Tuner.cost_spent; None: no run has a cost). counts_cost: the history's run counts
    cost (a cost budget, fidelity levels, a run_cost), so a run told from a shell without a stored cost costs
    its ``"cost"`` output or its wall time (gptask.problem.fidelity.run_cost_of without the problem's run_cost,
    which is not stored); otherwise only stored costs count."""
    from ..data.trials import SOURCE_BROUGHT
    from ..problem.fidelity import run_cost_of

    mine = [t for t in finished if t.source != SOURCE_BROUGHT]
    costs = [run_cost_of(None, {}, t) if counts_cost else t.extra.get("cost") for t in mine]
    costs = [float(c) for c in costs if c is not None]
    return float(sum(costs)) if costs else None


def _stored_prior(problem: Any) -> Any:
    """The prior the tuner fits under (gptask.model.surrogate.core.Surrogate.prior), for the refitted folds
    of a rebuilt model's calibration factor."""
    from ..model.numerics.priors import LCMPrior
    return LCMPrior(dimension=float(len(problem.param_space)))


def _fidelity_layout(sig: dict, tasks: list[dict], trials: list, stored: dict | None = None) -> dict | None:
    """The ``TuningResult.fidelity`` of a history tuned with fidelity levels or auxiliary tasks
    (docs/fidelity.md), from the layout it stores and its task rows' levels (``stored``,
    :func:`gptask.data.run_header.read_fidelity_layout`), else (a history of an earlier version) the
    roles its runs are marked with (with sources, the tasks after the last one with a role are the
    sources'); None for another history. What the guard dropped is not stored: ``dropped`` is empty."""
    from ..data.trials import SOURCE_BROUGHT
    from ..problem.fidelity import fidelity_levels
    from ..space.dimensions import Space

    fid = sig.get("fidelity")
    levels = fidelity_levels(Space.from_json(fid["space"]), fid["target"]) if fid else [{}]
    if stored is not None:
        n_base, n_levels = stored["n_tuned"] + stored["n_aux"], stored["n_levels"]
        if fid and len(tasks) >= n_levels * n_base:  # the levels the run laid out (run_levels): its task rows'
            names = Space.from_json(fid["space"]).names
            levels = [{n: tasks[lv * n_base][n] for n in names} for lv in range(n_levels)]
        if n_levels == len(levels):
            return {"n_tuned": stored["n_tuned"], "n_aux": stored["n_aux"], "n_own": n_levels * n_base,
                    "levels": levels, "dropped": {}, "correlation": {}}
    roles = {t.task_index: t.extra.get("fidelity") for t in trials if t.extra.get("fidelity")}
    if not roles:
        return None
    own = len(tasks)
    if any(t.source == SOURCE_BROUGHT for t in trials):  # with sources: its own tasks first, level by level
        own = len(levels) * math.ceil((max(roles) + 1) / max(1, len(levels)))
    n_base = own // max(1, len(levels))
    n_tuned = sum(1 for i in range(n_base) if roles.get(i) == "target")
    return {"n_tuned": n_tuned, "n_aux": n_base - n_tuned, "n_own": own, "levels": levels, "dropped": {},
            "correlation": {}}
