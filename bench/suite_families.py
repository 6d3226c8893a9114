"""The families of the benchmark suite (bench/suite.py): every change to the model or the search is
judged on all of them.

A family is a multitask problem with known per-task optima: the tasks, each task's optimum
``f_opt`` and reference value ``f_ref`` (the median of the objective over the allowed space: a
method that ends at the median of the space has normalised regret 1), the budgets (runs per task)
at which it is scored, and what the peers need to run on it.

* ``convolution``: the recorded 2-D convolution campaign of the FAIR benchmark hub on 6 GPUs
  (``data/hub_convolution``, the project's compact copy), 4,362 allowed configurations of 7 parameters per GPU,
  replayed through :mod:`gptask.sources.replay` with the kernel's own 4 restrictions; and
  ``convolution_unlike``: its two least alike GPUs (A100, MI250X) alone, where a joint model risks
  doing worse than tuning each GPU on its own.
* ``pdgeqrf16``: the 16-core PDGEQRF timings (``apps/scalapack_qr/data/xeon16/runs.csv``), 8
  matrix sizes with about 74 measured configurations each, replayed as a partial landscape (the
  tuner may propose only measured configurations).
* ``bbob-fF-dD``: COCO's bbob function F in dimension D (through the ``ioh`` package), instances
  1-4 as tasks (each instance shifts and rotates the function and moves its optimum value).
* the project's own analytic families of :mod:`gptask.problem.functions` (demo, branin, sphere,
  branin_drift, hartmann6, mixed, switch, valley), tasks drawn by a Latin hypercube of the task
  space with a fixed seed; and ``sphere_listed``, ``mixed_listed``: two of them with every numeric
  parameter on a list of allowed values (smooth in the values).
* ``gen:<seed>``: a generated family (bench/suite_generated.py): random GP draws with per-task
  shifts, scalings and partly shared structure, on continuous, mixed or listed spaces of 2-8 inputs,
  4-20 tasks, with noise. Any seed is a family; results report the judged seeds (1000-1999) only,
  defaults may be tuned on seeds 0-999. Groups ``generated``, ``generated_smooth``,
  ``generated_rough``, ``generated_small``: first judged seeds (module suite_generated).
"""

from __future__ import annotations

import csv
import gzip
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

import gptask as gt
from gptask.problem.functions import FAMILIES
from gptask.sources.replay import read_recording, replay_problem
from gptask.tuning import resolve_tasks
from suite_generated import judged, parse_name

ROOT = Path(__file__).resolve().parents[1]
CONVOLUTION_DIR = ROOT / "data" / "hub_convolution"  # the compact copy the project ships
PDGEQRF16_RUNS = ROOT / "apps" / "scalapack_qr" / "data" / "xeon16" / "runs.csv"
CONVOLUTION_GPUS = ("A100", "A4000", "A6000", "MI250X", "W6600", "W7800")
#: the kernel's restrictions, as its tuning script (convolution_milo.py) writes them
CONVOLUTION_RESTRICTIONS = (
    "use_padding==0 or block_size_x % 32 != 0",
    "block_size_x*block_size_y<=1024",
    "use_padding==0 or use_shmem != 0",
    "use_shmem == 0 or (((block_size_x*tile_size_x+(filter_width-1)))*((block_size_y*tile_size_y"
    "+(filter_height-1)))) < 12*1024",
)
#: bbob functions of the suite (ids), one or two per group of the bbob suite: separable (1, 3),
#: moderate conditioning (6, 8), ill-conditioned (10, 12), multimodal with structure (15) and
#: weak structure (21)
BBOB_FUNCTIONS = (1, 3, 6, 8, 10, 12, 15, 21)
BBOB_DIMENSIONS = (2, 5, 10)
BBOB_INSTANCES = (1, 2, 3, 4)
#: tasks of the analytic families (a Latin hypercube of the task space drawn with TASK_SEED)
OWN_TASKS = {"switch": 8, "valley": 4}
OWN_DEFAULT_TASKS = 6
TASK_SEED = 12345
REFERENCE_SAMPLES = 20_000
DEFAULT_BUDGETS = (20, 40)


