"""Regenerate the shipped models: each model file (``NAME.json``), its model card (``NAME.md``) and,
where the training data is converted from an app's recorded files, the training CSV
(``data/NAME.csv``).

    .venv/bin/python models/build.py                 # every model (minutes: one LCM fit each)
    .venv/bin/python models/build.py pdgeqrf_xeon16  # one of them
    .venv/bin/python models/build.py --list

Every model is ``gt.fit`` of its training CSV (the same as ``gptask fit --problem FACTORY
--problem-options OPTIONS DATA --value time ...``, printed on its card), saved with its metadata
(machine, software, training data with sha256, task range, model options, accuracy, the default
configuration's gain). The accuracy figures are those of :mod:`gptask.crossval` with the settings
below (:data:`CV_FOLDS`, :data:`CV_SEED`, :data:`LOTO_MAX_POINTS`); ``tests/test_shipped_models.py``
recomputes them from the data and checks each card against its model's metadata
(:func:`render_card` of the metadata must give the card byte for byte).

This script is data, not library code: it is not installed and gptask never imports it.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import importlib
import io
import json
import logging
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import gptask as gt  # noqa: E402
from gptask.crossval import CVReport, leave_one_task_out, within_task_cv  # noqa: E402
from gptask.importing import read_rows  # noqa: E402
from gptask.transfer.model_io import read_metadata  # noqa: E402

log = logging.getLogger("models.build")

#: within-task cross-validation: folds and the seed of the fold assignment
CV_FOLDS, CV_SEED = 5, 0
#: leave-one-task-out: configurations scored per held-out task (evenly spaced; None: all)
LOTO_MAX_POINTS = 80
#: the fit: starts of the cold LCM fit and its seed
FIT_RESTARTS, FIT_SEED = 3, 0
#: configurations per size taken from the 2-core PDGEQRF grid sweeps (of about 315): a model file
#: holds its N x N Cholesky factor, 17 MB at the full N = 1251, 2 MB at N = 400
QR_2CORE_PER_SIZE = 100


# ---- training data converted from the apps' recorded files ----------------------------------------


def _data_lines(path: Path) -> list[str]:
    return [line for line in path.read_text().splitlines() if line.strip() and not line.startswith("#")]


def _records(path: Path) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO("\n".join(_data_lines(path)))))


def _measured_at(path: Path) -> str:
    """When and under which load a recorded file was measured, from its header."""
    head = _header(path)
    if "machine at start" in head:
        start = json.loads(head["machine at start"])
        return f"measured {start['utc']}, load {start['loadavg'][0]}"
    load = head.get("loadavg_1_5_15") or head.get("loadavg") or "?"
    return f"measured {head.get('date_utc', '?')}, load {load.split()[0]}"


def _header(path: Path) -> dict[str, str]:
    """``# key: value`` comment lines of a recorded file."""
    out = {}
    for line in path.read_text().splitlines():
        if line.startswith("# ") and ":" in line:
            key, _, value = line[2:].partition(":")
            out.setdefault(key.strip(), value.strip())
    return out


def qr_grid_rows(paths: list[Path], per_size: int, cores: int) -> list[dict[str, Any]]:
    """apps/scalapack_qr grid sweeps: one row per launch (time: min over the driver's repeats); per
    file the first ``per_size`` rows of the sweep's run order (shuffled when it was measured) and
    the hand default's row (:func:`apps.scalapack_qr.problem.hand_default`)."""
    from apps.scalapack_qr.problem import hand_default

    cols = ("m", "n", "mb", "nb", "nproc", "p", "nth")
    out = []
    for path in paths:
        rows = _records(path)
        task = {"m": int(rows[0]["m"]), "n": int(rows[0]["n"])}
        default = {k: str(v) for k, v in hand_default(task, 1, cores).items()}
        keep = [r for k, r in enumerate(rows) if k < per_size or all(r[c] == default[c] for c in default)]
        out += [{**{c: r[c] for c in cols}, "time": r["time"], "status": r["status"]} for r in keep]
    return out


