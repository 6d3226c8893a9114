"""Evaluations as ``srun`` job steps packed into a Slurm allocation: :class:`SlurmSteps`.

``gt.tune(problem, ..., executor=SlurmSteps())`` inside an allocation (``salloc -N 8``, an
``sbatch`` script) runs each evaluation as a job step on nodes of the allocation that are free,
as many at once as fit. What one run needs, :class:`Resources` (nodes, tasks per node, CPUs per
task, a time limit), comes from ``resources(task, params)``: given to the executor, or the
objective's own ``resources`` attribute, or one node. Runs of different sizes share the
allocation: when nodes free up, the first of the next ``lookahead`` waiting trials that fits them
starts (a trial passed over ``max_passes`` times then waits for its nodes; nothing starves). The
asynchronous loop keeps ``nodes + lookahead`` trials proposed, so the choice is made among proposals
knowing which nodes are free.

Fidelity (docs/fidelity.md): for a problem with fidelity dimensions, ``resources(task, params)``
receives the fidelity values in ``params``, as the objective does, and ``fidelity_resources`` (a
mapping from fidelity level to Resources, a number of nodes or a dict of fields, or a function of the
fidelity values returning one) replaces the fields it gives for a run at that level: a low-fidelity
run can ask for fewer nodes or a shorter time limit. ``gt.tune`` checks it against the problem's
levels and the allocation before any run (:meth:`SlurmSteps.check_problem`). Every run's trial
records the resources its step had (``trial.extra["resources"]``).

The objective runs in a thread of the tuner's process (no pickling) and launches its run through
:func:`current_step`: ``current_step().run(["./app", ...])`` or ``current_step().prefix + [...]``
(``srun --nodes=K --ntasks=... --nodelist=... --exclusive --time=...``: a step of its own nodes,
never sharing their CPUs with another step). A step that fails to start, is killed at its time
limit or loses a node raises :class:`StepFailed` with that reason: a FAILED trial. A step placed
on a node that left the allocation after the node states were last read (they are read at most
every NODE_CHECK_S) never starts and its trial is placed again on other nodes, not failed.

Stopping (walltime): ``with SlurmSteps(...) as ex:`` installs a SIGUSR1 handler (``sbatch
--signal=B:USR1@S``); at the signal the loop stops proposing, the running steps are cancelled
(``on_stop="cancel"``, their trials stay PENDING) or run to their end (``"finish"``), the history is
closed, and :func:`requeue` (``scontrol requeue``) puts the job back in the queue, where the same
command resumes. SIGTERM stops the loop at once (:mod:`gptask.tuning.loop`); Slurm kills the steps.
A SIGTERM requeues only a job ended for its time limit (:func:`ending_at_time_limit`), never one
ended by ``scancel``, whose cancel it would undo. A step Slurm cancels while its job ends (``scancel``
of the job, before the tuner has stopped) is an interrupted run, not a failed one: its trial stays
pending (:func:`job_ending`).

Killed outright (``scancel --signal=KILL``, the OOM killer): a step's result is journalled beside
the history (:mod:`gptask.evaluation.journal`) by the thread that ran it, before the campaign's main
thread commits it; the campaign submitted again commits it from there instead of running it again.

slurmctld restarting (or failing over): a step that srun could not create because the controller
did not answer, or did not know its nodes yet, is tried again with backoff for CONTROLLER_WAIT_S
(it never ran, so nothing runs twice); nodes that are unknown or not responding take no new step
but count as up, so no trial fails for them; queries are retried the same way.

Over 500 lines on purpose: the allocation, the packing of steps onto free nodes, one step's life
(launch, time limit, lost node, cancel) and the walltime stop with its requeue are the parts of one
executor, tested together on a real Slurm.
"""

from __future__ import annotations

import concurrent.futures as cf
import dataclasses
import logging
import math
import numbers
import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ...evaluation.evaluate import Job, JobResult, Outcome, journal_result, take_journal
from ...data.trials import Status
from ...problem.fidelity import FidelityObjective

__all__ = ["Allocation", "ClusterError", "Resources", "SlurmSteps", "Step", "StepFailed", "current_step",
           "check_fidelity_resources", "check_level_resources", "level_key", "level_resources_spec", "resources_at_level", "split_fidelity",
           "ending_at_time_limit", "job_ending", "requeue", "ON_STOP"]

log = logging.getLogger(__name__)

