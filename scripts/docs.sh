#!/usr/bin/env bash
# Builds the website (docs/conf.py says what and why) into ${1:-build/docs}/html from the
# stored notebooks (never executed), docs/ and data/README.md, warnings as errors.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-build/docs}
PY=${PYTHON:-.venv/bin/python}
exec "$PY" -m sphinx -b html -c docs -d "$out/doctrees" -W --keep-going -q . "$out/html"
