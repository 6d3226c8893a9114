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
from gptask.tuning.cluster import Allocation, ClusterError, Resources, SlurmSteps, current_step
from gptask.evaluation import journal
from gptask.evaluation.evaluate import Evaluator, run_job
from gptask.data.storage import open_storage
from gptask.data.trials import Status
from tests.slurm_helpers import (ROOT, allocation, fidelity_steps_problem, job_state, nodes_of, nodes_up,  # noqa: F401
                                 release_requeued, slurm, steps_problem, wait_for)

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


def test_a_campaign_with_a_source_runs_its_steps_in_the_allocation(allocation, tmp_path, monkeypatch):
    """gt.tune(..., sources=..., executor=SlurmSteps) (it was refused: 'does not take ['executor', ...] yet', so
    `gptask tune --source ... --executor srun` and its slurm-script could not run): this machine's task runs its
    budget as steps on the allocation's nodes (the steps' own log: one line per rank), the source's measurements
    of another size are in the model and take no step."""
    log = tmp_path / "steps.log"
    monkeypatch.setenv("GPTASK_TEST_STEP_LOG", str(log))
    source = [{"size": 5, "x": x, "n": 1, "value": float((x - 3) ** 2), "machine.label": "old-cluster"}
              for x in range(10)]
    with SlurmSteps(resources=nodes_of, allocation=allocation) as ex:
        result = gt.tune(steps_problem(), [{"size": 2}], 6, n_initial=4, executor=ex, sources=[source],
                         provenance="this-cluster", **SMALL)
    mine = [t for t in result.history if t.task["machine"] == "this-cluster"]
    assert len(mine) == 6 and all(t.status is Status.COMPLETE and t.task["size"] == 2 for t in mine)
    assert sum(t.task["machine"] == "old-cluster" for t in result.history) == 10
    names = {line.split()[3] for line in log.read_text().splitlines()}
    assert len(names) == 6  # a step per run of this machine's task, none for the source's measurements
    assert result.model.n_tasks == 2


def test_step_time_limit_and_failure_are_failed_trials_with_their_reason(allocation):
    """A step hanging past its time limit is killed (by Slurm, or by gptask after a grace period)
    and its trial FAILED naming the limit; a step whose program fails gives its exit status."""
    def hang(task, params):
        current_step().run(["sleep", "600"])
        return 1.0

    def fail(task, params):
        current_step().run(["bash", "-c", "echo broken >&2; exit 3"])
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


def test_a_low_fidelity_runs_step_gets_its_smaller_allocation(allocation, tmp_path, monkeypatch):
    """fidelity_resources by level (2 nodes at the target, 1 below, a 30 s limit at the cheapest):
    each run's step, by its own environment (SLURM_STEP_NUM_NODES, SLURM_NTASKS), had its level's
    nodes; the objective's resources rule saw the fidelity in params (its time limit, 100 s per
    iteration, is recorded with each run: the rule of an objective with fidelity used to be lost,
    every run one node and no limit); trial.extra["resources"] records what each step had."""
    log = tmp_path / "steps.log"
    monkeypatch.setenv("GPTASK_TEST_STEP_LOG", str(log))
    by_level = {9: {"nodes": 2}, 3: 1, 1: {"nodes": 1, "time_limit": 30}}
    with SlurmSteps(fidelity_resources=by_level, allocation=allocation) as ex:
        result = gt.tune(fidelity_steps_problem(), tasks=[{"size": 2}], budget=4, n_initial=4, executor=ex, **SMALL)
    trials = [t for t in result.history if t.status is Status.COMPLETE]
    seen = defaultdict(set)
    for line in log.read_text().splitlines():
        iterations, nodes, ntasks, name = line.split()
        seen[name].add((int(iterations), int(nodes), int(ntasks)))
    assert len(seen) == len(trials) >= 5 and all(len(v) == 1 for v in seen.values())
    want = {9: 2, 3: 1, 1: 1}
    assert {it for v in seen.values() for it, _, _ in v} == {9, 3, 1}
    for (it, nodes, ntasks), in seen.values():
        assert nodes == ntasks == want[it], (it, nodes, ntasks)
    for t in trials:
        it = t.task["iterations"]
        rec = t.extra["resources"]
        assert rec["nodes"] == rec["ntasks"] == want[it] and rec["tasks_per_node"] == 1
        assert rec["time_limit"] == (30 if it == 1 else 100 * it), (it, rec)


