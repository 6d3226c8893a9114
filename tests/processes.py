"""Helpers for tests that signal the processes they start."""

import signal


def like_a_terminal() -> None:
    """``preexec_fn`` of a process that a test stops with SIGINT, as Ctrl-C on a terminal does: its
    SIGINT at the default disposition. A suite started as a background job of a non-interactive
    shell (``cmd &`` in a script, as a CI runner may) ignores SIGINT, every child inherits that
    through exec, and Python then installs no KeyboardInterrupt handler, so the child would never
    see the signal (that is right for a background job, and not what these tests are about)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
