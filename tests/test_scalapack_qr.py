"""Tests of apps/scalapack_qr: the real PDGEQRF driver, its launcher, the problem and the cost model."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import gptask as gt
from apps.scalapack_qr import build as qr_build
from apps.scalapack_qr import costmodel, problem
from apps.scalapack_qr.cli import parse_kv
from apps.scalapack_qr.fit_model import fit
from apps.scalapack_qr.grid import configurations, read_csv
from apps.scalapack_qr.launcher import DEFAULT_COMMAND, Launcher, LaunchError, LaunchTimeout, clean_environment
from apps.scalapack_qr.memory import memory_per_process, numroc
from apps.scalapack_qr.problem import RESIDUAL_LIMIT, InfeasibleConfiguration

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "apps" / "scalapack_qr" / "data"


def reference_matrix(m: int, n: int, seed: int = 1) -> np.ndarray:
    """The driver's matrix, recomputed independently: splitmix64 of (seed, i, j) -> [-0.5, 0.5)."""
    u = np.uint64
    i = np.arange(m, dtype=np.uint64)[:, None]
    j = np.arange(n, dtype=np.uint64)[None, :]
    with np.errstate(over="ignore"):
        z = u(seed) * u(0x9E3779B97F4A7C15) + i * u(0xBF58476D1CE4E5B9) + j * u(0x94D049BB133111EB)
        z = (z ^ (z >> u(30))) * u(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> u(27))) * u(0x94D049BB133111EB)
        z = z ^ (z >> u(31))
    return (z >> u(11)).astype(np.float64) * (1.0 / 9007199254740992.0) - 0.5


@pytest.fixture(scope="module")
def driver() -> Path:
    return qr_build.build_driver()


def run_driver(driver: Path, args: list, nproc: int, nth: int = 1, timeout: float = 60.0) -> dict:
    return Launcher().run(driver, [str(a) for a in args], nproc=nproc, nth=nth, timeout=timeout)


# --- the driver -------------------------------------------------------------------------------

@pytest.mark.mpi
@pytest.mark.parametrize(
    "m,n,mb,nb,p,q",
    [(300, 300, 7, 5, 2, 1), (300, 300, 16, 32, 1, 2), (257, 257, 1, 3, 1, 1)],
)
def test_driver_factors_square_matrix_like_numpy(driver, m, n, mb, nb, p, q):
    rec = run_driver(driver, [m, n, mb, nb, p, q, 1, "--check"], nproc=p * q)
    assert rec["residual"] < RESIDUAL_LIMIT
    # independent reference: for square A, sum_j log|R_jj| = log|det A| (numpy, LAPACK LU)
    sign, logdet = np.linalg.slogdet(reference_matrix(m, n))
    assert rec["logabsdiag_r"] == pytest.approx(logdet, rel=1e-9)
    assert (rec["m"], rec["n"], rec["mb"], rec["nb"], rec["p"], rec["q"]) == (m, n, mb, nb, p, q)
    assert rec["time"] == min(rec["times"]) and rec["time"] > 0


@pytest.mark.mpi
@pytest.mark.parametrize("m,n,p,q", [(400, 150, 2, 1), (150, 400, 1, 2)])
def test_driver_factors_rectangular_matrices(driver, m, n, p, q):
    rec = run_driver(driver, [m, n, 16, 8, p, q, 2, "--check"], nproc=p * q)
    assert len(rec["times"]) == 2
    assert rec["residual"] < RESIDUAL_LIMIT
    # |prod R_jj| over k = min(m, n) columns: equals the product of singular values of A[:, :k]
    # when m >= n (R is then the triangular factor of A itself)
    if m >= n:
        sv = np.linalg.svd(reference_matrix(m, n), compute_uv=False)
        assert rec["logabsdiag_r"] == pytest.approx(np.sum(np.log(sv)), rel=1e-9)


