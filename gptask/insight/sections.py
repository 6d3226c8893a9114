"""The sections of the campaign report, one function per topic.

Each section function takes the :class:`~gptask.insight.report_data.ReportData` and the
:class:`ReportOptions` and returns the section's HTML body; it says what is missing instead of
failing when the history cannot give it yet. :data:`SECTIONS` lists them in page order: a new
topic (the Pareto fronts of several objectives, issue 25) is one more function and one more entry.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..core.labels import format_param, task_label
from ..data.trials import SOURCE_BROUGHT, Status
from ..tuning.settings import SOURCE_SEARCH
from . import figures
from .grid import MAX_POINTS
from .html import esc, figure_html, list_html, note_html, table_html
from .report_data import ReportData
from .sensitivity import MAX_EVALUATIONS

__all__ = ["ReportOptions", "SECTIONS", "Section", "cost_series"]

log = logging.getLogger(__name__)

#: rows of the measured-runs table beyond which only failed runs and the first rows are listed
MAX_RUN_ROWS = 2000
#: runs below the target fidelity whose mean cost is at least this share of a target run's: "the cost is flat"
FLAT_COST_SHARE = 0.8
#: points per task dimension of the default map of the task space
MAP_POINTS = 7
#: held-out points per task scored by the leave-one-task-out check (each task refits the new-task model)
LOTO_POINTS = 40
#: the error of Sobol indices from a tuning history against a Latin hypercube of as many runs: the largest
#: |S1 - true S1| over Ishigami's 3 parameters, mean over seeds 0-2 (bench/sensitivity_from_tuning.py)
SENSITIVITY_FROM_TUNING = {"runs": (50, 100), "tuning": (0.27, 0.20), "lhs": (0.09, 0.06), "seeds": 3}
#: columns of a recommendation row the page leaves to ``gptask show`` (the page's table fits 1400 px)
PAGE_DROPPED = ("pick", "median", "max", "predicted", "+-", "raw best")
#: what the page's recommendation table shows
PAGE_COLUMNS_NOTE = ("value: the pick's {aggregate} over its confirmation runs when it has some, else its value as "
                     "measured while tuning (basis: which); default: the default configuration's value taken the "
                     "same way; gain: (default - value) / default. The model's prediction at the pick (+- std), the "
                     "single best launch and the confirmation runs' median and max: gptask show HISTORY")
#: the failure map is drawn from this many failed and finished runs on (fewer teach the model nothing)
FAILURE_MAP_MIN = (2, 10)


@dataclass(frozen=True)
class ReportOptions:
    """grid: the task grid of the "best configuration across the task space" section (a grid
    text, :mod:`gptask.insight.grid`; None: MAP_POINTS values per dimension over the tuned range);
    sensitivity_base: SALib's N; problem_given: whether the result carries the user's problem
    (its constraints, default and features) rather than one rebuilt from the history;
    max_grid_points, max_evaluations: the caps on the grid and on the sensitivity's model
    evaluations (:data:`gptask.insight.grid.MAX_POINTS`, :data:`gptask.insight.sensitivity.MAX_EVALUATIONS`)."""

    grid: str | None = None
    sensitivity_base: int = 1024
    problem_given: bool = False
    tasks: tuple[Any, ...] = ()
    max_grid_points: int = MAX_POINTS
    max_evaluations: int = MAX_EVALUATIONS


def summary(data: ReportData, opts: ReportOptions) -> str:
    counts = {s: sum(t.status is s for t in data.trials) for s in Status}
    rows = [{"item": "problem", "value": data.name}, {"item": "history", "value": data.where},
            {"item": "tasks", "value": len(data.tasks)},
            {"item": "evaluations finished", "value": len(data.finished)},
            {"item": "complete / failed / censored",
             "value": f"{counts[Status.COMPLETE]} / {counts[Status.FAILED]} / {counts.get(Status.CENSORED, 0)}"},
            {"item": "pending", "value": counts[Status.PENDING]},
            {"item": "confirmation runs", "value": len(data.confirmations)},
            {"item": "budget per task", "value": data.budget if data.budget is not None else "not recorded"},
            {"item": "model fits recorded", "value": data.n_models},
            {"item": "objective's unit", "value": data.unit or "none recorded"}]
    spec = None if data.result is None else data.result.problem.outputs
    if spec is not None:  # named outputs: every objective (the first is the value of each trial), every limit
        rows.insert(4, {"item": "objectives", "value": ", ".join(spec.label(n) for n in spec.objectives)
                        + (f" (a trial's value: {spec.primary})" if len(spec.objectives) > 1 else "")})
        if spec.limits:
            rows.insert(5, {"item": "limits", "value": ", ".join(map(str, spec.limits))})
    rows += _cost_rows(data)
    out = table_html(rows)
    flat = _flat_cost(data)
    if flat:
        out += note_html(flat, "missing")
    if data.missing:
        out += note_html("What this history does not hold yet (the page shows what it can):", "missing")
        out += list_html(data.missing)
    return out


def recommendations(data: ReportData, opts: ReportOptions) -> str:
    from ..results.recommend import DEFAULT_AGGREGATE, RULE, VALUE_COLUMNS, nothing_to_recommend, recommend, recommendation_row

    result = data.result
    if result is None or not data.finished:
        return note_html("No task has a finished evaluation yet: nothing to recommend.", "missing")
    if result.model is None and not result.confirmations:
        rows = [r for r in result.table()]
        return (note_html("No model was fitted yet: the table shows the single best launch per task (not a "
                          "recommendation; the model's rule applies once it is fitted).", "missing")
                + table_html(rows, data.unit, ("best", "default")) + _fronts(data))
    recs = [recommend(result, i, progress=False) for i in range(len(result.tasks))
            if nothing_to_recommend(result, i) is None]
    out = note_html("Rule: " + RULE.format(aggregate=DEFAULT_AGGREGATE) + ".")
    confirmed = any(r.pick.confirmations for r in recs)
    out += table_html([_page_row(data, r, recommendation_row(r), confirmed) for r in recs], data.unit, VALUE_COLUMNS)
    out += note_html(PAGE_COLUMNS_NOTE.format(aggregate=DEFAULT_AGGREGATE))
    out += "<h3>In words</h3>" + list_html(f"{data.task_text(r.task_index)}: {r.describe()}" for r in recs)
    without = [i for i in range(len(result.tasks)) if not result.records(i)]
    if without:
        out += note_html("No complete evaluation yet, so no recommendation: " + ", ".join(
            data.task_text(i) for i in without), "missing")
    for i in range(len(result.tasks)):
        why = nothing_to_recommend(result, i)
        if why is not None and result.records(i):  # complete runs, none within the limits
            out += note_html(f"{data.task_text(i)}: {why}, so no recommendation.", "missing")
    return out + _fronts(data)


def _page_row(data: ReportData, rec: Any, row: dict[str, Any], confirmed: bool) -> dict[str, Any]:
    """The columns of ``row`` (:func:`gptask.recommend.recommendation_row`) a reader of the page
    needs (PAGE_COLUMNS_NOTE): the task as one label, the pick's parameters and other outputs, its
    value and what it rests on, the confirmation runs when any task has them, the default's value,
    the gain; the model's prediction, the raw best launch and the run statistics stay in
    ``gptask show``."""
    keep = {"task": data.task_text(rec.task_index)}
    shown = set(rec.task) | {"task", *PAGE_DROPPED}
    keep.update((k, v) for k, v in row.items() if k not in shown and k not in ("basis", "runs", "default", "gain"))
    keep["basis"] = row["basis"]
    if confirmed:
        keep["runs"] = row["runs"]
    keep.update(default=row["default"], gain=row["gain"])
    return keep


def _fronts(data: ReportData) -> str:
    """Each task's Pareto front (``result.pareto(i)``: its measured configurations meeting every
    limit that no other one beats in every objective), with every output: "" for one objective."""
    result = data.result
    spec = None if result is None else result.problem.outputs
    if spec is None or len(spec.objectives) < 2:
        return ""
    out = "<h3>Pareto front per task</h3>" + note_html(
        "Objectives: " + ", ".join(spec.label(n) for n in spec.objectives)
        + (f"; limits: {', '.join(map(str, spec.limits))}" if spec.limits else "")
        + ". Each task's front: its measured configurations that meet every limit and that no other measured "
          "configuration beats in every objective (observed values, the mean over repeated evaluations), best "
        + spec.label(spec.primary) + " first.")
    for i in range(len(result.tasks)):
        front = result.pareto(i)
        rows = [{**p.params, **{spec.label(n): p.values[n] for n in spec.names}, "evaluations": p.evaluations}
                for p in front]
        out += f"<h4>{esc(data.task_text(i))}: {len(front)} configuration(s) on the front</h4>"
        out += table_html(rows) if rows else note_html("No complete evaluation meets the limits yet.", "missing")
    return out


def convergence(data: ReportData, opts: ReportOptions) -> str:
    if not data.finished:
        return note_html("No finished evaluation yet.", "missing")
    result = data.result
    series = []
    for i, task in enumerate(data.tasks):
        mine = [t for t in data.finished if t.task_index == i]
        if not mine:
            continue
        default = None
        if result is not None and result.problem.default is not None:
            d = result.default(i)
            default = None if d is None else d[1]
        series.append({"label": figures.series_label(i, task), "default": default,
                       "values": [t.value if t.status is Status.COMPLETE else None for t in mine]})
    shown = len(series[: figures.MAX_PANELS])
    caption = ("Measured value of every evaluation of each task (grey), the best so far (blue), the default's "
               "value (orange, dashed) and failed evaluations (red crosses).")
    if len(series) > shown:
        caption += f" The first {shown} of {len(series)} tasks."
    out = figure_html(figures.convergence_grid(series, data.unit), caption, "convergence per task")
    curves = cost_series(data)
    if curves:
        shown = len(curves[: figures.MAX_PANELS])
        marked = any(s["low"] or s["aux"] for s in curves)
        caption = ("Best value of each tuned task's target-fidelity runs (blue) against the cumulative cost of every "
                   "run of the history, in the order they finished; the target runs as grey dots"
                   + ("; the runs below the target fidelity (orange) and of auxiliary tasks (green) as ticks along "
                      "the bottom, at the cost where they finished" if marked else "") + ".")
        if len(curves) > shown:
            caption += f" The first {shown} of {len(curves)} tuned tasks."
        out += figure_html(figures.cost_curves(curves, data.unit), caption, "best value against cost")
    return out


def cost_series(data: ReportData) -> list[dict[str, Any]]:
    """The series of the best-value-against-cost figure (:func:`gptask.insight.figures.cost_curves`)
    of a history whose runs recorded a cost (``extra["cost"]``, s), one per tuned task (a task
    whose runs are marked "target", or unmarked): the cumulative cost of every finished run, in the
    order they finished, after each of its runs (cost, values; None for a failed run), after each
    run of the same task below the target fidelity (low) and after each run of an auxiliary task
    (aux). [] when no run recorded a cost."""
    done = sorted((t for t in data.finished if t.source != SOURCE_BROUGHT),  # a source's measurements: no runs
                  key=lambda t: (t.finished if t.finished is not None else float("inf"), t.id))
    if not any("cost" in t.extra for t in done):
        return []
    fid = getattr(data.result, "fidelity", None) or {}
    n_base = int(fid.get("n_tuned", 0)) + int(fid.get("n_aux", 0))  # task i is base task i % n_base
    series: dict[int, dict[str, Any]] = {}
    low: dict[int | None, list[float]] = {}
    aux: list[float] = []
    spent = 0.0
    for t in done:
        spent += float(t.extra.get("cost") or 0.0)
        role = t.extra.get("fidelity", "target")
        if role == "low fidelity":
            low.setdefault(t.task_index % n_base if n_base else None, []).append(spent)
        elif role == "auxiliary":
            aux.append(spent)
        else:
            s = series.setdefault(t.task_index, {"label": figures.series_label(t.task_index, data.tasks[t.task_index]),
                                                 "cost": [], "values": [], "optimum": None})
            s["cost"].append(spent)
            s["values"].append(t.value if t.status is Status.COMPLETE else None)
    # a tuned task's panel marks its own base task's cheaper runs (all of them when the layout is unknown)
    return [{**series[i], "low": low.get(i if n_base else None, []), "aux": aux} for i in sorted(series)]


def _cost_rows(data: ReportData) -> list[dict[str, Any]]:
    """The summary's rows of a run that recorded costs or fidelity roles (docs/fidelity.md)."""
    # the cost as the tuner counts it against the budget (gptask.results.rebuild: the runs sources brought left out)
    spent = None if data.result is None else data.result.cost_spent
    rows: list[dict[str, Any]] = []
    if spent is not None:
        rows.append({"item": "cost spent (s)", "value": f"{spent:.4g}"})
    if data.cost_budget is not None:
        rows.append({"item": "cost budget (s)", "value": f"{data.cost_budget:.4g}"})
    roles = [t.extra.get("fidelity") for t in data.finished if t.extra.get("fidelity")]
    if roles:
        counts = {r: roles.count(r) for r in ("target", "low fidelity", "auxiliary") if r in roles}
        rows.append({"item": "runs by role", "value": ", ".join(f"{n} {r}" for r, n in counts.items())
                     + " (results speak of the target runs only)"})
    return rows


