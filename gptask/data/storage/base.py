"""The one interface every history backend implements, and the errors it raises.

A history holds one tuning run: the problem's signature, the task list, every trial and the
model hyperparameters of each fit. It is the single source of truth: a trial exists once
:meth:`Storage.add_trials` has written it as PENDING, and it changes state only through
:meth:`Storage.finish` (PENDING -> COMPLETE | FAILED | CENSORED, exactly once). Several processes may
share one history; every method that writes does so in one transaction, so two processes never
claim the same configuration and a per-task budget holds across all of them.
"""

from __future__ import annotations

import abc
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ...core.signatures import signature_differences
from ..trials import Proposal, Status, Trial
from .owner import Owner

__all__ = ["Storage", "json_text", "normalised", "stored_json", "HistoryError", "NotAHistory", "HistoryMismatch", "SchemaTooNew", "SchemaTooOld", "UnknownTrial",
           "TrialNotPending", "HistoryDamaged", "HistoryWriteFailed"]


def json_text(obj: Any) -> str:
    """``obj`` as the JSON text a history stores (sorted keys; numpy scalars and arrays as numbers and lists)."""
    return json.dumps(obj, sort_keys=True, default=_json_default)


def _json_default(obj: Any) -> Any:
    if hasattr(obj, "tolist"):  # numpy scalars and arrays, without importing numpy here
        return obj.tolist()
    raise TypeError(f"cannot store {type(obj).__name__} {obj!r} in a history")


def normalised(obj: Any) -> Any:
    """``obj`` as it reads back from a history (a JSON round trip): compare with this."""
    return json.loads(json_text(obj))


class HistoryError(ValueError):
    """Base of the history errors below."""


class NotAHistory(HistoryError):
    """The file is not a gptask history (not SQLite, or an unrelated database)."""


class HistoryDamaged(HistoryError):
    """The history is damaged (malformed pages, truncated, a row or table changed by hand or by another
    program): it cannot be read as it is."""


def mismatch_text(stored: Any, mine: Any) -> str:
    """What differs between a history's stored problem signature and a problem's (both normalised), in words
    (gptask.core.signatures); a campaign with sources stores its problem with a ``machine`` task dimension, and
    the words say so when that is the difference."""
    if not isinstance(stored, dict) or not isinstance(mine, dict):
        return "the signatures differ"
    diffs = signature_differences(stored, mine, theirs="the history's")
    text = "; ".join(diffs)
    if len(diffs) == 1 and diffs[0].startswith("task dimension machine:") and diffs[0].endswith("problem's (none)"):
        text += (" (a campaign with sources: its tasks are (task, machine) pairs; resume it with gt.tune or "
                 "gptask tune and its sources)")
    return text


def stored_json(text: Any, what: str, where: str) -> Any:
    """``json.loads`` of a text read from the history ``where``; HistoryDamaged naming the history and
    ``what`` the text is (a row's column) when it is not JSON (a row changed by hand or by another program)."""
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        shown = repr(text) if len(repr(text)) <= 60 else repr(text)[:57] + "..."
        raise HistoryDamaged(f"history {where} is damaged: {what} is not JSON ({shown}); it was changed by hand or by "
                             "another program: restore it from a copy") from None


class HistoryWriteFailed(HistoryError):
    """A write to the history failed (the disk is full, an I/O error, a lock held too long); what was
    written before it is kept."""


class HistoryBusy(HistoryWriteFailed):
    """Another process held the history's lock (SQLite's SQLITE_BUSY)."""


class HistoryMismatch(HistoryError):
    """The history belongs to a different problem, task set or seed. ``where``: the history as
    messages name it (a URL without its password); ``stored``: the problem signature it holds, when
    the mismatch is one of signatures (None otherwise)."""

    def __init__(self, message: str, where: str = "", stored: dict | None = None) -> None:
        super().__init__(message)
        self.where, self.stored = where, stored


class SchemaTooNew(HistoryError):
    """The history was written by a newer gptask with a schema this version cannot read."""


class SchemaTooOld(HistoryError):
    """The history has an older schema that this gptask cannot upgrade here (a layout it has no
    upgrade for, or a history opened read-only that an upgrade would have to write)."""


class UnknownTrial(HistoryError):
    """A trial id that this history does not hold."""


class TrialNotPending(HistoryError):
    """A trial that was already told (its result is final)."""


class TrialHeld(HistoryError):
    """A PENDING trial that a live tuner process is running: releasing it would run its
    configuration twice."""


#: a PENDING trial handed out this many times whose holder died (or whose lease expired) each time
#: is recorded as failed instead of being handed out again: its evaluation may be what kills the
#: process running it (a crash, the out-of-memory killer), and a resume would run it forever
MAX_ATTEMPTS = 3


