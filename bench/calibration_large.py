"""The calibrated intervals of a model of many points (issue 45; beside the recorded convolution campaign's
sources): folds refitted against folds conditioned on the model's hyperparameters (the default above
``CALIBRATION_REFIT_MAX_POINTS`` points), side by side on the same fitted model.

    python bench/calibration_large.py [--gpus A100,W7800,MI250X] [--seeds 0-2] [--per-gpu 100,200,300|all]
                                      [--device cuda] [--kinds refit,conditioned,conditioned_pooled]
                                      [--out bench/results/calibration_large.jsonl]
    python bench/calibration_large.py --report [--out ...]

As in ``bench/source_scale_gpu.py``: a held-out GPU is tuned (10 runs and one proposal, ``refit_every=None``)
with ``--per-gpu`` measurements drawn at random from each of the five other GPUs' complete campaigns as
sources, every source measurement in the model (``source_points=None``, numpy on this machine's CPUs). The
fitted model (``result.model``, 5 x per-gpu + 11 points) then gives its calibration factors
(``LCM.task_calibration_factors``, timed) three ways: *refit*, the folds refitted (``refit=True``, the rule
up to ``CALIBRATION_REFIT_MAX_POINTS``: one pooled factor for every task); *conditioned*, the folds
conditioned on the model's hyperparameters (``refit=False``, the default above it: each task the larger of
the pooled factor and its own); *conditioned_pooled*, the same folds' pooled factor for every task;
*refit_task*, the refitted folds with each task's factors as the library gives them (tasks of unequal size:
the smaller of the pooled and its own, ``CALIBRATION_UNEQUAL_TASKS``); *refit_explore*, the refits with the
main fit's collapse check (``explore``), pooled. Scored on every measured
configuration of the six GPUs that is not in the model (held out: 4,000-21,000 points): the coverage of the
calibrated 95 % intervals of a new measurement (``include_noise``: a recorded time is one), in the model's
units, pooled and per task (the held-out GPU's own, with its 11 runs, separately). Rows are appended to
``--out`` (JSON lines) as each case finishes.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
from scipy.stats import norm

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import gptask as gt  # noqa: E402
import gptask.model.numerics.defaults as model_defaults  # noqa: E402
from gptask.sources.replay import read_recording, replay_problem  # noqa: E402
from machine import describe_machine  # noqa: E402
from module_constants import constants_set  # noqa: E402
from row_files import parse_seeds  # noqa: E402
from source_scale import TASK, source_rows  # noqa: E402
from suite_families import CONVOLUTION_DIR, CONVOLUTION_RESTRICTIONS  # noqa: E402
from suite_families import CONVOLUTION_GPUS as GPUS  # noqa: E402

INITIAL_RUNS = 10
Z95 = float(norm.ppf(0.975))


def coverage(model, transform, i: int, X: np.ndarray, y: np.ndarray, factors) -> np.ndarray:
    """(n,) bool: whether the measured values y (n,) at the encoded configurations X (n, d) of task i lie
    in the calibrated 95 % intervals of a new measurement, in model units (the noisy factor of the
    task's ``factors`` (latent, noisy), as ``LCM.predict_calibrated(include_noise=True)``)."""
    mean, var = model.predict(i, X)
    sd = np.sqrt((var + model.get_params()["noise"][i]) * factors[1])
    return np.abs(transform.forward(i, y) - mean) <= Z95 * sd


#: the fold kinds scored, in the report's order: name -> (refit, a factor per task, the refits' collapse check)
KINDS = {"refit": (True, False, False), "refit_task": (True, True, False), "refit_explore": (True, False, True),
         "conditioned_pooled": (False, False, False), "conditioned": (False, True, False)}


def fold_factors(lcm, kind: str) -> tuple[np.ndarray, float]:
    """The (T, 2) factors (latent, noisy) per task of the fold kind ``kind`` (:data:`KINDS`), computed afresh
    (the model's cached calibration dropped), and the seconds they took."""
    refit, by_task, explore = KINDS[kind]
    lcm._calibration = None
    t0 = time.perf_counter()
    factors = lcm.task_calibration_factors(refit=refit, explore=explore)
    seconds = time.perf_counter() - t0
    if not by_task:
        factors[:] = lcm.calibration_factors(refit=refit, explore=explore)
    return factors, seconds


def run_case(held: str, seed: int, per_gpu: int | None, recordings: dict, device: str | None = None,
             kinds: tuple[str, ...] = tuple(KINDS)) -> dict:
    rec = replace(recordings[held], label=TASK["kernel"])
    prob = replay_problem([rec], CONVOLUTION_RESTRICTIONS, task_name="kernel", name="convolution")
    rng = np.random.default_rng(seed)
    picks = {g: None if per_gpu is None else rng.choice(len(recordings[g].results), per_gpu, replace=False)
             for g in GPUS if g != held}
    sources = [gt.Source(source_rows(recordings[g], g, p), status="status") for g, p in picks.items()]
    with constants_set(model_defaults, {"EXACT_FIT_MAX_POINTS": 30_000}):
        res = gt.tune(prob, [TASK], INITIAL_RUNS + 1, n_initial=INITIAL_RUNS, seed=seed, sources=sources,
                      provenance=held, progress=False, refit_every=None, failure_model=False, source_points=None,
                      output_transform="log", device=device)
    lcm, Xs = res.model, res.model.data()[0]
    row: dict = {"gpu": held, "seed": seed, "per_gpu": per_gpu, "points": int(sum(lcm.n_points))}
    configs = prob.candidate_list(TASK)  # every GPU's allowed configurations (one kernel, one list)
    encoded = prob.param_space.encode(configs)
    held_out = []  # per task: (encoded configurations, measured values) not in the model
    for i, task in enumerate(res.tasks):
        r = recordings[task["machine"]]
        seen = {tuple(np.round(x, 9)) for x in Xs[i]}
        values = [r.lookup(c) for c in configs]
        keep = [k for k, (x, v) in enumerate(zip(encoded, values))
                if not isinstance(v, str) and tuple(np.round(x, 9)) not in seen]
        held_out.append((encoded[keep], np.array([float(values[k]) for k in keep])))
    for name in kinds:
        refit, _, explore = KINDS[name]
        factors, seconds = fold_factors(lcm, name)
        inside = [coverage(lcm, res.transform, i, X, y, factors[i]) if len(y) else np.zeros(0, bool)
                  for i, (X, y) in enumerate(held_out)]  # every source measurement in the model: none held out
        own = len(res.tasks) - 1
        mean = lambda a: float(np.mean(a)) if a.size else None
        row[name] = {"seconds": seconds, "latent": float(factors[own, 0]), "noisy": float(factors[own, 1]),
                     "pooled": list(lcm.calibration_factors(refit=refit, explore=explore)),
                     "coverage": mean(np.concatenate(inside[:own])), "coverage_held": mean(inside[own]),
                     "per_task": [mean(c) for c in inside], "held_out": int(sum(len(c) for c in inside))}
    return row


def _share(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


def report(out: Path) -> str:
    rows = [json.loads(line) for line in out.read_text().splitlines() if line.strip()]
    head = [r for r in rows if "machine" in r]
    lines = [f"machine: {head[-1]['machine']}, {head[-1]['date']}" if head else "",
             "| held-out GPU, seed | points | held out | folds | seconds | held-out GPU's factor latent / noisy | "
             "coverage, sources' GPUs | coverage, held-out GPU |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        for name in KINDS:
            if name in r:
                c = r[name]
                lines.append(f"| {r['gpu']}, {r['seed']} | {r['points']:,} | {c['held_out']:,} | {name} | {c['seconds']:.1f} | "
                             f"{c['latent']:.2f} / {c['noisy']:.2f} | {_share(c['coverage'])} | {_share(c['coverage_held'])} |")
    return "\n".join(lines)


def start_rows(out: Path) -> None:
    """Append the machine and the date (UTC) to the JSON-lines file ``out``, before a run's rows."""
    with out.open("a") as f:
        f.write(json.dumps({"machine": describe_machine(), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())})
                + "\n")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpus", default="A100,W7800,MI250X")
    ap.add_argument("--seeds", type=parse_seeds, default=parse_seeds("0-2"))
    ap.add_argument("--per-gpu", default="100,200,300", help="measurements per source GPU; all: every one")
    ap.add_argument("--device", default=None, help="gt.tune(device=...): cuda for the torch backend on a GPU")
    ap.add_argument("--kinds", default=",".join(KINDS), help="the fold kinds scored (refit is slow on many points)")
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "results" / "calibration_large.jsonl"))
    ap.add_argument("--report", action="store_true")
    args = ap.parse_args()
    out = Path(args.out)
    if args.report:
        print(report(out))
        return
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    recordings = {g: read_recording(CONVOLUTION_DIR / f"{g}.json.gz") for g in GPUS}
    start_rows(out)
    for per_gpu in (None if v == "all" else int(v) for v in args.per_gpu.split(",")):
        for seed in args.seeds:
            for held in args.gpus.split(","):
                row = run_case(held, seed, per_gpu, recordings, args.device, tuple(args.kinds.split(",")))
                logging.warning("%s", {k: v for k, v in row.items()})
                with out.open("a") as f:
                    f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
