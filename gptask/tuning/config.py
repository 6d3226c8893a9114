"""The tuner's settings as one typed, checked object: :class:`TunerSettings`.

``Tuner(problem, tasks, budget, n_initial, seed, history, settings)`` takes them whole;
``Tuner(..., pso_iters=10)`` and ``gt.tune(..., pso_iters=10)`` build them from keywords (a name
that is not a field is a ``TypeError`` naming it, never ignored). Every field is checked when the
object is made, before any history is opened or any run made.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..core.checks import check_int
from ..evaluation.failed_runs import AUTO
from ..model.numerics.backend import check_device
from ..model.numerics.defaults import SURROGATE_KERNEL
from ..model.surrogate.failure_model import success_threshold

__all__ = ["TunerSettings", "KERNELS", "OUTPUT_TRANSFORMS"]

#: the kernels of the LCM (gptask.model.numerics.kernels) and the output transforms a tuner takes
KERNELS = ("rbf", "matern52")
OUTPUT_TRANSFORMS = ("auto", "log", "none")


@dataclass(frozen=True)
class TunerSettings:
    """How a tuner models and searches (the bookkeeping's arguments, tasks, budget, history and
    the like, are the Tuner's own).

    n_latent: latent functions of the LCM (None: min(tasks, the default)); kernel: "rbf" or
    "matern52"; restarts, refit_restarts: starts of the first fit and of refits; pso_particles,
    pso_iters: the acquisition search's swarm; output_transform: "auto" (log of positive outputs
    or not, decided once by likelihood), "log" or "none"; refit_every, refit_on_drift: the
    :class:`~gptask.model.surrogate.updates.RefitPolicy` (1, False: a full warm-started fit whenever
    results arrived; larger or None: block appends in between); max_failures: when the first
    evaluations told all failed alike, stop ("auto", a number, None or 0: never;
    :mod:`gptask.evaluation.failed_runs`); provenance: the machine record stored with every trial ("auto", a
    record or label, None); mix_machines: accept this machine's trials in a history of another;
    failure_model: True, False or a probability p in [1/2, 1) (:class:`~gptask.tuning.Tuner`);
    device: None or "cpu" (numpy), or a torch device such as "cuda"; ei_draws: the searches' log-EI
    averaged over the fit and this many Laplace draws of its hyperparameters, redrawn at every fit
    (0: the fit alone, the default; issue 45, bench/results/suite.md).
    """

    n_latent: int | None = None
    kernel: str = SURROGATE_KERNEL
    restarts: int = 3
    refit_restarts: int = 1
    pso_particles: int = 40
    pso_iters: int = 40
    output_transform: str = "auto"
    refit_every: int | None = 1
    refit_on_drift: bool = False
    max_failures: int | str | None = AUTO
    provenance: Any = "auto"
    mix_machines: bool = False
    failure_model: bool | float = True
    device: str | None = None
    ei_draws: int = 0

    def __post_init__(self) -> None:
        if self.n_latent is not None:
            check_int("n_latent", self.n_latent, 1)
        check_int("restarts", self.restarts, 1)
        check_int("refit_restarts", self.refit_restarts, 1)
        check_int("pso_particles", self.pso_particles, 2)
        check_int("pso_iters", self.pso_iters, 1)
        check_int("ei_draws", self.ei_draws, 0)
        if self.output_transform not in OUTPUT_TRANSFORMS:
            raise ValueError(f"output_transform must be 'auto', 'log' or 'none', got {self.output_transform!r}")
        if self.kernel not in KERNELS:
            raise ValueError(f"kernel must be 'rbf' or 'matern52', got {self.kernel!r}")
        success_threshold(self.failure_model)
        # True, False or p as given, in the history's JSON
        object.__setattr__(self, "failure_model", bool(self.failure_model)
                           if isinstance(self.failure_model, (bool, np.bool_)) else float(self.failure_model))
        object.__setattr__(self, "mix_machines", bool(self.mix_machines))
        object.__setattr__(self, "refit_on_drift", bool(self.refit_on_drift))
        object.__setattr__(self, "device", check_device(self.device))

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        """The names of the fields, in order."""
        return tuple(f.name for f in dataclasses.fields(cls))

    def replace(self, **changes: Any) -> "TunerSettings":
        """A copy with ``changes`` (checked as a new object)."""
        return dataclasses.replace(self, **changes)