@pytest.mark.mpi
def test_corrupted_factorisation_is_detected(driver):
    rec = run_driver(driver, [200, 200, 16, 16, 1, 2, 1, "--check", "--corrupt"], nproc=2)
    assert rec["corrupted"] is True
    assert rec["residual"] > 1e6 * RESIDUAL_LIMIT and rec["check_passed"] is False
    good = run_driver(driver, [200, 200, 16, 16, 1, 2, 1, "--check"], nproc=2)
    assert good["check_passed"] is True


def block_cyclic_count(n, nb, iproc, nprocs):
    """Independent reference for NUMROC: deal the blocks of n one by one to the processes."""
    return sum(min(nb, n - start) for k, start in enumerate(range(0, n, nb)) if k % nprocs == iproc)


def test_numroc_deals_blocks_like_the_block_cyclic_distribution():
    for n in (1, 7, 128, 257, 1000):
        for nb in (1, 3, 16, 256):
            for nprocs in (1, 2, 3, 4):
                assert [numroc(n, nb, i, 0, nprocs) for i in range(nprocs)] == \
                    [block_cyclic_count(n, nb, i, nprocs) for i in range(nprocs)]
                assert sum(numroc(n, nb, i, 0, nprocs) for i in range(nprocs)) == n


@pytest.mark.mpi
@pytest.mark.parametrize("m,n,mb,nb,p,q,repeats", [(500, 300, 32, 16, 1, 2, 2), (700, 500, 8, 64, 2, 1, 1),
                                                     (300, 700, 256, 4, 1, 1, 3), (257, 300, 5, 200, 2, 1, 1)])
def test_driver_memory_per_process_is_what_the_python_formula_says(driver, m, n, mb, nb, p, q, repeats):
    rec = run_driver(driver, [m, n, mb, nb, p, q, repeats, "--check"], nproc=p * q)
    assert rec["memory"] == memory_per_process(m, n, mb, nb, p, q, repeats)
    assert rec["check_passed"] is True and rec["memory_check"] > 0
    rows, cols = numroc(m, mb, 0, 0, p), numroc(n, nb, 0, 0, q)
    assert (rec["local_rows"], rec["local_cols"]) == (rows, cols)
    assert rec["lwork"] == nb * (rows + cols + nb) + 1  # ScaLAPACK's LWMIN, from PDGEQRF's own query


@pytest.mark.mpi
def test_real_objective_reports_time_and_memory_within_a_limit():
    pb = problem(repeats=1, memory_limit=2e6)
    assert pb.outputs.names == ("time", "memory") and str(pb.outputs.limits[0]) == "memory <= 2e+06"
    out = pb.objective({"m": 300, "n": 300}, {"mb": 16, "nb": 16, "nproc": 2, "p": 1, "nth": 1})
    assert set(out) == {"time", "memory"} and out["time"] > 0
    assert out["memory"] == memory_per_process(300, 300, 16, 16, 1, 2, 1)


@pytest.mark.mpi
def test_objective_rejects_a_wrong_factorisation():
    class CorruptingLauncher(Launcher):
        def run(self, driver, args, **kw):
            return super().run(driver, list(args) + ["--corrupt"], **kw)

    pb = problem(launcher=CorruptingLauncher(), repeats=1)
    with pytest.raises(LaunchError, match="residual check failed"):
        pb.objective({"m": 200, "n": 200}, {"mb": 16, "nb": 16, "nproc": 1, "p": 1, "nth": 1})


@pytest.mark.mpi
def test_driver_rejects_invalid_arguments_as_launch_error(driver):
    with pytest.raises(LaunchError, match="MB must be >= 1"):
        run_driver(driver, [100, 100, 0, 8, 1, 1, 1], nproc=1)
    with pytest.raises(LaunchError, match="P \\* Q must equal the number of MPI ranks"):
        run_driver(driver, [100, 100, 8, 8, 1, 2, 1], nproc=1)


# --- the launcher -----------------------------------------------------------------------------

def test_missing_launcher_program_is_a_clear_error(driver):
    with pytest.raises(LaunchError, match="could not start '/nonexistent/mpiexec'"):
        Launcher(["/nonexistent/mpiexec", "-n", "{nproc}"]).run(driver, [], nproc=1, nth=1)


