"""Running gptask's evaluations on a cluster's batch scheduler (Slurm).

- :class:`~gptask.tuning.cluster.slurm.SlurmSteps`: inside an allocation (``salloc``, an ``sbatch``
  script), every evaluation is an ``srun`` job step on free nodes of the allocation, as many at once
  as fit; the objective launches its run with :func:`~gptask.tuning.cluster.slurm.current_step`.
- Walltime and requeue: a campaign job started with ``--signal=B:USR1@S`` stops proposing at the
  signal, leaves unfinished trials pending and requeues itself (:func:`~gptask.tuning.cluster.slurm.requeue`).
- :func:`~gptask.tuning.cluster.script.slurm_script`: the ``sbatch`` script of a campaign
  (``gptask slurm-script``).
- :class:`~gptask.tuning.cluster.jobs.SlurmJobs`: one Slurm job per trial through ``submitit``.
"""

from .slurm import (Allocation, ClusterError, Resources, SlurmSteps, Step, StepFailed, current_step,
                    ending_at_time_limit, requeue)

__all__ = ["Allocation", "ClusterError", "Resources", "SlurmSteps", "Step", "StepFailed", "current_step",
           "ending_at_time_limit", "requeue"]
