"""Exhaustive sweep of the discretised parameter space for one task (the ground truth).

The grid is every algorithm of the task's collective crossed with the grid values
(:data:`~apps.mpi_collectives.algorithms.KNOB_GRID`) of the knobs *that algorithm reads*;
inactive knobs are pinned to their defaults, so no run is a duplicate. With ``repeats > 1`` the
whole grid is measured ``repeats`` times, each pass in a fresh random order, so that a slow
period of the shared machine spreads over all configurations instead of hitting a block of
neighbours. Results go to a CSV whose ``#`` header lines describe the machine, the load and the
command.
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
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from .algorithms import KNOB_DEFAULTS, KNOB_GRID, KNOB_NAMES, active_knobs, algorithms_for
from .launcher import LaunchConfig, LaunchError
from .objective import check_task, evaluate

__all__ = ["grid_params", "sweep", "confirm", "write_csv", "read_csv", "machine_description",
           "summarize", "COLUMNS"]

log = logging.getLogger(__name__)

COLUMNS = ["coll", "size", "nprocs", "algorithm", *KNOB_NAMES, "repeat", "status", "time",
           "min", "median", "p25", "p75", "n_iter", "fallbacks", "loadavg1", "reason", "phase"]


def grid_params(coll: str, multi_node: bool = False,
                knob_grid: Mapping[str, Sequence[Any]] | None = None) -> list[dict[str, Any]]:
    """Every distinct configuration of ``coll`` on the knob grid (``auto`` first)."""
    kg = {**KNOB_GRID, **(knob_grid or {})}
    out = []
    for alg in algorithms_for(coll, multi_node):
        act = [k for k in KNOB_NAMES if k in active_knobs(coll, alg)]
        for values in itertools.product(*(kg[k] for k in act)):
            p: dict[str, Any] = {"algorithm": alg, **KNOB_DEFAULTS}
            p.update(zip(act, values))
            out.append(p)
    return out


def _loadavg() -> float:
    try:
        return os.getloadavg()[0]
    except OSError:
        return float("nan")


def machine_description() -> dict[str, str]:
    """CPU model, cores, kernel, date and load average, for the CSV header."""
    model = ""
    try:
        text = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
        for line in text.splitlines():
            if line.startswith("Model name:"):
                model = line.split(":", 1)[1].strip()
    except (OSError, subprocess.SubprocessError):
        pass
    la = os.getloadavg() if hasattr(os, "getloadavg") else (float("nan"),) * 3
    return {
        "host": platform.node(),
        "cpu": model or platform.processor(),
        "cores": str(os.cpu_count()),
        "usable_cores": str(len(os.sched_getaffinity(0))),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "date_utc": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "loadavg": " ".join(f"{x:.2f}" for x in la),
    }


def sweep(task: Mapping[str, Any], config: LaunchConfig | None = None, repeats: int = 1,
          seed: int = 0, multi_node: bool = False,
          progress: Callable[[int, int, dict], None] | None = None) -> list[dict[str, Any]]:
    """Measure every grid configuration of ``task`` ``repeats`` times; one row per run.

    A failed run (fallback, crash, timeout) is a row with ``status="failed"`` and its reason.
    """
    coll, size, nprocs = check_task(task)
    if not (isinstance(repeats, int) and repeats >= 1):
        raise ValueError(f"repeats must be a positive integer, got {repeats!r}")
    configs = grid_params(coll, multi_node)
    rng = random.Random(seed)
    rows = []
    total = repeats * len(configs)
    for r in range(repeats):
        order = list(range(len(configs)))
        rng.shuffle(order)
        for i in order:
            rows.append(_measure_row(coll, size, nprocs, configs[i], r, "sweep", config,
                                     multi_node))
            if progress is not None:
                progress(len(rows), total, rows[-1])
    return rows


def _measure_row(coll: str, size: int, nprocs: int, p: Mapping[str, Any], repeat: int, phase: str,
                 config: LaunchConfig | None, multi_node: bool) -> dict[str, Any]:
    row: dict[str, Any] = {"coll": coll, "size": size, "nprocs": nprocs, **p, "repeat": repeat,
                           "loadavg1": round(_loadavg(), 2), "phase": phase}
    try:
        res = evaluate({"coll": coll, "size": size, "nprocs": nprocs}, p, config, multi_node)
        row.update(status="complete", reason="",
                   **{k: res[k] for k in ("time", "min", "median", "p25", "p75", "n_iter",
                                          "fallbacks")})
    except LaunchError as exc:
        row.update(status="failed", reason=exc.reason)
    return row


def _key(r: Mapping[str, Any]) -> tuple:
    return (r["algorithm"], *(r[k] for k in KNOB_NAMES))


def confirm(rows: Sequence[Mapping[str, Any]], top: int = 3, repeats: int = 5,
            config: LaunchConfig | None = None, multi_node: bool = False,
            progress: Callable[[int, int, dict], None] | None = None) -> list[dict[str, Any]]:
    """Re-measure the ``top`` best sweep configurations and ``auto``, ``repeats`` times each,
    interleaved (round-robin), as rows with ``phase="confirm"``.

    One sweep run per configuration on a loaded machine can flatter a configuration that
    happened to run in a quiet moment; the confirmation runs compare the candidates and the
    default under the same conditions (the thesis re-ran both best and default many times).
    """
    if not (isinstance(top, int) and top >= 1 and isinstance(repeats, int) and repeats >= 1):
        raise ValueError(f"top and repeats must be positive integers, got {top!r}, {repeats!r}")
    sweep_rows = [r for r in rows if r.get("phase", "") in ("", "sweep")]
    best: dict[tuple, float] = {}
    params: dict[tuple, dict] = {}
    for r in sweep_rows:
        if r.get("status") == "complete":
            k = _key(r)
            best[k] = min(best.get(k, float("inf")), float(r["time"]))
            params[k] = {"algorithm": r["algorithm"], **{n: r[n] for n in KNOB_NAMES}}
    if not best:
        raise ValueError("no complete sweep run to confirm")
    chosen = [k for k, _ in sorted(best.items(), key=lambda kv: kv[1])[:top]]
    chosen += [k for k in params if k[0] == "auto" and k not in chosen]
    coll, size, nprocs = (sweep_rows[0][k] for k in ("coll", "size", "nprocs"))
    out: list[dict[str, Any]] = []
    total = repeats * len(chosen)
    for r in range(repeats):
        for k in chosen:
            out.append(_measure_row(coll, size, nprocs, params[k], r, "confirm", config,
                                    multi_node))
            if progress is not None:
                progress(len(out), total, out[-1])
    return out


def write_csv(path: str, rows: Sequence[Mapping[str, Any]], header: Mapping[str, str]) -> None:
    """Write ``rows`` with ``# key: value`` header lines (machine, load, command)."""
    with open(path, "w", newline="") as f:
        for k, v in header.items():
            f.write(f"# {k}: {v}\n")
        w = csv.DictWriter(f, fieldnames=COLUMNS, extrasaction="ignore")
        w.writeheader()
        for row in rows:
            w.writerow({k: row.get(k, "") for k in COLUMNS})