def _flat_cost(data: ReportData) -> str:
    """A warning when the runs below the target fidelity cost about as much as those at it (the
    objective may ignore its fidelity), "" otherwise."""
    by_role: dict[str, list[float]] = {}
    for t in data.finished:
        role = t.extra.get("fidelity")
        if role in ("target", "low fidelity") and t.extra.get("cost") is not None:
            by_role.setdefault(role, []).append(float(t.extra["cost"]))
    if len(by_role) < 2:
        return ""
    target, low = float(np.mean(by_role["target"])), float(np.mean(by_role["low fidelity"]))
    if target > 0 and low >= FLAT_COST_SHARE * target:
        return (f"The runs below the target fidelity cost {low:.3g} s on average, {low / target:.0%} of a target "
                f"run's {target:.3g} s: the cost is flat, the objective may ignore its fidelity (then the cheaper "
                "runs buy nothing).")
    return ""


def runs(data: ReportData, opts: ReportOptions) -> str:
    from ..evaluation.failed_runs import reasons_by_task

    if not data.trials:
        return note_html("No run was asked yet.", "missing")
    out = ""
    failed = reasons_by_task(data.trials)
    if failed:
        rows = [{"task": i, "task values": task_label(data.tasks[i]), "failed": sum(c.values()),
                 "reasons": "; ".join(f"{r} ({n})" for r, n in c.most_common())} for i, c in failed.items()]
        out += "<h3>Failures by reason</h3>" + table_html(rows)
    else:
        out += note_html("No evaluation failed.")
    trials = data.trials
    if len(trials) > MAX_RUN_ROWS:
        keep = [t for t in trials if t.status is not Status.COMPLETE]
        trials = keep + [t for t in trials if t.status is Status.COMPLETE][: max(0, MAX_RUN_ROWS - len(keep))]
        out += note_html(f"{len(data.trials)} runs: every failed, censored or pending one and the first complete "
                         f"ones are listed ({len(trials)} rows); `gptask export` writes them all.")
    rows = [{"id": t.id, "task": t.task_index, **t.params, "status": t.status.value, "value": t.value,
             "duration (s)": t.duration, "source": t.source, "reason": t.reason or "",
             **({"fidelity": t.extra["fidelity"]} if "fidelity" in t.extra else {}),
             **({"cost (s)": t.extra["cost"]} if "cost" in t.extra else {})} for t in trials]
    out += "<h3>Every run</h3><div class=\"scroll\">" + table_html(
        rows, data.unit, ("value",), row_class=lambda r: "failed" if r["status"] == "failed" else "") + "</div>"
    if data.confirmations:
        groups: dict[tuple, list] = {}
        for t in data.confirmations:
            groups.setdefault((t.task_index, tuple(sorted(t.params.items()))), []).append(t)
        rows = []
        for (i, _), runs_ in groups.items():
            ok = [t.value for t in runs_ if t.status is Status.COMPLETE]
            rows.append({"task": i, **runs_[0].params, "runs": len(runs_), "failed": len(runs_) - len(ok),
                         "min": min(ok) if ok else None, "median": float(np.median(ok)) if ok else None,
                         "max": max(ok) if ok else None,
                         "reasons": "; ".join(sorted({t.reason for t in runs_ if t.reason}))})
        out += ("<h3>Confirmation runs</h3>" + note_html(
            f"{len(data.confirmations)} re-launches of the candidates of the recommendation rule (round robin), "
            "per task and configuration.") + "<div class=\"scroll\">"
            + table_html(rows, data.unit, ("min", "median", "max")) + "</div>")
    return out


