"""Failed evaluations that speak: one line per failure, counts by reason, and a stop rule.

A failed evaluation (the objective raised, crashed, timed out, returned NaN or inf) is recorded
with its reason and tuning goes on: one failing region of the space must not end a run. But an
objective that fails on *every* run (a ``KeyError: 'nodes'`` in the user's launcher, a missing
binary, a timeout far too short) would otherwise spend the whole budget, hours of a batch
allocation, and end with exit code 0. So:

* each failed evaluation is logged with its task and reason as it is told
  (``task 2 (m=1200,n=800): trial 17 failed: KeyError: 'nodes'``; :func:`failure_line`);
* :func:`reasons_by_task` counts every task's failures by reason (``gptask show``);
* :class:`FailureWatch` stops the run with :class:`TuningAborted` when the first evaluations it
  sees all failed for the same reason (:func:`reason_key`: digits and spacing do not count).

The default limit, ``max_failures="auto"``, is ``n + min(n, 5)`` for ``n`` tasks (at least 3):
the first run of every task (the problem's default configuration when it has one, else the first
point of its initial design) and up to 5 more configurations all failed, and for the same reason.
A broken objective is then stopped after 13 runs instead of 160 (8 tasks, budget 20), while a
default that fails on every task (a real possibility: an out-of-memory default on large tasks)
does not stop the run by itself, nor do failures with different reasons or any failure after a
first success. ``max_failures=K`` sets the limit to K; ``None`` or 0 never stops.
Only the evaluations told by this tuner count: a resumed run starts its count afresh, and the
finished trials, failed or not, stay committed in the history. With fidelity levels only the tuned
tasks' target runs count (:meth:`gptask.tuning.proposer.Proposer.watched_tasks`): cheap runs that
succeed must not hide a target that fails at every run.
"""

from __future__ import annotations

import numbers
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from ..core.labels import task_label
from ..data.trials import Status, Trial

__all__ = ["TuningAborted", "FailureWatch", "failure_limit", "reason_key", "failure_line", "reasons_by_task",
           "AUTO", "AUTO_EXTRA", "AUTO_MIN"]

#: the default policy's name
AUTO = "auto"
#: with "auto": configurations beyond the first run of every task that must also have failed
AUTO_EXTRA = 5
#: with "auto": the smallest limit
AUTO_MIN = 3
#: characters of a reason kept in a log line
SHOWN_REASON = 300

_DIGITS = re.compile(r"\d+(\.\d+)?")
_SPACE = re.compile(r"\s+")


class TuningAborted(RuntimeError):
    """The first evaluations of a run all failed for the same reason: the objective is broken
    (or its timeout too short). ``reason``: that reason; ``count``: how many failed; the finished
    trials stay in the history, and the same call resumes once the cause is fixed."""

    def __init__(self, message: str, reason: str, count: int) -> None:
        super().__init__(message)
        self.reason, self.count = reason, count


def failure_limit(max_failures: Any, n_tasks: int) -> int | None:
    """The number of failed evaluations that stop a run (module docstring), or None for never.

    max_failures: "auto", a positive integer, or None / 0 (never stop)."""
    if max_failures is None or (isinstance(max_failures, numbers.Integral) and not isinstance(max_failures, bool)
                                and max_failures == 0):
        return None
    if isinstance(max_failures, str) and max_failures == AUTO:
        n = max(1, int(n_tasks))
        return max(AUTO_MIN, n + min(n, AUTO_EXTRA))
    if isinstance(max_failures, bool) or not isinstance(max_failures, numbers.Integral) or max_failures < 0:
        raise ValueError(f"max_failures must be 'auto', a positive integer or None/0 (never stop), "
                         f"got {max_failures!r}")
    return int(max_failures)


def reason_key(reason: str) -> str:
    """What "the same reason" compares: the reason with numbers replaced by ``#`` and spacing
    collapsed, so that ``timeout after 20.0 s (pid 4242)`` matches ``timeout after 20.0 s (pid 4243)``."""
    return _SPACE.sub(" ", _DIGITS.sub("#", str(reason))).strip()[:SHOWN_REASON]


def _short_reason(reason: str) -> str:
    text = _SPACE.sub(" ", str(reason)).strip() or "(no reason given)"
    return text if len(text) <= SHOWN_REASON else text[: SHOWN_REASON - 3] + "..."


def failure_line(trial: Trial) -> str:
    """``task 2 (m=1200,n=800): trial 17 failed: KeyError: 'nodes'`` (the reason on one line)."""
    return f"task {trial.task_index} ({task_label(trial.task)}): trial {trial.id} failed: {_short_reason(trial.reason)}"


def reasons_by_task(trials: Iterable[Trial | Mapping[str, Any]]) -> dict[int, Counter]:
    """Per task index, a Counter of its failed trials' reasons (one line each); tasks without a
    failure are absent. ``trials``: Trials or the dict records that read like them."""
    out: dict[int, Counter] = {}
    for t in trials:
        if t["status"] == Status.FAILED:
            out.setdefault(int(t["task_index"]), Counter())[_short_reason(t["reason"])] += 1
    return dict(sorted(out.items()))


class FailureWatch:
    """Watches the evaluations a tuner tells; :meth:`observe` raises :class:`TuningAborted` when the
    first ``limit`` of them all failed for the same reason (:func:`reason_key`). It stops watching
    at the first evaluation that did not fail, or at a second reason.

    max_failures: see :func:`failure_limit`; the limit is resolved at the first observation, from
    the number of tasks the tuner proposes for."""

    def __init__(self, max_failures: Any = AUTO) -> None:
        failure_limit(max_failures, 1)  # checked now, resolved later
        self.max_failures = max_failures
        self.limit: int | None = None
        self.failed = 0
        self.reason = ""
        self.armed = max_failures is not None and max_failures != 0

    def observe(self, trial: Trial, n_tasks: int, where: str = "", what: str = "evaluations") -> None:
        """Count ``trial`` (just told). n_tasks: tasks the tuner proposes for (or watches); where:
        the history file, named in the error; what: the evaluations watched, as the error names them."""
        if not self.armed:
            return
        if self.limit is None:
            self.limit = failure_limit(self.max_failures, n_tasks)
        if trial.status is not Status.FAILED or self.limit is None:
            self.armed = False
            return
        key = reason_key(trial.reason)
        if self.failed and key != reason_key(self.reason):
            self.armed = False  # different reasons: not one broken objective
            return
        self.failed += 1
        self.reason = self.reason or str(trial.reason)
        if self.failed >= self.limit:
            self.armed = False
            kept = f"they are kept in {where}" if where else "they are kept in the history"
            raise TuningAborted(
                f"tuning stopped: the first {self.failed} {what} all failed with the same reason: "
                f"{_short_reason(self.reason)} (last: {failure_line(trial)}). The objective looks broken; "
                f"{kept}. Fix the cause and run the same command again (it resumes), or allow more failures "
                f"(max_failures=, --max-failures; 0 never stops)", self.reason, self.failed)