def test_fidelity_resources_are_checked_against_the_levels_before_any_run():
    """Bad fidelity_resources are ClusterErrors naming what is wrong, before any run."""
    alloc = Allocation("1", ("n1", "n2", "n3", "n4"))
    problem = fidelity_steps_problem()
    cases = [({9: 2, 3: 1}, r"gives nothing for the fidelity level 1 \({'iterations': 1}\); its keys are \[9, 3\]"),
             ({9: 2, 3: 1, 1: 1, 5: 1}, r"5 is not a fidelity level of problem 'fidelity-steps'; its levels "
                                        r"\(iterations\) are \[9, 3, 1\]"),
             ({9: 8, 3: 1, 1: 1}, r"a run at fidelity {'iterations': 9} asks 8 nodes, and the allocation "
                                  r"\(job 1\) has 4"),
             (lambda fid: {"nodes": fid["iterations"]}, r"fidelity {'iterations': 9} asks 9 nodes")]
    for spec, match in cases:
        ex = SlurmSteps(fidelity_resources=spec, allocation=alloc)
        with pytest.raises(ClusterError, match=match):
            gt.tune(problem, tasks=[{"size": 2}], budget=4, executor=ex, **SMALL)
        ex.shutdown()
    for spec, match in [({9: 2, 3: {"node": 1}, 1: 1}, r"fidelity_resources\[3\]: unknown field\(s\) \['node'\]"),
                        ({9: 2, 3: 0, 1: 1},
                         r"fidelity_resources\[3\]: resources: nodes must be an integer >= 1, got 0"),
                        ({9: 2, 3: 1, 1: {"time_limit": -1}}, r"fidelity_resources\[1\]: .*time_limit .* got -1"),
                        ({9: "big", 3: 1, 1: 1}, r"fidelity_resources\[9\] must give Resources.*got 'big'"),
                        ([2, 1], r"fidelity_resources must be a mapping")]:
        with pytest.raises(ClusterError, match=match):
            SlurmSteps(fidelity_resources=spec, allocation=alloc)
    ex = SlurmSteps(fidelity_resources={1: 1}, allocation=alloc)
    with pytest.raises(ClusterError, match="is for a problem with fidelity dimensions, and problem 'steps' has none"):
        gt.tune(steps_problem(), tasks=[{"size": 2}], budget=4, executor=ex, **SMALL)
    ex.shutdown()


def _complete(history: Path) -> list:
    """The COMPLETE trials of ``history``; none while the campaign has created the file and not yet
    its schema (polled then, on a loaded machine, it was 'empty: not a gptask history')."""
    from gptask.data.storage.base import NotAHistory

    try:
        with open_storage(str(history)) as st:
            return st.trials(status=Status.COMPLETE)
    except NotAHistory:
        return []


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
    assert "#SBATCH --no-kill" in text
    sub = subprocess.run(["sbatch", "--parsable", str(script)], capture_output=True, text=True, cwd=tmp_path,
                         env=_env(tmp_path, GPTASK_TEST_RUN_S="2"))
    assert sub.returncode == 0, sub.stderr
    job = sub.stdout.strip().split(";")[0]
    try:
        wait_for("3 finished trials", lambda: history.exists() and len(_complete(history)) >= 3, deadline=240)
        subprocess.run(["scancel", "--signal=USR1", "--batch", job], check=True)
        wait_for("the requeue", lambda: "Restarts=1" in subprocess.run(
            ["scontrol", "show", "job", job], capture_output=True, text=True).stdout, deadline=120)
        if job_state(job) == "PENDING":  # Slurm holds a requeued job about two minutes (its BeginTime):
            # release it sooner (never in the requeue's second); the test is about the resume, not that wait
            release_requeued(job)
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


