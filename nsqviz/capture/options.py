"""The command-line options ``nsqviz decode`` and ``nsqviz pipeline`` share.

Both read a capture set the same way (:class:`~nsqviz.capture.driver.CaptureDriver`),
so both take the same options with the same defaults: ``--each-file``,
``--idle-split`` and ``--port [PROTOCOL:]P``.
"""

from __future__ import annotations

import argparse
from typing import Any

from nsqviz import protocols
from nsqviz.capture.driver import IDLE_SPLIT

__all__ = ["add_capture_set_options", "capture_set_options", "parse_port"]


def parse_port(text: str) -> tuple[str, int]:
    """``--port`` values: ``P`` (a port of the first protocol, NSQ) or ``NAME:P``."""
    name, _, port = text.rpartition(":")
    first = protocols.registered()[0].name
    try:
        proto = protocols.by_name(name or first).name
        return proto, int(port)
    except (KeyError, ValueError) as exc:
        raise argparse.ArgumentTypeError(f"{text!r}: want PORT or PROTOCOL:PORT ({exc})") from None


def add_capture_set_options(p: argparse.ArgumentParser) -> None:
    """The options ``nsqviz decode`` and ``nsqviz pipeline`` share, same defaults."""
    p.add_argument("--each-file", action="store_true",
                   help="decode every file as a capture of its own (default: the files are "
                   "one capture set, e.g. tcpdump -C/-G rotations, and connections continue "
                   "across them)")
    p.add_argument("--idle-split", type=float, default=IDLE_SPLIT, metavar="SECONDS",
                   help="a connection silent this long ends, and its 4-tuple's next packet "
                   f"starts a new one (default {IDLE_SPLIT:g}; 0: never)")
    names = ", ".join(f"{x.name} {sorted(x.server_ports)}" for x in protocols.registered())
    p.add_argument("--port", action="append", type=parse_port, default=[],
                   metavar="[PROTOCOL:]P",
                   help=f"also treat P as a server port of PROTOCOL (default the first; "
                   f"built in: {names}), for captures without the handshake (repeatable)")


def capture_set_options(args: argparse.Namespace) -> dict[str, Any]:
    """:class:`CaptureDecoder` keyword arguments from :func:`add_capture_set_options`."""
    ports: dict[str, set[int]] = {}
    for name, port in args.port:
        ports.setdefault(name, set()).add(port)
    return {"continuation": not args.each_file,
            "idle_split": args.idle_split or None, "ports": ports}