def test_launch_without_json_output_is_an_error(driver):
    with pytest.raises(LaunchError, match="no JSON line"):
        Launcher(["/bin/echo", "hello"]).run(driver, [1, 2], nproc=1, nth=1)


def test_crashing_launch_is_an_error(driver):
    with pytest.raises(LaunchError, match="exit status 3"):
        Launcher(["/bin/sh", "-c", "echo boom >&2; exit 3", "sh"]).run(driver, [], nproc=1, nth=1)


def test_hanging_launch_is_killed_with_its_children(driver, tmp_path):
    marker = tmp_path / "child.pid"
    # the shell starts a long child and records its pid; the whole session must be killed
    script = f"sleep 60 & echo $! > {marker}; wait"
    with pytest.raises(LaunchTimeout, match="exceeded the timeout of 0.5 s"):
        Launcher(["/bin/sh", "-c", script, "sh"]).run(driver, [], nproc=1, nth=1, timeout=0.5)
    pid = int(marker.read_text())
    stat = Path(f"/proc/{pid}/stat")

    def gone() -> bool:  # the child is gone, or at most a zombie awaiting its reaper
        try:
            return stat.read_text().split(")")[1].split()[0] == "Z"
        except (FileNotFoundError, ProcessLookupError):
            return True

    deadline = time.monotonic() + 10  # SIGKILL is asynchronous: give the kernel a moment
    while not gone() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert gone()


@pytest.mark.mpi
def test_real_driver_timeout_becomes_launch_timeout(driver):
    with pytest.raises(LaunchTimeout):
        run_driver(driver, [2000, 2000, 1, 1, 1, 1, 5], nproc=1, timeout=0.3)


def test_launcher_template_substitution_and_validation():
    lz = Launcher(["srun", "-N", "{nodes}", "-n", "{nproc}", "-c", "{nth}"])
    assert lz.argv("/x/drv", [1, 2], nproc=4, nth=3, nodes=2) == [
        "srun", "-N", "2", "-n", "4", "-c", "3", "/x/drv", "1", "2"]
    with pytest.raises(TypeError, match="list of strings"):
        Launcher("mpiexec -n {nproc}")
    with pytest.raises(ValueError, match="must not be empty"):
        Launcher([])
    assert DEFAULT_COMMAND[0] == "/usr/bin/mpiexec.mpich"


def test_clean_environment_drops_parent_mpi_state():
    base = {"PMI_RANK": "0", "HYDI_CONTROL_FD": "5", "PATH": "/usr/bin", "OMP_NUM_THREADS": "8",
            "LD_LIBRARY_PATH": f"/opt/lib:{sys.prefix}/lib/python3/site-packages/mpich/lib",
            "LD_PRELOAD": "/x.so"}
    env = clean_environment(base, nth=2)
    assert "PMI_RANK" not in env and "HYDI_CONTROL_FD" not in env and "LD_PRELOAD" not in env
    assert env["LD_LIBRARY_PATH"] == "/opt/lib"
    assert env["OMP_NUM_THREADS"] == env["OPENBLAS_NUM_THREADS"] == "2"
    assert env["PATH"] == "/usr/bin"


# --- building ---------------------------------------------------------------------------------

def test_missing_compiler_names_the_debian_packages(monkeypatch):
    monkeypatch.setenv("GPTASK_MPICC", "/nonexistent/mpicc.mpich")
    with pytest.raises(qr_build.MissingDependency) as err:
        qr_build.build_driver()
    for pkg in ("mpich", "libscalapack-mpich-dev", "libopenblas0"):
        assert pkg in str(err.value)
    assert "apt-get install" in str(err.value)


def test_missing_scalapack_names_the_package(monkeypatch):
    monkeypatch.setattr(qr_build, "SCALAPACK_LIB_DIRS", ("/nonexistent",))
    with pytest.raises(qr_build.MissingDependency, match="libscalapack-mpich-dev"):
        qr_build.build_driver()


def test_changed_source_gets_a_new_executable(monkeypatch, tmp_path, driver):
    src = tmp_path / "pdgeqrf_driver.c"
    src.write_text(qr_build.SOURCE.read_text() + "\n/* changed */\n")
    before = qr_build.driver_path()
    assert before == driver and driver.exists()
    monkeypatch.setattr(qr_build, "SOURCE", src)
    assert qr_build.driver_path() != before