def test_a_requeued_job_released_at_once_runs_again(slurm, tmp_path):
    """What the requeue tests do after a requeue: a job that requeues itself (exec scontrol requeue,
    as the campaign's last act) is released at once by release_requeued and runs again to its end,
    COMPLETED. Released with StartTime=now, as those tests did, a restart in the second of the
    requeue ended FAILED ("Killing non-startable batch JobId=N: Job credential revoked"; 4 of 5
    tries here, and test_campaign_job_requeued_at_its_walltime_signal_resumes_exactly's job 299)."""
    script = tmp_path / "requeue.sbatch"
    script.write_text("#!/bin/bash\n#SBATCH --requeue\n#SBATCH --open-mode=append\n#SBATCH --nodes=1\n"
                      "#SBATCH --time=5\n"
                      'echo "restart ${SLURM_RESTART_COUNT:-0}"\n'
                      '[ "${SLURM_RESTART_COUNT:-0}" = 0 ] && exec scontrol requeue "$SLURM_JOB_ID"\n'
                      "echo finished\n")
    sub = subprocess.run(["sbatch", "--parsable", "-o", str(tmp_path / "%j.out"), str(script)], capture_output=True,
                         text=True, cwd=tmp_path)
    assert sub.returncode == 0, sub.stderr
    job = sub.stdout.strip().split(";")[0]
    try:
        wait_for("the requeue", lambda: "Restarts=1" in subprocess.run(
            ["scontrol", "show", "job", job], capture_output=True, text=True).stdout and job_state(job) == "PENDING",
                 deadline=120, every=0.05)
        release_requeued(job)
        wait_for("the job's end", lambda: job_state(job) in ("COMPLETED", "FAILED", "CANCELLED"), deadline=120)
    finally:
        subprocess.run(["scancel", job])
    out = (tmp_path / f"{job}.out").read_text()
    assert job_state(job) == "COMPLETED" and "restart 1" in out and "finished" in out, (job_state(job), out)


def test_one_job_per_trial_through_submitit(slurm, tmp_path, monkeypatch):
    """SlurmJobs: every trial its own Slurm job (sacct-independent: submitit reads the job's own
    result), the trials handed over together as one job array; a shutdown with a job still queued
    cancels it (scancel), its state CANCELLED."""
    from gptask.tuning.cluster.jobs import SlurmJobs
    from tests.slurm_scripts.campaign import plain_objective as _one_job_objective

    monkeypatch.setenv("PYTHONPATH", str(ROOT))  # the jobs unpickle the objective by its module

    problem = gt.Problem(name="jobs", task_space=gt.Space([gt.Integer("size", 1, 9)]),
                         param_space=gt.Space([gt.Integer("x", 0, 9)]), objective=_one_job_objective)
    with SlurmJobs(tmp_path / "jobs", max_jobs=3, nodes=1, timeout_min=5) as ex:
        result = gt.tune(problem, tasks=[{"size": 1}], budget=5, n_initial=3, executor=ex, **SMALL)
    assert [t.status for t in result.history] == [Status.COMPLETE] * 5
    assert all(t.value == (t.params["x"] - 3) ** 2 for t in result.history)
    # the initial design, handed over at once, went as one job array of 3 tasks (Slurm's own record)
    assert len(ex.job_ids) == 5
    array = ex.job_ids[0].split("_")[0]
    assert sorted(ex.job_ids[:3]) == [f"{array}_{i}" for i in range(3)], ex.job_ids
    shown = subprocess.run(["scontrol", "show", "job", array, "-o"], capture_output=True, text=True).stdout
    assert sorted(ln.split("ArrayTaskId=")[1].split()[0] for ln in shown.splitlines()) == ["0", "1", "2"], shown
    assert all(f"ArrayJobId={array} " in ln for ln in shown.splitlines())
    ex = SlurmJobs(tmp_path / "jobs2", max_jobs=1, nodes=1, timeout_min=5, slurm_additional_parameters={"begin": "now+600"})
    f = ex.submit(run_job, Evaluator(_one_job_objective).job({"size": 1}, {"x": 1}))
    job = wait_for("the job submitted", lambda: ex.job_ids[:1], deadline=60)[0]
    ex.shutdown(wait=True, cancel_futures=True)
    assert f.result().outcome.status is Status.FAILED
    wait_for("the job cancelled", lambda: job_state(job) == "CANCELLED", deadline=60)


