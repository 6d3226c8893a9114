"""Progress of a tuning run: a bar on a terminal, one log line per iteration otherwise.

A batch job's log must show the run moving, so when stderr is not a terminal every iteration logs
one line through the ``gptask.progress`` logger at INFO::

    iteration 7: tasks done 2/8, evaluations 61/160 (3 failed, 1 pending), best [0.0123 0.456 ...], model+search 1.2 s, 4m05s

If neither that logger nor the root logger has a handler (a plain script), a stderr handler is
attached to ``gptask.progress`` for the duration of the run and removed afterwards; nothing else
of the process's logging is touched. ``progress=False`` (``--quiet``) turns it all off.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Sequence
from typing import Any

__all__ = ["Progress", "LOGGER_NAME", "format_line"]

LOGGER_NAME = "gptask.progress"
#: per-task best values shown in a line before it is cut with "..."
MAX_SHOWN_BEST = 8

log = logging.getLogger(LOGGER_NAME)


def _elapsed(seconds: float) -> str:
    m, s = divmod(int(seconds), 60)
    h, m = divmod(m, 60)
    return f"{h}h{m:02d}m{s:02d}s" if h else f"{m}m{s:02d}s"


def format_line(iteration: int, tasks_done: int, n_tasks: int, finished: int, total: int, failed: int,
                pending: int, best: Sequence[float | None], model_s: float, elapsed_s: float) -> str:
    """The text of one progress line (see the module docstring)."""
    shown = " ".join("-" if b is None else f"{b:.4g}" for b in best[:MAX_SHOWN_BEST])
    more = " ..." if len(best) > MAX_SHOWN_BEST else ""
    return (f"iteration {iteration}: tasks done {tasks_done}/{n_tasks}, evaluations {finished}/{total} "
            f"({failed} failed, {pending} pending), best [{shown}{more}], model+search {model_s:.3g} s, "
            f"{_elapsed(elapsed_s)}")


class Progress:
    """Reports a run's progress; ``enabled`` False (or a rank other than 0) reports nothing."""

    def __init__(self, enabled: bool, total: int, initial: int) -> None:
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

            self._bar = tqdm(total=total, initial=initial, desc="gptask", unit="run", file=sys.stderr)
        elif not log.hasHandlers():
            self._handler = logging.StreamHandler(sys.stderr)
            self._handler.setFormatter(logging.Formatter("%(asctime)s gptask: %(message)s"))
            log.addHandler(self._handler)
            if log.getEffectiveLevel() > logging.INFO:
                log.setLevel(logging.INFO)

    def advance(self, n: int = 1) -> None:
        """``n`` more evaluations finished (moves the bar)."""
        if self._bar is not None:
            self._bar.update(n)

    def iteration(self, tasks_done: int, n_tasks: int, finished: int, failed: int, pending: int,
                  best: Sequence[float | None], model_s: float) -> None:
        """One iteration ended: a log line when there is no bar."""
        self._iteration += 1
        if not self.enabled or self._bar is not None:
            return
        log.info(format_line(self._iteration, tasks_done, n_tasks, finished, self.total, failed, pending, best,
                             model_s, time.monotonic() - self.start))

    def message(self, text: str, *args: Any) -> None:
        """A line about the run itself (waiting for other processes, stopping at max_time)."""
        if self.enabled:
            log.info(text, *args)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        if self._handler is not None:
            log.removeHandler(self._handler)
            log.setLevel(self._level)
            self._handler = None
