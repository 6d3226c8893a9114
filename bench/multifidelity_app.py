"""Fidelity on a real application (issue 44): ScaLAPACK PDGEQRF, cheap runs on smaller matrices.

gptask with fidelity (``apps.scalapack_qr.problem(size_fractions=...)``: runs at a fraction of the
matrix size, tuned with ``gt.tune(..., cost_budget=)``) against gptask without fidelity (the classic
problem, the same ``cost_budget``), on one task, the same finite list of candidate configurations
(block sizes powers of two ``--blocks``, every feasible grid and thread count) for both. The cost of
a run is its measured wall time (launch included), the objective the driver's factorisation time.

Regret is exact: every candidate's time at the target size was measured once (phase ``truth``,
``--truth-repeats`` factorisations per launch, the driver's minimum; cached in
``bench/data/fidelity_app_truth.json``). At each checkpoint (10/25/50/100 % of the budget, of the
summed cost of the runs finished so far) the incumbent is the target-size run with the smallest
measured time; its regret is ``truth[incumbent] / min(truth) - 1``.

Phases (each resumable: results are appended per seed)::

    nice -n 5 .venv/bin/python bench/multifidelity_app.py truth
    nice -n 5 .venv/bin/python bench/multifidelity_app.py recheck --top 6
    nice -n 5 .venv/bin/python bench/multifidelity_app.py tune --seeds 0 1 2 3 4
    .venv/bin/python bench/multifidelity_app.py report

``--methods`` (tune, report; default fidelity,single) picks the methods, ``--out`` the records file
(default bench/results/fidelity_app.json). ``fidelity_own03`` is ``fidelity`` with
``gptask.tuning.fidelity.CHEAP_SEARCH_SHARE = 0.3`` for its runs (the cheap level searches on its own
between the target's searches)::

    nice -n 5 .venv/bin/python bench/multifidelity_app.py tune --methods fidelity,fidelity_own03 \
        --seeds 0 1 2 3 4 --out bench/results/fidelity_app_cheap_search.json
    .venv/bin/python bench/multifidelity_app.py report --methods fidelity_own03,fidelity \
        --out bench/results/fidelity_app_cheap_search.json

report compares every method with the last of ``--methods`` (paired by seed: regret difference per
checkpoint, median and worst seed; the cost to reach its final regret).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import logging
import math
import os
import platform
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import gptask as gt  # noqa: E402
import gptask.tuning.fidelity as fm  # noqa: E402
from apps.scalapack_qr import problem as qr_problem  # noqa: E402
from apps.scalapack_qr.grid import configurations  # noqa: E402
from module_constants import constants_set  # noqa: E402

TRUTH = ROOT / "bench" / "data" / "fidelity_app_truth.json"
RUNS = ROOT / "bench" / "results" / "fidelity_app.json"
REPORT = ROOT / "bench" / "results" / "fidelity_app.md"
TASK = {"m": 1000, "n": 1000}
BLOCKS = (8, 16, 32, 64, 128, 256)
FRACTIONS = (0.25,)
CHECKPOINTS = (0.10, 0.25, 0.50, 1.00)
METHODS = ("fidelity", "single")
#: methods that are another method with module constants of gptask.tuning.fidelity set for their runs
VARIANTS = {"fidelity_own03": ("fidelity", {"CHEAP_SEARCH_SHARE": 0.3}),
            # the guard before its hysteresis: bought again after one judgement at or above RHO_MIN
            "fidelity_rebuy1": ("fidelity", {"RHO_REBUY": 0.3, "REBUY_CONFIRM": 1}),
            # the levels of the task as one more kernel input of its coregionalisation (session 38; the
            # default since session 39, so "fidelity"), and each (task, level) a task of the LCM (the rule before)
            "fidelity_input": ("fidelity", {"LEVEL_MODEL": "input"}),
            "fidelity_tasks": ("fidelity", {"LEVEL_MODEL": "tasks"})}


def key(c: dict) -> str:
    return f"mb={c['mb']} nb={c['nb']} nproc={c['nproc']} p={c['p']} nth={c['nth']}"


def candidates(pr: gt.Problem) -> list[dict]:
    return configurations(pr, TASK, blocks=BLOCKS)


def with_candidates(pr: gt.Problem, cands: list[dict]) -> gt.Problem:
    """``pr`` restricted to ``cands`` (the same objective, constraints, default and fidelity)."""
    return gt.Problem(pr.task_space, pr.param_space, pr.objective, constraints=pr.constraints,
                      constants=pr.constants, name=pr.name, default=pr.default, unit=pr.unit,
                      fidelity=pr.fidelity, target_fidelity=pr.target_fidelity, candidates=cands)


def machine() -> dict:
    try:
        load = open("/proc/loadavg").read().split()[:3]
    except OSError:
        load = []
    return {"platform": platform.platform(), "cores": os.cpu_count(),
            "loadavg": load, "date_utc": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}


def phase_truth(args) -> None:
    pr = qr_problem(repeats=args.truth_repeats, timeout=120.0, check=False)  # tuning runs check; truth is time
    cands = candidates(pr)
    data = json.loads(TRUTH.read_text()) if TRUTH.exists() else {
        "task": TASK, "blocks": list(BLOCKS), "repeats": args.truth_repeats, "machine": machine(), "times": {}}
    todo = [c for c in cands if key(c) not in data["times"]]
    random.Random(0).shuffle(todo)  # slow drifts of the load hit no region of the space alone
    logging.info("truth: %d candidates, %d to measure", len(cands), len(todo))
    for k, c in enumerate(todo):
        try:
            data["times"][key(c)] = float(pr.objective(TASK, c))
        except Exception as exc:  # noqa: BLE001 - a failed candidate is recorded, the sweep goes on
            logging.warning("truth: %s failed: %s", key(c), exc)
            data["times"][key(c)] = None
        if k % 10 == 9 or k == len(todo) - 1:
            TRUTH.parent.mkdir(parents=True, exist_ok=True)
            TRUTH.write_text(json.dumps(data, indent=1, sort_keys=True))
            logging.info("truth: %d/%d", k + 1, len(todo))


def phase_recheck(args) -> None:
    """Measure the ``--top`` best candidates of the truth and as many random others once more, as
    the truth was measured: how much of the regret is the machine's noise (stored under "recheck")."""
    pr = qr_problem(repeats=args.truth_repeats, timeout=120.0, check=False)
    data = json.loads(TRUTH.read_text())
    by = {key(c): c for c in candidates(pr)}
    ranked = sorted((k for k, v in data["times"].items() if v is not None), key=data["times"].get)
    rest = ranked[args.top:]
    pick = ranked[: args.top] + random.Random(1).sample(rest, min(args.top, len(rest)))
    data["recheck"] = {}
    for k in pick:
        try:
            data["recheck"][k] = float(pr.objective(TASK, by[k]))
        except Exception as exc:  # noqa: BLE001 - recorded, the recheck goes on
            logging.warning("recheck: %s failed: %s", k, exc)
            data["recheck"][k] = None
    TRUTH.write_text(json.dumps(data, indent=1, sort_keys=True))
    for k in pick:
        logging.info("recheck %-40s truth %.3f again %s", k, data["times"][k], data["recheck"][k])


