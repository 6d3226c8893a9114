"""``gptask slurm-script``: the ``sbatch`` script of a tuning campaign, with the walltime signal and
the requeue already handled.

The script ``exec``s ``gptask tune ... --executor srun --requeue``: the tuner takes the batch
shell's place, so the ``USR1`` that ``--signal=B:USR1@S`` sends S seconds before the walltime
reaches it. It then stops proposing, cancels (or lets finish) its running steps, leaves unfinished
trials pending, closes the history and runs ``scontrol requeue`` on its own job; the requeued job
runs the same line and resumes the campaign from the history. ``--no-kill``: Slurm would end a job
that loses a node; with it the step on that node fails (a FAILED trial with its reason) and the
campaign goes on with the allocation's other nodes.
"""

from __future__ import annotations

import re
import shlex
import sys
from collections.abc import Sequence

from .slurm import ON_STOP, ClusterError

__all__ = ["slurm_script", "MIN_SIGNAL_S"]

#: Slurm sends a --signal up to 60 s early (its timer's resolution): fewer seconds than this before
#: the walltime leave no time to stop cleanly
MIN_SIGNAL_S = 60
_NAME = re.compile(r"^[A-Za-z0-9_.+-]{1,64}$")


def _walltime(minutes: int) -> str:
    return f"{minutes // 60:02d}:{minutes % 60:02d}:00"


def slurm_script(tune_args: Sequence[str], nodes: int, minutes: int, signal_s: int = 300,
                 requeue: bool = True, on_stop: str = "cancel", job_name: str = "gptask",
                 partition: str | None = None, account: str | None = None, python: str | None = None) -> str:
    """The text of an ``sbatch`` script running ``gptask tune <tune_args> --executor srun`` on
    ``nodes`` nodes for ``minutes`` minutes, signalled ``signal_s`` seconds before the end, and
    requeued then when ``requeue``. ClusterError on a value Slurm would refuse."""
    for name, v, lo in (("nodes", nodes, 1), ("minutes", minutes, 1), ("signal seconds", signal_s, 1)):
        if isinstance(v, bool) or not isinstance(v, int) or v < lo:
            raise ClusterError(f"slurm-script: {name} must be an integer >= {lo}, got {v!r}")
    if signal_s >= minutes * 60:
        raise ClusterError(f"slurm-script: the signal ({signal_s} s before the end) must come after the start: "
                           f"it is longer than the walltime of {minutes} min")
    if signal_s < MIN_SIGNAL_S:
        raise ClusterError(f"slurm-script: --signal-seconds must be >= {MIN_SIGNAL_S} (Slurm may signal up to 60 s "
                           f"early), got {signal_s}")
    if on_stop not in ON_STOP:
        raise ClusterError(f"slurm-script: --on-stop must be 'cancel' or 'finish', got {on_stop!r}")
    for name, v in (("job name", job_name), ("partition", partition), ("account", account)):
        if v is not None and not _NAME.match(v):
            raise ClusterError(f"slurm-script: the {name} must be letters, digits and _.+- (at most 64), got {v!r}")
    bad = [a for a in tune_args if a in ("--executor", "--requeue", "--on-stop", "--workers")
           or a.startswith(("--executor=", "--on-stop=", "--workers="))]
    if bad:
        raise ClusterError(f"slurm-script sets --executor, --on-stop and --requeue itself (and --workers does not "
                           f"apply): leave out {bad}")
    if "--history" not in tune_args and not any(a.startswith("--history=") for a in tune_args):
        raise ClusterError("slurm-script: the tune line needs --history FILE: a requeued job resumes from it")
    lines = ["#!/bin/bash", f"#SBATCH --job-name={job_name}", f"#SBATCH --nodes={nodes}",
             f"#SBATCH --time={_walltime(minutes)}", f"#SBATCH --signal=B:USR1@{signal_s}",
             # Slurm ends a job that loses a node unless --no-kill: the campaign goes on with the others
             "#SBATCH --no-kill"]
    if requeue:
        lines += ["#SBATCH --requeue", "#SBATCH --open-mode=append"]
    lines.append(f"#SBATCH --output={job_name}-%j.out")
    if partition:
        lines.append(f"#SBATCH --partition={partition}")
    if account:
        lines.append(f"#SBATCH --account={account}")
    command = [python or sys.executable, "-m", "gptask", "tune", *tune_args, "--executor", "srun",
               "--on-stop", on_stop] + (["--requeue"] if requeue else [])
    lines += [
        "# Written by `gptask slurm-script`. The tuner replaces this shell (exec), so the USR1 that",
        f"# --signal=B:USR1@{signal_s} sends {signal_s} s before the walltime reaches it: it stops proposing,",
        f"# {'cancels' if on_stop == 'cancel' else 'lets finish'} its running steps, leaves unfinished trials "
        "pending, closes the history" + (" and" if requeue else "."),
        *(["# requeues this job (scontrol requeue); the requeued job resumes the campaign from the history."]
          if requeue else []),
        "# Each evaluation runs as an srun step on free nodes of this allocation; --no-kill: a node lost",
        "# fails its step (a FAILED trial) and the campaign goes on with the other nodes.",
        'echo "gptask campaign: job $SLURM_JOB_ID (restart ${SLURM_RESTART_COUNT:-0}) on $SLURM_JOB_NODELIST"',
        "exec " + " ".join(shlex.quote(a) for a in command),
    ]
    return "\n".join(lines) + "\n"
