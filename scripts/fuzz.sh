#!/usr/bin/env bash
# `make fuzz`: long fuzz runs of every target in tests/fuzz/targets.py.
# With atheris (coverage-guided libFuzzer; installed here as the "fuzz" extra):
# FUZZ_SECONDS per target (default 120). Without it (no wheel for this Python):
# hypothesis with FUZZ_EXAMPLES examples per strategy (default 100000).
set -uo pipefail
cd "$(dirname "$0")/.."
if ! .venv/bin/python -c "import atheris" 2>/dev/null; then
    .venv/bin/python -m pip install --quiet -e ".[fuzz]" 2>&1 | grep -v "is ignored: it is neither"
fi
if .venv/bin/python -c "import atheris" 2>/dev/null; then
    exec .venv/bin/python -m tests.fuzz --seconds "${FUZZ_SECONDS:-120}" "$@"
fi
echo "atheris is not installable here: hypothesis with a large budget instead" >&2
NSQVIZ_FUZZ_EXAMPLES="${FUZZ_EXAMPLES:-100000}" exec .venv/bin/python -m pytest tests/fuzz \
    -q -p no:cacheprovider --timeout 0 --hypothesis-show-statistics "$@"