def sensitivity_section(data: ReportData, opts: ReportOptions) -> str:
    from .sensitivity import FIXABLE_TOTAL, sensitivity

    if not data.has_model:
        return note_html("No fitted model yet: the indices are computed on the model's mean.", "missing")
    space = data.result.problem.param_space
    if len(space) < 2:
        return note_html(f"One parameter ({space.names[0]}): there is nothing to apportion.")
    rep = sensitivity(data.result, base=opts.sensitivity_base)
    m = rep.mean
    out = note_html(rep.describe().split("\n")[0] + ". S1: the share of the variance a parameter explains "
                    "alone; ST: with its interactions. The +- are half-widths of the bootstrap intervals of the "
                    "estimate on the model's mean; the model's own error is not in them (see the held-out "
                    "accuracy).")
    out += _sensitivity_runs_note(data, rep.task_indices)
    out += figure_html(figures.sensitivity_bars(rep.names, m.first, m.first_conf, m.total, m.total_conf),
                       f"Mean Sobol indices over {len(rep.tasks)} task(s), 95 % intervals.", "Sobol indices")
    out += table_html(rep.table())
    fixable = rep.fixable()
    out += note_html(f"Can be fixed (ST + its half-width below {FIXABLE_TOTAL} on every task): "
                     + (", ".join(fixable) if fixable else "none") + ".")
    known = [f for f in rep.infeasible_fraction if f is not None]
    if known:
        out += note_html(f"The constraints forbid {100 * min(known):.0f}-{100 * max(known):.0f} % of the "
                         "sampled box of parameters: there the indices describe the model where it has no data.")
    elif not opts.problem_given and data.signature.get("n_constraints"):
        out += note_html(f"The problem has {data.signature['n_constraints']} constraint(s), unknown to a history: "
                         "the box sampled may hold configurations they forbid (pass --problem to count them).")
    return out


