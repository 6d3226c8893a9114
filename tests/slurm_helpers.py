"""The local Slurm cluster for the tests (scripts/slurm_local.sh), an allocation on it, objectives
that run as job steps, and polling helpers (no timing assertions: every wait has a generous deadline)."""

import datetime
import os
import subprocess
import time
from pathlib import Path

import pytest

import gptask as gt
from gptask.tuning.cluster import Allocation, current_step

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "slurm_local.sh"
#: seconds any Slurm state is waited for
DEADLINE_S = 120.0


def start_local_slurm() -> None:
    """Start the local cluster when it is not running (installs slurm-wlm and munge when missing)."""
    if subprocess.run(["bash", str(SCRIPT), "status"], capture_output=True).returncode == 0:
        return
    done = subprocess.run(["bash", str(SCRIPT), "start"], capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        pytest.fail(f"scripts/slurm_local.sh start failed:\n{done.stdout}\n{done.stderr}")


@pytest.fixture(scope="session")
def slurm():
    start_local_slurm()
    return SCRIPT


def nodes_up() -> list[str]:
    out = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %t"], capture_output=True, text=True).stdout
    return sorted({ln.split()[0] for ln in out.splitlines() if ln.split()[1].rstrip("*") in ("idle", "mix", "alloc")})


def nodes_known() -> list[str]:
    """Every node of the local cluster, whatever its state."""
    out = subprocess.run(["sinfo", "-h", "-N", "-o", "%N"], capture_output=True, text=True).stdout
    return sorted(set(out.split()))


def wait_for(what: str, check, deadline: float = DEADLINE_S, every: float = 0.5):
    end = time.monotonic() + deadline
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > end:
            raise AssertionError(f"waited {deadline:g} s for {what}")
        time.sleep(every)


def job_field(job: str, name: str) -> str:
    """Field ``name`` of ``scontrol show job``'s record of ``job`` ("" when not shown)."""
    out = subprocess.run(["scontrol", "show", "job", job, "-o"], capture_output=True, text=True).stdout
    for field in out.split():
        if field.startswith(f"{name}="):
            return field.split("=", 1)[1]
    return ""


def job_state(job: str) -> str:
    return job_field(job, "JobState")


#: seconds after a requeue before which the requeued job may not start: slurmd refuses the new run's
#: credential when it was made in the same second as the revocation of the previous run's (Slurm
#: keeps both to the second), and the job ends FAILED ("Killing non-startable batch JobId=N: Job
#: credential revoked"); Slurm's own hold after a requeue is 121 s for that reason
REQUEUE_CREDENTIAL_S = 2


def release_requeued(job: str) -> None:
    """Let requeued (PENDING) ``job`` start without Slurm's hold of about two minutes, but not
    within REQUEUE_CREDENTIAL_S seconds of its requeue (its SubmitTime, which the requeue resets):
    released with ``StartTime=now`` in the second of the requeue it failed at once."""
    submitted = datetime.datetime.fromisoformat(job_field(job, "SubmitTime"))
    start = submitted + datetime.timedelta(seconds=REQUEUE_CREDENTIAL_S)
    subprocess.run(["scontrol", "update", f"jobid={job}", f"StartTime={start.isoformat()}"], capture_output=True)


@pytest.fixture
def allocation(slurm):
    """An allocation of every node of the local cluster (salloc --no-shell --no-kill: a node lost
    leaves the job, which goes on), cancelled afterwards."""
    # after a test restarted slurmctld its nodes are "unk" until their slurmd registers again:
    # wait for every node (a node another test left down: the rest)
    def all_up():
        up = nodes_up()
        return up if up and len(up) == len(nodes_known()) else None

    try:
        n = len(wait_for("every node of the local cluster up", all_up, deadline=60))
    except AssertionError:
        n = len(wait_for("a node of the local cluster up", nodes_up))
    done = subprocess.run(["salloc", "--no-shell", "--no-kill", f"-N{n}", "--time=10", "-J", "gptask-test-alloc"],
                          capture_output=True, text=True, timeout=DEADLINE_S)
    job = next((w for line in done.stderr.splitlines() if "Granted job allocation" in line
                for w in line.split() if w.isdigit()), None)
    assert job, done.stderr
    nodelist = subprocess.run(["squeue", "-h", "-j", job, "-o", "%N"], capture_output=True, text=True).stdout.strip()
    nodes = tuple(subprocess.run(["scontrol", "show", "hostnames", nodelist], capture_output=True,
                                 text=True).stdout.split())
    yield Allocation(job, nodes)
    subprocess.run(["scancel", job])


def step_objective(task, params):
    """A run of ``params['x']`` tenths of a second on its step's nodes; every rank writes
    'node start end step' to the file
    ``$GPTASK_TEST_STEP_LOG`` (the steps' own account of where and when they ran);
    returns (x - 3)^2."""
    step = current_step()
    log = os.environ["GPTASK_TEST_STEP_LOG"]
    cmd = ("s=$(date +%s.%N); sleep " + f"{params['x'] / 10:.2f}" +
           '; echo "$SLURMD_NODENAME $s $(date +%s.%N) ' + step.name + '" >> ' + log)
    step.run(["bash", "-c", cmd])
    return (params["x"] - 3) ** 2


def nodes_of(task, params):
    """1, 2 or 4 nodes by the parameter ``n``."""
    return {"nodes": int(params["n"])}


def steps_problem() -> gt.Problem:
    return gt.Problem(name="steps", task_space=gt.Space([gt.Integer("size", 1, 9)]),
                      param_space=gt.Space([gt.Integer("x", 0, 9), gt.Categorical("n", [1, 2, 4])]),
                      objective=step_objective)


def fidelity_step_objective(task, params):
    """A short run as a step whose ranks write 'iterations nodes ntasks step' to
    ``$GPTASK_TEST_STEP_LOG``, read from the step's own environment (SLURM_STEP_NUM_NODES,
    SLURM_NTASKS); returns a function of x shifted a little at the cheaper levels."""
    step = current_step()
    log = os.environ["GPTASK_TEST_STEP_LOG"]
    cmd = ('echo "' + str(params["iterations"]) + ' $SLURM_STEP_NUM_NODES $SLURM_NTASKS ' + step.name + '" >> ' + log)
    step.run(["bash", "-c", cmd])
    return (params["x"] - 3) ** 2 + 0.5 * (9 - params["iterations"]) / 9 * params["x"]


def _time_by_iterations(task, params):
    """The objective's own resources rule: a time limit of 100 s per 1 of the fidelity ``iterations``
    (which it receives in ``params``, as the objective does)."""
    return {"time_limit": 100 * params["iterations"]}


fidelity_step_objective.resources = _time_by_iterations


def fidelity_steps_problem() -> gt.Problem:
    """``iterations`` in 1..9, target 9: levels 9, 3, 1."""
    return gt.Problem(name="fidelity-steps", task_space=gt.Space([gt.Integer("size", 1, 9)]),
                      param_space=gt.Space([gt.Integer("x", 0, 9)]), objective=fidelity_step_objective,
                      fidelity=gt.Space([gt.Integer("iterations", 1, 9)]), target_fidelity={"iterations": 9})
