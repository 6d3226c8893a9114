"""Steps shared by the serial loop (:mod:`.loop`) and the asynchronous one (:mod:`.asynchronous`)."""

from __future__ import annotations

import logging
import os
import socket
import time
from collections import Counter
from collections.abc import Sequence

from ..evaluation import journal as result_journal
from ..evaluation.evaluate import Outcome
from ..core.labels import task_label
from ..data.storage import Owner, TrialNotPending
from ..data.trials import Status, Trial
from ..evaluation.failed_runs import failure_line, reasons_by_task
from ..core.progress import Progress
from .settings import WAIT_LOG_S, WAIT_MAX_S, WAIT_MIN_S
from .tuner import Tuner

__all__ = ["tell_once", "tell_journalled", "journal_on_rank", "report", "Waiting"]

log = logging.getLogger(__name__)
#: the journal folders this process could not reach as a rank other than 0 (:func:`journal_on_rank`)
_unreached: set[str] = set()


def tell_once(tuner: Tuner, trial: Trial, outcome: Outcome, local: bool = False,
              reporter: Progress | None = None) -> Trial | None:
    """Tell ``trial`` and return it finished; if someone else told it first (its lease ran out and
    it was re-proposed, then the first holder reported after all), keep that result, go on and
    return None. ``local``: rank 0's tell inside a collective step (see ``Tuner.tell_local``).
    reporter: where a failed evaluation is reported with its task and reason (one line each).
    Raises :class:`~gptask.evaluation.failed_runs.TuningAborted` when the tuner's failure watch stops the run (the
    trial is committed first; its line is part of the error)."""
    try:
        done = tuner.tell_local(trial, outcome) if local else tuner.tell(trial, outcome)
    except TrialNotPending as exc:
        log.warning("%s; this run's result for it is dropped", exc)
        return None
    if done is not None and done.status is Status.FAILED and reporter is not None:
        reporter.warning(failure_line(done))
    return done


def tell_journalled(tuner: Tuner, trial: Trial, outcome: Outcome, local: bool = False,
                    reporter: Progress | None = None, written: bool = False) -> Trial | None:
    """:func:`tell_once` of a result this process has (the serial loop's), journalled first
    (:mod:`gptask.evaluation.journal`: complete and censored results, where the tuner has a journal):
    a campaign killed during the commit (SIGTERM or Ctrl-C landing in it, a kill -9, a slow or
    reconnecting PostgreSQL server) commits it on the resume instead of running it again. The file
    is removed once the trial is committed (or was told by another process first); kept when the
    tell fails (the history could not be written: the resume commits it). ``written``: the rank that
    ran it says it journalled it already (:func:`journal_on_rank`); written again here only when the
    file is not there (that rank's folder was not this one's)."""
    path = tuner.journal_path(trial.id)
    if path is not None and result_journal.journalled(outcome.status):
        if not (written and os.path.isfile(path)):
            result_journal.write(path, trial.id, trial.task, trial.params, outcome.to_json())
    else:
        path = None
    done = tell_once(tuner, trial, outcome, local=local, reporter=reporter)
    result_journal.remove(path)
    return done


def journal_on_rank(folder: str | None, trial: Trial, outcome: Outcome) -> bool:
    """Journal the result of ``trial`` run on a rank other than 0 (parallel evaluations under MPI),
    before it is handed to rank 0, in the history's journal folder ``folder`` that rank 0 sent with
    the work (an absolute path; None: the history has no journal). Complete and censored results
    only. The folder's parent must be there (the history's folder, or the ``journal=`` folder rank 0
    made): on a host that does not reach it, nothing is written (a warning, once per folder and
    process) and rank 0 journals the result itself before its commit. Returns whether the file was
    written; rank 0 removes it once the trial is committed (:func:`tell_journalled` with
    ``written``)."""
    if folder is None or not result_journal.journalled(outcome.status):
        return False
    parent = os.path.dirname(os.path.normpath(folder))
    if not os.path.isdir(parent):
        if folder not in _unreached:  # once per folder and process, not at every run
            _unreached.add(folder)
            log.warning("the result journal's folder %s is not reachable from this rank (host %s: %s is not "
                        "there): its results are journalled by rank 0 only, so a job killed between a run's end "
                        "here and rank 0's commit runs it again; put the history (or journal=) on a file "
                        "system every rank reaches", folder, socket.gethostname(), parent)
        return False
    return result_journal.write(result_journal.entry_in(folder, trial.id), trial.id, trial.task, trial.params,
                                outcome.to_json(), parents=False)


