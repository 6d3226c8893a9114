"""Constants of the tuning engine, in one place, and the seeding rule.

Reproducibility: the task LHS, each task's initial design, each model fit and each search draw
their randomness from ``np.random.SeedSequence([seed, stage, *keys])`` with the stage numbers of
:mod:`gptask.core.seeding` (re-exported here), so a resumed run asks for the same points an
uninterrupted run would have (up to the warm start of the model fit).
"""

from __future__ import annotations

from ..core.seeding import STAGE_FIT, STAGE_INITIAL, STAGE_SEARCH, STAGE_STEER, STAGE_TASKS, int_seed, rng
from ..model.surrogate.settings import DRIFT_E2, DRIFT_WINDOW, VALUE_LIMIT

__all__ = ["STAGE_TASKS", "STAGE_INITIAL", "STAGE_SEARCH", "STAGE_FIT", "STAGE_STEER", "VALUE_LIMIT", "CLAIM_ROUNDS",
           "WAIT_MIN_S", "WAIT_MAX_S", "WAIT_LOG_S", "DRIFT_WINDOW", "DRIFT_E2", "SEARCH_BLAS_THREADS",
           "SOURCE_INITIAL", "SOURCE_DEFAULT", "SOURCE_SEARCH", "SOURCE_IMPORTED", "CROSS_PICK_EVERY",
           "CROSS_PICK_TOP", "CROSS_PICK_OWN_BELOW", "CROSS_PICK_MIN_POINTS", "CROSS_PICK_LOO_POINTS",
           "LOCAL_PROBE_AFTER", "CONSENSUS_FIRST", "CONSENSUS_EVERY", "CONSENSUS_WINDOW", "NEW_TASK_INITIAL_SHARE",
           "new_task_initial", "rng", "int_seed"]

#: ``Trial.source`` of the engine's trials: the initial Latin hypercube, the problem's default
#: configuration (measured first on every task), an acquisition maximiser, and measurements
#: imported from elsewhere (:func:`gptask.import_runs`)
SOURCE_INITIAL, SOURCE_DEFAULT, SOURCE_SEARCH, SOURCE_IMPORTED = "initial", "default", "search", "imported"

#: how many times ``ask`` re-proposes when another process claimed the same configuration first
CLAIM_ROUNDS = 4

#: ``tune`` with nothing to ask while other processes hold the last trials: poll the history
#: every WAIT_MIN_S seconds, backing off to WAIT_MAX_S, saying so in the log every WAIT_LOG_S
WAIT_MIN_S, WAIT_MAX_S, WAIT_LOG_S = 0.2, 5.0, 60.0

#: BLAS threads while a search round runs (model updates, fantasies, the acquisition's predictions):
#: its triangular solves are small (N x 40 for N up to a few hundred), and OpenBLAS threads only
#: spin on them: a 160 x 160 solve with 40 right-hand sides took 1.5 ms with 2 threads and 0.19 ms
#: with 1 on the 2-core machine of BENCHMARKS.md (loaded), and the searches of an 8-task run were
#: 70 % of the tuner's time. The LCM fit limits its own threads (gptask.model.numerics.defaults).
SEARCH_BLAS_THREADS = 1

#: cross-task picks of the joint search on listed or enumerated domains (gptask.tuning.crosstask):
#: every CROSS_PICK_EVERY-th searched run of a task (its first included) chooses by the acquisition
#: among the CROSS_PICK_TOP best configurations of every other task, once the task has
#: CROSS_PICK_MIN_POINTS values in the model and only while the rank correlation of the model's
#: leave-one-out predictions of them with the measured values is below CROSS_PICK_OWN_BELOW.
#: Measured on the benchmark suite (BENCHMARKS.md, issue 23): the own-prediction gate at 0.93 leaves
#: smooth listed families alone (their correlation is 0.95-1.0 for 90 % of the searches) and picks on
#: rugged campaigns (convolution: median 0.79); at 0.5 it picked too rarely to matter. A task with
#: more than CROSS_PICK_LOO_POINTS values (imported runs) is judged on that many of them
CROSS_PICK_EVERY, CROSS_PICK_TOP, CROSS_PICK_OWN_BELOW, CROSS_PICK_MIN_POINTS = 2, 2, 0.93, 4
CROSS_PICK_LOO_POINTS = 200
#: the local probe of a stalled task (gptask.tuning.probe): on a listed or enumerated domain, once a
#: task's best has not improved over its last LOCAL_PROBE_AFTER searched runs, its next search that is
#: not a cross-task pick chooses among its incumbent's unrun one-step neighbours that the fewest tasks
#: have run, never two probes in a row. None: off. Measured (bench/results/listed_trap.md), 2 against off: the
#: convolution campaign at 40 runs, 32 seeds, +0.032 (se 0.012) in the fraction of the optimum (at 20 runs -0.011,
#: se 0.017, 16 seeds); convolution_unlike at 20 runs +0.052 (0.029); sphere_listed -0.003 (0.005) / +0.0005
#: at 20 / 40 runs; 9 generated listed tuning families -0.006 (0.008) in regret; the judged generated_small
#: families +0.036 (0.030) on gen:1001, +0.022 (0.017) on gen:1032, the others +0.002 or identical. The default
#: proposer's only: the sources' and the fidelity schedule's proposers (measured without it) keep it off
LOCAL_PROBE_AFTER: int | None = 2
#: with sources that measured a tuned task on other machines: its first CONSENSUS_FIRST searched runs,
#: then every CONSENSUS_EVERY-th, choose by the acquisition among the next CONSENSUS_WINDOW
#: configurations of their consensus order it has not run (gptask.tuning.sourced)
CONSENSUS_FIRST, CONSENSUS_EVERY, CONSENSUS_WINDOW = 10, 2, 10
#: the default initial design of a task that transfer starts (TLA2's new task; with sources, tuned
#: tasks that other machines measured): this share of its budget, at least one run
NEW_TASK_INITIAL_SHARE = 0.3


def new_task_initial(budget: int) -> int:
    """The default initial design size of a task that transfer starts, for ``budget`` runs (>= 1)."""
    return max(1, min(int(budget), int(round(NEW_TASK_INITIAL_SHARE * budget))))
