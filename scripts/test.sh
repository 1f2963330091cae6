#!/usr/bin/env bash
# Runs every test: unit, property, interop, notebooks (nbval) and the browser test.
set -uo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH"
.venv/bin/python -m pytest "$@"
rc=$?
if [ "$rc" = 5 ]; then
    echo "pytest collected no tests: that is a failure for this project" >&2
    exit 1
fi
exit "$rc"