def test_slurm_jobs_give_each_fidelity_level_its_own_resources(slurm, tmp_path, monkeypatch):
    """SlurmJobs(fidelity_resources=): each trial's job, by its ranks' own environment
    (SLURM_JOB_NUM_NODES, SLURM_NTASKS, one line per rank), had its level's nodes, and Slurm's record
    of the job (scontrol) its level's time limit (150 s rounded up to 3 min at the cheapest level,
    timeout_min=10 elsewhere: limits no job start reaches on a loaded machine); trial.extra["resources"]
    records them. Bad fidelity_resources are ClusterErrors before any job."""
    from gptask.tuning.cluster.jobs import SlurmJobs
    from tests.slurm_scripts.campaign import fidelity_job_objective

    monkeypatch.setenv("PYTHONPATH", str(ROOT))  # the jobs unpickle the objective by its module
    log = tmp_path / "jobs.log"
    monkeypatch.setenv("GPTASK_TEST_STEP_LOG", str(log))
    problem = gt.Problem(name="fidelity-jobs", task_space=gt.Space([gt.Integer("size", 1, 9)]),
                         param_space=gt.Space([gt.Integer("x", 0, 9)]), objective=fidelity_job_objective,
                         fidelity=gt.Space([gt.Integer("iterations", 1, 9)]), target_fidelity={"iterations": 9})
    by_level = {9: {"nodes": 2}, 3: 1, 1: {"nodes": 1, "time_limit": 150}}
    with SlurmJobs(tmp_path / "jobs", max_jobs=3, fidelity_resources=by_level, nodes=1, timeout_min=10) as ex:
        result = gt.tune(problem, tasks=[{"size": 2}], budget=4, n_initial=4, executor=ex, **SMALL)
    trials = [t for t in result.history if t.status is Status.COMPLETE]
    want = {9: 2, 3: 1, 1: 1}
    ranks = defaultdict(list)
    for line in log.read_text().splitlines():
        it, x, nodes, ntasks, job = line.split()
        ranks[job].append((int(it), int(x), int(nodes), int(ntasks)))
    assert len(ranks) == len(trials) >= 5, [(t.status.name, t.reason) for t in result.history]
    assert {v[0][0] for v in ranks.values()} == {9, 3, 1}
    limits = {}
    for job, lines in ranks.items():
        (it, x, nodes, ntasks), = set(lines)
        assert nodes == ntasks == len(lines) == want[it], (job, lines)
        shown = subprocess.run(["scontrol", "show", "job", job, "-o"], capture_output=True, text=True).stdout
        limits[it] = shown.split("TimeLimit=")[1].split()[0]
    assert limits == {9: "00:10:00", 3: "00:10:00", 1: "00:03:00"}, limits
    assert sorted((t.task["iterations"], t.params["x"]) for t in trials) == sorted(v[0][:2] for v in ranks.values())
    for t in trials:
        it = t.task["iterations"]
        rec = t.extra["resources"]
        assert rec["nodes"] == rec["ntasks"] == want[it] and rec["time_limit"] == (150 if it == 1 else 600), (it, rec)
    for spec, match in [({9: 2, 3: 1}, r"gives nothing for the fidelity level 1 \({'iterations': 1}\)"),
                        ({9: 2, 3: 1, 1: 1, 5: 1}, r"5 is not a fidelity level of problem 'fidelity-jobs'")]:
        with SlurmJobs(tmp_path / "jobs2", fidelity_resources=spec) as ex, pytest.raises(ClusterError, match=match):
            gt.tune(problem, tasks=[{"size": 2}], budget=4, executor=ex, **SMALL)
        assert ex.job_ids == []
    with pytest.raises(ClusterError, match=r"fidelity_resources\[3\]: unknown field\(s\) \['node'\]"):
        SlurmJobs(tmp_path / "jobs2", fidelity_resources={9: 2, 3: {"node": 1}, 1: 1})