#: what the running steps do when the campaign is stopped by a signal
ON_STOP = ("cancel", "finish")
#: waiting trials among which the next run is chosen when nodes free up
LOOKAHEAD = 4
#: seconds a step may run past its time limit before gptask cancels it itself (Slurm checks limits
#: about every 30 s)
TIME_LIMIT_GRACE_S = 45.0
#: seconds between checks of the allocation's node states (down, drained)
NODE_CHECK_S = 5.0
#: how long a call of a Slurm command may take (slurmctld restarting answers late)
COMMAND_TIMEOUT_S = 60.0
#: how long a step that could not be created, or a query, is retried while slurmctld does not answer
#: (a restart, a fail-over) before the trial fails; the waits between tries double from RETRY_FIRST_S
#: up to RETRY_MAX_S
CONTROLLER_WAIT_S = 300.0
RETRY_FIRST_S = 1.0
RETRY_MAX_S = 15.0
#: Slurm's node states in which a node is gone for the campaign: it takes no new step, and a run
#: needing more nodes than are left fails at once
UNUSABLE_STATES = ("down", "drain", "drng", "fail", "maint", "futr", "npc", "powered_down")
#: node states in which a node takes no new step yet but is expected back: after a slurmctld restart
#: the nodes are "unk" (or not responding, a trailing "*") until their slurmd registers again
WAITING_STATES = ("unk", "boot")
#: what srun or a query says when slurmctld does not answer, or has just restarted and does not
#: know the nodes' memory yet (gptask's steps ask for no memory, so this is never the run's fault):
#: the step was never created, so trying again runs nothing twice
TRANSIENT_ERRORS = ("UNABLE TO CONTACT SLURM CONTROLLER", "SOCKET TIMED OUT", "ZERO BYTES WERE TRANSMITTED",
                    "CONNECTION REFUSED", "COMMUNICATION CONNECTION FAILURE", "MEMORY REQUIRED BY TASK IS NOT AVAILABLE",
                    "SLURM CONTROLLER IS NOT RESPONDING", "TRANSPORT ENDPOINT IS NOT CONNECTED",
                    "RESOURCE TEMPORARILY UNAVAILABLE", "JOB STEP CREATION TEMPORARILY DISABLED")

HOW_TO_ALLOCATE = ("run inside an allocation: `salloc -N 4 gptask tune ...`, or an sbatch script (`gptask "
                   "slurm-script` writes one)")


class ClusterError(ValueError):
    """The cluster set-up cannot run what was asked (no allocation, no srun, a run bigger than the
    allocation); raised before any run."""


class StepFailed(RuntimeError):
    """A job step did not run to a successful end; the message is the reason (the trial's)."""


@dataclass(frozen=True)
class Resources:
    """What one run needs: ``nodes``, ``tasks_per_node`` (MPI ranks on each), ``cpus_per_task``
    and ``time_limit`` (seconds, None: the allocation's)."""

    nodes: int = 1
    tasks_per_node: int = 1
    cpus_per_task: int = 1
    time_limit: float | None = None

    def __post_init__(self) -> None:
        for name in ("nodes", "tasks_per_node", "cpus_per_task"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < 1:
                raise ClusterError(f"resources: {name} must be an integer >= 1, got {v!r}")
            object.__setattr__(self, name, int(v))
        t = self.time_limit
        if t is not None and (isinstance(t, bool) or not isinstance(t, numbers.Real) or not t > 0
                              or t == float("inf")):
            raise ClusterError(f"resources: time_limit must be a number of seconds > 0 or None, got {t!r}")

    @property
    def ntasks(self) -> int:
        return self.nodes * self.tasks_per_node

    @classmethod
    def of(cls, value: Any) -> "Resources":
        """``value`` as Resources: Resources, an int (nodes) or a dict of the fields."""
        if isinstance(value, Resources):
            return value
        if isinstance(value, numbers.Integral) and not isinstance(value, bool):
            return cls(nodes=int(value))
        if isinstance(value, Mapping):
            unknown = sorted(set(value) - {f.name for f in dataclasses.fields(cls)})
            if unknown:
                raise ClusterError(f"resources: unknown field(s) {unknown}; the fields are nodes, tasks_per_node, "
                                   "cpus_per_task, time_limit")
            return cls(**value)
        raise ClusterError(f"resources must give Resources, a number of nodes or a dict, got {value!r}")

    def updated(self, value: Any, what: str) -> "Resources":
        """These resources with the fields ``value`` gives replaced: a Resources (all of them), an
        int (``nodes``) or a dict of some fields; ClusterError naming ``what`` and the value otherwise."""
        if isinstance(value, Resources):
            return value
        if isinstance(value, numbers.Integral) and not isinstance(value, bool):
            value = {"nodes": value}
        if not isinstance(value, Mapping):
            raise ClusterError(f"{what} must give Resources, a number of nodes or a dict of fields, got {value!r}")
        unknown = sorted(set(value) - {f.name for f in dataclasses.fields(Resources)})
        if unknown:
            raise ClusterError(f"{what}: unknown field(s) {unknown} in {dict(value)!r}; the fields are nodes, "
                               "tasks_per_node, cpus_per_task, time_limit")
        try:
            return dataclasses.replace(self, **value)
        except ClusterError as exc:
            raise ClusterError(f"{what}: {exc}") from None

    def record(self) -> dict[str, Any]:
        """What a trial records of its step (``trial.extra["resources"]``): the fields and ``ntasks``."""
        return {**dataclasses.asdict(self), "ntasks": self.ntasks}


def _slurm_time(seconds: float) -> str:
    """Seconds as srun's ``--time`` (``minutes:seconds``, at least one second)."""
    s = max(1, int(round(seconds)))
    return f"{s // 60}:{s % 60:02d}"


def _transient(stderr: str) -> bool:
    """Whether a Slurm command's ``stderr`` says slurmctld did not answer (or has just restarted)."""
    upper = stderr.upper()
    return any(e in upper for e in TRANSIENT_ERRORS)


def _not_started(stderr: str) -> bool:
    """Whether srun's ``stderr`` says its step was never created for a reason that passes (slurmctld
    restarting): trying again runs nothing twice."""
    return "UNABLE TO CREATE STEP" in stderr.upper() and _transient(stderr)


def _backoff(wait_for: float, stop: threading.Event | None = None):
    """The pauses (seconds) between tries of something failing while slurmctld does not answer:
    doubling from RETRY_FIRST_S to RETRY_MAX_S, for ``wait_for`` seconds in all; each pause is
    slept before it is yielded, and the tries end early when ``stop`` is set."""
    end = time.monotonic() + wait_for
    delay = RETRY_FIRST_S
    while time.monotonic() + delay <= end:
        if stop is not None:
            if stop.wait(delay):
                return
        else:
            time.sleep(delay)
        yield delay
        delay = min(2 * delay, RETRY_MAX_S)


def _command(argv: Sequence[str], timeout: float = COMMAND_TIMEOUT_S, retry_for: float = 0.0) -> str:
    """stdout of a Slurm command; ClusterError naming it when it fails. ``retry_for``: seconds during
    which a failure because slurmctld does not answer is tried again (with backoff)."""
    tries = _backoff(retry_for)
    while True:
        try:
            done = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, check=False)
        except FileNotFoundError:
            raise ClusterError(f"{argv[0]} is not on PATH: is Slurm installed here?") from None
        except subprocess.TimeoutExpired:
            error, again = f"`{' '.join(argv)}` did not answer within {timeout:g} s", True
        else:
            if done.returncode == 0:
                return done.stdout
            error = f"`{' '.join(argv)}` failed (exit {done.returncode}): {done.stderr.strip()}"
            again = _transient(done.stderr)
        if not again or next(tries, None) is None:
            raise ClusterError(error)
        log.info("%s; trying again (slurmctld not answering)", error)


