"""What both history backends (SQLite, PostgreSQL) read and write alike: a trial's and a confirmation
run's row as a :class:`~gptask.data.trials.Trial`, the checks of a tell, the ``objectives`` column,
a lease, the reason a trial is given up, a confirmation run's row to add, the checks of a release. One definition, so the two backends cannot drift."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any

from ..trials import CONFIRM_SOURCE, Proposal, Status, Trial, check_value
from .base import HistoryDamaged, TrialHeld, TrialNotPending, UnknownTrial, json_text, stored_json
from .owner import Owner

__all__ = ["trial_from_row", "confirmation_from_row", "checked_tell", "check_imported", "check_claim", "objectives_text", "check_lease",
           "given_up_reason", "confirmation_values", "check_release", "log_reclaimed", "trials_where"]


def trial_from_row(row: Sequence[Any], tasks: list[dict[str, Any]], where: str) -> Trial:
    """A trial from its row (the trial columns, then its machine id or None) and the tasks of the history
    ``where``; HistoryDamaged naming the history and the trial when a column cannot be read."""
    (id_, ti, params, status, value, samples, reason, extra, source, created, finished, duration,
     attempts, owner, objectives, machine) = row

    def column(name: str, text: Any) -> Any:
        return stored_json(text, f"column {name} of trial {id_}", where)

    return Trial(id=int(id_), task_index=int(ti), task=tasks[ti] if 0 <= ti < len(tasks) else {},
                 params=column("params", params), status=_status(status, f"trial {id_}", where), value=value,
                 samples=column("samples", samples), reason=reason, extra=column("extra", extra), source=source,
                 created=created, finished=finished, duration=duration, attempts=int(attempts), owner=owner,
                 values=column("objectives", objectives) if objectives else {},
                 machine=None if machine is None else int(machine))


def confirmation_from_row(row: Sequence[Any], tasks: list[dict[str, Any]], where: str) -> Trial:
    """A confirmation run from its row and the tasks of the history ``where`` (source ``CONFIRM_SOURCE``)."""
    id_, ti, params, status, value, samples, reason, created, duration, objectives = row

    def column(name: str, text: Any) -> Any:
        return stored_json(text, f"column {name} of confirmation run {id_}", where)

    return Trial(id=int(id_), task_index=int(ti), task=tasks[ti] if 0 <= ti < len(tasks) else {},
                 params=column("params", params), status=_status(status, f"confirmation run {id_}", where),
                 value=value, samples=column("samples", samples), reason=reason, source=CONFIRM_SOURCE,
                 created=created, finished=created, duration=duration,
                 values=column("objectives", objectives) if objectives else {})


def _status(text: Any, what: str, where: str) -> Status:
    try:
        return Status(text)
    except ValueError:
        raise HistoryDamaged(f"history {where} is damaged: the status of {what} is {text!r}, not one of "
                             f"{[s.value for s in Status]}; it was changed by hand or by another program") from None


def checked_tell(trial_id: Any, status: Any, value: Any, duration: Any,
                 values: Mapping[str, float] | None) -> tuple[Status, float | None, str | None]:
    """The checked (status, value, objectives column) of a tell, before any write: a finished status,
    an integer id, a finite value unless failed (a failed trial keeps none), a duration >= 0 or None;
    ValueError or TypeError naming what is wrong."""
    status = Status.parse(status)
    objectives = objectives_text(None if status is Status.FAILED else values)
    if not status.finished:
        raise ValueError(f"a trial is told with a finished status (complete, failed, censored), got {status.value!r}")
    if isinstance(trial_id, bool) or not isinstance(trial_id, int):
        raise TypeError(f"trial id must be an integer, got {trial_id!r}")
    if status is Status.FAILED:
        value = None
    else:
        value, why = check_value(value)
        if value is None:
            raise ValueError(f"a {status.value} trial needs a finite value: {why}")
    if duration is not None and not (isinstance(duration, (int, float)) and duration >= 0):
        raise ValueError(f"duration must be a number of seconds >= 0 or None, got {duration!r}")
    return status, value, objectives


def check_claim(proposals: Sequence[Any], lease: float | None) -> None:
    """TypeError or ValueError naming what is wrong with a claim: Proposals only, a positive lease or None."""
    for p in proposals:
        if not isinstance(p, Proposal):
            raise TypeError(f"add_trials takes Proposals, got {p!r}")
    check_lease(lease)


def check_imported(trials: Sequence[Trial], machines: Sequence[Mapping[str, Any] | None] | None) -> None:
    """ValueError or TypeError naming what is wrong with trials to import: one machine record per
    trial when records are given, Trials, finished, with a finite value unless failed."""
    if machines is not None and len(machines) != len(trials):
        raise ValueError(f"import_trials: {len(machines)} machine records for {len(trials)} trials")
    for t in trials:
        if not isinstance(t, Trial):
            raise TypeError(f"import_trials takes Trials, got {t!r}")
        if not t.status.finished:
            raise ValueError(f"an imported trial must be finished (complete, failed or censored), got "
                             f"{t.status.value!r} for task {t.task_index} {dict(t.params)}")
        if t.status is not Status.FAILED and check_value(t.value)[0] is None:
            raise ValueError(f"an imported {t.status.value} trial needs a finite value: {check_value(t.value)[1]} "
                             f"(task {t.task_index} {dict(t.params)})")


def objectives_text(values: Mapping[str, float] | None) -> str | None:
    """The ``objectives`` column of a trial's outputs: JSON of finite numbers, NULL for none."""
    if not values:
        return None
    out = {}
    for k, v in values.items():
        number, why = check_value(v)
        if number is None:
            raise ValueError(f"output {k!r} of a finished trial must be a finite number: {why}")
        out[str(k)] = number
    return json_text(out)