class GuardCount(logging.Handler):
    """Counts the guard's log lines of one tuning: levels dropped, levels bought again."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.counts = {"dropped": 0, "bought_again": 0}

    def emit(self, record: logging.LogRecord) -> None:
        msg = record.getMessage()
        if "is not bought again" in msg:
            self.counts["dropped"] += 1
        elif "is bought again" in msg:
            self.counts["bought_again"] += 1


def run_one(method: str, seed: int, budget: float, n_initial: int) -> dict:
    base, consts = VARIANTS.get(method, (method, {}))
    fractions = FRACTIONS if base == "fidelity" else None
    pr = qr_problem(size_fractions=fractions)
    pr = with_candidates(pr, candidates(qr_problem()))
    t0 = time.process_time()
    guard = GuardCount()
    logging.getLogger(fm.__name__).addHandler(guard)
    try:
        with constants_set(fm, consts):
            r = gt.tune(pr, [TASK], cost_budget=budget, n_initial=n_initial, seed=seed)
    finally:
        logging.getLogger(fm.__name__).removeHandler(guard)
    runs = []
    for t in sorted(r.history, key=lambda t: t.id):
        runs.append({"params": {k: t.params[k] for k in ("mb", "nb", "nproc", "p", "nth")},
                     "size_fraction": t.task.get("size_fraction", 1.0), "value": t.value,
                     "status": t.status.value if hasattr(t.status, "value") else str(t.status),
                     "cost": t.extra.get("cost", t.duration), "wall": t.duration})
    return {"method": method, "seed": seed, "budget": budget, "n_initial": n_initial, "runs": runs,
            "cost_spent": r.cost_spent, "tuner_cpu_s": time.process_time() - t0,
            "dropped": (r.fidelity or {}).get("dropped") if getattr(r, "fidelity", None) else None,
            "guard": guard.counts}


def regrets(record: dict, truth: dict, budget: float) -> list[float | None]:
    """Regret (fraction above the best candidate's truth) of the target-size incumbent at each
    checkpoint of the budget; None where no target-size run had finished."""
    best = min(v for v in truth.values() if v is not None)
    out, spent, inc, k = [], 0.0, None, 0
    marks = [c * budget for c in CHECKPOINTS]
    for run in record["runs"]:
        spent += run["cost"] or 0.0
        while k < len(marks) and spent > marks[k] + 1e-9:
            out.append(inc)
            k += 1
        if run["size_fraction"] == 1.0 and isinstance(run["value"], (int, float)) and math.isfinite(run["value"]):
            if inc is None or run["value"] < inc[0]:
                inc = (run["value"], key(run["params"]))
    while len(out) < len(marks):
        out.append(inc)
    return [None if i is None else truth[i[1]] / best - 1.0 for i in out]


def trace(record: dict, truth: dict) -> list[tuple[float, float | None]]:
    """``(summed cost, regret of the target-size incumbent)`` after each run, in order."""
    best = min(v for v in truth.values() if v is not None)
    out, spent, inc = [], 0.0, None
    for run in record["runs"]:
        spent += run["cost"] or 0.0
        if run["size_fraction"] == 1.0 and isinstance(run["value"], (int, float)) and math.isfinite(run["value"]):
            if inc is None or run["value"] < inc[0]:
                inc = (run["value"], key(run["params"]))
        out.append((spent, None if inc is None else truth[inc[1]] / best - 1.0))
    return out


def cost_to_reach(record: dict, truth: dict, regret: float | None) -> float | None:
    """The summed cost at which ``record``'s incumbent first has at most ``regret`` (None: never)."""
    if regret is None:
        return None
    return next((c for c, r in trace(record, truth) if r is not None and r <= regret + 1e-12), None)


def phase_tune(args) -> None:
    done = json.loads(args.out.read_text()) if args.out.exists() else {"machine": machine(), "records": []}
    have = {(r["method"], r["seed"]) for r in done["records"]}
    for seed in args.seeds:
        for method in args.methods if seed % 2 == 0 else args.methods[::-1]:  # alternate the order
            if (method, seed) in have:
                continue
            rec = run_one(method, seed, args.budget, args.n_initial)
            done["records"].append(rec)
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps(done, indent=1))
            logging.info("%s seed %d: %d runs, cost %.1f s", method, seed, len(rec["runs"]), rec["cost_spent"])


