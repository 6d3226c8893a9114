"""SlurmSteps against stand-ins for srun, sinfo and squeue (shell scripts on PATH that answer as
Slurm 22.05 does while slurmctld restarts): a step never created is tried again and runs once, a
real failure is not retried, nodes not yet registered are waited for instead of failing trials, and
a SIGTERM requeues only a job ended at its time limit. Fast, and no Slurm needed; the same faults
on the real local Slurm are in tests/test_slurm.py."""

import os
import re
import stat
from pathlib import Path

import pytest

from gptask.data.trials import Status
from gptask.evaluation.evaluate import Evaluator, run_job
from gptask.tuning.cluster import Allocation, Resources, SlurmSteps, Step, StepFailed, current_step, \
    ending_at_time_limit
from gptask.tuning.cluster import slurm as slurm_module

NOT_CREATED = {
    "controller down": "srun: error: Unable to create step for job 7: Unable to contact slurm controller "
                       "(connect failure)",
    "just restarted": "srun: error: Unable to create step for job 7: Memory required by task is not available",
}


def _script(path: Path, text: str) -> None:
    path.write_text("#!/bin/bash\n" + text)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


@pytest.fixture
def fake_slurm(tmp_path, monkeypatch):
    """A bin directory first on PATH with srun, sinfo and squeue stand-ins. srun fails with
    ``$tmp/srun_errors``'s first line (removing it) while that file has lines (and then puts
    ``$tmp/states_after_error`` in place of ``$tmp/states`` when there is one), else runs its
    command (the words after the options); every call is a line in ``$tmp/srun_calls``. sinfo prints
    ``$tmp/states`` (one 'node state' a line); squeue prints ``$tmp/squeue``."""
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    d = tmp_path
    _script(bin_ / "srun", f"""echo call >> {d}/srun_calls
if [ -s {d}/srun_errors ]; then head -1 {d}/srun_errors >&2; sed -i 1d {d}/srun_errors
  [ -f {d}/states_after_error ] && mv {d}/states_after_error {d}/states; exit 1; fi
while [ "${{1#-}}" != "$1" ]; do shift; done
exec "$@"
""")
    _script(bin_ / "sinfo", f"cat {d}/states\n")
    _script(bin_ / "squeue", f"[ -f {d}/squeue_fails ] && {{ echo 'squeue: error: Unable to contact slurm controller' >&2; "
                             f"exit 1; }}\ncat {d}/squeue 2>/dev/null; exit 0\n")
    (d / "states").write_text("n1 idle\nn2 idle\n")
    monkeypatch.setenv("PATH", f"{bin_}:{os.environ['PATH']}")
    monkeypatch.setattr(slurm_module, "RETRY_FIRST_S", 0.01)
    monkeypatch.setattr(slurm_module, "RETRY_MAX_S", 0.05)
    monkeypatch.setattr(slurm_module, "NODE_CHECK_S", 0.05)
    return d


def _step() -> Step:
    return Step(("n1",), Resources(), "7", "gptask-7-1")


@pytest.mark.parametrize("error", sorted(NOT_CREATED))
def test_a_step_not_created_while_slurmctld_restarts_is_tried_again_and_runs_once(fake_slurm, error):
    (fake_slurm / "srun_errors").write_text(f"{NOT_CREATED[error]}\n" * 3)
    ran = fake_slurm / "ran"
    done = _step().run(["bash", "-c", f"echo once >> {ran}"])
    assert done.returncode == 0
    assert len((fake_slurm / "srun_calls").read_text().splitlines()) == 4
    assert ran.read_text() == "once\n"


def test_a_failed_program_is_not_tried_again(fake_slurm):
    with pytest.raises(StepFailed, match="exited with status 3: broken"):
        _step().run(["bash", "-c", "echo broken >&2; exit 3"])
    assert len((fake_slurm / "srun_calls").read_text().splitlines()) == 1


def test_a_step_still_not_created_after_the_wait_fails_with_the_reason(fake_slurm, monkeypatch):
    monkeypatch.setattr(slurm_module, "CONTROLLER_WAIT_S", 0.2)
    (fake_slurm / "srun_errors").write_text(f"{NOT_CREATED['controller down']}\n" * 1000)
    with pytest.raises(StepFailed, match="could not start: .*Unable to contact slurm controller"):
        _step().run(["true"])
    calls = len((fake_slurm / "srun_calls").read_text().splitlines())
    assert 2 <= calls < 1000


