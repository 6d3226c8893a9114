"""The run's header: the values a history keeps beside its trials (its meta table), read and written here alone.

A storage keeps JSON values under string keys (``Storage.get_meta`` / ``set_meta``, the storage's
interface); which key means what is known in this module only. The keys and their JSON, as every
gptask version wrote them (kept byte for byte, so older histories read and older versions read
newer histories)::

    seed               int: the seed of the run that made the history (a resumed run must give the same)
    settings           {"budget": int, "n_initial": int | null, "kernel": str,
                        "failure_model": bool | float, "target": [float | null, ...] | null,
                        "cost_budget": float (a run given one only; absent before session 42)}
    use_log            bool: the primary output's model is fitted on log values
    use_log:<name>     bool: the same, for the modelled output <name> other than the primary one
    model:<name>       {"iteration", "params", "log_likelihood", "data_key"}: the last fit of the
                       output <name> (the primary output's fits are in the models table)
    unit               str: the objective's unit ("s"), for tools that have no Problem
    defaults           [params dict | null, ...]: each task's default configuration
    source_selection   {"fingerprint": [...], "selection": {...}}: the sources judged by select_sources=True
    provenance         any JSON: a provenance record the report shows
    fidelity_layout    {"n_tuned": int, "n_aux": int, "n_levels": int}: the task layout of a run with
                       fidelity levels or auxiliary tasks (gptask.tuning.fidelity; absent in histories
                       of earlier versions, whose layout is read from their runs' roles)
    cost_from          "run_cost" | "cost output" | "wall time": where a run's cost comes from in a run
                       that counts cost (a cost budget or fidelity levels; absent otherwise and before
                       session 44): ``gptask tell`` says when a told run has none
    failure_fit        {"data_key", "log_length_scales", "log_scale"}: the failure classifier's last fit
                       (sha256 of its data, log of each input column's length scale, log latent scale);
                       a resumed run on the same data reuses it instead of fitting (issue 46)

:class:`RunHeader` is what a history holds, read at once (:meth:`RunHeader.read`); the ``write_*``
functions store one value each. ``storage`` is anything with ``get_meta`` and ``set_meta`` (a
storage, or the tuner's mirror of it, which reads on rank 0 and broadcasts).

This module imports nothing from gptask.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

__all__ = ["RunHeader", "MetaStore", "SEED", "SETTINGS", "USE_LOG", "UNIT", "DEFAULTS", "SOURCE_SELECTION",
           "PROVENANCE", "use_log_key", "model_key", "run_settings", "write_seed", "write_settings", "write_use_log",
           "write_unit", "write_defaults", "write_source_selection", "read_use_log", "read_output_model",
           "write_output_model", "stored_unit", "FAILURE_FIT", "read_failure_fit", "write_failure_fit",
           "FIDELITY_LAYOUT", "write_fidelity_layout", "read_fidelity_layout", "COST_FROM", "COST_SOURCES",
           "write_cost_from", "read_cost_from"]

SEED = "seed"
SETTINGS = "settings"
USE_LOG = "use_log"
UNIT = "unit"
DEFAULTS = "defaults"
SOURCE_SELECTION = "source_selection"
PROVENANCE = "provenance"
#: the task layout of a run with fidelity levels or auxiliary tasks
FIDELITY_LAYOUT = "fidelity_layout"
#: where a run's cost comes from, in a run that counts cost
COST_FROM = "cost_from"
#: the values of ``cost_from``: the problem's ``run_cost``, its ``"cost"`` output, the run's wall time
COST_SOURCES = ("run_cost", "cost output", "wall time")
#: the failure model's last fitted settings (gptask.model.surrogate.failure_model.FailureModel.settings)
FAILURE_FIT = "failure_fit"


class MetaStore(Protocol):
    def get_meta(self, key: str) -> Any: ...

    def set_meta(self, key: str, value: Any) -> None: ...


def use_log_key(output: str | None = None) -> str:
    """The key of the log transform of ``output`` (None: the primary output)."""
    return USE_LOG if output is None else f"{USE_LOG}:{output}"


def model_key(output: str) -> str:
    """The key of the last fit of the modelled output ``output`` other than the primary one."""
    return f"model:{output}"


@dataclass(frozen=True)
class RunHeader:
    """What a history holds beside its trials (module docstring). seed, use_log, defaults,
    source_selection, provenance: None when not stored; settings: the stored dict as it is ({}
    when none; its values also as the typed properties below); unit: "" when none;
    output_use_log / output_models: per output name asked of :meth:`read` (None when not stored)."""

    seed: int | None = None
    settings: Mapping[str, Any] = field(default_factory=dict)
    use_log: bool | None = None
    unit: str = ""
    defaults: list[dict[str, Any] | None] | None = None
    source_selection: dict[str, Any] | None = None
    provenance: Any = None
    output_use_log: Mapping[str, bool | None] = field(default_factory=dict)
    output_models: Mapping[str, dict | None] = field(default_factory=dict)

    @classmethod
    def read(cls, storage: MetaStore, outputs: Iterable[str] = ()) -> RunHeader:
        """The header of ``storage``, with the transforms and last fits of ``outputs`` (names of
        modelled outputs other than the primary one)."""
        settings = storage.get_meta(SETTINGS)
        unit = storage.get_meta(UNIT)
        defaults = storage.get_meta(DEFAULTS)
        names = list(outputs)
        return cls(seed=storage.get_meta(SEED), settings=settings if isinstance(settings, Mapping) else {},
                   use_log=storage.get_meta(USE_LOG), unit=unit if isinstance(unit, str) else "",
                   defaults=defaults if isinstance(defaults, list) else None,
                   source_selection=storage.get_meta(SOURCE_SELECTION), provenance=storage.get_meta(PROVENANCE),
                   output_use_log={n: read_use_log(storage, n) for n in names},
                   output_models={n: read_output_model(storage, n) for n in names})

    # ---- the settings, typed ----------------------------------------------------------------
    @property
    def budget(self) -> int | None:
        return self.settings.get("budget")

    @property
    def cost_budget(self) -> float | None:
        """The summed run cost at which the run stops (None: no cost budget, or a history before session 42)."""
        value = self.settings.get("cost_budget")
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None

    @property
    def n_initial(self) -> int | None:
        return self.settings.get("n_initial")

    @property
    def kernel(self) -> str | None:
        return self.settings.get("kernel")

    @property
    def failure_model(self) -> bool | float | None:
        return self.settings.get("failure_model")

    @property
    def target(self) -> list[float | None] | None:
        return self.settings.get("target")

    def task_defaults(self, n_tasks: int) -> list[dict[str, Any] | None]:
        """The default configuration of each of ``n_tasks`` tasks (None where unknown)."""
        raw = self.defaults or []
        return [dict(d) if isinstance(d, Mapping) else None for d in raw[:n_tasks]] + \
            [None] * max(0, n_tasks - len(raw))


def run_settings(budget: int, n_initial: int | None, kernel: str, failure_model: bool | float,
                 target: Sequence[float | None] | None, cost_budget: float | None = None) -> dict[str, Any]:
    """The ``settings`` value of a run (its keys in the order every version wrote them; ``cost_budget``,
    the summed run cost at which the run stops, only when given)."""
    out = {"budget": budget, "n_initial": n_initial, "kernel": kernel, "failure_model": failure_model,
           "target": target}
    if cost_budget is not None:
        out["cost_budget"] = float(cost_budget)
    return out


def write_seed(storage: MetaStore, seed: int) -> None:
    storage.set_meta(SEED, seed)


def write_settings(storage: MetaStore, settings: Mapping[str, Any]) -> None:
    """Store ``settings`` (:func:`run_settings`)."""
    storage.set_meta(SETTINGS, dict(settings))


def write_use_log(storage: MetaStore, use_log: bool, output: str | None = None) -> None:
    """Store the log transform of ``output`` (None: the primary output)."""
    storage.set_meta(use_log_key(output), bool(use_log))


def read_use_log(storage: MetaStore, output: str | None = None) -> bool | None:
    """The stored log transform of ``output`` (None: the primary output); None when not stored."""
    return storage.get_meta(use_log_key(output))


def write_output_model(storage: MetaStore, output: str, iteration: int, params: dict, log_likelihood: float,
                       data_key: str) -> None:
    """Store the last fit of the modelled output ``output`` (not the primary one)."""
    storage.set_meta(model_key(output), {"iteration": int(iteration), "params": params,
                                         "log_likelihood": float(log_likelihood), "data_key": data_key})


def read_output_model(storage: MetaStore, output: str) -> dict | None:
    """The stored last fit of the modelled output ``output``; None when there is none."""
    return storage.get_meta(model_key(output))


def write_failure_fit(storage: MetaStore, settings: dict) -> None:
    """Store the failure model's last fitted settings (JSON values: its data key, log length scales
    and log scale)."""
    storage.set_meta(FAILURE_FIT, dict(settings))


def read_failure_fit(storage: MetaStore) -> dict | None:
    """The stored settings of the failure model's last fit; None when there are none."""
    got = storage.get_meta(FAILURE_FIT)
    return got if isinstance(got, dict) else None