def _sensitivity_runs_note(data: ReportData, tasks: tuple[int, ...]) -> str:
    """How many measured runs the indices of ``tasks`` rest on and, when the search chose some of
    them, how much less accurate indices from a tuning history are (SENSITIVITY_FROM_TUNING)."""
    from ..model.surrogate.data import usable

    mine = [t for t in data.finished if t.task_index in set(tasks) and usable(t)]
    per_task = [sum(t.task_index == i for t in mine) for i in tasks]
    searched = sum(t.source == SOURCE_SEARCH for t in mine)
    spread = (f"{per_task[0]} per task" if min(per_task) == max(per_task)
              else f"{min(per_task)} to {max(per_task)} per task")
    text = f"The indices rest on {len(mine)} measured runs ({spread})"
    if not searched:
        return note_html(text + ", none of them chosen by the search.")
    ref = SENSITIVITY_FROM_TUNING
    return note_html(
        text + f", {searched} of them chosen by the search, which gathers its runs near the best configurations. "
        "From a tuning history the indices are less accurate than from a space-filling design of as many runs: on "
        f"Ishigami (3 parameters), the largest error of a first-order index was {ref['tuning'][0]:.2f} / "
        f"{ref['tuning'][1]:.2f} at {ref['runs'][0]} / {ref['runs'][1]} runs of gptask's tuning against "
        f"{ref['lhs'][0]:.2f} / {ref['lhs'][1]:.2f} from a Latin hypercube (mean over {ref['seeds']} seeds, "
        "bench/sensitivity_from_tuning.py). Indices to rely on need a space-filling design (gt.tune with n_initial "
        "equal to the budget measures a Latin hypercube).", "missing")