def report(tuner: Tuner, reporter: Progress, ask_s: float) -> None:
    """One progress line: tasks done, evaluations, failures (by reason), pending, best value per
    task (labelled), ask time."""
    records = tuner.records
    # a fidelity run (gptask.tuning.fidelity): the tuned tasks at the target are shown, every run counted
    shown = getattr(tuner.proposer, "is_target", None)
    counted = (lambda i: True) if shown is not None else tuner.proposes_for
    mine = [i for i in range(tuner.n_tasks) if (shown(i) if shown is not None else tuner.proposes_for(i))]
    n_done = sum(tuner.closed_reason(i) is not None for i in mine)
    failed = [t for t in records if t.status is Status.FAILED and counted(t.task_index)]
    reasons = Counter(c for counts in reasons_by_task(failed).values() for c in counts.elements())
    reporter.iteration(n_done, len(mine), len([r for r in records if counted(r.task_index)]),
                       len(failed), sum(counted(t.task_index) for t in tuner.pending),
                       [tuner.best_value(i) for i in mine], ask_s, labels=[task_label(tuner.tasks[i]) for i in mine],
                       unit=tuner.problem.unit, reasons=reasons)
    if tuner.tracks_cost:
        budget = "" if tuner.cost_budget is None else f" of a cost budget of {tuner.cost_budget:.4g} s"
        reporter.message("cost spent: %.4g s%s", tuner.cost_spent(), budget)


class Waiting:
    """Nothing to ask while other processes sharing the history hold the last trials: poll it every
    WAIT_MIN_S seconds, backing off to WAIT_MAX_S, saying so in the log every WAIT_LOG_S."""

    def __init__(self) -> None:
        self.wait, self.last_said = WAIT_MIN_S, 0.0

    def reset(self) -> None:
        """Something could be asked again: poll quickly next time."""
        self.wait = WAIT_MIN_S

    def pause(self, tuner: Tuner, reporter: Progress, stop_at: float | None) -> None:
        """Sleep until the next poll (never past ``stop_at``, a ``time.monotonic()`` instant)."""
        if time.monotonic() - self.last_said >= WAIT_LOG_S:
            reporter.message("nothing to ask: waiting for %d pending trial(s) held by other processes (%s)",
                             len(tuner.pending), held_by(tuner.pending))
            self.last_said = time.monotonic()
        time.sleep(self.wait if stop_at is None else max(0.0, min(self.wait, stop_at - time.monotonic())))
        self.wait = min(2 * self.wait, WAIT_MAX_S)


def held_by(pending: Sequence[Trial]) -> str:
    """Who holds the PENDING trials ``pending``, with their ids; for trials asked by a shell
    (``gptask ask`` without ``--lease``: held until told or released, whatever happens to the job)
    the two ways to give them back."""
    by: dict[str, list[int]] = {}
    detached = False
    for t in pending:
        owner = Owner.read(t.owner)
        who = "nobody" if owner is None else owner.describe()
        detached = detached or (owner is not None and owner.pid is None)
        by.setdefault(who, []).append(t.id)
    text = "; ".join(f"{who}: trial(s) {ids}" for who, ids in sorted(by.items()))
    if detached:
        text += (". Trials asked by a shell are held until their result is told (gptask tell HISTORY ID VALUE) "
                 "or they are given back (gptask release HISTORY ID); ask --lease SECONDS frees them by itself")
    return text

