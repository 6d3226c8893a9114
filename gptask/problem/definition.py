"""A tuning problem: task space, parameter space, objective and constraints."""

from __future__ import annotations

import copy
import hashlib
import json
import logging
import numbers
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ..space.expressions import Restriction, parse_restriction
from ..core.labels import check_unit
from .fidelity import FidelityObjective, check_fidelity, fidelity_levels
from .objectives import Outputs, outputs_spec
from .rule_columns import callable_mask
from ..space.dimensions import Boolean, Categorical, Integer, Ordinal, Real, Space
from ..space.domain import Domain, build_domain

__all__ = ["Problem", "Features", "CostModel", "RunCost"]

log = logging.getLogger(__name__)

Objective = Callable[[dict, dict], float]
Constraint = Callable[[dict], bool]
#: the user's default configuration: one dict of parameters, or a function of the task returning one
Default = Mapping[str, Any] | Callable[[dict], Mapping[str, Any]]
#: derived quantities of one configuration: the dict the constraints see -> {name: finite float}
Features = Callable[[dict], Mapping[str, float]]
#: a rough estimate of the objective: the dict the constraints see -> a positive float
CostModel = Callable[[dict], float]
#: the cost of one run in seconds: the dict the constraints see (fidelity included) -> a number >= 0
RunCost = Callable[[dict], float]
#: the only configurations to propose: a list of parameter dicts, or a function of the task returning one
Candidates = Sequence[Mapping[str, Any]] | Callable[[dict], Sequence[Mapping[str, Any]]]


def _name_kinds(task_space: Space, param_space: Space, constants: Mapping[str, Any]) -> dict[str, tuple[str, str]]:
    """The names a restriction may read whose values are all numbers or all texts, as
    :func:`gptask.space.expressions.parse_restriction` takes them: ``{name: (kind, label)}``."""
    out: dict[str, tuple[str, str]] = {}
    for role, space in (("task", task_space), ("parameter", param_space)):
        for d in space:
            if isinstance(d, (Real, Integer, Boolean)) or isinstance(d, Ordinal) and d.numeric:
                kind = "number"
            elif isinstance(d, Ordinal):
                kind = "text"
            elif isinstance(d, Categorical) and len({isinstance(c, str) for c in d.choices}) == 1:
                kind = "text" if isinstance(d.choices[0], str) else "number"
            else:
                continue
            out[d.name] = (kind, f"{'an' if type(d).__name__[0] in 'AEIOU' else 'a'} {type(d).__name__} {role} "
                                 "dimension")
    for name, value in constants.items():
        if isinstance(value, (str, numbers.Real)):
            out[name] = ("text" if isinstance(value, str) else "number", "a constant")
    return out


