"""The proposer slot: what the tuner runs next.

The :class:`~gptask.tuning.tuner.Tuner` keeps the bookkeeping (the history, claims, the budget,
the ask/tell contract, the model updates) and asks its proposer these questions (and, for
designs run in stages, a few more below):

* :meth:`Proposer.proposes_for`: does task ``i`` take new trials from this run (a source's task
  is data only);
* :meth:`Proposer.initial_design`: task ``i``'s initial configurations, best first;
* :meth:`Proposer.incumbents`: encoded configurations placed in task ``i``'s initial swarm;
* :meth:`Proposer.search_among`: the encoded configurations task ``i``'s next search chooses from
  by the acquisition, or None to search its whole space;
* :meth:`Proposer.acquisition`: what that search maximises, or None for the expected improvement.

:class:`Proposer` is today's multitask search (a Latin hypercube after the problem's default,
every task's best in the swarm, cross-task picks on listed domains). Other behaviour is a
subclass overriding one question, given to the tuner as ``Tuner(..., proposer=...)`` or
``gt.tune(..., proposer=...)``: an instance, or the name it was registered under with
:func:`register_proposer` (``bench/suite.py --proposer NAME`` loads ``bench/proposers/NAME.py``,
which registers it, without touching gptask). The source-aware proposer lives in
:mod:`gptask.tuning.sourced`, the new-task one of TLA2 in :mod:`gptask.transfer.tla2`.

A proposer reads the tuner through the :class:`TunerView` it is bound to (:meth:`Proposer.bind`,
called once by the tuner before it asks anything); it writes nothing to the history.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from itertools import islice
from typing import Any, Protocol

import numpy as np

from ..problem.definition import Problem
from ..model.surrogate.data import usable
from ..data.trials import Trial, params_key
from .crosstask import cross_task_picks
from .probe import probe_rows, stalled_for
from ..propose.proposals import initial_design
from .settings import (CONSENSUS_EVERY, CONSENSUS_FIRST, CONSENSUS_WINDOW, LOCAL_PROBE_AFTER, SOURCE_SEARCH,
                       STAGE_INITIAL, rng)

__all__ = ["Proposer", "TunerView", "register_proposer", "make_proposer", "proposer_names", "designs_first",
           "consensus_window"]


class TunerView(Protocol):
    """What a proposer may read of its tuner (:class:`gptask.tuning.tuner.Tuner` has it all)."""

    problem: Problem
    tasks: list[dict]
    n_tasks: int
    n_initial: int
    budget: int
    seed: int
    pso_particles: int
    defaults: list[dict | None]

    @property
    def model(self) -> Any: ...

    def trials_of(self, i: int) -> list[Trial]: ...

    def describe_constraints(self, i: int) -> str: ...


class Proposer:
    """Today's multitask proposals (module docstring); subclass it and override a question."""

    #: the name it is registered under (informative; the registry's key is what selects it)
    name = "default"

    def __init__(self, local_probe_after: int | None = LOCAL_PROBE_AFTER) -> None:
        if local_probe_after is not None and (isinstance(local_probe_after, bool)
                                              or not isinstance(local_probe_after, (int, np.integer))
                                              or local_probe_after < 1):
            raise ValueError(f"local_probe_after must be None or an integer >= 1, got {local_probe_after!r}")
        self._tuner: TunerView | None = None
        #: searched runs without improvement after which a task probes its incumbent's neighbours
        #: (gptask.tuning.probe); None: never
        self.local_probe_after = None if local_probe_after is None else int(local_probe_after)
        # task -> the configurations (encoded, (m, D)) its probe offered, this round: as configurations, since
        # each task's domain numbers its rows its own way (the allowed configurations may depend on the task)
        self._probe_round: dict[int, np.ndarray] = {}
        self._probed_at: set[tuple[int, int]] = set()  # (task, its number of trials) at each probe

    def bind(self, tuner: TunerView) -> None:
        """Called once by the tuner that asks: the proposer reads ``tuner`` from now on. A proposer
        serves one tuner: binding it to a second one is refused."""
        if self._tuner is not None and self._tuner is not tuner:
            raise ValueError(f"proposer {self.name!r} already serves another tuner: make one proposer per tuner")
        self._tuner = tuner

    @property
    def tuner(self) -> TunerView:
        """The tuner this proposer serves (after :meth:`bind`)."""
        if self._tuner is None:
            raise RuntimeError(f"proposer {self.name!r} is not bound to a tuner yet")
        return self._tuner

    def proposes_for(self, i: int) -> bool:
        """Whether task ``i`` takes new trials (every task here)."""
        return True

    def initial_design(self, i: int) -> list[dict]:
        """Task ``i``'s ``n_initial`` initial configurations, deterministic in the seed (the tuner
        asks once per task and keeps the answer): the problem's default first when it has one, then
        the task's own Latin hypercube of feasible points."""
        tu = self.tuner
        lhs = initial_design(tu.problem, tu.tasks[i], tu.n_initial, rng(tu.seed, STAGE_INITIAL, i),
                             tu.describe_constraints(i))
        default = tu.defaults[i]
        if default is not None:
            lhs = [default] + [p for p in lhs if params_key(p) != params_key(default)][: tu.n_initial - 1]
        return lhs

    def incumbents(self, i: int) -> np.ndarray | None:
        """Encoded configurations (m, D) placed in task ``i``'s initial swarm: its own best first,
        then the other tasks' (transfer); None when no task has a measured value."""
        tu = self.tuner
        best = []
        for j in [i] + [j for j in range(tu.n_tasks) if j != i]:
            ok = [t for t in tu.trials_of(j) if usable(t)]
            if ok:
                best.append(min(ok, key=lambda t: t.value).params)
        return tu.problem.param_space.encode(best[: max(1, tu.pso_particles // 4)]) if best else None

    def search_among(self, i: int) -> np.ndarray | None:
        """Encoded configurations (m, D) that task ``i``'s next search chooses from by the
        acquisition, None for its whole space: the cross-task picks of
        :mod:`gptask.tuning.crosstask` (listed or enumerated domains only); otherwise, with
        ``local_probe_after`` set, a stalled task's local probe (:mod:`gptask.tuning.probe`). The
        tuner asks it for every task of a search round, in task order, on every MPI rank, before
        the searches are spread over the ranks (a memory of the round is the same everywhere)."""
        found = self._cross_task_picks(i)
        if found is None:
            return None
        picks, mine, domain = found
        if picks is not None or self.local_probe_after is None or domain is None:
            return picks
        return self._local_probe(i, mine, domain)

    def _cross_task_picks(self, i: int) -> tuple[np.ndarray | None, list[Trial], Any] | None:
        """Task ``i``'s cross-task picks (:func:`~gptask.tuning.crosstask.cross_task_picks`, or
        None), its trials and its domain, for :meth:`search_among` and its overrides; None before
        the first model."""
        tu = self.tuner
        if tu.model is None:
            return None
        mine = tu.trials_of(i)
        searched = sum(1 for t in mine if t.source == SOURCE_SEARCH)
        domain = tu.problem.domain(tu.tasks[i])
        return cross_task_picks(tu.model, i, searched, domain), mine, domain

    def _local_probe(self, i: int, mine: list[Trial], domain: Any) -> np.ndarray | None:
        """The rows (m, D) of task ``i``'s local probe (gptask.tuning.probe), or None: the task is
        not stalled, probed on its previous search, or has run every neighbour of its incumbent."""
        tu = self.tuner
        assert self.local_probe_after is not None
        if i in self._probe_round:  # every task asked once: a new round
            self._probe_round = {}
        last = [k for k, t in enumerate(mine) if t.source == SOURCE_SEARCH]
        since, best = stalled_for(mine)
        if best is None or since < self.local_probe_after or (last and (i, last[-1]) in self._probed_at):
            return None
        space = tu.problem.param_space
        inc = domain.rows_of(space.encode([best]))
        if not len(inc):
            return None
        seen: set[int] = set()
        for j in range(tu.n_tasks):
            ran = tu.trials_of(j)
            if ran:
                seen |= set(domain.rows_of(space.encode([t.params for t in ran])).tolist())
            seen |= set(domain.rows_of(self._probe_round.get(j)).tolist())
        own = domain.rows_of(space.encode([t.params for t in mine])).tolist()
        rows = probe_rows(domain, int(inc[0]), own, seen)
        if not rows:
            return None
        offer = domain.encode(np.array(rows, dtype=np.int64))
        self._probe_round[i] = offer
        self._probed_at.add((i, len(mine)))
        return offer


    def acquisition(self, i: int, model: Any) -> Callable[[np.ndarray], np.ndarray] | None:
        """The function of encoded configurations (n, D) -> (n,) that task ``i``'s next search
        maximises on ``model`` (the search view's LCM, pending trials as fantasies), for a problem
        with one modelled output; None here: the expected improvement (averaged over the Laplace
        draws when there are some)."""
        return None

    def design_open(self, i: int) -> bool:
        """Whether task ``i``'s initial design still takes points (always here; a cost-aware
        proposer ends a design early)."""
        return True

    def design_size(self, i: int) -> int:
        """How many design runs task ``i`` takes (``n_initial`` here; the fidelity proposer sizes a
        cheapest level's design by the cost budget, CHEAP_DESIGN_SHARE)."""
        return self.tuner.n_initial

    def design_room(self, i: int) -> int | None:
        """How many of task ``i``'s design runs may be claimed so far, counting those already
        claimed (None here: all of them; the fidelity proposer runs a cheap design in stages)."""
        return None

    def design_renewed(self, i: int) -> bool:
        """Whether task ``i``'s initial design changed since the tuner read it (never here; the
        fidelity proposer promotes a target's design in two stages): the tuner reads it again."""
        return False

    def in_model(self, trial: Trial) -> bool:
        """Whether ``trial`` (finished or pending) enters the model (every one here; the fidelity
        proposer leaves out the runs of a level its guard dropped)."""
        return True

    def model_structure(self, n_tasks: int) -> tuple[tuple[int | None, ...], tuple | None]:
        """How the model relates the tuner's ``n_tasks`` tasks beyond the coregionalisation it learns:
        ``(scale_from, levels)`` of :class:`gptask.model.surrogate.ModelSettings`. Here none: every task
        standardised on its own and coregionalised as its own (``((), None)``). The fidelity proposer
        may make the tasks fidelity levels of its base tasks (``LEVEL_MODEL``)."""
        return (), None

    #: what the failure watch's message calls the evaluations it counts
    watched_what = "evaluations"

    def watched_tasks(self) -> list[int] | None:
        """The tasks whose told evaluations the failure watch counts
        (:class:`~gptask.evaluation.failed_runs.FailureWatch`: a run whose first evaluations all
        fail alike is stopped), None for every task that proposes (here). The fidelity proposer
        watches its tuned tasks' target runs only: cheap runs that succeed must not hide a target
        that fails at every run, nor cheap crashes stop a run whose target works."""
        return None

    def place(self, i: int, x: np.ndarray, model: Any) -> int:
        """The task that runs the configuration ``x`` (encoded, (D,)) task ``i``'s search chose on
        ``model`` (the search view, pending runs as fantasies): task ``i`` itself here; the
        fidelity proposer runs it at the level of most information per cost."""
        return i

#: name -> a callable returning a new Proposer (a class, or a function of keyword options)
_REGISTRY: dict[str, Callable[..., Proposer]] = {"default": Proposer}


def register_proposer(name: str, factory: Callable[..., Proposer]) -> None:
    """Make ``factory`` (a :class:`Proposer` subclass, or a function returning a new proposer)
    selectable by ``name`` in ``gt.tune(..., proposer=name)`` and ``Tuner(..., proposer=name)``.
    Registering a name twice replaces the first (so a reloaded module re-registers)."""
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"a proposer's name must be a non-empty string, got {name!r}")
    if not callable(factory):
        raise TypeError(f"proposer {name!r}: the factory must be callable, got {type(factory).__name__}")
    _REGISTRY[name] = factory


def proposer_names() -> list[str]:
    """The registered names, sorted."""
    return sorted(_REGISTRY)


def make_proposer(proposer: Proposer | str | None, options: Mapping[str, Any] | None = None) -> Proposer:
    """A new proposer: ``proposer`` itself (an instance), the default one (None), or a new one of
    the registered ``name`` built with ``options``; an unknown name is refused naming the known ones."""
    if proposer is None:
        proposer = "default"
    if isinstance(proposer, Proposer):
        if options:
            raise ValueError("proposer options go with a proposer's name, not with a proposer object")
        return proposer
    if not isinstance(proposer, str):
        raise TypeError(f"proposer must be a gptask Proposer, a registered name or None, got {type(proposer).__name__}")
    if proposer not in _REGISTRY:
        raise ValueError(f"no proposer named {proposer!r}; registered: {', '.join(proposer_names())} "
                         "(gptask.tuning.proposer.register_proposer adds one)")
    made = _REGISTRY[proposer](**dict(options or {}))
    if not isinstance(made, Proposer):
        raise TypeError(f"proposer {proposer!r}: its factory returned {type(made).__name__}, not a Proposer")
    return made


def designs_first(order: Sequence[dict], design: Sequence[dict], default: dict | None, n: int) -> list[dict]:
    """``n`` configurations: the default (when not None), then ``order``, then ``design``, each once
    (by :func:`~gptask.data.trials.params_key`), in that order."""
    head = ([] if default is None else [default]) + list(order[:n])
    out = list({params_key(p): p for p in head}.values())[:n]
    keys = {params_key(p) for p in out}
    return (out + [p for p in design if params_key(p) not in keys])[:n]


def consensus_window(tuner: TunerView, i: int, order: Sequence[dict] | None) -> np.ndarray | None:
    """What task ``i`` of ``tuner`` with the consensus ``order`` of the sources (best first) chooses
    its next search from: for its first CONSENSUS_FIRST searched runs and every CONSENSUS_EVERY-th
    after, the next CONSENSUS_WINDOW configurations of ``order`` it has not run, encoded (m, D);
    None otherwise (no order, or none left)."""
    mine = tuner.trials_of(i)
    searched = sum(1 for t in mine if t.source == SOURCE_SEARCH)
    if order and (searched < CONSENSUS_FIRST or searched % CONSENSUS_EVERY == 0):
        done = {params_key(t.params) for t in mine}
        window = list(islice((p for p in order if params_key(p) not in done), CONSENSUS_WINDOW))
        if window:
            return tuner.problem.param_space.encode(window)
    return None
