"""The problem of the end-to-end campaign tests on the local Slurm (``--problem
tests.slurm_scripts.campaign:problem``): each evaluation sleeps ``GPTASK_TEST_RUN_S`` seconds
(default 1) as an srun step on 1 or 2 nodes and, once finished, appends 'x n nodes' to
``$GPTASK_TEST_STEP_LOG``: one line per run that ran to its end."""

import os

import gptask as gt
from gptask.tuning.cluster import current_step


def objective(task, params):
    step = current_step()
    seconds = float(os.environ.get("GPTASK_TEST_RUN_S", "1"))
    line = f"{params['x']} {params['n']} {','.join(step.nodes)}"
    step.run(["bash", "-c", f"sleep {seconds}; true"])
    with open(os.environ["GPTASK_TEST_STEP_LOG"], "a") as f:
        f.write(line + "\n")
    return (params["x"] - 7) ** 2 + params["n"]


def resources(task, params):
    return {"nodes": int(params["n"])}


objective.resources = resources


def fidelity_job_objective(task, params):
    """A run as one submitit job (SlurmJobs) whose every rank appends 'iterations x nodes ntasks
    jobid' to ``$GPTASK_TEST_STEP_LOG``, read from the job's own environment; (x - 3)^2 shifted a
    little at the cheaper levels."""
    env = os.environ
    with open(env["GPTASK_TEST_STEP_LOG"], "a") as f:
        f.write(f"{params['iterations']} {params['x']} {env['SLURM_JOB_NUM_NODES']} {env['SLURM_NTASKS']} "
                f"{env['SLURM_JOB_ID']}\n")
    return (params["x"] - 3) ** 2 + 0.5 * (9 - params["iterations"]) / 9 * params["x"]


def problem() -> gt.Problem:
    return gt.Problem(name="campaign", task_space=gt.Space([gt.Integer("size", 1, 9)]),
                      param_space=gt.Space([gt.Integer("x", 0, 30), gt.Categorical("n", [1, 2])]),
                      objective=objective)


def plain_objective(task, params):
    """(x - 3)^2, run where submitit's job runs it (one Slurm job per trial)."""
    return (params["x"] - 3) ** 2
