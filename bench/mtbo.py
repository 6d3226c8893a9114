"""BoTorch's multi-task GP, as a model (bench/model_quality.py) and as a multitask BO loop
(``BoTorch-MTBO`` in bench/quality.py). Needs torch and botorch (``bash bench/peers_setup.sh``
installs them into ``.bench-venv``); they are imported inside the functions, so importing this
module costs nothing where they are absent.

The model: one ``botorch.models.MultiTaskGP`` over all tasks' data (an ICM kernel: an RBF ARD kernel
with BoTorch's dimension-scaled log-normal length-scale prior times a positive index kernel over the
tasks with a Beta prior on their correlations, per-task noise with a log-normal prior, per-task
constant mean), fitted with ``fit_gpytorch_mll`` (maximum a posteriori: the priors enter the fit)
and everything at BoTorch's defaults. Inputs are gptask's encodings in the unit cube (:meth:`gptask.Space.encode`: a
real or integer parameter one column, on a log scale where the parameter says so; a categorical one
one-hot column per choice), with the task index as a last column. Outputs are standardised per task
by the caller (the MultiTaskGP docstring asks for stratified standardisation); the model's default
``Standardize`` outcome transform stays on and is then close to the identity.

The loop (:func:`run_botorch_mtbo`), per iteration: fit one model on every task's data so far
(warm-started from the last iteration's hyperparameters, as BoTorch's closed-loop tutorials do and
as MLA does; a cold fit of BoTorch 0.18's MultiTaskGP takes 2000-5000 L-BFGS-B iterations here), then
for every task with budget left maximise ``LogExpectedImprovement`` (``best_f`` = that task's best
standardised value so far, the sign flipped since BoTorch maximises) with ``optimize_acqf`` and the
task column fixed. Integer parameters are relaxed to the continuous encoded column and rounded
after the search (:meth:`gptask.Space.snap`); categorical parameters are searched exactly, one
``optimize_acqf`` per combination of choices with their one-hot columns fixed
(``optimize_acqf_mixed``). Its initial designs are MLA's own (``Tuner.initial_design``), so the two
multitask methods differ only in model, acquisition and its optimiser.
"""

from __future__ import annotations

import itertools
import logging
import time
import warnings
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

from gptask.tuning.mla import Tuner
from gptask.problem.definition import Problem
from gptask.space.dimensions import Categorical, Space

log = logging.getLogger(__name__)

#: ``optimize_acqf`` has no default for these two; the values of BoTorch's own tutorials
NUM_RESTARTS = 10
RAW_SAMPLES = 512


def _torch():
    """torch, limited to one thread (fairness to the numpy methods, which get one BLAS thread)."""
    import torch

    torch.set_num_threads(1)
    return torch


def standardise(y_list: Sequence[np.ndarray]) -> tuple[list[np.ndarray], list[tuple[float, float]]]:
    """Per-task standardisation: ``z_i = (y_i - mean_i) / sd_i`` (sd 1 when a task's values are all
    equal or it has one value). Returns the z's (same shapes) and the (mean, sd) pairs."""
    zs, stats = [], []
    for y in y_list:
        y = np.asarray(y, dtype=float)
        mu = float(np.mean(y))
        sd = float(np.std(y)) if y.size > 1 and np.std(y) > 0 else 1.0
        zs.append((y - mu) / sd)
        stats.append((mu, sd))
    return zs, stats


def _with_task_column(torch, X_list: Sequence[np.ndarray]):
    """Stacked inputs with the task index as the last column: (sum n_i, d + 1) double tensor."""
    rows = [np.hstack([np.asarray(X, float), np.full((len(X), 1), float(i))]) for i, X in enumerate(X_list)]
    return torch.tensor(np.vstack(rows), dtype=torch.double)


def fit_multitask_gp(X_list: Sequence[np.ndarray], z_list: Sequence[np.ndarray], warm: dict | None = None):
    """A ``MultiTaskGP`` fitted by ``fit_gpytorch_mll`` with BoTorch's defaults.

    X_list[i]: (n_i, d) inputs of task i in [0, 1]; z_list[i]: (n_i,) its (standardised) outputs.
    warm: optional :func:`hyperparameters` of an earlier model over the same tasks and inputs, the
    starting point of the fit (as BoTorch's closed-loop tutorials reuse the last state dict).
    Returns the model (in eval mode); the task column is column d.
    """
    torch = _torch()
    from botorch.fit import fit_gpytorch_mll
    from botorch.models import MultiTaskGP
    from gpytorch.mlls import ExactMarginalLogLikelihood

    train_X = _with_task_column(torch, X_list)
    train_Y = torch.tensor(np.concatenate(z_list), dtype=torch.double).unsqueeze(-1)
    model = MultiTaskGP(train_X, train_Y, task_feature=-1)
    if warm is not None:
        model.load_state_dict(warm, strict=False)
    fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
    return model


def hyperparameters(model) -> dict:
    """The fitted state of ``model`` without its outcome transform's statistics (those belong to
    the data it was fitted on), for :func:`fit_multitask_gp`'s ``warm``."""
    return {k: v for k, v in model.state_dict().items() if not k.startswith("outcome_transform")}