@dataclass(frozen=True)
class Allocation:
    """The Slurm allocation this process runs in: its job id and node names."""

    job_id: str
    nodes: tuple[str, ...]

    @classmethod
    def current(cls, environ: Mapping[str, str] | None = None) -> "Allocation":
        """From ``SLURM_JOB_ID`` and ``SLURM_JOB_NODELIST``; ClusterError when there is none or
        ``srun`` is missing."""
        env = os.environ if environ is None else environ
        job = env.get("SLURM_JOB_ID")
        if not job:
            raise ClusterError(f"running evaluations as srun steps needs a Slurm allocation, and SLURM_JOB_ID is not "
                               f"set: {HOW_TO_ALLOCATE}")
        if shutil.which("srun", path=env.get("PATH")) is None:
            raise ClusterError("srun is not on PATH: load Slurm's module or add its bin directory to PATH")
        nodelist = env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST")
        if not nodelist:
            raise ClusterError(f"Slurm job {job} gives no node list (SLURM_JOB_NODELIST is not set)")
        nodes = tuple(_command(["scontrol", "show", "hostnames", nodelist]).split())
        if not nodes:
            raise ClusterError(f"Slurm job {job}: the node list {nodelist!r} names no node")
        return cls(job, nodes)


@dataclass
class Step:
    """Where one evaluation runs: what the objective receives from :func:`current_step`.

    nodes: the node names of this step; resources: what it asked for; job_id: the allocation;
    name: the step's name (``gptask-<job>-<n>``); prefix: the ``srun`` command line to put before
    the program (a list of strings)."""

    nodes: tuple[str, ...]
    resources: Resources
    job_id: str
    name: str
    cancelled: bool = False
    #: srun could not create this step at its first run, nothing of it ran (SlurmSteps then checks
    #: whether its nodes left the allocation meanwhile, and places the trial again if so)
    never_created: bool = False
    _created: bool = False
    _procs: list = dataclasses.field(default_factory=list, repr=False)
    _stopped: threading.Event = dataclasses.field(default_factory=threading.Event, repr=False)

    @property
    def prefix(self) -> list[str]:
        r = self.resources
        argv = ["srun", f"--jobid={self.job_id}", f"--job-name={self.name}", f"--nodes={r.nodes}",
                f"--ntasks={r.ntasks}", f"--ntasks-per-node={r.tasks_per_node}", f"--cpus-per-task={r.cpus_per_task}",
                f"--nodelist={','.join(self.nodes)}", "--exclusive", "--kill-on-bad-exit=1", "--quiet"]
        if r.time_limit is not None:
            argv.append(f"--time={_slurm_time(r.time_limit)}")
        return argv

    def run(self, command: Sequence[str], **kwargs: Any) -> subprocess.CompletedProcess:
        """Run ``command`` as this step (``prefix + command``) and return the CompletedProcess
        (stderr captured as text); StepFailed with the reason when the step did not succeed.
        ``kwargs`` go to :func:`subprocess.run` (e.g. ``stdout=subprocess.PIPE``, ``cwd``, ``env``)."""
        kwargs.setdefault("text", True)
        kwargs["stderr"] = subprocess.PIPE
        limit = self.resources.time_limit
        tries = _backoff(CONTROLLER_WAIT_S, self._stopped)
        while True:
            proc = subprocess.Popen(self.prefix + list(command), **kwargs)
            self._procs.append(proc)
            try:
                out, err = proc.communicate(timeout=None if limit is None else limit + TIME_LIMIT_GRACE_S)
            except subprocess.TimeoutExpired:
                self._scancel()
                proc.kill()
                out, err = proc.communicate()
                raise StepFailed(f"step {self.name} ran past its time limit of {limit:g} s and was cancelled") from None
            finally:
                self._procs.remove(proc)
            text = err if isinstance(err, str) else (err or b"").decode(errors="replace")
            # never created (slurmctld restarting): nothing ran, so it is tried again, not a failed run
            if proc.returncode == 0 or self.cancelled or not _not_started(text) or next(tries, None) is None:
                break
            log.info("step %s not created (%s): trying again", self.name, _last_line(text))
        done = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
        if proc.returncode != 0 and "UNABLE TO CREATE STEP" in text.upper():
            self.never_created = not self._created
        else:
            self._created = True
        if proc.returncode != 0 and not self.cancelled and self._went_with_job(text):
            # cancelled with its job, not on its own: its trial stays pending, as at the campaign's own stop;
            # recorded FAILED it was lost (counted in the budget, never run again)
            self.cancelled = True
        if proc.returncode != 0 or _lost_node(err or ""):  # srun may exit 0 when its node failed
            raise StepFailed(self.reason(proc.returncode, err or ""))
        return done

    def _went_with_job(self, stderr: str) -> bool:
        """Whether Slurm cancelled this step (srun's ``stderr``: ``*** STEP 7.2 ON n1 CANCELLED AT ...``)
        because its job ends (``scancel`` of the job, the job's time limit; :func:`job_ending`), not on its
        own or at a time limit of its own."""
        upper = stderr.upper()
        if "CANCELLED AT" not in upper or ("TIME LIMIT" in upper and self.resources.time_limit is not None):
            return False
        return job_ending(self.job_id)

    def reason(self, code: int, stderr: str) -> str:
        """Why a step ended with exit status ``code`` (read from srun's ``stderr``)."""
        text = stderr if isinstance(stderr, str) else stderr.decode(errors="replace")
        upper = text.upper()
        if self.cancelled:
            return f"step {self.name} cancelled (the campaign was stopped)"
        if "TIME LIMIT" in upper:
            limit = self.resources.time_limit
            return (f"step {self.name} killed at its time limit of {limit:g} s" if limit is not None else
                    f"step {self.name} killed at the job's time limit")
        if _lost_node(text):
            return f"step {self.name} lost a node ({', '.join(self.nodes)}): {_last_line(text)}"
        if "UNABLE TO CREATE STEP" in upper or "STEP CREATION" in upper or "INVALID" in upper:
            return f"step {self.name} could not start: {_last_line(text)}"
        tail = _last_line(text, program=True)
        return f"step {self.name} exited with status {code}" + (f": {tail}" if tail else "")

    def cancel(self) -> None:
        """Cancel this step because the campaign stops (its trial stays pending)."""
        self.cancelled = True
        self._stopped.set()
        self._scancel()

    def _scancel(self) -> None:
        """``scancel`` of the steps named like this one."""
        try:
            listing = _command(["squeue", "-h", "-s", "-j", self.job_id, "-o", "%i %j"], timeout=20,
                               retry_for=CONTROLLER_WAIT_S)
        except ClusterError as exc:
            log.warning("could not list the steps of job %s to cancel %s: %s", self.job_id, self.name, exc)
            return
        ids = [line.split()[0] for line in listing.splitlines() if line.split()[1:] == [self.name]]
        if ids:
            subprocess.run(["scancel", *ids], capture_output=True, timeout=COMMAND_TIMEOUT_S, check=False)


