"""Packing a campaign into a Slurm allocation (issue 42), measured on the local Slurm
(``scripts/slurm_local.sh start``: 4 "nodes" n1..n4, each one CPU slot of this host).

One fixed campaign of ``--trials`` runs, each needing 1, 2 or 4 nodes (uniform) for a log-normal
time (median ``--median`` s, sigma 0.9), seeded, the same runs in every mode:

* ``steps``: :class:`gptask.tuning.cluster.SlurmSteps` in one 4-node allocation, fed in proposal order
  keeping ``nodes + lookahead`` runs submitted (what the asynchronous loop does); the next run is the
  first of the next ``lookahead`` waiting ones that fits the free nodes;
* ``steps-order``: the same with ``lookahead=1`` (runs start strictly in proposal order);
* ``sync``: synchronous batches through the same executor: a batch is the next runs that fit the 4
  nodes at once, started together; the next batch when its last run ends;
* ``jobs``: one Slurm job per run through :class:`gptask.tuning.cluster.jobs.SlurmJobs` (submitit), at
  most 4 queued or running, on the whole 4-node cluster (no allocation held).

Every run sleeps (no CPU: the 4 "nodes" share 2 cores) and each of its ranks writes its node and
its own start and end time; utilisation is busy node-seconds / (4 nodes x campaign wall time), the
wall time from the first submission to the last result. Also: the same policies simulated for 8
nodes x 200 runs (what the issue quotes), the overhead of a trivial step and of a trivial job
(median over ``--overhead-runs``), and a campaign job (``gptask slurm-script``, sbatch --requeue)
signalled USR1 three times, whose run count must come out exact.

Run from the repository root, the local Slurm idle::

    PYTHONPATH=. python bench/slurm_packing.py --out bench/results/cluster.json
"""

from __future__ import annotations

import argparse
import datetime
import heapq
import json
import logging
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gptask.tuning.cluster import Allocation, SlurmSteps, current_step  # noqa: E402
from gptask.evaluation.evaluate import Evaluator, run_job  # noqa: E402
from gptask.data.trials import Status  # noqa: E402

SIGMA = 0.9
NEEDS = (1, 2, 4)


def campaign(n: int, median: float, seed: int) -> list[tuple[int, float]]:
    """``n`` runs as (nodes, seconds): nodes uniform in 1, 2, 4; seconds log-normal."""
    rng = np.random.default_rng(seed)
    return [(int(k), float(t)) for k, t in zip(rng.choice(NEEDS, n), median * rng.lognormal(0.0, SIGMA, n))]


# ---------------------------------------------------------------- simulation (8 nodes x 200 runs)
def simulate_pack(runs: list[tuple[int, float]], nodes: int, lookahead: int, max_passes: int) -> float:
    """Wall time of ``runs`` started by SlurmSteps' rule (the first of the next ``lookahead``
    waiting runs that fits the free nodes; a head passed over ``max_passes`` times waits)."""
    free, t, running, queue, passes = nodes, 0.0, [], list(range(len(runs))), [0] * len(runs)
    while queue or running:
        started = True
        while started and queue:
            started = False
            head = queue[0]
            for j in (queue[:1] if passes[head] >= max_passes else queue[:lookahead]):
                if runs[j][0] <= free:
                    passes[head] += j != head
                    queue.remove(j)
                    free -= runs[j][0]
                    heapq.heappush(running, (t + runs[j][1], j))
                    started = True
                    break
        t, j = heapq.heappop(running)
        free += runs[j][0]
    return t


def batches(runs: list[tuple[int, float]], nodes: int) -> list[list[int]]:
    """Synchronous batches: the next runs (in order) that fit ``nodes`` at once."""
    out, i = [], 0
    while i < len(runs):
        used, batch = 0, []
        while i < len(runs) and used + runs[i][0] <= nodes:
            used += runs[i][0]
            batch.append(i)
            i += 1
        out.append(batch)
    return out