def test_slurm_jobs_journal_each_result_in_the_tuner(slurm, tmp_path, monkeypatch):
    """SlurmJobs journals a trial's result in the tuner when it reads it (not in the job, on a compute
    node where the history's folder may not be), before handing it on; the files are gone once the
    trials are committed."""
    from gptask.tuning.cluster import jobs as jobs_module
    from gptask.tuning.cluster.jobs import SlurmJobs
    from tests.slurm_scripts.campaign import plain_objective

    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    written = []
    real = jobs_module.journal_result

    def spy(job, result, path=None):
        ok = real(job, result, path)
        written.append((job.trial, ok, os.getpid(), journal.read(job.journal).outcome["value"] if ok else None))
        return ok
    monkeypatch.setattr(jobs_module, "journal_result", spy)
    problem = gt.Problem(name="jobs", task_space=gt.Space([gt.Integer("size", 1, 9)]),
                         param_space=gt.Space([gt.Integer("x", 0, 9)]), objective=plain_objective)
    history = tmp_path / "h.db"
    with SlurmJobs(tmp_path / "jobs", max_jobs=3, nodes=1, timeout_min=5) as ex:
        result = gt.tune(problem, tasks=[{"size": 1}], budget=3, n_initial=3, executor=ex, history=str(history),
                         **SMALL)
    assert sorted(written) == sorted((t.id, True, os.getpid(), t.value) for t in result.history)
    assert journal.journals(history) == {}


def test_the_docs_sbatch_script_is_what_slurm_script_writes(root):
    """docs/cluster.md's sbatch script is gptask slurm-script's output for the command it shows (the
    same generator whose script the requeue test runs under sbatch). The two blocks of the page:
    <!-- cluster-slurm-script --> (the command) and <!-- cluster-sbatch --> (the script it writes)."""
    import re
    import shlex

    text = (root / "docs" / "cluster.md").read_text()
    command = re.search(r"```bash\ngptask slurm-script (.*?)\n```", text, re.S).group(1).replace("\\\n", " ")
    shown = re.search(r"```bash\n(#!/bin/bash\n.*?)```", text, re.S).group(1)
    done = subprocess.run([sys.executable, "-m", "gptask", "slurm-script", *shlex.split(command)],
                          capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(root)), cwd=root)
    assert done.returncode == 0, done.stderr
    assert done.stdout.replace(shlex.quote(sys.executable), "python") == shown


def test_slurm_script_warns_when_a_postgresql_history_has_no_journal(root):
    """A PostgreSQL history has no result journal unless the tune line gives --journal: the script is
    written, with a warning on stderr naming the option; none with --journal or a SQLite history."""
    def script(*tune):
        return subprocess.run([sys.executable, "-m", "gptask", "slurm-script", "--nodes", "1", "--time", "10", "--",
                               "--problem", "tests.slurm_scripts.campaign:problem", "--task", "size=2", *tune],
                              capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(root)), cwd=root)

    pg = ["--history", "postgresql://me@db.example/tuning?schema=qr"]
    bare, given, sqlite = script(*pg), script(*pg, "--journal", "/shared/journal"), script("--history=h.db")
    assert [d.returncode for d in (bare, given, sqlite)] == [0, 0, 0], (bare.stderr, given.stderr, sqlite.stderr)
    assert "#!/bin/bash" in bare.stdout and "--journal DIR" in bare.stderr and "warning" in bare.stderr
    assert "warning" not in given.stderr and "warning" not in sqlite.stderr


# faults: a node lost, slurmctld restarted, the campaign job killed, two campaign jobs on one history
def _sleep_objective(task, params):
    """A run of 4 s as a one-node step; writes 'node start end step' once it ran to its end."""
    step = current_step()
    cmd = ('s=$(date +%s.%N); sleep 4; echo "$SLURMD_NODENAME $s $(date +%s.%N) ' + step.name + '" >> '
           + os.environ["GPTASK_TEST_STEP_LOG"])
    step.run(["bash", "-c", cmd])
    return float(params["x"])


def _sleep_problem() -> gt.Problem:
    return gt.Problem(name="faults", task_space=gt.Space([gt.Integer("size", 1, 9)]),
                      param_space=gt.Space([gt.Integer("x", 0, 99)]), objective=_sleep_objective)


