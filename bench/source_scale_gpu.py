"""Issue 24 on a GPU node: the exact model over the five source GPUs' complete campaigns against the
summary that 2-core machines use.

    python bench/source_scale_gpu.py [--gpus A100,W7800] [--seeds 0] [--per-gpu N] [--device cuda]
                                     [--arms exact,exact_refine60,exact_cold] [--subset-above N]
                                     [--out bench/results_source_scale_gpu.jsonl]
    python bench/source_scale_gpu.py --report [--out ...]

As in ``bench/source_scale.py``: the recorded convolution campaign as one problem whose task is the
kernel and whose machine is the GPU; a held-out GPU is tuned with the other five GPUs' measurements
as sources (``gt.tune(..., sources=...)``). The held-out GPU runs the same 10 initial
configurations in every arm (the seed's design: no model chooses them), the model is fitted once on
them and the sources, proposes one configuration (the 11th run), and takes that run by a block
update (``refit_every=None``: one fit per arm). Arms, side by side in one process:

* **summary**: ``source_points="auto"`` (each source GPU summarised to 200 measurements,
  :mod:`gptask.model.source_summary`), the numpy backend on the node's CPU cores;
* **exact**: ``source_points=None``, every source measurement (21,810 with failed ones), on
  ``device`` (the torch backend), with the output transform the summary arm chose (one cold fit,
  not the two of ``output_transform="auto"``): the default fit, which above ``SUBSET_FIT_ABOVE``
  points (``--subset-above`` sets it) runs its starts on a subset and refines on all the points by
  at most ``SUBSET_REFINE_ITERS`` iterations (gptask/model/surrogate/core.py);
* **exact_refine60**: the same, refined by up to 60 iterations;
* **exact_cold**: no subset, one start from scratch on all the points (``restarts=1``).

Both without the failure model (``failure_model=False``: failed runs imputed as the task's worst
value; the classifier has no GPU path and no summary yet). Scored per arm: seconds from the call to
the end of the fit, of the proposal (the fit's log line to the 11th evaluation), of the whole call;
points in the model; on every completed configuration of the held-out GPU, the Spearman rank
correlation of predicted and measured times, the mean absolute relative error (MAPE), the fraction
of the optimum of the best of the 5 configurations predicted fastest, and of the proposal; the
seconds of that prediction (``predict_seconds``: the first calibrated one, the calibration's folds
included). ``--per-gpu N`` draws N measurements per source GPU instead of all (a CPU smoke test of the script).
Rows are appended to ``--out`` (JSON lines) as each arm finishes.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
from scipy.stats import spearmanr

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import gptask as gt  # noqa: E402
import gptask.model.numerics.defaults as model_defaults  # noqa: E402
from gptask.sources.replay import read_recording, replay_problem  # noqa: E402
from gptask.transfer.model import as_transfer_model  # noqa: E402
from gptask.transfer.predict import predict_encoded  # noqa: E402
from machine import describe_machine  # noqa: E402
from module_constants import constants_set  # noqa: E402
from row_files import parse_seeds  # noqa: E402
from source_scale import TASK, source_rows  # noqa: E402
from suite_families import CONVOLUTION_DIR, CONVOLUTION_RESTRICTIONS  # noqa: E402
from suite_families import CONVOLUTION_GPUS as GPUS  # noqa: E402

INITIAL_RUNS = 10


class _FitClock(logging.Handler):
    """Remembers when the tuner logged its first "LCM fitted" line."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.fitted: float | None = None
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        if self.fitted is None and "LCM fitted" in text:
            self.fitted = time.perf_counter()
            self.lines.append(text)
        elif "started from a subset" in text:
            self.lines.append(text)


def run_arm(name: str, held: str, seed: int, recordings: dict, per_gpu: int | None, **options: Any) -> dict:
    rec = replace(recordings[held], label=TASK["kernel"])
    prob = replay_problem([rec], CONVOLUTION_RESTRICTIONS, task_name="kernel", name="convolution")
    calls: list[float] = []
    objective = prob.objective

    def timed(task: dict, params: dict) -> Any:
        calls.append(time.perf_counter())
        return objective(task, params)

    timed_prob = gt.Problem(prob.task_space, prob.param_space, timed, constraints=prob.constraints,
                            constants=prob.constants, candidates=prob.candidate_list(TASK), name="convolution")
    rng = np.random.default_rng(seed)
    others = [g for g in GPUS if g != held]
    sources = []
    for g in others:
        picks = None if per_gpu is None else rng.choice(len(recordings[g].results), per_gpu, replace=False)
        sources.append(gt.Source(source_rows(recordings[g], g, picks), status="status"))
    torch = sys.modules.get("torch")
    on_cuda = torch is not None and str(options.get("device", "")).startswith("cuda")
    if on_cuda:
        torch.cuda.reset_peak_memory_stats()
    clock = _FitClock()
    fits = logging.getLogger("gptask.model.surrogate.core")  # where the fit's lines come from
    level = fits.level
    fits.setLevel(logging.INFO)
    fits.addHandler(clock)
    t0 = time.perf_counter()
    try:
        res = gt.tune(timed_prob, [TASK], INITIAL_RUNS + 1, n_initial=INITIAL_RUNS, seed=seed, sources=sources,
                      provenance=held, progress=False, refit_every=None, failure_model=False, **options)
    finally:
        fits.removeHandler(clock)
        fits.setLevel(level)
    total = time.perf_counter() - t0
    optimum = rec.best()[1]
    configs = prob.candidate_list(TASK)
    held_params = [c for c in configs if not isinstance(rec.lookup(c), str)]
    measured = np.array([float(rec.lookup(c)) for c in held_params])
    tm = as_transfer_model(res)
    t1 = time.perf_counter()
    pred, _ = predict_encoded(tm, res.tasks[-1], prob.param_space.encode(held_params))  # calibrated: the folds too
    predict_seconds = time.perf_counter() - t1
    mine = [t for t in res.history if t.task_index == len(res.tasks) - 1]
    last = rec.lookup(mine[-1].params)
    fit_end = clock.fitted if clock.fitted is not None else float("nan")
    return {"arm": name, "gpu": held, "seed": seed, "per_gpu": per_gpu, "options": {k: str(v) for k, v in options.items()},
            "points": int(sum(res.model.n_points)), "backend": res.model.backend,
            "gpu_peak_gb": torch.cuda.max_memory_allocated() / 1e9 if on_cuda else None,
            "use_log": bool(res.transform.use_log), "fit_seconds": fit_end - t0,
            "proposal_seconds": (calls[-1] - fit_end) if len(calls) > INITIAL_RUNS else float("nan"),
            "total_seconds": total, "predict_seconds": predict_seconds, "fit_log": clock.lines, "initial": [t.params for t in mine[:INITIAL_RUNS]],
            "spearman": float(spearmanr(pred, measured)[0]),
            "mape": float(np.mean(np.abs(pred - measured) / measured)),
            "top5": float(optimum / measured[np.argsort(pred)[:5]].min()),
            "proposal": 0.0 if last is None or isinstance(last, str) else float(optimum / float(last))}


