"""The step-result journal: a finished run's result kept in a folder until it is committed to the history.

Between an objective's return and the commit of its trial to the history there is a gap: the
result travels back from the executor's worker (a pipe, a future) and waits while the tuner's main
thread fits a model or searches. A campaign killed in that gap (``scancel --signal=KILL``, the OOM
killer, a node lost under the tuner) lost the run, and the resumed campaign ran it again. So the
process that has the result writes it first, as one small JSON file per trial in the history's
journal folder (by default beside a SQLite history, ``<history>.results/trial-<id>.json``; "Where"
below: the trial's id, task and configuration, and
the :class:`~gptask.evaluation.evaluate.Outcome`), atomically (a temporary file, ``fsync``,
``rename``), before handing it back. The tuner removes the file once the trial is committed; a
resumed campaign that takes over the trial (its holder died or released it) commits the journalled
result instead of running the configuration again (:meth:`gptask.tuning.tuner.Tuner.ask`).

Who writes it: the serial loop, before its tell (:func:`gptask.tuning.steps.tell_journalled`;
under MPI rank 0); with ``parallel_evaluations`` under MPI, each rank other than 0 for the runs
it did, before it hands them to rank 0 (:func:`gptask.tuning.steps.journal_on_rank`: rank 0 sends
the folder with the batch; a rank whose host lacks the folder's parent writes none and says so
once, and rank 0 then writes the file before its commit);
:func:`~gptask.evaluation.evaluate.run_job` in a worker on the tuner's host (a process or thread
pool); :class:`~gptask.tuning.cluster.slurm.SlurmSteps` in the thread that ran the
step, once the result is final; :class:`~gptask.tuning.cluster.jobs.SlurmJobs` in the tuner when it
reads the job's result. A worker of an executor on another host (an ``MPIPoolExecutor``'s, Dask's)
writes none: the history's folder may not be there.

Only results that judge the configuration are journalled: COMPLETE and CENSORED. A FAILED run is
not: a step killed because the campaign itself is dying fails too, and that is no verdict on its
configuration; such a trial runs again, as before. No pickle: the file is JSON and is checked when
read (a file that does not parse, or whose trial, task or configuration differ from the history's,
is removed with a warning and the trial runs again).

Where: ``journal=`` of the tuner (:class:`~gptask.tuning.tuner.Tuner`, ``gt.tune``, ``gptask tune
--journal DIR``). By default a SQLite history's folder beside it, as above, and none for a
PostgreSQL history (no file to put it beside; the tuner warns once) or one in memory (it dies with
its process: nothing to resume). A folder given holds one subfolder per history, named by the
history's :meth:`~gptask.data.storage.base.Storage.uid` (:func:`history_folder`): several histories,
and several tuner hosts of one history, may share it (a shared file system for a PostgreSQL campaign
on several hosts). Within one history, trial ids are the history's own (a SQLite rowid, a PostgreSQL
identity column), so two hosts never write the same file for different trials; a file is taken by
another host only for a trial it took over (its holder dead or gone), and removed only once the
trial is committed, or when it is not that trial's result.
"""

from __future__ import annotations

import json
import logging
import os
import re
import socket
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..data.storage.base import json_text
from ..data.trials import Status, point_key

__all__ = ["JOURNAL_SUFFIX", "FORMAT", "STALE_TEMP_S", "journal_dir", "entry_path", "journals", "history_folder",
           "check_folder", "entry_in", "entries", "write", "read", "remove", "discard_if_empty", "Entry"]

log = logging.getLogger(__name__)

#: the journal folder of history ``h.db`` is ``h.db.results`` (not SQLite's ``h.db-journal``)
JOURNAL_SUFFIX = ".results"
#: the version of an entry's JSON
FORMAT = 1
#: seconds after which a temporary file of a write that never finished (its writer killed in the
#: middle) is removed; a write takes milliseconds
STALE_TEMP_S = 3600.0
_NAME = re.compile(r"^trial-(\d+)\.json$")
_TEMP = re.compile(r"^\.trial-.*\.tmp$")


def journal_dir(history: str | os.PathLike) -> Path:
    """The journal folder of the history file ``history``."""
    return Path(f"{os.fspath(history)}{JOURNAL_SUFFIX}")


def history_folder(root: str | os.PathLike, uid: str) -> Path:
    """The folder of the entries of the history whose :meth:`~gptask.data.storage.base.Storage.uid`
    is ``uid`` in the journal folder ``root`` given by the user."""
    return Path(root) / f"history-{uid}"


def check_folder(root: Any, what: str = "journal") -> Path:
    """The journal folder ``root`` given by the user, made when missing (with its parents) and
    checked writable, as a Path; ValueError naming it when it is a file, cannot be made or is not
    writable, TypeError when it is no path. ``what``: how messages name the option."""
    if isinstance(root, bool) or not isinstance(root, (str, os.PathLike)):
        raise TypeError(f"{what} must be a folder (a path), None for the default or False for none, got {root!r}")
    folder = Path(root)
    if not os.fspath(folder):
        raise ValueError(f"{what} must be a folder, got an empty path")
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"{what} must be a folder, got {os.fspath(folder)!r}, which is a file")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".trial-", suffix=".tmp", dir=folder)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise ValueError(f"{what} folder {os.fspath(folder)!r} cannot be written ({exc.strerror or exc}): "
                         "give a folder this process may write") from None
    return folder


def entry_in(folder: str | os.PathLike, trial_id: int) -> str:
    """The journal file of trial ``trial_id`` in the history's journal folder ``folder``."""
    return str(Path(folder) / f"trial-{int(trial_id)}.json")


