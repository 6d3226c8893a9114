"""Fidelity as tasks of the LCM, or a kernel over the fidelity? (issue 44, "measure which")

gptask puts each fidelity level of each task in the LCM as a task of its own (``expand_tasks``):
the coregionalisation learns how a cheap level relates to the target. The other way of the
literature is a kernel over the fidelity value, the fidelity a continuous input beside the
configuration (BOCA's squared-exponential kernel over fidelities; the discrepancy form of Kennedy
and O'Hagan and of BoTorch's linear truncated fidelity kernel, where the cheap level is the target
plus a discrepancy that vanishes at the target). This bench fits the models on the same
multi-fidelity data and scores their predictions **at the target fidelity**, the only level
recommendations speak of.

Data, per family (bench/multifidelity_families.py, 3 tasks) and seed, per task, as gptask's
schedule lays it out: ``n_low`` Latin hypercube configurations at the cheapest level (0.1 for the
two-level families; 1/27 for the continuous ones, the levels 1, 1/3, 1/27 gptask runs under their
cost floor), at the target the ``ceil(n_target / 2)`` best of them by their cheap values (promotion)
and Latin hypercube points for the rest, and for a continuous fidelity 2 points at 1/3 (the
target's first two). Regimes ``early`` (10 cheap, 2 target) and ``late`` (20 cheap, 6 target).
A family named ``NAME+offset`` is NAME with each cheaper level moved and squeezed as the run times
of a smaller problem are (:func:`level_values`: moved by about 5 target spreads at the cheapest level,
with about half the spread), its rankings unchanged: the test of a rule that shares a task's levels' scale.

Models (Matern-5/2 over the configuration with a length scale per input, a task covariance of
rank 1 plus a diagonal over the coregionalised outputs, 3 starts; noise-free data, noise bounded
below by 1e-6 of the standardised variance):

* ``lcm_levels``: gptask's own LCM as the tuner fits it (one latent process, its priors and post-fit
  checks), every (task, level) a task, each task's values standardised;
* ``lcm_levels_joint``: the same, each task's levels standardised together (one mean and spread
  over all its values, as the fidelity kernels below have): isolates the standardisation;
  ``lcm_levels_spread``: each level its own mean, the task's spread over all its levels (robust to
  a level offset, which a zero-mean model cannot explain); ``lcm_levels_paired``: every level in
  the cheapest level's mean and spread, moved by the mean difference of its values from the
  cheapest level's at the configurations both ran (the promoted ones); ``..._q2``: the same with two
  latent processes (each a rank-1 task covariance plus its diagonal): can hold two groups of levels
  apart, as a task x fidelity product can;
* ``gpy_levels``: the same structure in GPy (maximum likelihood): isolates the fidelity structure
  from gptask's fitting;
* ``gpy_se``: GPy, the 3 base tasks coregionalised, inputs (configuration, u = 1 - s); kernel
  Matern(x) x SE(u) + SE(u) (the second term: a level offset smooth in the fidelity); each task's
  values standardised over all its levels;
* ``gpy_discrepancy``: the same inputs, kernel Matern_a(x) + Matern_b(x) x Linear(u) + Linear(u):
  target f(x), a cheaper level f(x) + u d(x) + u c (a discrepancy growing with 1 - s);
* ``lcm_input``: gptask's own LCM over the 3 base tasks with u = 1 - s as one more input (a length
  scale for it; the task covariance shared by all levels: the task x fidelity product of ``gpy_se``
  within gptask's model), each task's values standardised over all its levels; ``lcm_input_paired``:
  each cheaper level first moved by the mean difference of the target's values from its own at the
  configurations both ran (:func:`paired_shift`); ``..._q2``: two latent processes.

Scores at the target, over 500 uniform configurations per task (noise-free truth), averaged over
the tasks: ``spearman`` (rank correlation of the predicted mean with the truth), ``pick`` (the
normalised regret of the configuration of lowest predicted mean among them: what exploiting the
model would run), ``cover`` (fraction inside the raw 95 % interval of the latent value, no
calibration), ``seconds`` (the fit). ``promote`` (not a model): the normalised target regret of the
best cheap configuration.

    python bench/fidelity_kernel.py run --families currin,park,borehole,hartmann3,branin,currin_noinfo \\
        --seeds 0-9 --out bench/results/fidelity_kernel.jsonl
    python bench/fidelity_kernel.py report bench/results/fidelity_kernel.jsonl
    python bench/fidelity_kernel.py pairs bench/results/fidelity_kernel.jsonl --new lcm_input_paired_q2 --base lcm_levels

Rows (family, regime, seed, model) are appended as they finish and skipped when present.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from scipy.stats import qmc, spearmanr

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import multifidelity_families as mff  # noqa: E402
from row_files import parse_seeds  # noqa: E402

from gptask.model.numerics.lcm import LCM  # noqa: E402

REGIMES = {"early": (10, 2), "late": (20, 6)}
#: the levels gptask runs for a continuous fidelity under the cost floor 0.1 + 0.9 s^2 (session 33)
CONTINUOUS_LEVELS = (1.0, 1.0 / 3.0, 1.0 / 27.0)
INTERMEDIATE_POINTS = 2
HELD_OUT = 500
#: the "+offset" families: a cheaper level's values moved by this many target spreads (times 1 - s)
OFFSET_SDS = 5.0
RESTARTS = 3
NOISE_FLOOR = 1e-6
MODELS = ("lcm_levels", "lcm_levels_joint", "lcm_levels_spread", "lcm_levels_paired", "lcm_levels_q2",
          "lcm_levels_paired_q2", "gpy_levels", "gpy_se", "gpy_discrepancy", "lcm_input", "lcm_input_q2",
          "lcm_input_paired", "lcm_input_paired_q2")


def lhs(n: int, d: int, seed: int) -> np.ndarray:
    return qmc.LatinHypercube(d=d, seed=seed).random(n)


def level_values(fam: mff.MFFamily, i: int, U: np.ndarray, s: float, sd: float | None) -> np.ndarray:
    """Task ``i``'s values at fidelity ``s``; with ``sd`` (the spread of the task's target over the
    box, :func:`target_spread`) a cheaper level is moved and squeezed as run times at a smaller size
    are: (1 - u / 2) f + OFFSET_SDS sd u, u = 1 - s (the ranking at each level unchanged)."""
    y = fam.objective.value(i, U, s)
    if sd is None or s >= mff.TARGET:
        return y
    u = 1.0 - s
    return (1.0 - 0.5 * u) * y + OFFSET_SDS * sd * u


def target_spread(fam: mff.MFFamily, i: int) -> float:
    """The standard deviation of task ``i``'s target over 2,000 uniform configurations of the box."""
    return float(np.std(fam.objective.value(i, np.random.default_rng(i).random((2000, fam.dim)), mff.TARGET)))