def simulate(nodes: int = 8, n: int = 200, seeds: int = 20) -> dict:
    res: dict[str, list[float]] = {"sync": [], "order": [], "lookahead 4": [], "lookahead 8": []}
    for seed in range(seeds):
        runs = campaign(n, 1.0, seed)
        work = sum(k * t for k, t in runs)
        res["sync"].append(work / (nodes * sum(max(runs[j][1] for j in b) for b in batches(runs, nodes))))
        res["order"].append(work / (nodes * simulate_pack(runs, nodes, 1, 2 * nodes)))
        for la in (4, 8):
            res[f"lookahead {la}"].append(work / (nodes * simulate_pack(runs, nodes, la, 2 * nodes)))
    return {k: round(float(np.mean(v)), 3) for k, v in res.items()}


# ---------------------------------------------------------------- measured on the local Slurm
def salloc(nodes: int, minutes: int) -> Allocation:
    done = subprocess.run(["salloc", "--no-shell", "--no-kill", f"-N{nodes}", f"--time={minutes}",
                           "-J", "gptask-bench"], capture_output=True, text=True, timeout=300)
    job = next((w for line in done.stderr.splitlines() if "Granted job allocation" in line
                for w in line.split() if w.isdigit()), None)
    if job is None:
        sys.exit(f"salloc failed: {done.stderr}")
    nodelist = subprocess.run(["squeue", "-h", "-j", job, "-o", "%N"], capture_output=True, text=True).stdout.strip()
    names = subprocess.run(["scontrol", "show", "hostnames", nodelist], capture_output=True, text=True).stdout.split()
    return Allocation(job, tuple(names))


def step_sleep(task, params):
    """Sleep params['t'] seconds as a step; each rank logs 'node start end step'."""
    step = current_step()
    cmd = ('s=$(date +%s.%N); sleep ' + f"{params['t']:.3f}" + '; echo "$SLURMD_NODENAME $s $(date +%s.%N) '
           + step.name + '" >> ' + params["log"])
    step.run(["bash", "-c", cmd])
    return 0.0


def job_sleep(task, params):
    """Sleep params['t'] seconds in this task of a Slurm job; logs 'node start end job'."""
    s = time.time()
    time.sleep(params["t"])
    with open(params["log"], "a") as f:
        f.write(f"{os.environ.get('SLURMD_NODENAME', '?')} {s} {time.time()} {os.environ.get('SLURM_JOB_ID')}\n")
    return 0.0


def busy_seconds(log: Path) -> float:
    return sum(float(e) - float(s) for _, s, e, _ in (ln.split() for ln in log.read_text().splitlines()))


def run_steps(alloc: Allocation, runs, log: Path, lookahead: int) -> float:
    """Wall seconds of ``runs`` fed to SlurmSteps keeping nodes + lookahead submitted."""
    ev = Evaluator(step_sleep)
    with SlurmSteps(resources=lambda t, p: {"nodes": p["n"]}, allocation=alloc, lookahead=lookahead) as ex:
        slots = threading.Semaphore(ex.max_in_flight)
        futures = []
        t0 = time.time()
        for k, t in runs:
            slots.acquire()
            f = ex.submit(run_job, ev.job({}, {"n": k, "t": t, "log": str(log)}))
            f.add_done_callback(lambda _: slots.release())
            futures.append(f)
        outs = [f.result() for f in futures]
        wall = time.time() - t0
    bad = [o.outcome.reason for o in outs if o.outcome is None or o.outcome.status is not Status.COMPLETE]
    if bad:
        sys.exit(f"failed runs: {bad[:3]}")
    return wall


def run_sync(alloc: Allocation, runs, log: Path) -> float:
    ev = Evaluator(step_sleep)
    with SlurmSteps(resources=lambda t, p: {"nodes": p["n"]}, allocation=alloc) as ex:
        t0 = time.time()
        for b in batches(runs, len(alloc.nodes)):
            fs = [ex.submit(run_job, ev.job({}, {"n": runs[j][0], "t": runs[j][1], "log": str(log)})) for j in b]
            for f in fs:
                assert f.result().outcome.status is Status.COMPLETE, f.result().outcome.reason
        return time.time() - t0