#: the tables of a history and their columns, as both backends store them (gptask.data.storage.copy copies them in this order)
COPY_TABLES: dict[str, tuple[str, ...]] = {
    "tasks": ("task_index", "task", "closed"),
    "trials": ("id", "task_index", "params", "params_key", "status", "value", "samples", "reason", "extra", "source",
               "created", "finished", "duration", "attempts", "owner", "lease_expires", "objectives"),
    "models": ("id", "iteration", "created", "log_likelihood", "params", "data_key"),
    "confirmations": ("id", "task_index", "params", "status", "value", "samples", "reason", "created", "duration",
                      "objectives"),
    "machines": ("id", "key", "record", "created"),
    "trial_machines": ("trial_id", "machine_id"),
}
#: meta rows a copy carries over (the run's own state is every "user:" key); format,
#: schema_version and uid (:meth:`Storage.uid`) are the destination's own
COPIED_META = ("signature", "created", "upgraded_from")
#: the meta key of :meth:`Storage.uid`
UID_KEY = "uid"



def meta_rows(rows: dict[str, Any]) -> list[tuple[str, str]]:
    """The meta rows of ``rows`` that a copy writes."""
    return [(k, v) for k, v in rows["meta"] if k in COPIED_META or k.startswith("user:")]


class Storage(abc.ABC):
    """A run's history. ``path`` is where it lives (None: in memory)."""

    path: Path | None

    # ---- the run -----------------------------------------------------------------------------
    @property
    @abc.abstractmethod
    def signature(self) -> dict[str, Any]:
        """The problem signature the history was created for."""

    @abc.abstractmethod
    def get_meta(self, key: str) -> Any:
        """A JSON value of the run's state (seed, output transform, settings), or None."""

    @abc.abstractmethod
    def set_meta(self, key: str, value: Any) -> None:
        """Store a JSON value under ``key`` (committed at once)."""

    def uid(self) -> str:
        """This history's identifier: 32 random hex digits, made by the first call on a history
        opened for writing (in one transaction: every process sharing the history reads the same
        one) and kept; not carried by a copy (:data:`COPIED_META`), so a copy is another history.
        Names the history's folder in a journal folder that several histories may share
        (:mod:`gptask.evaluation.journal`)."""
        raise NotImplementedError(f"{type(self).__name__} keeps no identifier")

    # ---- tasks -------------------------------------------------------------------------------
    @abc.abstractmethod
    def tasks(self) -> list[dict[str, Any]]:
        """The task dicts, in task-index order."""

    @abc.abstractmethod
    def set_tasks(self, tasks: Sequence[Mapping[str, Any]]) -> None:
        """Record the task list; the stored list may only be extended (else HistoryMismatch)."""

    @abc.abstractmethod
    def closed_tasks(self) -> dict[int, str]:
        """Tasks that take no new trials, with the reason (e.g. every configuration was run)."""

    @abc.abstractmethod
    def close_task(self, task_index: int, reason: str) -> None:
        """Mark task ``task_index`` as taking no new trials, saying why."""

    # ---- trials ------------------------------------------------------------------------------
    @abc.abstractmethod
    def trials(self, task_index: int | None = None, status: Status | None = None) -> list[Trial]:
        """Trials in id order, optionally of one task and/or one status."""

    def trials_after(self, last_id: int, ids: Sequence[int] = ()) -> list[Trial]:
        """What may have changed for a reader that read every trial up to id ``last_id`` and saw
        those of ``ids`` unfinished: the trials with a larger id and those of ``ids``, in id order.
        A finished trial never changes again (a trial takes exactly one result), and trial ids
        become visible in increasing order, so nothing else can differ from what the reader holds."""
        wanted = set(ids)
        return [t for t in self.trials() if t.id > last_id or t.id in wanted]

    @abc.abstractmethod
    def add_trials(self, proposals: Sequence[Proposal], owner: Owner, budget: int | None = None,
                   lease: float | None = None) -> list[Trial | None]:
        """Claim ``proposals`` for ``owner`` in one transaction; one entry per proposal.

        A proposal becomes a new PENDING trial unless its task already holds ``budget`` trials (any
        state) or the same configuration: then the entry is None, except when that configuration is
        a PENDING trial whose holder is dead, which is handed to ``owner`` (attempts + 1) instead.
        lease: seconds after which the claim lapses (None: held while the owner is alive).
        """

    @abc.abstractmethod
    def import_trials(self, trials: Sequence[Trial],
                      machines: Sequence[Mapping[str, Any] | None] | None = None) -> list[Trial | None]:
        """Write trials that finished elsewhere (measurements imported from a file or another tool)
        directly in their final state, in one transaction; one entry per trial.

        Each trial must be finished (COMPLETE or CENSORED with a finite value, FAILED without one)
        and name a task of the history; its ``id``, ``owner`` and ``attempts`` are not used (the
        history numbers it). The entry is the stored trial, or None when its task already holds
        the same configuration (the history keeps what it has: importing a file twice adds
        nothing). Imported trials count in a task's budget like any other. machines: one machine
        record (:mod:`gptask.data.provenance`) or None per trial, stored with it.
        """

    @abc.abstractmethod
    def reclaim(self, owner: Owner, limit: int | None = None, task_indices: Sequence[int] | None = None,
                lease: float | None = None) -> list[Trial]:
        """Hand PENDING trials whose holder is dead or released (oldest first, at most ``limit``,
        of ``task_indices`` when given) to ``owner``. A trial whose holder died (or whose lease
        expired) after it had been handed out MAX_ATTEMPTS times is recorded as failed, with the
        reason, instead (a released trial is handed out again whatever its attempts)."""

    @abc.abstractmethod
    def finish(self, trial_id: int, status: Status, value: float | None = None, samples: Sequence[float] = (),
               reason: str = "", extra: Mapping[str, Any] | None = None, duration: float | None = None,
               expected: Trial | None = None, machine: Mapping[str, Any] | None = None,
               values: Mapping[str, float] | None = None) -> Trial:
        """Record the result of PENDING trial ``trial_id`` and return the finished trial.

        machine: the record of the machine it ran on (:mod:`gptask.data.provenance`), stored once per
        history and referenced by the trial, in the same transaction; None records none.
        values: every output of a problem with named outputs (``value`` is the primary one's),
        stored unless the trial failed.

        Raises UnknownTrial for an id the history does not hold, TrialNotPending when it was
        already told, HistoryMismatch when ``expected`` (the trial as the caller knows it) names
        another task or configuration than the stored one.
        """

    @abc.abstractmethod
    def release(self, owner: Owner | None = None, ids: Sequence[int] | None = None, force: bool = False) -> list[int]:
        """Give PENDING trials back (those of ``owner`` and/or with ``ids``): they stay PENDING and
        are re-proposed by the next ask. Returns the ids released. A trial of ``ids`` that a tuner
        process still holds (alive on this host, or on another host while its lease runs) raises
        TrialHeld (it would run twice) unless ``force``."""

    # ---- machines (gptask.data.provenance) ----------------------------------------------------------
    def machines(self) -> dict[int, dict[str, Any]]:
        """The machine records the history's trials were measured on, by id (``Trial.machine``)."""
        return {}

    def add_machine(self, record: Mapping[str, Any]) -> int:
        """Store a machine record once (an equal record gets the same id) and return its id."""
        raise NotImplementedError(f"{type(self).__name__} does not store machine records")

    # ---- confirmation runs (not trials) ------------------------------------------------------
    def add_confirmation(self, task_index: int, params: Mapping[str, Any], status: Status,
                         value: float | None = None, samples: Sequence[float] = (), reason: str = "",
                         duration: float | None = None, values: Mapping[str, float] | None = None) -> Trial:
        """Record one finished confirmation run (a re-measurement of an evaluated configuration by
        ``TuningResult.recommend(i, confirm=k)``) and commit it. Confirmation runs are not trials:
        they claim nothing, count against no budget and no model sees them. values: every output of
        a problem with named outputs (as for :meth:`finish`). Returns the run as a
        Trial record (source :data:`~gptask.data.trials.CONFIRM_SOURCE`, ids of their own)."""
        raise NotImplementedError(f"{type(self).__name__} does not store confirmation runs")

    def confirmations(self, task_index: int | None = None) -> list[Trial]:
        """The confirmation runs in the order they were recorded, optionally of one task."""
        return []

    # ---- models ------------------------------------------------------------------------------
    @abc.abstractmethod
    def add_model(self, iteration: int, params: Mapping[str, Any], log_likelihood: float | None,
                  data_key: str | None = None) -> None:
        """Store fitted hyperparameters; ``data_key`` identifies the data they were fitted on."""

    @abc.abstractmethod
    def last_model(self) -> dict[str, Any] | None:
        """The last stored model: {"iteration", "log_likelihood", "params", "data_key"} or None."""

    @abc.abstractmethod
    def models(self) -> list[dict[str, Any]]:
        """Every stored model's {"iteration", "created", "log_likelihood", "data_key"}."""

    def fit_diagnostics(self) -> list[dict[str, Any]]:
        """Every stored model's fit diagnostics (``params["diagnostics"]``: LCM.fit_record, issue 45), in the
        order stored; {} for a model stored without them. A storage that does not keep them returns []."""
        return []

    @abc.abstractmethod
    def close(self) -> None:
        """Release the connection (idempotent)."""

    def __enter__(self) -> "Storage":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