# --- the problem (paper Table 1) ---------------------------------------------------------------

def test_problem_spaces_and_constants_match_table_1():
    pb = problem(m_max=1500, nodes=2, cores=4)
    assert isinstance(pb, gt.Problem)
    assert pb.task_space.names == ["m", "n"]
    assert [(d.lo, d.hi) for d in pb.task_space] == [(128, 1500), (128, 1500)]
    assert pb.param_space.names == ["mb", "nb", "nproc", "p", "nth"]
    ps = pb.param_space
    assert (ps["mb"].lo, ps["mb"].hi, ps["mb"].log) == (1, 256, True)
    assert (ps["nb"].lo, ps["nb"].hi, ps["nb"].log) == (1, 256, True)
    assert (ps["nproc"].hi, ps["p"].hi, ps["nth"].hi) == (8, 8, 4)
    assert pb.constants == {"nodes": 2, "cores": 4}
    names = [c.__name__ for c in pb.constraints]
    assert names == ["nproc_divisible_by_p", "threads_fit_cores", "row_blocks_fit", "col_blocks_fit"]


def test_problem_constraints_behave_as_in_table_1():
    pb = problem(m_max=2000, nodes=1, cores=4)
    task = {"m": 500, "n": 300}
    ok = {"mb": 16, "nb": 32, "nproc": 4, "p": 2, "nth": 1}
    assert pb.is_feasible(task, ok)
    assert not pb.is_feasible(task, {**ok, "nproc": 3})              # 3 % 2 != 0
    assert not pb.is_feasible(task, {**ok, "nth": 2})                # 4 * 2 > 1 * 4
    assert not pb.is_feasible(task, {**ok, "mb": 256})               # 256 * 2 > 500
    assert not pb.is_feasible(task, {**ok, "nb": 151, "p": 2})       # 151 * 2 > 300
    assert pb.is_feasible(task, {**ok, "nb": 150})                   # 150 * 2 == 300
    over = problem(m_max=2000, nodes=1, cores=4, oversubscribe=True)
    assert over.is_feasible(task, {**ok, "nth": 2})
    assert "threads_fit_cores" not in [c.__name__ for c in over.constraints]


def test_objective_rejects_infeasible_configuration_naming_the_constraint():
    pb = problem(cores=2)
    with pytest.raises(InfeasibleConfiguration, match="threads_fit_cores: nproc \\* nth <= nodes \\* cores"):
        pb.objective({"m": 500, "n": 500}, {"mb": 8, "nb": 8, "nproc": 2, "p": 1, "nth": 2})
    with pytest.raises(ValueError, match="nproc_divisible_by_p"):
        pb.objective({"m": 500, "n": 500}, {"mb": 8, "nb": 8, "nproc": 1, "p": 2, "nth": 1})
    with pytest.raises(ValueError, match="mb=300 is outside \\[1, 256\\]"):
        pb.objective({"m": 500, "n": 500}, {"mb": 300, "nb": 8, "nproc": 1, "p": 1, "nth": 1})
    with pytest.raises(ValueError, match="missing \\['nth'\\]"):
        pb.objective({"m": 500, "n": 500}, {"mb": 8, "nb": 8, "nproc": 1, "p": 1})


def test_problem_argument_errors():
    with pytest.raises(ValueError, match="m_max must be >= 128"):
        problem(m_max=100)
    with pytest.raises(ValueError, match="backend must be 'real' or 'model'"):
        problem(backend="fast")
    with pytest.raises(ValueError, match="cores must be a positive integer"):
        problem(cores=0)


def test_grid_enumerates_exactly_the_feasible_discrete_space():
    pb = problem(cores=2)
    cfgs = configurations(pb, {"m": 500, "n": 500})
    # hand count: (nproc, p, nth) in {(1,1,1), (1,1,2), (2,1,1), (2,2,1)}; mb, nb in 1..256 (9 each);
    # p = 2 forbids mb = 256, q = 2 forbids nb = 256: 81 + 81 + 72 + 72
    assert len(cfgs) == 306
    assert all(pb.is_feasible({"m": 500, "n": 500}, c) for c in cfgs)