def _node_states(sinfo: str) -> tuple[set[str], set[str]]:
    """(gone, waited for) of the nodes in ``sinfo -N -o '%N %t'``'s output: gone, a node down,
    drained or failed (UNUSABLE_STATES, also when it does not respond: "down*"); waited for, one in
    WAITING_STATES or not responding ("idle*", "mix*": slurmctld has not heard from its slurmd yet,
    or will mark it down after SlurmdTimeout)."""
    down, waiting = set(), set()
    for line in sinfo.splitlines():
        words = line.split()
        if len(words) < 2:
            continue
        node, state = words[:2]
        base = state.rstrip("*~#!%$@^-").lower()
        if base in UNUSABLE_STATES:
            down.add(node)
        elif base in WAITING_STATES or state.endswith("*"):
            waiting.add(node)
    return down, waiting


def job_ending(job_id: str) -> bool:
    """Whether Slurm job ``job_id`` is ending: squeue shows it in another state than RUNNING
    (CANCELLED, COMPLETING, ...) or no longer knows it. A step Slurm cancelled while its job ends went
    with the job (scancel of the job): its run is interrupted, not failed. True when it cannot be told
    (slurmctld not answering): the trial then stays pending and a resumed campaign runs it, where a
    FAILED trial would lose it."""
    try:
        state = _command(["squeue", "-h", "-j", str(job_id), "-o", "%T"], timeout=20, retry_for=RETRY_MAX_S)
    except ClusterError as exc:
        log.warning("could not read the state of Slurm job %s (%s): a step Slurm cancelled is taken as ended "
                    "with its job (its trial stays pending)", job_id, exc)
        return True
    return state.strip().upper() != "RUNNING"


