"""The errors the NSQ grammar raises: each names the offset, the field in the protocol's
words and the reason (below :class:`nsqviz.sansio.GrammarError`, the one family every
protocol's grammar errors belong to)."""

from __future__ import annotations

from nsqviz import sansio

__all__ = [
    "BadJSON",
    "numbered",
    "BadMessageID",
    "BadName",
    "BadNumber",
    "BadSize",
    "GrammarError",
    "UnknownCommand",
    "UnknownFrameType",
]


class GrammarError(sansio.GrammarError):
    """Bytes that do not fit NSQ's grammar (the shared :class:`nsqviz.sansio.GrammarError`:
    ``offset``, ``field`` in the protocol's words -- ``"topic"``, ``"body size"``;
    ``None`` for the line's own structure -- and ``reason``)."""


class BadSize(GrammarError):
    """A size prefix that cannot be right (negative, too small, or beyond a limit)."""


class UnknownFrameType(GrammarError):
    """A frame type other than FrameTypeResponse (0), FrameTypeError (1), FrameTypeMessage (2)."""


class UnknownCommand(GrammarError):
    """A command verb that protocol V2 does not have."""


class BadName(GrammarError):
    """A topic or channel name outside ``[.a-zA-Z0-9_-]{1,64}`` (+ optional ``#ephemeral``)."""


class BadMessageID(GrammarError):
    """A message id that is not 16 ASCII hex digits."""


class BadNumber(GrammarError):
    """A decimal parameter (RDY count, REQ timeout, DPUB defer time) that is not an integer."""


class BadJSON(GrammarError):
    """An IDENTIFY body (or a JSON response) that is not a JSON object."""


def numbered(what: str, index: int) -> str:
    """``message body`` -> ``message(1) body``: how nsqd names one message of an MPUB."""
    noun, _, rest = what.partition(" ")
    return f"{noun}({index}) {rest}".rstrip()