def run_jobs(runs, log: Path, folder: Path, nodes: int) -> float:
    """One job per run through SlurmJobs (one executor per node count), at most ``nodes`` at once."""
    from gptask.tuning.cluster.jobs import SlurmJobs

    ev = Evaluator(job_sleep)
    # array=False: plain jobs, as measured in bench/results/cluster.md (arrays spare the scheduler
    # submissions; a lone trial would wait ARRAY_GATHER_S for company)
    exs = {k: SlurmJobs(folder / f"n{k}", max_jobs=nodes, nodes=k, tasks_per_node=1, timeout_min=10, array=False)
           for k in NEEDS}
    slots = threading.Semaphore(nodes)
    futures = []
    t0 = time.time()
    for k, t in runs:
        slots.acquire()
        f = exs[k].submit(run_job, ev.job({}, {"n": k, "t": t, "log": str(log)}))
        f.add_done_callback(lambda _: slots.release())
        futures.append(f)
    outs = [f.result() for f in futures]
    wall = time.time() - t0
    for ex in exs.values():
        ex.shutdown()
    bad = [o.outcome.reason for o in outs if o.outcome.status is not Status.COMPLETE]
    if bad:
        sys.exit(f"failed jobs: {bad[:3]}")
    return wall


def overheads(alloc: Allocation, folder: Path, n: int) -> dict:
    """Median wall seconds of a trivial step (``true`` through SlurmSteps, submit to result) and of a
    trivial job (SlurmJobs, submit to result)."""
    from gptask.tuning.cluster.jobs import SlurmJobs

    ev = Evaluator(lambda task, params: current_step().run(["true"]) and 0.0)
    steps = []
    with SlurmSteps(allocation=alloc) as ex:
        for i in range(n):
            t0 = time.time()
            assert ex.submit(run_job, ev.job({}, {"i": i})).result().outcome.status is Status.COMPLETE
            steps.append(time.time() - t0)
    subprocess.run(["scancel", alloc.job_id])
    time.sleep(2)
    from bench_slurm_trivial import trivial  # noqa: F401 - importable by the jobs (see main)
    jobs = []
    with SlurmJobs(folder / "overhead", max_jobs=1, nodes=1, timeout_min=5, array=False) as ex:
        evj = Evaluator(trivial)
        for i in range(n):
            t0 = time.time()
            out = ex.submit(run_job, evj.job({}, {"i": i})).result()
            assert out.outcome.status is Status.COMPLETE, out.outcome.reason
            jobs.append(time.time() - t0)
    return {"step_s": round(statistics.median(steps), 3), "job_s": round(statistics.median(jobs), 3),
            "steps": [round(s, 2) for s in steps], "jobs": [round(s, 2) for s in jobs]}