class Problem:
    """What to tune.

    Parameters
    ----------
    task_space: the problem instances (e.g. matrix sizes); a :class:`Space`.
    param_space: the tuning parameters; a :class:`Space`.
    objective: ``f(task: dict, params: dict) -> float``, minimised (e.g. a run time in seconds).
    constraints: callables on one dict holding the task values, the parameter values and the
        ``constants``, each returning truthy when the configuration is allowed; or texts written
        as tuning scripts write them (``"block_size_x * block_size_y <= 1024"``), parsed by
        :func:`gptask.space.expressions.parse_restriction` into a whitelist of arithmetic, comparisons
        and boolean logic over those names (never ``eval``-ed) and judged vectorised over an
        enumerated space.
    candidates: the only configurations the tuner may propose, when they are a known finite list
        (e.g. those a recorded campaign measured): a list of parameter dicts, or a function
        ``task -> list`` when they depend on the task. The constraints still apply to them.
    constants: fixed values visible to the constraints and passed to nobody else (e.g. the number
        of cores of the machine).
    name: a label stored in histories and model files.
    default: the configuration a practitioner would use without tuning (e.g. the library's
        defaults): a dict of parameter values, or a function ``task -> dict`` for a default that
        depends on the task. The tuner measures it first on every task, and results report the
        gain of the best configuration over it (:meth:`default_for`). It is not part of the
        :meth:`signature`: a history or model file stays valid when the default changes.
    features: derived quantities the objective depends on smoothly, as a function of the dict the
        constraints see, returning ``{name: finite float}`` with the same names every time (e.g.
        for a block-cyclic factorisation the log of the blocks per process row, the log of the
        flops per core). Used by run-free prediction for new tasks (:mod:`gptask.transfer.joint`):
        one GP over the task, the configuration and these features, fitted on every tuned task.
    cost_model: a rough positive estimate of the objective from the same dict (e.g. flops divided
        by the cores used, in any unit): new-task prediction then models the ratio of the
        objective to it, so that what the estimate explains need not be learned. Neither is part
        of the :meth:`signature`; a model file records the feature names it was fitted with.
    unit: the unit of the objective's values (``"s"`` for run times, ``"GB/s"``, ...; default none):
        written after every value in progress lines, ``gptask show``, tables and plots. Not part
        of the :meth:`signature`; histories and model files record it.
    provenance: a function of no argument returning the application's own versions as
        ``{name: version}`` (e.g. ``{"mpich": "4.0.2", "scalapack": "2.2.1", "openblas": "0.3.21"}``),
        stored with the machine record of every trial (:mod:`gptask.data.provenance`). Called once per
        process. Not part of the :meth:`signature`.
    objectives, outputs, constraints_out: an objective that measures several things
        (:mod:`gptask.problem.objectives`): ``objectives={"time": "min", "memory": "min"}`` (or a list of
        names, or of ``(name, direction)`` pairs) names the outputs to optimise, the first being the
        primary one; ``outputs=["memory"]`` names outputs measured but not optimised; and
        ``constraints_out={"memory": ("<=", 2e9)}`` limits outputs (a limit on an output the problem
        does not name is refused here). The objective then returns a mapping of exactly those
        outputs; :attr:`outputs` holds them (None for the classic single number). They are part of
        the :meth:`signature`.
    fidelity, target_fidelity: fidelity dimensions (:mod:`gptask.problem.fidelity`, docs/fidelity.md):
        a :class:`Space` of knobs that make a run cheaper and less exact (iterations, a problem-size
        fraction, repetitions), and the dict of their values the results are wanted at. The
        objective then receives the fidelity values in its ``params`` dict, beside the parameters;
        the tuner runs cheaper levels where they rank configurations like the target. Part of the
        :meth:`signature`.
    run_cost: the cost of one run in seconds, a function of the dict the constraints see (fidelity
        included) returning a number >= 0; without it a run's cost is its ``"cost"`` output (a
        problem with named outputs) or its measured wall time. Not the ``cost_model`` above (an
        estimate of the objective). Not part of the :meth:`signature`.
    """

    def __init__(
        self,
        task_space: Space,
        param_space: Space,
        objective: Objective,
        constraints: Sequence[Constraint] = (),
        constants: Mapping[str, Any] | None = None,
        name: str = "problem",
        default: Default | None = None,
        features: Features | None = None,
        cost_model: CostModel | None = None,
        candidates: Candidates | None = None,
        unit: str = "",
        provenance: Callable[[], Mapping[str, Any]] | None = None,
        objectives: Any = None,
        outputs: Sequence[str] | None = None,
        constraints_out: Mapping[str, Any] | None = None,
        fidelity: Space | None = None,
        target_fidelity: Mapping[str, Any] | None = None,
        run_cost: RunCost | None = None,
    ) -> None:
        for label, space in (("task_space", task_space), ("param_space", param_space)):
            if not isinstance(space, Space):
                raise TypeError(f"Problem: {label} must be a gptask.Space, got {type(space).__name__}")
        clash = sorted(set(task_space.names) & set(param_space.names))
        if clash:
            raise ValueError(f"Problem: names used in both task_space and param_space: {clash}")
        if not callable(objective):
            raise TypeError(f"Problem: objective must be callable f(task, params), got {objective!r}")
        if callable(constraints) or isinstance(constraints, str):
            constraints = [constraints]
        constraints = list(constraints)
        constants = dict(constants or {})
        clash = sorted(set(constants) & (set(task_space.names) | set(param_space.names)))
        if clash:
            raise ValueError(f"Problem: constants shadow dimension names: {clash}")
        taken = {**{n: "a constant" for n in constants}, **{n: "a task dimension" for n in task_space.names},
                 **{n: "a parameter" for n in param_space.names}}
        fidelity, target_fidelity = check_fidelity(fidelity, target_fidelity, taken)
        if fidelity is not None and callable(candidates):
            raise ValueError("Problem: candidates given as a function of the task do not go with fidelity= yet; "
                             "give a list")
        known = [*constants, *task_space.names, *param_space.names, *(fidelity.names if fidelity else [])]
        kinds = _name_kinds(task_space, param_space, constants)
        for k, c in enumerate(constraints):
            if isinstance(c, str):
                constraints[k] = parse_restriction(c, known, kinds)
            elif not callable(c):
                raise TypeError(f"Problem: every constraint must be a callable on a dict or a text, got {c!r}")
        if candidates is not None and not callable(candidates):
            if isinstance(candidates, (str, Mapping)) or not isinstance(candidates, Sequence):
                raise TypeError(f"Problem: candidates must be a list of parameter dicts or a function task -> list, "
                                f"got {type(candidates).__name__}")
            candidates = [param_space.validate(c, what=f"Problem: candidates[{k}]") for k, c in enumerate(candidates)]
            if not candidates:
                raise ValueError("Problem: candidates must not be empty")

        self.task_space = task_space
        self.param_space = param_space
        self.objective = objective
        self.constraints = constraints
        self.constants = constants
        self.name = str(name)
        if default is not None and not callable(default):
            if not isinstance(default, Mapping):
                raise TypeError(f"Problem: default must be a dict of parameters or a function task -> dict, "
                                f"got {default!r}")
            default = param_space.validate(default, what="Problem: default")
        self.default = default
        for label, fn in (("features", features), ("cost_model", cost_model), ("run_cost", run_cost)):
            if fn is not None and not callable(fn):
                raise TypeError(f"Problem: {label} must be a function of the dict the constraints see, got {fn!r}")
        self.features, self.cost_model = features, cost_model
        #: fidelity dimensions (a Space) and the target's values (a dict), or None and None
        self.fidelity: Space | None = fidelity
        self.target_fidelity: dict[str, Any] | None = target_fidelity
        #: the cost of a run in seconds from the dict the constraints see, or None (measured)
        self.run_cost = run_cost
        self.candidates = candidates
        self.unit = check_unit(unit)
        if provenance is not None and not callable(provenance):
            raise TypeError(f"Problem: provenance must be a function returning {{name: version}}, got {provenance!r}")
        self.provenance = provenance
        #: the named outputs of the objective (:mod:`gptask.problem.objectives`), None for one number
        self.outputs: Outputs | None = outputs_spec(objectives, outputs, constraints_out)
        self._raised: dict[int, tuple[int, str]] = {}  # constraint index -> (times raised, first error)
        self._domains: dict[str, Any] = {}  # task -> its listed configurations (see domain())

    def without_candidates(self) -> "Problem":
        """This problem with no list of candidates (its constraints still apply): what another
        machine's measurements of the same problem, made over that machine's own list, are checked
        against. ``self`` when it lists none."""
        if self.candidates is None:
            return self
        out = copy.copy(self)
        out.candidates, out._domains, out._raised = None, {}, {}
        return out

    def default_for(self, task: Mapping[str, Any]) -> dict[str, Any] | None:
        """The default configuration for ``task`` (a validated dict of parameters), or None when the
        problem has no default. Raises ValueError when it is not a valid point of the parameter
        space or violates a constraint for this task, naming the constraints."""
        if self.default is None:
            return None
        raw = self.default(dict(task)) if callable(self.default) else self.default
        params = self.param_space.validate(raw, what=f"the default configuration for task {dict(task)}")
        bad = self.violated(task, params)
        if bad:
            raise ValueError(f"problem {self.name!r}: the default configuration {params} violates "
                             f"{', '.join(self.constraint_names(bad))} for task {dict(task)}")
        return params

    def merged(self, task: Mapping[str, Any], params: Mapping[str, Any]) -> dict[str, Any]:
        """The dict the constraints see: constants, task values and parameter values together."""
        return {**self.constants, **task, **params}

    @property
    def describes_points(self) -> bool:
        """True when the problem declares ``features`` or a ``cost_model``."""
        return self.features is not None or self.cost_model is not None

    def _outputs(self, label: str, fn: Callable[[dict], Any], tasks: Sequence[Mapping[str, Any]],
                 params: Sequence[Mapping[str, Any]]) -> list[tuple[dict, Any]]:
        """``(point, fn(point))`` for each configuration ``(tasks[k], params[k])``; a raise of ``fn``
        becomes a ValueError naming ``label`` and the point."""
        if len(tasks) != len(params):
            raise ValueError(f"{label}: {len(tasks)} tasks for {len(params)} configurations")
        out = []
        for task, par in zip(tasks, params):
            point = self.merged(task, par)
            try:
                out.append((point, fn(dict(point))))
            except Exception as exc:  # noqa: BLE001 - re-raised with the point that failed
                raise ValueError(f"problem {self.name!r}: {label} raised {type(exc).__name__}: {exc} "
                                 f"on {point}") from exc
        return out

    def feature_matrix(self, tasks: Sequence[Mapping[str, Any]],
                       params: Sequence[Mapping[str, Any]]) -> tuple[list[str], np.ndarray]:
        """The declared features of the configurations ``(tasks[k], params[k])``: their names and an
        ``(n, n_features)`` array (no features: ``([], (n, 0))``). Raises ValueError naming the
        point when the function raises, returns other names or a value that is not a finite number."""
        if self.features is None:
            return [], np.empty((len(params), 0))
        to_floats = lambda raw: {str(n): float(v) for n, v in dict(raw).items()}  # noqa: E731
        rows = self._outputs("features", lambda pt: to_floats(self.features(pt)), tasks, params)
        names = list(rows[0][1]) if rows else []
        out = np.empty((len(rows), len(names)))
        for k, (point, row) in enumerate(rows):
            if list(row) != names:
                raise ValueError(f"problem {self.name!r}: features returned {list(row)} on {point}, "
                                 f"{names} before: the names must be the same for every point")
            out[k] = [row[n] for n in names]
            if not np.all(np.isfinite(out[k])):
                raise ValueError(f"problem {self.name!r}: features returned a non-finite value on {point}: {row}")
        return names, out

    def cost_estimates(self, tasks: Sequence[Mapping[str, Any]], params: Sequence[Mapping[str, Any]]) -> np.ndarray:
        """``(n,)`` cost model values of the configurations ``(tasks[k], params[k])`` (all ones without
        a cost model). Raises ValueError naming the point when one is not a positive finite number."""
        if self.cost_model is None:
            return np.ones(len(params))
        rows = self._outputs("cost_model", lambda pt: float(self.cost_model(pt)), tasks, params)
        for point, v in rows:
            if not (np.isfinite(v) and v > 0.0):
                raise ValueError(f"problem {self.name!r}: cost_model must return a positive finite number, "
                                 f"got {v!r} on {point}")
        return np.array([v for _, v in rows], dtype=float)

    def violated(self, task: Mapping[str, Any], params: Mapping[str, Any]) -> list[int]:
        """Indices of the constraints that ``(task, params)`` violates (empty when feasible).

        A constraint that raises counts as violated: a configuration the user's own rule cannot
        judge is not one to run. It is not hidden: the first exception of each constraint is logged
        as a warning, and :meth:`constraint_errors` reports them (a "no feasible point" error does).
        """
        c = self.merged(task, params)
        bad = []
        for k, rule in enumerate(self.constraints):
            try:
                ok = bool(rule(dict(c)))
            except Exception as exc:  # noqa: BLE001 - any failure of a user rule means "not allowed"
                ok = False
                self._record_error(k, exc, c)
            if not ok:
                bad.append(k)
        if self.candidates is not None and not self._listed(task, params):
            bad.append(len(self.constraints))  # named "not among the candidates" by constraint_names
        return bad

    def infeasible_rows(self, tasks: Sequence[Mapping[str, Any]], params: Sequence[Mapping[str, Any]]) -> np.ndarray:
        """Which of the n points ``(tasks[k], params[k])`` :meth:`violated` would flag, judged per task
        on whole columns (:meth:`feasible_mask`):
        an (n,) bool array, True where some constraint is violated (or the point is not a candidate).
        The same verdicts as :meth:`violated` point by point, at the cost of one evaluation of each
        text restriction per task instead of one per point (21,810 source rows: 4 evaluations, not
        87,240)."""
        if len(tasks) != len(params):
            raise ValueError(f"tasks and params must be as many, got {len(tasks)} and {len(params)}")
        bad = np.zeros(len(params), dtype=bool)
        groups: dict[str, list[int]] = {}
        for k, task in enumerate(tasks):
            groups.setdefault(json.dumps(sorted((n, repr(v)) for n, v in task.items())), []).append(k)
        names = self.param_space.names
        for ks in groups.values():
            task = dict(tasks[ks[0]])
            columns = {n: np.asarray([params[k][n] for k in ks]) for n in names}
            ok = self.feasible_mask(task, columns, len(ks))
            if self.candidates is not None:
                domain = self.domain(task)
                assert domain is not None  # a problem with candidates always has a domain
                ok &= domain.positions(self.param_space.encode([params[k] for k in ks])) >= 0
            bad[ks] = ~ok
        return bad

    def _listed(self, task: Mapping[str, Any], params: Mapping[str, Any]) -> bool:
        """Whether ``params`` is one of the task's candidates (the problem has ``candidates``)."""
        domain = self.domain(task)
        assert domain is not None  # a problem with candidates always has a domain
        return len(domain.rows_of(self.param_space.encode([params]))) == 1

    def _record_error(self, k: int, exc: Exception, point: Mapping[str, Any]) -> None:
        count, first = self._raised.get(k, (0, ""))
        if count == 0:
            first = f"{type(exc).__name__}: {exc}"
            log.warning("%s of problem %r raised %s on %s; such configurations count as infeasible",
                        self.constraint_names([k])[0], self.name, first, dict(point))
        self._raised[k] = (count + 1, first)

    def constraint_errors(self) -> str:
        """What the constraints raised so far, e.g. ``"constraint #0 (fits) raised KeyError: 'mbb'
        (on 1000 configurations)"``; "" when none raised."""
        return "; ".join(f"{self.constraint_names([k])[0]} raised {first} (on {count} configurations)"
                         for k, (count, first) in sorted(self._raised.items()))

    def is_feasible(self, task: Mapping[str, Any], params: Mapping[str, Any]) -> bool:
        return not self.violated(task, params)

    def feasible_mask(self, task: Mapping[str, Any], columns: Mapping[str, np.ndarray], n: int) -> np.ndarray:
        """Which of ``n`` configurations of ``task`` satisfy every constraint: ``columns`` maps each
        parameter name to its (n,) values; returns an (n,) bool array. Text restrictions are judged
        on the whole columns at once; a callable constraint too where it takes arrays and agrees with
        itself called per point (:mod:`gptask.problem.rule_columns`), else it is called per
        configuration (an exception counts as a violation, as in :meth:`violated`)."""
        env = {**{k: np.asarray(v) for k, v in columns.items()}, **self.constants, **task}
        ok = np.ones(n, dtype=bool)
        for k, rule in enumerate(self.constraints):
            if isinstance(rule, Restriction):
                ok &= rule.mask(env)
                continue
            rows = np.flatnonzero(ok)
            ok[rows] = callable_mask(rule, {**self.constants, **task},
                                     {name: np.asarray(col)[rows] for name, col in columns.items()}, len(rows),
                                     lambda exc, point, k=k: self._record_error(k, exc, point))
        return ok

    def domain(self, task: Mapping[str, Any]) -> Domain | None:
        """The allowed configurations of ``task`` listed (:mod:`gptask.space.domain`): from ``candidates``
        or the whole grid of a discrete space, filtered by the constraints; None for a space that
        cannot be listed. Built once per task and kept."""
        key = json.dumps(sorted((k, repr(v)) for k, v in task.items()))
        if key not in self._domains:
            self._domains[key] = build_domain(self, task)
        return self._domains[key]

    def candidate_list(self, task: Mapping[str, Any]) -> list[dict[str, Any]] | None:
        """The configurations the tuner may propose for ``task`` when the problem lists them
        (``candidates=``), validated; None otherwise."""
        if self.candidates is None:
            return None
        if not callable(self.candidates):
            return list(self.candidates)
        raw = self.candidates(dict(task))
        if isinstance(raw, (str, Mapping)) or not isinstance(raw, Sequence) or not raw:
            raise ValueError(f"problem {self.name!r}: candidates({dict(task)}) must return a non-empty list of "
                             f"parameter dicts, got {raw!r}")
        return [self.param_space.validate(c, what=f"candidates({dict(task)})[{k}]") for k, c in enumerate(raw)]

    def constraint_names(self, indices: Sequence[int] | None = None) -> list[str]:
        """Readable names of constraints (their ``__name__``, a restriction's text, or ``constraint
        #k``); index ``len(constraints)`` names the candidate list."""
        idx = range(len(self.constraints)) if indices is None else indices
        out = []
        for k in idx:
            if k == len(self.constraints):
                out.append("the list of candidates (the configuration is not one of them)")
                continue
            n = getattr(self.constraints[k], "__name__", "")
            out.append(f"constraint #{k}" + (f" ({n})" if n and n != "<lambda>" else ""))
        return out

    def signature(self) -> dict[str, Any]:
        """A JSON description identifying the problem (spaces, constants, constraint count, and the
        texts of text restrictions when there are any)."""
        out = {
            "name": self.name,
            "task_space": self.task_space.to_json(),
            "param_space": self.param_space.to_json(),
            "constants": {k: self.constants[k] for k in sorted(self.constants)},
            "n_constraints": len(self.constraints),
        }
        texts = [c.text for c in self.constraints if isinstance(c, Restriction)]
        if texts:
            out["restrictions"] = texts
        if self.outputs is not None:
            out["outputs"] = self.outputs.to_json()
        if self.fidelity is not None:
            out["fidelity"] = {"space": self.fidelity.to_json(), "target": self.target_fidelity}
        return out

    def fidelity_levels(self) -> list[dict[str, Any]]:
        """The ladder of fidelity levels, target first (:func:`gptask.problem.fidelity.fidelity_levels`);
        ``[{}]`` for a problem without fidelity. A run lays out these, or fewer of them when ``run_cost``
        prices them (:func:`gptask.tuning.fidelity.run_levels`; ``result.fidelity["levels"]``)."""
        if self.fidelity is None:
            return [{}]
        assert self.target_fidelity is not None
        return fidelity_levels(self.fidelity, self.target_fidelity)

    def expanded(self) -> "Problem":
        """The problem a tuner runs for a problem with fidelity (``self`` without): the fidelity
        dimensions appended to the task space, so that each (task, fidelity level) is one task of
        the model and each run's fidelity is stored in its task row; the objective is called with
        the fidelity values in its params dict (:class:`~gptask.problem.fidelity.FidelityObjective`)."""
        if self.fidelity is None:
            return self
        out = copy.copy(self)
        out.task_space = Space([*self.task_space, *self.fidelity])
        out.objective = FidelityObjective(self.objective, self.fidelity.names)
        if callable(self.default):
            names, user = self.fidelity.names, self.default
            out.default = lambda task: user({k: v for k, v in task.items() if k not in names})
        out._domains, out._raised = {}, {}
        return out

    def signature_hash(self) -> str:
        text = json.dumps(self.signature(), sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def __repr__(self) -> str:
        return (
            f"Problem(name={self.name!r}, tasks={self.task_space.names}, "
            f"params={self.param_space.names}, constraints={len(self.constraints)})"
        )
