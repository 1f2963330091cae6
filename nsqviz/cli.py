"""The ``nsqviz`` command: one entry point, one sub-command per part of the project.

Each part registers its own sub-command (``register(subparsers)`` in its ``cli``
module), so this file stays a table of contents.
"""

from __future__ import annotations

import argparse
import importlib
import sys

_PARTS = (
    "nsqviz.analysis.cli",  # nsqviz messages, connections, stats
    "nsqviz.broker.cli",  # nsqviz broker
    "nsqviz.capture.cli",  # nsqviz decode
    "nsqviz.conformance.cli",  # nsqviz conformance
    "nsqviz.lookupd.cli",  # nsqviz lookupd
    "nsqviz.pipeline.cli",  # nsqviz pipeline
    "nsqviz.tubemq.sim.cli",  # nsqviz tubemq-sim
    "nsqviz.wireshark.cli",  # nsqviz wireshark
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="nsqviz", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in _PARTS:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise
            continue
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.run(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
