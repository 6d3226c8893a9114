"""Generated families of the benchmark suite (issue 45): new multitask problems drawn at random,
so that defaults are judged on problems nobody tuned them on.

A family ``gen:<seed>`` is a deterministic function of its seed (:func:`draw_spec`). Seeds are split:

* ``TUNING_SEEDS`` (0-999): anyone may look at these while tuning defaults (priors, restarts,
  acquisition settings...).
* ``JUDGED_SEEDS`` (1000-1999): what results report; never tune on them. The groups
  ``generated``, ``generated_smooth`` and ``generated_rough`` of bench/suite_families.py hold the
  first judged seeds of each kind.

What a seed draws (numpy's ``default_rng([GEN_STREAM, seed])``):

* the inputs: 2-8 (``d``), the tasks: 4-20 (``T``);
* the kind of landscape: ``smooth`` (a random-Fourier-feature draw of a GP with an RBF or
  Matern-5/2 kernel, length scales log-uniform in ``SMOOTH_LENGTHS`` of the unit cube) or ``rough``
  (Matern-3/2, ``ROUGH_LENGTHS``); each input is irrelevant (length scale ``IRRELEVANT_LENGTH``)
  with probability ``P_IRRELEVANT`` (never all of them);
* the space: ``continuous`` (reals), ``mixed`` (reals, integers and 3-4-way categoricals) or
  ``listed`` (every input a ``gt.Ordinal`` list of 4-9 values, the whole space at most
  ``LISTED_MAX`` configurations: the optimum is found by enumeration);
* the tasks: task i is ``a_i * shared(u - s_i) + b_i + c_i * own_i(u)``, with ``u`` the input's
  coordinates in the unit cube (a real or integer: its position in its range; an ordinal: its
  position on the list's line; a categorical: a random position per choice), ``shared`` one GP
  draw for all tasks, ``s_i = tau_i * drift`` a shift growing with the task's coordinate
  ``tau_i`` in [0, 1] (``|drift|`` up to ``MAX_DRIFT``), ``a_i`` in ``SCALES``, ``b_i`` normal,
  and ``own_i`` an independent draw of the same kernel weighted by ``c_i``, up to the family's
  ``c_max`` in ``OWN_WEIGHTS`` (how much of each task is its own);
* noise: sd ``noise * sd_i`` with ``noise`` one of ``NOISE_LEVELS`` (``sd_i`` the task's spread of
  latent values). In a tuning run the noise is a deterministic function of (task, configuration),
  so runs are reproducible; the suite scores a run by the *latent* value of the configuration
  with the best measured value (what a user keeps), :attr:`GeneratedObjective.latent`.

Known optima: the minimum of the latent function by enumeration (listed spaces) or by dense
evaluation (``DENSE_SAMPLES`` configurations, then L-BFGS-B on the real inputs from the best
``POLISH_STARTS``); ``f_ref`` is the median over ``REFERENCE_SAMPLES`` random allowed
configurations.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

import gptask as gt

#: family seeds anyone may tune defaults on; results report JUDGED_SEEDS only
TUNING_SEEDS = range(0, 1000)
JUDGED_SEEDS = range(1000, 2000)
#: first stream word of every draw (changing it changes every family)
GEN_STREAM = 45
PREFIX = "gen:"
N_INPUTS = (2, 8)
N_TASKS = (4, 20)
KINDS = {"smooth": ("rbf", "matern52"), "rough": ("matern32",)}
SMOOTH_LENGTHS = (0.15, 0.8)
ROUGH_LENGTHS = (0.08, 0.4)
IRRELEVANT_LENGTH = 4.0
P_IRRELEVANT = 0.2
SPACES = ("continuous", "mixed", "listed")
SPACE_P = (0.4, 0.3, 0.3)
LISTED_MAX = 50_000
MAX_DRIFT = 0.3
SCALES = (0.5, 2.0)
OWN_WEIGHTS = (0.0, 0.1, 0.3, 0.6)
NOISE_LEVELS = (0.0, 0.01, 0.05, 0.1)
#: random Fourier features per GP draw
N_FEATURES = 256
DENSE_SAMPLES = 12_000
POLISH_STARTS = 5
REFERENCE_SAMPLES = 12_000
#: where each family's optima, medians and spreads are kept once computed (every suite job builds its family anew)
CACHE_DIR = Path(tempfile.gettempdir()) / "gptask-suite-generated"


@dataclass(frozen=True)
class Draw:
    """One random-Fourier-feature GP draw on the unit cube: f(u) = sqrt(2/M) sum_m w_m cos(u . omega_m + phi_m).
    omega: (M, d) frequencies (already divided by the length scales); phi: (M,); w: (M,) N(0, 1)."""

    omega: np.ndarray
    phi: np.ndarray
    w: np.ndarray

    def __call__(self, U: np.ndarray) -> np.ndarray:
        """Values (n,) at U (n, d)."""
        return np.sqrt(2.0 / len(self.w)) * (np.cos(U @ self.omega.T + self.phi) @ self.w)


def _draw(rng: np.random.Generator, kernel: str, lengths: np.ndarray) -> Draw:
    """A draw of a unit-variance GP with ``kernel`` and ARD ``lengths`` (d,): its spectral density
    is a normal (RBF) or a Student t with 2 nu degrees of freedom (Matern-nu)."""
    M, d = N_FEATURES, len(lengths)
    z = rng.standard_normal((M, d))
    if kernel != "rbf":
        nu = {"matern52": 2.5, "matern32": 1.5}[kernel]
        z = z * np.sqrt(2 * nu / rng.chisquare(2 * nu, size=(M, 1)))
    return Draw(z / lengths, rng.uniform(0, 2 * np.pi, M), rng.standard_normal(M))


@dataclass(frozen=True)
class Spec:
    """What a seed draws (module docstring). dims: the gptask dimensions; coords: per dimension,
    None (a real or integer: its position in its range) or the coordinate of each allowed value
    (ordinal, categorical); tau, a, b, c: per task (T,); shift: (T, d); shared, own: the GP draws."""

    seed: int
    kind: str
    kernel: str
    space_kind: str
    noise: float
    c_max: float
    dims: list
    coords: list
    tau: np.ndarray
    a: np.ndarray
    b: np.ndarray
    c: np.ndarray
    shift: np.ndarray
    shared: Draw
    own: list[Draw]

    @property
    def n_inputs(self) -> int:
        return len(self.dims)

    @property
    def n_tasks(self) -> int:
        return len(self.tau)


def _dimensions(rng: np.random.Generator, space_kind: str, d: int) -> tuple[list, list]:
    dims, coords = [], []
    if space_kind == "listed":
        # as many values per input as keep the whole space within LISTED_MAX
        per = max(2, min(9, int(LISTED_MAX ** (1.0 / d))))
        for k in range(d):
            n = int(rng.integers(min(4, per), per + 1))
            if rng.random() < 0.5:  # powers of two (block sizes), placed on the log line
                dim = gt.Ordinal(f"x{k}", [2 ** j for j in range(2, 2 + n)], log=True)
            else:  # steps
                step = float(rng.choice([0.5, 1.0, 2.5]))
                dim = gt.Ordinal(f"x{k}", [round(step * j, 3) for j in range(n)])
            dims.append(dim)
            coords.append(np.asarray(dim.positions, float))
        return dims, coords
    for k in range(d):
        r = rng.random() if space_kind == "mixed" else 0.0
        if r < 0.4:
            dims.append(gt.Real(f"x{k}", 0.0, 1.0))
            coords.append(None)
        elif r < 0.7:
            hi = int(rng.choice([7, 15, 31]))
            dims.append(gt.Integer(f"x{k}", 0, hi))
            coords.append(None)
        else:
            n = int(rng.integers(3, 5))
            dims.append(gt.Categorical(f"x{k}", [f"c{j}" for j in range(n)]))
            coords.append(rng.random(n))
    if space_kind == "mixed" and not any(isinstance(x, gt.Categorical) for x in dims):
        n = int(rng.integers(3, 5))  # a mixed space has at least one categorical input
        dims[-1] = gt.Categorical(f"x{d - 1}", [f"c{j}" for j in range(n)])
        coords[-1] = rng.random(n)
    return dims, coords


def draw_spec(seed: int) -> Spec:
    """The family of ``seed`` (module docstring); the same seed gives the same family."""
    if not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"a generated family's seed must be an integer >= 0, got {seed!r}")
    rng = np.random.default_rng([GEN_STREAM, int(seed)])
    d = int(rng.integers(N_INPUTS[0], N_INPUTS[1] + 1))
    T = int(rng.integers(N_TASKS[0], N_TASKS[1] + 1))
    kind = "smooth" if rng.random() < 0.5 else "rough"
    kernel = str(rng.choice(KINDS[kind]))
    space_kind = str(rng.choice(SPACES, p=SPACE_P))
    noise = float(rng.choice(NOISE_LEVELS))
    c_max = float(rng.choice(OWN_WEIGHTS))
    dims, coords = _dimensions(rng, space_kind, d)
    lo, hi = SMOOTH_LENGTHS if kind == "smooth" else ROUGH_LENGTHS

    def lengths() -> np.ndarray:
        ell = np.exp(rng.uniform(np.log(lo), np.log(hi), d))
        irrelevant = rng.random(d) < P_IRRELEVANT
        if irrelevant.all():
            irrelevant[int(rng.integers(d))] = False
        return np.where(irrelevant, IRRELEVANT_LENGTH, ell)

    shared = _draw(rng, kernel, lengths())
    own_lengths = lengths()
    own = [_draw(rng, kernel, own_lengths) for _ in range(T)]
    tau = np.sort(rng.random(T))
    direction = rng.standard_normal(d)
    drift = direction / np.linalg.norm(direction) * rng.uniform(0.0, MAX_DRIFT)
    a = np.exp(rng.uniform(np.log(SCALES[0]), np.log(SCALES[1]), T))
    b = rng.standard_normal(T)
    c = rng.uniform(0.0, c_max, T)
    return Spec(int(seed), kind, kernel, space_kind, noise, c_max, dims, coords, tau, a, b, c,
                tau[:, None] * drift[None, :], shared, own)


class GeneratedObjective:
    """The objective of a generated family: ``latent(task, params)`` the noise-free value,
    ``__call__`` a measurement (latent plus the family's noise, a deterministic function of the
    task and the configuration); ``latent_unit(i, U)`` vectorised over unit-cube coordinates."""

    def __init__(self, spec: Spec) -> None:
        self.spec = spec
        #: per task, the sd of its latent values (the noise is relative to it); set by generated()
        self.spread = np.ones(spec.n_tasks)

    def unit(self, params_list: list[dict]) -> np.ndarray:
        """Unit-cube coordinates (n, d) of configurations."""
        U = np.empty((len(params_list), self.spec.n_inputs))
        for k, (dim, co) in enumerate(zip(self.spec.dims, self.spec.coords)):
            vals = [p[dim.name] for p in params_list]
            if isinstance(dim, gt.Categorical):
                U[:, k] = [co[dim.choices.index(v)] for v in vals]
            elif isinstance(dim, gt.Ordinal):
                U[:, k] = [co[dim.ordered.index(v)] for v in vals]
            else:
                U[:, k] = (np.asarray(vals, float) - dim.lo) / (dim.hi - dim.lo)
        return U

    def latent_unit(self, i: int, U: np.ndarray) -> np.ndarray:
        """Task ``i``'s latent values (n,) at unit-cube coordinates U (n, d)."""
        s = self.spec
        return s.a[i] * s.shared(U - s.shift[i]) + s.b[i] + s.c[i] * s.own[i](U)

    def latent(self, task: dict, params: dict) -> float:
        return float(self.latent_unit(int(task["task"]), self.unit([params]))[0])

    def noise_sd(self, i: int) -> float:
        return float(self.spec.noise * self.spread[i])

    def __call__(self, task: dict, params: dict) -> float:
        i = int(task["task"])
        value = self.latent(task, params)
        if self.spec.noise > 0:
            key = repr((self.spec.seed, i, sorted(params.items()))).encode()
            word = int.from_bytes(hashlib.sha256(key).digest()[:8], "little")
            value += self.noise_sd(i) * float(np.random.default_rng(word).standard_normal())
        return value