def accuracy(data: ReportData, opts: ReportOptions) -> str:
    from ..transfer.crossval import leave_one_task_out, within_task_cv

    if not data.has_model:
        return note_html("No fitted model yet.", "missing")
    result = data.result
    out = note_html("Each measured value predicted by the model without it (hyperparameters kept, the model "
                    "re-conditioned without the held-out points). MAPE: mean absolute percentage error; "
                    "Spearman: rank correlation of predicted and measured values, mean over tasks; coverage: "
                    "fraction of measurements inside their central 95 % predictive interval (a calibrated model: "
                    "about 95 %); coverage_latent: inside the interval of the function alone, without the noise.")
    out += _fit_note(result.model) + _fits_note(data.fits)
    rows, shown = [], None
    try:
        cv = within_task_cv(result, folds=5)
        rows.append(cv.summary())
        shown = cv
    except ValueError as exc:
        out += note_html(f"Within-task 5-fold check not possible: {exc}", "missing")
    tuned = [i for i in range(len(result.tasks)) if result.records(i)]
    if len(tuned) >= 3:
        try:
            loto = leave_one_task_out(result, max_points=LOTO_POINTS)
            rows.append(loto.summary())
            shown = loto
        except ValueError as exc:
            out += note_html(f"Leave-one-task-out check not possible: {exc}", "missing")
    else:
        out += note_html(f"Leave-one-task-out (how well new tasks are predicted) needs 3 tasks with complete "
                         f"evaluations; this history has {len(tuned)}.", "missing")
    if rows:
        out += table_html([_in_percent(r) for r in rows])
    if shown is not None and shown.points:
        pts = shown.points
        out += figure_html(figures.heldout_scatter(np.array([p.measured for p in pts]),
                                                   np.array([p.predicted for p in pts]),
                                                   np.array([p.task_index for p in pts]), data.unit, shown.method),
                           f"Held-out predictions ({shown.method}) against the measured values; dashed: equal.",
                           "held-out accuracy")
        out += "<h3>Per task</h3>" + table_html(
            [{**_in_percent(r), "task values": task_label(data.tasks[r["task_index"]])} for r in shown.by_task()])
    return out


