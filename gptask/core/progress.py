"""Progress of a tuning run: a bar on a terminal, one log line per iteration otherwise.

A batch job's log must show the run moving, so when stderr is not a terminal every iteration logs
one line through the ``gptask.core.progress`` logger at INFO::

    iteration 7: tasks done 2/8, evaluations 61/160 (3 failed, 1 pending), best [m=1200,n=800: 0.0123 s; m=300,n=1900: 0.456 s; ...], model+search 1.2 s, 4m05s

(each best value labelled with its task, in the problem's unit; with failures, the most common
reasons follow the count: ``(3 failed: KeyError: 'nodes' x3, 1 pending)``). Each failed evaluation
also gets a line of its own at WARNING, as it is told (:mod:`gptask.evaluation.failed_runs`), on a
terminal above the bar.

If neither that logger nor the root logger has a handler (a plain script), a stderr handler is
attached to ``gptask.core.progress`` for the duration of the run and removed afterwards. If the logger's
level is not set and the configured level would hide INFO (``logging.basicConfig(level=WARNING)``
in an application's command line), the logger is set to INFO for the run and reset afterwards; a
level set on ``gptask.core.progress`` itself is respected. Nothing else of the process's logging is
touched. ``progress=False`` (``--quiet``) turns the bar and the iteration lines off; the failure
lines remain (WARNING).
"""

from __future__ import annotations

import logging
import sys
import time
from collections import Counter
from collections.abc import Sequence
from typing import Any

from .labels import format_value

__all__ = ["Progress", "LOGGER_NAME", "format_line"]

LOGGER_NAME = "gptask.core.progress"
#: per-task best values shown in a line before it is cut with "..."
MAX_SHOWN_BEST = 8
#: failure reasons shown in an iteration line (the most common first), and their length there
MAX_SHOWN_REASONS = 2
SHOWN_REASON_CHARS = 80

log = logging.getLogger(LOGGER_NAME)


def _elapsed(seconds: float) -> str:
    m, s = divmod(int(seconds), 60)
    h, m = divmod(m, 60)
    return f"{h}h{m:02d}m{s:02d}s" if h else f"{m}m{s:02d}s"


def _failed_text(failed: int, reasons: Counter | None) -> str:
    if not failed or not reasons:
        return f"{failed} failed"
    common = reasons.most_common(MAX_SHOWN_REASONS)
    shown = "; ".join(f"{r[:SHOWN_REASON_CHARS]} x{n}" for r, n in common)
    more = "; ..." if len(reasons) > MAX_SHOWN_REASONS else ""
    return f"{failed} failed: {shown}{more}"


def format_line(iteration: int, tasks_done: int, n_tasks: int, finished: int, total: int, failed: int,
                pending: int, best: Sequence[float | None], model_s: float, elapsed_s: float,
                labels: Sequence[str] | None = None, unit: str = "", reasons: Counter | None = None) -> str:
    """The text of one progress line (see the module docstring). best: per task, its best value
    (None: none yet); labels: per task, its label (``task_label``; default ``task i``); unit: the
    objective's unit; reasons: the failed evaluations counted by reason."""
    labels = list(labels) if labels is not None else [f"task {i}" for i in range(len(best))]
    shown = "; ".join(f"{lab}: {format_value(b, unit)}" for lab, b in list(zip(labels, best))[:MAX_SHOWN_BEST])
    more = "; ..." if len(best) > MAX_SHOWN_BEST else ""
    return (f"iteration {iteration}: tasks done {tasks_done}/{n_tasks}, evaluations {finished}/{total} "
            f"({_failed_text(failed, reasons)}, {pending} pending), best [{shown}{more}], model+search {model_s:.3g} s, "
            f"{_elapsed(elapsed_s)}")


class Progress:
    """Reports a run's progress; ``enabled`` False (or a rank other than 0) reports nothing."""

    def __init__(self, enabled: bool, total: int, initial: int, desc: str = "gptask") -> None:
        self.enabled = bool(enabled)
        self.total = int(total)
        self.start = time.monotonic()
        self._bar: Any = None
        self._handler: logging.Handler | None = None
        self._level = log.level
        self._iteration = 0
        if not self.enabled:
            return
        if sys.stderr.isatty():
            from tqdm.auto import tqdm

            self._bar = tqdm(total=total, initial=initial, desc=desc, unit="run", file=sys.stderr)
        elif not log.hasHandlers():
            self._handler = logging.StreamHandler(sys.stderr)
            self._handler.setFormatter(logging.Formatter("%(asctime)s gptask: %(message)s"))
            log.addHandler(self._handler)
            if log.getEffectiveLevel() > logging.INFO:
                log.setLevel(logging.INFO)
        elif log.level == logging.NOTSET and log.getEffectiveLevel() > logging.INFO:
            log.setLevel(logging.INFO)  # an application's basicConfig(level=WARNING) would hide the lines

    def advance(self, n: int = 1) -> None:
        """``n`` more evaluations finished (moves the bar)."""
        if self._bar is not None:
            self._bar.update(n)

    def iteration(self, tasks_done: int, n_tasks: int, finished: int, failed: int, pending: int,
                  best: Sequence[float | None], model_s: float, labels: Sequence[str] | None = None,
                  unit: str = "", reasons: Counter | None = None) -> None:
        """One iteration ended: a log line when there is no bar (arguments of :func:`format_line`)."""
        self._iteration += 1
        if not self.enabled or self._bar is not None:
            return
        log.info(format_line(self._iteration, tasks_done, n_tasks, finished, self.total, failed, pending, best,
                             model_s, time.monotonic() - self.start, labels, unit, reasons))

    def message(self, text: str, *args: Any) -> None:
        """A line about the run itself (waiting for other processes, stopping at max_time)."""
        if not self.enabled:
            return
        if self._bar is not None:
            self._bar.write(text % args if args else text, file=sys.stderr)
        else:
            log.info(text, *args)

    def step(self, text: str) -> None:
        """One unit of work done (a confirmation run, a model fit): moves the bar on a terminal,
        else logs ``text`` at INFO."""
        if not self.enabled:
            return
        if self._bar is not None:
            self._bar.update(1)
        else:
            log.info(text)

    def warning(self, text: str) -> None:
        """A line that is shown even with ``progress=False`` (a failed evaluation): above the bar on
        a terminal, else logged at WARNING."""
        if self._bar is not None:
            self._bar.write(text, file=sys.stderr)
        else:
            log.warning(text)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        if self._handler is not None:
            log.removeHandler(self._handler)
            self._handler = None
        if self.enabled:
            log.setLevel(self._level)
