"""Struct-based encoders and decoders for the hot paths, derived from :mod:`grammar`.

construct parses a message frame in tens of microseconds; a broker pushing 100,000
messages a second, or a pcap decoder chewing through gigabytes, cannot spend that. This
module does the same work with :mod:`struct` and byte slicing. It is not a second
grammar: each function mirrors one definition of ``grammar.py`` -- same fields, same
checks in the same order, same :class:`~nsqviz.nsq.grammar.GrammarError` subclasses with
the same offsets -- and ``tests/nsq/test_fastpath.py`` checks them against each other
on generated valid and invalid input.

Input to the decoders is exactly one frame or command, as cut by
:mod:`nsqviz.nsq.framing`.
"""

from __future__ import annotations

import json
from struct import Struct

from nsqviz.nsq.events import (
    Auth,
    Cls,
    Command,
    Dpub,
    Error,
    Fin,
    Identify,
    Magic,
    Message,
    Mpub,
    Nop,
    Pub,
    Rdy,
    Req,
    Response,
    ServerFrame,
    Sub,
    Touch,
)
from nsqviz.nsq.grammar import (
    MAGIC_V2,
    BadJSON,
    BadMessageID,
    BadName,
    BadNumber,
    BadSize,
    GrammarError,
    UnknownCommand,
    UnknownFrameType,
    is_valid_topic_name,
)
from nsqviz.stream.reassembly import RawFrame

__all__ = [
    "decode_command",
    "decode_frame",
    "decode_fins",
    "decode_frame_at",
    "decode_messages",
    "encode_command",
    "encode_frame",
]

_I32 = Struct(">i")
_U32 = Struct(">I")
_HEADER = Struct(">ii")
_MESSAGE_FRAME_HEADER = Struct(">iiqH16s")
_HEXDIGITS = b"0123456789abcdefABCDEF"

_RESPONSE = b"\x00\x00\x00\x00"
_ERROR = b"\x00\x00\x00\x01"

# ----------------------------------------------------------------------------- frames


def decode_frame(data: bytes, raw: RawFrame | None = None) -> ServerFrame:
    """One frame ``[size][frame type][data]`` -> Response, Error or Message."""
    return decode_frame_at(data, 0, len(data), raw)


def decode_frame_at(buf: bytes, start: int, end: int, raw: RawFrame | None = None) -> ServerFrame:
    """Like :func:`decode_frame` for ``buf[start:end]``, without copying it first.

    Error offsets are relative to ``start``, as if the frame had been cut out.
    """
    n = end - start
    if n >= 34:
        size, ftype, ts, attempts, mid = _MESSAGE_FRAME_HEADER.unpack_from(buf, start)
        if ftype == 2 and size == n - 4:
            if mid.translate(None, _HEXDIGITS):
                raise BadMessageID(f"message id {mid!r} is not 16 hex digits", offset=18)
            return Message(ts, attempts, mid, buf[start + 34 : end], raw)
    # The slow path below only runs for responses, errors and malformed frames.
    data = buf[start:end]
    if n < 4:
        raise GrammarError("frame shorter than its 4-byte size", offset=n)
    (size,) = _I32.unpack_from(data)
    if size < 4:
        raise BadSize(f"frame size {size} is smaller than the 4-byte frame type", offset=0)
    if n < 8:
        raise GrammarError("frame shorter than its 4-byte frame type", offset=n)
    (code,) = _I32.unpack_from(data, 4)
    if not 0 <= code <= 2:
        raise UnknownFrameType(f"unknown frame type {code}", offset=4)
    if n < 4 + size:
        raise GrammarError(f"frame data is {n - 8} bytes, size says {size - 4}", offset=n)
    if n > 4 + size:
        raise GrammarError(f"{n - 4 - size} bytes left over", offset=4 + size)
    ftype = data[4:8]
    if ftype == _RESPONSE:
        return Response(data[8:], raw)
    if ftype == _ERROR:
        return Error(data[8:], raw)
    raise GrammarError("message frame shorter than the 26-byte message header", offset=n)