def _lost_node(stderr: str | bytes) -> bool:
    """Whether srun's ``stderr`` says a node of the step failed (``srun: error: Node failure on n3``)."""
    upper = (stderr if isinstance(stderr, str) else stderr.decode(errors="replace")).upper()
    return "NODE_FAIL" in upper or "NODE FAILURE" in upper or "NODE FAIL" in upper


def _last_line(text: str, program: bool = False) -> str:
    """The last line of a step's stderr (at most 300 characters); with ``program``, the program's own
    last line where it wrote one (srun's lines, "srun: ...", interleave with it in no fixed order)."""
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    own = [ln for ln in lines if not ln.startswith("srun:")] if program else []
    return (own or lines)[-1][:300] if lines else ""


_here = threading.local()


def current_step() -> Step:
    """The :class:`Step` of the evaluation running in this thread (in an objective run by
    :class:`SlurmSteps`); RuntimeError elsewhere."""
    step = getattr(_here, "step", None)
    if step is None:
        raise RuntimeError("current_step() is called from an objective that SlurmSteps runs "
                           "(gt.tune(..., executor=gptask.tuning.cluster.SlurmSteps()))")
    return step


def requeue(job_id: str | None = None) -> None:
    """Put Slurm job ``job_id`` (default: this one, ``SLURM_JOB_ID``) back in the queue
    (``scontrol requeue``); the job is then ended by Slurm and starts again from its script."""
    job = job_id or os.environ.get("SLURM_JOB_ID")
    if not job:
        raise ClusterError("requeue: no Slurm job to requeue (SLURM_JOB_ID is not set)")
    log.warning("requeueing Slurm job %s: the same command resumes the campaign", job)
    _command(["scontrol", "requeue", str(job)], retry_for=CONTROLLER_WAIT_S)


def ending_at_time_limit(job_id: str | None = None) -> bool:
    """Whether Slurm job ``job_id`` (default: this one) is being ended for its time limit (the reason
    squeue gives while it completes is ``TimeLimit``), as opposed to cancelled (``scancel``, whatever
    its signal: the reason is None) or anything else. A SIGTERM at the walltime requeues a campaign
    with ``--requeue``; a SIGTERM of ``scancel`` must not undo the cancel. False when it cannot be told
    (slurmctld not answering): the job is not requeued, and resubmitting it resumes the campaign."""
    job = job_id or os.environ.get("SLURM_JOB_ID")
    if not job:
        return False
    try:
        reason = _command(["squeue", "-h", "-j", str(job), "-o", "%r"], timeout=20, retry_for=RETRY_MAX_S).strip()
    except ClusterError as exc:
        log.warning("could not read why Slurm job %s ends (%s): not requeueing it", job, exc)
        return False
    return reason.lower() == "timelimit"


@dataclass
class _Waiting:
    future: cf.Future
    fn: Callable[..., Any]
    args: tuple
    resources: Resources
    passes: int = 0
    journalled: Job | None = None  # the job whose result this executor journals (with its resources)


def level_key(fidelity: Mapping[str, Any], names: Sequence[str]) -> Any:
    """The key of a fidelity level in a ``fidelity_resources`` mapping: the value of a problem's one
    fidelity dimension, else the tuple of the values in the fidelity space's order."""
    return fidelity[names[0]] if len(names) == 1 else tuple(fidelity[n] for n in names)