def collective_grid_rows(paths: list[Path]) -> list[dict[str, Any]]:
    """apps/mpi_collectives grids: sweep and confirmation rows (repeats of one configuration)."""
    cols = ("coll", "size", "nprocs", "algorithm", "kval", "tree_type", "chunk")
    return [{**{c: r[c] for c in cols}, "time": r["time"], "status": r["status"]}
            for path in paths for r in _records(path)]


def io_grid_rows(paths: list[Path]) -> list[dict[str, Any]]:
    """apps/io_accelerators grids: the task's features (header ``full task``), the knobs, the time
    (min of 2 samples) and censored (a run stopped at 3x the default: its time is a lower bound)."""
    out = []
    for path in paths:
        task = json.loads(_header(path)["full task"])
        for r in _records(path):
            knobs = {k: r[k] for k in r if k not in ("kind", "time", "samples", "censored", "loadavg1")
                     and k in IO_KNOBS}
            out.append({**task, **knobs, "time": r["time"],
                        "status": "censored" if r.get("censored", "0") == "1" else "complete"})
    return out


IO_KNOBS = ("binsize", "cluster_threshold", "prefetch_size", "sequence_length", "workers", "destagers",
            "buffer_mb", "threshold")


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def derived_csv_text(spec: "Spec") -> str:
    """The training CSV of a spec converted from recorded files, exactly as build writes it."""
    sources = [ROOT / s for s in spec.sources]
    rows = spec.convert(sources)
    buf = io.StringIO()
    buf.write(f"# training data of the shipped model {spec.name}, written by models/build.py from:\n")
    for s in spec.sources:
        buf.write(f"# {s} sha256 {sha256(ROOT / s)} ({_measured_at(ROOT / s)})\n")
    w = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    return buf.getvalue()


# ---- what each model is -------------------------------------------------------------------------


@dataclass(frozen=True)
class Spec:
    """One shipped model. factory/options: the problem (``module:function`` and its keyword
    arguments); data: the training CSV (repository path); sources: the recorded files it was
    converted from by ``convert`` (empty: ``data`` is itself a recorded file); fit: gt.fit options."""

    name: str
    title: str
    factory: str
    options: dict
    data: str
    machine: str
    software: str
    measured: str
    intended_use: str
    limits: str
    model_choice: str
    example: str
    sources: tuple[str, ...] = ()
    convert: Callable[[list[Path]], list[dict[str, Any]]] | None = None
    value: str = "time"
    status: str | None = None
    aggregate: str = "min"
    fit: dict = field(default_factory=lambda: {"n_latent": 1, "output_transform": "log"})


_2CORE = ("KVM guest, `Intel(R) Xeon(R) Processor` (AVX-512), 2 cores (1 thread each), 24 GB, Debian 12 "
          "(kernel 6.18), shared with other jobs (see the load per source file)")
_MODEL_CHOICE = ("one latent process (the tuner's default surrogate: MAP fit under the default priors, "
                 "Matern-5/2), log output transform (the times are positive and span orders of magnitude; "
                 "`auto` picks the log on these data as well).")

