"""The leave-one-out check of collapsed fits (issue 45, item 2), measured: every fit whose winner collapsed, in whole
tuning runs of gptask's ``mla`` on the demo family of tests/test_mla.py (1 input, 5 tasks, 20 runs, the test's own
loop) or on a suite family (bench/suite_worst.py's call), with the collapse rule given on the command line
(defaults.COLLAPSE_*): the leave-one-out log predictive density per point of the collapsed winner and of the best
floored fit (LCM.loo_log_density), whether the floored fit was kept, and the run's regret. One JSON line per run.

    PYTHONPATH=$PWD .venv/bin/python bench/archive/collapse_loo.py --families demo,gen:1016 --seeds 0-3 \
        --every-start 1 --keep-nats none --loo-nats inf
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/

DEMO_TASKS = [{"t": t} for t in (0.5, 1.2, 2.0, 2.8, 3.5)]


def _seeds(text: str) -> list[int]:
    if "-" in text:
        a, b = text.split("-")
        return list(range(int(a), int(b) + 1))
    return [int(s) for s in text.split(",")]


def _opt(text: str) -> float | None:
    return None if text == "none" else float(text)


def demo_regret(seed: int) -> float:
    import gptask as gt
    from gptask.problem.functions import demo_f, demo_optimum, demo_problem

    res = gt.tune(demo_problem(), tasks=DEMO_TASKS, budget=20, n_initial=10, seed=seed, progress=False)
    out = []
    for i, t in enumerate(DEMO_TASKS):
        _, f_opt = demo_optimum(t)
        f_max = float(np.max(demo_f(t["t"], np.linspace(0, 1, 100001))))
        out.append((res.best(i)[1] - f_opt) / (f_max - f_opt))
    return float(np.mean(out))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--families", required=True, help="demo and/or bench/suite_families names")
    ap.add_argument("--seeds", default="0-3")
    ap.add_argument("--budget", type=int, default=12, help="runs per task (not the demo's: 20)")
    ap.add_argument("--every-start", type=int, default=None, help="COLLAPSE_REFIT_EVERY_START (default: as set)")
    ap.add_argument("--keep-nats", default=None, help="COLLAPSE_KEEP_NATS, a number or none (default: as set)")
    ap.add_argument("--loo-nats", default=None, help="COLLAPSE_LOO_NATS, a number, inf or none (default: as set)")
    ap.add_argument("--tag", default="")
    a = ap.parse_args(argv)
    logging.getLogger("gptask").setLevel(logging.ERROR)
    from gptask.model.numerics import lcm

    if a.every_start is not None:
        lcm.COLLAPSE_REFIT_EVERY_START = bool(a.every_start)
    if a.keep_nats is not None:
        lcm.COLLAPSE_KEEP_NATS = _opt(a.keep_nats)
    if a.loo_nats is not None:
        lcm.COLLAPSE_LOO_NATS = _opt(a.loo_nats)
    seen: list[dict] = []
    fit = lcm.LCM._fit

    def recording(self, *args, **kw):
        out = fit(self, *args, **kw)
        rep = self.fit_report
        if rep.collapsed:
            seen.append({"n": int(self._X.shape[0]), "loo": [round(v, 4) for v in getattr(rep, "collapse_loo", ())],
                         "refit": bool(rep.collapse_refit), "shortest": float(self.lengthscales.min()),
                         "collapsed": [c.split(" of input")[0].split()[-1] for c in rep.collapsed]})
        return out

    lcm.LCM._fit = recording
    for name in a.families.split(","):
        for seed in _seeds(a.seeds):
            seen.clear()
            if name == "demo":
                regret = demo_regret(seed)
            else:
                from suite_families import family
                from suite_worst import rerun

                run = rerun(family(name), a.budget, seed)
                regret = float(np.mean([t["final"] if t["final"] is not None else 1.0 for t in run["tasks"]]))
            print(json.dumps({"family": name, "seed": seed, "tag": a.tag, "regret": round(regret, 4),
                              "rule": {"every_start": lcm.COLLAPSE_REFIT_EVERY_START,
                                       "keep_nats": lcm.COLLAPSE_KEEP_NATS, "loo_nats": getattr(lcm, "COLLAPSE_LOO_NATS", None)},
                              "collapses": list(seen)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
