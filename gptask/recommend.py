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

Confirmation runs are runs of the objective that are not trials of the run: each is committed
to the run's history file (``result.history_file``, :meth:`gptask.storage.Storage.add_confirmation`)
before the next starts, as a Trial record with source :data:`~gptask.trials.CONFIRM_SOURCE` in
``result.confirmations``. They claim no configuration, count against no budget (a resumed run
asks for exactly the trials it still lacks), and neither the model nor ``best`` sees them. They
are reused: a candidate that already has confirmation runs of this task in the file (from an
earlier call, another process, or a killed call) is only run up to ``k`` runs in all. A failed
confirmation run is kept with its reason, counts as one of the ``k`` runs (a configuration that
crashes is not retried on every call) and never raises.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from .evaluate import Evaluator, Outcome
from .noise import AGGREGATES, check_aggregate
from .storage import Storage, open_storage
from .trials import CONFIRM_SOURCE, Status, Trial, point_key
from .checks import check_int

if TYPE_CHECKING:  # pragma: no cover
    from .result import TuningResult

__all__ = ["DEFAULT_CANDIDATES", "DEFAULT_AGGREGATE", "Candidate", "Recommendation", "recommend",
           "ranked_candidates"]

log = logging.getLogger(__name__)

#: how many of the best configurations by posterior mean are re-measured with ``confirm=k``
DEFAULT_CANDIDATES = 3
#: how the confirmation runs of a candidate are summarised to compare candidates (a key of
#: gptask.noise.AGGREGATES). The minimum, as for repeats of run times: on 8 noisy synthetic
#: settings (bench/results_recommend.md) the lowest minimum of 3 runs picked a better configuration
#: than best(i) on average in 8 of 8, the lowest median in 3 of 8
DEFAULT_AGGREGATE = "min"
#: what a recommendation rests on (or "confirmed <aggregate>")
BASIS_POSTERIOR = "posterior mean"
BASIS_OBSERVED = "observed mean (no model)"


@dataclass(frozen=True)
class Candidate:
    """One evaluated configuration of the task, as ranked by the model.

    params: the configuration. predicted, predicted_std: posterior mean of the objective there and
    its standard deviation, user units (None without a model). observed: the values of its tuning
    evaluations. confirmations: the values of its complete confirmation runs, in run order.
    failures: the reasons of its failed confirmation runs.
    """

    params: dict[str, Any]
    predicted: float | None
    predicted_std: float | None
    observed: tuple[float, ...]
    confirmations: tuple[float, ...] = ()
    failures: tuple[str, ...] = ()

    @property
    def median(self) -> float | None:
        """Median of the confirmation runs (None without a complete one)."""
        return float(np.median(self.confirmations)) if self.confirmations else None

    @property
    def spread(self) -> tuple[float, float] | None:
        """(min, max) of the confirmation runs (None without a complete one)."""
        return (min(self.confirmations), max(self.confirmations)) if self.confirmations else None

    def confirmed_by(self, aggregate: str) -> float | None:
        """The confirmation runs summarised by ``aggregate`` (a key of gptask.noise.AGGREGATES;
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
    candidates' confirmation runs were compared (a key of :data:`gptask.noise.AGGREGATES`).
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


def ranked_candidates(result: "TuningResult", i: int) -> list[Candidate]:
    """Task ``i``'s distinct evaluated configurations (complete evaluations), best first by the
    model's posterior mean (by their mean observed value when the result has no model)."""
    ok = result.records(i)
    if not ok:
        raise ValueError(f"task {i} ({result.tasks[i]}) has no complete evaluation to recommend from")
    groups: dict[tuple, tuple[dict, list[float]]] = {}
    for r in ok:
        groups.setdefault(point_key(r["params"]), (dict(r["params"]), []))[1].append(float(r["value"]))
    params = [p for p, _ in groups.values()]
    observed = [tuple(v) for _, v in groups.values()]
    if result.model is None or result.transform is None:
        score = np.array([np.mean(v) for v in observed])
        order = np.argsort(score, kind="stable")
        return [Candidate(params[k], None, None, observed[k]) for k in order]
    z_mean, z_var = result.model.predict(i, result.problem.param_space.encode(params))
    z_std = np.sqrt(np.maximum(z_var, 0.0))
    predicted = result.transform.backward(i, z_mean)
    std = result.transform.backward_std(i, z_mean, z_std)
    order = np.argsort(z_mean, kind="stable")
    return [Candidate(params[k], float(predicted[k]), float(std[k]), observed[k]) for k in order]


