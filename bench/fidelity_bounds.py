"""What any method could reach on the multi-fidelity families of bench/multifidelity.py (issue 44):
model-free and oracle figures of the target regret at each cost checkpoint, with the same cost
model and budget, beside half of gptask_sf's measured regret (the issue's target (A)).

Per task and checkpoint (the per-task cost ``c`` = checkpoint x budget; gptask's clock is shared by
the three tasks, ``3 c`` in all, the same on average):

* ``random``: the expected regret of the best of ``floor(c)`` uniform target runs (random search at
  the target fidelity; gptask_sf's first runs are a Latin hypercube, about the same);
* ``promote``: the best over ``(k, m)`` with ``k cheap + m target <= c`` of the expected regret of
  "run ``k`` uniform configurations at the cheapest fidelity, run the ``m`` best of them at the
  target": model-free successive halving at its best split (what a fidelity-using method gets from
  the cheap level without a model); ``(k, m)`` is shown;
* ``pooled`` (10 %): the same promotion from ``3 k`` cheap runs of the task's own function (k of
  each task's own, as if the three tasks' cheap runs, shifted instances of one function, all told
  about each): an optimistic model-free figure for a multitask method at 10 %;
* ``oracle``: the regret at the target of the exact argmin of the cheapest fidelity, and (continuous
  fidelities) of the most accurate fidelity whose cost fits beside one target run, each run once at
  the target: what a method that knows that fidelity perfectly, at no cost, picks for its first
  target run. At 10 % (1.5 target-run costs per task) no method has a second target run on
  average, so below the oracle nothing that chooses its target run from the cheap fidelity reaches;
* ``floor`` (100 %): the regret of the box corner where every gptask run of borehole and park ends
  (not a local optimum: the optimum of a shifted instance lies on the fold of the mirror inside the
  box, see :func:`corner_floor`).

The cheapest fidelity is the family's lowest level (0.1) for two-level families and ``s = 0`` for
continuous ones (cost 0.1; gptask's own cheapest level there is 1/27, cost 0.1012). Monte Carlo:
``--draws`` replicates per task (fixed seed); the expectations' standard errors are below 0.01.

    python bench/fidelity_bounds.py --json bench/results/fidelity_bounds.json \\
        --md bench/results/fidelity_bounds.md [--runs bench/results/fidelity_*.json]

``--runs``: stored benchmark rows (bench/multifidelity.py) giving gptask_sf's and gptask_mf's measured
mean regret per checkpoint, to say where half of gptask_sf's regret lies below the bounds.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import multifidelity as mfb  # noqa: E402
import multifidelity_families as mff  # noqa: E402
from row_files import load_rows  # noqa: E402

FAMILIES = ("currin", "hartmann3", "borehole", "branin", "park", "currin_noinfo")
DRAWS = 2000
SEED = 44


def cheapest(fam: mff.MFFamily) -> float:
    """The cheapest fidelity a method may run (the lowest level; 0 for a continuous fidelity)."""
    return float(min(fam.levels)) if fam.levels is not None else 0.0


def argmin_at(fam: mff.MFFamily, i: int, s: float) -> np.ndarray:
    """Task i's exact argmin at fidelity s (dense sample polished by L-BFGS-B, as the family's optima)."""
    from scipy.optimize import minimize

    rng = np.random.default_rng(mff.TASK_SEED + 31 * i)
    U = rng.random((mff.REFERENCE_SAMPLES * (2 if fam.dim > 4 else 1), fam.dim))
    vals = fam.objective.value(i, U, s)
    best_u, best_v = U[np.argmin(vals)], float(vals.min())
    for k in np.argsort(vals)[:mff.POLISH_STARTS]:
        res = minimize(lambda u: float(fam.objective.value(i, u[None], s)[0]), U[k], method="L-BFGS-B",
                       bounds=[(0.0, 1.0)] * fam.dim)
        if res.fun < best_v:
            best_u, best_v = np.clip(res.x, 0, 1), float(res.fun)
    return best_u


def oracle(fam: mff.MFFamily, c: float) -> dict[str, float]:
    """Mean over tasks of the target regret of the exact argmin of the cheapest fidelity and (a
    continuous fidelity) of the most accurate fidelity whose cost fits beside one target run."""
    out = {"cheapest": float(np.mean([fam.normalised_regret(i, float(fam.objective.value(
        i, argmin_at(fam, i, cheapest(fam))[None], mff.TARGET)[0])) for i in range(len(fam.tasks))]))}
    if fam.levels is None and c - fam.cost(mff.TARGET) > mff.COST_FLOOR:
        s = math.sqrt((c - fam.cost(mff.TARGET) - mff.COST_FLOOR) / (1 - mff.COST_FLOOR))
        out[f"s={s:.2f}"] = float(np.mean([fam.normalised_regret(i, float(fam.objective.value(
            i, argmin_at(fam, i, s)[None], mff.TARGET)[0])) for i in range(len(fam.tasks))]))
    return out


def promote_table(fam: mff.MFFamily, costs: list[float], draws: int) -> list[dict[str, Any]]:
    """Per per-task cost c: the expected regret of random target search (``floor(c)`` runs) and of
    the best split (k cheap, m promoted), averaged over the tasks."""
    s0 = cheapest(fam)
    c0, ct = fam.cost(s0), fam.cost(mff.TARGET)
    kmax = int(max(costs) / c0) + 1
    rng = np.random.default_rng(SEED)
    regrets = []  # per task: (draws, kmax) target regret of the pool, ordered by the cheap value
    rand = []  # per task: (draws, mmax) target regret of uniform target runs
    for i in range(len(fam.tasks)):
        U = rng.random((draws * kmax, fam.dim))
        cheap = fam.objective.value(i, U, s0).reshape(draws, kmax)
        targ = np.array([fam.normalised_regret(i, v) for v in fam.objective.value(i, U, mff.TARGET)]).reshape(draws, kmax)
        regrets.append((cheap, targ))
        R = rng.random((draws * int(max(costs) // ct), fam.dim))
        rand.append(np.array([fam.normalised_regret(i, v) for v in fam.objective.value(i, R, mff.TARGET)])
                    .reshape(draws, -1))
    out = []
    for c in costs:
        m_max = int(math.floor(c / ct + 1e-9))
        row: dict[str, Any] = {"cost": c, "random": float(np.mean([np.minimum.accumulate(r, axis=1)[:, m_max - 1].mean()
                                                                   for r in rand])) if m_max else 1.0}
        best = (math.inf, 0, 0)
        for m in range(1, m_max + 1):
            k = int(math.floor((c - m * ct) / c0 + 1e-9))
            if k < m:
                continue
            vals = []
            for cheap, targ in regrets:
                order = np.argsort(cheap[:, :k], axis=1)[:, :m]
                vals.append(np.take_along_axis(targ[:, :k], order, axis=1).min(axis=1).mean())
            v = float(np.mean(vals))
            if v < best[0]:
                best = (v, k, m)
        row["promote"], row["k"], row["m"] = best if math.isfinite(best[0]) else (row["random"], 0, m_max)
        if row["m"] == 1 and 3 * row["k"] <= kmax:
            k3 = 3 * row["k"]
            row["pooled"] = float(np.mean([np.take_along_axis(targ[:, :k3], np.argmin(cheap[:, :k3], axis=1)[:, None],
                                                              axis=1).mean() for cheap, targ in regrets]))
        out.append(row)
    return out


def corner_floor(fam: mff.MFFamily) -> dict[str, Any]:
    """The best corner of the unit box per task and its regret: the shifted instances mirror the box
    (``mirror(u + d)``), so where the function's optimum lies on the boundary, a shift d > 0 moves
    it to the fold ``u = 1 - d`` inside the box (a kink; the corner, where the function rises
    towards it, is no local optimum, but the runs of borehole and park stop there)."""
    d = fam.dim
    C = np.array([[(k >> j) & 1 for j in range(d)] for k in range(2 ** d)], dtype=float)
    per = []
    for i in range(len(fam.tasks)):
        v = fam.objective.value(i, C, mff.TARGET)
        per.append(fam.normalised_regret(i, float(v.min())))
    return {"per_task": per, "mean": float(np.mean(per))}


def verdict_of(k: int, half: float | None, row: dict[str, Any], orc: dict[str, float],
               corner: dict[str, Any] | None) -> tuple[str, bool]:
    """(verdict, whether half of gptask_sf lies below the reference) at checkpoint index k."""
    if half is None:
        return "-", False
    if k == 0:
        if half < min(orc.values()):
            return "unreachable: below the oracle's one target run", True
        if half < row.get("pooled", row["promote"]):
            return ("only a pick better than the best of the pooled cheap runs (a model's) reaches it; "
                    "above the oracle"), True
        if half < row["promote"]:
            return "needs more than the task's own cheap runs (pooled promotion reaches it)", True
        return "model-free promotion reaches it", False
    if corner is not None and half < corner["mean"]:
        return "below the box corner the runs stop at: only runs placing the kink optima reach it", True
    if half < row["promote"]:
        return "below model-free promotion: needs a model's gain", True
    return "model-free promotion reaches it", False


def measured(paths: list[str]) -> dict[tuple[str, str], dict[str, Any]]:
    """(family, method) -> mean, worst seed and per-seed regrets per checkpoint of stored rows (the
    first file's row where a (family, method, seed) is in several), per-task finals too."""
    rows, seen = [], set()
    for p in paths:
        for r in load_rows(p)["rows"]:
            key = (r["family"], r["method"], r["seed"], r["budget"])
            if key not in seen:
                seen.add(key)
                rows.append(r)
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for r in rows:
        cell = out.setdefault((r["family"], r["method"]), {"curves": [], "final_per_task": []})
        cell["curves"].append(r["regret"])
        if r["family"] in mff.NAMES:
            fam = mff.family(r["family"])
            best = np.full(len(fam.tasks), np.inf)
            for i, s, _, y in r["evals"]:
                if s >= mff.TARGET - 1e-12:
                    best[i] = min(best[i], y)
            cell["final_per_task"].append([fam.normalised_regret(i, b) if np.isfinite(b) else 1.0
                                           for i, b in enumerate(best)])
    for cell in out.values():
        a = np.array(cell["curves"])
        cell["mean"], cell["worst"], cell["seeds"] = a.mean(0).tolist(), a.max(0).tolist(), len(a)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--families", default=",".join(FAMILIES))
    ap.add_argument("--budget", type=float, default=mfb.DEFAULT_BUDGET, help="cost budget per task (seconds)")
    ap.add_argument("--draws", type=int, default=DRAWS)
    ap.add_argument("--runs", nargs="*", default=[], help="stored rows of bench/multifidelity.py")
    ap.add_argument("--json")
    ap.add_argument("--md")
    args = ap.parse_args(argv)
    if args.draws < 10 or args.budget <= 0:
        print(f"fidelity_bounds: --draws must be >= 10 and --budget > 0, got {args.draws} and {args.budget}",
              file=sys.stderr)
        return 2
    fams = [f.strip() for f in args.families.split(",") if f.strip()]
    unknown = [f for f in fams if f not in mff.NAMES]
    if unknown:
        print(f"fidelity_bounds: unknown family {unknown[0]!r}; known: {', '.join(mff.NAMES)}", file=sys.stderr)
        return 2
    costs = [cp * args.budget for cp in mfb.CHECKPOINTS]
    meas = measured(args.runs)
    doc: dict[str, Any] = {"budget": args.budget, "draws": args.draws, "checkpoints": list(mfb.CHECKPOINTS),
                           "families": {}}
    lines = ["| family | checkpoint | gptask_sf | half of it | gptask_mf | random | promote (k, m) | pooled (3k) | "
             "oracle | half below | verdict |", "|" + " --- |" * 11]
    for name in fams:
        fam = mff.family(name)
        table = promote_table(fam, costs, args.draws)
        orc = oracle(fam, costs[0])
        corner = corner_floor(fam)
        doc["families"][name] = {"rows": table, "oracle_10": orc, "corner": corner}
        sf = meas.get((mfb.SAME_TARGET.get(name, name), "gptask_sf"))
        mf = meas.get((name, "gptask_mf"))
        for k, (cp, row) in enumerate(zip(mfb.CHECKPOINTS, table)):
            half = 0.5 * sf["mean"][k] if sf else None
            bound = [f"{v:.3f} ({key})" for key, v in orc.items()] if k == 0 else []
            if k == len(table) - 1 and name in ("borehole", "park"):
                bound.append(f"corner {corner['mean']:.3f}")
            verdict, below = verdict_of(k, half, row, orc, corner if k == len(table) - 1 and name in ("borehole", "park")
                                        else None)
            lines.append(f"| {name} | {int(cp * 100)} % | {sf['mean'][k]:.3f} | {half:.3f} | "
                         f"{mf['mean'][k]:.3f} | " if sf and mf else f"| {name} | {int(cp * 100)} % | - | - | - | ")
            pooled = f"{row['pooled']:.3f}" if k == 0 and "pooled" in row else "-"
            lines[-1] += (f"{row['random']:.3f} | {row['promote']:.3f} ({row['k']}, {row['m']}) | {pooled} | "
                          f"{', '.join(bound) or '-'} | {'yes' if below else 'no'} | {verdict} |")
        if (name, "gptask_mf") in meas and meas[(name, "gptask_mf")]["final_per_task"]:
            doc["families"][name]["gptask_mf_final_per_task"] = np.mean(
                meas[(name, "gptask_mf")]["final_per_task"], axis=0).tolist()
    text = "\n".join(lines) + "\n"
    print(text)
    lines = ["", "Best box corner's regret per task (where the runs of borehole and park stop; the optimum is on the "
             "mirror's fold inside the box), and the lowest "
             "final regret per task of any stored row (any method, any seed):", ""]
    for name in fams:
        c = doc["families"][name]["corner"]
        finals = [f for (fam_name, _), cell in meas.items() if fam_name == name for f in cell["final_per_task"]]
        low = np.min(finals, axis=0).tolist() if finals else None
        doc["families"][name]["lowest_final_per_task"] = low
        lines.append(f"- {name}: corner {' '.join(f'{v:.4f}' for v in c['per_task'])} (mean {c['mean']:.4f})"
                     + (f"; lowest stored final {' '.join(f'{v:.4f}' for v in low)} over {len(finals)} rows" if low else ""))
    text += "\n".join(lines) + "\n"
    print("\n".join(lines))
    if args.json:
        Path(args.json).write_text(json.dumps(doc, indent=1))
    if args.md:
        import time

        from machine import describe_machine

        head = ["# What fidelity could reach: bounds per checkpoint (issue 44)", "",
                f"Machine: {describe_machine()}; date {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}.", "",
                "Command:", "", "    python bench/fidelity_bounds.py " + " ".join(sys.argv[1:] if argv is None else argv), "",
                f"Per task budget {args.budget:g} s (target run 1 s), {args.draws} Monte Carlo draws per task; "
                "regrets are means over the family's tasks (gptask_sf, gptask_mf: measured means over 10 seeds). "
                "Columns: see the docstring of bench/fidelity_bounds.py.", ""]
        Path(args.md).write_text("\n".join(head) + "\n" + text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
