"""The errors the NSQ grammar raises: each names the offset, the field in the protocol's
words and the reason (re-exported by :mod:`nsqviz.nsq.grammar`)."""

from __future__ import annotations

from construct import ConstructError

__all__ = [
    "BadJSON",
    "BadMessageID",
    "BadName",
    "BadNumber",
    "BadSize",
    "GrammarError",
    "UnknownCommand",
    "UnknownFrameType",
]


class GrammarError(ConstructError):
    """Bytes that do not fit the grammar.

    ``offset`` is where in the input it was noticed, ``field`` the name of the field that
    failed (``"topic"``, ``"body size"`` ...; ``None`` for the line's own structure) and
    ``reason`` says why, in the protocol's words.
    """

    def __init__(
        self,
        message: str,
        *,
        offset: int | None = None,
        path: str | None = None,
        field: str | None = None,
    ):
        super().__init__(message, path)
        self.offset = offset
        self.reason = message
        self.field = field

    def __str__(self) -> str:
        where = f" at offset {self.offset}" if self.offset is not None else ""
        return f"{type(self).__name__}{where}: {self.reason}"


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