SPECS: dict[str, Spec] = {s.name: s for s in [
    Spec(
        name="pdgeqrf_xeon16",
        title="ScaLAPACK PDGEQRF on a 16-core Xeon node",
        factory="apps.scalapack_qr:problem", options={"cores": 16, "m_max": 4000, "log_sizes": True},
        data="apps/scalapack_qr/data/xeon16/runs.csv",
        machine=("one node, 16 cores of an Intel Xeon (1 thread per core, one socket, one NUMA node), "
                 "128 GiB, otherwise idle"),
        software=("the repository's driver `apps/scalapack_qr/pdgeqrf_driver.c` built with Debian 12's "
                  "`mpicc.mpich`; MPICH 4.0 (`mpiexec.hydra -bind-to none`), ScaLAPACK 2.2.1, OpenBLAS 0.3.21 "
                  "(pthreads); one timed factorisation per launch"),
        measured="2026-11-22 (apps/scalapack_qr/data/xeon16/README.md)",
        intended_use=("Run-free choice of block sizes, process grid and threads for PDGEQRF on this kind of "
                      "16-core node, for matrix sizes inside the trained range (rows and columns 1000-4000), "
                      "and a warm start for tuning a new size (`gt.tune_new_task`)."),
        limits=("Eight training sizes: sizes outside their convex hull (e.g. both dimensions at 1000, or "
                "wide 1000 x 4000) are extrapolations, and there the held-out errors are larger (about 22 %); "
                "at a single held-out size the configuration ranked first can still be 1.4x the best (see the "
                "per-task table). Launches of one configuration vary by 4-18 % "
                "(repeats.csv), a floor for any prediction of a single launch. Other nodes of the same kind "
                "(apps/scalapack_qr/data/xeon16_device, 7 sizes the model never saw, `python bench/run_free.py "
                "device`) ran 1.07-1.35x slower than predicted (MAPE 19.3 %, 6-16 % per size once that ratio "
                "is divided out) and ranked the configurations alike (Spearman 0.85): trust the ranking more "
                "than the seconds on another node. Another machine, MPI or BLAS needs its own data. The task "
                "space accepts 128-4000, but nothing below 1000 was measured."),
        model_choice=_MODEL_CHOICE + (" Sizes on a log scale (`log_sizes=True`): leave-one-task-out MAPE "
                                      "31.1 % against 49.5 % on a linear scale (measured before issue 15, with one GP over tasks "
                                      "per configuration), within-task figures the same. "
                                      "Two latent processes: within-task MAPE 15.3 % against 15.7 %, "
                                      "leave-one-task-out MAPE 31.8 % against 31.1 %, the same Spearman "
                                      "(0.872): no clear gain, so the default of one is kept "
                                      "(`python bench/run_free.py options`, bench/results_run_free.md). "
                                      "New sizes are predicted by the joint route (`gptask.transfer.joint`): one "
                                      "GP over size, configuration and the app's derived features "
                                      "(`apps/scalapack_qr/features.py`), relative to flops per core; against the "
                                      "GP over tasks per configuration used before, leave-one-task-out MAPE 15.8 % "
                                      "against 17.7 %, Spearman 0.912 against 0.892, top-ranked / best 1.109 "
                                      "against 1.324. Predicting a new size therefore needs the problem: "
                                      "`gt.load_model(path, problem=...)` or `--problem` on the command line."),
        example="m=3000,n=3000",
    ),
    Spec(
        name="pdgeqrf_2core",
        title="ScaLAPACK PDGEQRF on this 2-core machine",
        factory="apps.scalapack_qr:problem", options={"cores": 2, "m_max": 2000, "log_sizes": True},
        data="models/data/pdgeqrf_2core.csv",
        sources=("apps/scalapack_qr/data/grid_m500_n500.csv", "apps/scalapack_qr/data/grid_m1000_n500.csv",
                 "apps/scalapack_qr/data/grid_m300_n700.csv", "apps/scalapack_qr/data/grid_m500_n1000.csv"),
        convert=lambda paths: qr_grid_rows(paths, QR_2CORE_PER_SIZE, cores=2), status="status",
        machine=_2CORE,
        software="Debian 12's MPICH 4 and ScaLAPACK 2.2.1 (libscalapack-mpich), OpenBLAS, the repository's driver",
        measured="2026-11-22, the exhaustive grid sweeps of bench/scalapack_qr.py (load per source file)",
        intended_use=("Run-free configurations of PDGEQRF on this machine for matrices of 300-1000 rows and "
                      "columns, and the reference for comparing tuners on it."),
        limits=("Four training sizes only: leave-one-task-out predictions extrapolate for every held-out "
                "size. Times of 5-60 ms on a shared 2-core machine: noisy. Trained on 100 of the about 315 "
                "configurations of each sweep (the first in its shuffled run order, and the hand default): "
                "a model file holds its N x N Cholesky factor, 17 MB for all of them. `fit_runs.csv` "
                "(measured at a load of 13-15) is left out."),
        model_choice=_MODEL_CHOICE + " Sizes on a log scale (`log_sizes=True`), as for the 16-core model.",
        example="m=700,n=700",
    ),
    Spec(
        name="mpi_allreduce",
        title="MPICH allreduce algorithm selection on this 2-core machine",
        factory="apps.mpi_collectives:problem", options={"colls": "allreduce"},
        data="models/data/mpi_allreduce.csv",
        sources=tuple(f"apps/mpi_collectives/data/grid_allreduce_{t}.csv" for t in (
            "24_2", "256_4", "1024_4", "1248_4", "2832_2", "20000_2", "65536_2", "65536_4", "350264_4",
            "445112_2", "1048576_4", "12118640_4")),
        convert=collective_grid_rows, status="status",
        machine=_2CORE + "; 2 or 4 ranks on the one node (4 ranks oversubscribe the 2 cores, with yielding)",
        software="MPICH 5.0.2 (the pip `mpich` wheel) through mpi4py; algorithms chosen with MPIR_CVAR_* variables",
        measured="2026-11-22, the grids of bench/mpi_collectives.py (issue 7), under the machine lock",
        intended_use=("Run-free choice of the allreduce algorithm and its knobs for a message size (24 B - "
                      "12 MB) and 2-4 ranks on this machine; the gain over MPICH's own choice (`auto`)."),
        limits=("Times of microseconds to milliseconds; several algorithms tie within the noise on most "
                "sizes, so rank correlations are low where nothing matters. Sizes outside 24 B - 12 MB, more "
                "ranks or another network are extrapolations. Confirmation repeats make the values of the "
                "best configurations and `auto` minima over 4 samples, the others single samples."),
        model_choice=_MODEL_CHOICE,
        example="size=100000,nprocs=4",
    ),
    Spec(
        name="io_sro",
        title="Small-read prefetcher (SRO) knobs on this 2-core machine",
        factory="apps.io_accelerators:problem", options={"accelerator": "sro"},
        data="models/data/io_sro.csv",
        sources=("apps/io_accelerators/data/grid_SRO.1_real.csv", "apps/io_accelerators/data/grid_SRO.2_vol10_real.csv",
                 "apps/io_accelerators/data/grid_SRO.3_vol20_real.csv"),
        convert=io_grid_rows, status="status",
        machine=_2CORE + "; a virtual disk, cold page cache per run",
        software="the prefetcher of apps/io_accelerators (Python), files of 1 GiB",
        measured="2026-11-22 00:42-00:49 UTC at a load average of 14-18 (other jobs)",
        intended_use=("Run-free knob settings of the prefetcher for the three measured I/O patterns (SRO.1-3) "
                      "and a warm start for tuning similar patterns."),
        limits=("Three patterns in a 10-dimensional task space: predictions for a new pattern are "
                "extrapolations with wide intervals, and leave-one-task-out is reported for completeness "
                "only. Measured under a heavy load; censored runs (stopped at 3x the default) enter the "
                "model at their lower bound and are not scored."),
        model_choice=_MODEL_CHOICE,
        example=("file_mb=1024,n_leads=4,scatter_kb=8192,lead_advance_kb=2048,ops_per_lead=1000,op_kb=4,"
                 "random_scatter=0,sequential=0,volume_mb=40,threads=1"),
    ),
    Spec(
        name="io_sbb",
        title="Burst buffer (SBB) knobs on this 2-core machine",
        factory="apps.io_accelerators:problem", options={"accelerator": "sbb"},
        data="models/data/io_sbb.csv",
        sources=("apps/io_accelerators/data/grid_SBB.1_real.csv", "apps/io_accelerators/data/grid_SBB.2_real.csv"),
        convert=io_grid_rows, status="status",
        machine=_2CORE + "; a virtual disk",
        software="the burst buffer of apps/io_accelerators (Python), 8 application threads",
        measured="2026-11-22 01:12-01:20 UTC at a load average of 13-19 (other jobs)",
        intended_use=("Run-free knob settings of the burst buffer for the two measured patterns (SBB.1: "
                      "bandwidth bound, SBB.2: latency bound)."),
        limits=("Two patterns only: no leave-one-task-out figure exists (it needs three), and a new pattern "
                "is an extrapolation. Measured under a heavy load; censored runs enter the model at their "
                "lower bound and are not scored."),
        model_choice=_MODEL_CHOICE,
        example=("file_mb=256,n_leads=8,scatter_kb=4096,ops_per_lead=64,op_kb=4,sequential=0,read_fraction=0.75,"
                 "volume_mb=32,threads=8"),
    ),
]}


