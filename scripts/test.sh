#!/usr/bin/env bash
# Command 2: set everything up, then run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export MPLBACKEND=Agg
exec .venv/bin/python -m pytest -q "$@"