def entry_path(history: str | os.PathLike, trial_id: int) -> str:
    """The journal file of trial ``trial_id`` of the history file ``history`` (its default folder)."""
    return entry_in(journal_dir(history), trial_id)


def journals(history: str | os.PathLike, now: float | None = None) -> dict[int, str]:
    """:func:`entries` of the default journal folder of the history file ``history``."""
    return entries(journal_dir(history), now)


def entries(folder: str | os.PathLike, now: float | None = None) -> dict[int, str]:
    """trial id -> journal file, of every entry in the history's journal folder ``folder`` (empty
    when none). With ``now`` (a ``time.time()``), temporary files older than STALE_TEMP_S are removed."""
    folder = Path(folder)
    try:
        names = os.listdir(folder)
    except (FileNotFoundError, NotADirectoryError):
        return {}
    if now is not None:
        for n in names:
            if _TEMP.match(n):
                try:
                    if now - os.stat(folder / n).st_mtime > STALE_TEMP_S:
                        os.unlink(folder / n)
                except OSError:
                    pass
    return {int(m.group(1)): str(folder / n) for n in names if (m := _NAME.match(n))}


def journalled(status: Status | str | None) -> bool:
    """Whether a run's outcome of ``status`` is journalled: a finished verdict on its configuration
    (COMPLETE or CENSORED), not a failure (module docstring); None (no outcome): no."""
    return status is not None and Status.parse(status) in (Status.COMPLETE, Status.CENSORED)


def write(path: str, trial_id: int, task: Mapping[str, Any], params: Mapping[str, Any],
          outcome: Mapping[str, Any], parents: bool = True) -> bool:
    """Write trial ``trial_id``'s ``outcome`` (:meth:`Outcome.to_json
    <gptask.evaluation.evaluate.Outcome.to_json>`) to ``path`` atomically (a temporary file in the same
    folder, fsync, rename; the folder made when missing, with its parents unless ``parents`` is
    False: a process on another host than the tuner's writes only where the folder above the
    history's journal folder is there, never into a tree of its own that the tuner cannot see).
    Returns whether it was written: a file system that refuses it is logged as a warning, never an
    error of the run (the result still goes back to the tuner; only the protection against a kill in
    the gap is missing)."""
    record = {"format": FORMAT, "trial": int(trial_id), "task": dict(task), "params": dict(params),
              "outcome": dict(outcome), "written": time.time(), "host": socket.gethostname(),
              "pid": os.getpid()}
    folder = os.path.dirname(path) or "."
    tmp = None
    try:
        text = json_text(record)
        for again in (True, False):  # made again if a tuner closing removed it empty in between
            if parents:
                os.makedirs(folder, exist_ok=True)
            elif not os.path.isdir(folder):
                try:
                    os.mkdir(folder)
                except FileExistsError:
                    pass
            try:
                fd, tmp = tempfile.mkstemp(prefix=".trial-", suffix=".tmp", dir=folder)
                break
            except FileNotFoundError:
                if not again:
                    raise
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        tmp = None
        try:  # the rename itself survives a crash of the node only once the folder is synced
            dfd = os.open(folder, os.O_RDONLY)
        except OSError:
            return True
        try:
            os.fsync(dfd)
        except OSError:
            pass
        finally:
            os.close(dfd)
        return True
    except (OSError, TypeError, ValueError) as exc:
        log.warning("could not journal the result of trial %d to %s (%s): a campaign killed before it is "
                    "committed runs it again", trial_id, path, exc)
        return False
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass


class Entry:
    """One journal file as read: ``trial`` (id), ``task``, ``params``, ``outcome`` (the JSON of
    an :class:`~gptask.evaluation.evaluate.Outcome`, COMPLETE or CENSORED) and ``path``."""

    __slots__ = ("trial", "task", "params", "outcome", "path")

    def __init__(self, trial: int, task: dict, params: dict, outcome: dict, path: str) -> None:
        self.trial, self.task, self.params, self.outcome, self.path = trial, task, params, outcome, path

    def matches(self, trial_id: int, task: Mapping[str, Any], params: Mapping[str, Any]) -> bool:
        """Whether this entry is the result of that trial (same id, task and configuration)."""
        return (self.trial == trial_id and point_key(self.task) == point_key(task)
                and point_key(self.params) == point_key(params))


def read(path: str) -> Entry | None:
    """The entry in ``path``; None (with a warning) when it cannot be read or is not a journal
    entry of this format, None silently when the file is gone."""
    try:
        with open(path) as f:
            d = json.load(f)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        log.warning("journal file %s cannot be read (%s): ignored", path, exc)
        return None
    try:
        if not isinstance(d, dict) or d.get("format") != FORMAT:
            raise ValueError(f"format {d.get('format') if isinstance(d, dict) else None!r}, expected {FORMAT}")
        outcome = dict(d["outcome"])
        if not journalled(outcome.get("status")):
            raise ValueError(f"status {outcome.get('status')!r} is never journalled")
        return Entry(int(d["trial"]), dict(d["task"]), dict(d["params"]), outcome, path)
    except (KeyError, TypeError, ValueError) as exc:
        log.warning("journal file %s is not a result gptask wrote (%s): ignored", path, exc)
        return None


def discard_if_empty(folder: str | os.PathLike | None) -> None:
    """Remove the history's journal folder ``folder`` when it holds nothing (a campaign's end: no
    empty ``h.db.results`` left beside every history); a folder with entries (or None) is left."""
    if folder is None:
        return
    try:
        os.rmdir(folder)
    except OSError:  # not empty, gone, or not ours to remove
        pass


def remove(path: str | None) -> None:
    """Remove the journal file ``path`` (nothing when None or already gone)."""
    if path is None:
        return
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    except OSError as exc:
        log.warning("could not remove journal file %s: %s", path, exc)
