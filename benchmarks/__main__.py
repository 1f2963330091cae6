"""Run every benchmark module in this package that defines ``main()``.

``python -m benchmarks`` runs them all (``make bench``); ``python -m benchmarks NAME ...``
runs only those named. Each prints its own figures; a module's options are reached with
``python -m benchmarks.NAME --help``.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys

import benchmarks


def main(argv: list[str] | None = None) -> int:
    wanted = set(sys.argv[1:] if argv is None else argv)
    names = sorted(
        m.name for m in pkgutil.iter_modules(benchmarks.__path__) if not m.name.startswith("_")
    )
    unknown = wanted - set(names)
    if unknown:
        print(f"no benchmark named {', '.join(sorted(unknown))}; have {', '.join(names)}")
        return 2
    ran = 0
    for name in names:
        if wanted and name not in wanted:
            continue
        module = importlib.import_module(f"benchmarks.{name}")
        run = getattr(module, "main", None)
        if callable(run):
            print(f"== benchmarks.{name}", flush=True)
            run([])  # defaults: the runner's own arguments are benchmark names
            print(flush=True)
            ran += 1
    if not ran:
        print("no benchmark modules with a main() found", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
