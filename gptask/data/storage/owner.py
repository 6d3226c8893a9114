"""Who holds a PENDING trial, and whether that holder is still alive.

A tuner process holds the trials it asked for. When it dies (``kill -9``, a node failure, the end of
a batch job's wall time) its trials must be given back and re-proposed, so the other processes
sharing the history, or the next resume, can tell a live holder from a dead one:

* a *process* holder (``Owner.this_process``) records its host, the kernel's boot id, its pid and
  the pid's start time. On the same host (the case SQLite's WAL journal supports) it is alive
  exactly while that process exists: no heartbeat, no lease to tune, nothing lost when a long
  evaluation keeps the tuner busy. The start time tells a reused pid from the holder; a different
  boot id means the machine rebooted since. A holder on another host cannot be checked and counts
  as alive until its lease, if it has one, expires.
* a *detached* holder (``Owner.detached``, e.g. ``gptask ask`` in a shell, which exits at once)
  is alive until its lease expires (None: until the trial is told or released).

An owner is stored as compact JSON text; the same owner always gives the same text, so the storage
finds "my trials" by comparing texts.
"""

from __future__ import annotations

import json
import os
import socket
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path

__all__ = ["Owner", "holder_alive", "process_alive", "running_holder"]


def _boot_id() -> str | None:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip() or None
    except OSError:
        return None


def _proc_stat(pid: int) -> tuple[str, int] | None:
    """(state letter, start time in clock ticks since boot) of ``pid`` from /proc, or None when
    the process does not exist or /proc is unavailable."""
    try:
        data = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    rest = data[data.rindex(")") + 2 :].split()  # the command name may hold spaces and parentheses
    return rest[0], int(rest[19])


def _has_proc() -> bool:
    return Path("/proc/self/stat").exists()


def process_alive(pid: int, start: int | None = None) -> bool:
    """True when process ``pid`` exists on this host, is not a zombie and (when ``start`` is given
    and /proc is available) started at ``start`` clock ticks after boot, i.e. is not a reused pid."""
    if _has_proc():
        st = _proc_stat(pid)
        if st is None or st[0] in ("Z", "X"):
            return False
        return start is None or st[1] == start
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


@dataclass(frozen=True)
class Owner:
    """A holder of PENDING trials.

    label: what it is ("tune", "ask", "tla2", ...); token: unique per holder (two tuners in one
    process differ); host: hostname; pid, boot, start: the process (None for a detached holder).
    """

    label: str
    token: str
    host: str
    pid: int | None = None
    boot: str | None = None
    start: int | None = None

    @classmethod
    def this_process(cls, label: str) -> "Owner":
        """The calling process: alive as long as it runs."""
        pid = os.getpid()
        st = _proc_stat(pid)
        return cls(label, uuid.uuid4().hex, socket.gethostname(), pid, _boot_id(), None if st is None else st[1])

    @classmethod
    def detached(cls, label: str) -> "Owner":
        """A holder with no process to watch (its trials live until told, released or leased out)."""
        return cls(label, uuid.uuid4().hex, socket.gethostname())

    def to_text(self) -> str:
        return json.dumps(asdict(self), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_text(cls, text: str) -> "Owner":
        d = json.loads(text)
        return cls(str(d["label"]), str(d["token"]), str(d["host"]), d.get("pid"), d.get("boot"), d.get("start"))

    @classmethod
    def read(cls, text: str | None) -> "Owner | None":
        """The owner stored as ``text``, or None when there is none (a released trial) or it cannot be
        read (a hand-edited history)."""
        if text is None:
            return None
        try:
            return cls.from_text(text)
        except (ValueError, KeyError, TypeError):
            return None

    def describe(self) -> str:
        """A short human text: ``tune pid 1234 on node07``."""
        where = f"pid {self.pid} on {self.host}" if self.pid is not None else f"on {self.host}"
        return f"{self.label} {where}"


def holder_alive(owner_text: str | None, lease_expires: float | None, now: float) -> bool:
    """Whether the holder of a PENDING trial still holds it.

    A released trial (no owner) and an expired lease are free; a process holder on this host is
    checked through /proc (or ``kill(pid, 0)``); anything that cannot be checked counts as alive.
    """
    if owner_text is None:
        return False
    if lease_expires is not None and lease_expires < now:
        return False
    owner = Owner.read(owner_text)
    if owner is None:
        return True  # unreadable: never take a trial away on a guess
    if owner.pid is None or owner.host != socket.gethostname():
        return True
    boot = _boot_id()
    if owner.boot is not None and boot is not None and owner.boot != boot:
        return False
    return process_alive(int(owner.pid), owner.start)


def running_holder(owner_text: str | None, lease_expires: float | None, now: float) -> str | None:
    """What a tuner process holding a PENDING trial is, when it holds it still: "tune pid N on HOST,
    which is alive" (this host checks its pid), or "..., on another host (not checked; its lease
    has not expired)". None: released, dead, or a detached holder (``gptask ask``: its trials are
    released by hand)."""
    owner = Owner.read(owner_text)
    if owner is None or owner.pid is None or not holder_alive(owner_text, lease_expires, now):
        return None
    if owner.host == socket.gethostname():
        return owner.describe() + ", which is alive"
    return owner.describe() + ", on another host (not checked; its lease has not expired)"