Levels = list[tuple[float, np.ndarray, np.ndarray]]


def training_data(fam: mff.MFFamily, regime: str, seed: int, offset: bool = False) -> list[Levels]:
    """Per task, a list of (fidelity s, configurations (n, d), values (n,)), the target first."""
    n_low, n_target = REGIMES[regime]
    levels = fam.levels[::-1] if fam.levels is not None else CONTINUOUS_LEVELS  # target first
    low = levels[-1]
    out = []
    for i in range(len(fam.tasks)):
        sd = target_spread(fam, i) if offset else None
        U = lhs(n_low, fam.dim, seed * 1000 + 17 * i)
        y_low = level_values(fam, i, U, low, sd)
        n_promote = math.ceil(n_target / 2)
        promoted = U[np.argsort(y_low)[:n_promote]]
        spread = (lhs(n_target - n_promote, fam.dim, seed * 1000 + 17 * i + 7) if n_target > n_promote
                  else np.empty((0, fam.dim)))
        U_t = np.vstack([promoted, spread])
        rows = [(float(levels[0]), U_t, fam.objective.value(i, U_t, levels[0]))]
        for s in levels[1:-1]:  # the levels between run the target's first points
            U_m = U_t[:INTERMEDIATE_POINTS]
            rows.append((float(s), U_m, level_values(fam, i, U_m, s, sd)))
        rows.append((float(low), U, y_low))
        out.append(rows)
    return out


def standardise(y: np.ndarray) -> tuple[np.ndarray, float, float]:
    mu, sd = float(np.mean(y)), float(np.std(y)) or 1.0
    return (y - mu) / sd, mu, sd


def paired_difference(U: np.ndarray, y: np.ndarray, U_ref: np.ndarray, y_ref: np.ndarray) -> float | None:
    """The mean of y - y_ref over the configurations both ran (None where they share none)."""
    d = [y[k] - y_ref[j] for k in range(len(U)) for j in range(len(U_ref)) if np.allclose(U[k], U_ref[j])]
    return float(np.mean(d)) if d else None