class SlurmSteps(cf.Executor):
    """A :class:`concurrent.futures.Executor` running each evaluation as an ``srun`` step of this
    allocation (see the module docstring).

    resources: ``f(task, params) -> Resources | int | dict`` (None: the objective's ``resources``
    attribute, else one node); on_stop: "cancel" (running steps are cancelled at a stop signal,
    their trials stay pending) or "finish" (they run to their end); lookahead: waiting trials among
    which the next run is chosen; max_passes: times a trial may be passed over before it waits for
    its nodes; signals: the signal names that stop the campaign inside ``with`` (default USR1);
    allocation: an :class:`Allocation` (default: this process's, ClusterError without one);
    fidelity_resources: for a problem with fidelity, what a run at each fidelity level needs, in
    place of the fields it gives of ``resources``' answer: a mapping ``{level: Resources | nodes |
    {field: value}}`` keyed by the value of the problem's fidelity dimension (a tuple of the values,
    in the fidelity space's order, for several), or ``f(fidelity: dict) -> Resources | nodes | dict``
    (None: the objective's ``fidelity_resources`` attribute, else the same resources at every level)."""

    def __init__(self, resources: Callable[[Mapping[str, Any], Mapping[str, Any]], Any] | None = None,
                 on_stop: str = "cancel", lookahead: int = LOOKAHEAD, max_passes: int | None = None,
                 signals: Sequence[str] = ("USR1",), allocation: Allocation | None = None,
                 fidelity_resources: Mapping[Any, Any] | Callable[[dict], Any] | None = None) -> None:
        if on_stop not in ON_STOP:
            raise ClusterError(f"on_stop must be 'cancel' or 'finish', got {on_stop!r}")
        if resources is not None and not callable(resources):
            raise ClusterError(f"resources must be a function of (task, params), got {resources!r}")
        check_fidelity_resources(fidelity_resources)
        for name, v in (("lookahead", lookahead), ("max_passes", max_passes)):
            if v is not None and (isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < 1):
                raise ClusterError(f"{name} must be an integer >= 1, got {v!r}")
        sigs = []
        for s in signals:
            try:
                sigs.append(signal.Signals[s if str(s).startswith("SIG") else f"SIG{s}"])
            except KeyError:
                raise ClusterError(f"signals: unknown signal {s!r} (e.g. 'USR1', 'USR2')") from None
        self.allocation = allocation or Allocation.current()
        self.resources = resources
        self.fidelity_resources = fidelity_resources
        self.on_stop = on_stop
        self.lookahead = int(lookahead)
        self.max_passes = int(max_passes) if max_passes is not None else 2 * len(self.allocation.nodes)
        self.signals = tuple(sigs)
        self.stopped_by = ""
        self._cond = threading.Condition()
        self._queue: list[_Waiting] = []
        self._free = list(self.allocation.nodes)
        self._down: set[str] = set()
        self._waiting: set[str] = set()
        self._running: dict[cf.Future, Step] = {}
        self._threads: list[threading.Thread] = []
        self._shutdown = False
        self._count = 0
        # when the node states were last read (time.monotonic()); -inf: never, or to be read at the next
        # placement (0.0 was not: within NODE_CHECK_S of the machine's boot the monotonic clock is below it)
        self._checked = -math.inf
        self._previous: dict[int, Any] = {}
        self._dispatcher = threading.Thread(target=self._dispatch, name="gptask-slurm-steps", daemon=True)
        self._dispatcher.start()

    # the asynchronous loop's view: how many trials to keep proposed, and whether to stop
    @property
    def max_in_flight(self) -> int:
        """Trials the loop keeps proposed: every node busy with a one-node run, plus ``lookahead``."""
        return len(self.allocation.nodes) + self.lookahead

    def stop_requested(self) -> bool:
        return bool(self.stopped_by)

    def request_stop(self, why: str = "stop requested") -> None:
        """Stop the campaign: no new step starts; running ones are cancelled (on_stop="cancel") or
        run to their end."""
        with self._cond:
            if self.stopped_by:
                return
            self.stopped_by = why
            running = list(self._running.values())
            self._cond.notify_all()
        log.warning("%s: no new trials; %d step(s) running are %s", why, len(running),
                    "cancelled (their trials stay pending)" if self.on_stop == "cancel" else "let finish")
        if self.on_stop == "cancel":
            for step in running:
                threading.Thread(target=step.cancel, daemon=True).start()

    def __enter__(self) -> "SlurmSteps":
        if threading.current_thread() is threading.main_thread():
            for s in self.signals:
                self._previous[s] = signal.signal(s, self._on_signal)
        return self

    def __exit__(self, *exc: Any) -> None:
        for s, previous in self._previous.items():
            signal.signal(s, previous)
        self._previous.clear()
        self.shutdown(wait=True, cancel_futures=True)

    def _on_signal(self, signum: int, frame: Any) -> None:
        # in the main thread between bytecodes: hand the work (which takes locks) to a thread
        threading.Thread(target=self.request_stop, args=(f"stopped by {signal.Signals(signum).name}",),
                         daemon=True).start()

    def needs(self, fn: Callable[..., Any], args: tuple) -> Resources:
        """The Resources of ``fn(*args)``: args[0] is a :class:`gptask.evaluation.evaluate.Job` (task, params,
        objective); ClusterError when it asks more nodes than the allocation has. For a problem with
        fidelity (the job's objective a :class:`~gptask.problem.fidelity.FidelityObjective`) the rule
        sees the fidelity values in ``params``, and the level's ``fidelity_resources`` replace the
        fields they give."""
        task, params, fidelity, objective = split_fidelity(args[0] if args else None)
        rule = self.resources or getattr(objective, "resources", None)
        res = Resources() if rule is None else Resources.of(rule(task, params))
        by_level = level_resources_spec(self.fidelity_resources, objective)
        if fidelity is not None and by_level is not None:
            res = resources_at_level(by_level, fidelity, list(fidelity), res)
        n = len(self.allocation.nodes)
        if res.nodes > n:
            raise ClusterError(f"resources: a run of task {task} with {params} asks {res.nodes} nodes, "
                               f"and the allocation (job {self.allocation.job_id}) has {n}: "
                               f"{', '.join(self.allocation.nodes)}")
        return res

    def check_problem(self, problem: Any) -> None:
        """Check the ``fidelity_resources`` (given here or the objective's attribute) against
        ``problem`` before any run (``gt.tune`` calls it): ClusterError naming a fidelity level it
        gives nothing for, a key that is no level (with the levels), a bad value, a level asking
        more nodes than the allocation has, or fidelity_resources for a problem without fidelity."""
        by_level = level_resources_spec(self.fidelity_resources, getattr(problem, "objective", None))
        check_level_resources(by_level, problem, Resources(), len(self.allocation.nodes),
                              f"the allocation (job {self.allocation.job_id})")

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> cf.Future:
        res = self.needs(fn, args)
        future: cf.Future = cf.Future()
        # journalled here, once the result is final (its step's resources added, a cancelled step's
        # failure made an interruption), not by run_job
        journalled, args = take_journal(args)
        with self._cond:
            if self._shutdown:
                raise RuntimeError("cannot submit to a SlurmSteps executor after shutdown")
            self._queue.append(_Waiting(future, lambda: fn(*args, **kwargs), args, res, journalled=journalled))
            self._cond.notify_all()
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self._cond:
            self._shutdown = True
            if cancel_futures:
                for w in self._queue:
                    w.future.cancel()
                self._queue.clear()
            self._cond.notify_all()
        if wait:
            for t in list(self._threads):
                t.join()

    # placement
    def _usable(self) -> list[str]:
        """The free nodes that take a step now (node states read at most every NODE_CHECK_S): not
        gone (down, drained, left the job) and not waited for (unknown or not responding, as after
        a slurmctld restart until their slurmd registers again)."""
        now = time.monotonic()
        if now - self._checked >= NODE_CHECK_S:
            self._checked = now
            try:
                text = _command(["sinfo", "-h", "-N", "-n", ",".join(self.allocation.nodes), "-o", "%N %t"], timeout=20)
                down, waiting = _node_states(text)
                # a node lost by a --no-kill job leaves the job (and may be up again for others)
                self._down = down | (set(self.allocation.nodes) - set(self._job_nodes()))
                self._waiting = waiting - self._down
            except ClusterError as exc:  # slurmctld restarting: no new step until the states are read
                log.info("node states not read (%s): no new step until they are", exc)
                self._waiting = set(self.allocation.nodes) - self._down
        return [n for n in self._free if n not in self._down and n not in self._waiting]

    def _job_nodes(self) -> list[str]:
        """The nodes the allocation holds now (``squeue``); all of them when the job is not listed."""
        nodelist = _command(["squeue", "-h", "-j", self.allocation.job_id, "-o", "%N"], timeout=20).strip()
        if not nodelist:
            return list(self.allocation.nodes)
        return _command(["scontrol", "show", "hostnames", nodelist], timeout=20).split()

    def _pick(self) -> tuple[_Waiting, list[str]] | None:
        """The waiting run to start now and its nodes, or None."""
        self._queue = [w for w in self._queue if not w.future.cancelled()]
        if not self._queue or self.stopped_by:
            return None
        usable = self._usable()
        up = len([n for n in self.allocation.nodes if n not in self._down])
        for w in self._queue[:self.lookahead]:
            if w.resources.nodes > up:  # more nodes than are up: fails now instead of waiting for ever
                return w, []
        head = self._queue[0]
        window = self._queue[:1] if head.passes >= self.max_passes else self._queue[:self.lookahead]
        for w in window:
            if w.resources.nodes <= len(usable):
                if w is not head:
                    head.passes += 1
                return w, usable[:w.resources.nodes]
        return None

    def _dispatch(self) -> None:
        with self._cond:
            while True:
                if self._shutdown and not self._queue:
                    return
                picked = self._pick()
                if picked is None:
                    self._cond.wait(timeout=NODE_CHECK_S)
                    continue
                w, nodes = picked
                self._queue.remove(w)
                # a trial placed again (its nodes left the allocation before its step started) is running already
                if not w.future.running() and not w.future.set_running_or_notify_cancel():
                    continue
                if not nodes:
                    up = len(self.allocation.nodes) - len(self._down)
                    w.future.set_result(JobResult(Outcome(None, (), Status.FAILED, (
                        f"the run needs {w.resources.nodes} nodes and {up} of the allocation's "
                        f"{len(self.allocation.nodes)} are up (down: {', '.join(sorted(self._down))})"), 0.0)))
                    continue
                for n in nodes:
                    self._free.remove(n)
                self._count += 1
                step = Step(tuple(nodes), w.resources, self.allocation.job_id,
                            f"gptask-{self.allocation.job_id}-{self._count}")
                self._running[w.future] = step
                t = threading.Thread(target=self._run, args=(w, step), name=step.name, daemon=True)
                self._threads.append(t)
                t.start()

    def _left_before_start(self, step: Step) -> bool:
        """Whether ``step`` was never created because a node of it left the allocation (down, drained,
        lost by the --no-kill job) after the node states were last read: read them again now."""
        if not step.never_created or step.cancelled or self.stopped_by:
            return False
        with self._cond:
            self._checked = -math.inf
            self._usable()
            gone = sorted(set(step.nodes) & self._down)
        if gone:
            log.warning("step %s could not start: node(s) %s left the allocation before it; its trial waits for "
                        "other nodes", step.name, ", ".join(gone))
        return bool(gone)

    def _run(self, w: _Waiting, step: Step) -> None:
        _here.step = step
        failed = True
        again = False
        try:
            result = w.fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the future, as any executor does
            w.future.set_exception(exc)
        else:
            failed = not isinstance(result, JobResult) or result.outcome is None or \
                result.outcome.status is Status.FAILED
            # placed on a node that had just gone: nothing ran, so the trial is placed again (no FAILED
            # trial for a configuration that never ran); at most once per node of the allocation
            again = failed and self._left_before_start(step)
            if again:
                return
            if step.cancelled and isinstance(result, JobResult) and (
                    result.outcome is None or result.outcome.status is Status.FAILED):
                result = JobResult(None, interrupted=f"{self.stopped_by or 'stopped'}: step {step.name} cancelled")
            if isinstance(result, JobResult) and result.outcome is not None:  # recorded with the run
                result = dataclasses.replace(result, outcome=dataclasses.replace(
                    result.outcome, extra={**result.outcome.extra, "resources": step.resources.record()}))
            if w.journalled is not None and isinstance(result, JobResult):
                journal_result(w.journalled, result)  # before the campaign may be killed (journal.py)
            w.future.set_result(result)
        finally:
            _here.step = None
            with self._cond:
                self._running.pop(w.future, None)
                self._free.extend(step.nodes)
                if again:
                    self._queue.insert(0, w)
                if failed:  # a node may be lost: read the node states before its next step
                    self._checked = -math.inf
                self._threads = [t for t in self._threads if t is not threading.current_thread()]
                self._cond.notify_all()


