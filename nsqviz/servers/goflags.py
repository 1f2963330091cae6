"""What the NSQ servers nsqviz stands in for share: the release they report and the
Go duration syntax of their flags.

Both the nsqd-compatible broker (:mod:`nsqviz.servers.nsqd`) and the nsqlookupd-compatible
discovery server read these, so they sit below both.
"""

from __future__ import annotations

import argparse
import re

__all__ = ["VERSION", "parse_duration"]

VERSION = "1.3.0"
"""The NSQ release the servers reproduce; reported in IDENTIFY, /info, /stats and
nsqlookupd's /info."""

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)")
_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: str) -> float:
    """A Go duration (``1m30s``, ``250ms``) in seconds; a bare number means seconds."""
    text = text.strip()
    try:
        return float(text)
    except ValueError:
        pass
    pos, total = 0, 0.0
    for m in _DURATION.finditer(text):
        if m.start() != pos:
            break
        total += float(m.group(1)) * _UNITS[m.group(2)]
        pos = m.end()
    if pos != len(text) or not text:
        raise argparse.ArgumentTypeError(f"invalid duration {text!r} (use e.g. 60s, 250ms, 15m)")
    return total