# ---- build ----------------------------------------------------------------------------------------


def load_factory(spec: Spec) -> gt.Problem:
    module, _, fn = spec.factory.partition(":")
    return getattr(importlib.import_module(module), fn)(**_factory_options(spec))


def _factory_options(spec: Spec) -> dict:
    opts = dict(spec.options)
    if isinstance(opts.get("colls"), str):
        opts["colls"] = [opts["colls"]]
    return opts


def fit_command(spec: Spec) -> str:
    """The ``gptask fit`` command line that builds the same model."""
    opts = _options_text(spec.options)
    parts = [f"gptask fit --problem {spec.factory}", f"--problem-options {opts}" if opts else "", spec.data,
             f"--value {spec.value}", f"--status {spec.status}" if spec.status else "",
             f"--aggregate {spec.aggregate}", f"--n-latent {spec.fit['n_latent']}",
             f"--output-transform {spec.fit['output_transform']}", f"--restarts {FIT_RESTARTS}",
             f"--seed {FIT_SEED}", f"--save-model models/{spec.name}.json"]
    return " ".join(p for p in parts if p)


def _cv_block(report: CVReport, extra: dict) -> dict:
    return {**extra, "summary": report.summary(), "by_task": report.by_task()}


def accuracy(result: gt.TuningResult) -> dict[str, Any]:
    """The card's accuracy figures (module docstring settings)."""
    out = {"within_task": _cv_block(within_task_cv(result, CV_FOLDS, CV_SEED), {"folds": CV_FOLDS, "seed": CV_SEED})}
    if len(result.tasks) >= 3:
        loto = leave_one_task_out(result, max_points=LOTO_MAX_POINTS)
        out["leave_one_task_out"] = _cv_block(loto, {"max_points": LOTO_MAX_POINTS, "ranking": loto.ranking()})
    else:
        out["leave_one_task_out"] = None
    return out