def decode_messages(buf: bytes, items: list, i: int, pos: int, out: list) -> tuple[int, int]:
    """Decode the run of message frames at ``items[i:]`` (frame ends in ``buf``, as
    :meth:`~nsqviz.stream.Reassembler.cut` gives them, the first starting at ``pos``)
    into ``out``; return the index and position of the first item it did not take.

    The same checks as :func:`decode_frame_at`'s message branch, without a call per
    frame: a consumer's stream is almost all messages, and this is its hot loop.
    """
    unpack = _MESSAGE_FRAME_HEADER.unpack_from
    append = out.append
    n = len(items)
    while i < n:
        end = items[i]
        if type(end) is not int or end - pos < 34:
            break
        size, ftype, ts, attempts, mid = unpack(buf, pos)
        if ftype != 2 or size != end - pos - 4 or mid.translate(None, _HEXDIGITS):
            break
        append(Message(ts, attempts, mid, buf[pos + 34 : end]))
        pos = end
        i += 1
    return i, pos


def decode_fins(buf: bytes, items: list, i: int, pos: int, out: list) -> tuple[int, int]:
    """Decode the run of ``FIN <id>\\n`` commands at ``items[i:]`` (command ends in
    ``buf``, the first starting at ``pos``) into ``out``; return the index and position
    of the first item it did not take. :func:`decode_command`'s FIN, without a call per
    command: a busy consumer sends one FIN per message."""
    append = out.append
    n = len(items)
    while i < n:
        end = items[i]
        if (
            type(end) is not int
            or end - pos != 21
            or not buf.startswith(b"FIN ", pos)
            or buf[end - 1] != 0x0A
        ):
            break
        mid = buf[pos + 4 : end - 1]
        if mid.translate(None, _HEXDIGITS):
            break
        append(Fin(mid))
        pos = end
        i += 1
    return i, pos


def encode_frame(frame: ServerFrame) -> bytes:
    """Response, Error or Message -> the bytes nsqd sends."""
    if type(frame) is Message:
        body = frame.body
        mid = frame.id
        if len(mid) != 16 or mid.translate(None, _HEXDIGITS):
            raise BadMessageID(f"message id {mid!r} is not 16 hex digits")
        return (
            _MESSAGE_FRAME_HEADER.pack(30 + len(body), 2, frame.timestamp, frame.attempts, mid)
            + body
        )
    if type(frame) is Response:
        return _HEADER.pack(4 + len(frame.data), 0) + frame.data
    if type(frame) is Error:
        return _HEADER.pack(4 + len(frame.data), 1) + frame.data
    raise TypeError(f"not a frame: {frame!r}")


# --------------------------------------------------------------------------- commands


def _name(token: bytes, offset: int, kind: str) -> str:
    name = token.decode("ascii", "replace")
    if not is_valid_topic_name(name):
        raise BadName(f"{kind} name {name!r} is not valid", offset=offset)
    return name


def _decimal(token: bytes, offset: int, what: str) -> int:
    if not token.isdigit():
        raise BadNumber(f"{what} {token!r} is not a decimal integer", offset=offset)
    return int(token)


def _id(token: bytes, offset: int) -> bytes:
    if len(token) != 16 or token.translate(None, _HEXDIGITS):
        raise BadMessageID(f"message id {token!r} is not 16 hex digits", offset=offset)
    return token


class _Line:
    """Reads a command line's parameters left to right, as the grammar's Struct does:
    each separator, then each token, is checked before the next is looked at, so both
    report the same error at the same offset."""

    __slots__ = ("data", "nl", "pos", "verb")

    def __init__(self, data: bytes, nl: int, verb: bytes):
        self.data, self.nl, self.pos, self.verb = data, nl, len(verb), verb

    def param(self) -> tuple[bytes, int]:
        data, pos = self.data, self.pos
        if pos >= self.nl or data[pos] != 0x20:
            raise GrammarError(f"{self.verb.decode()}: expected a space", offset=pos)
        start = pos + 1
        end = data.find(b" ", start, self.nl)
        self.pos = end = self.nl if end < 0 else end
        return data[start:end], start

    def end(self) -> None:
        if self.pos != self.nl:
            verb = self.verb.decode()
            raise GrammarError(f"{verb}: expected the end of the line", offset=self.pos)