def check_lease(lease: float | None) -> None:
    """ValueError unless ``lease`` is a positive number of seconds or None."""
    if lease is not None and (isinstance(lease, bool) or not isinstance(lease, (int, float)) or not lease > 0):
        raise ValueError(f"lease must be a positive number of seconds or None, got {lease!r}")


def given_up_reason(holder: str, attempts: int) -> str:
    """Why a PENDING trial is recorded as failed instead of being handed out again."""
    owner = Owner.read(holder)
    who = "an unreadable holder" if owner is None else owner.describe()
    return (f"handed out {attempts} times and every holder died or let its lease expire before telling a result "
            f"(the last: {who}): the evaluation may crash or kill the process running it (a segfault, the "
            "out-of-memory killer); not run again")


def confirmation_values(task_index: int, params: Mapping[str, Any], status: Any, value: float | None,
                        samples: Sequence[float], reason: str, duration: float | None,
                        values: Mapping[str, float] | None) -> tuple[Any, ...]:
    """The row of a confirmation run to add (task_index, params, status, value, samples, reason,
    created, duration, objectives: the ``confirmations`` table's columns in order); ValueError unless
    it is complete with a finite value, or failed."""
    status = Status.parse(status)
    objectives = objectives_text(None if status is Status.FAILED else values)
    if status not in (Status.COMPLETE, Status.FAILED):
        raise ValueError(f"a confirmation run is complete or failed, got status {status.value!r}")
    if status is Status.COMPLETE and check_value(value)[0] is None:
        raise ValueError(f"a complete confirmation run needs a finite value, got {value!r}")
    return (int(task_index), json_text(dict(params)), status.value, None if value is None else float(value),
            json_text([float(v) for v in samples]), str(reason), time.time(),
            None if duration is None else float(duration), objectives)


def check_release(trial_id: int, row: Sequence[Any] | None, running: str | None, force: bool, where: str) -> None:
    """Raise what releasing trial ``trial_id`` meets: UnknownTrial (``row``, its status, owner and
    lease, is None: not in the history ``where``), TrialNotPending, or TrialHeld when ``running``
    (the description of a live holder, None for none) runs it and the release is not forced."""
    if row is None:
        raise UnknownTrial(f"trial {trial_id} is not in history {where}")
    if row[0] != Status.PENDING.value:
        raise TrialNotPending(f"trial {trial_id} is {row[0]}, not pending: there is nothing to release")
    if running is not None and not force:
        raise TrialHeld(f"trial {trial_id} is being run by {running}: releasing it would run its configuration "
                        "twice; stop that process first (it releases its trials when it stops), or force "
                        "it (release(..., force=True), gptask release --force)")


def log_reclaimed(log: logging.Logger, given_up: Sequence[str], out: Sequence[Trial]) -> None:
    """Log a reclaim on the backend's ``log``: a warning per trial given up, a line for those re-proposed."""
    for text in given_up:
        log.warning("%s", text)
    if out:
        log.info("re-proposing %d trial(s) whose holder died or released them: ids %s", len(out), [t.id for t in out])


def trials_where(task_index: int | None, status: Status | str | None, placeholder: str) -> tuple[str, list[Any]]:
    """The WHERE clause (with a leading space, "" for none) of the trials of one task and/or status
    (the trials table as ``t``), and its arguments; ``placeholder``: the backend's (``?``, ``%s``)."""
    where, args = [], []
    if task_index is not None:
        where.append(f"t.task_index = {placeholder}")
        args.append(int(task_index))
    if status is not None:
        where.append(f"t.status = {placeholder}")
        args.append(Status.parse(status).value)
    return (" WHERE " + " AND ".join(where) if where else ""), args
