"""ScaLAPACK PDGEQRF benchmark (issue 5): the GPTune paper's Fig. 1 and Table 3 / Fig. 2 on this machine.

Methods, each with exactly ``--budget`` evaluations per task:

* ``MLA``: :class:`gptask.Tuner` over all tasks of the set jointly (``--n-initial`` LHS points
  per task, then one EI/PSO proposal per task per iteration);
* ``gp_minimize`` (scikit-optimize, set up as ``gp_minimize`` sets it up), ``random`` (uniform in
  gptask's encoding: log-uniform block sizes), ``OpenTuner`` (its ask/tell ``TuningRunManager``,
  default technique) and ``HpBandSter`` (BOHB at one budget, see ``bench/peer_tuners.py``), one
  tuner per task.

Constraints: MLA proposes feasible points only. The peers search the box and every proposal that
violates a constraint is mapped to a feasible one by ``apps.scalapack_qr.problem.repair`` (the
same rule for every peer); the peer is told the value of the configuration actually run. A failed
run (timeout, crash, bad residual) counts against the budget; MLA records it as failed (its model
sees the task's worst value), the peers are told the worst value they have seen on that task
(the timeout if none yet).

Interleaving: evaluation r of every method on task i runs in round r, methods in an order
rotated by (r + i), so slow drifts of the machine's load hit every method alike. CONFIRMATION:
each method's best configuration per task (and, on grid tasks, the grid optimum and TLA1/TLA2's
choices) is re-measured ``--confirm`` times round robin; the confirmed time is the MEDIAN of those
launches (each launch: the min of ``--repeats`` back-to-back factorisations, as during tuning).

Phases (separate invocations, so each holds the machine lock briefly; state in ``--state-dir``):

* ``compare``: ``--tasks`` LHS tasks (the main job's tasks for the same seed and m_max), all
  methods, then confirmation; saves the MLA model for phase ``small``.
* ``small``: the tasks of the ground-truth grids (``--grids`` CSVs of ``python -m apps.scalapack_qr
  grid``), all methods (MLA jointly on these tasks, cold), then TLA1 (``gt.predict_optimum`` from
  the ``compare`` model, 0 runs) and TLA2 (``gt.tune_new_task``, ``--budget`` runs), then
  confirmation including the grid optimum.
* ``reconfirm --of compare|small --confirm K``: re-measure the configurations an earlier phase
  confirmed, K launches each; the new medians replace the old (kept and reported as "earlier").
* ``report``: the markdown tables (``--out``); ``bench/results_scalapack_qr.md`` embeds them
  between hand-written sections (setup, reading, grids, cost model).

Exact commands (from the repository root, after ``bash bench/peers_setup.sh``)::

    flock /work/wt/machine.lock nice -n 5 .bench-venv/bin/python bench/scalapack_qr.py compare --tasks 8 --budget 20
    flock /work/wt/machine.lock nice -n 5 .bench-venv/bin/python bench/scalapack_qr.py small --budget 20
    flock /work/wt/machine.lock nice -n 5 .bench-venv/bin/python bench/scalapack_qr.py reconfirm --of small --confirm 15
    flock /work/wt/machine.lock nice -n 5 .bench-venv/bin/python bench/scalapack_qr.py reconfirm --of compare --confirm 10
    .bench-venv/bin/python bench/scalapack_qr.py report

``--backend model`` runs everything on the fitted analytic cost MODEL instead (no ScaLAPACK run;
every table is then labelled MODEL).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import logging
import math
import os
import shlex
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import gptask as gt  # noqa: E402
from gptask.tuning.mla import Tuner, resolve_tasks  # noqa: E402
from gptask.space.sampling import point_key  # noqa: E402

from apps.scalapack_qr.grid import read_csv  # noqa: E402
from apps.scalapack_qr.problem import problem as qr_problem  # noqa: E402
from apps.scalapack_qr.problem import repair  # noqa: E402
from machine import describe_machine  # noqa: E402

METHODS = ("MLA", "gp_minimize", "random", "OpenTuner", "HpBandSter")
PEERS = ("OpenTuner", "HpBandSter", "gp_minimize", "random")
KEYS = ("mb", "nb", "nproc", "p", "nth")
DEFAULT_GRIDS = ",".join(str(p.relative_to(ROOT)) for p in sorted((ROOT / "apps/scalapack_qr/data").glob("grid_m*_n*.csv")))


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _p(params: dict) -> dict:
    return {k: int(params[k]) for k in KEYS}


# ---- measuring ----------------------------------------------------------------------------------
class Measure:
    """One launch of the application (or one MODEL evaluation); never raises.

    Returns ``{"value": seconds or None, "status", "reason", "wall_s": wall time of the launch
    (mpiexec start-up, repeats, residual check), "pdgeqrf_s": sum of the timed factorisations}``.
    """

    def __init__(self, pb: gt.Problem, backend: str, repeats: int) -> None:
        self.pb, self.backend, self.repeats = pb, backend, repeats
        self.count = 0

    def __call__(self, task: dict, params: dict) -> dict[str, Any]:
        self.count += 1
        t0 = time.perf_counter()
        try:
            if self.backend == "real":
                rec = self.pb.objective.run(task, params)
                value = float(rec["time"])
                pdgeqrf = float(sum(rec.get("times") or [value]))
            else:
                value = float(self.pb.objective(task, params))
                pdgeqrf = value * self.repeats
            out = {"value": value, "status": "complete", "reason": "", "pdgeqrf_s": pdgeqrf}
        except Exception as exc:  # noqa: BLE001 - a failed run is data
            out = {"value": None, "status": "failed", "reason": f"{type(exc).__name__}: {exc}"[:300],
                   "pdgeqrf_s": 0.0}
        out["wall_s"] = time.perf_counter() - t0
        return out


# ---- tuning, interleaved -------------------------------------------------------------------------
def _rotate(seq: list, k: int) -> list:
    k %= len(seq)
    return seq[k:] + seq[:k]


def run_methods(pb: gt.Problem, tasks: list[dict], methods: list[str], budget: int, n_initial: int, seed: int,
                measure: Measure, timeout: float, workdir: str) -> tuple[dict, Any]:
    """Every method, ``budget`` evaluations per task, interleaved; returns (runs, MLA TuningResult)."""
    from peer_tuners import PEERS as PEER_CLASSES

    T = len(tasks)
    runs: dict[str, Any] = {m: {"evals": [[] for _ in range(T)], "overhead_s": [0.0] * T} for m in methods}
    tuner = Tuner(pb, tasks, budget, n_initial, seed) if "MLA" in methods else None
    queue: dict[int, list] = {i: [] for i in range(T)}
    peers: dict[tuple[str, int], Any] = {}
    for mi, m in enumerate(methods):
        if m == "MLA":
            continue
        for i in range(T):
            s = seed * 10_000 + mi * 100 + i
            kwargs = {"workdir": workdir} if m == "OpenTuner" else {}
            peers[m, i] = PEER_CLASSES[m](pb.param_space, seed=s, n_initial=n_initial, **kwargs)
    worst: dict[tuple[str, int], float] = {}
    fallback = np.random.default_rng([seed, 99])
    for r in range(budget):
        if tuner is not None and not any(queue.values()):
            t0 = time.perf_counter()
            props = tuner.ask()
            dt = time.perf_counter() - t0
            for p in props:
                queue[p.task_index].append(p)
            for i in {p.task_index for p in props}:  # the fit is shared: split its time over the tasks asked
                runs["MLA"]["overhead_s"][i] += dt / len({p.task_index for p in props})
        for i, task in enumerate(tasks):
            for m in _rotate(list(methods), r + i):
                if m == "MLA":
                    if not queue[i]:
                        continue
                    p = queue[i].pop(0)
                    out = measure(task, p.params)
                    t0 = time.perf_counter()
                    tuner.tell(p, out["value"], reason=out["reason"])
                    runs[m]["overhead_s"][i] += time.perf_counter() - t0
                    runs[m]["evals"][i].append({"params": _p(p.params), "proposed": None, "source": p.source, **out})
                    continue
                peer = peers[m, i]
                t0 = time.perf_counter()
                try:
                    proposed = _p(peer.ask())
                except RuntimeError as exc:  # OpenTuner found nothing new to try: a uniform point instead
                    print(f"  {m} task {i}: {exc}; uniform random proposal instead", file=sys.stderr)
                    proposed = _p(pb.param_space.decode(fallback.random((1, pb.param_space.n_columns)))[0])
                    runs[m].setdefault("fallbacks", 0)
                    runs[m]["fallbacks"] += 1
                runs[m]["overhead_s"][i] += time.perf_counter() - t0
                params = repair(pb, task, proposed)
                out = measure(task, params)
                if out["value"] is not None:
                    worst[m, i] = max(worst.get((m, i), 0.0), out["value"])
                told = out["value"] if out["value"] is not None else worst.get((m, i), timeout)
                t0 = time.perf_counter()
                peer.tell(proposed, told)
                runs[m]["overhead_s"][i] += time.perf_counter() - t0
                runs[m]["evals"][i].append({"params": params, "proposed": proposed if proposed != params else None,
                                            **out})
        done = {m: sum(len(e) for e in runs[m]["evals"]) for m in methods}
        print(f"  round {r + 1}/{budget} done {_now()} load {_load()} evaluations {done}", file=sys.stderr, flush=True)
    for peer in peers.values():
        if hasattr(peer, "close"):
            peer.close()
    result = tuner.result() if tuner is not None else None
    return runs, result


def best_of(evals: list[dict]) -> tuple[dict | None, float]:
    ok = [e for e in evals if e["status"] == "complete"]
    if not ok:
        return None, math.inf
    b = min(ok, key=lambda e: e["value"])
    return b["params"], b["value"]


def confirm(tasks: list[dict], candidates: list[dict[str, dict]], k: int, measure: Measure) -> list[dict]:
    """Re-measure each distinct candidate configuration of each task ``k`` times, round robin.

    candidates[i]: label -> params. Returns per task {"configs": [{params, labels, values}],
    "confirmed": {label: median seconds (inf if any launch failed)}}.
    """
    out = []
    for i, cands in enumerate(candidates):
        uniq: dict[str, dict] = {}
        for label, params in cands.items():
            if params is None:
                continue
            key = point_key(params)
            uniq.setdefault(key, {"params": params, "labels": [], "values": []})["labels"].append(label)
        out.append({"configs": list(uniq.values())})
    for r in range(k):
        for i, task in enumerate(tasks):
            for c in _rotate(out[i]["configs"], r + i):
                res = measure(task, c["params"])
                c["values"].append(res["value"])
                c.setdefault("wall_s", 0.0)
                c["wall_s"] += res["wall_s"]
        print(f"  confirmation round {r + 1}/{k} done {_now()} load {_load()}", file=sys.stderr, flush=True)
    for o in out:
        o["confirmed"] = {}
        for c in o["configs"]:
            v = math.inf if any(x is None for x in c["values"]) else statistics.median(c["values"])
            for label in c["labels"]:
                o["confirmed"][label] = v
    return out


# ---- phases ---------------------------------------------------------------------------------------
def _problem(args) -> gt.Problem:
    return qr_problem(m_max=args.m_max, backend=args.backend, repeats=args.repeats, timeout=args.timeout)


def _meta(args, argv) -> dict:
    return {"command": " ".join([".bench-venv/bin/python bench/scalapack_qr.py", *map(shlex.quote, argv)]),
            "started": _now(), "load_start": _load(), "machine": describe_machine(), "backend": args.backend,
            "budget": args.budget, "n_initial": args.n_initial, "repeats": args.repeats, "timeout": args.timeout,
            "confirm": args.confirm, "seed": args.seed, "m_max": args.m_max, "methods": args.methods}


def _finish(meta: dict, t_start: float, measure: Measure) -> None:
    meta["finished"] = _now()
    meta["load_end"] = _load()
    meta["wall_s"] = time.perf_counter() - t_start
    meta["launches"] = measure.count


def phase_compare(args, argv) -> dict:
    pb = _problem(args)
    tasks = resolve_tasks(pb, args.tasks, args.seed)
    meta = _meta(args, argv)
    t_start = time.perf_counter()
    measure = Measure(pb, args.backend, args.repeats)
    print(f"compare: {len(tasks)} tasks {tasks}", file=sys.stderr)
    runs, result = run_methods(pb, tasks, args.methods, args.budget, args.n_initial, args.seed, measure,
                               args.timeout, str(args.state_dir))
    meta["tuning_finished"] = _now()
    meta["load_after_tuning"] = _load()
    if result is not None:
        result.save_model(args.state_dir / f"mla_model_{args.backend}.json", accuracy=False)
    cands = [{m: best_of(runs[m]["evals"][i])[0] for m in args.methods} for i in range(len(tasks))]
    conf = confirm(tasks, cands, args.confirm, measure)
    _finish(meta, t_start, measure)
    return {"phase": "compare", "meta": meta, "tasks": tasks, "runs": runs, "confirmation": conf}


def _grid_truth(paths: list[str]) -> list[dict]:
    out = []
    for path in paths:
        rows = read_csv(ROOT / path if not os.path.isabs(path) else path)
        ok = [r for r in rows if r["status"] == "complete" and r["time"]]
        best = min(ok, key=lambda r: r["time"])
        head = [ln.strip() for ln in open(ROOT / path if not os.path.isabs(path) else path) if ln.startswith("#")]
        out.append({"file": path, "task": {"m": best["m"], "n": best["n"]}, "best_params": _p(best),
                    "best_time": best["time"], "runs": len(rows), "complete": len(ok),
                    "second_time": sorted(r["time"] for r in ok)[1] if len(ok) > 1 else None,
                    "header": head})
    return out


def phase_small(args, argv) -> dict:
    pb = _problem(args)
    grids = _grid_truth([g for g in args.grids.split(",") if g])
    tasks = [g["task"] for g in grids]
    meta = _meta(args, argv)
    meta["grids"] = args.grids
    t_start = time.perf_counter()
    measure = Measure(pb, args.backend, args.repeats)
    print(f"small: {len(tasks)} grid tasks {tasks}", file=sys.stderr)
    runs, _ = run_methods(pb, tasks, args.methods, args.budget, args.n_initial, args.seed + 1, measure,
                          args.timeout, str(args.state_dir))
    # transfer from the compare phase's MLA model
    model_path = args.state_dir / f"mla_model_{args.backend}.json"
    tla: list[dict] = []
    if model_path.exists():
        model = gt.load_model(model_path, problem=pb)
        for i, task in enumerate(tasks):
            t0 = time.perf_counter()
            pred = gt.predict_optimum(model, task)
            t_pred = time.perf_counter() - t0
            t0 = time.perf_counter()
            new = gt.tune_new_task(model, task, budget=args.budget, seed=args.seed + i)
            t_tla2 = time.perf_counter() - t0
            recs = [r for r in new.history if r["task_index"] == len(model.tasks)]
            evals = [{"params": _p(r["params"]), "value": r["value"], "status": r["status"], "reason": r["reason"],
                      "wall_s": r["duration"], "source": r["source"]} for r in recs]
            tla.append({"tla1_params": _p(pred.params), "tla1_s": t_pred, "tla2_evals": evals,
                        "tla2_wall_s": t_tla2, "tla2_overhead_s": t_tla2 - sum(e["wall_s"] for e in evals)})
            print(f"  TLA on {task}: TLA1 {pred.params}, TLA2 best {best_of(evals)}", file=sys.stderr, flush=True)
    else:
        print(f"small: no model at {model_path} (run phase compare first): TLA skipped", file=sys.stderr)
    meta["tuning_finished"] = _now()
    cands = []
    for i, g in enumerate(grids):
        c = {m: best_of(runs[m]["evals"][i])[0] for m in args.methods}
        c["grid optimum"] = g["best_params"]
        if tla:
            c["TLA1"] = tla[i]["tla1_params"]
            c["TLA2"] = best_of(tla[i]["tla2_evals"])[0]
        cands.append(c)
    conf = confirm(tasks, cands, args.confirm, measure)
    _finish(meta, t_start, measure)
    return {"phase": "small", "meta": meta, "tasks": tasks, "grids": grids, "runs": runs, "tla": tla,
            "confirmation": conf}


def phase_reconfirm(args, argv) -> dict:
    """Re-measure the configurations of an earlier phase's confirmation ``--confirm`` more times each
    (round robin, all tasks of that phase); the new medians replace the old ones, which are kept."""
    path = args.state_dir / f"{args.of}_{args.backend}.json"
    st = json.loads(path.read_text())
    pb = _problem(args)
    measure = Measure(pb, args.backend, st["meta"]["repeats"])
    t_start = time.perf_counter()
    meta = {"command": " ".join([".bench-venv/bin/python bench/scalapack_qr.py", *map(shlex.quote, argv)]),
            "started": _now(), "load_start": _load(), "confirm": args.confirm}
    cands = [{lab: c["params"] for c in o["configs"] for lab in c["labels"]} for o in st["confirmation"]]
    conf = confirm(st["tasks"], cands, args.confirm, measure)
    _finish(meta, t_start, measure)
    st.setdefault("earlier_confirmations", []).append({"confirm": st["meta"]["confirm"],
                                                       "confirmation": st["confirmation"]})
    st["confirmation"] = conf
    st["meta"]["confirm"] = args.confirm
    st["meta"]["reconfirm"] = meta
    return st


# ---- report ---------------------------------------------------------------------------------------
def _fmt(v: float | None, nd: int = 4) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "fail"
    return f"{v:.{nd}g}"


def _cfg(p: dict | None) -> str:
    return "-" if p is None else "/".join(str(p[k]) for k in KEYS)


def _method_totals(state: dict, m: str) -> dict:
    ev = state["runs"][m]["evals"]
    flat = [e for task_evals in ev for e in task_evals]
    return {"evals": len(flat), "failed": sum(e["status"] != "complete" for e in flat),
            "repaired": sum(bool(e.get("proposed")) for e in flat),
            "wall_s": sum(e["wall_s"] for e in flat), "pdgeqrf_s": sum(e.get("pdgeqrf_s", 0.0) for e in flat),
            "overhead_s": sum(state["runs"][m]["overhead_s"])}


def _reconfirm_line(meta: dict) -> list[str]:
    r = meta.get("reconfirm")
    if not r:
        return []
    return [f"- confirmation redone with {r['confirm']} launches per configuration: `{r['command']}`, {r['started']} "
            f"to {r['finished']}, load average at start {r['load_start']}, at end {r['load_end']}, {r['launches']} launches"]


def _noise_lines(st: dict, methods: list[str]) -> list[str]:
    """How noisy the confirmed times are, and how far the tuning bests sit below them."""
    spreads = [float(np.percentile(c["values"], 75) / np.percentile(c["values"], 25) - 1)
               for o in st["confirmation"] for c in o["configs"]
               if len(c["values"]) > 1 and all(v is not None for v in c["values"])]
    bias = []
    for m in methods:
        for i, ev in enumerate(st["runs"][m]["evals"]):
            _, v = best_of(ev)
            c = st["confirmation"][i]["confirmed"].get(m)
            if c is not None and math.isfinite(v) and math.isfinite(c):
                bias.append(c / v)
    if not spreads or not bias:
        return []
    return [f"Noise: over the launches of one re-measured configuration, the upper quartile is "
            f"{100 * np.median(spreads):.0f} % (median over the {len(spreads)} configurations; p90 "
            f"{100 * np.percentile(spreads, 90):.0f} %) above the lower quartile; a method's confirmed time is on median {np.median(bias):.2f}x the best time it saw while tuning "
            f"(range {min(bias):.2f}-{max(bias):.2f}x): that best is the minimum of 20 noisy launches.", ""]


def report_compare(st: dict) -> list[str]:
    meta, tasks = st["meta"], st["tasks"]
    label = "" if meta["backend"] == "real" else " (MODEL backend: analytic cost model values, not measurements)"
    methods = [m for m in meta["methods"]]
    conf = st["confirmation"]
    L = [f"## Fig. 1 on this machine: MLA vs peers on {len(tasks)} LHS tasks{label}", "",
         f"- command: `{meta['command']}`",
         f"- {meta['started']} to {meta['finished']} (tuning done {meta['tuning_finished']}); load average "
         f"(1/5/15 min) at start {meta['load_start']}, after tuning {meta['load_after_tuning']}, at end "
         f"{meta['load_end']}; {meta['launches']} launches, {meta['wall_s']:.0f} s wall",
         f"- budget {meta['budget']} evaluations per task and method (MLA: {meta['n_initial']} initial), each "
         f"evaluation one launch = min of {meta['repeats']} factorisations; timeout {meta['timeout']} s; "
         f"confirmation: median of {meta['confirm']} re-launches per chosen configuration"] + _reconfirm_line(meta) + [""]
    # per-task table
    head = "| task m x n | " + " | ".join(f"{m} best (tuning) | {m} confirmed" for m in methods) + " |"
    L += ["Best time per task, seconds: the best value seen while tuning and the confirmed (median of the "
          "re-measurements) time of that configuration:", "", head, "|---" * (1 + 2 * len(methods)) + "|"]
    for i, t in enumerate(tasks):
        cells = []
        for m in methods:
            _, v = best_of(st["runs"][m]["evals"][i])
            cells += [_fmt(v), _fmt(conf[i]["confirmed"].get(m))]
        L.append(f"| {t['m']} x {t['n']} | " + " | ".join(cells) + " |")
    L += ["", "Configurations chosen (mb/nb/nproc/p/nth):", "",
          "| task | " + " | ".join(methods) + " |", "|---" * (1 + len(methods)) + "|"]
    for i, t in enumerate(tasks):
        L.append(f"| {t['m']} x {t['n']} | " + " | ".join(_cfg(best_of(st['runs'][m]['evals'][i])[0])
                                                       for m in methods) + " |")
    # headline: MLA vs each peer
    if "MLA" in methods:
        L += ["", "MLA against each peer (ratio = peer's time / MLA's time; > 1: MLA better). 'better' counts "
              "tasks with ratio > 1, ties (the same configuration chosen) count half:", "",
              "| peer | on | MLA better | ties | mean ratio | max ratio | min ratio | tasks where MLA is within 5 % of "
              "the peer or better |", "|---|---|---|---|---|---|---|---|"]
        for m in methods:
            if m == "MLA":
                continue
            views = [(f"confirmed, median of {meta['confirm']}", conf)]
            views += [(f"confirmed, median of {e['confirm']} (earlier)", e["confirmation"])
                      for e in st.get("earlier_confirmations", [])]
            views.append(("best seen while tuning", None))
            for on, cv in views:
                ratios, tie = [], []
                for i in range(len(tasks)):
                    pm, vm = best_of(st["runs"]["MLA"]["evals"][i])
                    pp, vp = best_of(st["runs"][m]["evals"][i])
                    if cv is not None:
                        vm, vp = cv[i]["confirmed"].get("MLA", math.inf), cv[i]["confirmed"].get(m, math.inf)
                    ratios.append(vp / vm if math.isfinite(vm) else 0.0)
                    # the same configuration chosen: a tie, counted half whatever the re-measured ratio
                    tie.append(pm is not None and pp is not None and point_key(pm) == point_key(pp))
                r, tie_mask = np.array(ratios), np.array(tie, dtype=bool)
                n = len(r)
                better = float(np.sum((r > 1) & ~tie_mask) + 0.5 * np.sum(tie_mask))
                L.append(f"| {m} | {on} | {better:g}/{n} ({100 * better / n:.0f} %) | {int(np.sum(tie_mask))} | "
                         f"{np.mean(r):.3f} | {np.max(r):.3f} | {np.min(r):.3f} | {int(np.sum(r >= 0.95))}/{n} |")
    L += [""] + _noise_lines(st, methods)
    L += ["Cost per method (all tasks): launches, failed runs, proposals mapped to a feasible configuration, "
          "wall time of the launches (mpiexec start-up + repeats + residual check), time inside PDGEQRF, and tuner "
          "overhead (wall time outside the launches):", "",
          "| method | evaluations | failed | repaired | launch wall s | PDGEQRF s | tuner overhead s |",
          "|---|---|---|---|---|---|---|"]
    for m in methods:
        t = _method_totals(st, m)
        L.append(f"| {m} | {t['evals']} | {t['failed']} | {t['repaired']} | {t['wall_s']:.1f} | "
                 f"{t['pdgeqrf_s']:.1f} | {t['overhead_s']:.1f} |")
    L.append("")
    return L


def report_small(st: dict) -> list[str]:
    meta, tasks, grids = st["meta"], st["tasks"], st["grids"]
    label = "" if meta["backend"] == "real" else " (MODEL backend)"
    conf = st["confirmation"]
    labels = list(meta["methods"]) + (["TLA1", "TLA2"] if st["tla"] else [])
    L = [f"## Table 3 / Fig. 2 on this machine: distance to the grid optimum{label}", "",
         f"- command: `{meta['command']}`",
         f"- {meta['started']} to {meta['finished']}; load average at start {meta['load_start']}, at end "
         f"{meta['load_end']}; {meta['launches']} launches, {meta['wall_s']:.0f} s wall"] + _reconfirm_line(meta) + [
         f"- tasks: those of the grids {meta['grids']}; every method {meta['budget']} evaluations per task "
         f"(MLA: the {len(tasks)} grid tasks tuned jointly, cold); TLA1: `gt.predict_optimum` from the MLA model "
         f"of the compare phase (0 runs); TLA2: `gt.tune_new_task` from that model, budget {meta['budget']}",
         "- distance = confirmed time of the method's choice / confirmed time of the grid's best configuration - 1, "
         f"both re-measured side by side ({meta['confirm']} launches each, median); negative: better than "
         "the grid (whose block sizes are powers of two only)", "",
         "| task | grid best (mb/nb/nproc/p/nth) | grid best s (grid run) | grid best s (confirmed) | "
         + " | ".join(labels) + " |", "|---" * (4 + len(labels)) + "|"]
    within = {lab: 0 for lab in labels}
    for i, g in enumerate(grids):
        ref = conf[i]["confirmed"]["grid optimum"]
        cells = []
        for lab in labels:
            v = conf[i]["confirmed"].get(lab)
            if v is None or not math.isfinite(v) or not math.isfinite(ref):
                cells.append("fail")
                continue
            d = v / ref - 1
            within[lab] += d <= 0.05
            cells.append(f"{100 * d:+.1f} %")
        L.append(f"| {g['task']['m']} x {g['task']['n']} | {_cfg(g['best_params'])} | {_fmt(g['best_time'])} | "
                 f"{_fmt(ref)} | " + " | ".join(cells) + " |")
    n = len(grids)
    L.append("| within 5 % of the grid optimum | | | | " + " | ".join(f"{within[lab]}/{n}" for lab in labels) + " |")
    for e in st.get("earlier_confirmations", []):
        cnt = {lab: 0 for lab in labels}
        for i in range(n):
            ref = e["confirmation"][i]["confirmed"]["grid optimum"]
            for lab in labels:
                v = e["confirmation"][i]["confirmed"].get(lab)
                cnt[lab] += v is not None and math.isfinite(v) and math.isfinite(ref) and v / ref - 1 <= 0.05
        L.append(f"| within 5 %, earlier confirmation (median of {e['confirm']}) | | | | "
                 + " | ".join(f"{cnt[lab]}/{n}" for lab in labels) + " |")
    L += [""] + _noise_lines(st, list(meta["methods"]))
    L += ["Configurations chosen and confirmed times (s):", "",
          "| task | " + " | ".join(labels) + " |", "|---" * (1 + len(labels)) + "|"]
    for i, g in enumerate(grids):
        cells = []
        for lab in labels:
            if lab in ("TLA1", "TLA2"):
                p = st["tla"][i]["tla1_params"] if lab == "TLA1" else best_of(st["tla"][i]["tla2_evals"])[0]
            else:
                p = best_of(st["runs"][lab]["evals"][i])[0]
            cells.append(f"{_cfg(p)}: {_fmt(conf[i]['confirmed'].get(lab))}")
        L.append(f"| {g['task']['m']} x {g['task']['n']} | " + " | ".join(cells) + " |")
    if st["tla"]:
        L += ["", "TLA cost per task: TLA1 prediction seconds; TLA2 launches, their wall time and the tuner overhead:", "",
              "| task | TLA1 s | TLA2 evaluations | TLA2 failed | TLA2 launch wall s | TLA2 overhead s |",
              "|---|---|---|---|---|---|"]
        for i, g in enumerate(grids):
            t = st["tla"][i]
            ev = t["tla2_evals"]
            L.append(f"| {g['task']['m']} x {g['task']['n']} | {t['tla1_s']:.2f} | {len(ev)} | "
                     f"{sum(e['status'] != 'complete' for e in ev)} | {sum(e['wall_s'] for e in ev):.1f} | "
                     f"{t['tla2_overhead_s']:.1f} |")
    L += ["", "| method | evaluations | failed | repaired | launch wall s | PDGEQRF s | tuner overhead s |",
          "|---|---|---|---|---|---|---|"]
    for m in meta["methods"]:
        t = _method_totals(st, m)
        L.append(f"| {m} | {t['evals']} | {t['failed']} | {t['repaired']} | {t['wall_s']:.1f} | "
                 f"{t['pdgeqrf_s']:.1f} | {t['overhead_s']:.1f} |")
    L.append("")
    return L


def phase_report(args) -> str:
    L = [f"# bench/scalapack_qr.py ({args.backend} backend)", "", f"- machine: {describe_machine()}", ""]
    for phase, fn in (("compare", report_compare), ("small", report_small)):
        path = args.state_dir / f"{phase}_{args.backend}.json"
        if path.exists():
            L += fn(json.loads(path.read_text()))
        else:
            L += [f"(no {phase} results at {path})", ""]
    return "\n".join(L)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("phase", choices=("compare", "small", "reconfirm", "report"))
    ap.add_argument("--of", choices=("compare", "small"), default="compare", help="phase reconfirm: whose choices")
    ap.add_argument("--backend", choices=("real", "model"), default="real")
    ap.add_argument("--tasks", type=int, default=8, help="LHS tasks of phase compare")
    ap.add_argument("--budget", type=int, default=20)
    ap.add_argument("--n-initial", type=int, default=10, help="MLA's initial design per task (gp_minimize's too)")
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--m-max", type=int, default=2000)
    ap.add_argument("--repeats", type=int, default=2, help="factorisations per launch (min kept)")
    ap.add_argument("--timeout", type=float, default=20.0, help="seconds per launch")
    ap.add_argument("--confirm", type=int, default=3, help="re-measurements per chosen configuration")
    ap.add_argument("--grids", default=DEFAULT_GRIDS, help="comma-separated grid CSVs (phase small)")
    ap.add_argument("--state-dir", type=Path, default=ROOT / "out" / "qrbench")
    ap.add_argument("--out", default=None, help="markdown file (phase report)")
    args = ap.parse_args(argv)
    args.methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    for m in args.methods:
        if m not in METHODS:
            raise SystemExit(f"unknown method {m!r}; choose from {METHODS}")
    logging.basicConfig(level=logging.WARNING)
    args.state_dir.mkdir(parents=True, exist_ok=True)
    if args.phase == "report":
        text = phase_report(args)
        print(text)
        if args.out:
            Path(args.out).write_text(text)
        return 0
    from threadpoolctl import threadpool_limits

    threadpool_limits(1)  # every tuner single-threaded BLAS (the application sets its own threads)
    phase = {"compare": phase_compare, "small": phase_small, "reconfirm": phase_reconfirm}[args.phase]
    state = phase(args, argv)
    path = args.state_dir / f"{args.of if args.phase == 'reconfirm' else args.phase}_{args.backend}.json"
    path.write_text(json.dumps(state, indent=1, default=float))
    print(f"{args.phase}: state written to {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