def requeued_campaign(work: Path, budget: int, signals: int) -> dict:
    """``gptask slurm-script``'s campaign under sbatch, sent USR1 ``signals`` times (each after one
    more run finished); the run count must come out exact."""
    from gptask.data.storage import open_storage

    history, log, script = work / "h.db", work / "steps.log", work / "campaign.sbatch"
    env = dict(os.environ, PYTHONPATH=str(ROOT), MPLBACKEND="Agg", GPTASK_TEST_STEP_LOG=str(log),
               GPTASK_TEST_RUN_S="2")
    subprocess.run([sys.executable, "-m", "gptask", "slurm-script", "--nodes", "2", "--time", "15",
                    "--signal-seconds", "120", "--job-name", "gptask-bench", "-o", str(script), "--", "--problem",
                    "tests.slurm_scripts.campaign:problem", "--task", "size=2", "--budget", str(budget),
                    "--n-initial", "6", "--history", str(history), "-q"], check=True, env=env, cwd=ROOT)
    job = subprocess.run(["sbatch", "--parsable", str(script)], capture_output=True, text=True, check=True,
                         cwd=work, env=env).stdout.strip().split(";")[0]

    def complete() -> int:
        if not history.exists():
            return 0
        with open_storage(str(history)) as st:
            return len(st.trials(status=Status.COMPLETE))

    def show() -> str:
        return subprocess.run(["scontrol", "show", "job", job], capture_output=True, text=True).stdout

    t0 = time.time()
    try:
        for i in range(signals):
            target = complete() + 2
            while complete() < target:
                time.sleep(1)
            subprocess.run(["scancel", "--signal=USR1", "--batch", job], check=True)
            while f"Restarts={i + 1}" not in show():
                time.sleep(1)
            while "JobState=RUNNING" not in show():
                time.sleep(1)
        while not any(f"JobState={s}" in show() for s in ("COMPLETED", "FAILED", "CANCELLED")):
            time.sleep(2)
    finally:
        subprocess.run(["scancel", job])
    state = next(w for w in show().split() if w.startswith("JobState="))
    with open_storage(str(history)) as st:
        trials = st.trials()
    done = [t for t in trials if t.status is Status.COMPLETE]
    runs = log.read_text().splitlines()
    return {"budget": budget, "requeues": signals, "job_state": state.split("=")[1],
            "complete_trials": len(done), "trials": len(trials), "runs_to_their_end": len(runs),
            "distinct_configurations": len({(t.params["x"], t.params["n"]) for t in done}),
            "exact": len(done) == budget == len(runs) and sorted(f"{t.params['x']} {t.params['n']}" for t in done)
            == sorted(" ".join(r.split()[:2]) for r in runs), "wall_s": round(time.time() - t0, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=24)
    ap.add_argument("--median", type=float, default=3.0, help="median run time, seconds")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--overhead-runs", type=int, default=10)
    ap.add_argument("--skip", default="", help="comma-separated parts to skip: steps,order,sync,jobs,overhead,requeue")
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    skip = set(filter(None, args.skip.split(",")))
    logging.getLogger("submitit").setLevel(logging.ERROR)  # sacct is not configured on the local Slurm
    work = Path(tempfile.mkdtemp(prefix="gptask-slurm-bench-", dir=str(ROOT / ".bench-tmp")
                                 if (ROOT / ".bench-tmp").is_dir() else None))
    # the trivial objective of the one-job overhead must be importable by the jobs
    (work / "bench_slurm_trivial.py").write_text("def trivial(task, params):\n    return 0.0\n")
    sys.path.insert(0, str(work))
    os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(work)])
    runs = campaign(args.trials, args.median, args.seed)
    nodes = 4
    work_ns = sum(k * t for k, t in runs)
    out = {"date": datetime.datetime.now().isoformat(timespec="seconds"), "host": platform.node(),
           "cpus": os.cpu_count(), "load_before": os.getloadavg(), "trials": args.trials, "median_s": args.median,
           "sigma": SIGMA, "nodes": nodes, "work_node_s": round(work_ns, 1),
           "simulated_8x200": simulate(), "measured": {}}
    print(json.dumps({"simulated_8x200": out["simulated_8x200"]}), flush=True)
    parts = [("steps", 4), ("order", 1), ("sync", None)]
    alloc = salloc(nodes, 30)
    try:
        for name, la in parts:
            if name in skip:
                continue
            log = work / f"{name}.log"
            wall = run_sync(alloc, runs, log) if la is None else run_steps(alloc, runs, log, la)
            busy = busy_seconds(log)
            out["measured"][name] = {"wall_s": round(wall, 1), "busy_node_s": round(busy, 1),
                                     "utilisation": round(busy / (nodes * wall), 3)}
            print(name, out["measured"][name], flush=True)
        if "overhead" not in skip:
            out["overhead"] = overheads(alloc, work, args.overhead_runs)
            print("overhead", out["overhead"], flush=True)
    finally:
        subprocess.run(["scancel", alloc.job_id])
    if "jobs" not in skip:
        time.sleep(2)
        log = work / "jobs.log"
        wall = run_jobs(runs, log, work, nodes)
        busy = busy_seconds(log)
        out["measured"]["jobs"] = {"wall_s": round(wall, 1), "busy_node_s": round(busy, 1),
                                   "utilisation": round(busy / (nodes * wall), 3)}
        print("jobs", out["measured"]["jobs"], flush=True)
    if "requeue" not in skip:
        (work / "rq").mkdir()
        out["requeue"] = requeued_campaign(work / "rq", budget=12, signals=3)
        print("requeue", out["requeue"], flush=True)
    out["load_after"] = os.getloadavg()
    text = json.dumps(out, indent=1)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text + "\n")
    print(text)
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
