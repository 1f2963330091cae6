#!/usr/bin/env bash
# Starts JupyterLab on notebooks/. The notebooks start their own embedded broker.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH"
exec .venv/bin/jupyter lab --notebook-dir=notebooks "$@"