def fit_lcm_levels(data, seed: int, rule: str = "", n_latent: int = 1):
    X, ys, scales = [], [], []
    for rows in data:
        _, mu_t, sd_t = standardise(np.concatenate([y for _, _, y in rows]))
        for s, U, y in rows:
            z, mu, sd = standardise(y)
            if rule == "joint":  # the task's levels standardised together, as the fidelity kernels' are
                z, mu, sd = (y - mu_t) / sd_t, mu_t, sd_t
            elif rule == "spread":  # each level its own mean, the task's spread over all its levels
                z, mu, sd = (y - mu) / sd_t, mu, sd_t
            elif rule == "paired":  # the cheapest level's scale, moved by the mean paired difference
                _, U_ref, y_ref = rows[-1]
                _, mu_r, sd_r = standardise(y_ref)
                d = paired_difference(U, y, U_ref, y_ref)
                mu, sd = mu_r + (d if d is not None else float(np.mean(y)) - mu_r), sd_r
                z = (y - mu) / sd
            X.append(U)
            ys.append(z)
            scales.append((mu, sd))
    model = LCM(n_latent=n_latent, kernel="matern52").fit(X, ys, restarts=RESTARTS, seed=seed)
    stride = len(data[0])

    def predict(i: int, U: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        j = i * stride  # task i's target level
        m, v = model.predict(j, U)
        mu, sd = scales[j]
        return mu + sd * m, sd * sd * v
    return predict


def paired_shift(rows: Levels) -> list[np.ndarray]:
    """Each level's values moved by the mean difference of the target's values from its own at the
    configurations both ran (unmoved where they share none; the target itself unmoved)."""
    _, U_t, y_t = rows[0]
    return [y + (paired_difference(U_t, y_t, U, y) or 0.0) for _, U, y in rows]


def fit_lcm_input(data, seed: int, n_latent: int = 1, rule: str = ""):
    """gptask's LCM over the base tasks, the fidelity an input: configuration and u = 1 - s, one
    Matern-5/2 with a length scale per input (u's included), each task's levels standardised
    together. A task x fidelity product, as ``gpy_se``'s, within the tuner's own model. ``rule``
    "paired": each cheaper level first moved onto the target by :func:`paired_shift`."""
    X, ys, scales = [], [], []
    for rows in data:
        X.append(np.vstack([np.hstack([U, np.full((len(U), 1), 1.0 - s)]) for s, U, _ in rows]))
        values = paired_shift(rows) if rule == "paired" else [y for _, _, y in rows]
        z, mu, sd = standardise(np.concatenate(values))
        ys.append(z)
        scales.append((mu, sd))
    model = LCM(n_latent=n_latent, kernel="matern52").fit(X, ys, restarts=RESTARTS, seed=seed)

    def predict(i: int, U: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        m, v = model.predict(i, np.hstack([U, np.zeros((len(U), 1))]))
        mu, sd = scales[i]
        return mu + sd * m, sd * sd * v
    return predict


def _gpy_fit(X_list, Y_list, kernel, n_outputs: int, seed: int):
    import GPy

    icm = GPy.util.multioutput.ICM(input_dim=X_list[0].shape[1], num_outputs=n_outputs, kernel=kernel, W_rank=1)
    m = GPy.models.GPCoregionalizedRegression(X_list, Y_list, kernel=icm)
    m.mixed_noise.constrain_bounded(NOISE_FLOOR, 1.0, warning=False)
    np.random.seed(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m.optimize_restarts(num_restarts=RESTARTS, verbose=False, robust=True)
    return m


def _gpy_predict(m, U: np.ndarray, s_col: float | None, output: int) -> tuple[np.ndarray, np.ndarray]:
    cols = [U] + ([np.full((len(U), 1), s_col)] if s_col is not None else []) + [np.full((len(U), 1), output)]
    Xa = np.hstack(cols)
    mean, var = m.predict_noiseless(Xa, Y_metadata={"output_index": Xa[:, -1:].astype(int)})
    return mean[:, 0], var[:, 0]


def fit_gpy_levels(data, seed: int, d: int):
    import GPy

    X, Y, scales = [], [], []
    for rows in data:
        for s, U, y in rows:
            z, mu, sd = standardise(y)
            X.append(U)
            Y.append(z[:, None])
            scales.append((mu, sd))
    m = _gpy_fit(X, Y, GPy.kern.Matern52(d, ARD=True), len(X), seed)
    stride = len(data[0])

    def predict(i: int, U: np.ndarray):
        j = i * stride
        mean, var = _gpy_predict(m, U, None, j)
        mu, sd = scales[j]
        return mu + sd * mean, sd * sd * var
    return predict


def fit_gpy_fidelity(data, seed: int, d: int, form: str):
    import GPy

    X, Y, scales = [], [], []
    for rows in data:
        U = np.vstack([np.hstack([U, np.full((len(U), 1), 1.0 - s)]) for s, U, _ in rows])
        z, mu, sd = standardise(np.concatenate([y for _, _, y in rows]))
        X.append(U)
        Y.append(z[:, None])
        scales.append((mu, sd))
    xs, us = list(range(d)), [d]
    if form == "se":
        kernel = (GPy.kern.Matern52(d, ARD=True, active_dims=xs) * GPy.kern.RBF(1, active_dims=us, name="fid")
                  + GPy.kern.RBF(1, active_dims=us, name="offset"))
    else:
        kernel = (GPy.kern.Matern52(d, ARD=True, active_dims=xs, name="target")
                  + GPy.kern.Matern52(d, ARD=True, active_dims=xs, name="gap") * GPy.kern.Linear(1, active_dims=us)
                  + GPy.kern.Linear(1, active_dims=us, name="offset"))
    m = _gpy_fit(X, Y, kernel, len(X), seed)

    def predict(i: int, U: np.ndarray):
        mean, var = _gpy_predict(m, U, 0.0, i)  # u = 1 - s = 0: the target
        mu, sd = scales[i]
        return mu + sd * mean, sd * sd * var
    return predict


def score(fam: mff.MFFamily, predict, seed: int) -> dict[str, float]:
    sp, pick, cover = [], [], []
    for i in range(len(fam.tasks)):
        U = np.random.default_rng(seed * 7919 + i).random((HELD_OUT, fam.dim))
        truth = fam.objective.value(i, U, mff.TARGET)
        mean, var = predict(i, U)
        sp.append(float(spearmanr(mean, truth)[0]))
        pick.append(fam.normalised_regret(i, float(truth[int(np.argmin(mean))])))
        cover.append(float(np.mean(np.abs(truth - mean) <= 1.96 * np.sqrt(np.maximum(var, 0.0)))))
    return {"spearman": float(np.mean(sp)), "pick": float(np.mean(pick)), "cover": float(np.mean(cover))}


def promote_regret(fam: mff.MFFamily, data) -> float:
    """The normalised target regret of each task's best cheap configuration (no model)."""
    out = []
    for i, rows in enumerate(data):
        _, U, y = rows[-1]
        out.append(fam.normalised_regret(i, float(fam.objective.value(i, U[[int(np.argmin(y))]], mff.TARGET)[0])))
    return float(np.mean(out))


def run(args: argparse.Namespace) -> None:
    out = Path(args.out)
    done = set()
    if out.exists():
        for line in out.read_text().splitlines():
            r = json.loads(line)
            done.add((r["family"], r["regime"], r["seed"], r["model"]))
    models = args.models.split(",")
    for name in args.families.split(","):
        fam = mff.build(name.removesuffix("+offset"))
        for regime in args.regimes.split(","):
            for seed in parse_seeds(args.seeds):
                data = training_data(fam, regime, seed, offset=name.endswith("+offset"))
                for model in models:
                    if (name, regime, seed, model) in done:
                        continue
                    t0 = time.process_time()
                    if model.startswith("lcm_levels"):
                        rule, q2 = model[len("lcm_levels_"):].removesuffix("q2").strip("_"), model.endswith("q2")
                        predict = fit_lcm_levels(data, seed, rule=rule, n_latent=2 if q2 else 1)
                    elif model.startswith("lcm_input"):
                        predict = fit_lcm_input(data, seed, n_latent=2 if model.endswith("q2") else 1,
                                                rule="paired" if "paired" in model else "")
                    elif model == "gpy_levels":
                        predict = fit_gpy_levels(data, seed, fam.dim)
                    elif model in ("gpy_se", "gpy_discrepancy"):
                        predict = fit_gpy_fidelity(data, seed, fam.dim, model.split("_")[1])
                    else:
                        raise SystemExit(f"unknown model {model!r}; known: {', '.join(MODELS)}")
                    seconds = time.process_time() - t0
                    row = {"family": name, "regime": regime, "seed": seed, "model": model,
                           **score(fam, predict, seed), "promote": promote_regret(fam, data),
                           "seconds": round(seconds, 2)}
                    with out.open("a") as fh:
                        fh.write(json.dumps(row) + "\n")
                    print(json.dumps(row), flush=True)


def read_rows(inputs: list[str]) -> list[dict]:
    """Every row of the JSON-lines files ``inputs``, in order."""
    return [json.loads(line) for f in inputs for line in Path(f).read_text().splitlines() if line.strip()]


def report(args: argparse.Namespace) -> None:
    rows = read_rows(args.inputs)
    keys = sorted({(r["family"], r["regime"]) for r in rows if args.families is None
                   or r["family"] in args.families.split(",")})
    models = [m for m in (args.models.split(",") if args.models else MODELS) if any(r["model"] == m for r in rows)]
    print("| family | regime | seeds | promote (no model) | " + " | ".join(models) + " |")
    print("|---|---|---|---|" + "---|" * len(models))
    for fam, regime in keys:
        by = {m: {r["seed"]: r for r in rows if (r["family"], r["regime"], r["model"]) == (fam, regime, m)}
              for m in models}
        here = [m for m in models if by[m]]
        seeds = sorted(set.intersection(*(set(by[m]) for m in here)))
        if not seeds:
            continue
        cells = []
        for m in models:
            if m not in here:
                cells.append("-")
                continue
            sp = np.mean([by[m][s]["spearman"] for s in seeds])
            pk = [by[m][s]["pick"] for s in seeds]
            cv = np.mean([by[m][s]["cover"] for s in seeds])
            cells.append(f"{sp:.2f} / {np.mean(pk):.3f} ({max(pk):.3f}) / {cv:.2f}")
        prom = np.mean([by[here[0]][s]["promote"] for s in seeds])
        print(f"| {fam} | {regime} | {len(seeds)} | {prom:.3f} | " + " | ".join(cells) + " |")
    print("\nCells: Spearman at the target / pick regret, mean (worst seed) / raw 95 % coverage of the latent value.")


def pairs(args: argparse.Namespace) -> None:
    """Per family and regime, the pick of ``--new`` minus that of ``--base`` and minus promotion's, seed by
    seed: mean (standard error) over the seeds both ran; "better" / "worse" where beyond 2 standard errors."""
    rows = read_rows(args.inputs)
    at = {(r["family"], r["regime"], r["seed"], r["model"]): r for r in rows}

    def cell(d: list[float]) -> str:
        m, se = float(np.mean(d)), float(np.std(d, ddof=1) / np.sqrt(len(d)))
        verdict = "better" if m < -2 * se else "worse" if m > 2 * se else "noise"
        return f"{m:+.3f} ({se:.3f}) {verdict}"
    print(f"| family | regime | seeds | {args.new} - {args.base} | {args.new} - promote | {args.base} - promote |")
    print("|---|---|---|---|---|---|")
    for fam, regime in sorted({(r["family"], r["regime"]) for r in rows}):
        seeds = sorted(s for (f, g, s, m) in at if (f, g, m) == (fam, regime, args.new) and (f, g, s, args.base) in at)
        if len(seeds) < 2:
            continue
        new = [at[fam, regime, s, args.new] for s in seeds]
        base = [at[fam, regime, s, args.base] for s in seeds]
        print(f"| {fam} | {regime} | {len(seeds)} | {cell([a['pick'] - b['pick'] for a, b in zip(new, base)])} | "
              f"{cell([a['pick'] - a['promote'] for a in new])} | {cell([b['pick'] - b['promote'] for b in base])} |")


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--families", default="currin,park,borehole,hartmann3,branin,currin_noinfo")
    r.add_argument("--regimes", default="early,late")
    r.add_argument("--models", default=",".join(MODELS))
    r.add_argument("--seeds", default="0-9")
    r.add_argument("--out", required=True)
    s = sub.add_parser("report")
    s.add_argument("inputs", nargs="+")
    s.add_argument("--models", default=None, help="the columns, comma separated (default: every model in the rows)")
    s.add_argument("--families", default=None, help="the rows' families, comma separated (default: all)")
    c = sub.add_parser("pairs", help="one model's picks against another's and promotion's, seed by seed")
    c.add_argument("inputs", nargs="+")
    c.add_argument("--new", default="lcm_input_paired_q2")
    c.add_argument("--base", default="lcm_levels")
    args = p.parse_args(argv)
    {"run": run, "report": report, "pairs": pairs}[args.cmd](args)


if __name__ == "__main__":
    main()
