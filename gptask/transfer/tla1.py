"""TLA1: predict a good configuration for a task without running anything (:func:`predict_optimum`).

GPTune paper (shared/seeds/004) sec. 5, with the choices below made explicit. From the best
configuration found for each tuned task, :class:`~gptask.transfer.model.OptimaModel` predicts the
encoded optimum of the new task, one GP per encoded column. The raw prediction is clipped to the
unit cube and snapped with ``Space.snap``: integers are rounded; a categorical has one GP per
choice (each on its 0/1 indicator) and the choice with the largest predicted indicator wins. If
the snapped point violates a constraint it is *projected* (:func:`project`): the nearest feasible
point in the encoded cube (Euclidean distance to the raw prediction) among candidates drawn around
it (normal draws of spread 0.01 .. 1, uniform draws, the tuned tasks' best configurations), then
refined by bisection on the segment from that point towards the raw prediction.

For a new task of a problem that describes its points (``Problem(features=..., cost_model=...)``),
new tasks are predicted by the joint model (:mod:`gptask.transfer.joint`), and the configuration
returned is the one of least predicted value (median) among the TLA1 configuration above and the
feasible ones of ``JOINT_SEARCH_DRAWS`` Latin hypercube draws (``Prediction.route == "joint"``):
one GP per parameter cannot see how the parameters act together. On the measured 16-core PDGEQRF
timings, each size left out in turn and the configurations valued by the joint GP fitted on all
sizes, TLA1's configuration was 1.37x the size's best on average, worse than the hand default
(1.26x), and the joint model's pick 1.20x (``bench/run_free.py pick``). Launched 10 times each on
another node of the same kind for 6 sizes the shipped model never saw, both were about 4 % faster
than the hand default (medians 0.963 and 0.960 of its median; ``bench/run_free.py device``): real
launches do not separate them.

For a new task whose category no tuned task has (a machine or GPU never measured, as a
categorical task dimension) and no joint model, the model cannot tell the new category from the
seen ones, and a blend of their optima parameter by parameter can land where none of them is good.
The configuration returned is then the one of least mean log predicted value over the task with
each seen category in place of the new one, among the task's listed configurations or the Latin
hypercube draws above (``Prediction.route == "consensus"``, :func:`_consensus_pick`): the
configuration that is good on every machine seen, relative to each one's own best. Where
``measured`` trials (the sources' measurements, :mod:`gptask.sources.multisource`) hold a candidate's value on
a seen machine, that value stands in for the model's prediction.

``Prediction.std`` is the GP predictive std of each parameter *in encoded units* (fractions of the
unit interval the parameter is mapped to; log scale for log dimensions), including the GP's noise
term, i.e. the scatter of the tuned tasks' best points around the smooth trend. For a categorical
it is the std of the chosen choice's indicator. It is TLA1's on both routes: how far the tuned
tasks' optima say the new task's optimum may lie (TLA2 samples around the prediction with it).
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..results.consensus import consensus_scores, measured_values
from ..space.sampling import NoFeasiblePoint, lhs_points
from ..core.seeding import STAGE_JOINT_SEARCH, STAGE_PROJECT, rng
from ..space.dimensions import Categorical, Space
from ..data.trials import Trial, point_key
from .model import TransferModel, as_transfer_model
from .predict import predict, predict_encoded

__all__ = ["LazyPrediction", "Prediction", "measured_consensus", "predict_optimum", "project", "unseen_categories"]

log = logging.getLogger(__name__)

#: projection candidates: normal draws of these spreads around the raw prediction (encoded units)
PROJECT_SPREADS = (0.01, 0.03, 0.1, 0.3, 1.0)
#: projection candidates: draws per spread, uniform draws, bisection steps
PROJECT_DRAWS, PROJECT_UNIFORM, PROJECT_BISECTIONS = 200, 1000, 25
#: a new task's optimum under the joint model: Latin hypercube draws of which the feasible ones are candidates
JOINT_SEARCH_DRAWS = 4096
#: the consensus pick: at most this many listed configurations are scored (a seeded draw of larger
#: domains), and at most this many combinations of the seen categories are averaged over
CONSENSUS_MAX_CANDIDATES, CONSENSUS_MAX_TASKS = 20_000, 64


@dataclass(frozen=True, eq=False)
class Prediction:
    """A run-free prediction of a task's optimum (TLA1, or the joint model's pick).

    params: a valid configuration in user units (feasible when the constraints are known);
    std: per parameter name, the predictive std in *encoded* units (see the module docstring);
    value, value_std: the predicted objective at ``params`` and its std, in user units (see
    :func:`gptask.predict`); encoded: (D,) encoding of ``params``; raw: (D,) the GPs' raw mean
    before snapping and projection; projected: True when a constraint forced a move away from the
    snapped prediction; feasible: True/False, or None when the constraints are unknown (loaded model
    without ``problem=``); task: the task; route: ``"optima"`` when ``params`` is the TLA1
    configuration, ``"joint"`` when it is the joint model's pick among candidates, ``"consensus"``
    when it is the configuration predicted best on average over the categories the task's new one
    could resemble (module docstring), ``"one task"`` when one task is tuned: its best configuration,
    with a new task's value and value_std NaN (a new task's values need two tuned tasks).
    """

    task: dict
    params: dict
    std: dict
    value: float
    value_std: float
    encoded: np.ndarray
    raw: np.ndarray
    projected: bool
    feasible: bool | None
    route: str = "optima"

    def __repr__(self) -> str:
        return (f"Prediction(params={self.params}, std={ {k: round(v, 4) for k, v in self.std.items()} }, "
                f"value={self.value:.6g} +- {self.value_std:.3g})")


#: the fields of a :class:`LazyPrediction` that need the model
MODEL_FIELDS = ("std", "value", "value_std", "raw")


class LazyPrediction(Prediction):
    """A :class:`Prediction` whose configuration is known without the model and whose model
    fields (``MODEL_FIELDS``: ``value``, ``value_std``, ``std``, ``raw``) are computed when one of
    them is first read, by ``full()``: the same call's prediction with the model fitted then (issue
    46: a run-free pick from complete campaigns of other machines is decided by their measurements,
    and the fit was 75 % of the call). ``known``: the other fields (task, params, encoded, projected,
    feasible, route); ``full()``'s must agree (a ValueError otherwise: the two paths disagree). Without
    ``full``, every field is in ``known`` (what ``dataclasses.replace`` makes of one)."""

    def __init__(self, full: Any = None, **known: Any) -> None:  # noqa: D107 (the frozen fields are set once)
        for name, value in known.items():
            object.__setattr__(self, name, value)
        object.__setattr__(self, "_full", full)

    @property
    def model_fitted(self) -> bool:
        """Whether the model fields were computed already (reading one fits the model)."""
        return self._full is None

    def __getattr__(self, name: str) -> Any:
        if name not in MODEL_FIELDS or self.__dict__.get("_full") is None:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        full: Prediction = self._full()
        if full.params != self.params or full.route != self.route:
            raise ValueError(f"the model's prediction {full.params} ({full.route}) is not the pick made from the "
                             f"measurements {self.params} ({self.route})")
        for field in MODEL_FIELDS:
            object.__setattr__(self, field, getattr(full, field))
        object.__setattr__(self, "_full", None)
        return getattr(self, name)


def project(space: Space, raw: np.ndarray, is_feasible: Any, generator: np.random.Generator,
            anchors: np.ndarray | None = None, describe: str = "the constraints") -> tuple[np.ndarray, bool]:
    """The snapped raw point (D,) if feasible, else the nearest feasible candidate (module docstring).

    is_feasible: judges a decoded configuration, or None (no constraints known); anchors: (k, D)
    encoded candidates added to the random ones. Returns (encoded (D,), projected)."""
    raw = np.clip(raw, 0.0, 1.0)
    snapped = space.snap(raw[None, :])[0]
    if is_feasible is None or is_feasible(space.decode(snapped[None, :])[0]):
        return snapped, False
    D = raw.size
    cands = [raw + s * generator.standard_normal((PROJECT_DRAWS, D)) for s in PROJECT_SPREADS]
    cands.append(generator.random((PROJECT_UNIFORM, D)))
    if anchors is not None and len(anchors):
        cands.append(np.asarray(anchors, float))
    C = space.snap(np.clip(np.vstack(cands), 0.0, 1.0))
    order = np.argsort(np.linalg.norm(C - raw, axis=1))
    best = None
    for k in order:  # nearest first: stop at the first feasible one
        if is_feasible(space.decode(C[k][None, :])[0]):
            best = C[k]
            break
    if best is None:
        raise NoFeasiblePoint(f"no configuration satisfying {describe} was found near the TLA1 prediction "
                              f"or among {len(C)} random candidates")
    lo, hi, base = 0.0, 1.0, best.copy()
    for _ in range(PROJECT_BISECTIONS):  # bisection from the feasible point towards the raw prediction
        mid = 0.5 * (lo + hi)
        p = space.snap((base + mid * (raw - base))[None, :])[0]
        if is_feasible(space.decode(p[None, :])[0]):
            lo = mid
            if np.linalg.norm(p - raw) < np.linalg.norm(best - raw):
                best = p
        else:
            hi = mid
    return best, True


def _param_std(space: Space, std_cols: np.ndarray, encoded: np.ndarray) -> dict[str, float]:
    out = {}
    for d, sl in zip(space.dimensions, space.column_slices()):
        if isinstance(d, Categorical):
            out[d.name] = float(std_cols[sl][int(np.argmax(encoded[sl]))])
        else:
            out[d.name] = float(std_cols[sl][0])
    return out


def predict_optimum(source: Any, task: Mapping[str, Any], *, consensus: bool = True,
                    measured: Sequence[Trial] | None = None) -> Prediction:
    """TLA1: predict a good configuration for ``task`` without running anything.

    source: a :class:`gptask.TuningResult` or a model from :func:`gptask.load_model`.
    task: a dict of the task space (a new or a tuned task). consensus: for a task of a category no
    tuned task has, return the consensus pick (module docstring; False: TLA1's blend, what TLA2
    centres its design on). measured: trials of the seen tasks (those the model leaves out, such as
    a summary of large sources drops): where one measured a candidate of the consensus pick, its
    measurement takes the place of the model's prediction. Returns a :class:`Prediction`.
    """
    tm = as_transfer_model(source)
    task = tm.validate_task(task)
    space = tm.param_space
    raw, std_cols = tm.optima.predict(tm.task_space.encode([task])[0])
    feas = tm.is_feasible(task)
    if feas is None and tm.signature.get("n_constraints", 0):
        log.warning("the model's problem has %d constraints but they are unknown here (load the model "
                    "with problem=...); the prediction is not checked against them",
                    tm.signature["n_constraints"])
    anchors = space.encode([b[0] for b in tm.best if b is not None])
    enc, projected = project(space, raw, feas, rng(0, STAGE_PROJECT), anchors, tm.constraint_text(task))
    route = "optima"
    one_task = len(tm.optima.task_X) == 1  # every task's optimum is that task's best (OptimaModel)
    if one_task:
        route = "one task"
    elif feas is not None and tm.task_index(task) is None and tm.joint() is not None:
        enc, route = _joint_pick(tm, task, feas, enc), "joint"
        projected = False
    elif consensus and feas is not None and tm.task_index(task) is None and (unseen := _unseen_categories(tm, task)):
        enc, route = _consensus_pick(tm, task, unseen, feas, enc, measured or ()), "consensus"
        projected = False
    params = space.decode(enc[None, :])[0]
    if tm.task_index(task) is None and sum(n > 0 for n in tm.model.n_points) < 2:
        mean = sd = float("nan")  # a new task's values need two tasks with data to go by (gptask.transfer.predict)
    else:
        mean, sd = predict(tm, task, params)
    return Prediction(task=task, params=params, std=_param_std(space, std_cols, enc), value=float(mean),
                      value_std=float(sd), encoded=enc, raw=raw, projected=projected,
                      feasible=None if feas is None else bool(feas(params)), route=route)


def _unseen_categories(tm: TransferModel, task: Mapping[str, Any]) -> dict[str, list]:
    """The categorical task dimensions whose value in ``task`` no tuned task (one with data) has,
    each with the values the tuned tasks do have (in the space's order); empty when there is none."""
    tuned = [tm.tasks[j] for j in range(len(tm.tasks)) if tm.model.n_points[j] > 0]
    return unseen_categories(tm.task_space, tuned, task)


def unseen_categories(task_space: Space, tuned: Sequence[Mapping[str, Any]], task: Mapping[str, Any]) -> dict[str, list]:
    """The categorical dimensions of ``task_space`` whose value in ``task`` none of the ``tuned``
    tasks has, each with the values they do have (in the space's order); empty when there is none
    (or when such a dimension has no value with data)."""
    out = {}
    for dim in task_space.dimensions:
        if isinstance(dim, Categorical):
            seen = {point_key({"v": t[dim.name]}) for t in tuned}
            if point_key({"v": task[dim.name]}) not in seen:
                out[dim.name] = [c for c in dim.choices if point_key({"v": c}) in seen]
    return out if all(out.values()) else {}


def _drawn_candidates(space: Space, is_feasible: Any, tla1: np.ndarray) -> np.ndarray:
    """Encoded candidates (n, D): TLA1's configuration ``tla1`` (D,) and the feasible ones of
    ``JOINT_SEARCH_DRAWS`` Latin hypercube draws."""
    draws = lhs_points(space, JOINT_SEARCH_DRAWS, rng(0, STAGE_JOINT_SEARCH))
    return np.vstack([tla1[None, :], space.encode([p for p in draws if is_feasible(p)])])


def _consensus_candidates(tm: TransferModel, task: dict, is_feasible: Any, tla1: np.ndarray) -> np.ndarray:
    """Encoded candidates (n, D) of ``task``: its listed configurations (a seeded draw of
    ``CONSENSUS_MAX_CANDIDATES`` when there are more), else :func:`_drawn_candidates`."""
    listed = _listed_candidates(tm.problem, task)
    return listed if listed is not None else _drawn_candidates(tm.param_space, is_feasible, tla1)


def _listed_candidates(problem: Any, task: Mapping[str, Any]) -> np.ndarray | None:
    """Encoded (n, D) listed configurations of ``task`` (``problem.domain``; a seeded draw of
    ``CONSENSUS_MAX_CANDIDATES`` when there are more), or None when the problem (None: unknown)
    lists none."""
    domain = problem.domain(task) if problem is not None else None
    if domain is None or not len(domain):
        return None
    rows = np.arange(len(domain))
    if len(rows) > CONSENSUS_MAX_CANDIDATES:
        rows = np.sort(rng(0, STAGE_JOINT_SEARCH).choice(len(rows), CONSENSUS_MAX_CANDIDATES, replace=False))
    return domain.encode(rows)


def _seen_tasks(task: Mapping[str, Any], unseen: dict[str, list]) -> list[dict]:
    """``task`` with every combination of the seen values (at most ``CONSENSUS_MAX_TASKS``) in place
    of its ``unseen`` ones."""
    combos = [dict(zip(unseen, values)) for values in itertools.product(*unseen.values())][:CONSENSUS_MAX_TASKS]
    return [{**task, **combo} for combo in combos]


def measured_consensus(problem: Any, task: Mapping[str, Any], tuned: Sequence[Mapping[str, Any]],
                       measured: Sequence[Trial]) -> np.ndarray | None:
    """The encoded configuration (D,) of the consensus pick (:func:`_consensus_pick`) of ``task``
    when the measurements alone decide it, with no model: ``task`` is of a category none of the
    ``tuned`` tasks (those with data) has, ``problem`` lists its configurations, and ``measured``
    holds a value or a failure of every candidate on every seen task (complete campaigns of other
    machines). None otherwise: a candidate needs the model's prediction somewhere. What
    :func:`predict_optimum` returns on the consensus route, then, is this configuration: a caller
    that only needs the pick needs no fit (:mod:`gptask.sources.multisource`, issue 46)."""
    if not measured or any(point_key(t) == point_key(task) for t in tuned):
        return None
    unseen = unseen_categories(problem.task_space, tuned, task)
    C = _listed_candidates(problem, task) if unseen else None
    if C is None:
        return None
    P = measured_values(measured, _seen_tasks(task, unseen), problem.param_space.decode(C))
    if np.isnan(P).any():
        return None
    return C[int(np.argmin(consensus_scores(P)))]


def _consensus_pick(tm: TransferModel, task: dict, unseen: dict[str, list], is_feasible: Any,
                    tla1: np.ndarray, measured: Sequence[Trial] = ()) -> np.ndarray:
    """The encoded configuration (D,) predicted best on average over the seen categories: for a task
    whose category (a machine, a GPU) no tuned task has, the model knows nothing that sets it apart
    from the seen ones, and TLA1 blends their optima parameter by parameter (on the recorded
    convolution campaign, with the other five GPUs' campaigns as sources, 0.68 of the new GPU's
    optimum on average and 0.17 on W6600). Instead each candidate is valued on the task with every
    combination of seen values in place of the new ones (at most ``CONSENSUS_MAX_TASKS``): by its
    measurement there where ``measured`` holds one, else by the model's prediction; the candidate
    of least :func:`gptask.results.consensus.consensus_scores` wins (BENCHMARKS.md, issue 24). unseen:
    :func:`_unseen_categories` of ``task``."""
    C = _consensus_candidates(tm, task, is_feasible, tla1)
    seen = _seen_tasks(task, unseen)
    # (V, n) user units: the measurement where there is one, else the model's prediction (made only for
    # the candidates some seen task did not measure: a prediction of one candidate does not depend on
    # the others, so the table is the same as predicting all of them)
    P = measured_values(measured, seen, tm.param_space.decode(C)) if measured else np.full((len(seen), len(C)), np.nan)
    need = np.isnan(P).any(axis=0)
    if need.any():
        for v, t in enumerate(seen):
            P[v, need] = np.where(np.isnan(P[v, need]), predict_encoded(tm, t, C[need], calibrated=False)[0], P[v, need])
    return C[int(np.argmin(consensus_scores(P)))]


def _joint_pick(tm: TransferModel, task: dict, is_feasible: Any, tla1: np.ndarray) -> np.ndarray:
    """The encoded configuration (D,) of least predicted median on the new ``task`` among TLA1's
    (``tla1``, (D,), feasible) and the feasible ones of ``JOINT_SEARCH_DRAWS`` Latin hypercube draws.

    The tuned tasks' best configurations are not candidates: their values are the luckiest launches
    of their tasks, which the GP partly keeps, so the argmin would favour them for that luck."""
    C = _drawn_candidates(tm.param_space, is_feasible, tla1)
    median, _ = predict_encoded(tm, task, C, calibrated=False)
    return C[int(np.argmin(median))]
