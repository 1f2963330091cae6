#!/usr/bin/env bash
# Runs every test: unit, property, interop, notebooks (nbval) and the browser test, on
# several pytest-xdist workers at once (tests/_xdist.py deals them; tests/conftest.py
# says what a test must do to be safe there). Much of the suite waits -- on a browser, a
# heartbeat, a server -- so there are more workers than cores: NSQVIZ_TEST_WORKERS (4 by
# default) sets how many; -n0 among the arguments runs everything in this one process.
set -uo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH"
.venv/bin/python -m pytest -n "${NSQVIZ_TEST_WORKERS:-4}" "$@"
rc=$?
if [ "$rc" = 5 ]; then
    echo "pytest collected no tests: that is a failure for this project" >&2
    exit 1
fi
exit "$rc"