def _fit_note(model: Any) -> str:
    """One line on the fitted model (issue 45): its length scales, noise, the widening of its variances, the
    leave-one-out coverage of its 95 % intervals (with noise and latent alone), and any collapsed length scale."""
    try:
        diag = model.diagnostics()
    except (AttributeError, RuntimeError):
        return ""
    ls = ", ".join(f"{v:.3g}" for row in diag["lengthscales"] for v in row)
    noise = diag["noise"]
    pooled, by_task = diag["calibration_factor"], diag.get("calibration_factor_tasks") or [diag["calibration_factor"]]
    power = min(diag.get("calibration_power", 1.0), diag.get("calibration_power_latent", 1.0))
    levels = getattr(model, "levels", None)

    def who(k: int) -> str:  # a model of fidelity levels calibrates its target from the target's held-out runs
        if levels is not None and k in levels.targets:
            return "the tasks at the target fidelity,"
        return "a task"
    text = (f"Model fit: length scales {ls} (inputs scaled to [0, 1]); noise {100 * min(noise):.2g}-"
            f"{100 * max(noise):.2g} % of the output variance; "
            + (f"variances widened x{diag['variance_scale']:.3g} for the hyperparameters fitted; "
               if diag["variance_scale"] is not None else "")
            + f"leave-one-out coverage of the 95 % intervals {100 * diag['loo_coverage']:.1f} % "
            f"(latent alone {100 * diag['loo_coverage_latent']:.1f} %); intervals shown calibrated by 5-fold "
            f"cross-validation: variances x{pooled:.3g} (a new measurement)"
            + (f", x{diag['calibration_factor_latent']:.3g} (the latent function, at most the former)"
               if diag.get("calibration_factor_latent") is not None else "")
            + (" where the model knows nothing of a point, wider near its data (the factor times u^(p - 1) at a "
               f"variance u times the prior's, p = {power:.2g})" if power < 1.0 else "")
            + (f"; up to x{max(by_task):.3g} for {who(int(np.argmax(by_task)))} whose own held-out points need it"
               if max(by_task) > pooled else "")
            + (f"; down to x{min(by_task):.3g} for {who(int(np.argmin(by_task)))} whose own held-out points bear out "
               "narrower intervals" if min(by_task) < pooled else "") + ".")
    recorded = diag.get("recorded") or {}
    if recorded.get("collapse_refit"):
        text += " The fit was refitted away from a collapsed length scale."
    if recorded.get("at_floor"):
        text += " Held at the floor of their input's gap: " + "; ".join(recorded["at_floor"]) + "."
    if diag["collapsed"] and recorded.get("collapse_loo") and not recorded.get("collapse_refit"):
        loo = recorded["collapse_loo"]
        return note_html(text + " Collapsed: " + "; ".join(diag["collapsed"]) + "; kept, the floored fit predicting "
                         f"the held-out points no better (leave-one-out log density {loo[1]:.3g} against {loo[0]:.3g} "
                         "nats per point).")
    if diag["collapsed"]:
        return note_html(text + " Collapsed: " + "; ".join(diag["collapsed"]) + ".", "missing")
    return note_html(text)


def _fits_note(fits: list[dict]) -> str:
    """One line on the run's earlier fits (issue 45: a collapse in the first fits after the initial design steers
    the search even when the last fit is sound): which fits had a collapsed length scale, whether each was refitted
    with its floor, which ended with a length scale held at that floor, and which were kept collapsed because the
    floored fit did not predict held-out points clearly better. Empty when none had either."""
    collapsed = [k + 1 for k, f in enumerate(fits) if f.get("collapsed") or f.get("collapse_refit")]
    if not collapsed:
        return ""
    refitted = [k for k in collapsed if fits[k - 1].get("collapse_refit")]
    # kept collapsed after the leave-one-out check (collapse_loo): the held-out points supported the short length
    # scale better than the floored fit did; left collapsed otherwise (no refit, or it failed)
    supported = [k for k in collapsed if fits[k - 1].get("collapsed") and fits[k - 1].get("collapse_loo")]
    left = [k for k in collapsed if fits[k - 1].get("collapsed") and k not in supported]
    floor = [k + 1 for k, f in enumerate(fits) if f.get("at_floor")]
    text = (f"Fits of this run with a length scale shorter than the gap between its input's values (collapsed): "
            f"{_fit_numbers(collapsed)} of {len(fits)}")
    if refitted:
        text += f"; refitted with every length scale at least that gap: {_fit_numbers(refitted)}"
    if floor:
        text += f"; a length scale held at that floor (the data alone would make it shorter): {_fit_numbers(floor)}"
    if supported:
        text += (f"; kept collapsed, the floored fit predicting the held-out points (leave-one-out) no better: "
                 f"{_fit_numbers(supported)}")
    if left:
        return note_html(text + f"; left collapsed: {_fit_numbers(left)}.", "missing")
    return note_html(text + ".")


def _fit_numbers(ks: list[int]) -> str:
    return ("fit " if len(ks) == 1 else "fits ") + ", ".join(str(k) for k in ks)


def _in_percent(row: dict[str, Any]) -> dict[str, Any]:
    """``row`` with its fractions (mape, coverage, coverage_latent) in percent, as every accuracy table of the page
    shows them."""
    return {k: (f"{100 * v:.1f} %" if k in ("mape", "coverage", "coverage_latent") and v is not None else v)
            for k, v in row.items()}


def _target_fidelity(result: Any) -> dict[str, Any]:
    """The target fidelity of a run with fidelity levels ({name: value}; its levels are task dimensions of the
    history), {} otherwise."""
    levels = (result.fidelity or {}).get("levels")
    return dict(levels[0]) if levels else {}


