#!/usr/bin/env bash
# Issue 12 benchmarks, piece by piece under the shared machine lock (each piece, one family, budget
# and seed, takes the lock for itself, so other people's timed runs can interleave), from the
# repository root of any checkout:
#
#   bash bench/archive/issue12.sh quality-gptask [JSON]            # MLA, gp_minimize, TPE, random
#   bash bench/archive/issue12.sh quality-mla [JSON]               # MLA alone (to rerun after a model change)
#   bash bench/archive/issue12.sh quality-botorch [JSON] [BUDGETS] [SEEDS]   # BoTorch-MTBO (hours)
#   bash bench/archive/issue12.sh model-quality [JSON] [SETS] [SEEDS]    # pdgeqrf: seed 0 (PDGEQRF_SEEDS)
#   MQ_ARGS="--gptask-only --label after" bash bench/archive/issue12.sh model-quality JSON   # gptask rows only
#
# Every piece merges its results into JSON (defaults: bench/results_mtbo.json and
# bench/results_model_quality.json) and skips what is already there (--resume), so a killed queue
# is continued by running the same command again. Reports:
#
#   PYTHONPATH=. .bench-venv/bin/python bench/quality.py --merge bench/results_mtbo.json --out bench/results_mtbo.md
#   PYTHONPATH=. .bench-venv/bin/python bench/model_quality.py --merge bench/results_model_quality.json \
#       --out bench/results_model_quality.md
#
# Needs .bench-venv (bash bench/peers_setup.sh): every method runs in that one interpreter.
# LOCK=none runs without the lock (the BoTorch baseline did: its pieces hold a core for 15-60 min).
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PY:-.bench-venv/bin/python}
LOCK=${LOCK:-/tmp/gptask-bench.lock}
FAMILIES=${FAMILIES:-"demo branin sphere branin_drift hartmann6 mixed"}
TASKS=${TASKS:-6}

# run a piece under the lock, unless its results are all in the JSON already (checked without the lock)
locked() {
    local rc=0
    env PYTHONPATH=. "$PY" "$@" --pending >/dev/null || rc=$?
    case $rc in
        0) if [ "$LOCK" = none ]; then env PYTHONPATH=. "$PY" "$@"; else flock "$LOCK" env PYTHONPATH=. "$PY" "$@"; fi ;;
        3) ;;  # nothing left to run
        *) echo "issue12.sh: $* --pending failed (status $rc)" >&2; return "$rc" ;;
    esac
}

quality() {  # quality METHODS JSON BUDGETS SEEDS
    local fam b seed
    for b in ${3//,/ }; do
        for fam in $FAMILIES; do
            for seed in ${4//,/ }; do
                locked bench/quality.py --families "$fam" --tasks "$TASKS" --budget "$b" --seeds "$seed" \
                    --methods "$1" --json "$2" --resume >/dev/null
            done
        done
    done
}

stage=${1:?usage: bash bench/archive/issue12.sh quality-gptask|quality-mla|quality-botorch|model-quality [...]}
case "$stage" in
    quality-gptask) quality MLA,gp_minimize,TPE,random "${2:-bench/results_mtbo.json}" 12,20 0,1,2,3,4 ;;
    quality-mla) quality MLA "${2:-bench/results_mtbo.json}" 12,20 0,1,2,3,4 ;;
    quality-botorch) quality BoTorch-MTBO "${2:-bench/results_mtbo.json}" "${3:-12,20}" "${4:-0,1,2,3,4}" ;;
    model-quality)
        json=${2:-bench/results_model_quality.json}
        for set in ${3:-hartmann6:10x10 mix6:10x10 hartmann6:20x20 mix6:20x20 pdgeqrf hartmann6:50x20 mix6:50x20}; do
            seeds=${4:-0,1,2}
            [ "$set" = pdgeqrf ] && seeds=${PDGEQRF_SEEDS:-0}
            for seed in ${seeds//,/ }; do
                locked bench/model_quality.py --sets "$set" --seeds "$seed" --json "$json" --resume \
                    ${MQ_ARGS:-} >/dev/null
            done
        done ;;
    *) echo "unknown stage $stage" >&2; exit 2 ;;
esac