def _gated_objective(task, params):
    """A one-node step that writes 'node step' to ``$GPTASK_TEST_STARTED`` once it runs, then waits
    for the file ``$GPTASK_TEST_GATE`` (at most 300 s) and writes 'node start end step' to the step
    log: a step the test can catch running and keep running until it lets it go."""
    step = current_step()
    started, gate = os.environ["GPTASK_TEST_STARTED"], os.environ["GPTASK_TEST_GATE"]
    cmd = (f'echo "$SLURMD_NODENAME {step.name}" >> {started}; s=$(date +%s.%N); '
           f'for i in $(seq 3000); do [ -e {gate} ] && break; sleep 0.1; done; '
           'echo "$SLURMD_NODENAME $s $(date +%s.%N) ' + step.name + '" >> ' + os.environ["GPTASK_TEST_STEP_LOG"])
    step.run(["bash", "-c", cmd])
    return float(params["x"])


def _tune_in_thread(ex, budget: int, history: Path, objective=_sleep_objective):
    import threading
    box = {}
    problem = _sleep_problem()
    problem = gt.Problem(name=problem.name, task_space=problem.task_space, param_space=problem.param_space,
                         objective=objective)

    def target():
        box["result"] = gt.tune(problem, tasks=[{"size": 1}], budget=budget, n_initial=budget, executor=ex,
                                history=str(history), **SMALL)
    t = threading.Thread(target=target, daemon=True)
    t.start()
    return t, box


def _steps_running(job: str) -> dict:
    """step name -> node list of the gptask steps running in ``job``."""
    out = subprocess.run(["squeue", "-h", "-s", "-j", job, "-o", "%j %N"], capture_output=True, text=True).stdout
    return {w[0]: w[1] for w in (ln.split() for ln in out.splitlines()) if len(w) == 2 and w[0].startswith("gptask-")}


def _step_processes(name: str) -> list[str]:
    """The processes on this host whose command line names step ``name`` (its srun, and on the local
    Slurm its program)."""
    out = subprocess.run(["pgrep", "-f", "--", f"{name}[\" ]"], capture_output=True, text=True).stdout
    return out.split()


def test_a_node_going_down_fails_its_step_and_the_campaign_goes_on(allocation, tmp_path, monkeypatch):
    """scontrol update state=down on a node running a step of a --no-kill allocation: that trial is
    FAILED with 'lost a node', every other trial COMPLETE, no step starts on that node afterwards,
    and the budget is met on the remaining nodes. The step is caught running (it says so from its
    node) and held there until Slurm has ended it: the node goes down neither before the step has
    started (srun then reports a failed launch) nor after it has ended."""
    log = tmp_path / "steps.log"
    started, gate = tmp_path / "started", tmp_path / "gate"
    monkeypatch.setenv("GPTASK_TEST_STEP_LOG", str(log))
    monkeypatch.setenv("GPTASK_TEST_STARTED", str(started))
    monkeypatch.setenv("GPTASK_TEST_GATE", str(gate))
    down = None
    try:
        with SlurmSteps(allocation=allocation) as ex:
            t, box = _tune_in_thread(ex, 10, tmp_path / "h.db", _gated_objective)
            try:
                first = wait_for("a step running", lambda: started.exists() and started.read_text().splitlines(),
                                 deadline=180)[0]
                down, name = first.split()
                subprocess.run(["scontrol", "update", f"nodename={down}", "state=down", "reason=gptask-test"],
                               check=True)
                # its srun and its program gone (on the local Slurm they run here): only then do the others go on
                wait_for(f"step {name} ended by Slurm", lambda: name not in _steps_running(allocation.job_id)
                         and not _step_processes(name), deadline=120)
            finally:
                gate.write_text("")
            t.join(timeout=600)
        assert not t.is_alive()
    finally:
        if down:
            subprocess.run(["scontrol", "update", f"nodename={down}", "state=resume"], capture_output=True)
            wait_for(f"{down} back up", lambda: down in nodes_up(), deadline=120)
    trials = box["result"].history
    assert len(trials) == 10
    failed = [tr for tr in trials if tr.status is Status.FAILED]
    assert len(failed) == 1 and "lost a node" in failed[0].reason and down in failed[0].reason, \
        [(tr.status, tr.reason) for tr in trials]
    assert sum(tr.status is Status.COMPLETE for tr in trials) == 9 == len(log.read_text().splitlines())
    assert all(line.split()[0] != down for line in log.read_text().splitlines()), "a step ran on the downed node"