def split_fidelity(job: Any) -> tuple[dict, dict, dict | None, Any]:
    """``(task, params, fidelity, objective)`` of a :class:`gptask.evaluation.evaluate.Job`: for a
    problem with fidelity (the job's objective a :class:`~gptask.problem.fidelity.FidelityObjective`)
    the fidelity values apart and the user's objective; else ``fidelity`` None."""
    task, params = dict(getattr(job, "task", {})), dict(getattr(job, "params", {}))
    objective = getattr(job, "objective", None)
    if not isinstance(objective, FidelityObjective):
        return task, params, None, objective
    task, params, fidelity = objective.split(task, params)
    return task, params, fidelity, objective.objective


def level_resources_spec(given: Any, objective: Any) -> Any:
    """The ``fidelity_resources`` in force: the executor's (``given``), else the user objective's
    ``fidelity_resources`` attribute, else None."""
    return given or getattr(objective, "fidelity_resources", None)


def check_level_resources(by_level: Any, problem: Any, base: "Resources", max_nodes: int | None,
                          where: str) -> None:
    """Check a ``fidelity_resources`` (None: nothing to check) against ``problem``'s fidelity levels,
    each level's resources being ``base`` with the fields it gives replaced: ClusterError naming a level
    it gives nothing for, a key that is no level (with the levels), a bad value, a level asking more
    than ``max_nodes`` nodes (``where`` names what has them; None: no bound), or fidelity_resources
    for a problem without fidelity."""
    if by_level is None:
        return
    check_fidelity_resources(by_level)
    if getattr(problem, "fidelity", None) is None:
        raise ClusterError(f"fidelity_resources is for a problem with fidelity dimensions, and problem "
                           f"{problem.name!r} has none")
    names = list(problem.fidelity.names)
    levels = problem.fidelity_levels()
    if isinstance(by_level, Mapping):
        keys = [level_key(lv, names) for lv in levels]
        stray = [k for k in by_level if k not in keys]
        if stray:
            raise ClusterError(f"fidelity_resources: {stray[0]!r} is not a fidelity level of problem "
                               f"{problem.name!r}; its levels ({', '.join(names)}) are {keys}")
    for lv in levels:
        res = resources_at_level(by_level, lv, names, base)
        if max_nodes is not None and res.nodes > max_nodes:
            raise ClusterError(f"fidelity_resources: a run at fidelity {lv} asks {res.nodes} nodes, and {where} "
                               f"has {max_nodes}")


