"""The bytes of an HTTP/1.1 message as a grammar (``construct``), for what sees bytes --
the hex view's field tree, the palette: the start line's words, each header line's name
and value, the blank line, the body. Parsing and judging HTTP is h11's
(:mod:`nsqviz.http.codec`); this grammar lays out a message h11 accepted, so it keeps to
RFC 9112's shapes (CRLF line ends) and an odd message is laid out as far as it fits,
the rest ``(unparsed)``.

nsqd's ``POST /mpub?binary=true`` body is an MPUB command's body -- ``[num
messages][message size][message]...`` --, NSQ's own grammar (:mod:`nsqviz.nsq.grammar`),
which :func:`nsqviz.http.api.publish` reads it with.
"""

from __future__ import annotations

from typing import Any

from construct import (
    GreedyBytes,
    GreedyRange,
    SizeofError,
    Struct,
    stream_read,
    stream_tell,
)

from nsqviz.nsq.grammar_base import ConstructBase
from nsqviz.nsq.grammar_errors import GrammarError

__all__ = ["CRLF", "SP", "HeaderLine", "Request", "Response", "RequestLine", "StatusLine"]


class _Word(ConstructBase):
    """Text up to (not including) ``stop``, none of it a line end: a method, a target, a
    header's name ..."""

    def __init__(self, stop: bytes, what: str) -> None:
        super().__init__()
        self.stop = stop
        self.what = what

    def _parse(self, stream: Any, context: Any, path: Any) -> str:
        start = stream_tell(stream, path)
        out = bytearray()
        while True:
            byte = stream_read(stream, 1, path)
            if byte == self.stop[:1]:
                stream.seek(-1, 1)
                return out.decode("latin-1")
            if byte in (b"\r", b"\n") and self.stop[:1] != b"\r":
                raise GrammarError(f"a line ends inside the {self.what}", offset=start,
                                   field=self.what, path=path)
            out += byte

    def _build(self, obj: str, stream: Any, context: Any, path: Any) -> Any:
        stream.write(obj.encode("latin-1"))
        return obj

    def _sizeof(self, context: Any, path: Any) -> int:
        raise SizeofError("a word's size depends on its text", path=path)


class _Mark(ConstructBase):
    """A fixed run of bytes between the words (its name in byte views: ``layout_name``)."""

    def __init__(self, value: bytes, layout_name: str) -> None:
        super().__init__()
        self.value = value
        self.layout_name = layout_name
        self.flagbuildnone = True

    def _parse(self, stream: Any, context: Any, path: Any) -> bytes:
        start = stream_tell(stream, path)
        got = stream_read(stream, len(self.value), path)
        if got != self.value:
            raise GrammarError(f"expected {self.value!r}, got {got!r}", offset=start,
                               field=self.layout_name, path=path)
        return got

    def _build(self, obj: None, stream: Any, context: Any, path: Any) -> Any:
        stream.write(self.value)
        return self.value

    def _sizeof(self, context: Any, path: Any) -> int:
        return len(self.value)


SP = _Mark(b" ", "space")
CRLF = _Mark(b"\r\n", "line end")

RequestLine = Struct(
    "method" / _Word(b" ", "method"), SP,
    "target" / _Word(b" ", "request-target"), SP,
    "version" / _Word(b"\r", "HTTP-version"), CRLF,
)
"""``method SP request-target SP HTTP-version CRLF``."""

StatusLine = Struct(
    "version" / _Word(b" ", "HTTP-version"), SP,
    "status" / _Word(b" ", "status-code"), SP,
    "reason" / _Word(b"\r", "reason-phrase"), CRLF,
)
"""``HTTP-version SP status-code SP [reason-phrase] CRLF``."""

HeaderLine = Struct(
    "name" / _Word(b":", "field-name"), _Mark(b":", "colon"),
    "value" / _Word(b"\r", "field-value"), CRLF,
)
"""``field-name ":" OWS field-value OWS CRLF`` (the value keeps its spaces)."""

Request = Struct(
    "line" / RequestLine,
    "headers" / GreedyRange(HeaderLine),
    "end" / CRLF,
    "body" / GreedyBytes,
)
"""A request as sent: its body as on the wire (chunked, if it came in chunks)."""

Response = Struct(
    "line" / StatusLine,
    "headers" / GreedyRange(HeaderLine),
    "end" / CRLF,
    "body" / GreedyBytes,
)
"""A response as sent."""
