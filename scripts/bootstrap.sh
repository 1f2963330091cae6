#!/usr/bin/env bash
# Creates (or refreshes) the project-local virtual environment in .venv and the system
# packages the tests and notebooks need. Safe to run again: it only reinstalls when
# pyproject.toml changed since the last successful install.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/sysdeps.sh

PY=${PYTHON:-python3}
if ! "$PY" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
    echo "nsqviz needs Python >= 3.11; $PY is $("$PY" --version 2>&1)" >&2
    exit 1
fi
if [ ! -x .venv/bin/python ]; then
    echo "== creating .venv"
    "$PY" -m venv .venv
fi
stamp=.venv/.nsqviz-installed
want=$(sha256sum pyproject.toml | cut -d' ' -f1)
# pip's own chatter (index locations this machine's pip.conf names but lacks) is noise.
quiet_pip() {
    .venv/bin/python -m pip "$@" 2>&1 | { grep -v -e "is ignored: it is neither" || true; }
    return "${PIPESTATUS[0]}"
}
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    echo "== installing nsqviz and its extras into .venv"
    quiet_pip install --quiet --upgrade pip
    # --no-compile: pip would compile every installed module (~25 s of one core for
    # ~1 GB of packages) into __pycache__ folders that `make test` never reads (it keeps
    # its bytecode under build/pycache, scripts/test.sh); `make lab` compiles what it
    # imports on its first start, as Python does.
    quiet_pip install --quiet --no-compile -e ".[lab,spark,dev,docs]"
    echo "$want" > "$stamp"
fi
