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

Runs on an executor's workers (:mod:`gptask.tuning.asynchronous`) carry a :class:`Guard`: the tuner's
process (host, pid, start time) and a *stop file* the tuner holds while its runs may go on. The
supervisor of such a run also kills its group when, on the tuner's host, the tuner process is gone
or the stop file was removed (the tuner was interrupted: its runs stop at once instead of being
waited for). A worker that descends from the tuner (a ``ProcessPoolExecutor``'s) runs every job in
such a group, with or without a time limit, and ends itself when the tuner dies
(:func:`die_with`), so neither the pool nor anything its objectives started outlives a ``kill -9``
of the tuner. On another host the guard cannot see the tuner: the executor's own machinery (a Dask
worker's nanny, ``mpiexec``) decides there.

Commands an objective launches in a session of their own (``start_new_session=True``, so that a
time limit can kill ``mpiexec`` and every rank) leave the tuner's process group and would survive
it: :func:`launch` starts such a command with a watcher that kills its group when the launching
process dies (see there).
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import struct
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..data.storage.owner import Owner, holder_alive, process_alive

__all__ = ["run_in_process_group", "ChildTimeout", "ChildDied", "Guard", "guarded_runs", "sweep_stale_stop_files",
           "die_with", "launch", "exception_text"]

#: how often the supervisor checks whether the worker has exited (seconds)
SUPERVISOR_POLL_S = 0.05
#: how often a supervisor or a worker checks its :class:`Guard` (seconds): how long a run may go on
#: after its tuner died or was interrupted
GUARD_POLL_S = 0.2
_HEADER = struct.Struct("!Q")


@dataclass(frozen=True)
class Guard:
    """The tuner a run belongs to, checkable from another process on the same host.

    owner: :meth:`gptask.data.storage.owner.Owner.to_text` of the tuner's process; stop: a file that
    exists while the tuner lets its runs go on (None: no such file). Picklable and small: it travels
    with every :class:`gptask.evaluation.evaluate.Job`.
    """

    owner: str
    stop: str | None = None

    @classmethod
    def this_process(cls, stop: str | None = None) -> "Guard":
        return cls(Owner.this_process("tuner").to_text(), stop)

    @property
    def process(self) -> Owner:
        return Owner.from_text(self.owner)

    def on_this_host(self) -> bool:
        return self.process.host == socket.gethostname()

    def holds(self) -> bool:
        """False once the run must stop: on the tuner's host, the tuner process is gone or the stop
        file was removed. True on another host (nothing there can be checked)."""
        if not self.on_this_host():
            return True
        if self.stop is not None and not os.path.exists(self.stop):
            return False
        return holder_alive(self.owner, None, time.time())

    def is_here(self) -> bool:
        """True in the tuner process itself (a thread pool, an in-process executor)."""
        return self.on_this_host() and self.process.pid == os.getpid()

    def is_ancestor(self) -> bool:
        """True when this process descends from the tuner (a process pool's worker, forked or
        spawned by it): such a worker has no business outliving it."""
        owner = self.process
        if not self.on_this_host() or owner.pid is None:
            return False
        pid = os.getppid()
        for _ in range(64):  # a parent chain longer than this is not a pool
            if pid == owner.pid:
                return process_alive(pid, owner.start)
            if pid <= 1:
                return False
            pid = _parent_of(pid)
        return False


def _parent_of(pid: int) -> int:
    try:
        data = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0
    return int(data[data.rindex(")") + 2:].split()[1])


#: name of a stop file: ``<prefix><random><suffix>`` in the temporary directory
STOP_PREFIX, STOP_SUFFIX = "gptask-runs-", ".stop"
#: a stop file holds its tuner's owner text (about 150 bytes); anything longer is not one of ours
_STOP_TEXT_MAX = 4096


@contextlib.contextmanager
def guarded_runs() -> Iterator[Guard]:
    """A :class:`Guard` for the runs this process sends to an executor; when the block ends (normally,
    or by SIGTERM, Ctrl-C or an error) its stop file is removed, so every run still going on is killed
    within :data:`GUARD_POLL_S` by its supervisor.

    The stop file holds the tuner's owner text. A tuner killed by SIGKILL cannot remove its file; the
    next block on the host removes such files (:func:`sweep_stale_stop_files`)."""
    fd, stop = tempfile.mkstemp(prefix=STOP_PREFIX, suffix=STOP_SUFFIX)
    guard = Guard.this_process(stop)
    try:
        os.write(fd, guard.owner.encode())
    finally:
        os.close(fd)
    sweep_stale_stop_files(Path(stop).parent, keep=stop)
    try:
        yield guard
    finally:
        with contextlib.suppress(OSError):
            os.unlink(stop)


def sweep_stale_stop_files(directory: Path, keep: str | None = None) -> list[Path]:
    """Remove the stop files in ``directory`` left by dead tuners of this user on this host; returns
    those removed.

    A file is removed only when its text names a tuner process on this host that is gone (its pid
    ended or was reused, or the host rebooted): an empty file (a tuner between creating and writing
    it, or one of a version that wrote nothing), an unreadable text, another host's tuner (a
    temporary directory on a shared file system) and another user's file are left alone. Removing a
    dead tuner's file changes nothing for its runs: their guard no longer holds either way.
    """
    removed = []
    uid = os.getuid()
    for path in directory.glob(f"{STOP_PREFIX}*{STOP_SUFFIX}"):
        if str(path) == keep:
            continue
        try:
            if path.lstat().st_uid != uid or not path.is_file() or path.stat().st_size > _STOP_TEXT_MAX:
                continue
            text = path.read_text(errors="replace").strip()
        except OSError:
            continue
        if not text or Owner.read(text) is None or holder_alive(text, None, time.time()):
            continue
        with contextlib.suppress(OSError):
            path.unlink()
            removed.append(path)
    return removed


_WATCHED: set[tuple] = set()
_WATCHED_LOCK = threading.Lock()


def die_with(guard: Guard) -> None:
    """End this process (SIGKILL) as soon as the tuner of ``guard`` is gone: a daemon thread polls
    every :data:`GUARD_POLL_S`. For a worker that descends from the tuner; one thread per tuner process."""
    owner = guard.process
    with _WATCHED_LOCK:
        if (owner.host, owner.pid, owner.start) in _WATCHED:
            return
        _WATCHED.add((owner.host, owner.pid, owner.start))

    def watch() -> None:
        while process_alive(int(owner.pid), owner.start):  # type: ignore[arg-type]
            time.sleep(GUARD_POLL_S)
        os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=watch, name="gptask-die-with-tuner", daemon=True).start()


