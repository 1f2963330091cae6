"""``nsqviz fields [WORD]``: the display-filter fields ``nsqviz decode -Y`` and the
generated dissectors know, one a line (as ``tshark -G fields`` lists Wireshark's)."""

from __future__ import annotations

import argparse
import sys
from typing import Any, TextIO

from nsqviz import protocols
from nsqviz.usage import help_text

__all__ = ["register", "run"]


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("fields", help="list the display-filter fields (for decode -Y)",
                              description=help_text(__doc__))
    p.add_argument("word", nargs="?", default="",
                   help="only fields whose name or title contains it (case-insensitive)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    word = args.word.lower()
    for f in protocols.filter_fields().values():
        if word not in f.abbrev.lower() and word not in f.title.lower():
            continue
        values = ""
        if f.values:
            values = "  values: " + ", ".join(f"{k}={v}" for k, v in f.values.items())
        about = f"  -- {f.description}" if f.description else ""
        out.write(f"{f.abbrev:28} {f.type.value:14} {f.title}{about}{values}\n")
    return 0
