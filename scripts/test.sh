#!/usr/bin/env bash
# Command 2: set everything up, then run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# the local Slurm cluster of the Slurm tests (tests/test_slurm.py starts it too when absent)
if [ "$(id -u)" = 0 ]; then bash scripts/slurm_local.sh start >/dev/null; fi
export MPLBACKEND=Agg
# one worker per core (at most 4), each taking whole test files (module fixtures, a file's own
# servers and Slurm jobs stay in one process); the 25 slowest tests are listed at the end
workers=$(.venv/bin/python -c "import os; print(max(1, min(4, len(os.sched_getaffinity(0)))))")
exec .venv/bin/python -m pytest -q -n "$workers" --dist loadfile --durations=25 "$@"