def predict(model, i: int, X: np.ndarray, observation_noise: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Posterior mean (n,) and variance (n,) of task ``i`` at X (n, d), in the units of the
    training outputs; with ``observation_noise`` the variance of a new observation."""
    torch = _torch()
    Xt = _with_task_column(torch, [np.zeros((0, X.shape[1]))] * i + [X])
    with torch.no_grad():
        post = model.posterior(Xt, observation_noise=observation_noise)
        return post.mean.squeeze(-1).numpy().copy(), post.variance.squeeze(-1).numpy().copy()


def _fixed_choices(space: Space, task_column: int, i: int) -> list[dict[int, float]]:
    """One ``{column: value}`` map per combination of categorical choices, with the task column."""
    slices = [(d, sl) for d, sl in zip(space.dimensions, space.column_slices()) if isinstance(d, Categorical)]
    out = []
    for combo in itertools.product(*[range(d.n_columns) for d, _ in slices]):
        fixed = {task_column: float(i)}
        for (d, sl), k in zip(slices, combo):
            fixed.update({sl.start + j: float(j == k) for j in range(d.n_columns)})
        out.append(fixed)
    return out


def propose(model, space: Space, i: int, n_tasks: int, best_f: float) -> np.ndarray:
    """Task ``i``'s next configuration, encoded and snapped: (space.n_columns,) row.

    ``best_f``: the largest training target of task i (the model maximises)."""
    torch = _torch()
    from botorch.acquisition import LogExpectedImprovement
    from botorch.acquisition.objective import ScalarizedPosteriorTransform
    from botorch.optim import optimize_acqf, optimize_acqf_mixed

    D = space.n_columns
    # the posterior at inputs that carry the task column is single-output (that task's); a weight of
    # 1 says so to the acquisition, which otherwise refuses a model with several outputs
    one = ScalarizedPosteriorTransform(weights=torch.ones(1, dtype=torch.double))
    acq = LogExpectedImprovement(model, best_f=best_f, posterior_transform=one)
    bounds = torch.tensor([[0.0] * D + [0.0], [1.0] * D + [float(n_tasks - 1)]], dtype=torch.double)
    choices = _fixed_choices(space, D, i)
    if len(choices) == 1:
        x, _ = optimize_acqf(acq, bounds, q=1, num_restarts=NUM_RESTARTS, raw_samples=RAW_SAMPLES,
                             fixed_features=choices[0])
    else:
        x, _ = optimize_acqf_mixed(acq, bounds, q=1, num_restarts=NUM_RESTARTS, raw_samples=RAW_SAMPLES,
                                   fixed_features_list=choices)
    return space.snap(x.detach().numpy().reshape(1, -1)[:, :D])[0]


def run_botorch_mtbo(problem: Problem, tasks: list[dict], budget: int, n_initial: int,
                     seed: int) -> dict[str, Any]:
    """BoTorch multi-task BO on ``tasks`` with ``budget`` evaluations each (``n_initial`` of them
    MLA's initial design). Returns the best value per task and the tuner time per iteration
    (seconds outside the objective: fit_s for the model, search_s for all tasks' acquisition
    searches, iter_s their sum), the number of proposals that repeat an evaluated point of their
    task, and the warnings raised (category and start of the message), counted."""
    torch = _torch()
    torch.manual_seed(seed)
    space = problem.param_space
    with Tuner(problem, tasks, budget, n_initial, seed) as tuner:
        designs = [tuner.initial_design(i) for i in range(len(tasks))]
    X = [space.encode(d) for d in designs]
    y = [np.array([problem.objective(t, p) for p in d], float) for t, d in zip(tasks, designs)]
    fit_s, search_s, repeats, caught, warm = [], [], 0, Counter(), None
    while True:
        active = [i for i in range(len(tasks)) if len(y[i]) < budget]
        if not active:
            break
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")  # record every warning, then count it (not silenced)
            t0 = time.perf_counter()
            z, _ = standardise(y)
            model = fit_multitask_gp(X, [-v for v in z], warm)
            warm = hyperparameters(model)
            t1 = time.perf_counter()
            rows = [propose(model, space, i, len(tasks), float(np.max(-z[i]))) for i in active]
            t2 = time.perf_counter()
        caught.update(f"{w.category.__name__}: {str(w.message)[:120]}" for w in seen)
        fit_s.append(t1 - t0)
        search_s.append(t2 - t1)
        log.info("BoTorch-MTBO iteration %d: fit %.2f s, search %.2f s", len(fit_s), t1 - t0, t2 - t1)
        for i, row in zip(active, rows):
            repeats += bool(np.any(np.all(np.isclose(X[i], row), axis=1)))
            params = space.decode(row.reshape(1, -1))[0]
            X[i] = np.vstack([X[i], row])
            y[i] = np.append(y[i], problem.objective(tasks[i], params))
    n_it = max(len(fit_s), 1)
    return {"best": [float(np.min(v)) for v in y], "iterations": len(fit_s),
            "fit_s": float(np.sum(fit_s)) / n_it, "search_s": float(np.sum(search_s)) / n_it,
            "iter_s": float(np.sum(fit_s) + np.sum(search_s)) / n_it,
            "point_s": float(np.sum(fit_s) + np.sum(search_s)) / n_it / len(tasks),
            "fit_s_each": fit_s, "repeated_points": repeats, "warnings": dict(caught)}