def sample_unit(spec: Spec, rng: np.random.Generator, n: int) -> np.ndarray:
    """``n`` uniform draws of allowed configurations, as unit-cube coordinates (n, d): a real
    uniform, an integer or a listed value uniform over its values, a categorical over its choices."""
    U = np.empty((n, spec.n_inputs))
    for k, (dim, co) in enumerate(zip(spec.dims, spec.coords)):
        if co is not None:
            U[:, k] = co[rng.integers(len(co), size=n)]
        elif isinstance(dim, gt.Integer):
            U[:, k] = (rng.integers(dim.lo, dim.hi + 1, size=n) - dim.lo) / (dim.hi - dim.lo)
        else:
            U[:, k] = rng.random(n)
    return U


def enumerate_unit(spec: Spec) -> np.ndarray:
    """Every configuration of a listed space, as unit-cube coordinates (n, d)."""
    grids = np.meshgrid(*spec.coords, indexing="ij")
    return np.stack([g.ravel() for g in grids], axis=1)


def _optimum(obj: GeneratedObjective, i: int, U: np.ndarray) -> float:
    """Task i's latent minimum: over ``U`` (every configuration of a listed space; a dense sample
    otherwise, its best points then polished by L-BFGS-B over the real inputs, the others held)."""
    from scipy.optimize import minimize

    vals = obj.latent_unit(i, U)
    best = float(vals.min())
    real = [k for k, dim in enumerate(obj.spec.dims) if isinstance(dim, gt.Real)]
    if obj.spec.space_kind == "listed" or not real:
        return best
    for j in np.argsort(vals)[:POLISH_STARTS]:
        u0 = U[j].copy()

        def f(x: np.ndarray, u0: np.ndarray = u0) -> float:
            u = u0.copy()
            u[real] = x
            return float(obj.latent_unit(i, u[None, :])[0])

        res = minimize(f, u0[real], method="L-BFGS-B", bounds=[(0.0, 1.0)] * len(real))
        best = min(best, float(res.fun))
    return best


