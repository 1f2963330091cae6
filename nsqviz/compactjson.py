"""JSON without spaces, the one compact encoding of nsqviz.

How its clients write IDENTIFY bodies and its servers their answers (Go's
``encoding/json``, which nsqd and nsqlookupd use, writes no spaces; it writes a map's
keys sorted, as nsqlookupd's IDENTIFY answer has them), and how records and their
outputs write fields. Each encoder is built once: :func:`json.dumps` with options builds
a new one per call.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["SEPARATORS", "dumps", "dumps_sorted", "encode"]

SEPARATORS = (",", ":")
"""No space after a comma or a colon."""

dumps = json.JSONEncoder(separators=SEPARATORS).encode
"""``json.dumps(value, separators=(",", ":"))``: a value as compact JSON text."""

dumps_sorted = json.JSONEncoder(separators=SEPARATORS, sort_keys=True).encode
""":data:`dumps` with every object's keys sorted (as Go writes a map)."""


def encode(value: Any) -> bytes:
    """``value`` as compact JSON bytes, what goes on the wire."""
    return dumps(value).encode()