@dataclass
class Family:
    """name; problem (a gptask Problem); tasks; f_opt, f_ref: per task, the optimum and the median
    of the objective over the allowed space; budgets: runs per task scored; positive: the objective
    is a positive time (the fraction of the optimum, f_opt / best, is reported too);
    kernel_tuner: per task (cache file, restrictions) when Kernel Tuner can replay it."""

    name: str
    problem: gt.Problem
    tasks: list[dict]
    f_opt: list[float]
    f_ref: list[float]
    budgets: tuple[int, ...] = DEFAULT_BUDGETS
    positive: bool = False
    kernel_tuner: list[tuple[Path, tuple[str, ...]]] | None = None
    group: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    #: the noise-free objective ``latent(task, params)`` of a noisy family: the suite then scores a run by
    #: the latent value of the configuration with the best measured value (None: scored by measured values)
    latent: Callable[[dict, dict], float] | None = None


# ---- recorded campaigns -------------------------------------------------------------------------------
def convolution(gpus: tuple[str, ...] = CONVOLUTION_GPUS, name: str = "convolution") -> Family:
    recs = [read_recording(CONVOLUTION_DIR / f"{g}.json.gz") for g in gpus]
    problem = replay_problem(recs, CONVOLUTION_RESTRICTIONS, task_name="gpu", name=name)
    tasks = [{"gpu": r.label} for r in recs]
    ok = [[v for v in r.results.values() if not isinstance(v, str)] for r in recs]
    return Family(name, problem, tasks, [min(v) for v in ok], [float(np.median(v)) for v in ok],
                  positive=True, group="recorded",
                  kernel_tuner=[(CONVOLUTION_DIR / f"{g}.json.gz", CONVOLUTION_RESTRICTIONS) for g in gpus])


def convolution_unlike() -> Family:
    """Two GPUs whose landscapes are least alike (A100 and MI250X: rank correlation of log times 0.44),
    tuned together: where a joint model can do worse than tuning each alone."""
    return convolution(("A100", "MI250X"), "convolution_unlike")


class Lookup:
    """Objective of a partial landscape: task key -> configuration key -> value (picklable); its
    ``measured`` method gives a task's candidates, the configurations measured for it."""

    def __init__(self, table: dict[tuple, dict[tuple, float]], task_names: list[str], param_names: list[str]) -> None:
        self.table, self.task_names, self.param_names = table, task_names, param_names

    def __call__(self, task: dict, params: dict) -> float:
        got = self.table[tuple(task[n] for n in self.task_names)].get(tuple(params[n] for n in self.param_names))
        if got is None:
            raise gt.EvaluationFailed("not measured")
        return got

    def measured(self, task: dict) -> list[dict]:
        return [dict(zip(self.param_names, c)) for c in self.table[tuple(task[n] for n in self.task_names)]]


def landscape(rows: list[dict[str, str]], task_names: list[str], param_names: list[str]) -> dict[tuple, dict[tuple, float]]:
    """Task key -> configuration key -> the fastest ``time`` of CSV rows (repeated launches: the
    fastest, as repeats do)."""
    table: dict[tuple, dict[tuple, float]] = {}
    for row in rows:
        t = tuple(int(row[n]) for n in task_names)
        c = tuple(int(row[n]) for n in param_names)
        table.setdefault(t, {})[c] = min(float(row["time"]), table.get(t, {}).get(c, np.inf))
    return table


def pdgeqrf16() -> Family:
    task_names, param_names = ["m", "n"], ["mb", "nb", "nproc", "p", "nth"]
    with open(PDGEQRF16_RUNS, newline="") as fh:
        table = landscape(list(csv.DictReader(fh)), task_names, param_names)
    tasks_space = gt.Space([gt.Integer("m", 1000, 4000), gt.Integer("n", 1000, 4000)])
    params = gt.Space([gt.Integer("mb", 1, 256, log=True), gt.Integer("nb", 1, 256, log=True),
                       gt.Integer("nproc", 1, 16), gt.Integer("p", 1, 16), gt.Integer("nth", 1, 16)])
    lookup = Lookup(table, task_names, param_names)
    problem = gt.Problem(tasks_space, params, lookup, candidates=lookup.measured, name="pdgeqrf16")
    tasks = [dict(zip(task_names, t)) for t in table]
    vals = [list(table[tuple(t[n] for n in task_names)].values()) for t in tasks]
    return Family("pdgeqrf16", problem, tasks, [min(v) for v in vals], [float(np.median(v)) for v in vals],
                  budgets=(15, 30), positive=True, group="recorded")


