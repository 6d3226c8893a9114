#!/usr/bin/env bash
# Command 2: set everything up, then run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# the local Slurm cluster of the Slurm tests (tests/test_slurm.py starts it too when absent)
if [ "$(id -u)" = 0 ]; then bash scripts/slurm_local.sh start >/dev/null; fi
export MPLBACKEND=Agg
# one BLAS thread per worker: with a worker per core, OpenBLAS's own threads only contend with the other
# workers (the whole suite on 2 cores: 19 min 6 s of tests with them, 15 min 26 s without, 2026-11-30);
# tests that set threads themselves (threadpoolctl, OMP_NUM_THREADS of their subprocesses) still do
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}" OPENBLAS_NUM_THREADS="${OPENBLAS_NUM_THREADS:-1}" MKL_NUM_THREADS="${MKL_NUM_THREADS:-1}"
# one worker per core (at most 4), each taking whole test files (module fixtures, a file's own
# servers and Slurm jobs stay in one process); the 25 slowest tests are listed at the end
workers=$(.venv/bin/python -c "import os; print(max(1, min(4, len(os.sched_getaffinity(0)))))")
exec .venv/bin/python -m pytest -q -n "$workers" --dist loadfile --durations=25 "$@"