def _task_range(problem: gt.Problem, tasks: list[dict]) -> dict[str, Any]:
    """Per task dimension: {"min", "max"} of the trained tasks, or {"values"} for a categorical."""
    out = {}
    for d in problem.task_space.dimensions:
        vals = [t[d.name] for t in tasks]
        out[d.name] = ({"values": sorted(set(vals), key=str)} if isinstance(d, gt.Categorical)
                       else {"min": min(vals), "max": max(vals)})
    return out


def metadata(spec: Spec, result: gt.TuningResult) -> dict[str, Any]:
    problem = result.problem
    data = ROOT / spec.data
    tasks = [dict(t) for t in result.tasks]
    defaults = []
    for i in range(len(tasks)):
        d = result.default(i)
        best = result.best(i)
        defaults.append({"default": None if d is None else {"params": d[0], "value": d[1]},
                         "best": {"params": best[0], "value": best[1]}, "gain": result.gain(i)})
    return {
        "name": spec.name, "title": spec.title, "card": f"models/{spec.name}.md",
        "problem": {"factory": spec.factory, "options": spec.options, "name": problem.name},
        "machine": spec.machine, "software": spec.software, "measured": spec.measured,
        "training_data": {"path": spec.data, "sha256": sha256(data), "value": spec.value, "status": spec.status,
                          "aggregate": spec.aggregate,
                          "rows": len(read_rows(problem, data, value=spec.value, status=spec.status)),
                          "configurations": len(result.history),
                          "sources": [{"path": s, "sha256": sha256(ROOT / s)} for s in spec.sources]},
        "tasks": {"n": len(tasks), "list": tasks, "range": _task_range(problem, tasks),
                  "task_space": problem.task_space.to_json()},
        "model": {"n_latent": result.model.n_latent, "kernel": result.model.kernel,
                  "output_transform": "log" if result.transform.use_log else "none", "restarts": FIT_RESTARTS,
                  "seed": FIT_SEED, "choice": spec.model_choice},
        "command": fit_command(spec),
        "example_task": spec.example,
        "accuracy": accuracy(result),
        "joint_features": (problem.feature_matrix([tasks[0]], [result.best(0)[0]])[0]
                           if problem.features is not None else None),
        "defaults": defaults,
        "intended_use": spec.intended_use, "limits": spec.limits,
    }


