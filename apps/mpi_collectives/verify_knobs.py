"""Evidence that each tuning knob changes what MPICH does.

Run from the repo root (a few minutes; use ``nice``):

    nice -n 10 python -m apps.mpi_collectives.verify_knobs --repeats 5 --out FILE.json

Three kinds of evidence:

* timing: for a (collective, size, nprocs) where the knob should matter, two values of the knob
  are measured ``repeats`` times each, interleaved (A B A B ...) so that load changes on the
  shared machine hit both alike. Each run's value is the minimum of per-iteration maxima. A
  knob counts as effective when the two sets of runs do not overlap (every run of the faster
  value beats every run of the slower one); the ratio of medians is reported too.
* message fingerprint (fingerprint.py, needs strace): large intranode messages per call and
  rank for A and B, counted from ``process_vm_readv`` system calls. Independent of load: a
  different count proves the knob changed the communication pattern (an equal count does not
  prove the opposite; two patterns can have the same number of messages).
* MPICH's own reports: the tree each rank used (``MPIR_CVAR_COLL_TREE_DUMP``) for ``tree_type``
  and ``kval`` of the tree algorithms; fallback reports for algorithms whose restrictions are
  not met (see the tests).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from . import fingerprint
from .grid import machine_description
from .launcher import LaunchConfig, LaunchError
from .objective import evaluate

# (label, task, params A, params B): A and B differ in one knob (or in the algorithm)
TIMING_CASES: list[tuple[str, dict, dict, dict]] = [
    ("algorithm: allreduce ring vs recexch",
     {"coll": "allreduce", "size": 1 << 20, "nprocs": 4},
     {"algorithm": "ring"}, {"algorithm": "recexch", "kval": 2}),
    ("algorithm: alltoall pairwise vs brucks",
     {"coll": "alltoall", "size": 1 << 18, "nprocs": 4},
     {"algorithm": "pairwise"}, {"algorithm": "brucks"}),
    ("chunk: allreduce tree 8 KiB vs 1 MiB",
     {"coll": "allreduce", "size": 1 << 20, "nprocs": 4},
     {"algorithm": "tree", "kval": 2, "tree_type": "kary", "chunk": 8192},
     {"algorithm": "tree", "kval": 2, "tree_type": "kary", "chunk": 1 << 20}),
    ("chunk: bcast pipelined_tree 4 KiB vs 256 KiB",
     {"coll": "bcast", "size": 1 << 22, "nprocs": 4},
     {"algorithm": "pipelined_tree", "kval": 2, "tree_type": "kary", "chunk": 4096},
     {"algorithm": "pipelined_tree", "kval": 2, "tree_type": "kary", "chunk": 1 << 18}),
    ("kval: allreduce recursive_multiplying 2 vs 4",
     {"coll": "allreduce", "size": 1 << 20, "nprocs": 4},
     {"algorithm": "recursive_multiplying", "kval": 2},
     {"algorithm": "recursive_multiplying", "kval": 4}),
    ("kval: allreduce recexch 2 vs 4",
     {"coll": "allreduce", "size": 1 << 20, "nprocs": 4},
     {"algorithm": "recexch", "kval": 2}, {"algorithm": "recexch", "kval": 4}),
    ("kval: allreduce k_reduce_scatter_allgather 2 vs 3",
     {"coll": "allreduce", "size": 1 << 20, "nprocs": 4},
     {"algorithm": "k_reduce_scatter_allgather", "kval": 2},
     {"algorithm": "k_reduce_scatter_allgather", "kval": 3}),
    ("kval: allreduce tree kary 2 vs 3",
     {"coll": "allreduce", "size": 1 << 20, "nprocs": 4},
     {"algorithm": "tree", "kval": 2, "tree_type": "kary", "chunk": 1 << 20},
     {"algorithm": "tree", "kval": 3, "tree_type": "kary", "chunk": 1 << 20}),
    ("tree_type: allreduce tree kary vs knomial_1 (k=3)",
     {"coll": "allreduce", "size": 1 << 20, "nprocs": 4},
     {"algorithm": "tree", "kval": 3, "tree_type": "kary", "chunk": 1 << 20},
     {"algorithm": "tree", "kval": 3, "tree_type": "knomial_1", "chunk": 1 << 20}),
    ("kval: bcast tree 2 vs 3",
     {"coll": "bcast", "size": 1 << 20, "nprocs": 4},
     {"algorithm": "tree", "kval": 2, "tree_type": "kary"},
     {"algorithm": "tree", "kval": 3, "tree_type": "kary"}),
    ("kval: allgather k_brucks 2 vs 4",
     {"coll": "allgather", "size": 1 << 18, "nprocs": 4},
     {"algorithm": "k_brucks", "kval": 2}, {"algorithm": "k_brucks", "kval": 4}),
    ("kval: allgather recexch_doubling 2 vs 4",
     {"coll": "allgather", "size": 1 << 18, "nprocs": 4},
     {"algorithm": "recexch_doubling", "kval": 2}, {"algorithm": "recexch_doubling", "kval": 4}),
    ("kval: alltoall k_brucks 2 vs 4",
     {"coll": "alltoall", "size": 1 << 16, "nprocs": 4},
     {"algorithm": "k_brucks", "kval": 2}, {"algorithm": "k_brucks", "kval": 4}),
]

# (label, task, params) whose tree dumps are compared
TREE_CASES: list[tuple[str, dict, list[dict]]] = [
    ("allreduce tree", {"coll": "allreduce", "size": 4096, "nprocs": 4},
     [{"algorithm": "tree", "kval": k, "tree_type": t, "chunk": 1 << 20}
      for t in ("kary", "knomial_1", "knomial_2") for k in (2, 3)]),
    ("bcast tree", {"coll": "bcast", "size": 4096, "nprocs": 4},
     [{"algorithm": "tree", "kval": k, "tree_type": t}
      for t in ("kary", "knomial_1", "knomial_2") for k in (2, 3)]),
    ("bcast pipelined_tree", {"coll": "bcast", "size": 65536, "nprocs": 4},
     [{"algorithm": "pipelined_tree", "kval": k, "tree_type": t, "chunk": 8192}
      for t in ("kary", "knomial_1", "knomial_2") for k in (2, 3)]),
]


def timing_case(task: dict, a: dict, b: dict, repeats: int, config: LaunchConfig) -> dict[str, Any]:
    ta: list[float] = []
    tb: list[float] = []
    errors: list[str] = []
    for _ in range(repeats):
        for params, sink in ((a, ta), (b, tb)):
            try:
                sink.append(evaluate(task, params, config)["time"])
            except LaunchError as exc:
                errors.append(exc.reason)
    out: dict[str, Any] = {"task": task, "A": a, "B": b, "times_A": ta, "times_B": tb,
                           "errors": errors}
    if ta and tb:
        ma, mb = float(np.median(ta)), float(np.median(tb))
        out["median_A"], out["median_B"] = ma, mb
        out["ratio_slow_over_fast"] = max(ma, mb) / min(ma, mb)
        out["separated"] = bool(max(ta) < min(tb) or max(tb) < min(ta))
    return out


def tree_dumps(task: dict, variants: list[dict], config: LaunchConfig) -> list[dict[str, Any]]:
    rows = []
    for params in variants:
        with tempfile.TemporaryDirectory() as tmp:
            cfg = LaunchConfig(**{**config.__dict__, "cwd": tmp,
                                  "env": {**config.env, "MPIR_CVAR_COLL_TREE_DUMP": "1"}})
            try:
                evaluate(task, params, cfg)
            except LaunchError as exc:
                rows.append({"params": params, "error": exc.reason})
                continue
            trees = {}
            for f in sorted(Path(tmp).glob("colltree*.json")):
                d = json.loads(f.read_text())
                trees[d["rank"]] = {"parent": d["parent"], "children": d["children"]}
            rows.append({"params": params, "tree": trees})
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--target", type=float, default=0.2)
    p.add_argument("--out", default="")
    p.add_argument("--only", default="", help="substring filter on case labels")
    p.add_argument("--no-fingerprint", action="store_true", help="skip the strace counts")
    a = p.parse_args(argv)
    config = LaunchConfig(target=a.target, timeout=120)
    report: dict[str, Any] = {"machine": machine_description(), "timing": [], "trees": []}
    for label, task, pa, pb in TIMING_CASES:
        if a.only and a.only not in label:
            continue
        res = timing_case(task, pa, pb, a.repeats, config)
        res["label"] = label
        if not a.no_fingerprint and fingerprint.available():
            try:
                res["messages_per_call_A"] = fingerprint.messages_per_call(task, pa, config=config)
                res["messages_per_call_B"] = fingerprint.messages_per_call(task, pb, config=config)
            except LaunchError as exc:
                res["fingerprint_error"] = exc.reason
        report["timing"].append(res)
        print(f"{label}: A {res.get('median_A', float('nan')):.3e}  B "
              f"{res.get('median_B', float('nan')):.3e}  ratio {res.get('ratio_slow_over_fast', 0):.2f}"
              f"  separated={res.get('separated')}  errors={len(res['errors'])}  messages/call "
              f"{res.get('messages_per_call_A')} vs {res.get('messages_per_call_B')}", flush=True)
    for label, task, variants in TREE_CASES:
        if a.only and a.only not in label:
            continue
        rows = tree_dumps(task, variants, config)
        report["trees"].append({"label": label, "task": task, "rows": rows})
        for r in rows:
            root = r.get("tree", {}).get(0)
            print(f"{label} {r['params']}: root {root}", flush=True)
    report["loadavg_end"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
    if a.out:
        Path(a.out).write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