# --- the analytic MODEL (eq. 18-19) -------------------------------------------------------------

def test_eq19_counts_by_hand():
    # m=8, n=4, b=2, p=q=2 (nproc=4):
    # flops = 2*16*20/12 + 2*16/4 + 3*2*4*12/4 + 4*4/6 = 53.333 + 8 + 72 + 2.667 = 136
    # divisions = (32 - 8)/2 = 12; messages = 3*4*1 + (8/2)*1 = 16
    # words = (16/2 + 8)*1 + ((32 - 8)/2 + 4)*1 = 32
    c = costmodel.counts(8, 4, 2, 2, 2, 2)
    assert c["flops"] == pytest.approx(136.0)
    assert c["divisions"] == pytest.approx(12.0)
    assert c["messages"] == pytest.approx(16.0)
    assert c["words"] == pytest.approx(32.0)
    # one process: no communication; flops = 2 n^2 (3m - n)/3 + b n^2/2 + 3 b n (2m - n)/2 + b^2 n/3
    c1 = costmodel.counts(8, 4, 2, 2, 1, 1)
    assert (c1["messages"], c1["words"]) == (0.0, 0.0)
    assert c1["flops"] == pytest.approx(2 * 16 * 20 / 3 + 16 + 144 + 16 / 3)
    assert c1["divisions"] == pytest.approx(24.0)


def test_counts_extensions_reduce_to_eq19_and_reject_bad_input():
    base = costmodel.counts(1000, 600, 32, 32, 2, 3)
    # nth divides only the leading level-3 term
    two = costmodel.counts(1000, 600, 32, 32, 2, 3, nth=2)
    lead = 2 * 600**2 * (3 * 1000 - 600) / (3 * 6)
    assert two["flops"] == pytest.approx(base["flops"] - lead / 2)
    assert two["words"] == base["words"]
    with pytest.raises(ValueError, match="mb must be a positive integer"):
        costmodel.counts(100, 100, 0, 4, 1, 1)


def test_fit_recovers_known_unit_times():
    truth = {"flops": 2e-10, "divisions": 3e-9, "messages": 4e-6, "words": 5e-9}
    rows = [{"m": m, "n": n, "mb": b, "nb": b, "p": p, "nproc": p * q, "nth": 1}
            for m, n in ((500, 500), (1000, 700), (2000, 2000)) for b in (4, 32, 128)
            for p, q in ((1, 1), (1, 2), (2, 1), (2, 2))]
    model = costmodel.CostModel(truth)
    for r, t in zip(rows, model.predict_rows(rows)):
        r["time"] = t
    got = fit(rows)
    for k in truth:
        assert got[k] == pytest.approx(truth[k], rel=1e-6)


def test_model_backend_is_labelled_and_predicts_from_stored_fit():
    pb = problem(backend="model", cores=2)
    assert "MODEL" in pb.name
    t = pb.objective({"m": 1000, "n": 1000}, {"mb": 32, "nb": 32, "nproc": 2, "p": 1, "nth": 1})
    stored = json.loads(costmodel.COEFFICIENTS_FILE.read_text())
    expected = sum(costmodel.counts(1000, 1000, 32, 32, 1, 2)[f] * stored["unit_times"][f]
                   for f in costmodel.FACTORS)
    assert t == pytest.approx(expected) and t > 0
    with pytest.raises(InfeasibleConfiguration):
        pb.objective({"m": 1000, "n": 1000}, {"mb": 32, "nb": 32, "nproc": 2, "p": 1, "nth": 2})


