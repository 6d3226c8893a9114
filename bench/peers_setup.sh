#!/usr/bin/env bash
# The bench environment of bench/scalapack_qr.py: a SEPARATE virtualenv .bench-venv at the
# repository root holding gptask (editable, with its own dependencies) plus the two peer tuners of
# the GPTune paper's Fig. 1, OpenTuner and HpBandSter. They live apart from .venv because they pin
# old libraries (HpBandSter 0.7.4 needs Pyro4, netifaces and statsmodels; OpenTuner 0.8.8 predates
# SQLAlchemy 2) that gptask itself must not depend on. It also holds BoTorch (bench/quality.py's
# BoTorch-MTBO method, bench/model_quality.py, bench/suite.py's botorch_mtgp peer and
# bench/calibration.py, issue 45): torch is pinned to 2.13.0, the CPU build whose wheel
# lies on this machine's disk (a plain `torch` would pull a CUDA build of several GB), installed
# first and kept pinned while pip picks a botorch release compatible with it. torch and botorch
# stay out of gptask's own dependencies.
#
#   bash bench/peers_setup.sh            # then: .bench-venv/bin/python bench/scalapack_qr.py ...
#
# The multi-fidelity peers of bench/multifidelity.py (issue 44) live in a second venv, $MF_VENV
# (default /work/venvs/i44b): SMAC3 (its MultiFidelityFacade), DEHB and Optuna need ConfigSpace 1.x,
# which HpBandSter 0.7.4 also runs with (BOHB); OpenTuner's old SQLAlchemy pin stays out of it.
#
#   MF_VENV=/work/venvs/i44b bash bench/peers_setup.sh   # then: $MF_VENV/bin/python bench/multifidelity.py run ...
#
# Runs scripts/setup.sh first (Debian packages: MPICH, ScaLAPACK, gcc, ...), adds python3-dev
# when no Python.h is found (netifaces, a HpBandSter dependency, builds from source on Python
# 3.11), and is safe to run twice (a stamp file skips the pip step when nothing changed).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh

PY=${PYTHON:-python3}
VENV=.bench-venv
# Peer versions: the latest releases on PyPI, with the library versions they were written against.
PEERS=(
    "opentuner==0.8.8" "SQLAlchemy<2"
    "hpbandster==0.7.4" "ConfigSpace>=1,<2" "Pyro4" "serpent" "netifaces" "statsmodels"
    "optuna>=3"  # bench/quality.py's TPE; bench/suite.py's GPSampler (with torch, below)
    "kernel-tuner==1.5.0"  # bench/suite.py: Kernel Tuner's strategies replaying recorded campaigns (simulation mode)
    "ioh==0.4.2"  # bench/suite.py: COCO's bbob functions with instances as tasks
)
# Installed in a second step, torch first: the exact version is the CPU wheel in pip's find-links.
TORCH="torch==2.13.0"
BOTORCH=("botorch" "$TORCH")

inc=$($PY -c "import sysconfig; print(sysconfig.get_paths()['include'])")
if [ ! -f "$inc/Python.h" ] || ! command -v gcc >/dev/null; then
    if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
    echo "peers_setup: installing python3-dev gcc (to build netifaces)"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq python3-dev gcc >/dev/null
fi

if [ ! -x "$VENV/bin/python" ]; then
    echo "peers_setup: creating $VENV"
    $PY -m venv "$VENV"
fi
stamp="$VENV/.peers-installed"
want=$( { cat pyproject.toml; printf '%s\n' "${PEERS[@]}" "$TORCH" "${BOTORCH[@]}"; } | sha256sum | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    echo "peers_setup: installing gptask and the peers into $VENV"
    log="$VENV/pip-install.log"
    if ! { "$VENV/bin/python" -m pip install -q --upgrade pip setuptools wheel \
           && "$VENV/bin/python" -m pip install -q -e . "${PEERS[@]}" \
           && "$VENV/bin/python" -m pip install -q "$TORCH" \
           && "$VENV/bin/python" -m pip install -q "${BOTORCH[@]}"; } >"$log" 2>&1; then
        tail -30 "$log" >&2
        echo "peers_setup: pip install failed (full log: $log)" >&2
        exit 1
    fi
    "$VENV/bin/python" -c "import gptask, apps, opentuner, hpbandster, ConfigSpace, skopt, optuna, botorch, torch, kernel_tuner, ioh
assert torch.__version__.startswith('2.13.0') and not torch.cuda.is_available(), torch.__version__"
    echo "$want" > "$stamp"
fi
echo "peers_setup: ready ($VENV)"

# ---- the multi-fidelity peers (bench/multifidelity.py) ----
MF_VENV=${MF_VENV:-/work/venvs/i44b}
MF_PEERS=("smac==2.4.1" "dehb==0.1.2" "optuna==5.0.0" "hpbandster==0.7.4" "ConfigSpace>=1,<2")
if [ ! -x "$MF_VENV/bin/python" ]; then
    echo "peers_setup: creating $MF_VENV"
    $PY -m venv "$MF_VENV"
fi
mf_stamp="$MF_VENV/.peers-installed"
mf_want=$( { cat pyproject.toml; printf '%s\n' "${MF_PEERS[@]}"; } | sha256sum | cut -d' ' -f1)
if [ ! -f "$mf_stamp" ] || [ "$(cat "$mf_stamp")" != "$mf_want" ]; then
    echo "peers_setup: installing gptask and the multi-fidelity peers into $MF_VENV"
    log="$MF_VENV/pip-install.log"
    if ! { "$MF_VENV/bin/python" -m pip install -q --upgrade pip setuptools wheel \
           && "$MF_VENV/bin/python" -m pip install -q -e . "${MF_PEERS[@]}"; } >"$log" 2>&1; then
        tail -30 "$log" >&2
        echo "peers_setup: pip install failed (full log: $log)" >&2
        exit 1
    fi
    "$MF_VENV/bin/python" -c "import gptask, smac, dehb, optuna, hpbandster, ConfigSpace"
    echo "$mf_want" > "$mf_stamp"
fi
echo "peers_setup: ready ($MF_VENV)"