# ---- bbob ---------------------------------------------------------------------------------------------
class _Bbob:
    """Objective of a bbob family: instance -> ioh problem (created on first use; not pickled)."""

    def __init__(self, fid: int, dim: int) -> None:
        self.fid, self.dim = fid, dim
        self._problems: dict[int, Any] = {}

    def problem(self, instance: int) -> Any:
        if instance not in self._problems:
            import ioh

            self._problems[instance] = ioh.get_problem(self.fid, instance=instance, dimension=self.dim,
                                                       problem_class=ioh.ProblemClass.BBOB)
        return self._problems[instance]

    def __call__(self, task: dict, params: dict) -> float:
        return float(self.problem(int(task["instance"]))([params[f"x{k}"] for k in range(self.dim)]))

    def __getstate__(self) -> dict:
        return {"fid": self.fid, "dim": self.dim, "_problems": {}}


def bbob(fid: int, dim: int) -> Family:
    f = _Bbob(fid, dim)
    tasks_space = gt.Space([gt.Categorical("instance", list(BBOB_INSTANCES))])
    params = gt.Space([gt.Real(f"x{k}", -5.0, 5.0) for k in range(dim)])
    problem = gt.Problem(tasks_space, params, f, name=f"bbob-f{fid}-d{dim}")
    rng = np.random.default_rng(TASK_SEED)
    X = rng.uniform(-5.0, 5.0, (REFERENCE_SAMPLES, dim))
    f_opt, f_ref = [], []
    for i in BBOB_INSTANCES:
        p = f.problem(i)
        f_opt.append(float(p.optimum.y))
        f_ref.append(float(np.median(np.asarray(p(X), dtype=float))))
    name = f"bbob-f{fid}-d{dim}"
    return Family(name, problem, [{"instance": i} for i in BBOB_INSTANCES], f_opt, f_ref, group="bbob")