class ChildTimeout(Exception):
    """The work did not finish within its limit; its process group was killed."""


class ChildDied(Exception):
    """The worker ended without sending a result (crashed, killed, ``os._exit``)."""


def exception_text(exc: BaseException) -> str:
    """``"Type: message"`` of ``exc``, never raising: a user's exception whose ``__str__`` raises (or
    returns no text) is named by its type, with a note that its message could not be read."""
    try:
        text = str(exc)
    except Exception as inner:  # noqa: BLE001 - the user's __str__ may do anything
        return f"{type(exc).__name__} (its message could not be read: its __str__ raised {type(inner).__name__})"
    if not isinstance(text, str):  # pragma: no cover - str() always returns a str
        return type(exc).__name__
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _worker(work: Callable[[], dict], result_w: int) -> None:  # pragma: no cover - runs in the fork
    try:
        msg = work()
        payload = json.dumps(msg).encode()
    except BaseException as exc:  # noqa: BLE001 - report anything, never raise past the fork
        payload = json.dumps({"error": exception_text(exc)}).encode()
    try:
        _write_all(result_w, _HEADER.pack(len(payload)) + payload)
    finally:
        os._exit(0)


def _supervise(work: Callable[[], dict], lifeline_r: int, result_w: int,
               guard: Guard | None) -> None:  # pragma: no cover - fork
    os.setpgid(0, 0)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)
    worker = os.fork()
    if worker == 0:
        os.close(lifeline_r)
        _worker(work, result_w)
    os.close(result_w)
    checked = time.monotonic()
    while True:
        ready, _, _ = select.select([lifeline_r], [], [], SUPERVISOR_POLL_S)
        if ready:  # end of file: the process that started this run is gone
            os.killpg(0, signal.SIGKILL)
        pid, _ = os.waitpid(worker, os.WNOHANG)
        if pid:  # the worker is done: nothing it started may outlive it
            os.killpg(0, signal.SIGKILL)
        if guard is not None and time.monotonic() - checked >= GUARD_POLL_S:
            checked = time.monotonic()
            if not guard.holds():  # the tuner died or was interrupted
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


def run_in_process_group(work: Callable[[], dict], limit: float | None = None,
                         guard: Guard | None = None) -> dict[str, Any]:
    """Run ``work()`` (returning a JSON-serialisable dict) in a supervised child process group.

    limit: seconds to wait for the result (None: no limit); guard: the tuner the run belongs to, when
    this process is an executor's worker (the group is also killed when it no longer holds).
    Returns the dict; raises ChildTimeout or ChildDied. An exception raised by ``work`` comes back as
    ``{"error": "Type: message"}``.
    """
    lifeline_r, lifeline_w = os.pipe()
    result_r, result_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the supervisor
        try:
            os.close(lifeline_w)
            os.close(result_r)
            _supervise(work, lifeline_r, result_w, guard)
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


#: the watcher of :func:`launch`: ignores the signals a terminal or a batch system sends to the whole
#: job (the launching process decides), waits for end of file on the lifeline, kills the group
_WATCHER = 'trap "" INT TERM HUP QUIT; cat <&"$1" >/dev/null; kill -s KILL -- "-$2" 2>/dev/null; exit 0'


@contextlib.contextmanager
def launch(argv: list[str], **popen_kwargs: Any) -> Iterator[subprocess.Popen]:
    """Start ``argv`` in a new session (its own process group G, so that ``os.killpg(proc.pid, ...)``
    reaches ``mpiexec`` and every rank) that does not outlive this process; yields the Popen.

    A watcher (``/bin/sh`` and ``cat``, no Python) holds the read end of a pipe whose write end only
    this process holds: when this process dies, however it dies, the watcher sees end of file and
    kills G. When the block ends, G is killed as well (strays of a job whose launcher exited, or the
    whole job when the block ends by an exception) and the command and the watcher are reaped.
    ``popen_kwargs`` go to :class:`subprocess.Popen` (``start_new_session`` is implied). The only
    unguarded moment is the few milliseconds between starting the command and its watcher.
    """
    if popen_kwargs.pop("start_new_session", True) is not True:
        raise ValueError("launch starts its command in a new session: start_new_session cannot be False")
    proc = subprocess.Popen(argv, start_new_session=True, **popen_kwargs)
    lifeline_r, lifeline_w = os.pipe()
    try:
        watcher = subprocess.Popen(["/bin/sh", "-c", _WATCHER, "sh", str(lifeline_r), str(proc.pid)],
                                   pass_fds=(lifeline_r,), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL)
    except BaseException:
        _kill_group(proc.pid)
        os.close(lifeline_w)
        proc.wait()
        raise
    finally:
        os.close(lifeline_r)
    try:
        yield proc
    finally:
        _kill_group(proc.pid)  # strays of a job whose launcher exited; everything after an exception
        os.close(lifeline_w)
        watcher.wait()
        proc.wait()