def test_slurmctld_restarted_while_steps_run_loses_nothing(allocation, tmp_path, monkeypatch):
    """slurmctld killed and started again while steps run: the running steps finish, the next ones
    start once it answers, and every trial is COMPLETE with its run."""
    log = tmp_path / "steps.log"
    monkeypatch.setenv("GPTASK_TEST_STEP_LOG", str(log))
    with SlurmSteps(allocation=allocation) as ex:
        t, box = _tune_in_thread(ex, 8, tmp_path / "h.db")
        wait_for("a step running", lambda: _steps_running(allocation.job_id), deadline=180)
        done = subprocess.run(["bash", str(ROOT / "scripts" / "slurm_local.sh"), "restart-ctld"], capture_output=True,
                              text=True)
        assert done.returncode == 0, done.stderr
        t.join(timeout=600)
    assert not t.is_alive()
    wait_for("slurmctld answering", lambda: subprocess.run(["sinfo", "-h"], capture_output=True).returncode == 0)
    trials = box["result"].history
    assert [tr.status for tr in trials] == [Status.COMPLETE] * 8, [(tr.status, tr.reason) for tr in trials]
    assert len(log.read_text().splitlines()) == 8


def _campaign_script(tmp_path: Path, history: Path, budget: int, name: str) -> Path:
    script = tmp_path / f"{name}.sbatch"
    gen = subprocess.run([sys.executable, "-m", "gptask", "slurm-script", "--nodes", "2", "--time", "10",
                          "--signal-seconds", "120", "--job-name", name, "-o", str(script), "--",
                          "--problem", "tests.slurm_scripts.campaign:problem", "--task", "size=2", "--budget",
                          str(budget), "--n-initial", str(budget), "--history", str(history), "-q"],
                         capture_output=True, text=True, env=_env(tmp_path), cwd=ROOT)
    assert gen.returncode == 0, gen.stderr
    assert "#SBATCH --no-kill" in script.read_text()
    return script


def _sbatch(script: Path, tmp_path: Path) -> str:
    sub = subprocess.run(["sbatch", "--parsable", str(script)], capture_output=True, text=True, cwd=tmp_path,
                         env=_env(tmp_path, GPTASK_TEST_RUN_S="3"))
    assert sub.returncode == 0, sub.stderr
    return sub.stdout.strip().split(";")[0]


def _ended(job: str) -> bool:
    return job_state(job) in ("COMPLETED", "FAILED", "CANCELLED", "NODE_FAIL", "TIMEOUT", "OUT_OF_MEMORY")


def _runs_match_trials(history: Path, log: Path) -> list:
    """The COMPLETE trials, checked to be exactly the runs that ran to their end (one each)."""
    trials = _complete(history)
    runs = log.read_text().splitlines() if log.exists() else []
    assert sorted(f"{t.params['x']} {t.params['n']}" for t in trials) == sorted(" ".join(r.split()[:2]) for r in runs)
    return trials


def test_two_campaign_jobs_on_one_history_lose_nothing(slurm, tmp_path):
    """Two campaign jobs started at once on one history (same host: SQLite's WAL, trials held by
    their live process): both end COMPLETED, every run that ran to its end is one COMPLETE trial and
    no configuration ran twice, the budget met."""
    history = tmp_path / "h.db"
    script = _campaign_script(tmp_path, history, 8, "gptask-two")
    jobs = [_sbatch(script, tmp_path), _sbatch(script, tmp_path)]
    try:
        for job in jobs:
            wait_for(f"job {job}'s end", lambda: _ended(job), deadline=420, every=2)
    finally:
        subprocess.run(["scancel", *jobs])
    outs = [(tmp_path / f"gptask-two-{j}.out").read_text() for j in jobs]
    assert [job_state(j) for j in jobs] == ["COMPLETED"] * 2, outs
    trials = _runs_match_trials(history, tmp_path / "steps.log")
    assert len(trials) >= 8, outs
    assert len({(t.params["x"], t.params["n"]) for t in trials}) == len(trials)


