"""Coverage of the intervals after a tuning, not after an initial design (issues 44 and 45).

bench/calibration.py and its siblings score the model on the tuner's initial design: space-filling points.
After a tuning the points cluster near each task's optimum, and with fidelity most of them are cheap runs.
This bench tunes a multi-fidelity family (bench/multifidelity_families.py) as bench/multifidelity.py does
(15 target-run costs per task), or the same family at its target fidelity alone with 15 runs per task, then
scores the final model at the target of every tuned task on ``--n-test`` uniform configurations:

* ``raw``: the fraction of the noise-free target values inside the model's 95 % latent interval
  (``LCM.predict``, in the model's units);
* ``cal``: the same for the calibrated interval users see (``LCM.predict_calibrated``, the intervals of
  ``gt.predict`` and of the report);
* ``factor``: the task's latent calibration factor where the model knows nothing of a point (session 40:
  larger nearer the data); ``nrmse``: the posterior mean's RMSE over the truth's standard deviation.

Kinds: ``input`` and ``tasks`` (multi-fidelity with that ``gptask.tuning.fidelity.LEVEL_MODEL``), ``sf``
(single fidelity)::

    python bench/coverage_after_tuning.py run --kinds sf,input,tasks --families currin,park,borehole,hartmann3,branin --seeds 0-4 --out F
    python bench/coverage_after_tuning.py summary F

Generated families of the suite (``gen:N``, bench/suite_generated.py: noisy, mixed and listed spaces) are
tuned for ``--runs`` runs per task (kind ``suite``) and scored against their noise-free ``latent`` on ``--n-test``
Latin hypercube configurations per task::

    python bench/coverage_after_tuning.py run --families gen:1000-1009 --runs 12 --seeds 0-2 --out F

Rows are one JSON line per (family, kind, seed, task), appended; a (family, kind, seed) already there is
skipped.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import gptask as gt  # noqa: E402
import gptask.tuning.fidelity as fm  # noqa: E402
import multifidelity as mf  # noqa: E402
import multifidelity_families as mff  # noqa: E402
from gptask.transfer.predict import as_transfer_model  # noqa: E402
from calibration_sources import parse_families  # noqa: E402
from gptask.space.sampling import lhs_points  # noqa: E402
from module_constants import constants_set  # noqa: E402
from row_files import done_keys, parse_seeds  # noqa: E402
from suite_families import family as suite_family  # noqa: E402

log = logging.getLogger("coverage_after_tuning")

Z95 = 1.959963984540054
COVER_OK = (0.85, 0.99)
#: target-run costs per task of a multi-fidelity tuning, runs per task of a single-fidelity one
BUDGET = 15
KINDS = ("sf", "input", "tasks")


def tune(fam: mff.MFFamily, kind: str, seed: int) -> Any:
    """The tuning result of ``kind`` (module docstring) on ``fam``."""
    if kind == "sf":
        return gt.tune(mf.sf_problem(fam), fam.tasks, budget=BUDGET, seed=seed, progress=False)
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    with constants_set(fm, {"LEVEL_MODEL": kind}):
        return gt.tune(mf.mf_problem(fam), fam.tasks, cost_budget=BUDGET * len(fam.tasks), seed=seed, progress=False)


def task_row(model: Any, tm: Any, factors: np.ndarray, i: int, X: np.ndarray, truth: np.ndarray) -> dict[str, Any]:
    """Task ``i``'s row: coverage of the raw and calibrated 95 % latent intervals at the encoded configurations
    X (n, D) of the truth (n,) in user units, the task's latent factor, the mean's NRMSE (module docstring)."""
    m, v = model.predict(i, X)
    mc, vc = model.predict_calibrated(i, X)
    truth = tm.transform.forward(i, truth)
    return {"task": i, "points": int(model.n_points[i]),
            "raw": float(np.mean(np.abs(truth - m) <= Z95 * np.sqrt(v))),
            "cal": float(np.mean(np.abs(truth - mc) <= Z95 * np.sqrt(vc))),
            "factor": float(factors[i][0]),
            "nrmse": float(np.sqrt(np.mean((truth - m) ** 2)) / np.std(truth))}


def score(fam: mff.MFFamily, res: Any, seed: int, n_test: int) -> list[dict[str, Any]]:
    """One row per tuned task (module docstring); the test configurations are drawn from ``1000 + seed``."""
    model, tm = res.model, as_transfer_model(res)
    factors = model.task_calibration_factors()
    rng = np.random.default_rng(1000 + seed)
    rows = []
    for i in range(len(fam.tasks)):
        U = rng.random((n_test, fam.dim))
        X = tm.param_space.encode([dict(zip(fam.objective.names, map(float, u))) for u in U])
        rows.append(task_row(model, tm, factors, i, X, fam.objective.value(i, U, mff.TARGET)))
    return rows


def score_suite(name: str, runs: int, seed: int, n_test: int) -> list[dict[str, Any]]:
    """A generated family of the suite tuned for ``runs`` runs per task, scored as :func:`score` against its
    noise-free ``latent`` on ``n_test`` Latin hypercube configurations per task (drawn from ``1000 + seed``)."""
    fam = suite_family(name)
    prob = fam.problem
    res = gt.tune(prob, fam.tasks, runs, seed=seed, progress=False)
    model, tm = res.model, as_transfer_model(res)
    factors = model.task_calibration_factors()
    rng = np.random.default_rng(1000 + seed)
    truth_of = fam.latent if fam.latent is not None else prob.objective
    rows = []
    for i, task in enumerate(fam.tasks):
        configs = lhs_points(prob.param_space, n_test, rng)
        truth = np.array([float(truth_of(task, c)) for c in configs])
        rows.append(task_row(model, tm, factors, i, tm.param_space.encode(configs), truth))
    return rows


def cmd_run(args: argparse.Namespace) -> int:
    out = Path(args.out)
    done = done_keys(out, ("family", "kind", "seed"))
    for name in parse_families(args.families):
        suite = name.startswith("gen:")
        fam = None if suite else mff.family(name)
        for kind in ("suite",) if suite else args.kinds.split(","):
            for seed in args.seeds:
                if (name, kind, seed) in done:
                    continue
                t0 = time.time()
                if suite:
                    rows = score_suite(name, args.runs, seed, args.n_test)
                else:
                    rows = score(fam, tune(fam, kind, seed), seed, args.n_test)
                with out.open("a") as f:
                    for r in rows:
                        f.write(json.dumps({"family": name, "kind": kind, "seed": seed, **r,
                                            "seconds": round(time.time() - t0, 1)}) + "\n")
                log.info("%s %s seed %d: calibrated coverage %s", name, kind, seed,
                         " ".join(f"{r['cal']:.3f}" for r in rows))
    return 0


def cmd_summary(args: argparse.Namespace) -> int:
    rows = [json.loads(line) for f in args.files for line in Path(f).read_text().splitlines() if line]
    groups: dict[tuple[str, str], list[dict]] = {}
    for r in rows:
        groups.setdefault((r["family"], r["kind"]), []).append(r)
    lo, hi = COVER_OK
    print("| family | kind | task-seeds | points per task | raw, mean | calibrated, mean (lowest) | in 85-99 % / under / over "
          "| latent factor, median | NRMSE, median |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for (fam, kind), rs in sorted(groups.items()):
        cal = np.array([r["cal"] for r in rs])
        print(f"| {fam} | {kind} | {len(rs)} | {int(np.median([r['points'] for r in rs]))} "
              f"| {np.mean([r['raw'] for r in rs]):.3f} | {cal.mean():.3f} ({cal.min():.3f}) "
              f"| {int(((cal >= lo) & (cal <= hi)).sum())} / {int((cal < lo).sum())} / {int((cal > hi).sum())} "
              f"| {np.median([r['factor'] for r in rs]):.2f} | {np.median([r['nrmse'] for r in rs]):.2f} |")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--kinds", default=",".join(KINDS))
    r.add_argument("--families", default="currin,park,borehole,hartmann3,branin")
    r.add_argument("--seeds", type=parse_seeds, default=parse_seeds("0-4"))
    r.add_argument("--n-test", type=int, default=500)
    r.add_argument("--runs", type=int, default=12, help="runs per task of a generated family (gen:N)")
    r.add_argument("--out", required=True)
    s = sub.add_parser("summary")
    s.add_argument("files", nargs="+")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("gptask").setLevel(logging.WARNING)
    return cmd_run(args) if args.cmd == "run" else cmd_summary(args)


if __name__ == "__main__":
    sys.exit(main())
