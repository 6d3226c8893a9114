"""How often a listed-space run ends in the trap of issue 45 (bench/results/listed_trap.md): per (family, method), over
the tasks of every run, the share whose final incumbent has a one-step grid neighbour within 0.1 normalised regret of
the task's optimum that the task never ran ("one step away"), the share that ran a configuration within 0.1
("found"), and the mean regret of the tasks one step away. Reads bench/suite.py's run files (their ``params``);
tuning families ``gen:<seed>`` (seed < 1000) with listed spaces only.

    python bench/listed_trap_count.py runs.jsonl [--families gen:837,gen:763]
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from suite import read_rows  # noqa: E402
from suite_generated import generated, parse_name  # noqa: E402

NEAR = 0.1


def landscape(seed: int) -> tuple[np.ndarray, np.ndarray, list]:
    """(list indices (n, d) of every configuration, normalised regret (T, n), the dimensions)."""
    g = generated(seed)
    dom = g["problem"].domain(g["tasks"][0])
    U = g["objective"].unit(dom.params(np.arange(len(dom))))
    f_opt, f_ref = np.array(g["f_opt"]), np.array(g["f_ref"])
    R = np.array([(g["objective"].latent_unit(i, U) - f_opt[i]) / (f_ref[i] - f_opt[i]) for i in range(len(f_opt))])
    return np.asarray(dom.index), R, list(g["spec"].dims)


def count(records: list[dict]) -> dict[tuple[str, str], dict[str, float]]:
    acc: dict[tuple[str, str], list[tuple[int, int, float]]] = defaultdict(list)
    cache: dict[int, tuple] = {}
    for r in records:
        seed = parse_name(r["family"])
        if seed is None or seed >= 1000 or "params" not in r:
            continue
        if seed not in cache:
            cache[seed] = landscape(seed)
        index, R, dims = cache[seed]
        lookup = {tuple(row): k for k, row in enumerate(index.tolist())}
        for i, (vals, params) in enumerate(zip(r["values"], r["params"])):
            rows = [lookup[tuple(d.ordered.index(p[d.name]) for d in dims)] for p in params]
            done = [(v, k) for v, k in zip(vals, rows) if v is not None]
            if not done:
                continue
            inc = min(done)[1]
            near = np.flatnonzero(np.abs(index - index[inc]).sum(axis=1) == 1)
            untried = [k for k in near if k not in set(rows) and R[i, k] < NEAR]
            found = bool(np.any(R[i, rows] < NEAR))
            acc[(r["family"], r["method"])].append((int(bool(untried) and not found), int(found), float(R[i, inc])))
    out = {}
    for key, rows in acc.items():
        a = np.array(rows)
        away = a[:, 0] == 1
        out[key] = {"tasks": len(a), "one_step": float(away.mean()), "found": float(a[:, 1].mean()),
                    "regret_one_step": float(a[away, 2].mean()) if away.any() else float("nan")}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("inputs", nargs="+")
    ap.add_argument("--families", default="")
    a = ap.parse_args(argv)
    keep = set(a.families.split(",")) if a.families else None
    records = [r for r in read_rows(a.inputs) if keep is None or r["family"] in keep]
    print("| family | method | tasks | one step from a configuration within 0.1, not found | found one within 0.1 "
          "| mean regret of those one step away |")
    print("|---|---|---|---|---|---|")
    for (fam, method), s in sorted(count(records).items()):
        print(f"| {fam} | {method} | {s['tasks']} | {s['one_step']:.2f} | {s['found']:.2f} "
              f"| {s['regret_one_step']:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
