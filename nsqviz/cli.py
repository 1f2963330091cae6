"""The ``nsqviz`` command: one entry point, one sub-command per part of the project.

Each part registers its own sub-command (``register(subparsers)`` in its ``cli``
module), so this file stays a table of contents.
"""

from __future__ import annotations

import argparse
import importlib
import sys

_PARTS = {
    "broker": "nsqviz.broker.cli",
    "decode": "nsqviz.capture.cli",
    "conformance": "nsqviz.conformance.cli",
    "lookupd": "nsqviz.lookupd.cli",
    "pipeline": "nsqviz.pipeline.cli",
    "tubemq-sim": "nsqviz.tubemq.sim.cli",
    "wireshark": "nsqviz.wireshark.cli",
}
"""Sub-command -> the module that registers it."""


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser of every sub-command, or of ``command`` alone: a run of one sub-command
    imports only its own part (``nsqviz decode`` does not load the broker and asyncio,
    a quarter of a second of a short decode)."""
    parser = argparse.ArgumentParser(prog="nsqviz", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in [_PARTS[command]] if command in _PARTS else _PARTS.values():
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise
            continue
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser(argv[0] if argv else None).parse_args(argv)
    return int(args.run(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
