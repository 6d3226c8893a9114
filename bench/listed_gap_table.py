"""The tables of bench/results/listed_gap.md (issue 45, the listed-space gap against BoTorch): per tuning family,
each method's mean normalised regret over seeds (worst seed), and each method's paired difference in regret from
``--base`` (method minus base, per seed; negative: better than the base) with its standard error, seeds better /
worse, and a pooled row over every (family, seed) pair both ran. Writes the numbers as JSON with ``--json``.

    python bench/listed_gap_table.py runs.jsonl... --base mla --methods mla@nopicks,mla@rbf,botorch_mtgp [--json F]
    python bench/listed_gap_table.py --describe gen:763,gen:837   # the families: size, kind, how narrow the optimum

Only tuning families (``gen:<seed>``, seed < 1000) are described: never a judged one.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from suite import scores  # noqa: E402
from suite_families import family  # noqa: E402


def regrets(records: list[dict]) -> dict[str, dict[str, dict[int, float]]]:
    """family -> method -> seed -> mean normalised regret of that run (the suite's score)."""
    out: dict[str, dict[str, dict[int, float]]] = {}
    fams: dict[str, object] = {}
    for r in records:
        fam = fams.setdefault(r["family"], family(r["family"]))
        out.setdefault(r["family"], {}).setdefault(r["method"], {})[r["seed"]] = scores(r, fam)["regret"]
    return out


def paired(a: dict[int, float], b: dict[int, float]) -> np.ndarray:
    """Per common seed, a - b (sorted by seed)."""
    return np.array([a[s] - b[s] for s in sorted(set(a) & set(b))])


def _se(d: np.ndarray) -> float:
    return float(d.std(ddof=1) / np.sqrt(len(d))) if len(d) > 1 else float("nan")


def describe(names: list[str]) -> None:
    """One row per tuning family of a listed space: inputs, tasks, kind, values per input, noise, own weight, the
    share of configurations within 0.1 of the optimum in normalised regret (mean over tasks), and the share of tasks
    whose optimum is the most common one (1: one configuration is every task's optimum)."""
    from suite_generated import GeneratedObjective, TUNING_SEEDS, draw_spec, enumerate_unit, parse_name

    print("| family | inputs, tasks, kind | values per input | noise | own weight up to | configurations "
          "| share within 0.1 of the optimum | tasks sharing the commonest optimum |")
    print("|---|---|---|---|---|---|---|---|")
    for name in names:
        seed = parse_name(name)
        if seed is None or seed not in TUNING_SEEDS:
            raise SystemExit(f"--describe takes tuning families only (gen:<seed>, seed < 1000), got {name!r}")
        spec = draw_spec(seed)
        if spec.space_kind != "listed":
            raise SystemExit(f"{name} is not a listed space ({spec.space_kind})")
        obj = GeneratedObjective(spec)
        U = enumerate_unit(spec)
        near, opts = [], []
        for i in range(spec.n_tasks):
            v = obj.latent_unit(i, U)
            near.append(np.mean((v - v.min()) / (np.median(v) - v.min()) < 0.1))
            opts.append(int(np.argmin(v)))
        share = np.bincount(opts).max() / spec.n_tasks
        print(f"| {name} | {spec.n_inputs}, {spec.n_tasks}, {spec.kind} ({spec.kernel}) | "
              f"{', '.join(str(len(c)) for c in spec.coords)} | {spec.noise:g} | {spec.c_max:g} | {len(U)} | "
              f"{np.mean(near):.4f} | {share:.2f} |")


def main(argv: list[str] | None = None) -> int:
    if argv is None:
        argv = sys.argv[1:]
    if argv[:1] == ["--describe"] and len(argv) == 2:
        describe(argv[1].split(","))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("inputs", nargs="+")
    ap.add_argument("--base", default="mla")
    ap.add_argument("--methods", required=True, help="comma separated, compared with --base")
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)
    records = [json.loads(line) for f in a.inputs for line in Path(f).read_text().splitlines() if line.strip()]
    methods = [m for m in a.methods.split(",") if m]
    reg = regrets(records)
    fams = sorted(reg, key=lambda f: int(f.split(":")[1]) if f.startswith("gen:") else 0)
    cols = [a.base] + methods
    print("| family | " + " | ".join(cols) + " |")
    print("|---|" + "---|" * len(cols))
    for f in fams:
        cells = []
        for m in cols:
            v = reg[f].get(m)
            cells.append("-" if not v else f"{np.mean(list(v.values())):.3f} ({max(v.values()):.3f})"
                         + ("" if len(v) >= 5 else f" [{len(v)}]"))
        print(f"| {f} | " + " | ".join(cells) + " |")
    print()
    print(f"Paired by seed, method minus {a.base} (negative: lower regret than {a.base}); mean (se), seeds better / worse")
    print()
    print("| family | " + " | ".join(methods) + " |")
    print("|---|" + "---|" * len(methods))
    pooled: dict[str, list[float]] = {m: [] for m in methods}
    out: dict = {"base": a.base, "families": {}}
    for f in fams + ["pooled"]:
        cells = []
        for m in methods:
            if f == "pooled":
                d = np.array(pooled[m])
            else:
                d = paired(reg[f].get(m, {}), reg[f].get(a.base, {}))
                pooled[m] += d.tolist()
            if not len(d):
                cells.append("-")
                continue
            mark = "**" if len(d) > 1 and abs(d.mean()) > 2 * _se(d) else ""
            cells.append(f"{mark}{d.mean():+.3f}{mark} ({_se(d):.3f}), {(d < 0).sum()} / {(d > 0).sum()}"
                         + ("" if f != "pooled" else f" of {len(d)}"))
            out["families"].setdefault(f, {})[m] = {"mean": float(d.mean()), "se": _se(d), "n": len(d),
                                                    "better": int((d < 0).sum()), "worse": int((d > 0).sum())}
        print(f"| {f} | " + " | ".join(cells) + " |")
    out["regret"] = reg
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