# ---- the project's analytic families --------------------------------------------------------------------
def own(name: str) -> Family:
    make_problem, optimum = FAMILIES[name]
    problem = make_problem()
    tasks = resolve_tasks(problem, OWN_TASKS.get(name, OWN_DEFAULT_TASKS), TASK_SEED)
    f_opt = [float(optimum(t)[1]) for t in tasks]
    rng = np.random.default_rng(TASK_SEED)
    sample = problem.param_space.decode(rng.random((REFERENCE_SAMPLES // 4, problem.param_space.n_columns)))
    f_ref = [float(np.median([problem.objective(t, p) for p in sample])) for t in tasks]
    positive = all(v > 0 for v in f_opt)
    return Family(name, problem, tasks, f_opt, f_ref, positive=positive, group="own")


# ---- analytic families on lists of allowed values (smooth in the values) --------------------------------
STEPS = [round(0.05 * k, 2) for k in range(21)]
TILES = [4, 8, 16, 32, 64, 128, 256]


def listed(name: str) -> Family:
    """``sphere_listed`` / ``mixed_listed``: the sphere and mixed families with every numeric
    parameter on a list of allowed values (``gt.Ordinal``: steps of 0.05, tiles in powers of two),
    smooth in those values; optima by brute force over the whole grid."""
    base_name = name.replace("_listed", "")
    make_problem, _ = FAMILIES["sphere" if base_name == "sphere" else "mixed"]
    base = make_problem()
    dims = []
    for d in base.param_space.dimensions:
        if isinstance(d, gt.Real):
            dims.append(gt.Ordinal(d.name, STEPS))
        elif isinstance(d, gt.Integer):
            dims.append(gt.Ordinal(d.name, TILES, log=True))
        else:
            dims.append(d)
    problem = gt.Problem(base.task_space, gt.Space(dims), base.objective, name=name)
    tasks = resolve_tasks(problem, OWN_DEFAULT_TASKS, TASK_SEED)
    grid = problem.param_space.decode(problem.param_space.enumerate(10**6))
    f_opt, f_ref = [], []
    for t in tasks:
        vals = np.array([problem.objective(t, p) for p in grid])
        f_opt.append(float(vals.min()))
        f_ref.append(float(np.median(vals)))
    return Family(name, problem, tasks, f_opt, f_ref, positive=True, group="own")


# ---- generated families (bench/suite_generated.py) -------------------------------------------------------
#: runs per task at which generated families are scored
GENERATED_BUDGETS = (12, 20)


def generated_family(seed: int) -> Family:
    from suite_generated import PREFIX, generated

    g = generated(seed)
    return Family(f"{PREFIX}{seed}", g["problem"], g["tasks"], g["f_opt"], g["f_ref"], budgets=GENERATED_BUDGETS,
                  group="generated", extra={"spec": g["spec"]}, latent=g["objective"].latent)


# ---- the registry ---------------------------------------------------------------------------------------
def _registry() -> dict[str, Callable[[], Family]]:
    reg: dict[str, Callable[[], Family]] = {"convolution": convolution, "convolution_unlike": convolution_unlike,
                                             "pdgeqrf16": pdgeqrf16}
    for fid in BBOB_FUNCTIONS:
        for dim in BBOB_DIMENSIONS:
            reg[f"bbob-f{fid}-d{dim}"] = (lambda f=fid, d=dim: bbob(f, d))
    for name in FAMILIES:
        reg[name] = (lambda n=name: own(n))
    for name in ("sphere_listed", "mixed_listed"):
        reg[name] = (lambda n=name: listed(n))
    for name in sorted({n for names in _GENERATED.values() for n in names}, key=parse_name):
        reg[name] = (lambda s=parse_name(name): generated_family(s))
    return reg


def _generated_groups() -> dict[str, list[str]]:
    """The groups of judged generated families (never the tuning seeds)."""
    return {"generated": judged(n=10), "generated_smooth": judged("smooth", 6), "generated_rough": judged("rough", 6),
            # small enough for 10 seeds of every peer on a shared 2-core machine
            "generated_small": judged(n=6, max_tasks=8, max_inputs=4)}


_GENERATED = _generated_groups()


REGISTRY = _registry()
#: named groups of families for --families
GROUPS = {
    "all": list(REGISTRY),
    "recorded": ["convolution", "convolution_unlike", "pdgeqrf16"],
    "bbob": [n for n in REGISTRY if n.startswith("bbob-")],
    "own": [*FAMILIES, "sphere_listed", "mixed_listed"],
    **_GENERATED,
    # a quicker set to iterate on: every kind of family once or twice
    "quick": ["convolution", "convolution_unlike", "pdgeqrf16", "bbob-f1-d5", "bbob-f8-d5", "bbob-f15-d5", "bbob-f21-d2", "branin_drift",
              "hartmann6", "mixed", "switch", "valley", "sphere_listed", "mixed_listed"],
}


def known(name: str) -> bool:
    """Whether ``name`` is a family: registered, or any ``gen:<seed>``."""
    return name in REGISTRY or parse_name(name) is not None


@lru_cache(maxsize=None)
def family(name: str) -> Family:
    seed = parse_name(name)
    if seed is not None:
        return generated_family(seed)
    if name not in REGISTRY:
        raise SystemExit(f"unknown family {name!r}; known: {', '.join(REGISTRY)}")
    return REGISTRY[name]()


def kernel_tuner_cache(path: Path, workdir: Path) -> Path:
    """A Kernel Tuner cache file as plain JSON in ``workdir`` (Kernel Tuner reads .json only)."""
    out = workdir / (path.name.split(".")[0] + ".json")
    if not out.exists():
        with gzip.open(path, "rt") as fh:
            data = json.load(fh)
        tmp = out.with_suffix(".tmp")
        tmp.write_text(json.dumps(data))
        tmp.replace(out)
    return out
