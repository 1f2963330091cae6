"""One fuzz target under atheris (libFuzzer), coverage-guided over the instrumented
``nsqviz`` package: ``python -m tests.fuzz._atheris_one TARGET [libFuzzer flags] [corpus]``.
Run through ``python -m tests.fuzz`` (``make fuzz``), which sets the flags and reads the
counts."""

from __future__ import annotations

import sys

import atheris

with atheris.instrument_imports(include=["nsqviz"]):
    from tests.fuzz.targets import TARGETS


def main() -> None:
    target = TARGETS[sys.argv[1]]
    atheris.Setup([sys.argv[0], *sys.argv[2:]], target)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