def test_a_cancelled_step_is_not_tried_again(fake_slurm):
    (fake_slurm / "srun_errors").write_text(f"{NOT_CREATED['controller down']}\n" * 1000)
    step = _step()
    step.cancel()  # the campaign stopped while slurmctld was down
    with pytest.raises(StepFailed, match="cancelled"):
        step.run(["true"])
    assert len((fake_slurm / "srun_calls").read_text().splitlines()) == 1


def _on_step(task, params):
    current_step().run(["true"])
    return 1.0


def test_nodes_not_yet_registered_are_waited_for_not_failed(fake_slurm):
    """After a slurmctld restart sinfo shows the nodes 'unk' (or 'idle*'), and squeue may fail, until
    their slurmd registers: a run waits for them (before: FAILED at once, '0 of the allocation's 2
    are up'); once they are idle it runs. A node down is gone: a run needing it fails at once."""
    (fake_slurm / "states").write_text("n1 unk\nn2 idle*\n")
    (fake_slurm / "squeue_fails").write_text("")
    with SlurmSteps(allocation=Allocation("7", ("n1", "n2"))) as ex:
        future = ex.submit(run_job, Evaluator(_on_step).job({}, {"x": 1}))
        with pytest.raises(TimeoutError):
            future.result(timeout=1.0)
        assert not (fake_slurm / "srun_calls").exists()
        (fake_slurm / "states").write_text("n1 idle\nn2 idle\n")
        (fake_slurm / "squeue_fails").unlink()
        assert future.result(timeout=30).outcome.status is Status.COMPLETE
    (fake_slurm / "states").write_text("n1 down*\nn2 drain\n")
    with SlurmSteps(allocation=Allocation("7", ("n1", "n2"))) as ex:
        out = ex.submit(run_job, Evaluator(_on_step).job({}, {"x": 1})).result(timeout=30).outcome
    assert out.status is Status.FAILED and "0 of the allocation's 2 are up" in out.reason, out.reason


STEP_CANCELLED = "slurmstepd: error: *** STEP 7.2 ON n1 CANCELLED AT 2026-11-30T05:30:25 ***"
TIME_LIMIT = STEP_CANCELLED[:-4] + " DUE TO TIME LIMIT ***"


@pytest.mark.parametrize("state, message, limit, failed", [
    ("CANCELLED", STEP_CANCELLED, None, ""), ("COMPLETING", STEP_CANCELLED, None, ""), ("", STEP_CANCELLED, None, ""),
    ("CANCELLED", TIME_LIMIT, None, ""),  # the job's time limit: went with the job
    ("RUNNING", STEP_CANCELLED, None, "exited with status 1: .*CANCELLED AT"),  # cancelled on its own
    ("CANCELLED", TIME_LIMIT, 60.0, "killed at its time limit of 60 s")])
def test_a_step_slurm_cancels_with_its_job_leaves_its_trial_pending(fake_slurm, state, message, limit, failed):
    """scancel of the campaign's job: Slurm cancels the running steps before the tuner has stopped (a
    clean-clone CI of 2026-11-30: such a run was recorded FAILED, 'exited with status 143: ... CANCELLED
    AT', and lost: counted in the budget, never run again). While the job ends (squeue: not RUNNING, or
    no longer listed) its trial stays pending, as at the campaign's own stop; a step cancelled on its own
    while the job runs, or at a time limit of its own, is a FAILED trial with the reason."""
    (fake_slurm / "srun_errors").write_text(message + "\n")
    (fake_slurm / "state").write_text(state + "\n" if state else "")  # squeue -o %T: the job's state
    _script(fake_slurm / "bin" / "squeue", f'[[ " $* " == *" %T "* ]] && cat {fake_slurm}/state; exit 0\n')
    with SlurmSteps(resources=lambda task, params: Resources(time_limit=limit),
                    allocation=Allocation("7", ("n1", "n2"))) as ex:
        result = ex.submit(run_job, Evaluator(_on_step).job({}, {"x": 1})).result(timeout=30)
    if not failed:
        assert result.outcome is None and "cancelled" in result.interrupted, result
    else:
        assert result.outcome.status is Status.FAILED and re.search(failed, result.outcome.reason), result
    assert len((fake_slurm / "srun_calls").read_text().splitlines()) == 1  # never run again here