def generated(seed: int) -> dict[str, Any]:
    """The pieces of family ``gen:<seed>``: problem, tasks, f_opt, f_ref (latent), spec, objective."""
    spec = draw_spec(seed)
    obj = GeneratedObjective(spec)
    task_space = gt.Space([gt.Integer("task", 0, max(spec.n_tasks - 1, 1))])
    problem = gt.Problem(task_space, gt.Space(spec.dims), obj, name=f"{PREFIX}{seed}")
    tasks = [{"task": i} for i in range(spec.n_tasks)]
    stamp = hashlib.sha256(repr((GEN_STREAM, N_FEATURES, DENSE_SAMPLES, POLISH_STARTS, REFERENCE_SAMPLES,
                                 LISTED_MAX, spec.a.tolist())).encode()).hexdigest()[:12]
    cache = CACHE_DIR / f"{seed}-{stamp}.json"
    if cache.is_file():
        known = json.loads(cache.read_text())
        f_opt, f_ref = known["f_opt"], known["f_ref"]
        obj.spread[:] = known["spread"]
    else:
        rng = np.random.default_rng([GEN_STREAM, int(seed), 1])
        dense = enumerate_unit(spec) if spec.space_kind == "listed" else sample_unit(spec, rng, DENSE_SAMPLES)
        ref = dense[rng.integers(len(dense), size=REFERENCE_SAMPLES)] if spec.space_kind == "listed" \
            else dense[:REFERENCE_SAMPLES]
        f_opt, f_ref = [], []
        for i in range(spec.n_tasks):
            v = obj.latent_unit(i, ref)
            obj.spread[i] = float(np.std(v))
            f_ref.append(float(np.median(v)))
            f_opt.append(_optimum(obj, i, dense))
        CACHE_DIR.mkdir(exist_ok=True)
        tmp = cache.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"f_opt": f_opt, "f_ref": f_ref, "spread": obj.spread.tolist()}))
        tmp.replace(cache)
    return {"problem": problem, "tasks": tasks, "f_opt": f_opt, "f_ref": f_ref, "spec": spec, "objective": obj}