def recommend(result: "TuningResult", i: int, confirm: int = 0, candidates: int | None = None,
              timeout: float | None = None, aggregate: str | None = None) -> Recommendation:
    """Task ``i``'s recommended configuration; see the module docstring and
    :meth:`gptask.TuningResult.recommend` (None: DEFAULT_CANDIDATES, DEFAULT_AGGREGATE)."""
    confirm = check_int("confirm", confirm, 0)
    n_cand = check_int("candidates", DEFAULT_CANDIDATES if candidates is None else candidates, 1)
    aggregate = check_aggregate(DEFAULT_AGGREGATE if aggregate is None else aggregate, "recommend")
    ranked = ranked_candidates(result, i)
    raw_params, raw_value = result.best(i)
    top = ranked[:n_cand]
    if point_key(raw_params) not in {point_key(c.params) for c in top}:  # the incumbent always competes
        top.append(next(c for c in ranked if point_key(c.params) == point_key(raw_params)))
    if confirm:
        _confirm(result, i, [c.params for c in top], confirm, timeout)
    runs = {point_key(c.params): [r for r in result.confirmations
                                  if r["task_index"] == i and point_key(r["params"]) == point_key(c.params)]
            for c in top}
    done = []
    for c in top:
        mine = runs[point_key(c.params)]
        done.append(Candidate(c.params, c.predicted, c.predicted_std, c.observed,
                              tuple(float(r["value"]) for r in mine if r["status"] == Status.COMPLETE),
                              tuple(str(r["reason"]) for r in mine if r["status"] != Status.COMPLETE)))
    pick, basis = done[0], BASIS_POSTERIOR if done[0].predicted is not None else BASIS_OBSERVED
    if confirm:
        measured = [c for c in done if c.confirmations]
        if measured:
            pick, basis = min(measured, key=lambda c: c.confirmed_by(aggregate)), f"confirmed {aggregate}"
        else:
            log.warning("task %d: every confirmation run failed (%s); recommending by %s", i,
                        "; ".join(sorted({f for c in done for f in c.failures})), basis)
    return Recommendation(i, dict(result.tasks[i]), dict(pick.params), pick.predicted, pick.predicted_std,
                          basis, raw_params, raw_value, tuple(done), confirm, aggregate)


def _confirm(result: "TuningResult", i: int, configs: list[dict], k: int, timeout: float | None) -> None:
    """Bring each of ``configs`` (task ``i``) to ``k`` confirmation runs, round robin, each committed
    to the result's history file (when it has one) before the next starts; ``result.confirmations``
    is then what the file holds (every task), or what this process measured without a file."""
    storage = None if result.history_file is None else open_storage(result.history_file,
                                                                    result.problem.signature())
    try:
        if storage is not None:  # the file is the source of truth: another call may have added runs
            result.confirmations[:] = storage.confirmations()
        done = {point_key(p): sum(1 for r in result.confirmations
                                  if r["task_index"] == i and point_key(r["params"]) == point_key(p))
                for p in configs}
        evaluator = Evaluator(result.problem.objective, timeout=timeout)
        task = dict(result.tasks[i])
        for round_ in range(k):
            for params in configs:
                if done[point_key(params)] > round_:
                    continue
                result.confirmations.append(_confirmation_run(storage, i, task, params, evaluator,
                                                              len(result.confirmations) + 1))
                done[point_key(params)] += 1
    finally:
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
        log.info("task %d: confirmation run of %s failed: %s", i, params, reason)
    if storage is not None:
        return storage.add_confirmation(i, params, status, value, outcome.samples, reason, outcome.duration)
    return Trial(id=next_id, task_index=i, task=task, params=params, status=status, value=value,
                 samples=outcome.samples, reason=reason, source=CONFIRM_SOURCE, duration=outcome.duration)
