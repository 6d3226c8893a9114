#!/usr/bin/env bash
# Set up everything gptask needs on a Debian machine: system packages (MPICH, ScaLAPACK,
# OpenBLAS, compilers), a virtualenv in .venv and the Python packages. Safe to run twice:
# each step is skipped when already done.
set -euo pipefail
cd "$(dirname "$0")/.."
# GPTASK_SKIP_SETUP=1: nothing to do (the test suite sets it when it runs the README's commands from
# inside the set-up virtualenv)
if [ "${GPTASK_SKIP_SETUP:-0}" = 1 ]; then
    [ -x .venv/bin/python ] || { echo "setup: GPTASK_SKIP_SETUP=1 but there is no .venv: run without it" >&2; exit 1; }
    echo "setup: skipped (GPTASK_SKIP_SETUP=1)"
    exit 0
fi

PY=${PYTHON:-python3}
# chromium: the report test opens gptask report's page in a real headless browser; postgresql: the
# tests of PostgreSQL histories start a throw-away server (initdb, pg_ctl) unless GPTASK_TEST_POSTGRES_URL is set
DEB_PACKAGES="mpich libmpich-dev libscalapack-mpich-dev libopenblas0 gcc make strace chromium postgresql"

need_debs=""
for p in $DEB_PACKAGES; do
    dpkg -s "$p" >/dev/null 2>&1 || need_debs="$need_debs $p"
done
if ! $PY -m venv --help >/dev/null 2>&1; then need_debs="$need_debs python3-venv"; fi
if [ -n "$need_debs" ]; then
    if [ "$(id -u)" = 0 ]; then SUDO=""; elif command -v sudo >/dev/null; then SUDO="sudo"; else
        echo "setup: missing Debian packages:$need_debs (run as root or install them)" >&2; exit 1
    fi
    echo "setup: installing Debian packages:$need_debs"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $need_debs >/dev/null
fi

if [ ! -x .venv/bin/python ]; then
    echo "setup: creating .venv"
    $PY -m venv .venv
fi
# torch for the LCM's optional torch backend (the gpu extra), so the tests exercise it on the CPU.
# Exactly this version: its CPU wheel lies on the development and CI machines' disk, where a bare
# "torch" or a version range would pull a multi-GB CUDA build. GPTASK_NO_TORCH=1 skips it (the
# torch tests are then skipped).
TORCH_PIN="torch==2.13.0"
[ "${GPTASK_NO_TORCH:-0}" = 1 ] && TORCH_PIN=""
have_torch() {
    [ -z "$TORCH_PIN" ] || .venv/bin/python -c "import importlib.metadata as m, sys
sys.exit(m.version('torch').split('+')[0] != '${TORCH_PIN#torch==}')" 2>/dev/null
}

# the stamp records what was installed: pyproject.toml and the torch pin; a change of either (or a
# missing torch) reinstalls, and a second run with nothing changed does nothing
stamp=.venv/.gptask-installed
want=$( { cat pyproject.toml; echo "torch pin: $TORCH_PIN"; } | sha256sum | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ] || ! have_torch; then
    echo "setup: installing Python packages into .venv"
    log=.venv/pip-install.log
    if ! { .venv/bin/python -m pip install -q --upgrade pip && .venv/bin/python -m pip install -q -e ".[dev,dask]" \
           && { [ -z "$TORCH_PIN" ] || .venv/bin/python -m pip install -q "$TORCH_PIN"; }; } >"$log" 2>&1; then
        tail -30 "$log" >&2
        echo "setup: pip install failed (full log: $log)" >&2
        exit 1
    fi
    .venv/bin/python -c "import gptask, apps"
    have_torch || { echo "setup: $TORCH_PIN did not install (log: $log)" >&2; exit 1; }
    echo "$want" > "$stamp"
fi
echo "setup: ready (.venv)"