def check_fidelity_resources(spec: Any) -> None:
    """ClusterError unless ``spec`` is None, a function, or a mapping whose values are each
    Resources, a number of nodes or a dict of fields (named with its key)."""
    if spec is None or callable(spec):
        return
    if not isinstance(spec, Mapping):
        raise ClusterError(f"fidelity_resources must be a mapping {{fidelity level: resources}} or a function of "
                           f"the fidelity values, got {spec!r}")
    for key, value in spec.items():
        Resources().updated(value, f"fidelity_resources[{key!r}]")


def resources_at_level(spec: Any, fidelity: Mapping[str, Any], names: Sequence[str], base: Resources) -> Resources:
    """``base`` with the fields that ``spec`` (a ``fidelity_resources``) gives at ``fidelity``
    replaced; ClusterError naming the level when a mapping has no entry for it."""
    if callable(spec) and not isinstance(spec, Mapping):
        return base.updated(spec(dict(fidelity)), f"fidelity_resources({dict(fidelity)})")
    key = level_key(fidelity, names)
    if key not in spec:
        raise ClusterError(f"fidelity_resources gives nothing for the fidelity level {key!r} "
                           f"({dict(fidelity)}); its keys are {list(spec)}")
    return base.updated(spec[key], f"fidelity_resources[{key!r}]")
