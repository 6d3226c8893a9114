"""A tuner's copy of its history: the trials and task closures as last read, on every MPI rank.

Rank 0 alone reads and writes the :class:`~gptask.data.storage.Storage`; what it reads or claims reaches
the other ranks as JSON (:func:`gptask.core.parallel.bcast_json`). After the first read, a read takes
only what may have changed since the last one (:meth:`Storage.trials_after`: the newer trials and
those held unfinished; finished trials never change and ids are given in order), on one process
and on MPI ranks alike: with tens of thousands of imported trials a full read and its broadcast
were most of each ``ask``. The trials are kept in id order. :class:`HistoryModels` is the model
store of :mod:`gptask.model.surrogate` on the same history.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..evaluation.evaluate import Outcome
from ..core.parallel import bcast_json, collective, rank_size
from ..data.run_header import write_use_log
from ..data.storage import Owner, Storage
from ..data.trials import Proposal, Status, Trial

__all__ = ["HistoryMirror", "HistoryModels"]


class HistoryMirror:
    """The trials and task closures of one history as last read (every rank holds the same).

    comm: mpi4py communicator or None; owner: who holds the trials claimed here; budget: trials per
    task (a claim beyond it is refused by the storage); lease: seconds after which a claimed trial
    not told goes to the next claim (None: never while the owner lives). ``storage`` is set on rank
    0 once the history is opened (None on the other ranks and once closed).
    """

    def __init__(self, comm: Any, owner: Owner, budget: int, lease: float | None) -> None:
        self.comm = comm
        self.rank, self.size = rank_size(comm)
        self.owner, self.budget, self.lease = owner, budget, lease
        self.storage: Storage | None = None
        self.closed: dict[int, str] = {}  # task index -> why it takes no new trials (the history's)
        self._trials: list[Trial] = []
        self._read_upto: int | None = None  # the largest trial id of the last read (the same on every rank)
        self._told_alone: set[int] = set()  # rank 0: trials it finished alone since the last read

    def on_root(self, fn: Callable[[], Any], what: str) -> Any:
        """``fn()`` on rank 0 (a JSON-serialisable result), the result on every rank."""
        return bcast_json(collective(lambda: fn() if self.rank == 0 else None, self.comm, what), self.comm)

    # ---- reading -------------------------------------------------------------------------------
    def refresh(self) -> None:
        """Read the trials and task closures (module docstring). The first read takes every trial;
        later ones only what may have changed since: the newer trials, those held unfinished, and
        those rank 0 finished alone since (:meth:`keep_told`), which the other ranks hold unfinished."""
        first = self._read_upto is None
        again = sorted({t.id for t in self._trials if not t.status.finished} | self._told_alone)

        def read() -> list[Trial]:
            return list(self.storage.trials()) if first else self.storage.trials_after(self._read_upto, again)

        if self.size == 1:
            got, closed = read(), dict(self.storage.closed_tasks())
        else:
            state = self.on_root(lambda: {"trials": [t.to_json() for t in read()],
                                          "closed": {str(k): v for k, v in self.storage.closed_tasks().items()}},
                                 "reading the history")
            got = [Trial.from_json(d) for d in state["trials"]]
            closed = {int(k): v for k, v in state["closed"].items()}
        if first:
            self._trials = got
        else:
            self.merge(got)
        self._read_upto = self._trials[-1].id if self._trials else 0  # held in id order, alike on every rank
        self._told_alone.clear()
        self.closed = closed

    def merge(self, trials: Sequence[Trial]) -> None:
        """Put ``trials`` in place of the held ones of the same id, the new ones in id order."""
        index = {t.id: k for k, t in enumerate(self._trials)}
        added = False
        for t in trials:
            if t.id in index:
                self._trials[index[t.id]] = t
            else:
                index[t.id] = len(self._trials)
                self._trials.append(t)
                added = True
        if added:  # a claim merged before a refresh brought another process's older ids
            self._trials.sort(key=lambda t: t.id)

    @property
    def trials(self) -> list[Trial]:
        """Every trial as last read, in id order."""
        return list(self._trials)

    @property
    def records(self) -> list[Trial]:
        """The finished trials (COMPLETE, FAILED, CENSORED), in id order."""
        return [t for t in self._trials if t.status.finished]

    @property
    def pending(self) -> list[Trial]:
        return [t for t in self._trials if t.status is Status.PENDING]

    def of_task(self, i: int) -> list[Trial]:
        """Task ``i``'s trials in any state, in id order."""
        return [t for t in self._trials if t.task_index == i]

    def count(self, i: int) -> int:
        """Finished trials of task ``i``."""
        return sum(1 for t in self._trials if t.task_index == i and t.status.finished)

    def tasks_with_results(self) -> set[int]:
        """The tasks that have a finished trial."""
        return {t.task_index for t in self._trials if t.status.finished}

    # ---- writing (each one transaction on rank 0) ------------------------------------------------
    def claim(self, proposals: Sequence[Proposal]) -> list[Trial | None]:
        """Write ``proposals`` as PENDING trials; None where the budget or an earlier claim of the
        same configuration (another process's) refused one."""
        if not proposals:
            return []
        got = self.on_root(lambda: [None if t is None else t.to_json() for t in self.storage.add_trials(
            proposals, self.owner, budget=self.budget, lease=self.lease)], "claiming trials")
        trials = [None if d is None else Trial.from_json(d) for d in got]
        self.merge([t for t in trials if t is not None])
        return trials

    def reclaim(self, limit: int | None) -> list[Trial]:
        """At most ``limit`` PENDING trials whose holder died, released them or outlived its lease,
        now held here (re-proposed as they were)."""
        got = self.on_root(lambda: [t.to_json() for t in self.storage.reclaim(self.owner, limit, lease=self.lease)],
                           "reclaiming trials")
        trials = [Trial.from_json(d) for d in got]
        self.merge(trials)
        return trials

    def release(self) -> list[int]:
        """Give back the PENDING trials held here (they stay PENDING for whoever claims next)."""
        return self.on_root(lambda: self.storage.release(self.owner), "releasing trials")

    def close_task(self, i: int, reason: str) -> None:
        """Record that task ``i`` takes no new trials, and why."""
        self.on_root(lambda: self.storage.close_task(i, reason), "closing a task")
        self.closed[i] = reason

    def finish(self, trial_id: int, outcome: Outcome, expected: Trial | None,
               machine: dict | None) -> Trial:
        """Rank 0: commit ``outcome`` for PENDING trial ``trial_id`` (``expected``: the Trial as
        asked, checked against the stored one), with the ``machine`` record; the finished trial
        (not merged here: every rank merges what rank 0 returns)."""
        assert self.storage is not None
        return self.storage.finish(trial_id, outcome.status, outcome.value, outcome.samples, outcome.reason,
                                   outcome.extra, outcome.duration, expected, machine=machine,
                                   values=outcome.values)

    def get_meta(self, key: str) -> Any:
        """The history's stored setting ``key`` (JSON; None when unset)."""
        return self.on_root(lambda: self.storage.get_meta(key), "reading the history")

    def set_meta(self, key: str, value: Any) -> None:
        """Store the setting ``key`` (JSON) in the history."""
        self.on_root(lambda: self.storage.set_meta(key, value), "writing the history")

    def keep_told(self, done: Trial) -> None:
        """Rank 0: hold ``done``, a trial it finished alone (inside a collective step, without
        communication); the other ranks receive it at the next :meth:`refresh`."""
        self.merge([done])
        self._told_alone.add(done.id)

    def close_storage(self) -> None:
        if self.storage is not None:
            self.storage.close()
            self.storage = None


class HistoryModels:
    """The :class:`~gptask.model.surrogate.ModelStore` of a tuner: its history, read and written on
    rank 0 alone (the result broadcast to every rank). A tuner that does not record its run
    (``records_run`` False) stores no fits and no transform."""

    def __init__(self, mirror: HistoryMirror, records_run: bool) -> None:
        self.mirror, self.records_run = mirror, records_run

    def last_model(self) -> dict | None:
        if not self.records_run:
            return None
        return self.mirror.on_root(lambda: self.mirror.storage.last_model(), "reading the last model")

    def add_model(self, iteration: int, params: dict, log_likelihood: float, data_key: str) -> None:
        if self.records_run:
            self.mirror.on_root(lambda: self.mirror.storage.add_model(iteration, params, log_likelihood, data_key),
                                "storing the model")

    def set_use_log(self, use_log: bool) -> None:
        if self.records_run:
            write_use_log(self.mirror, use_log)
