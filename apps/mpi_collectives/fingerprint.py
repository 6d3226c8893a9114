"""A timing-free fingerprint of what a collective does: large intranode messages per call.

On one node MPICH moves a point-to-point message of at least
``MPIR_CVAR_CH4_IPC_CMA_P2P_THRESHOLD`` bytes (8 KiB by default) with one cross-memory-attach
copy, a ``process_vm_readv`` system call by the receiver. Counting those calls with
``strace -f -c`` over a job with a *fixed* number of collective calls gives the number of large
messages, which depends on the algorithm's communication pattern (partners per step, number of
steps) and not on the machine's load. Two jobs with ``n1`` and ``n2`` timed calls cancel the
fixed start-up and probe traffic:

    messages per call per rank = (count(n2) - count(n1)) / ((n2 - n1) * nprocs)

Needs ``strace`` and permission to trace child processes; :func:`available` says whether both
are there. Used by verify_knobs.py and the tests as evidence that a knob reaches MPICH.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .launcher import LaunchConfig
from .objective import evaluate

__all__ = ["available", "cma_count", "messages_per_call"]

SYSCALL = "process_vm_readv"
# follow children, quiet, summary only; the seccomp filter stops the tracee only on the counted
# call (5x faster than plain ptrace here, same counts)
_FLAGS = ("-f", "--seccomp-bpf", "-qq", "-c")


def available() -> bool:
    """True when ``strace -f`` works here (installed and allowed to trace)."""
    exe = shutil.which("strace")
    if exe is None:
        return False
    try:
        r = subprocess.run([exe, *_FLAGS, "-e", f"trace={SYSCALL}", "-o", "/dev/null", "true"],
                           capture_output=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return False
    return r.returncode == 0


def _parse_calls(summary: str) -> int:
    for line in summary.splitlines():
        fields = line.split()
        if fields and fields[-1] == SYSCALL:
            # "% time  seconds  usecs/call  calls  [errors]  syscall"
            return int(fields[3])
    return 0


def cma_count(task: Mapping[str, Any], params: Mapping[str, Any], n_calls: int,
              config: LaunchConfig | None = None) -> int:
    """``process_vm_readv`` calls of a whole job with exactly ``n_calls`` timed collectives."""
    base = config or LaunchConfig()
    with tempfile.TemporaryDirectory() as tmp:
        out = str(Path(tmp) / "strace.txt")
        head = list(base.template) if base.template else ["{mpiexec}", "-n", "{nprocs}",
                                                           "{python}", "{script}"]
        cfg = LaunchConfig(**{
            **base.__dict__,
            "template": ["strace", *_FLAGS, "-e", f"trace={SYSCALL}", "-o", out, *head],
            "min_iters": n_calls, "max_iters": n_calls, "warm_fraction": 0.0,
            "max_time": 1e9, "target": 1e-6})
        evaluate(task, params, cfg)
        return _parse_calls(Path(out).read_text())


def messages_per_call(task: Mapping[str, Any], params: Mapping[str, Any], n1: int = 10,
                      n2: int = 20, config: LaunchConfig | None = None) -> float:
    """Large (CMA) messages received per collective call and rank; see the module docstring."""
    if not (1 <= n1 < n2):
        raise ValueError(f"need 1 <= n1 < n2, got {n1}, {n2}")
    nprocs = int(task["nprocs"])
    c1 = cma_count(task, params, n1, config)
    c2 = cma_count(task, params, n2, config)
    return (c2 - c1) / ((n2 - n1) * nprocs)
