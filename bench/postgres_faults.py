"""Exactly-once on one PostgreSQL history under faults: N ask/tell client processes claim and tell
trials of a discrete space (their configurations collide), while this script kill -9s random
clients (and starts new ones), restarts the server (pg_ctl restart) and drops the connections of
running clients (pg_terminate_backend of the backends whose application_name is the client's
PGAPPNAME, retried until it ends one: --drops times). Every client logs "told ID VALUE" after each tell returns; at the end one
last client hands over the dead holders' trials and finishes them.

Checked: every told result is in the history as told (0 lost), no configuration has two trials and
no trial was told twice (0 run twice), every trial ends finished, and only trials in flight when a
client was killed were handed out again.

    PYTHONPATH=$PWD .venv/bin/python bench/postgres_faults.py [--clients 6 --kills 20 --drops 3 --seed 1]
"""

import argparse
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import psycopg  # noqa: E402

from gptask.data.storage import open_storage  # noqa: E402
from gptask.data.trials import Status  # noqa: E402
from tests.postgres_server import TempServer  # noqa: E402

SIG = {"name": "faults", "task_space": [{"type": "real", "name": "t", "lo": 0, "hi": 1, "log": False}]}
TASKS = [{"t": 0.25}, {"t": 0.75}]
CLIENT = """
import os, random, sys, time
from gptask.data.storage import Owner, open_storage
from gptask.data.trials import Proposal, Status
url, log, seed, budget = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
rng = random.Random(seed)
s = open_storage(url)
me = Owner.this_process("client")
tasks = s.tasks()
with open(log, "a", buffering=1) as out:
    out.write(f"ready {os.getpid()} 0\\n")
    while True:
        trials = s.reclaim(me, limit=1)
        if not trials:
            i = rng.randrange(len(tasks))
            got = s.add_trials([Proposal(i, tasks[i], {"x": rng.randrange(400)}, "soak")], me, budget=budget)
            trials = [t for t in got if t is not None]
            if not trials:
                if all(len(s.trials(task_index=k)) >= budget for k in range(len(tasks))) and \\
                        not s.trials(status=Status.PENDING):
                    break
                continue
        t = trials[0]
        time.sleep(rng.uniform(0.05, 0.3))  # the evaluation
        value = float(t.params["x"]) + 0.5 * t.task_index
        s.finish(t.id, Status.COMPLETE, value)
        out.write(f"told {t.id} {value!r}\\n")
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clients", type=int, default=6)
    ap.add_argument("--kills", type=int, default=20)
    ap.add_argument("--budget", type=int, default=150, help="trials per task")
    ap.add_argument("--seed", type=int, default=1, help="of the moments and victims of the faults")
    ap.add_argument("--drops", type=int, default=3, help="moments at which a running client's connections are ended")
    args = ap.parse_args()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with TempServer() as srv:
        url = srv.new_url("soak")
        with open_storage(url, SIG) as s:
            s.set_tasks(TASKS)
        log = Path(srv.root) / "told.log"
        rng = random.Random(args.seed)
        seed = [0]

        names: dict[int, str] = {}  # pid -> the client's application_name

        def spawn() -> subprocess.Popen:
            seed[0] += 1
            name = f"client-{seed[0]}"
            p = subprocess.Popen([sys.executable, "-c", CLIENT, url, str(log), str(seed[0]), str(args.budget)],
                                 env={**env, "PGAPPNAME": name}, stderr=subprocess.PIPE, text=True)
            names[p.pid] = name
            return p

        def drop(victims: list) -> int:
            """End the connections of one of ``victims`` (by its application_name); how many were ended."""
            end = time.time() + 10
            with psycopg.connect(srv.url, autocommit=True) as conn:
                while time.time() < end:
                    victim = rng.choice([p for p in victims if p.poll() is None] or victims)
                    n = conn.execute("SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity "
                                     "WHERE application_name = %s", (names[victim.pid],)).fetchone()[0]
                    if n:
                        return int(n)

                    time.sleep(0.02)
            return 0

        procs = [spawn() for _ in range(args.clients)]
        born = {p.pid: time.time() for p in procs}
        kills, restarts, drops, dropped = 0, 0, 0, 0
        drop_at = {(k + 1) * args.kills // (args.drops + 1) for k in range(args.drops)}
        dropped_at: dict[int, int] = {}
        t0 = time.time()
        while kills < args.kills:
            time.sleep(rng.uniform(0.1, 0.6))
            running = [p for p in procs if p.poll() is None]
            if not running:
                break
            ready = {int(line.split()[1]) for line in log.read_text().splitlines() if line.startswith("ready")} \
                if log.exists() else set()
            running = [p for p in running if p.pid in ready]  # connected and working (past its start-up)
            if not running:
                continue
            if kills + 1 in drop_at and not dropped_at.get(kills + 1):  # one of the running clients, before a kill
                n = drop(running)
                dropped_at[kills + 1] = n
                drops += n > 0
                dropped += n
            victim = rng.choice(running)
            victim.send_signal(signal.SIGKILL)
            victim.wait()
            kills += 1
            procs.append(spawn())
            born[procs[-1].pid] = time.time()
            if kills == args.kills // 3:
                srv.pg_ctl("restart")
                restarts += 1
        for p in procs:
            if p.poll() is None:
                p.wait(timeout=600)
        failed = [p.stderr.read()[-800:] for p in procs if p.returncode not in (0, -9)]
        last = spawn()  # hands over what the last killed clients held and finishes it
        last.wait(timeout=600)
        told: dict[int, list[float]] = {}
        for line in log.read_text().splitlines():
            what, i, v = line.split()
            if what != "told":
                continue
            told.setdefault(int(i), []).append(float(v))
        with open_storage(url) as s:
            trials = s.trials()
        by_id = {t.id: t for t in trials}
        lost = [i for i, vs in told.items() if by_id[i].status is not Status.COMPLETE or by_id[i].value != vs[0]]
        twice = [i for i, vs in told.items() if len(vs) > 1]
        configs = [(t.task_index, t.params["x"]) for t in trials]
        rehanded = [t.id for t in trials if t.attempts > 1]
        print(f"{args.clients} clients, {kills} kill -9, {restarts} server restart, {drops} of {args.drops} drops hit "
              f"a running client ({dropped} connections ended), "
              f"{time.time() - t0:.0f} s")
        print(f"trials {len(trials)} (budget {args.budget * len(TASKS)}), told {len(told)}, "
              f"unfinished {sum(not t.status.finished for t in trials)}")
        print(f"lost {len(lost)}, told twice {len(twice)}, duplicate configurations {len(configs) - len(set(configs))}, "
              f"handed out again {len(rehanded)} (<= kills: {len(rehanded) <= kills}), clients that failed "
              f"{len(failed)}")
        for text in failed[:3]:
            print(text)


if __name__ == "__main__":
    main()
