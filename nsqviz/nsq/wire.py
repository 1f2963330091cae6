"""NSQ's wire constants and value rules, without construct: the magic, the heartbeat,
nsqd's rule for topic and channel names.

The grammar (:mod:`nsqviz.nsq.grammar`) and its struct-based twin for hot loops
(:mod:`nsqviz.nsq.fastpath`, :mod:`nsqviz.nsq.framing`) both read these, so that the
hot paths do not import the construct grammar for them.
"""

from __future__ import annotations

import re

__all__ = ["EPHEMERAL", "HEARTBEAT", "MAGIC_V2", "MESSAGE_ID_SIZE", "NAME_CHARS", "NAME_MAX",
           "NAME_RE", "NAME_RULE", "bad_name_reason", "first_bad_name_byte",
           "is_valid_channel_name", "is_valid_topic_name"]

MAGIC_V2 = b"  V2"
"""The four bytes a client sends first to speak protocol V2."""

MESSAGE_ID_SIZE = 16
"""A message id's length on the wire: nsqd writes 16 ASCII hex digits."""

HEARTBEAT = b"_heartbeat_"
"""The data of the FrameTypeResponse nsqd sends as a heartbeat (a client answers NOP)."""

NAME_CHARS = "[.a-zA-Z0-9_-]"
"""nsqd's characters for a topic or channel name."""
NAME_MAX = 64
"""nsqd's longest topic or channel name, the ``#ephemeral`` suffix included."""
EPHEMERAL = "#ephemeral"
"""The suffix that makes a topic or channel go away with its last client."""

NAME_RE = re.compile(f"^{NAME_CHARS}+({EPHEMERAL})?$")
"""nsqd's characters for a topic or channel name (the length, 1..64, checked apart)."""

NAME_RULE = f"1 to {NAME_MAX} characters of {NAME_CHARS}, optionally ending in {EPHEMERAL}"
"""The rule in words, for an error that refuses a name: the learner sees what would pass."""


def is_valid_topic_name(name: str) -> bool:
    """nsqd's rule: ``[.a-zA-Z0-9_-]``, optional ``#ephemeral`` suffix, 1..64 in total."""
    return 1 <= len(name) <= NAME_MAX and NAME_RE.match(name) is not None


def bad_name_reason(words: str, name: str) -> str:
    """Why ``name`` (a ``words`` name: "topic", "SUB channel") is refused, with the rule."""
    return f"{words} name {name!r} is not valid: {NAME_RULE}"


is_valid_channel_name = is_valid_topic_name


def first_bad_name_byte(name: bytes) -> int:
    """Where in an invalid name nsqd's rule breaks: the first byte outside
    ``[.a-zA-Z0-9_-]`` (a ``#ephemeral`` suffix allowed), else the 65th byte."""
    suffix = EPHEMERAL.encode()
    stem = name.removesuffix(suffix) if len(name) > len(suffix) else name
    for i, byte in enumerate(stem):
        if not NAME_RE.match(chr(byte)):
            return i
    return min(NAME_MAX, len(name))