def test_model_backend_reports_memory_and_limits_are_checked():
    pb = problem(backend="model", cores=2, memory_limit=3e6, repeats=2)
    params = {"mb": 32, "nb": 32, "nproc": 2, "p": 1, "nth": 1}
    out = pb.objective({"m": 1000, "n": 500}, params)
    assert out["memory"] == memory_per_process(1000, 500, 32, 32, 1, 2, 2)
    assert out["time"] == problem(backend="model", cores=2).objective({"m": 1000, "n": 500}, params)
    assert pb.outputs.objectives == ("time",) and pb.outputs.limits[0].bound == 3e6
    two = problem(backend="model", cores=2, memory_objective=True)
    assert two.outputs.objectives == ("time", "memory") and not two.outputs.limits
    assert problem(backend="model", cores=2).outputs is None
    with pytest.raises(ValueError, match="memory_limit must be a positive number"):
        problem(backend="model", cores=2, memory_limit=0)


def test_stored_grid_data_is_complete_and_described():
    path = DATA / "grid_m500_n500.csv"
    head = [ln for ln in path.read_text().splitlines() if ln.startswith("#")]
    assert any(ln.startswith("# cpu:") for ln in head)
    assert any(ln.startswith("# loadavg_1_5_15:") for ln in head)
    rows = read_csv(path)
    assert len(rows) == 306
    assert all(r["status"] == "complete" and r["time"] > 0 for r in rows)
    assert all(float(r["residual"]) < RESIDUAL_LIMIT for r in rows)


# --- command line -----------------------------------------------------------------------------

def test_parse_kv():
    assert parse_kv("m=500,n=2.5,alg=x") == {"m": 500, "n": 2.5, "alg": "x"}
    assert parse_kv(" a = -3 ") == {"a": -3}
    for bad in ("m", "m=", "=3", "m=1,m=2", "__import__('os')=1", ""):
        with pytest.raises(ValueError):
            parse_kv(bad)


def _cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "apps.scalapack_qr", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


@pytest.mark.mpi
def test_cli_evaluate_prints_one_json_line_with_time():
    out = _cli("evaluate", "--task", "m=400,n=300", "--params", "mb=16,nb=16,nproc=2,p=1,nth=1",
               "--repeats", "1")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert len(lines) == 1
    rec = json.loads(lines[0])
    assert rec["time"] > 0 and rec["backend"] == "real" and rec["residual"] < RESIDUAL_LIMIT


def test_cli_evaluate_infeasible_and_bad_syntax():
    out = _cli("evaluate", "--task", "m=400,n=300", "--params", "mb=16,nb=16,nproc=2,p=1,nth=2",
               "--cores", "2")
    assert out.returncode == 1
    assert "threads_fit_cores" in json.loads(out.stdout)["reason"]
    out = _cli("evaluate", "--task", "m400", "--params", "mb=16")
    assert out.returncode == 2 and "key=value" in out.stderr


# --- a short real tune ----------------------------------------

@pytest.mark.mpi
@pytest.mark.slow
def test_short_real_tune_on_two_tasks(tmp_path):
    pb = problem(m_max=600, repeats=1, timeout=30)
    res = gt.tune(pb, tasks=[{"m": 300, "n": 300}, {"m": 600, "n": 200}], budget=6, n_initial=4,
                  seed=0, history=str(tmp_path / "qr.sqlite"), progress=False)
    assert len(res.tasks) == 2
    for i in range(2):
        params, value = res.best(i)
        assert pb.is_feasible(res.tasks[i], params) and value > 0
    done = [h for h in res.history if h["status"] == "complete"]
    assert len(done) >= 8


def test_cli_tune_calls_gt_tune_per_contract(monkeypatch, capsys, tmp_path):
    """The tune command against the documented gt.tune / result.recommend contract (stand-ins
    record the calls)."""
    from apps.scalapack_qr import cli
    from gptask.results.recommend import Candidate, Recommendation

    calls = {"confirm": []}
    raw = {"mb": 32, "nb": 16, "nproc": 2, "p": 1, "nth": 1}
    rec = {"mb": 64, "nb": 8, "nproc": 2, "p": 2, "nth": 1}
    hand = {"mb": 64, "nb": 64, "nproc": 2, "p": 1, "nth": 1}

    class FakeResult:
        def __init__(self, tasks):
            self.tasks = tasks

        def best(self, i):
            return dict(raw), 0.5 + i

        def records(self, i):  # the raw best and the recommendation as measured while tuning
            return [{"params": dict(raw), "value": 0.5 + i}, {"params": dict(rec), "value": 0.6 + i}]

        def recommend(self, i, confirm=0, progress=True):
            calls["confirm"].append(confirm)
            cand = Candidate(dict(rec), 0.9 + i, 0.1, (1.0 + i,), (0.7 + i, 0.8 + i, 0.9 + i), ())
            # the hand default on task 0 only, re-launched with the candidates
            dflt = Candidate(dict(hand), 2.1, 0.1, (2.0,), (1.9, 2.0, 2.2), ()) if i == 0 else None
            return Recommendation(i, self.tasks[i], dict(rec), 0.9 + i, 0.1, "confirmed min", dict(raw),
                                  0.5 + i, (cand,) + ((dflt,) if dflt else ()), confirm, "min", dflt, "s")

        def default(self, i):  # the hand default measured on task 0 only
            return ({"mb": 64, "nb": 64, "nproc": 2, "p": 1, "nth": 1}, 2.0) if i == 0 else None

        def gain(self, i):
            return (2.0 - 0.5) / 2.0 if i == 0 else None

    def fake_tune(problem, tasks, budget, n_initial, seed, history, progress, **failure_policy):
        calls.update(problem=problem, tasks=tasks, budget=budget, n_initial=n_initial, seed=seed,
                     history=history)
        return FakeResult([{"m": 500, "n": 400}, {"m": 900, "n": 300}])

    monkeypatch.setattr(gt, "tune", fake_tune, raising=False)
    out_json = tmp_path / "best.json"
    rc = cli.main(["tune", "--tasks", "2", "--budget", "7", "--n-initial", "3", "--history",
                   str(tmp_path / "h.sqlite"), "--backend", "model", "--confirm", "3", "--out", str(out_json)])
    assert rc == 0
    assert calls["tasks"] == 2 and calls["budget"] == 7 and calls["n_initial"] == 3
    assert calls["history"] == str(tmp_path / "h.sqlite") and "MODEL" in calls["problem"].name
    assert calls["confirm"] == [3, 3]
    text = capsys.readouterr().out
    assert "analytic MODEL values" in text and "1.8" in text
    row = next(line.split() for line in text.splitlines() if line.split()[:3] == ["1", "900", "300"])
    assert row[3:8] == ["64", "8", "2", "2", "1"] and row[8] == "tuned"
    saved = json.loads(out_json.read_text())
    assert saved["best"][1]["time"] == 1.5 and saved["backend"] == "model" and saved["confirm"] == 3
    assert saved["recommended"][1]["params"] == rec and saved["recommended"][1]["time_median"] == 1.8
    assert saved["recommended"][1]["runs"] == 3 and saved["recommended"][1]["time_max"] == 1.9
    assert saved["recommended"][1]["time_min"] == 1.7
    assert "default (s)" in text and "gain" in text and "value (s)" in text
    assert saved["recommended"][0]["default"]["time"] == 1.9 and saved["recommended"][1]["default"] is None
    # like for like: the minimum of the re-launches of both, printed in percent
    assert saved["recommended"][0]["gain"] == pytest.approx((1.9 - 0.7) / 1.9)
    assert saved["recommended"][0]["gain_basis"] == "confirmation runs"
    assert f"{100 * (1.9 - 0.7) / 1.9:.1f} %" in text