def fmt(v: float | None) -> str:
    return "none" if v is None else f"{100 * v:.1f} %"


def median_worst(vals: list[float | None]) -> tuple[float, float]:
    """The median and the largest of ``vals`` (None counts as infinite; inf where empty)."""
    finite = sorted(v if v is not None else math.inf for v in vals)
    return (finite[len(finite) // 2], finite[-1]) if finite else (math.inf, math.inf)


def fmt_inf(v: float) -> str:
    return fmt(None if math.isinf(v) else v)


def phase_report(args) -> None:
    truth = json.loads(TRUTH.read_text())["times"]
    done = json.loads(args.out.read_text())
    recs = done["records"]
    methods, ref = args.methods, args.methods[-1]
    seeds = sorted({r["seed"] for r in recs if all((m, r["seed"]) in {(x["method"], x["seed"]) for x in recs}
                                                   for m in methods)})
    table = {m: {s: regrets(next(r for r in recs if r["method"] == m and r["seed"] == s), truth,
                            next(r for r in recs if r["method"] == m and r["seed"] == s)["budget"])
                 for s in seeds} for m in methods}
    lines = ["| method | checkpoint | " + " | ".join(f"seed {s}" for s in seeds) + " | median | worst |",
             "|---|---|" + "---|" * (len(seeds) + 2)]
    summary = {}
    for m in methods:
        for j, c in enumerate(CHECKPOINTS):
            vals = [table[m][s][j] for s in seeds]
            med, worst = median_worst(vals)
            summary.setdefault(m, []).append({"checkpoint": c, "median": med, "worst": worst, "per_seed": vals})
            lines.append(f"| {m} | {int(100 * c)} % | " + " | ".join(fmt(v) for v in vals)
                         + f" | {fmt_inf(med)} | {fmt_inf(worst)} |")
    diffs = ["| method - " + ref + " | checkpoint | " + " | ".join(f"seed {s}" for s in seeds)
             + " | median | worst |", "|---|---|" + "---|" * (len(seeds) + 2)]
    for m in methods[:-1]:  # paired by seed, in points of regret: negative is m better
        for j, c in enumerate(CHECKPOINTS):
            vals = [None if table[m][s][j] is None or table[ref][s][j] is None
                    else table[m][s][j] - table[ref][s][j] for s in seeds]
            med, worst = median_worst([v for v in vals if v is not None])
            diffs.append(f"| {m} | {int(100 * c)} % | " + " | ".join("n/a" if v is None else f"{100 * v:+.1f}"
                                                                     for v in vals)
                         + " | " + " | ".join("n/a" if math.isinf(v) else f"{100 * v:+.1f}" for v in (med, worst))
                         + " |")
    counts = []
    for m in methods:
        for s in seeds:
            r = next(r for r in recs if r["method"] == m and r["seed"] == s)
            tgt = [x for x in r["runs"] if x["size_fraction"] == 1.0]
            low = [x for x in r["runs"] if x["size_fraction"] != 1.0]
            mean = lambda xs: sum(x["cost"] for x in xs) / len(xs) if xs else float("nan")  # noqa: E731
            total = sum(x["cost"] or 0.0 for x in r["runs"])
            share = sum(x["cost"] or 0.0 for x in low) / total if total else float("nan")
            other = next(x for x in recs if x["method"] == ref and x["seed"] == s)
            reach = cost_to_reach(r, truth, table[ref][s][-1])
            reach_txt = "never" if reach is None else f"{reach:.0f} s ({reach / other['budget']:.2f})"
            counts.append(f"| {m} | {s} | {len(tgt)} | {len(low)} | {mean(tgt):.2f} | {mean(low):.2f} | "
                          f"{100 * share:.0f} % | {r['cost_spent']:.1f} | {reach_txt} | {r['tuner_cpu_s']:.0f} |")
    print("\n".join(lines))
    print()
    print("Paired by seed, regret of the method minus that of " + ref + " (points; negative: the method better):")
    print()
    print("\n".join(diffs))
    print()
    print("| method | seed | target runs | low-fidelity runs | mean target cost (s) | mean low cost (s) | "
          f"low-fidelity share of cost | cost spent (s) | cost to reach {ref}'s final regret (fraction of budget) "
          "| tuner CPU (s) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    print("\n".join(counts))
    (args.out.with_name(args.out.stem + "_summary.json")).write_text(json.dumps(
        {"seeds": seeds, "summary": summary, "truth_best": min(v for v in truth.values() if v)}, indent=1,
        default=lambda x: None))


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    logging.getLogger("gptask").setLevel(logging.WARNING)
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="phase", required=True)
    t = sub.add_parser("truth")
    t.add_argument("--truth-repeats", type=int, default=2)
    c = sub.add_parser("recheck")
    c.add_argument("--truth-repeats", type=int, default=2)
    c.add_argument("--top", type=int, default=6)
    u = sub.add_parser("tune")
    u.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    u.add_argument("--budget", type=float, default=150.0, help="cost budget, seconds of summed wall time")
    u.add_argument("--n-initial", type=int, default=4)
    r = sub.add_parser("report")
    for q in (u, r):
        q.add_argument("--methods", type=lambda v: tuple(v.split(",")), default=METHODS,
                       help="comma-separated, of " + ", ".join((*METHODS, *VARIANTS)) + "; report compares with the last")
        q.add_argument("--out", type=Path, default=RUNS, help="the records file")
    args = ap.parse_args()
    {"truth": phase_truth, "recheck": phase_recheck, "tune": phase_tune, "report": phase_report}[args.phase](args)


if __name__ == "__main__":
    main()
