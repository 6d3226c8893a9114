"""Run one piece of work in a child process group that never outlives the tuner.

Used for objectives with a time limit: a hung run is killed at its limit, and a killed tuner
(``kill -9``, SIGTERM, Ctrl-C, the end of a batch job) leaves no objective running behind it, not
even the processes the objective itself started (``mpiexec``, a solver binary).

Process tree of one run::

    tuner --fork--> supervisor (leader of a new process group G) --fork--> worker (in G) --> ...

* the worker runs ``work()`` and writes its JSON result to a pipe the tuner reads (length-prefixed,
  so nothing depends on when the pipe closes); anything the objective starts inherits group G;
* the supervisor holds the read end of a *lifeline* pipe whose write end only the tuner holds.
  When the tuner dies, however it dies, the kernel closes that end, the supervisor sees end of
  file and kills group G (itself included). When the worker exits, the supervisor kills what
  the worker left behind in G, likewise;
* the tuner kills group G itself after reading the result, at the time limit, and on any exception
  (a signal handler's SystemExit, KeyboardInterrupt), then reaps the supervisor.

POSIX only (``os.fork``, ``os.setpgid``, ``os.killpg``); nothing is pickled: the result travels as JSON.
"""

from __future__ import annotations

import json
import os
import select
import signal
import struct
import time
from collections.abc import Callable
from typing import Any

__all__ = ["run_in_process_group", "ChildTimeout", "ChildDied"]

#: how often the supervisor checks whether the worker has exited (seconds)
SUPERVISOR_POLL_S = 0.05
_HEADER = struct.Struct("!Q")


class ChildTimeout(Exception):
    """The work did not finish within its limit; its process group was killed."""


class ChildDied(Exception):
    """The worker ended without sending a result (crashed, killed, ``os._exit``)."""


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _worker(work: Callable[[], dict], result_w: int) -> None:  # pragma: no cover - runs in the fork
    try:
        msg = work()
        payload = json.dumps(msg).encode()
    except BaseException as exc:  # noqa: BLE001 - report anything, never raise past the fork
        payload = json.dumps({"error": f"{type(exc).__name__}: {exc}"}).encode()
    try:
        _write_all(result_w, _HEADER.pack(len(payload)) + payload)
    finally:
        os._exit(0)


def _supervise(work: Callable[[], dict], lifeline_r: int, result_w: int) -> None:  # pragma: no cover - fork
    os.setpgid(0, 0)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)
    worker = os.fork()
    if worker == 0:
        os.close(lifeline_r)
        _worker(work, result_w)
    os.close(result_w)
    while True:
        ready, _, _ = select.select([lifeline_r], [], [], SUPERVISOR_POLL_S)
        if ready:  # end of file: the tuner is gone
            os.killpg(0, signal.SIGKILL)
        pid, _ = os.waitpid(worker, os.WNOHANG)
        if pid:  # the worker is done: nothing it started may outlive it
            os.killpg(0, signal.SIGKILL)


def _read_message(fd: int, limit: float | None) -> bytes:
    """The worker's payload; ChildTimeout after ``limit`` seconds, ChildDied on end of file."""
    end = None if limit is None else time.monotonic() + limit
    buf = b""
    need = _HEADER.size
    header_read = False
    while True:
        wait = None if end is None else max(0.0, end - time.monotonic())
        ready, _, _ = select.select([fd], [], [], wait)
        if not ready:
            raise ChildTimeout(f"no result within {limit:g} s")
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            raise ChildDied("the objective process ended without a result")
        buf += chunk
        if not header_read and len(buf) >= need:
            need += _HEADER.unpack(buf[:_HEADER.size])[0]
            header_read = True
        if header_read and len(buf) >= need:
            return buf[_HEADER.size:need]


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def run_in_process_group(work: Callable[[], dict], limit: float | None = None) -> dict[str, Any]:
    """Run ``work()`` (returning a JSON-serialisable dict) in a supervised child process group.

    limit: seconds to wait for the result (None: no limit). Returns the dict; raises ChildTimeout
    or ChildDied. An exception raised by ``work`` comes back as ``{"error": "Type: message"}``.
    """
    lifeline_r, lifeline_w = os.pipe()
    result_r, result_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the supervisor
        try:
            os.close(lifeline_w)
            os.close(result_r)
            _supervise(work, lifeline_r, result_w)
        finally:
            os._exit(70)
    os.close(lifeline_r)
    os.close(result_w)
    try:
        try:
            os.setpgid(pid, pid)  # also done by the child: whichever runs first wins the race
        except (PermissionError, ProcessLookupError):
            pass
        return json.loads(_read_message(result_r, limit).decode())
    finally:
        _kill_group(pid)
        os.close(lifeline_w)
        os.close(result_r)
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass
