"""Tests of apps/mpi_collectives: catalogue, space, launcher failures and real MPICH runs.

Tests marked ``mpi`` launch the pip ``mpich`` wheel's mpiexec (next to sys.executable). None of
them asserts on timings: that algorithm and knob variables reach MPICH is checked through
MPICH's own reporting (fallback reports when a forced algorithm cannot apply, and the tree
dumps of MPIR_CVAR_COLL_TREE_DUMP), which does not depend on the machine's load.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import gptask as gt
from apps.mpi_collectives import (ALGORITHMS, COLLECTIVES, LaunchConfig, LaunchError,
                                  cvar_environment, evaluate, problem, run_benchmark)
from apps.mpi_collectives.algorithms import KNOB_GRID, KNOBS
from apps.mpi_collectives import fingerprint
from apps.mpi_collectives.cli import parse_kv
from apps.mpi_collectives import grid as grid_mod
from apps.mpi_collectives.grid import confirm, grid_params, read_csv, summarize, sweep, write_csv

ROOT = Path(__file__).resolve().parents[1]
MPIEXEC = Path(sys.executable).with_name("mpiexec")
needs_mpi = pytest.mark.skipif(not MPIEXEC.exists(), reason="no mpiexec next to this python")
QUICK = dict(target=0.02, min_iters=5, timeout=60.0)


# ---------------------------------------------------------------- pure functions


def test_parse_kv_converts_numbers_and_never_evaluates():
    assert parse_kv("coll=allreduce,size=65536,nprocs=4") == {
        "coll": "allreduce", "size": 65536, "nprocs": 4}
    assert parse_kv("x=1.5,y=__import__('os')") == {"x": 1.5, "y": "__import__('os')"}
    for bad in ("size", "size=", "=3", "a=1,a=2"):
        with pytest.raises(ValueError):
            parse_kv(bad)


def test_cvar_environment_passes_only_active_knobs():
    assert cvar_environment("allreduce", {"algorithm": "auto", "kval": 4}) == {}
    assert cvar_environment("allreduce", {"algorithm": "ring", "kval": 4, "chunk": 999}) == {
        "MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM": "ring"}
    env = cvar_environment("allreduce", {"algorithm": "tree", "kval": 3, "tree_type": "knomial_2",
                                         "chunk": 65536})
    assert env == {"MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM": "tree",
                   "MPIR_CVAR_ALLREDUCE_TREE_KVAL": "3",
                   "MPIR_CVAR_ALLREDUCE_TREE_TYPE": "knomial_2",
                   "MPIR_CVAR_ALLREDUCE_TREE_PIPELINE_CHUNK_SIZE": "65536"}
    assert cvar_environment("alltoall", {"algorithm": "k_brucks", "kval": 5, "tree_type": "kary"}) == {
        "MPIR_CVAR_ALLTOALL_INTRA_ALGORITHM": "k_brucks", "MPIR_CVAR_ALLTOALL_BRUCKS_KVAL": "5"}


@pytest.mark.parametrize("coll,params,exc", [
    ("allreduce", {"algorithm": "rong"}, ValueError),
    ("reduce", {"algorithm": "ring"}, ValueError),            # ring exists for allreduce only
    ("allreduce", {"algorithm": "tree", "tree_type": "binary"}, ValueError),
    ("allreduce", {"algorithm": "tree", "kval": 1}, ValueError),
    ("allreduce", {"algorithm": "tree", "kval": "3"}, TypeError),
    ("gather", {"algorithm": "auto"}, ValueError),
    ("allreduce", {"kval": 2}, ValueError),
])
def test_bad_parameters_are_clear_errors(coll, params, exc):
    with pytest.raises(exc):
        cvar_environment(coll, params)


def test_bad_algorithm_is_rejected_before_any_launch(tmp_path):
    # a launcher that cannot start: reaching it would raise FileNotFoundError, not ValueError
    cfg = LaunchConfig(template=[str(tmp_path / "no-such-launcher")])
    with pytest.raises(ValueError, match="not available for allreduce"):
        evaluate({"coll": "allreduce", "size": 64, "nprocs": 2}, {"algorithm": "bogus"}, cfg)
    obj = problem(colls=["allreduce"], config=cfg).objective
    with pytest.raises(ValueError, match="bogus"):
        obj({"size": 64, "nprocs": 2}, {"algorithm": "bogus", "kval": 2, "tree_type": "kary",
                                        "chunk": 8192})
    with pytest.raises(ValueError, match="coll"):
        evaluate({"coll": "gather", "size": 64, "nprocs": 2}, {"algorithm": "auto"}, cfg)


def test_grid_is_complete_and_without_duplicates():
    for coll in COLLECTIVES:
        grid = grid_params(coll)
        # independent count: one run per algorithm times the grid of the knobs it reads
        expected = 0
        for alg in ALGORITHMS[coll]:
            n = 1
            for knob in KNOBS.get((coll, alg), {}):
                n *= len(KNOB_GRID[knob])
            expected += n
        assert len(grid) == expected
        keys = {json.dumps(p, sort_keys=True) for p in grid}
        assert len(keys) == len(grid)
        assert grid[0]["algorithm"] == "auto"
        space = problem(colls=[coll]).param_space
        for p in grid:
            space.validate(p)  # raises if outside the space
    # allreduce tree: 3 radices x 3 tree types x 4 chunks
    assert sum(p["algorithm"] == "tree" for p in grid_params("allreduce")) == 36


def test_problem_spaces_and_constraint():
    p = problem()
    assert p.task_space.names == ["coll", "size", "nprocs"]
    assert p.param_space.names == ["algorithm", "kval", "tree_type", "chunk"]
    base = {"kval": 2, "tree_type": "kary", "chunk": 8192}
    task = {"coll": "reduce", "size": 1024, "nprocs": 2}
    assert p.is_feasible(task, {"algorithm": "binomial", **base})
    assert not p.is_feasible(task, {"algorithm": "ring", **base})  # not a reduce algorithm
    assert p.is_feasible({**task, "coll": "allreduce"}, {"algorithm": "ring", **base})
    single = problem(colls=["bcast"], max_size=1 << 20, max_procs=3)
    assert single.task_space.names == ["size", "nprocs"]
    assert single.constants == {"coll": "bcast"}
    assert single.param_space["algorithm"].choices == list(ALGORITHMS["bcast"])
    with pytest.raises(ValueError):
        problem(colls=["gather"])
    with pytest.raises(ValueError):
        problem(colls="scatter")
    assert problem(colls="allreduce").constants == {"coll": "allreduce"}  # one collective by name


def test_csv_round_trip_keeps_header_and_values(tmp_path):
    rows = [{"coll": "allreduce", "size": 64, "nprocs": 2, "algorithm": "ring", "kval": 2,
             "tree_type": "kary", "chunk": 8192, "repeat": 0, "status": "complete",
             "time": 1.5e-5, "min": 1.5e-5, "median": 2e-5, "p25": 1.7e-5, "p75": 2.1e-5,
             "n_iter": 100, "fallbacks": 0, "loadavg1": 1.25, "reason": "", "phase": "sweep"}]
    path = tmp_path / "g.csv"
    write_csv(str(path), rows, {"cpu": "test cpu", "loadavg": "1.0 2.0 3.0"})
    header, back = read_csv(str(path))
    assert header == {"cpu": "test cpu", "loadavg": "1.0 2.0 3.0"}
    assert back == rows


def test_summarize_takes_min_over_repeats_and_reports_gain():
    def row(alg, t, status="complete", kval=2):
        return {"coll": "allreduce", "size": 64, "nprocs": 4, "algorithm": alg, "kval": kval,
                "tree_type": "kary", "chunk": 8192, "status": status, "time": t}
    rows = [row("auto", 2.0), row("ring", 0.6), row("tree", None, "failed"), row("auto", 1.0),
            row("ring", 0.5), row("recexch", 0.8, kval=3), row("recexch", 1.5, kval=2)]
    s = summarize(rows)
    assert s["best"]["algorithm"] == "ring" and s["best"]["time"] == 0.5
    assert s["default_time"] == 1.0 and s["gain_over_default"] == pytest.approx(0.5)
    assert s["default_rank"] == 3  # ring 0.5 and recexch(k=3) 0.8 beat auto 1.0
    assert s["configs"] == 5 and s["failed_configs"] == 1


def test_confirm_remeasures_top_configs_and_default(monkeypatch):
    true_time = {"ring": 1.0, "recexch": 2.0, "tree": 3.0, "nb": 4.0, "auto": 5.0}
    calls = []

    def fake_evaluate(task, params, config=None, multi_node=False):
        calls.append(params["algorithm"])
        t = true_time[params["algorithm"]]
        return {"time": t, "min": t, "median": t, "p25": t, "p75": t, "n_iter": 20, "fallbacks": 0}

    monkeypatch.setattr(grid_mod, "evaluate", fake_evaluate)
    sweep_rows = [{"coll": "allreduce", "size": 64, "nprocs": 4, "algorithm": a, "kval": 2,
                   "tree_type": "kary", "chunk": 8192, "status": "complete", "phase": "sweep",
                   # the sweep was noisy: tree looked best, ring looked worse than it is
                   "time": {"ring": 2.5, "recexch": 2.0, "tree": 0.5, "nb": 9.0, "auto": 6.0}[a]}
                  for a in true_time]
    extra = confirm(sweep_rows, top=3, repeats=2)
    assert calls == ["tree", "recexch", "ring", "auto"] * 2  # top 3 of the sweep + auto, round-robin
    assert all(r["phase"] == "confirm" for r in extra)
    s = summarize(sweep_rows + extra)
    assert s["best"]["algorithm"] == "tree"                # the sweep alone is fooled
    assert s["confirmed_best"]["algorithm"] == "ring"      # the confirmation is not
    assert s["confirmed_gain_min"] == pytest.approx(1 - 1.0 / 5.0)
    assert s["confirmed_default"]["runs"] == 2


# ---------------------------------------------------------------- launcher failures


def test_crash_and_garbage_output_raise_with_reason():
    crash = LaunchConfig(template=[sys.executable, "-c", "import sys; sys.exit(3)"])
    with pytest.raises(LaunchError, match="exited with status 3"):
        run_benchmark("allreduce", 64, 2, {}, crash)
    garbage = LaunchConfig(template=[sys.executable, "-c", "print('time: fast'); print('{{\"time\": -1}}')"])
    with pytest.raises(LaunchError, match="no JSON line"):
        run_benchmark("allreduce", 64, 2, {}, garbage)
    with pytest.raises(ValueError, match="placeholder"):
        LaunchConfig(template=["{mpirun}"])


@pytest.mark.mpi
@needs_mpi
def test_hung_mpi_job_times_out_and_is_killed():
    # rank 0 sleeps, the other rank waits for it in a barrier: a real hung MPI job
    hang = ("from mpi4py import MPI; import time; c = MPI.COMM_WORLD; "
            "time.sleep(600) if c.rank == 0 else c.Barrier()")
    cfg = LaunchConfig(template=["{mpiexec}", "-n", "{nprocs}", "{python}", "-c", hang], timeout=4)
    with pytest.raises(LaunchError, match="timed out after 4 s") as info:
        run_benchmark("allreduce", 64, 2, {}, cfg)
    assert isinstance(info.value, RuntimeError)
    with pytest.raises(ProcessLookupError):  # nothing of the job's process group survives
        os.killpg(info.value.pgid, 0)


# ---------------------------------------------------------------- real MPICH runs


@pytest.mark.mpi
@needs_mpi
@pytest.mark.parametrize("nprocs", [2, 4])
def test_benchmark_runs_every_collective(nprocs):
    cfg = LaunchConfig(**QUICK)
    for coll in COLLECTIVES:
        res = run_benchmark(coll, 4096, nprocs, {}, cfg)
        assert res["coll"] == coll and res["nprocs"] == nprocs and res["bytes"] == 4096
        assert 0 < res["min"] <= res["p25"] <= res["median"] <= res["p75"]
        assert res["time"] == res["min"]
        assert res["n_iter"] >= cfg.min_iters and res["fallbacks"] == 0


@pytest.mark.mpi
@needs_mpi
def test_algorithm_variable_reaches_mpich():
    """MPICH's recursive-doubling allgather needs a power-of-two rank count (its documented
    restriction): forced on 3 ranks MPICH reports a fallback, on 4 ranks it runs as asked,
    and ring (no restriction) runs on 3."""
    cfg = LaunchConfig(**QUICK)
    task = {"coll": "allgather", "size": 1024}
    with pytest.raises(LaunchError, match="could not apply"):
        evaluate({**task, "nprocs": 3}, {"algorithm": "recursive_doubling"}, cfg)
    ok = evaluate({**task, "nprocs": 4}, {"algorithm": "recursive_doubling"}, cfg)
    assert ok["fallbacks"] == 0
    assert evaluate({**task, "nprocs": 3}, {"algorithm": "ring"}, cfg)["fallbacks"] == 0
    lenient = LaunchConfig(allow_fallback=True, **QUICK)
    rec = evaluate({**task, "nprocs": 3}, {"algorithm": "recursive_doubling"}, lenient)
    assert rec["fallbacks"] > 0 and rec["time"] > 0
    # reduce_scatter_allgather needs at least as many elements as ranks: 1 double on 2 ranks fails
    with pytest.raises(LaunchError, match="could not apply"):
        evaluate({"coll": "allreduce", "size": 8, "nprocs": 2},
                 {"algorithm": "reduce_scatter_allgather"}, cfg)


@pytest.mark.mpi
@needs_mpi
@pytest.mark.parametrize("kval", [2, 3])
def test_tree_knobs_reach_mpich(tmp_path, kval):
    """With MPIR_CVAR_COLL_TREE_DUMP each rank writes the tree it used; for a k-ary tree rooted
    at 0 the children of rank r are k*r+1 .. k*r+k (those below the rank count)."""
    cfg = LaunchConfig(cwd=str(tmp_path), env={"MPIR_CVAR_COLL_TREE_DUMP": "1"}, **QUICK)
    evaluate({"coll": "allreduce", "size": 4096, "nprocs": 4},
             {"algorithm": "tree", "kval": kval, "tree_type": "kary", "chunk": 1 << 20}, cfg)
    for r in range(4):
        dump = json.loads((tmp_path / f"colltree{r}.json").read_text())
        expected = [c for c in range(kval * r + 1, kval * r + kval + 1) if c < 4]
        assert dump["rank"] == r and dump["children"] == expected
        assert dump["parent"] == (-1 if r == 0 else (r - 1) // kval)


@pytest.mark.mpi
@needs_mpi
@pytest.mark.skipif(not fingerprint.available(), reason="strace missing or not allowed to trace")
def test_radix_knob_changes_the_message_pattern():
    """Recursive exchange with radix k on P = k**m ranks takes m steps with k-1 partners each:
    on 4 ranks k=2 gives 2 x 1 = 2 messages per rank and call, k=4 gives 1 x 3 = 3. Counted
    from the intranode single-copy transfers (one process_vm_readv per message >= 8 KiB)."""
    task = {"coll": "allreduce", "size": 1 << 18, "nprocs": 4}
    cfg = LaunchConfig(timeout=120.0)
    for k, expected in ((2, 2.0), (4, 3.0)):
        got = fingerprint.messages_per_call(task, {"algorithm": "recexch", "kval": k}, n1=4, n2=12,
                                            config=cfg)
        assert got == expected, (k, got)


@pytest.mark.mpi
@needs_mpi
def test_cli_evaluate_prints_one_json_line():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "apps.mpi_collectives", "evaluate",
           "--task", "coll=allreduce,size=65536,nprocs=2", "--params", "algorithm=ring",
           "--target", "0.03"]
    out = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert len(lines) == 1
    rec = json.loads(lines[0])
    assert rec["time"] > 0 and rec["cvars"] == {"MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM": "ring"}
    bad = subprocess.run(cmd[:-4] + ["--params", "algorithm=rong"], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "rong" in bad.stderr


@pytest.mark.mpi
@needs_mpi
def test_sweep_records_failures_and_successes():
    cfg = LaunchConfig(**QUICK)
    rows = sweep({"coll": "reduce", "size": 8, "nprocs": 2}, cfg)
    by_alg = {r["algorithm"]: r for r in rows}
    assert set(by_alg) == set(ALGORITHMS["reduce"])
    # 1 element cannot be reduce-scattered over 2 ranks: MPICH refuses, the row says why
    assert by_alg["reduce_scatter_gather"]["status"] == "failed"
    assert "could not apply" in by_alg["reduce_scatter_gather"]["reason"]
    assert all(by_alg[a]["status"] == "complete" for a in ("auto", "binomial", "nb"))


def test_cli_tune_calls_gptask_tune_per_the_contract(monkeypatch, capsys, tmp_path):
    seen = {}

    class FakeResult:
        tasks = [{"size": 1024, "nprocs": 2}, {"size": 65536, "nprocs": 4}]

        def best(self, i):
            return {"algorithm": "ring", "kval": 2, "tree_type": "kary", "chunk": 8192}, 1e-4 * (i + 1)

    def fake_tune(problem, tasks, budget, n_initial, seed, history, repeats, aggregate, **progress_and_failures):
        seen.update(problem=problem, tasks=tasks, budget=budget, n_initial=n_initial, seed=seed,
                    history=history, repeats=repeats, aggregate=aggregate)
        return FakeResult()

    monkeypatch.setattr(gt, "tune", fake_tune, raising=False)
    from apps.mpi_collectives.cli import main
    hist = str(tmp_path / "h.sqlite")
    assert main(["tune", "--colls", "allreduce", "--tasks", "2", "--budget", "7", "--history", hist,
                 "--max-procs", "4", "--repeats", "2"]) == 0
    assert isinstance(seen["problem"], gt.Problem)
    assert seen["problem"].task_space.names == ["size", "nprocs"]
    assert (seen["tasks"], seen["budget"], seen["history"]) == (2, 7, hist)
    assert (seen["repeats"], seen["aggregate"]) == (2, "min")
    lines = [json.loads(x) for x in capsys.readouterr().out.strip().splitlines()]
    assert [x["task"] for x in lines] == FakeResult.tasks
    assert lines[1]["best"]["algorithm"] == "ring" and lines[1]["time"] == pytest.approx(2e-4)
    assert lines[1]["best_is_default"] is False


def test_compare_default_recommends_like_for_like_and_labels_the_default(monkeypatch, capsys, tmp_path):
    """--compare-default (issue 27): the recommendation and its gain come from re-launches of the
    candidates and of MPICH's default (algorithm=auto) made round robin; when auto wins it is
    labelled as the default and the gain is 0 (not a gain of the default over itself). The launches
    are stood in for by a deterministic time per algorithm: auto is fastest on the small message,
    every other algorithm twice as fast as auto on the large one."""
    from apps.mpi_collectives import objective as objective_mod
    from apps.mpi_collectives.cli import main
    from gptask.data.storage import SQLiteStorage

    launches = []

    def fake_evaluate(task, params, config=None, multi_node=False):
        launches.append((task["size"], params["algorithm"]))
        slow = 1e-4 * (1 + task["size"] / 65536)
        if task["size"] == 1024:
            return {"time": slow / 2 if params["algorithm"] == "auto" else slow}
        return {"time": slow if params["algorithm"] == "auto" else slow / 2}

    monkeypatch.setattr(objective_mod, "evaluate", fake_evaluate)
    hist = tmp_path / "h.sqlite"
    assert main(["tune", "--colls", "allreduce", "--task", "size=1024,nprocs=2", "--task", "size=65536,nprocs=2",
                 "--budget", "8", "--n-initial", "6", "--history", str(hist), "--compare-default",
                 "--no-progress"]) == 0
    small, large = [json.loads(x) for x in capsys.readouterr().out.strip().splitlines()]
    with SQLiteStorage(hist, read_only=True) as h:
        runs = h.confirmations()
    for i, line in enumerate((small, large)):
        mine = [r for r in runs if r.task_index == i]
        auto = [r.value for r in mine if r.params["algorithm"] == "auto" and r.params == line["default"]["params"]]
        assert len(auto) == 3 and line["default"]["time"] == min(auto) and line["runs"] == 3
    assert small["is_default"] and small["recommended"]["algorithm"] == "auto"
    assert small["recommended_label"] == "MPICH's default (algorithm=auto)" and small["gain_over_default"] == 0.0
    assert not large["is_default"] and large["recommended"]["algorithm"] != "auto"
    picked = [r.value for r in runs if r.task_index == 1 and r.params == large["recommended"]]
    assert large["recommended_time"] == min(picked)
    assert large["gain_over_default"] == pytest.approx((large["default"]["time"] - min(picked)) / large["default"]["time"])
    assert large["gain_basis"] == "confirmation runs" and large["gain_over_default"] == pytest.approx(0.5)


@pytest.mark.mpi
@needs_mpi
def test_short_real_tune():
    tune = gt.tune
    prob = problem(colls=["allreduce"], max_size=1 << 16, max_procs=2,
                   config=LaunchConfig(**QUICK))
    tasks = [{"size": 1024, "nprocs": 2}, {"size": 65536, "nprocs": 2}]
    result = tune(prob, tasks=tasks, budget=3, n_initial=2, seed=0, progress=False)
    assert len(result.tasks) == 2
    assert len(result.history) == 6
    for i in range(2):
        params, value = result.best(i)
        assert params["algorithm"] in ALGORITHMS["allreduce"] and 0 < value < 1
    for rec in result.history:
        assert rec["status"] in ("complete", "failed")
        if rec["status"] == "failed":
            assert rec["reason"]
