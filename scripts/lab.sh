#!/usr/bin/env bash
# Starts JupyterLab on notebooks/. The notebooks start their own embedded broker.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH"
extra=()
# Machines of this project's kind (and containers, Binder) run everything as root;
# JupyterLab refuses that unless told.
[ "$(id -u)" = 0 ] && extra+=(--allow-root)
JUPYTER=.venv/bin/jupyter scripts/trust_notebooks.sh
exec .venv/bin/jupyter lab --notebook-dir=notebooks "${extra[@]}" "$@"
