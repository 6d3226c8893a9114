#!/usr/bin/env bash
# The main job's second form (issue 25): tune ScaLAPACK's PDGEQRF (real runs) for the fastest time
# within a memory limit per process, 4.15e6 bytes: the driver's allocations (the local matrix twice,
# TAU, PDGEQRF's workspace; apps/scalapack_qr/memory.py), which excludes the fastest configurations of
# both sizes (their larger column blocks need a larger workspace). Two sizes, 20 runs each (8 initial), the
# recommendation (never outside the limit) re-launched 3 times with the 2 next candidates and the hand
# default when it fits. Results in out/: memory.sqlite (resumes), memory_best.json, and the table
# on stdout with the recommended configuration's memory. Extra arguments go to the tune command.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export MPLBACKEND=Agg
mkdir -p out
exec .venv/bin/python -m apps.scalapack_qr tune --task m=1000,n=500 --task m=500,n=1000 --budget 20 \
    --n-initial 8 --repeats 2 --timeout 20 --seed 0 --confirm 3 --memory-limit 4.15e6 \
    --history out/memory.sqlite --out out/memory_best.json "$@"