def write_unit(storage: MetaStore, unit: str) -> None:
    """Store the objective's unit (nothing when it is empty)."""
    if unit:
        storage.set_meta(UNIT, unit)


def stored_unit(storage: MetaStore) -> str:
    """The unit a history recorded ("" when none)."""
    raw = storage.get_meta(UNIT)
    return raw if isinstance(raw, str) else ""


def write_defaults(storage: MetaStore, defaults: Sequence[Mapping[str, Any] | None]) -> None:
    """Store each task's default configuration (a params dict or None per task index)."""
    storage.set_meta(DEFAULTS, list(defaults))


def write_source_selection(storage: MetaStore, fingerprint: list, selection: Mapping[str, Any]) -> None:
    """Store the sources judged by ``select_sources=True``: the ``fingerprint`` of the sources judged
    and the selection (``SourceSelection.to_json()``)."""
    storage.set_meta(SOURCE_SELECTION, {"fingerprint": fingerprint, "selection": selection})


def write_fidelity_layout(storage: MetaStore, n_tuned: int, n_aux: int, n_levels: int) -> None:
    """Store the task layout of a run with fidelity levels or auxiliary tasks: its tasks are
    ``n_levels`` levels of ``n_tuned`` tuned then ``n_aux`` auxiliary tasks, the sources' after them."""
    storage.set_meta(FIDELITY_LAYOUT, {"n_tuned": int(n_tuned), "n_aux": int(n_aux), "n_levels": int(n_levels)})


def read_fidelity_layout(storage: MetaStore) -> dict[str, int] | None:
    """The stored task layout (:func:`write_fidelity_layout`), or None (none stored, or not one)."""
    got = storage.get_meta(FIDELITY_LAYOUT)
    keys = ("n_tuned", "n_aux", "n_levels")
    if not isinstance(got, Mapping) or not all(isinstance(got.get(k), int) for k in keys):
        return None
    return {k: int(got[k]) for k in keys}


def write_cost_from(storage: MetaStore, source: str) -> None:
    """Store where a run's cost comes from (one of :data:`COST_SOURCES`)."""
    if source not in COST_SOURCES:
        raise ValueError(f"cost_from must be one of {COST_SOURCES}, got {source!r}")
    storage.set_meta(COST_FROM, source)


def read_cost_from(storage: MetaStore) -> str | None:
    """Where a run's cost comes from (:func:`write_cost_from`), or None (not stored, or not one)."""
    got = storage.get_meta(COST_FROM)
    return got if got in COST_SOURCES else None
