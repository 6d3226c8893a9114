"""gptask on a real Slurm (the local cluster of scripts/slurm_local.sh, started when absent):
evaluations packed as srun steps into an allocation, their failures, the walltime signal with an
exact resume after ``scontrol requeue``, and ``gptask slurm-script``. Every wait polls with a
generous deadline; nothing asserts a duration."""

import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

import gptask as gt
from gptask.cluster import Allocation, ClusterError, Resources, SlurmSteps
from gptask.evaluate import Evaluator, run_job
from gptask.storage import open_storage
from gptask.trials import Status
from tests.slurm_helpers import (ROOT, allocation, job_state, nodes_of, slurm, steps_problem,  # noqa: F401
                                 wait_for)

SMALL = dict(progress=False, pso_iters=5, pso_particles=10, restarts=1)


def _env(tmp_path, **extra):
    env = dict(os.environ, PYTHONPATH=str(ROOT), MPLBACKEND="Agg", GPTASK_TEST_STEP_LOG=str(tmp_path / "steps.log"))
    env.update(extra)
    return env


def test_steps_share_the_allocation_without_sharing_a_node(allocation, tmp_path, monkeypatch):
    """Runs of 1, 2 and 4 nodes packed into a 4-node allocation: the steps' own record (slurmd's
    SLURMD_NODENAME and the time on each node) shows each run on as many distinct nodes as it asked,
    no node running two steps at once, and several steps running at once."""
    log = tmp_path / "steps.log"
    monkeypatch.setenv("GPTASK_TEST_STEP_LOG", str(log))
    with SlurmSteps(resources=nodes_of, allocation=allocation) as ex:
        assert ex.max_in_flight == len(allocation.nodes) + ex.lookahead
        result = gt.tune(steps_problem(), tasks=[{"size": 2}], budget=14, n_initial=8, executor=ex, **SMALL)
    trials = result.history
    assert len(trials) == 14 and all(t.status is Status.COMPLETE for t in trials)
    steps = defaultdict(list)
    for line in log.read_text().splitlines():
        node, start, end, name = line.split()
        steps[name].append((node, float(start), float(end)))
    assert len(steps) == 14
    asked = sorted(int(t.params["n"]) for t in trials)
    assert sorted(len(v) for v in steps.values()) == asked
    for name, ranks in steps.items():
        assert len({n for n, _, _ in ranks}) == len(ranks), name  # distinct nodes
    spans = [(n, s, e, name) for name, ranks in steps.items() for n, s, e in ranks]
    for a in spans:
        for b in spans:
            if a[3] != b[3] and a[0] == b[0]:
                assert a[2] <= b[1] or b[2] <= a[1], (a, b)  # one step at a time on a node
    step_spans = [(min(s for _, s, _ in r), max(e for _, _, e in r)) for r in steps.values()]
    assert any(s1 < e2 and s2 < e1 for i, (s1, e1) in enumerate(step_spans) for (s2, e2) in step_spans[i + 1:])


def test_step_time_limit_and_failure_are_failed_trials_with_their_reason(allocation):
    """A step hanging past its time limit is killed (by Slurm, or by gptask after a grace period)
    and its trial FAILED naming the limit; a step whose program fails gives its exit status."""
    def hang(task, params):
        gt.cluster.current_step().run(["sleep", "600"])
        return 1.0

    def fail(task, params):
        gt.cluster.current_step().run(["bash", "-c", "echo broken >&2; exit 3"])
        return 1.0

    with SlurmSteps(resources=lambda t, p: Resources(nodes=1, time_limit=2), allocation=allocation) as ex:
        hung = ex.submit(run_job, Evaluator(hang).job({}, {"x": 1}))
        failed = ex.submit(run_job, Evaluator(fail).job({}, {"x": 2}))
        out_fail = failed.result(timeout=120).outcome
        out_hang = hung.result(timeout=300).outcome
    assert out_fail.status is Status.FAILED and "status 3" in out_fail.reason and "broken" in out_fail.reason
    assert out_hang.status is Status.FAILED and "time limit" in out_hang.reason, out_hang.reason


