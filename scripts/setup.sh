#!/usr/bin/env bash
# Set up everything gptask needs on a Debian machine: system packages (MPICH, ScaLAPACK,
# OpenBLAS, compilers), a virtualenv in .venv and the Python packages. Safe to run twice:
# each step is skipped when already done.
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3}
DEB_PACKAGES="mpich libmpich-dev libscalapack-mpich-dev libopenblas0 gcc make strace"

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
stamp=.venv/.gptask-installed
want=$(cat pyproject.toml | sha256sum | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    echo "setup: installing Python packages into .venv"
    log=.venv/pip-install.log
    if ! { .venv/bin/python -m pip install -q --upgrade pip && .venv/bin/python -m pip install -q -e ".[dev,dask]"; } >"$log" 2>&1; then
        tail -30 "$log" >&2
        echo "setup: pip install failed (full log: $log)" >&2
        exit 1
    fi
    .venv/bin/python -c "import gptask, apps"
    echo "$want" > "$stamp"
fi
echo "setup: ready (.venv)"
