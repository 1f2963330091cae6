"""NSQ's wire constants and value rules, without construct: the magic, nsqd's rule for
topic and channel names, and Go's compact JSON.

The grammar (:mod:`nsqviz.nsq.grammar`) and its struct-based twin for hot loops
(:mod:`nsqviz.nsq.fastpath`, :mod:`nsqviz.nsq.framing`) both read these, so that the
hot paths do not import the construct grammar for them.
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["MAGIC_V2", "NAME_RE", "compact_json", "first_bad_name_byte", "is_valid_channel_name",
           "is_valid_topic_name"]

MAGIC_V2 = b"  V2"
"""The four bytes a client sends first to speak protocol V2."""

NAME_RE = re.compile(r"^[.a-zA-Z0-9_-]+(#ephemeral)?$")
"""nsqd's characters for a topic or channel name (the length, 1..64, checked apart)."""


def is_valid_topic_name(name: str) -> bool:
    """nsqd's rule: ``[.a-zA-Z0-9_-]``, optional ``#ephemeral`` suffix, 1..64 in total."""
    return 1 <= len(name) <= 64 and NAME_RE.match(name) is not None


is_valid_channel_name = is_valid_topic_name


def first_bad_name_byte(name: bytes) -> int:
    """Where in an invalid name nsqd's rule breaks: the first byte outside
    ``[.a-zA-Z0-9_-]`` (a ``#ephemeral`` suffix allowed), else the 65th byte."""
    stem = name.removesuffix(b"#ephemeral") if len(name) > len(b"#ephemeral") else name
    for i, byte in enumerate(stem):
        if not NAME_RE.match(chr(byte)):
            return i
    return min(64, len(name))


def compact_json(value: Any) -> bytes:
    """``value`` as JSON without spaces, as Go's ``encoding/json`` writes it: how
    clients send IDENTIFY bodies and how nsqd answers IDENTIFY and AUTH."""
    return json.dumps(value, separators=(",", ":")).encode()
