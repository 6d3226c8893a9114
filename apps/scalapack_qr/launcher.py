"""Launch the PDGEQRF driver under MPI and read its one JSON line.

The launch command is a template: a list of strings in which the tokens ``{nproc}``, ``{nth}``
and ``{nodes}`` are replaced (plain string replacement, nothing is evaluated), followed by the
driver's own arguments. Examples::

    Launcher()                                              # Debian MPICH, this machine
    Launcher(["srun", "-N", "{nodes}", "-n", "{nproc}", "-c", "{nth}"])   # a Slurm allocation
    Launcher(["/usr/bin/mpiexec.mpich", "-f", "hosts.txt", "-n", "{nproc}"])  # a hostfile

The child environment sets ``OMP_NUM_THREADS`` and ``OPENBLAS_NUM_THREADS`` to ``nth`` and drops
variables that would make the Debian MPICH runtime join a parent MPI job (``PMI_*``, ``HYDI_*``,
...), and ``LD_LIBRARY_PATH`` entries inside Python environments, where the pip ``mpich`` wheel
keeps its own libmpi. The process runs in its own session so a timeout kills the whole tree, and that session dies with the
launching process (:func:`gptask.evaluation.child.launch`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from gptask.evaluation.child import launch
from gptask.evaluation.evaluate import EvaluationFailed

__all__ = ["Launcher", "LaunchError", "LaunchTimeout", "DEFAULT_COMMAND", "clean_environment"]

log = logging.getLogger(__name__)

#: Debian's MPICH launcher (the one ScaLAPACK was built with), no core binding so BLAS threads
#: of one rank may use the other cores.
DEFAULT_COMMAND = ("/usr/bin/mpiexec.mpich", "-n", "{nproc}", "-bind-to", "none")
_TOKENS = ("{nproc}", "{nth}", "{nodes}")
_DROP_PREFIXES = ("PMI_", "PMIX_", "HYDI_", "HYDRA_", "OMPI_", "MPI_LOCAL", "I_MPI_", "MPIEXEC_")
_DROP_EXACT = ("LD_PRELOAD",)


class LaunchError(EvaluationFailed, RuntimeError):
    """The driver run crashed, printed no/invalid JSON, or reported an error (a failed evaluation
    for the tuner, which records the message as the reason)."""


class LaunchTimeout(LaunchError):
    """The driver run exceeded its time limit and was killed."""


def clean_environment(base: Mapping[str, str], nth: int) -> dict[str, str]:
    """A copy of ``base`` fit for launching Debian MPICH with ``nth`` BLAS threads per rank."""
    env = {
        k: v
        for k, v in base.items()
        if not k.startswith(_DROP_PREFIXES) and k not in _DROP_EXACT
    }
    prefixes = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    if "LD_LIBRARY_PATH" in env:
        keep = [
            d
            for d in env["LD_LIBRARY_PATH"].split(os.pathsep)
            if d
            and "site-packages" not in d
            and not any(os.path.realpath(d).startswith(p + os.sep) for p in prefixes if p != "/usr")
        ]
        if keep:
            env["LD_LIBRARY_PATH"] = os.pathsep.join(keep)
        else:
            del env["LD_LIBRARY_PATH"]
    for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[k] = str(nth)
    return env


class Launcher:
    """Runs ``command + [driver, *args]`` and returns the driver's JSON record.

    Parameters
    ----------
    command: the launch prefix; tokens ``{nproc}``, ``{nth}``, ``{nodes}`` are substituted.
    extra_env: variables added to the child environment after cleaning.
    """

    def __init__(
        self,
        command: Sequence[str] = DEFAULT_COMMAND,
        extra_env: Mapping[str, str] | None = None,
    ) -> None:
        if isinstance(command, (str, bytes)) or not all(isinstance(c, str) for c in command):
            raise TypeError(
                f"Launcher: command must be a list of strings like {list(DEFAULT_COMMAND)}, got {command!r}"
            )
        if not command:
            raise ValueError("Launcher: command must not be empty")
        self.command = tuple(command)
        self.extra_env = dict(extra_env or {})

    def argv(self, driver: str | Path, args: Sequence[Any], nproc: int, nth: int, nodes: int = 1) -> list[str]:
        """The full argument list for one run (no shell involved)."""
        values = {"{nproc}": str(nproc), "{nth}": str(nth), "{nodes}": str(nodes)}
        out = []
        for c in self.command:
            for tok in _TOKENS:
                c = c.replace(tok, values[tok])
            out.append(c)
        return out + [str(driver)] + [str(a) for a in args]

    def run(
        self,
        driver: str | Path,
        args: Sequence[Any],
        nproc: int,
        nth: int,
        nodes: int = 1,
        timeout: float | None = 60.0,
    ) -> dict[str, Any]:
        """Launch once; return the parsed JSON dict. Raises :class:`LaunchError`/:class:`LaunchTimeout`."""
        argv = self.argv(driver, args, nproc, nth, nodes)
        env = clean_environment(os.environ, nth)
        env.update(self.extra_env)
        log.debug("launching %s", argv)
        with contextlib.ExitStack() as stack:
            try:  # a session of its own that dies with this process (gptask.evaluation.child.launch)
                proc = stack.enter_context(launch(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                                  stdin=subprocess.DEVNULL, env=env, text=True))
            except OSError as exc:
                raise LaunchError(f"could not start {argv[0]!r}: {exc}") from exc
            try:
                out, err = proc.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                _kill_tree(proc)
                raise LaunchTimeout(
                    f"run exceeded the timeout of {timeout} s and was killed: {' '.join(argv)}"
                ) from None
        return _parse(argv, proc.returncode, out, err)


def _kill_tree(proc: subprocess.Popen) -> None:
    """Terminate the process group we created for ``proc`` (TERM, then KILL)."""
    for sig, wait in ((signal.SIGTERM, 2.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            proc.communicate(timeout=wait)
            break
        except subprocess.TimeoutExpired:
            continue


def _json_records(text: str) -> list[dict[str, Any]]:
    """The JSON objects printed one per line in ``text`` (other lines ignored), in order."""
    records = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(rec, dict):
                records.append(rec)
    return records


def _error_from_stderr(err: str) -> str | None:
    return next((f"{rec['error']} (value {rec.get('value')})" for rec in _json_records(err) if "error" in rec),
                None)


def _tail(text: str, n: int = 5) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return " | ".join(lines[-n:]) if lines else "(empty)"


def _parse(argv: list[str], returncode: int, out: str, err: str) -> dict[str, Any]:
    cmd = " ".join(argv)
    driver_error = _error_from_stderr(err)
    if returncode != 0:
        reason = driver_error or f"stderr: {_tail(err)}"
        raise LaunchError(f"run failed with exit status {returncode}: {reason}; command: {cmd}")
    records = _json_records(out)
    record = records[-1] if records else None
    if record is None:
        raise LaunchError(f"run printed no JSON line (stdout: {_tail(out)}; stderr: {_tail(err)}); command: {cmd}")
    if driver_error:
        raise LaunchError(f"driver reported an error: {driver_error}; command: {cmd}")
    t = record.get("time")
    if isinstance(t, bool) or not isinstance(t, (int, float)) or not (t == t) or t <= 0 or t == float("inf"):
        raise LaunchError(f"driver output has no valid positive 'time': {record!r}; command: {cmd}")
    return record
