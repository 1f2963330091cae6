"""Run every benchmark module in this package that defines ``main()``."""

from __future__ import annotations

import importlib
import pkgutil
import sys

import benchmarks


def main() -> int:
    names = sorted(
        m.name for m in pkgutil.iter_modules(benchmarks.__path__) if not m.name.startswith("_")
    )
    ran = 0
    for name in names:
        module = importlib.import_module(f"benchmarks.{name}")
        run = getattr(module, "main", None)
        if callable(run):
            print(f"== benchmarks.{name}", flush=True)
            run()
            print(flush=True)
            ran += 1
    if not ran:
        print("no benchmark modules with a main() found", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