def _default_axes(data: ReportData, dims: list[Any], rng: dict[str, Any]) -> dict[str, list[Any]]:
    from ..space.dimensions import Integer

    axes: dict[str, list[Any]] = {}
    space = data.result.problem.task_space
    target = _target_fidelity(data.result)
    for d in space.dimensions:
        if d.name in target:  # a fidelity dimension: the map is of the target
            axes[d.name] = [target[d.name]]
        elif d in dims:
            lo, hi = rng[d.name]
            vals = np.geomspace(lo, hi, MAP_POINTS) if getattr(d, "log", False) and lo > 0 else \
                np.linspace(lo, hi, MAP_POINTS)
            axes[d.name] = list(dict.fromkeys(int(round(v)) for v in vals)) if isinstance(d, Integer) else \
                [float(f"{v:.4g}") for v in vals]
        else:
            values = sorted((t[d.name] for t in data.tasks), key=str)
            axes[d.name] = [values[len(values) // 2]]
    return axes


def task_space_section(data: ReportData, opts: ReportOptions) -> str:
    from .grid import parse_grid
    from .selection import is_numeric, selection_table

    if not data.has_model:
        return note_html("No fitted model yet: the map needs run-free predictions.", "missing")
    result = data.result
    target = _target_fidelity(result)
    tuned = [i for i in range(len(result.tasks)) if result.model.n_points[i] > 0 and not result.is_low_fidelity(i)]
    if len(tuned) < 2:
        return note_html("Run-free prediction across the task space needs 2 tuned tasks; "
                         f"this history has {len(tuned)}.", "missing")
    space = result.problem.task_space
    rng = {d.name: (min(result.tasks[i][d.name] for i in tuned), max(result.tasks[i][d.name] for i in tuned))
           for d in space.dimensions if is_numeric(d) and d.name not in target}
    dims = [d for d in space.dimensions if d.name in rng and rng[d.name][0] < rng[d.name][1]][:2]
    if not dims and opts.grid is None:
        return note_html("The tuned tasks do not vary along a numeric task dimension: no map to draw.")
    axes = parse_grid(opts.grid, space, opts.max_grid_points) if opts.grid else _default_axes(data, dims, rng)
    if opts.grid:
        dims = [d for d in space.dimensions if len(axes[d.name]) > 1 and is_numeric(d)][:2]
    table = selection_table(result, axes)
    entries = table.entries
    pnames = result.problem.param_space.names
    asked = ""
    if opts.tasks:
        rows = []
        for t in opts.tasks:
            e = selection_table(result, {k: [v] for k, v in t.items()}).entries[0]
            rows.append({**e.task, **e.params, "value": e.value, "+- std": e.value_std, "95 % low": e.lower,
                         "95 % high": e.upper, "from": e.source, "note": e.note})
        asked = "<h3>The tasks asked about (--task)</h3>" + table_html(
            rows, data.unit, ("value", "+- std", "95 % low", "95 % high"),
            row_class=lambda r: "fallback" if r["from"] == "fallback" else "")
    out = note_html("Run-free predictions of the model (gt.predict_optimum) at every point of a grid of tasks; "
                    "tuned tasks show their recommendation by the rule above; points outside the tuned range "
                    "(" + "; ".join(f"{k} {v[0]}..{v[1]}" for k, v in table.tuned_range.items() if k in rng)
                    + ") are fallbacks: the nearest tuned task's recommendation, without a predicted value. "
                      "Value: the predicted median of one launch and its central 95 % interval; how far to "
                      "trust it: the held-out accuracy above (leave-one-task-out: new tasks)."
                    + ("" if opts.problem_given else " The problem's constraints and features are not stored in "
                       "a history: pass --problem to check them.")) + asked
    if len(dims) == 2 and len(entries) == len(axes[dims[0].name]) * len(axes[dims[1].name]):
        xs, ys = axes[dims[0].name], axes[dims[1].name]
        by = {(e.task[dims[0].name], e.task[dims[1].name]): e for e in entries}
        grid = [[by[(x, y)] for x in xs] for y in ys]
        value = np.array([[np.nan if e.value is None else e.value for e in row] for row in grid])
        params = {p: [e.params[p] for row in grid for e in row] for p in pnames}
        tuned_xy = [(result.tasks[i][dims[0].name], result.tasks[i][dims[1].name]) for i in tuned]
        out += figure_html(figures.task_map(dims[0].name, dims[1].name, xs, ys, value, params, data.unit, tuned_xy),
                           "The recommended configuration over two task dimensions (circles: tuned tasks; "
                           "blank cells: fallbacks, not predicted).", "map of the task space")
    elif len(dims) == 1 and len(entries) == len(axes[dims[0].name]):
        xs = axes[dims[0].name]
        inside = [e for e in entries if e.value is not None]
        if inside:
            xv = [e.task[dims[0].name] for e in inside]
            out += figure_html(figures.task_line(dims[0].name, xv, np.array([e.value for e in inside]),
                                                 np.array([e.lower for e in inside]),
                                                 np.array([e.upper for e in inside]),
                                                 {p: [e.params[p] for e in inside] for p in pnames}, data.unit),
                               "The recommended configuration along one task dimension.", "line over the task space")
    rows = [{**e.task, **e.params, "value": e.value, "+- std": e.value_std, "95 % low": e.lower,
             "95 % high": e.upper, "from": e.source, "note": e.note} for e in entries]
    out += "<h3>What to run at each grid point</h3>" + table_html(
        rows, data.unit, ("value", "+- std", "95 % low", "95 % high"),
        row_class=lambda r: "fallback" if r["from"] == "fallback" else "")
    return out


def provenance(data: ReportData, opts: ReportOptions) -> str:
    rec = data.provenance
    if rec is None:
        return note_html("Not recorded: this history holds no provenance record (machine, software, versions of "
                         "the runs). Histories written once provenance is recorded show it here.", "missing")
    if isinstance(rec, dict):
        rows = [{"item": k, "value": v if isinstance(v, (str, int, float)) or v is None else json.dumps(v)}
                for k, v in rec.items()]
        return table_html(rows)
    return f"<pre>{esc(json.dumps(rec, indent=1, default=str))}</pre>"


def failure_section(data: ReportData, opts: ReportOptions) -> str:
    from .failure_map import failure_map

    n_failed = sum(t.status is Status.FAILED for t in data.finished)
    if not n_failed:
        return note_html("No evaluation failed: there is no failure region to draw.")
    if data.result is None:
        return note_html("The history holds no task space: the failure model cannot be fitted.", "missing")
    if n_failed < FAILURE_MAP_MIN[0] or len(data.finished) < FAILURE_MAP_MIN[1]:
        return note_html(f"{n_failed} of {len(data.finished)} finished runs failed: too few to learn where runs "
                         f"fail (the map needs {FAILURE_MAP_MIN[0]} failed and {FAILURE_MAP_MIN[1]} finished runs); "
                         "their reasons are under Measured runs.", "missing")
    fmap = failure_map(data.result.problem, data.finished)
    if fmap is None:
        return note_html("The failure model could not be fitted on these runs.", "missing")
    from .failure_map import DECIDES_AT

    rows = [{"parameter": k, "evidence (log Bayes factor)": round(v, 1),
             "length scale (unit cube)": round(fmap.length_scales[k], 3)} for k, v in fmap.evidence.items()]
    table = ("<h3>How strongly the runs say each parameter decides a failure</h3>" + note_html(
        f"Evidence: how much worse the failure model explains the runs when it ignores the parameter (a drop of "
        f"the log evidence; {DECIDES_AT:g} or more, a Bayes factor of 20, counts). A length scale the runs do not "
        "inform stays at the prior's median (0.3): it says nothing by itself.") + table_html(rows))
    if not fmap.deciding:
        return note_html(
            f"{fmap.n_failed} of {fmap.n_finished} finished runs failed: not enough failures to tell which "
            "parameters decide them (ignoring any one parameter explains the runs about as well: random crashes "
            "look like this too). Their reasons are under Measured runs.") + table
    held = ", ".join(f"{k} = {format_param(v)}" for k, v in fmap.base.items() if k not in fmap.names)
    out = note_html(
        f"{fmap.n_failed} of {fmap.n_finished} finished runs failed. The failure model (a Gaussian-process "
        "classifier over configuration and task, the one that steers the search away from failures) gives the "
        "probability that a run succeeds; the runs show that " + " and ".join(fmap.deciding[:3])
        + (f" (and {len(fmap.deciding) - 3} more)" if len(fmap.deciding) > 3 else "")
        + " decide failures. Drawn over " + " and ".join(fmap.names) + f" for task {fmap.task_index} (the most "
        "failures)" + (f" with the other parameters at the task's best run ({held})" if held else "")
        + ". Crosses: the task's failed runs; dots: its complete runs.")
    out += figure_html(figures.failure_region(fmap), "Where runs fail: the learnt probability of success.",
                       "the learnt failure region")
    return out + table


@dataclass(frozen=True)
class Section:
    """anchor: the HTML id; title: the heading; build(data, options) -> the body HTML."""

    anchor: str
    title: str
    build: Callable[[ReportData, ReportOptions], str]


#: the report's sections in page order (module docstring)
SECTIONS: tuple[Section, ...] = (
    Section("campaign", "Campaign", summary),
    Section("recommended", "Recommended configurations and gains over the default", recommendations),
    Section("convergence", "Convergence per task", convergence),
    Section("runs", "Measured runs", runs),
    Section("failures", "Where runs fail", failure_section),
    Section("sensitivity", "Which parameters matter (sensitivity)", sensitivity_section),
    Section("accuracy", "Held-out accuracy of the model", accuracy),
    Section("task-space", "Best configuration across the task space", task_space_section),
    Section("provenance", "Provenance", provenance),
)