#: the exact arms: (gptask.model.numerics.defaults values set for the arm, gt.tune options besides the exact ones)
ARMS = {
    "exact": ({}, {}),  # the default cold fit: every start on a subset, refined on all the points
    "exact_refine60": ({"SUBSET_REFINE_ITERS": 60}, {}),  # refined by up to 60 iterations instead of 25
    "exact_cold": ({"SUBSET_FIT_ABOVE": 10**9}, {"restarts": 1}),  # one start on all the points, no subset
}
#: loggers quietened while the benchmark runs (one line per recorded failure otherwise)
QUIET = ("gptask.evaluation.evaluate", "gptask.tuning", "gptask.sources.multisource")


def run(gpus: list[str], seeds: list[int], per_gpu: int | None, device: str, out: Path, arms: list[str],
        subset_above: int | None = None) -> None:
    recordings = {g: read_recording(CONVOLUTION_DIR / f"{g}.json.gz") for g in GPUS}
    with out.open("a") as f:
        f.write(json.dumps({"machine": describe_machine(), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                            "device": device}) + "\n")
    limits = {"EXACT_FIT_MAX_POINTS": 30_000}  # the exact arms hold every source measurement
    if subset_above is not None:
        limits["SUBSET_FIT_ABOVE"] = subset_above
    for seed in seeds:
        for held in gpus:
            summary = run_arm("summary", held, seed, recordings, per_gpu)
            rows = [summary]
            exact = dict(source_points=None, device=device, output_transform="log" if summary["use_log"] else "none")
            for name in (a for a in ARMS if a in arms):
                values, options = ARMS[name]
                with constants_set(model_defaults, {**limits, **values}):
                    rows.append(run_arm(name, held, seed, recordings, per_gpu, **options, **exact))
                if rows[-1]["initial"] != summary["initial"]:
                    logging.warning("%s seed %d: the %s arm's initial runs differ from the summary's", held, seed,
                                    name)
            for row in rows:
                logging.info("%s", {k: v for k, v in row.items() if k != "initial"})
                with out.open("a") as f:
                    f.write(json.dumps(row) + "\n")


def report(out: Path) -> str:
    rows = [json.loads(line) for line in out.read_text().splitlines() if line.strip()]
    head = [r for r in rows if "machine" in r]
    lines = [f"machine: {head[-1]['machine']}, {head[-1]['date']}" if head else "",
             "| held-out GPU, seed | arm | points | backend | fit s | proposal s | call s | Spearman | MAPE | top-5 | proposal |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "arm" in r:
            lines.append(f"| {r['gpu']}, {r['seed']} | {r['arm']} | {r['points']:,} | {r['backend']} | {r['fit_seconds']:.1f} | "
                         f"{r['proposal_seconds']:.1f} | {r['total_seconds']:.1f} | {r['spearman']:.3f} | {r['mape']:.3f} | "
                         f"{r['top5']:.3f} | {r['proposal']:.3f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gpus", default="A100,W7800")
    ap.add_argument("--seeds", type=parse_seeds, default=parse_seeds("0"))
    ap.add_argument("--per-gpu", type=int, default=None)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results_source_scale_gpu.jsonl"))
    ap.add_argument("--arms", default="exact,exact_cold", help="exact arms besides the summary")
    ap.add_argument("--subset-above", type=int, default=None,
                    help="SUBSET_FIT_ABOVE for the exact arms (default: the library's)")
    ap.add_argument("--report", action="store_true")
    args = ap.parse_args(argv)
    if args.report:
        print(report(Path(args.out)))
        return 0
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    levels = {name: logging.getLogger(name).level for name in QUIET}
    for name in QUIET:
        logging.getLogger(name).setLevel(logging.WARNING)
    try:
        run(args.gpus.split(","), args.seeds, args.per_gpu, args.device, Path(args.out), args.arms.split(","),
            args.subset_above)
    finally:
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)
    return 0


if __name__ == "__main__":
    sys.exit(main())