def build(spec: Spec) -> dict[str, Any]:
    if spec.convert is not None:
        (ROOT / spec.data).parent.mkdir(parents=True, exist_ok=True)
        (ROOT / spec.data).write_text(derived_csv_text(spec))
    problem = load_factory(spec)
    result = gt.fit(problem, ROOT / spec.data, value=spec.value, status=spec.status, aggregate=spec.aggregate,
                    restarts=FIT_RESTARTS, seed=FIT_SEED, **spec.fit)
    path = result.save_model(HERE / f"{spec.name}.json", metadata=metadata(spec, result))
    meta = read_metadata(path)  # the card renders what the file holds (JSON types, sorted keys)
    (HERE / f"{spec.name}.md").write_text(render_card(meta))
    return meta


# ---- the card ---------------------------------------------------------------------------------------


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.1f} %"


def _num(v: float | None, fmt: str = ".3f") -> str:
    return "-" if v is None else format(v, fmt)


def _kv(d: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in d.items())


def _task_text(task: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in task.items())


def render_card(meta: dict[str, Any]) -> str:
    """The model card (markdown) of a model's metadata; the test checks ``card == render_card(meta)``."""
    td, tasks, model, acc = meta["training_data"], meta["tasks"], meta["model"], meta["accuracy"]
    lines = [f"# {meta['title']} (`models/{meta['name']}.json`)", "",
             f"Problem: `{meta['problem']['factory']}` with options `{_kv(meta['problem']['options']) or '-'}` "
             f"(problem name `{meta['problem']['name']}`). Regenerate with `.venv/bin/python models/build.py "
             f"{meta['name']}`; the same model from the command line:", "",
             f"    {meta['command']}", "",
             "## Machine and software", "",
             f"- Machine: {meta['machine']}.", f"- Software: {meta['software']}.", f"- Measured: {meta['measured']}.",
             "", "## Training data", "",
             f"- `{td['path']}` (sha256 `{td['sha256']}`): {td['rows']} rows, {td['configurations']} configurations "
             f"(repeated rows of one configuration are one run, value = {td['aggregate']} of its samples), "
             f"value column `{td['value']}`" + (f", status column `{td['status']}`." if td["status"] else ".")]
    if td["sources"]:
        lines.append("- Converted by `models/build.py` from the recorded files:")
        lines += [f"  - `{s['path']}` (sha256 `{s['sha256']}`)" for s in td["sources"]]
    rng = "; ".join(f"{k} {v['min']}-{v['max']}" if "min" in v else f"{k} in {v['values']}"
                    for k, v in tasks["range"].items())
    lines += [f"- Tasks: {tasks['n']} ({rng}):", ""]
    lines += [f"  {i}. {_task_text(t)}" for i, t in enumerate(tasks["list"])]
    lines += ["", "## Model", "",
              f"LCM with {model['n_latent']} latent process(es), `{model['kernel']}` kernel, "
              f"`{model['output_transform']}` output transform, {model['restarts']} fit starts, seed "
              f"{model['seed']}. Why: {model['choice']}", "",
              "## Accuracy", "",
              "Held-out predictions of measured values (`gptask.crossval`): the fitted hyperparameters are "
              "kept and the model is re-conditioned without the held-out data; an interval is the central "
              "95 % predictive interval. MAPE: mean absolute percentage error over held-out points; "
              "Spearman: rank correlation of predicted and measured values, mean over tasks; coverage: "
              "fraction of measurements inside their interval.", "",
              "| check | points | MAPE | Spearman | 95 % coverage |", "|---|---|---|---|---|"]
    w = acc["within_task"]
    lines.append(f"| within-task {w['folds']}-fold (seed {w['seed']}) | {w['summary']['n_points']} | "
                 f"{_pct(w['summary']['mape'])} | {_num(w['summary']['spearman'])} | "
                 f"{_pct(w['summary']['coverage'])} |")
    loto = acc["leave_one_task_out"]
    if loto is None:
        lines.append("| leave-one-task-out | - | - | - | - |")
        lines += ["", "Leave-one-task-out needs three tasks or more: not available for this model."]
    else:
        s = loto["summary"]
        lines.append(f"| leave-one-task-out (up to {loto['max_points']} configurations per task) | "
                     f"{s['n_points']} | {_pct(s['mape'])} | {_num(s['spearman'])} | {_pct(s['coverage'])} |")
        lines += ["", "Per held-out task (a new task for the model: predicted with `gt.predict` from the other "
                  "tasks). `top/best`: measured value of the configuration ranked first by the prediction, "
                  "relative to the task's best measured value; `default/best`: the same for the default "
                  "configuration.", "",
                  "| task | points | MAPE | Spearman | coverage | top/best | default/best |",
                  "|---|---|---|---|---|---|---|"]
        ranks = {r["task_index"]: r for r in loto["ranking"]}
        for r in loto["by_task"]:
            k = ranks[r["task_index"]]
            lines.append(f"| {_task_text(tasks['list'][r['task_index']])} | {r['n']} | {_pct(r['mape'])} | "
                         f"{_num(r['spearman'])} | {_pct(r['coverage'])} | {_num(k['top_over_best'])} | "
                         f"{_num(k['default_over_best'])} |")
        tops = [k["top_over_best"] for k in loto["ranking"]]
        dflt = [k["default_over_best"] for k in loto["ranking"] if k["default_over_best"] is not None]
        lines += ["", f"Mean top/best {_num(sum(tops) / len(tops))}" + (
            f", mean default/best {_num(sum(dflt) / len(dflt))} ({len(dflt)} tasks with a measured default)."
            if dflt else ".")]
    lines += ["", "## Gain over the default configuration", "",
              "The problem's default (`Problem.default`) as measured in the training data, the best measured "
              "configuration, and the gain `(default - best) / default`.", "",
              "| task | default | best | best configuration | gain |", "|---|---|---|---|---|"]
    for t, d in zip(tasks["list"], meta["defaults"]):
        dv = "not measured" if d["default"] is None else f"{d['default']['value']:.4g}"
        lines.append(f"| {_task_text(t)} | {dv} | {d['best']['value']:.4g} | {_kv(d['best']['params'])} | "
                     f"{_pct(d['gain'])} |")
    lines += ["", "## Intended use", "", meta["intended_use"], "", "## Limits", "", meta["limits"], "",
              "## Use", "", "```bash",
              f"gptask predict models/{meta['name']}.json --task {meta['example_task']} --problem "
              f"{meta['problem']['factory']}" + (f" --problem-options {_options_text(meta['problem']['options'])}"
                                                  if meta["problem"]["options"] else ""),
              "```", "",
              "prints the predicted best configuration and its predicted value without a run (without "
              "`--problem` the constraints are not checked" + (
                  ", and new tasks are predicted by the GP over tasks instead of the joint route, which needs "
                  "the problem's features" if meta.get("joint_features") else "") +
              "), the default's predicted value and the predicted "
              "gain; `gt.load_model(path, problem=...)` gives the same to `gt.predict_optimum`, "
              "`gt.predict` and `gt.tune_new_task`.", ""]
    return "\n".join(lines)


def _options_text(options: dict) -> str:
    return ",".join(f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in options.items())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", help=f"models to build (default: all of {list(SPECS)})")
    ap.add_argument("--list", action="store_true", help="list the models and exit")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    if args.list:
        for s in SPECS.values():
            print(f"{s.name}: {s.title} ({s.data})")
        return 0
    unknown = [n for n in args.names if n not in SPECS]
    if unknown:
        ap.error(f"unknown models {unknown}; known: {list(SPECS)}")
    for name in args.names or list(SPECS):
        t0 = time.perf_counter()
        meta = build(SPECS[name])
        w = meta["accuracy"]["within_task"]["summary"]
        log.info("%s: %d tasks, within-task MAPE %.3f, built in %.0f s", name, meta["tasks"]["n"], w["mape"],
                 time.perf_counter() - t0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