def test_campaign_job_killed_then_resubmitted_finishes_exactly(slurm, tmp_path):
    """scancel --signal=KILL --full on the campaign job mid-run: the job ends CANCELLED, not
    requeued (Slurm cancels it: SIGTERM, then SIGKILL after KillWait; the campaign's --requeue used
    to requeue it at that SIGTERM, so it never ended), its running steps are lost; the same script
    submitted again re-runs them and finishes the budget, every run that ran to its end one COMPLETE
    trial."""
    history = tmp_path / "h.db"
    script = _campaign_script(tmp_path, history, 8, "gptask-kill")
    job = _sbatch(script, tmp_path)
    try:
        wait_for("2 finished trials", lambda: history.exists() and len(_complete(history)) >= 2, deadline=300)
        subprocess.run(["scancel", "--signal=KILL", "--full", job], check=True)
        wait_for("the killed job's end", lambda: _ended(job), deadline=120, every=1)
    finally:
        subprocess.run(["scancel", job])
    first = (tmp_path / f"gptask-kill-{job}.out").read_text()
    assert job_state(job) == "CANCELLED" and "Restarts=0" in subprocess.run(
        ["scontrol", "show", "job", job], capture_output=True, text=True).stdout, first
    assert "not requeued" in first, first
    # a run that ended just before the kill may be journalled and not yet committed (a clean-clone CI of
    # 2026-11-30): every run that ran to its end is a COMPLETE trial or a journal entry the next job commits
    waiting = [e for e in (journal.read(p) for p in journal.journals(history).values()) if e is not None]
    ended = [f"{t.params['x']} {t.params['n']}" for t in _complete(history)] + \
        [f"{e.params['x']} {e.params['n']}" for e in waiting if e.outcome.get("status") == "complete"]
    runs = [" ".join(r.split()[:2]) for r in (tmp_path / "steps.log").read_text().splitlines()]
    assert sorted(ended) == sorted(runs) and len(ended) < 8, (ended, runs)
    again = _sbatch(script, tmp_path)
    try:
        wait_for("the resubmitted job's end", lambda: _ended(again), deadline=420, every=2)
    finally:
        subprocess.run(["scancel", again])
    out = (tmp_path / f"gptask-kill-{again}.out").read_text()
    assert job_state(again) == "COMPLETED", out
    assert len(_runs_match_trials(history, tmp_path / "steps.log")) == 8, out


def test_the_docs_fidelity_resources_are_what_slurm_steps_asks_at_each_level():
    """docs/fidelity.md's block (<!-- fidelity-slurm -->), run as written: the objective's attributes
    give each level's step its nodes (4 at the target, 2 at 333, 1 below) and the time limit of its
    iterations, as SlurmSteps reads them (no allocation needed: the run's resources only)."""
    import re

    page = (ROOT / "docs" / "fidelity.md").read_text()
    code = re.search(r"<!-- example: fidelity-slurm [^>]*-->\n```python\n(.*?)```", page, re.S).group(1)
    scope: dict = {}
    exec(compile(code, "docs/fidelity.md", "exec"), scope)  # noqa: S102 - the repository's own example
    problem = gt.Problem(gt.Space([gt.Integer("n", 1, 4)]), gt.Space([gt.Real("x", 0.0, 1.0)]), scope["solve"],
                         fidelity=gt.Space([gt.Integer("iterations", 10, 1000, log=True)]),
                         target_fidelity={"iterations": 1000})
    ex = SlurmSteps(allocation=Allocation("1", ("n1", "n2", "n3", "n4")))
    ex.check_problem(problem)
    expanded = problem.expanded()
    for level, nodes in ((1000, 4), (333, 2), (111, 1), (37, 1)):
        job = Evaluator(expanded.objective).job({"n": 2, "iterations": level}, {"x": 0.5})
        assert ex.needs(run_job, (job,)) == Resources(nodes, 32, 1, 0.6 * level)
    ex.shutdown()
