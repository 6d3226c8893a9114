"""Noise-robust recommendations: a task's configuration chosen by the model, optionally confirmed.

``TuningResult.best(i)`` is task i's single best launch. With a noisy objective that is the
luckiest draw, and re-measured it is typically slower (on the real PDGEQRF 1.37-1.54x). Here
task i's *evaluated* configurations are ranked by the model's posterior mean instead: the
noise-free latent function, which pools every evaluation of every task, in user units through
the stored output transform (the predictive median under the log transform). With ``confirm=k``
the ``candidates`` best of that ranking, and the raw best's configuration if it is not among
them (the incumbent always competes), are re-measured ``k`` times each, round robin (candidate 1,
2, 3, 1, 2, 3, ...), so that a slow phase of the machine hits every candidate alike, and the
candidate whose confirmation runs have the lowest minimum (``aggregate``, as for repeats of run
times: a machine only ever slows a launch down, so the fastest of a few launches is the least
noisy estimate of what a configuration can do; "median" is the choice for noise both ways) is
recommended. Every candidate's runs are reported (median, min/max, IQR, failures).

**One rule, wherever a recommendation is shown.** :func:`recommend` is the only place that picks:
``result.recommend(i, confirm=k)`` in the API and the apps' tables (the main job), ``gptask show``
(which passes ``confirm=0`` and so reads the confirmation runs the history holds), the model file
(``recommended``) and reports. The rule: when some candidate of the task has complete confirmation
runs (made now or by an earlier call, another process, the main job), the lowest ``aggregate`` of
those runs wins; otherwise the lowest posterior mean (the lowest mean observed value without a
model). Every configuration with confirmation runs of the task is a candidate, so a call with
``confirm=0`` sees exactly what the confirming call saw.

**The default, like for like.** When the problem has a default configuration (``Problem(default=)``,
measured first while tuning) it is a candidate too, and with ``confirm=k`` it is re-launched ``k``
times round robin with the others, so its runs share the machine's state with theirs. The gain
(:attr:`Recommendation.gain`, ``(default - pick) / default``) compares the pick's and the default's
confirmation runs by the same ``aggregate`` when both have some, otherwise both values as measured
while tuning (:attr:`Recommendation.gain_basis` says which). When the default itself wins,
:attr:`Recommendation.is_default` is True, the gain is 0 and the tables say "default".

**Several outputs** (:mod:`gptask.problem.objectives`). A configuration is a candidate only when every
complete evaluation of it meets every output limit, and a confirmed pick only when its
confirmation runs meet them too: a recommendation is never outside a limit. The limits of a
``{"limit": ...}`` rule bind the same way, with one objective too (ValueError naming them and
what was measured when no configuration meets them). With one objective
the ranking above is unchanged (the primary objective's posterior mean; a maximised objective is
ranked from the largest). With several, the candidates are the task's Pareto front
(:func:`gptask.results.fronts.task_front`), ranked by the user's rule (``rule=``, a
:class:`gptask.results.fronts.PickRule`: weights, a reference point, or a limit; equal weights by
default) applied to each candidate's outputs: the models' posterior means in user units, or the
observed means without models; confirmed candidates are compared by the rule applied to their
confirmation runs (each output by ``aggregate``). The gain compares the primary objective.

Confirmation runs are runs of the objective that are not trials of the run: each is committed
to the run's history file (``result.history_file``, :meth:`gptask.data.storage.Storage.add_confirmation`)
before the next starts, as a Trial record with source :data:`~gptask.data.trials.CONFIRM_SOURCE` in
``result.confirmations``. They claim no configuration, count against no budget (a resumed run
asks for exactly the trials it still lacks), and neither the model nor ``best`` sees them. They
are reused: a candidate that already has confirmation runs of this task in the file (from an
earlier call, another process, or a killed call) is only run up to ``k`` runs in all. A failed
confirmation run is kept with its reason, counts as one of the ``k`` runs (a configuration that
crashes is not retried on every call) and never raises.

Over 500 lines on purpose: a pick rule's parsing, the ranking of candidates under limits and the
confirmation runs are one recommendation, used by the result, the commands and the report alike.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from .baseline import gain as relative_gain
from ..evaluation.evaluate import Evaluator, Outcome
from .fronts import PickRule, meets_limits, task_front
from ..core.labels import format_gain, format_param, format_value, task_label
from ..evaluation.noise import AGGREGATES, check_aggregate
from ..problem.objectives import Limit
from ..data.storage import Storage, open_storage
from ..data.trials import CONFIRM_SOURCE, Status, Trial, point_key
from ..core.checks import check_int
from ..core.progress import Progress
from .table import Table

__all__ = ["DEFAULT_CANDIDATES", "DEFAULT_AGGREGATE", "Candidate", "Recommendation", "recommend", "nothing_to_recommend",
           "ranked_candidates", "ResultView", "GAIN_CONFIRMED", "GAIN_TUNING", "recommendation_row", "recommendation_table",
           "RULE", "COLUMNS_NOTE", "VALUE_COLUMNS", "default_params"]

log = logging.getLogger(__name__)


class ResultView(Protocol):
    """What a recommendation reads of a tuning result (:class:`gptask.results.result.TuningResult`,
    whose ``recommend`` method calls :func:`recommend`; a protocol here, so that the result imports
    this module and not the other way round)."""

    problem: Any
    tasks: list[dict]
    model: Any
    transform: Any
    outputs: dict | None
    confirmations: list[Trial]
    history_file: str | Path | None

    def records(self, i: int, status: Status | str | None = ...) -> Sequence[Any]: ...

    def best(self, i: int) -> tuple[dict, float]: ...

#: how many of the best configurations by posterior mean are re-measured with ``confirm=k``
DEFAULT_CANDIDATES = 3
#: how the confirmation runs of a candidate are summarised to compare candidates (a key of
#: gptask.evaluation.noise.AGGREGATES). The minimum, as for repeats of run times: on 8 noisy synthetic
#: settings (bench/results_recommend.md) the lowest minimum of 3 runs picked a better configuration
#: than best(i) on average in 8 of 8, the lowest median in 3 of 8
DEFAULT_AGGREGATE = "min"
#: what a recommendation rests on (or "confirmed <aggregate>")
BASIS_POSTERIOR = "posterior mean"
BASIS_OBSERVED = "observed mean (no model)"
#: what a gain compares (Recommendation.gain_basis)
GAIN_CONFIRMED = "confirmation runs"
GAIN_TUNING = "as measured while tuning"


@dataclass(frozen=True)
class Candidate:
    """One evaluated configuration of the task, as ranked by the model.

    params: the configuration. predicted, predicted_std: posterior mean of the objective there and
    its standard deviation, user units (None without a model). observed: the values of its tuning
    evaluations. confirmations: the values of its complete confirmation runs, in run order.
    failures: the reasons of its failed confirmation runs. outputs: for a problem with named
    outputs, every output's posterior mean there (observed mean without models), user units;
    confirmed_outputs: the outputs of its complete confirmation runs, in run order.
    """

    params: dict[str, Any]
    predicted: float | None
    predicted_std: float | None
    observed: tuple[float, ...]
    confirmations: tuple[float, ...] = ()
    failures: tuple[str, ...] = ()
    outputs: dict[str, float] = field(default_factory=dict)
    confirmed_outputs: tuple[dict[str, float], ...] = ()

    @property
    def median(self) -> float | None:
        """Median of the confirmation runs (None without a complete one)."""
        return float(np.median(self.confirmations)) if self.confirmations else None

    @property
    def spread(self) -> tuple[float, float] | None:
        """(min, max) of the confirmation runs (None without a complete one)."""
        return (min(self.confirmations), max(self.confirmations)) if self.confirmations else None

    def confirmed_by(self, aggregate: str) -> float | None:
        """The confirmation runs summarised by ``aggregate`` (a key of gptask.evaluation.noise.AGGREGATES;
        None without a complete run)."""
        how = AGGREGATES[check_aggregate(aggregate, "Candidate.confirmed_by")]
        return how(np.asarray(self.confirmations)) if self.confirmations else None

    @property
    def iqr(self) -> float | None:
        """Inter-quartile range of the confirmation runs (None without a complete one)."""
        if not self.confirmations:
            return None
        q25, q75 = np.quantile(self.confirmations, [0.25, 0.75])
        return float(q75 - q25)


@dataclass(frozen=True)
class Recommendation:
    """The configuration recommended for task ``task_index``.

    params: the pick; predicted, predicted_std: the model's posterior mean there and its std (user
    units; None without a model). basis: what the pick rests on ("posterior mean", "confirmed
    min" (or another aggregate), "observed mean (no model)"). raw_best_params, raw_best_value:
    ``best(i)``, the single best launch, for comparison. candidates: the best configurations by
    posterior mean, then the raw best if it is not among them (the pick is one of these), with
    their confirmation runs. confirm: the confirmation runs asked per candidate. aggregate: how the
    candidates' confirmation runs were compared (a key of :data:`gptask.evaluation.noise.AGGREGATES`).
    default: the problem's default configuration as a candidate (its tuning values and confirmation
    runs; None when the problem has none or it was not measured completely on this task); unit: the
    objective's unit. :attr:`gain`, :attr:`gain_basis`, :attr:`is_default` compare the two.
    sign: -1 when the primary objective is maximised (the gain then counts an increase); rule: the
    pick rule on the front of several objectives ("" otherwise).
    """

    task_index: int
    task: dict[str, Any]
    params: dict[str, Any]
    predicted: float | None
    predicted_std: float | None
    basis: str
    raw_best_params: dict[str, Any]
    raw_best_value: float
    candidates: tuple[Candidate, ...]
    confirm: int = 0
    aggregate: str = DEFAULT_AGGREGATE
    default: Candidate | None = None
    unit: str = ""
    sign: float = 1.0
    rule: str = ""

    @property
    def is_default(self) -> bool:
        """Whether the recommended configuration is the problem's default."""
        return self.default is not None and point_key(self.default.params) == point_key(self.params)

    @property
    def gain_basis(self) -> str:
        """What :attr:`gain` compares: :data:`GAIN_CONFIRMED` (the confirmation runs of both, by
        ``aggregate``), :data:`GAIN_TUNING` (both as measured while tuning), or "" (no gain)."""
        return self._gain()[1]

    @property
    def gain(self) -> float | None:
        """``(default - pick) / default``, like for like (:attr:`gain_basis`); 0 when the default
        is recommended, None without a measured default (or a default value <= 0)."""
        return self._gain()[0]

    @property
    def default_value(self) -> float | None:
        """The default's value that :attr:`gain` compares with (None without one)."""
        return self._gain()[2]

    @property
    def value(self) -> float | None:
        """The pick's value that :attr:`gain` compares (its confirmation runs by ``aggregate``, or
        its value while tuning), None when neither exists."""
        return self._gain()[3]

    def _gain(self) -> tuple[float | None, str, float | None, float | None]:
        how = AGGREGATES[self.aggregate]
        pick, dflt = self.pick, self.default
        if pick.confirmations and (dflt is None or dflt.confirmations):
            mine = pick.confirmed_by(self.aggregate)
            if dflt is None:
                return None, "", None, mine
            ref = dflt.confirmed_by(self.aggregate)
            return (0.0 if self.is_default else self._relative(ref, mine)), GAIN_CONFIRMED, ref, mine
        mine = how(np.asarray(pick.observed)) if pick.observed else None
        if dflt is None or not dflt.observed:
            return None, "", None, mine
        ref = how(np.asarray(dflt.observed))
        return (0.0 if self.is_default else self._relative(ref, mine)), GAIN_TUNING, ref, mine

    def _relative(self, ref: float | None, mine: float | None) -> float | None:
        g = relative_gain(ref, mine)
        return None if g is None else self.sign * g

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready summary (model files, the apps' output files): params, is_default, basis,
        value (what the gain compares), predicted, predicted_std, confirmation runs of the pick,
        default params and value, gain, gain_basis, unit, raw best."""
        pick = self.pick
        more = {"outputs": dict(pick.outputs), "rule": self.rule} if pick.outputs else {}
        return {**more, "task": dict(self.task), "params": dict(self.params), "is_default": self.is_default,
                "basis": self.basis, "value": self.value, "predicted": self.predicted,
                "predicted_std": self.predicted_std, "confirmations": list(pick.confirmations),
                "confirmation_failures": list(pick.failures),
                "default": None if self.default is None else {"params": dict(self.default.params),
                                                              "value": self.default_value},
                "gain": self.gain, "gain_basis": self.gain_basis, "unit": self.unit,
                "raw_best": {"params": dict(self.raw_best_params), "value": self.raw_best_value}}

    def describe(self) -> str:
        """One line for people: the pick (or "the default"; real values to 3 significant digits), its
        value with the unit, the gain."""
        what = "the default configuration" if self.is_default else ",".join(f"{k}={format_param(v)}" for k, v in self.params.items())
        g = "" if self.gain is None else f", gain over the default {format_gain(self.gain)} ({self.gain_basis})"
        return f"{what}: {format_value(self.value, self.unit)} ({self.basis}){g}"

    @property
    def pick(self) -> Candidate:
        """The candidate recommended (its confirmation runs, predicted and observed values)."""
        key = point_key(self.params)
        return next(c for c in self.candidates if point_key(c.params) == key)

    @property
    def median(self) -> float | None:
        """Median of the pick's confirmation runs (None without a complete one)."""
        return self.pick.median

    @property
    def confirmed(self) -> float | None:
        """The pick's confirmation runs summarised by ``aggregate`` (None without a complete one)."""
        return self.pick.confirmed_by(self.aggregate)


def nothing_to_recommend(result: ResultView, i: int) -> str | None:
    """Why task ``i`` of ``result`` has no recommendation ("no complete evaluation", or none of its
    configurations meets every limit of a problem with named outputs, or it is a cheaper fidelity
    level or an auxiliary task: docs/fidelity.md), or None when it has one."""
    low = getattr(result, "is_low_fidelity", None)
    if low is not None and low(i):
        return "a cheaper fidelity level or an auxiliary task (results speak of the target fidelity)"
    ok = result.records(i)
    if not ok:
        return "no complete evaluation"
    spec = result.problem.outputs
    if spec is not None and spec.limits:
        groups: dict[tuple, list] = {}
        for r in ok:
            groups.setdefault(point_key(r["params"]), []).append(r)
        if not any(meets_limits(g, spec) for g in groups.values()):
            return f"no complete evaluation meets the limits {', '.join(map(str, spec.limits))}"
    return None


def ranked_candidates(result: ResultView, i: int, rule: Any = None) -> list[Candidate]:
    """Task ``i``'s distinct evaluated configurations (complete evaluations), best first by the
    model's posterior mean (by their mean observed value when the result has no model). With named
    outputs, only configurations meeting every limit, and with several objectives only the task's
    front, ranked by ``rule`` (module docstring)."""
    spec = result.problem.outputs
    ok = result.records(i)
    if not ok:
        raise ValueError(f"task {i} ({result.tasks[i]}) has no complete evaluation to recommend from")
    groups: dict[tuple, tuple[dict, list]] = {}
    for r in ok:
        groups.setdefault(point_key(r["params"]), (dict(r["params"]), []))[1].append(r)
    if spec is not None:
        groups = {k: g for k, g in groups.items() if meets_limits(g[1], spec)}
        if not groups:
            raise ValueError(f"task {i} ({result.tasks[i]}) has no complete evaluation that meets the limits "
                             f"{', '.join(map(str, spec.limits))}: there is nothing to recommend")
    pick_rule = PickRule.parse(rule, spec)
    if pick_rule.kind == "limit":  # the rule's limits bind as the problem's do: on every complete evaluation
        limits: tuple[Limit, ...] = pick_rule.what
        groups = {k: g for k, g in groups.items() if all(lim.met(float(r["values"][lim.output]))
                                                         for r in g[1] for lim in limits)}
        if not groups:
            raise ValueError(f"task {i} ({result.tasks[i]}) has no complete evaluation that meets the pick rule's "
                             f"limits {', '.join(map(str, limits))}: there is nothing to recommend "
                             f"({_observed_range(ok, limits)})")
    if spec is not None and len(spec.objectives) > 1:
        front = {point_key(p.params) for p in task_front([r for _, rs in groups.values() for r in rs], spec)}
        groups = {k: g for k, g in groups.items() if k in front}
    params = [p for p, _ in groups.values()]
    observed = [tuple(float(r["value"]) for r in rs) for _, rs in groups.values()]
    sign = 1.0 if spec is None else spec.sign(spec.primary)
    outputs = [_outputs(result, i, p, rs) for p, rs in groups.values()] if spec is not None else [{}] * len(params)
    if result.model is None or result.transform is None:
        score = np.array([sign * np.mean(v) for v in observed])
        cands = [Candidate(params[k], None, None, observed[k], outputs=outputs[k]) for k in range(len(params))]
    else:
        z_mean, z_var = result.model.predict_calibrated(i, result.problem.param_space.encode(params))
        z_std = np.sqrt(np.maximum(z_var, 0.0))
        predicted = sign * result.transform.backward(i, z_mean)
        std = result.transform.backward_std(i, z_mean, z_std)
        score = z_mean
        cands = [Candidate(params[k], float(predicted[k]), float(std[k]), observed[k], outputs=outputs[k])
                 for k in range(len(params))]
    if spec is not None and len(spec.objectives) > 1:
        score = pick_rule.scores([c.outputs for c in cands], [c.outputs for c in cands], spec)
    order = np.argsort(score, kind="stable")
    return [cands[k] for k in order]


def _observed_range(records: Sequence[Any], limits: Sequence[Limit]) -> str:
    """What ``records`` (complete evaluations) measured of each limited output: "memory from 2.5e+08 to 4e+08"."""
    parts = []
    for name in dict.fromkeys(lim.output for lim in limits):
        v = [float(r["values"][name]) for r in records]
        parts.append(f"measured {name} from {min(v):g} to {max(v):g}")
    return "; ".join(parts)


def _outputs(result: ResultView, i: int, params: dict, records: list) -> dict[str, float]:
    """Every output of ``params`` on task ``i``, user units: the posterior mean of its model when the
    result has one, else the mean of the observed values."""
    spec = result.problem.outputs
    assert spec is not None
    out = {}
    for name in spec.names:
        fitted = result.outputs.get(name)
        if fitted is not None and fitted[0] is not None:
            model, transform = fitted
            z, _ = model.predict(i, result.problem.param_space.encode([params]))
            out[name] = float(spec.sign(name) * transform.backward(i, z)[0])
        else:
            out[name] = float(np.mean([r["values"][name] for r in records]))
    return out


def default_params(result: ResultView, i: int) -> dict[str, Any] | None:
    """Task ``i``'s default configuration (``result.problem.default_for``), None when the problem
    has none or it is not usable for this task."""
    try:
        return result.problem.default_for(result.tasks[i])
    except (ValueError, TypeError):
        return None


def recommend(result: ResultView, i: int, confirm: int = 0, candidates: int | None = None,
              timeout: float | None = None, aggregate: str | None = None, progress: bool = True,
              rule: Any = None) -> Recommendation:
    """Task ``i``'s recommended configuration; see the module docstring and
    :meth:`gptask.TuningResult.recommend` (None: DEFAULT_CANDIDATES, DEFAULT_AGGREGATE).
    rule: how to pick on the front of several objectives (:class:`gptask.results.fronts.PickRule`)."""
    confirm = check_int("confirm", confirm, 0)
    n_cand = check_int("candidates", DEFAULT_CANDIDATES if candidates is None else candidates, 1)
    aggregate = check_aggregate(DEFAULT_AGGREGATE if aggregate is None else aggregate, "recommend")
    spec = result.problem.outputs
    pick_rule = PickRule.parse(rule, spec)
    ranked = ranked_candidates(result, i, pick_rule)
    by_key = {point_key(c.params): c for c in ranked}
    raw_params, raw_value = result.best(i)
    top = ranked[:n_cand]
    default = default_params(result, i)
    # the incumbent always competes, the default is re-launched beside the others, and every
    # configuration already confirmed stays a candidate (so that confirm=0 sees what confirm=k saw)
    extra = [raw_params] + ([default] if default is not None else []) + [
        r["params"] for r in result.confirmations if r["task_index"] == i]
    for params in extra:
        key = point_key(params)
        if key in by_key and key not in {point_key(c.params) for c in top}:
            top.append(by_key[key])
    if confirm:
        _confirm(result, i, [c.params for c in top], confirm, timeout, progress, default)
    runs = {point_key(c.params): [r for r in result.confirmations
                                  if r["task_index"] == i and point_key(r["params"]) == point_key(c.params)]
            for c in top}
    done = []
    for c in top:
        mine = runs[point_key(c.params)]
        complete = [r for r in mine if r["status"] == Status.COMPLETE]
        done.append(Candidate(c.params, c.predicted, c.predicted_std, c.observed,
                              tuple(float(r["value"]) for r in complete),
                              tuple(str(r["reason"]) for r in mine if r["status"] != Status.COMPLETE),
                              c.outputs, tuple(dict(r["values"]) for r in complete)))
    pick, basis = done[0], BASIS_POSTERIOR if done[0].predicted is not None else BASIS_OBSERVED
    measured = [c for c in done if c.confirmations]
    if spec is not None:  # a confirmed pick meets the limits (the rule's too) in its confirmation runs
        rule_limits: tuple[Limit, ...] = pick_rule.what if pick_rule.kind == "limit" else ()
        measured = [c for c in measured if all(spec.meets_limits(v) and all(lim.met(float(v[lim.output]))
                                                                            for lim in rule_limits)
                                               for v in c.confirmed_outputs)]
    if measured and spec is not None and len(spec.objectives) > 1:
        how = AGGREGATES[aggregate]
        confirmed = [{n: float(how(np.asarray([v[n] for v in c.confirmed_outputs]))) for n in spec.names}
                     for c in measured]
        scores = pick_rule.scores(confirmed, [c.outputs for c in ranked], spec)
        pick, basis = measured[int(np.argmin(scores))], f"confirmed {aggregate}"
    elif measured:
        sign = 1.0 if spec is None else spec.sign(spec.primary)
        pick, basis = min(measured, key=lambda c: sign * c.confirmed_by(aggregate)), f"confirmed {aggregate}"
    elif confirm:
        log.warning("task %d: every confirmation run failed (%s); recommending by %s", i,
                    "; ".join(sorted({f for c in done for f in c.failures})), basis)
    dflt = None if default is None else next((c for c in done if point_key(c.params) == point_key(default)), None)
    several = spec is not None and len(spec.objectives) > 1
    return Recommendation(i, dict(result.tasks[i]), dict(pick.params), pick.predicted, pick.predicted_std,
                          basis, raw_params, raw_value, tuple(done), confirm, aggregate, dflt,
                          getattr(result.problem, "unit", ""),
                          1.0 if spec is None else spec.sign(spec.primary),
                          pick_rule.describe() if several else "")


def _confirm(result: ResultView, i: int, configs: list[dict], k: int, timeout: float | None,
             progress: bool = True, default: dict | None = None) -> None:
    """Bring each of ``configs`` (task ``i``) to ``k`` confirmation runs, round robin, each committed
    to the result's history file (when it has one) before the next starts; ``result.confirmations``
    is then what the file holds (every task), or what this process measured without a file.
    progress: a bar on a terminal, else a log line per run (``gptask.core.progress``), naming the task,
    the configuration (``default`` is called so) and the value."""
    storage = None if result.history_file is None else open_storage(result.history_file,
                                                                    result.problem.signature())
    reporter = None
    try:
        if storage is not None:  # the file is the source of truth: another call may have added runs
            result.confirmations[:] = storage.confirmations()
        done = {point_key(p): sum(1 for r in result.confirmations
                                  if r["task_index"] == i and point_key(r["params"]) == point_key(p))
                for p in configs}
        todo = sum(max(0, k - n) for n in done.values())
        if not todo:
            return
        reporter = Progress(progress, todo, 0, desc=f"confirm task {i}")
        evaluator = Evaluator(result.problem.objective, timeout=timeout, outputs=result.problem.outputs)
        task = dict(result.tasks[i])
        unit = getattr(result.problem, "unit", "")
        count = 0
        for round_ in range(k):
            for params in configs:
                if done[point_key(params)] > round_:
                    continue
                run = _confirmation_run(storage, i, task, params, evaluator, len(result.confirmations) + 1)
                result.confirmations.append(run)
                done[point_key(params)] += 1
                count += 1
                what = "the default" if default is not None and point_key(params) == point_key(default) else \
                    task_label(params)
                shown = format_value(run.value, unit) if run.status is Status.COMPLETE else f"failed: {run.reason}"
                reporter.step(f"task {i} ({task_label(task)}): confirmation run {count}/{todo}, {what}: {shown}")
    finally:
        if reporter is not None:
            reporter.close()
        if storage is not None:
            storage.close()


def _confirmation_run(storage: Storage | None, i: int, task: dict, params: dict, evaluator: Evaluator,
                      next_id: int) -> Trial:
    """Run the objective once at ``params`` and return the run as a Trial record, committed to
    ``storage`` first when there is one (else numbered ``next_id``)."""
    try:
        outcome: Outcome = evaluator(task, params)
    except Exception as exc:  # noqa: BLE001 - a confirmation run that cannot be made is data, not a crash
        outcome = Outcome(None, (), Status.FAILED, f"{type(exc).__name__}: {exc}")
    status, value, reason = Status.COMPLETE, outcome.value, ""
    if outcome.status is not Status.COMPLETE:  # failed (or censored: not a full measurement)
        status, value = Status.FAILED, None
        reason = outcome.reason if outcome.status is Status.FAILED else f"{outcome.status.value}: {outcome.reason}"
    values = outcome.values if status is Status.COMPLETE else {}
    if storage is not None:
        return storage.add_confirmation(i, params, status, value, outcome.samples, reason, outcome.duration,
                                        values=values)
    return Trial(id=next_id, task_index=i, task=task, params=params, status=status, value=value,
                 samples=outcome.samples, reason=reason, source=CONFIRM_SOURCE, duration=outcome.duration,
                 values=values)


#: what the recommendation tables say about the rule (module docstring)
RULE = ("per task, the configuration whose confirmation runs have the lowest {aggregate} when it has confirmed "
        "ones, else the evaluated configuration with the lowest posterior mean of the model")
#: what the value and gain columns of those tables mean
COLUMNS_NOTE = ("value: the pick's {aggregate} over its confirmation runs (runs, median, max), else its value as "
                "measured while tuning; default: the default configuration's value taken the same way (re-launched "
                "with the confirmation runs); gain: (default - value) / default; predicted +- std: the model's "
                "posterior mean there")
#: columns of a recommendation row that hold objective values (shown with the unit)
VALUE_COLUMNS = ("value", "median", "max", "predicted", "+-", "raw best", "default")


def recommendation_row(rec: Recommendation) -> dict[str, Any]:
    """One row of a recommendation table (``gptask show``, the apps' tables): the task index and
    values, the pick's parameters, its other outputs (named outputs: by its confirmation runs'
    ``aggregate``, else the models' posterior means), whether it is the default, what it rests on, the value the gain
    compares, its confirmation runs (count, median, max), the model's prediction, the raw best
    launch, the default's value and the gain (a fraction; tables print it in percent)."""
    pick = rec.pick
    spread = pick.spread
    outputs = {}
    if pick.outputs:  # named outputs: every output but the primary one (its value is "value")
        how = AGGREGATES[rec.aggregate]
        runs = pick.confirmed_outputs
        outputs = {n: (float(how(np.asarray([r[n] for r in runs]))) if runs else v)
                   for k, (n, v) in enumerate(pick.outputs.items()) if k > 0}
    return {"task": rec.task_index, **rec.task, **rec.params, **outputs,
            "pick": "default" if rec.is_default else "tuned",
            "basis": rec.basis, "value": rec.value, "runs": len(pick.confirmations) or None,
            "median": pick.median, "max": None if spread is None else spread[1], "predicted": rec.predicted,
            "+-": rec.predicted_std, "raw best": rec.raw_best_value, "default": rec.default_value, "gain": rec.gain}


def recommendation_table(result: ResultView, confirm: int = 0, timeout: float | None = None,
                         progress: bool = True) -> Table:
    """:func:`recommendation_row` of every task with something to recommend (:func:`nothing_to_recommend`; ``result.recommend(i,
    confirm=confirm)``), as a :class:`~gptask.results.table.Table` with the problem's unit."""
    rows = [recommendation_row(recommend(result, i, confirm=confirm, timeout=timeout, progress=progress))
            for i in range(len(result.tasks)) if nothing_to_recommend(result, i) is None]
    return Table(rows, getattr(result.problem, "unit", ""), VALUE_COLUMNS)
