"""The script that measured this folder's files (a record, not part of the package).

It ran on lent 16-core nodes that have no ScaLAPACK: the Debian 12 binaries of the development
machine (mpiexec.hydra, hydra_pmi_proxy, libmpich, libscalapack-mpich, OpenBLAS pthreads and their
libraries) and the driver built from apps/scalapack_qr/pdgeqrf_driver.c were unpacked under $DL
(bin/, lib/). One launch: ``mpiexec.hydra -n NPROC -bind-to none pdgeqrf_driver M N MB NB P Q 1``
with OMP_NUM_THREADS = OPENBLAS_NUM_THREADS = nth; a launch that fails or runs past 40 s is left out
(none did).

    SEED=0 python measure.py train campaign_a.csv 1000x1000,...,3000x3000 36
        per size the 4 reference configurations and 36 random feasible ones, all launched once in
        a random order (stops after BUDGET_S seconds);
    python measure.py confirm picks_c.csv picks_list.csv 10
        the configurations of picks_list.csv launched round robin, 10 rounds (random_d.csv:
        random_list.csv, 5 rounds; random_list.csv drawn with random_config, seed 2).
"""
import csv
import json
import os
import subprocess
import sys
import time

import numpy as np

DL = os.environ.get("DL", "/tmp/dl")
#: cores of the node
CORES = int(os.environ.get("CORES", "16"))


def launch(m, n, mb, nb, nproc, p, nth, timeout=40.0):
    env = dict(os.environ, LD_LIBRARY_PATH=f"{DL}/lib", OMP_NUM_THREADS=str(nth), OPENBLAS_NUM_THREADS=str(nth))
    cmd = [f"{DL}/bin/mpiexec.hydra", "-n", str(nproc), "-bind-to", "none", f"{DL}/bin/pdgeqrf_driver",
           str(m), str(n), str(mb), str(nb), str(p), str(nproc // p), "1"]
    try:
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
        return float(json.loads(r.stdout.strip().splitlines()[-1])["time"])
    except Exception as exc:  # noqa: BLE001 -- left out, reported
        print("FAILED", cmd, repr(exc)[:200], file=sys.stderr)
        return None


def random_config(rng, m, n):
    while True:
        mb, nb = (int(round(2 ** rng.uniform(0, 8))) for _ in range(2))
        nproc = int(rng.integers(1, CORES + 1))
        divs = [d for d in range(1, nproc + 1) if nproc % d == 0]
        p = int(rng.choice(divs)); q = nproc // p
        nth = int(rng.integers(1, CORES // nproc + 1))
        if mb * p <= m and nb * q <= n:
            return mb, nb, nproc, p, nth


REFS = [(64, 64, 16, 4, 1), (32, 32, 16, 16, 1), (128, 128, 1, 1, 16), (64, 64, 4, 2, 4)]


def main():
    mode, out = sys.argv[1], sys.argv[2]
    budget = float(os.environ.get("BUDGET_S", "420"))
    t0 = time.time()
    w = csv.writer(open(out, "w", newline=""))
    if mode == "train":
        sizes = [tuple(map(int, s.split("x"))) for s in sys.argv[3].split(",")]
        per = int(sys.argv[4])
        rng = np.random.default_rng(int(os.environ.get("SEED", "0")))
        jobs = []
        for m, n in sizes:
            jobs += [(m, n, *c) for c in REFS] + [(m, n, *random_config(rng, m, n)) for _ in range(per)]
        order = rng.permutation(len(jobs))
        w.writerow(["m", "n", "mb", "nb", "nproc", "p", "nth", "time"])
        done = 0
        for k in order:
            if time.time() - t0 > budget:
                print("budget reached", file=sys.stderr); break
            j = jobs[k]; t = launch(*j)
            if t is not None:
                w.writerow([*j, t]); done += 1
        print(f"{done} of {len(jobs)} launches in {time.time() - t0:.0f} s", file=sys.stderr)
    else:  # confirm: configs from a CSV m,n,mb,nb,nproc,p,nth,label
        rows = list(csv.DictReader(open(sys.argv[3])))
        reps = int(sys.argv[4])
        w.writerow(["m", "n", "mb", "nb", "nproc", "p", "nth", "label", "launch", "time"])
        for r in range(reps):
            for row in rows:
                if time.time() - t0 > budget:
                    break
                j = tuple(int(row[k]) for k in ("m", "n", "mb", "nb", "nproc", "p", "nth"))
                t = launch(*j)
                if t is not None:
                    w.writerow([*j, row["label"], r, t])
        print(f"confirm done in {time.time() - t0:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