def describe(spec: Spec) -> str:
    """One line: inputs, tasks, kind, kernel, space, noise, own weight."""
    return (f"{spec.n_inputs} inputs, {spec.n_tasks} tasks, {spec.kind} ({spec.kernel}), {spec.space_kind}, "
            f"noise {spec.noise:g}, own weight up to {spec.c_max:g}")


def judged(kind: str | None = None, n: int = 10, max_tasks: int | None = None, max_inputs: int | None = None) -> list[str]:
    """The first ``n`` judged family names (of ``kind`` when given; at most ``max_tasks`` tasks and
    ``max_inputs`` inputs when given), in seed order."""
    out = []
    for seed in JUDGED_SEEDS:
        spec = draw_spec(seed)
        if (kind is None or spec.kind == kind) and (max_tasks is None or spec.n_tasks <= max_tasks) \
                and (max_inputs is None or spec.n_inputs <= max_inputs):
            out.append(f"{PREFIX}{seed}")
            if len(out) == n:
                break
    return out


def parse_name(name: str) -> int | None:
    """The seed of a ``gen:<seed>`` name, or None for any other name."""
    if not name.startswith(PREFIX):
        return None
    text = name[len(PREFIX):]
    if not text.isdigit():
        raise SystemExit(f"generated family {name!r}: expected {PREFIX}<seed>, a non-negative integer")
    return int(text)
