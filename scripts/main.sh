#!/usr/bin/env bash
# Command 1: set everything up, then run the main job: batch tuning (MLA) of ScaLAPACK's PDGEQRF
# (QR factorisation, real runs of Debian's ScaLAPACK through our C driver) for an LHS set of
# matrix sizes. Results: a table of the recommended (mb, nb, nproc, p, nth) per task on stdout
# (the 3 best configurations by the model re-launched 3 times each, the lowest median kept, beside
# the single fastest launch), the same as JSON, the convergence plot and the SQLite history in
# out/. Running it again resumes from out/main.sqlite (finished evaluations and confirmation
# launches are not repeated); delete out/ to start afresh. A failing launcher stops the run after the
# first launches (all failed for one reason: exit status 3, the reason in the error). For a quick check,
# GPTASK_MAX_TASKS=2 GPTASK_MAX_BUDGET=4 bash scripts/main.sh runs 2 sizes x 4 launches (gptask/core/smoke.py).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export MPLBACKEND=Agg
mkdir -p out
exec .venv/bin/python -m apps.scalapack_qr tune --tasks 8 --budget 20 --n-initial 10 --m-max 2000 \
    --repeats 2 --timeout 20 --seed 0 --confirm 3 --history out/main.sqlite --out out/main_best.json \
    --plot out/main_convergence.png "$@"
