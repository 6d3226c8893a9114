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


def problem() -> gt.Problem:
    return gt.Problem(name="campaign", task_space=gt.Space([gt.Integer("size", 1, 9)]),
                      param_space=gt.Space([gt.Integer("x", 0, 30), gt.Categorical("n", [1, 2])]),
                      objective=objective)


def plain_objective(task, params):
    """(x - 3)^2, run where submitit's job runs it (one Slurm job per trial)."""
    return (params["x"] - 3) ** 2