def test_cli_tune_confirms_on_the_model_backend_and_resumes_without_rerunning(capsys, tmp_path):
    """End to end on the analytic backend: the confirmation launches are stored in the history
    (apart from the trials), and the same command again repeats no launch."""
    from apps.scalapack_qr import cli
    from gptask.data.storage import SQLiteStorage

    hist, out_json = tmp_path / "h.sqlite", tmp_path / "best.json"
    argv = ["tune", "--tasks", "2", "--budget", "6", "--n-initial", "4", "--m-max", "600", "--history", str(hist),
            "--backend", "model", "--confirm", "2", "--out", str(out_json), "--no-progress"]

    def stored():
        with SQLiteStorage(hist, read_only=True) as h:
            runs: dict = {}
            for r in h.confirmations():
                key = (r.task_index, tuple(sorted(r.params.items())))
                runs[key] = runs.get(key, 0) + 1
            return len(h.trials()), runs

    assert cli.main(argv) == 0
    n_trials, runs = stored()
    saved = json.loads(out_json.read_text())
    assert n_trials == 12 and set(runs.values()) == {2}
    assert sorted(len(r["candidates"]) for r in saved["recommended"]) == sorted(
        sum(key[0] == i for key in runs) for i in range(2))
    assert [r["runs"] for r in saved["recommended"]] == [2, 2]
    # again: no tuning launch, and no configuration confirmed twice over (the resumed model may rank
    # a new candidate into the top 3, which then gets its own 2 launches)
    assert cli.main(argv) == 0
    n_trials, runs = stored()
    assert n_trials == 12 and set(runs.values()) == {2}


def test_gptask_show_recommends_what_the_tune_command_printed(capsys, tmp_path):
    """One rule (issue 27): the app's table, its JSON and `gptask show` on its history name the same
    configuration per task, with the same gain over the hand default (re-launched with the
    candidates), in the same format (percent, seconds)."""
    import gptask.cli as gcli
    from apps.scalapack_qr import cli
    from gptask.core.labels import format_gain
    from gptask.data.storage import SQLiteStorage

    hist, out_json = tmp_path / "h.sqlite", tmp_path / "best.json"
    assert cli.main(["tune", "--tasks", "3", "--budget", "6", "--n-initial", "4", "--m-max", "800", "--history",
                     str(hist), "--backend", "model", "--confirm", "2", "--out", str(out_json), "--no-progress"]) == 0
    job = capsys.readouterr().out
    saved = json.loads(out_json.read_text())
    with SQLiteStorage(hist, read_only=True) as h:
        rows = gcli.recommendation_table(gcli.result_from_history(h))
        confirmations = h.confirmations()
    assert gcli.main(["show", str(hist)]) == 0
    shown = capsys.readouterr().out
    assert "unit: s" in shown and "value (s)" in shown and "value (s)" in job
    for i, rec in enumerate(saved["recommended"]):
        assert {k: rows[i][k] for k in rec["params"]} == rec["params"]
        assert rows[i]["gain"] == pytest.approx(rec["gain"]) and rec["gain_basis"] == "confirmation runs"
        # the hand default was re-launched as often as the candidates
        default = rec["default"]["params"]
        assert sum(r.task_index == i and dict(r.params) == default for r in confirmations) == 2
        assert format_gain(rec["gain"]) in job and format_gain(rec["gain"]) in shown


def test_counts_of_wide_matrices_stay_positive_and_match_lapack():
    # eq. 19 assumes m >= n; for m < n the sums run over k = min(m, n) eliminated columns.
    # Leading flops of an m x n Householder QR with m < n (LAPACK dgeqrf): 2 m^2 n - 2 m^3 / 3;
    # compare with a brute-force sum of 4 (m - j)(n - j) over the k elimination steps.
    m, n = 300, 1000
    brute = sum(4.0 * (m - j) * (n - j) for j in range(m))
    assert brute == pytest.approx(2 * m**2 * n - 2 * m**3 / 3, rel=1e-2)  # equal to leading order
    one = costmodel.counts(m, n, 1, 1, 1, 1)
    # with mb = nb = 1 the lower-order terms are O(k n); subtract them by hand
    lower = (n * m - m**2 / 2) + 3 * m * (2 * m - m) / 2 + m / 3
    assert one["flops"] - lower == pytest.approx(2 * m**2 * n - 2 * m**3 / 3)
    for mm, nn in ((128, 2000), (300, 1000), (999, 1000)):
        c = costmodel.counts(mm, nn, 32, 16, 2, 1)
        assert all(v > 0 for v in c.values()), (mm, nn, c)
    # continuity across m = n
    a, b = costmodel.counts(1000, 1000, 32, 32, 2, 1), costmodel.counts(999, 1000, 32, 32, 2, 1)
    assert all(b[f] == pytest.approx(a[f], rel=5e-3) for f in a)