def test_bad_set_ups_are_clear_errors_before_any_run(slurm, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    with pytest.raises(ClusterError, match="needs a Slurm allocation.*salloc"):
        Allocation.current(env)
    with pytest.raises(ClusterError, match="srun is not on PATH"):
        Allocation.current(dict(env, SLURM_JOB_ID="1", SLURM_JOB_NODELIST="n1", PATH="/nonexistent"))
    ex = SlurmSteps(resources=lambda t, p: {"nodes": 5}, allocation=Allocation("1", ("n1", "n2", "n3", "n4")))
    with pytest.raises(ClusterError, match="asks 5 nodes, and the allocation .* has 4"):
        ex.submit(run_job, Evaluator(lambda t, p: 1.0).job({"size": 1}, {"x": 1}))
    ex.shutdown()
    with pytest.raises(ClusterError, match="nodes must be an integer >= 1, got 0"):
        Resources.of({"nodes": 0})
    with pytest.raises(ClusterError, match="unknown field"):
        Resources.of({"node": 2})
    # the command line: one line, exit status 2, and nothing written
    history = tmp_path / "h.db"
    done = subprocess.run([sys.executable, "-m", "gptask", "tune", "--problem", "tests.slurm_scripts.campaign:problem",
                           "--task", "size=2", "--budget", "4", "--history", str(history), "--executor", "srun"],
                          capture_output=True, text=True, env=_env(tmp_path, SLURM_JOB_ID=""), cwd=ROOT)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "needs a Slurm allocation" in done.stderr and "salloc" in done.stderr
    assert not history.exists()


def _complete(history: Path) -> list:
    with open_storage(str(history)) as st:
        return st.trials(status=Status.COMPLETE)


def test_campaign_job_requeued_at_its_walltime_signal_resumes_exactly(slurm, tmp_path):
    """`gptask slurm-script`'s script under sbatch: at USR1 (what --signal=B:USR1@S sends; here by
    scancel --signal=USR1 --batch) the campaign cancels its steps, requeues its job, and the
    requeued job finishes the campaign: every run that ran to its end is a COMPLETE trial, no
    configuration ran to its end twice, the budget is met exactly."""
    history, log = tmp_path / "h.db", tmp_path / "steps.log"
    script = tmp_path / "campaign.sbatch"
    gen = subprocess.run([sys.executable, "-m", "gptask", "slurm-script", "--nodes", "2", "--time", "10",
                          "--signal-seconds", "120", "--job-name", "gptask-test", "-o", str(script), "--",
                          "--problem", "tests.slurm_scripts.campaign:problem", "--task", "size=2", "--budget", "10",
                          "--n-initial", "5", "--history", str(history), "-q"],
                         capture_output=True, text=True, env=_env(tmp_path), cwd=ROOT)
    assert gen.returncode == 0, gen.stderr
    text = script.read_text()
    assert "#SBATCH --signal=B:USR1@120" in text and "#SBATCH --requeue" in text and "exec " in text
    sub = subprocess.run(["sbatch", "--parsable", str(script)], capture_output=True, text=True, cwd=tmp_path,
                         env=_env(tmp_path, GPTASK_TEST_RUN_S="2"))
    assert sub.returncode == 0, sub.stderr
    job = sub.stdout.strip().split(";")[0]
    try:
        wait_for("3 finished trials", lambda: history.exists() and len(_complete(history)) >= 3, deadline=240)
        subprocess.run(["scancel", "--signal=USR1", "--batch", job], check=True)
        wait_for("the requeue", lambda: "Restarts=1" in subprocess.run(
            ["scontrol", "show", "job", job], capture_output=True, text=True).stdout, deadline=120)
        wait_for("the requeued job's end", lambda: job_state(job) in ("COMPLETED", "FAILED", "CANCELLED"),
                 deadline=420, every=2)
    finally:
        subprocess.run(["scancel", job])
    out = (tmp_path / f"gptask-test-{job}.out").read_text()
    assert job_state(job) == "COMPLETED", out
    assert "stopped by SIGUSR1" in out and "restart 1" in out, out
    trials = _complete(history)
    runs = log.read_text().splitlines()
    assert len(trials) == 10 == len(runs), out
    assert len({(t.params["x"], t.params["n"]) for t in trials}) == 10
    assert sorted(f"{t.params['x']} {t.params['n']}" for t in trials) == sorted(" ".join(r.split()[:2]) for r in runs)


def test_one_job_per_trial_through_submitit(slurm, tmp_path, monkeypatch):
    """SlurmJobs: every trial its own Slurm job (sacct-independent: submitit reads the job's own
    result); a shutdown with a job still queued cancels it (scancel), its state CANCELLED."""
    from gptask.cluster.jobs import SlurmJobs
    from tests.slurm_scripts.campaign import plain_objective as _one_job_objective

    monkeypatch.setenv("PYTHONPATH", str(ROOT))  # the jobs unpickle the objective by its module

    problem = gt.Problem(name="jobs", task_space=gt.Space([gt.Integer("size", 1, 9)]),
                         param_space=gt.Space([gt.Integer("x", 0, 9)]), objective=_one_job_objective)
    with SlurmJobs(tmp_path / "jobs", max_jobs=2, nodes=1, timeout_min=5) as ex:
        result = gt.tune(problem, tasks=[{"size": 1}], budget=4, n_initial=3, executor=ex, **SMALL)
    assert [t.status for t in result.history] == [Status.COMPLETE] * 4
    assert all(t.value == (t.params["x"] - 3) ** 2 for t in result.history)
    ex = SlurmJobs(tmp_path / "jobs2", max_jobs=1, nodes=1, timeout_min=5, slurm_additional_parameters={"begin": "now+600"})
    f = ex.submit(run_job, Evaluator(_one_job_objective).job({"size": 1}, {"x": 1}))
    job = next(iter(ex._jobs.values())).job_id
    ex.shutdown(wait=True, cancel_futures=True)
    assert f.result().outcome.status is Status.FAILED
    wait_for("the job cancelled", lambda: job_state(job) == "CANCELLED", deadline=60)


def test_the_docs_sbatch_script_is_what_slurm_script_writes(root):
    """docs/cluster.md's sbatch script is gptask slurm-script's output for the command it shows (the
    same generator whose script the requeue test runs under sbatch)."""
    import re
    import shlex

    text = (root / "docs" / "cluster.md").read_text()
    command = re.search(r"```\ngptask slurm-script (.*?)\n```", text, re.S).group(1).replace("\\\n", " ")
    shown = re.search(r"```bash\n(.*?)```", text, re.S).group(1)
    done = subprocess.run([sys.executable, "-m", "gptask", "slurm-script", *shlex.split(command)],
                          capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(root)), cwd=root)
    assert done.returncode == 0, done.stderr
    assert done.stdout.replace(shlex.quote(sys.executable), "python") == shown
