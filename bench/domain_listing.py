"""Listing a constrained discrete space: a callable constraint judged on whole columns against the
same rule called per configuration (gptask.problem.rule_columns), side by side in one process.

PDGEQRF on a node of C cores (apps.scalapack_qr, 2 cores: 524,288 grid points per task, four
callable rules) lists each task's allowed configurations once per process; the per-point form is
the same four rules wrapped in ``bool(...)``, which cannot take arrays (what every callable rule
cost before). Prints per task the seconds of both and checks the two lists are identical.

    python bench/domain_listing.py [--cores 2] [--tasks 8]
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np

from apps.scalapack_qr import problem as pdgeqrf
from gptask.problem.definition import Problem
from gptask.space.domain import build_domain
from gptask.tuning.tuner import resolve_tasks


def per_point(rule):
    def judged(c: dict) -> bool:
        return bool(rule(c))  # bool() of an array raises: the per-point path
    judged.__name__ = rule.__name__
    return judged


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--tasks", type=int, default=8)
    args = ap.parse_args()
    columns = pdgeqrf(cores=args.cores, m_max=2000, backend="model")
    pointwise = Problem(columns.task_space, columns.param_space, columns.objective,
                        constraints=[per_point(r) for r in columns.constraints], constants=columns.constants,
                        name=columns.name + "_per_point")
    rows = []
    for task in resolve_tasks(columns, args.tasks, 0):
        t0 = time.perf_counter()
        a = build_domain(columns, task)
        t1 = time.perf_counter()
        b = build_domain(pointwise, task)
        t2 = time.perf_counter()
        same = np.array_equal(a.index, b.index)
        rows.append({"task": task, "allowed": int(len(a.index)), "columns_s": round(t1 - t0, 3),
                     "per_point_s": round(t2 - t1, 3), "ratio": round((t2 - t1) / (t1 - t0), 1), "same": same})
        print(json.dumps(rows[-1]), flush=True)
    grid = columns.param_space.grid_size()
    print(f"{len(rows)} tasks of {grid} grid points, cores={args.cores}, load {os.getloadavg()[0]:.1f}: "
          f"columns {sum(r['columns_s'] for r in rows):.2f} s, per point {sum(r['per_point_s'] for r in rows):.1f} s, "
          f"same lists on {sum(r['same'] for r in rows)} of {len(rows)}")


if __name__ == "__main__":
    main()
