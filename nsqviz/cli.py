"""The ``nsqviz`` command: one entry point, one sub-command per part of the project.

Each part registers its own sub-command (``register(subparsers)`` in its ``cli``
module), so this file stays a table of contents.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from nsqviz.capture.files import CaptureFormatError
from nsqviz.usage import help_text, usage_error

_PARTS = {
    "messages": "nsqviz.analysis.cli",  # registers messages, connections and stats
    "connections": "nsqviz.analysis.cli",
    "stats": "nsqviz.analysis.cli",
    "broker": "nsqviz.servers.nsqd.cli",
    "decode": "nsqviz.capture.cli",
    "doctor": "nsqviz.analysis.doctor",
    "conformance": "nsqviz.conformance.cli",
    "fields": "nsqviz.filters.cli",
    "lookupd": "nsqviz.servers.nsqlookupd.cli",
    "pipeline": "nsqviz.pipeline.cli",
    "tubemq-sim": "nsqviz.servers.tubemq.cli",
    "wireshark": "nsqviz.wireshark.cli",
}
"""Sub-command -> the module that registers it."""


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser of every sub-command, or of ``command`` alone: a run of one sub-command
    imports only its own part (``nsqviz decode`` does not load the broker and asyncio,
    a quarter of a second of a short decode)."""
    parser = argparse.ArgumentParser(prog="nsqviz", description=help_text(__doc__))
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in [_PARTS[command]] if command in _PARTS else dict.fromkeys(_PARTS.values()):
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
    it, never a traceback; so is a capture file damaged part way (what could be read is
    shown first: :func:`nsqviz.usage.damaged_input`)."""
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser(argv[0] if argv else None).parse_args(argv)
    try:
        return int(args.run(args) or 0)
    except CaptureFormatError as exc:
        return usage_error(args.command, str(exc))
    except BrokenPipeError:  # `nsqviz ... | head`
        sys.stderr.close()
        return 0
    except OSError as exc:
        if exc.filename is None:
            raise
        return usage_error(args.command, f"{exc.filename}: {exc.strerror or exc}")


if __name__ == "__main__":
    sys.exit(main())