def _sized(data: bytes, pos: int, what: str, base: int = 0) -> tuple[bytes, int]:
    """``[4-byte size][N bytes]`` at ``pos``; returns the bytes and the position after.

    ``base`` is where ``data`` itself starts in the command, for error offsets.
    """
    if len(data) - pos < 4:
        raise GrammarError(f"{what} size is cut short", offset=base + len(data))
    (size,) = _I32.unpack_from(data, pos)
    if size < 1:
        raise BadSize(f"invalid {what} size {size}", offset=base + pos)
    end = pos + 4 + size
    if end > len(data):
        raise GrammarError(f"{what} is cut short", offset=base + len(data))
    return data[pos + 4 : end], end


def _whole(data: bytes, end: int) -> None:
    if end != len(data):
        raise GrammarError(f"{len(data) - end} bytes left over", offset=end)


def decode_command(data: bytes, raw: RawFrame | None = None) -> Command:
    """One command (line, plus body where the verb has one) -> its event."""
    nl = data.find(b"\n")
    sp = data.find(b" ", 0, nl if nl >= 0 else len(data))
    verb_end = sp if sp >= 0 else nl
    verb = data[:verb_end] if verb_end >= 0 else data
    decode = _DECODERS.get(verb)
    if decode is None:
        raise UnknownCommand(f"invalid command {verb.decode('ascii', 'replace')!r}", offset=0)
    if nl < 0:
        raise GrammarError("command line has no newline", offset=len(data))
    return decode(data, nl, raw)


def _identify(data, nl, raw):
    _Line(data, nl, b"IDENTIFY").end()
    body, end = _sized(data, nl + 1, "IDENTIFY body")
    _whole(data, end)
    try:
        value = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BadJSON(f"not JSON: {exc}", offset=nl + 5) from None
    if not isinstance(value, dict):
        raise BadJSON(f"expected a JSON object, got {type(value).__name__}", offset=nl + 5)
    return Identify(value, raw)


def _auth(data, nl, raw):
    _Line(data, nl, b"AUTH").end()
    secret, end = _sized(data, nl + 1, "AUTH body")
    _whole(data, end)
    return Auth(secret, raw)


def _sub(data, nl, raw):
    line = _Line(data, nl, b"SUB")
    topic = _name(*line.param(), "topic")
    channel = _name(*line.param(), "channel")
    line.end()
    _whole(data, nl + 1)
    return Sub(topic, channel, raw)


def _pub(data, nl, raw):
    line = _Line(data, nl, b"PUB")
    topic = _name(*line.param(), "topic")
    line.end()
    body, end = _sized(data, nl + 1, "message body")
    _whole(data, end)
    return Pub(topic, body, raw)


def _mpub(data, nl, raw):
    line = _Line(data, nl, b"MPUB")
    topic = _name(*line.param(), "topic")
    line.end()
    body, end = _sized(data, nl + 1, "MPUB body")
    _whole(data, end)
    base = nl + 5
    if len(body) < 4:
        raise GrammarError("MPUB message count is cut short", offset=base + len(body))
    (count,) = _I32.unpack_from(body)
    if count < 1:
        raise BadSize(f"MPUB invalid message count {count}", offset=base)
    pos = 4
    bodies = []
    for _ in range(count):
        msg, pos = _sized(body, pos, "message body", base)
        bodies.append(msg)
    if pos != len(body):
        rest = len(body) - pos
        raise BadSize(f"MPUB body has {rest} bytes after its last message", offset=base + pos)
    return Mpub(topic, tuple(bodies), raw)


def _dpub(data, nl, raw):
    line = _Line(data, nl, b"DPUB")
    topic = _name(*line.param(), "topic")
    defer = _decimal(*line.param(), "defer time")
    line.end()
    body, end = _sized(data, nl + 1, "message body")
    _whole(data, end)
    return Dpub(topic, defer, body, raw)


