#!/usr/bin/env bash
# Command 1: set everything up, then run the main job: batch tuning (MLA) of a task set.
# Results: a table of the best configuration per task on stdout, plots and the SQLite history in out/.
# Running it again resumes from out/main.sqlite (finished evaluations are not repeated).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export MPLBACKEND=Agg
mkdir -p out
exec .venv/bin/python -m gptask tune --problem demo --tasks 6 --budget 20 --n-initial 10 --seed 0 \
    --history out/main.sqlite --plot out/main_convergence.png --save-model out/main_model.json "$@"
