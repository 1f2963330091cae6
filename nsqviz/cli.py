"""The ``nsqviz`` command: one entry point, one sub-command per part of the project.

Each part registers its own sub-command (``register(subparsers)`` in its ``cli``
module), so this file stays a table of contents.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from nsqviz.capture.files import CaptureFormatError

_PARTS = (
    "nsqviz.broker.cli",  # nsqviz broker
    "nsqviz.capture.cli",  # nsqviz decode
    "nsqviz.conformance.cli",  # nsqviz conformance
    "nsqviz.filters.cli",  # nsqviz fields
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
    """Run one sub-command. An input it cannot read (not a capture, a directory, a file
    it may not open) is one line on stderr and exit status 2, whichever sub-command met
    it, never a traceback."""
    args = build_parser().parse_args(argv)
    try:
        return int(args.run(args) or 0)
    except CaptureFormatError as exc:
        return _fail(args.command, str(exc))
    except BrokenPipeError:  # `nsqviz ... | head`
        sys.stderr.close()
        return 0
    except OSError as exc:
        if exc.filename is None:
            raise
        return _fail(args.command, f"{exc.filename}: {exc.strerror or exc}")


def _fail(command: str, message: str) -> int:
    print(f"nsqviz {command}: {message}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