def _rdy(data, nl, raw):
    line = _Line(data, nl, b"RDY")
    count = _decimal(*line.param(), "RDY count")
    line.end()
    _whole(data, nl + 1)
    return Rdy(count, raw)


def _fin(data, nl, raw):
    line = _Line(data, nl, b"FIN")
    mid = _id(*line.param())
    line.end()
    _whole(data, nl + 1)
    return Fin(mid, raw)


def _req(data, nl, raw):
    line = _Line(data, nl, b"REQ")
    mid = _id(*line.param())
    timeout = _decimal(*line.param(), "timeout")
    line.end()
    _whole(data, nl + 1)
    return Req(mid, timeout, raw)


def _touch(data, nl, raw):
    line = _Line(data, nl, b"TOUCH")
    mid = _id(*line.param())
    line.end()
    _whole(data, nl + 1)
    return Touch(mid, raw)


def _cls(data, nl, raw):
    _Line(data, nl, b"CLS").end()
    _whole(data, nl + 1)
    return Cls(raw)


def _nop(data, nl, raw):
    _Line(data, nl, b"NOP").end()
    _whole(data, nl + 1)
    return Nop(raw)


_DECODERS = {
    b"IDENTIFY": _identify,
    b"AUTH": _auth,
    b"SUB": _sub,
    b"PUB": _pub,
    b"MPUB": _mpub,
    b"DPUB": _dpub,
    b"RDY": _rdy,
    b"FIN": _fin,
    b"REQ": _req,
    b"TOUCH": _touch,
    b"CLS": _cls,
    b"NOP": _nop,
}


def _check_name(name: str, kind: str) -> bytes:
    if not is_valid_topic_name(name):
        raise BadName(f"{kind} name {name!r} is not valid")
    return name.encode("ascii")


def _check_decimal(value: int, what: str) -> bytes:
    if not isinstance(value, int) or value < 0:
        raise BadNumber(f"{what} must be a non-negative int, got {value!r}")
    return b"%d" % value


def _check_id(mid: bytes) -> bytes:
    return _id(mid, 0)


def _size(data: bytes) -> bytes:
    if not data:
        raise BadSize("invalid body size 0")
    return _I32.pack(len(data)) + data


def encode_command(cmd: Command) -> bytes:
    """A command event -> its bytes on the wire, refusing what the grammar would refuse."""
    kind = type(cmd)
    if kind is Fin:
        return b"FIN " + _check_id(cmd.id) + b"\n"
    if kind is Rdy:
        return b"RDY " + _check_decimal(cmd.count, "RDY count") + b"\n"
    if kind is Pub:
        return b"PUB " + _check_name(cmd.topic, "topic") + b"\n" + _size(cmd.body)
    if kind is Mpub:
        parts = [_U32.pack(len(cmd.bodies))]
        parts.extend(_size(b) for b in cmd.bodies)
        return b"MPUB " + _check_name(cmd.topic, "topic") + b"\n" + _size(b"".join(parts))
    if kind is Req:
        timeout = _check_decimal(cmd.timeout, "timeout")
        return b"REQ " + _check_id(cmd.id) + b" " + timeout + b"\n"
    if kind is Touch:
        return b"TOUCH " + _check_id(cmd.id) + b"\n"
    if kind is Nop:
        return b"NOP\n"
    if kind is Sub:
        topic = _check_name(cmd.topic, "topic")
        return b"SUB " + topic + b" " + _check_name(cmd.channel, "channel") + b"\n"
    if kind is Dpub:
        topic = _check_name(cmd.topic, "topic")
        defer = _check_decimal(cmd.defer_time, "defer time")
        return b"DPUB " + topic + b" " + defer + b"\n" + _size(cmd.body)
    if kind is Identify:
        return b"IDENTIFY\n" + _size(json.dumps(cmd.data, separators=(",", ":")).encode())
    if kind is Auth:
        return b"AUTH\n" + _size(cmd.secret)
    if kind is Cls:
        return b"CLS\n"
    if kind is Magic:
        return MAGIC_V2
    raise TypeError(f"not a command: {cmd!r}")
