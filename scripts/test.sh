#!/usr/bin/env bash
# Command 2: set everything up, then run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# the local Slurm cluster of the Slurm tests (tests/test_slurm.py starts it too when absent)
if [ "$(id -u)" = 0 ]; then bash scripts/slurm_local.sh start >/dev/null; fi
export MPLBACKEND=Agg
exec .venv/bin/python -m pytest -q "$@"
