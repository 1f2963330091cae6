#!/usr/bin/env bash
# Runs every test: unit, property, interop, notebooks (nbval) and the browser test, on
# several pytest-xdist workers at once (tests/_xdist.py deals them; tests/conftest.py
# says what a test must do to be safe there). Much of the suite waits -- on a browser, a
# learner's reading pace, a heartbeat, a server -- so there are more workers than cores:
# NSQVIZ_TEST_WORKERS (4 by default: six left a busy machine's timing-sensitive tests
# too little CPU) says how many; -n0 among the arguments runs everything in this one
# process.
set -uo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH"
# Python's bytecode cache, kept out of the source folders (build/ is git-ignored), and
# written even where PYTHONDONTWRITEBYTECODE is set: each worker, and each of the many
# Python processes the tests start (brokers, kernels, Spark's workers), would otherwise
# compile every module it imports again (~5 s of CPU for a worker's collection alone).
export PYTHONPYCACHEPREFIX="$PWD/build/pycache"
unset PYTHONDONTWRITEBYTECODE
.venv/bin/python -m pytest -n "${NSQVIZ_TEST_WORKERS:-4}" "$@"
rc=$?
if [ "$rc" = 5 ]; then
    echo "pytest collected no tests: that is a failure for this project" >&2
    exit 1
fi
exit "$rc"