@pytest.mark.parametrize("reason, requeue", [("TimeLimit", True), ("None", False), ("", False)])
def test_a_sigterm_requeues_only_a_job_at_its_time_limit(fake_slurm, reason, requeue):
    """squeue's reason while the job completes: TimeLimit at the walltime, None after scancel
    (whatever its signal; before, a scancelled campaign requeued itself and never ended)."""
    (fake_slurm / "squeue").write_text(reason + "\n")
    assert ending_at_time_limit("7") is requeue


def test_why_a_job_ends_unknown_while_slurmctld_is_down_is_no_requeue(fake_slurm):
    (fake_slurm / "squeue_fails").write_text("")
    assert ending_at_time_limit("7") is False


def test_a_trial_whose_job_slurm_refuses_fails_with_sbatchs_reason(fake_slurm, tmp_path):
    """SlurmJobs submits from its own thread (to gather trials into one array): an sbatch refusal
    reaches the trial as a FAILED outcome naming Slurm's reason, not an exception lost in a thread."""
    pytest.importorskip("submitit")
    from gptask.tuning.cluster.jobs import SlurmJobs

    _script(tmp_path / "bin" / "sbatch", "echo 'sbatch: error: Batch job submission failed: Invalid account' >&2; exit 1\n")
    with SlurmJobs(tmp_path / "jobs", max_jobs=2, nodes=1, timeout_min=5) as ex:
        futures = [ex.submit(run_job, Evaluator(_on_step).job({}, {"x": x})) for x in (1, 2)]
        outs = [f.result(timeout=60).outcome for f in futures]
    assert [o.status for o in outs] == [Status.FAILED] * 2
    assert all("Slurm refused" in o.reason and "Invalid account" in o.reason for o in outs), [o.reason for o in outs]
    assert ex.job_ids == []


def test_a_step_placed_on_a_node_that_has_just_gone_runs_on_another(fake_slurm, monkeypatch):
    """A node goes down after the node states were read and before the step placed on it starts:
    srun cannot create the step ("Requested node configuration is not available", nothing ran), the
    states read again show the node gone, and the trial runs once on the other node, COMPLETE
    (before: FAILED 'could not start', a configuration that never ran counted as failed; the
    load-fragile failure of test_slurm.py's node-down test when the node went down between two
    steps). The same refusal with the step's nodes still up is the trial's failure, as before."""
    monkeypatch.setattr(slurm_module, "NODE_CHECK_S", 3600.0)  # the states read once, then kept
    (fake_slurm / "srun_errors").write_text("srun: error: Unable to create step for job 7: Requested node "
                                            "configuration is not available\n")
    (fake_slurm / "states_after_error").write_text("n1 down\nn2 idle\n")
    ran = fake_slurm / "ran"

    def where(task, params):
        step = current_step()
        step.run(["bash", "-c", f"echo {','.join(step.nodes)} >> {ran}"])
        return 1.0

    with SlurmSteps(allocation=Allocation("7", ("n1", "n2"))) as ex:
        out = ex.submit(run_job, Evaluator(where).job({}, {"x": 1})).result(timeout=60).outcome
    assert out.status is Status.COMPLETE, out.reason
    assert ran.read_text() == "n2\n"
    assert len((fake_slurm / "srun_calls").read_text().splitlines()) == 2
    (fake_slurm / "srun_calls").unlink()
    (fake_slurm / "srun_errors").write_text("srun: error: Unable to create step for job 7: Requested node "
                                            "configuration is not available\n")
    with SlurmSteps(allocation=Allocation("7", ("n1", "n2"))) as ex:
        out = ex.submit(run_job, Evaluator(where).job({}, {"x": 1})).result(timeout=60).outcome
    assert out.status is Status.FAILED and "could not start" in out.reason and "not available" in out.reason
    assert len((fake_slurm / "srun_calls").read_text().splitlines()) == 1
