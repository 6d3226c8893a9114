"""Issue 46: where the time of a run-free pick from large sources goes, stage by stage, for the code on
PYTHONPATH (run once with main's worktree, once with the branch), as ratios to a numpy Cholesky of
3000 x 3000 measured in the same process.

    PYTHONPATH=. python bench/run_free_stages.py OUT.json [--held A100] [--read-value]

The five other GPUs' complete convolution campaigns (21,810 measurements) as ``gt.Source`` rows, as
bench/run_free_sources.py builds them, and ``gt.predict_optimum(None, task, sources=..., machine=held,
problem=...)``. Each stage is a function wrapped by a timer (inclusive wall seconds summed over its
calls, and the process's CPU seconds, all threads, as "cpu: <stage>": less moved by the machine's load
than wall time; a stage that the code does not have, or does not call, is absent): reading and validating the
sources (``read_measurements``), of which the constraint checks (``Problem.infeasible_rows``), the
machine labels, the summary, candidate enumeration (``Problem.domain``), the fit (``_fitted``), of
which the output transform's probes and fit (``Surrogate._choose_transform``) and the failure classifier
(``FailureModel.update``), the consensus ranking (``_consensus_pick``, or ``measured_consensus``: the
pick from the measurements alone), of which the table of measured values, and TLA1 (its
``predict_optimum``). With ``--read-value`` the prediction's ``value`` is read afterwards and timed
("read_value_s": the model fitted then, where the pick did not need it).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import gptask as gt  # noqa: E402
from run_free_speed import cholesky_seconds  # noqa: E402
from source_scale import TASK, held_out_case  # noqa: E402

#: (stage, module, owner in the module or "", function name)
STAGES = [
    ("reading and validating (read_measurements)", "gptask.sources.multisource", "", "read_measurements"),
    ("of which the constraint checks (infeasible_rows)", "gptask.problem.definition", "Problem", "infeasible_rows"),
    ("machine labels", "gptask.sources.multisource", "", "machine_labels"),
    ("summary (source_points)", "gptask.sources.multisource", "", "_summarised"),
    ("the plan in all (reading, labels, tasks, summary)", "gptask.sources.multisource", "", "_plan"),
    ("candidate enumeration (Problem.domain)", "gptask.problem.definition", "Problem", "domain"),
    ("fit (gt.fit of the summarised rows)", "gptask.sources.multisource", "", "_fitted"),
    ("of which the LCM: transform probes and fit", "gptask.model.surrogate.core", "Surrogate", "_choose_transform"),
    ("of which the failure classifier", "gptask.model.surrogate.failure_model", "FailureModel", "update"),
    ("consensus ranking with the model (_consensus_pick)", "gptask.transfer.tla1", "", "_consensus_pick"),
    ("consensus ranking from the measurements (measured_consensus)", "gptask.transfer.tla1", "", "measured_consensus"),
    ("of which the table of measured values", "gptask.transfer.tla1", "", "measured_values"),
    ("TLA1 (tla1.predict_optimum, the consensus ranking included)", "gptask.transfer.tla1", "", "predict_optimum"),
]


def _wrap(seconds: dict[str, float], stage: str, module: str, owner: str, name: str) -> None:
    import importlib

    target = importlib.import_module(module)
    if owner:
        target = getattr(target, owner)
    real = getattr(target, name, None)
    if real is None:
        return

    @functools.wraps(real)
    def timed(*args: Any, **kwargs: Any) -> Any:
        t0, c0 = time.perf_counter(), time.process_time()
        try:
            return real(*args, **kwargs)
        finally:
            seconds[stage] = seconds.get(stage, 0.0) + time.perf_counter() - t0
            seconds["cpu: " + stage] = seconds.get("cpu: " + stage, 0.0) + time.process_time() - c0

    setattr(target, name, timed)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--held", default="A100")
    ap.add_argument("--read-value", action="store_true")
    a = ap.parse_args()
    prob, sources = held_out_case(a.held)
    seconds: dict[str, float] = {}
    for stage in STAGES:
        _wrap(seconds, *stage)
    c0 = time.process_time()
    row: dict[str, Any] = {"held": a.held, "file": gt.__file__, "load": os.getloadavg(),
                           "cholesky_s": cholesky_seconds()}
    row["cholesky_cpu_s"] = (time.process_time() - c0) / 3.0  # of the three factorisations, on average
    t0, c0 = time.perf_counter(), time.process_time()
    pred = gt.predict_optimum(None, TASK, sources=sources, machine=a.held, problem=prob)
    row["pick_s"], row["pick_cpu_s"] = time.perf_counter() - t0, time.process_time() - c0
    row["stages_s"] = dict(seconds)
    row["params"], row["route"] = pred.params, pred.route
    if a.read_value:
        t0, c0 = time.perf_counter(), time.process_time()
        row["value"] = pred.value
        row["read_value_s"], row["read_value_cpu_s"] = time.perf_counter() - t0, time.process_time() - c0
        row["stages_after_value_s"] = dict(seconds)
    row["cholesky_after_s"] = cholesky_seconds()
    print(json.dumps(row), flush=True)
    Path(a.out).write_text(json.dumps(row, indent=1))


if __name__ == "__main__":
    main()
