"""Exhaustive sweeps over a discretised PDGEQRF parameter space (ground truth for small tasks).

``configurations(problem, task)`` lists every feasible configuration with ``mb``, ``nb`` in
powers of two (1..256 by default) and all ``nproc``, ``p``, ``nth`` in range; ``sweep`` runs
them (in a shuffled order, so slow drifts of the machine's load do not bias one region) and
writes one CSV row per run. The CSV starts with ``#`` comment lines describing the machine.
"""

from __future__ import annotations

import csv
import datetime as _dt
import itertools
import logging
import os
import platform
import random
import subprocess
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, TextIO

import gptask as gt

__all__ = [
    "POW2_BLOCKS", "COLUMNS", "configurations", "machine_description", "sweep", "run_configurations", "read_csv",
    "summarize",
]

log = logging.getLogger(__name__)

POW2_BLOCKS = (1, 2, 4, 8, 16, 32, 64, 128, 256)
COLUMNS = ("m", "n", "mb", "nb", "nproc", "p", "q", "nth", "time", "times", "residual", "status", "reason")


def configurations(problem: gt.Problem, task: dict, blocks: Sequence[int] = POW2_BLOCKS) -> list[dict]:
    """All feasible parameter dicts of the discretised space for ``task``."""
    space = problem.param_space
    nproc_dim, p_dim, nth_dim = space["nproc"], space["p"], space["nth"]
    out = []
    for mb, nb, nproc, p, nth in itertools.product(
        blocks, blocks,
        range(nproc_dim.lo, nproc_dim.hi + 1),
        range(p_dim.lo, p_dim.hi + 1),
        range(nth_dim.lo, nth_dim.hi + 1),
    ):
        params = {"mb": mb, "nb": nb, "nproc": nproc, "p": p, "nth": nth}
        if params in space and problem.is_feasible(task, params):
            out.append(params)
    return out


def _lscpu_model() -> str:
    try:
        text = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return platform.processor() or "unknown"
    for line in text.splitlines():
        if line.startswith("Model name:"):
            return line.split(":", 1)[1].strip()
    return "unknown"


def machine_description() -> dict[str, str]:
    """CPU model, core count, date (UTC), host OS and the current load average."""
    load = os.getloadavg() if hasattr(os, "getloadavg") else ("?", "?", "?")
    return {
        "cpu": _lscpu_model(),
        "cores_usable": str(len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()),
        "date_utc": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "platform": platform.platform(),
        "loadavg_1_5_15": " ".join(f"{x:.2f}" if isinstance(x, float) else x for x in load),
    }


def sweep(
    problem: gt.Problem,
    task: dict,
    out: TextIO,
    blocks: Sequence[int] = POW2_BLOCKS,
    seed: int = 0,
    note: str = "",
    progress: Callable[[int, int, dict, dict], None] | None = None,
) -> list[dict[str, Any]]:
    """Run every configuration of ``task`` (see :func:`configurations`); CSV to ``out``; the rows."""
    task = problem.task_space.validate(task, "task")
    configs = configurations(problem, task, blocks)
    random.Random(seed).shuffle(configs)
    header = f"grid sweep, task m={task['m']} n={task['n']}, blocks {list(blocks)}"
    return run_configurations(problem, [(task, c) for c in configs], out, header, note, progress)


def run_configurations(
    problem: gt.Problem,
    runs: Sequence[tuple[dict, dict]],
    out: TextIO,
    header: str = "",
    note: str = "",
    progress: Callable[[int, int, dict, dict], None] | None = None,
) -> list[dict[str, Any]]:
    """Run each ``(task, params)`` in order; write CSV to ``out``; return the rows.

    The problem's objective must offer ``run(task, params) -> record`` (the real backend) or be
    a plain callable returning seconds (the model backend). Failures are recorded, not raised.
    """
    info = machine_description()
    out.write(f"# scalapack_qr {header}, problem {problem.name}\n")
    for k, v in info.items():
        out.write(f"# {k}: {v}\n")
    out.write(f"# constants: {problem.constants}; runs: {len(runs)}\n")
    if note:
        out.write(f"# note: {note}\n")
    out.write("# time: seconds of PDGEQRF (min over the driver's repeats); times: all repeats, ';'-separated\n")
    writer = csv.DictWriter(out, fieldnames=COLUMNS)
    writer.writeheader()
    rows = []
    run = getattr(problem.objective, "run", None)
    for i, (task, params) in enumerate(runs):
        row: dict[str, Any] = {**task, **params, "q": params["nproc"] // params["p"]}
        try:
            if run is not None:
                rec = run(task, params)
                row.update(time=rec["time"], times=";".join(f"{t:.6g}" for t in rec.get("times", [])),
                           residual=rec.get("residual", ""), status="complete", reason="")
            else:
                row.update(time=float(problem.objective(task, params)), times="", residual="",
                           status="complete", reason="")
        except Exception as exc:  # noqa: BLE001 - a failed configuration is data, not a crash
            row.update(time="", times="", residual="", status="failed", reason=f"{type(exc).__name__}: {exc}")
        writer.writerow(row)
        out.flush()
        rows.append(row)
        if progress is not None:
            progress(i + 1, len(runs), params, row)
    end = machine_description()
    out.write(f"# finished {end['date_utc']}, loadavg {end['loadavg_1_5_15']}\n")
    return rows


def read_csv(path: str | Path) -> list[dict[str, Any]]:
    """Rows of a sweep CSV (comment lines skipped), numbers converted; failed rows kept."""
    rows = []
    with open(path, newline="") as fh:
        lines: Iterable[str] = (ln for ln in fh if not ln.startswith("#"))
        for r in csv.DictReader(lines):
            row: dict[str, Any] = dict(r)
            for k in ("m", "n", "mb", "nb", "nproc", "p", "q", "nth"):
                row[k] = int(row[k])
            row["time"] = float(row["time"]) if row.get("time") else None
            rows.append(row)
    return rows


def summarize(rows: Sequence[dict[str, Any]], top: int = 5) -> dict[str, Any]:
    """Best configurations and measurement noise of a sweep (rows from :func:`read_csv`).

    ``repeat_spread`` is, per run with at least two repeats, ``max(times) / min(times) - 1``: how
    much two back-to-back factorisations of the same matrix differ on this machine.
    """
    ok = sorted((r for r in rows if r["status"] == "complete" and r["time"]), key=lambda r: r["time"])
    keys = ("mb", "nb", "nproc", "p", "nth")
    spreads = []
    for r in ok:
        ts = [float(t) for t in str(r.get("times") or "").split(";") if t]
        if len(ts) >= 2:
            spreads.append(max(ts) / min(ts) - 1.0)
    out: dict[str, Any] = {"runs": len(rows), "complete": len(ok)}
    if ok:
        out["best"] = [{**{k: r[k] for k in keys}, "time": r["time"]} for r in ok[:top]]
        out["worst_time"] = ok[-1]["time"]
        out["median_time"] = ok[len(ok) // 2]["time"]
    if spreads:
        s = sorted(spreads)
        out["repeat_spread_median"] = s[len(s) // 2]
        out["repeat_spread_p90"] = s[int(0.9 * (len(s) - 1))]
    return out