def read_csv(path: str) -> tuple[dict[str, str], list[dict[str, Any]]]:
    """(header dict, rows) of a file written by :func:`write_csv`; numbers parsed back."""
    header: dict[str, str] = {}
    lines = []
    with open(path, newline="") as f:
        for line in f:
            if line.startswith("#"):
                k, _, v = line[1:].partition(":")
                header[k.strip()] = v.strip()
            else:
                lines.append(line)
    rows = []
    for row in csv.DictReader(lines):
        out: dict[str, Any] = {}
        for k, v in row.items():
            if k in ("size", "nprocs", "kval", "chunk", "repeat", "n_iter", "fallbacks") and v:
                out[k] = int(v)
            elif k in ("time", "min", "median", "p25", "p75", "loadavg1") and v:
                out[k] = float(v)
            else:
                out[k] = v
        rows.append(out)
    return header, rows


def summarize(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Default time, best configuration and gain over the default for one task's sweep.

    Each configuration's value is the minimum of its ``time`` over repeats (the same one-sided
    noise argument as within a run). ``gain_over_default = 1 - best / default``.
    """
    confirm_rows = [r for r in rows if r.get("phase") == "confirm"]
    rows = [r for r in rows if r.get("phase", "") in ("", "sweep")]
    best_of: dict[tuple, float] = {}
    failed = set()
    for r in rows:
        key = _key(r)
        if r.get("status") != "complete":
            failed.add(key)
            continue
        best_of[key] = min(best_of.get(key, float("inf")), float(r["time"]))
    if not best_of:
        raise ValueError("no complete run in these rows")
    ranked = sorted(best_of.items(), key=lambda kv: kv[1])
    (alg, *knobs), t_best = ranked[0]
    auto = [v for (a, *_), v in best_of.items() if a == "auto"]
    out: dict[str, Any] = {
        "task": {k: rows[0][k] for k in ("coll", "size", "nprocs")},
        "configs": len(best_of) + len(failed - set(best_of)),
        "failed_configs": len(failed - set(best_of)),
        "best": {"algorithm": alg, **dict(zip(KNOB_NAMES, knobs)), "time": t_best},
        "worst_time": ranked[-1][1],
    }
    if auto:
        out["default_time"] = min(auto)
        out["gain_over_default"] = 1.0 - t_best / min(auto)
        out["default_rank"] = 1 + sum(v < min(auto) for _, v in ranked)
    if confirm_rows:
        times: dict[tuple, list[float]] = {}
        for r in confirm_rows:
            if r.get("status") == "complete":
                times.setdefault(_key(r), []).append(float(r["time"]))
        stats = {k: (min(v), float(np.median(v)), len(v)) for k, v in times.items()}
        cand = {k: s for k, s in stats.items() if k[0] != "auto"}
        auto_k = [k for k in stats if k[0] == "auto"]
        if cand:
            kb = min(cand, key=lambda k: cand[k][0])
            out["confirmed_best"] = {"algorithm": kb[0], **dict(zip(KNOB_NAMES, kb[1:])),
                                     "min": cand[kb][0], "median": cand[kb][1], "runs": cand[kb][2]}
        if auto_k:
            a_min, a_med, a_n = stats[auto_k[0]]
            out["confirmed_default"] = {"min": a_min, "median": a_med, "runs": a_n}
            if cand:
                out["confirmed_gain_min"] = 1.0 - cand[kb][0] / a_min
                out["confirmed_gain_median"] = 1.0 - cand[kb][1] / a_med
    return out
