"""Struct-based encoders and decoders for the hot paths, derived from :mod:`grammar`.

construct parses a message frame in tens of microseconds; a broker pushing 100,000
messages a second, or a pcap decoder chewing through gigabytes, cannot spend that. This
module does the same work with :mod:`struct` and byte slicing. It is not a second
grammar: frames mirror the definitions of ``grammar_frames.py``, and commands are decoded and
encoded by the same command table the grammar is built from
(:mod:`nsqviz.nsq.commands`), with lines read by the shared lexer -- same fields, same
checks in the same order, same :class:`~nsqviz.nsq.grammar.GrammarError` subclasses with
the same offsets and fields -- and ``tests/nsq/test_fastpath.py`` checks them against
each other on generated valid and invalid input.

Input to the decoders is exactly one frame or command, as cut by
:mod:`nsqviz.nsq.framing`; a consumer's runs of FINs and a broker's runs of one
publish's messages go through :mod:`nsqviz.nsq.runs`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from struct import Struct
from typing import Any, Protocol

from nsqviz import compactjson
from nsqviz.nsq.commands import (
    BY_EVENT,
    BY_VERB,
    MESSAGE_ID,
    BodyKind,
    Param,
    ParamKind,
)
from nsqviz.nsq.events import (
    Command,
    Error,
    Fin,
    Magic,
    Message,
    Response,
    ServerFrame,
)
from nsqviz.nsq.grammar_errors import (
    BadJSON,
    BadMessageID,
    BadName,
    BadNumber,
    BadSize,
    GrammarError,
    UnknownCommand,
    UnknownFrameType,
    numbered,
)
from nsqviz.nsq.json_object import read_object
from nsqviz.nsq.lexer import line_end, verb_of
from nsqviz.nsq.runs import HEX_DIGITS, check_ids
from nsqviz.nsq.wire import (
    MAGIC_V2,
    bad_name_reason,
    first_bad_name_byte,
    is_valid_topic_name,
)
from nsqviz.stream.reassembly import Garbage, RawFrame
from nsqviz.stream.sizes import INT32

__all__ = [
    "decode_command",
    "decode_command_lenient",
    "decode_frame",
    "decode_frame_at",
    "decode_messages",
    "encode_command",
    "encode_frame",
    "encode_messages",
    "MessageParts",
]

_HEADER = Struct(">ii")
_MESSAGE_FRAME_HEADER = Struct(">iiqH16s")

_RESPONSE = b"\x00\x00\x00\x00"
_ERROR = b"\x00\x00\x00\x01"

# ----------------------------------------------------------------------------- frames


def decode_frame(data: bytes, raw: RawFrame | None = None) -> Response | Error | Message:
    """One frame ``[size][frame type][data]`` -> Response, Error or Message."""
    return decode_frame_at(data, 0, len(data), raw)


def decode_frame_at(
    buf: bytes, start: int, end: int, raw: RawFrame | None = None
) -> Response | Error | Message:
    """Like :func:`decode_frame` for ``buf[start:end]``, without copying it first.

    Error offsets are relative to ``start``, as if the frame had been cut out.
    """
    n = end - start
    if n >= 34:
        size, ftype, ts, attempts, mid = _MESSAGE_FRAME_HEADER.unpack_from(buf, start)
        if ftype == 2 and size == n - 4:
            if mid.translate(None, HEX_DIGITS):
                raise BadMessageID(f"message id {mid!r} is not 16 hex digits", offset=18,
                                   field="id")
            return Message(ts, attempts, mid, buf[start + 34 : end], raw)
    # The slow path below only runs for responses, errors and malformed frames.
    data = buf[start:end]
    if n < 4:
        raise GrammarError("frame shorter than its 4-byte size", offset=n, field="size")
    (size,) = INT32.unpack_from(data)
    if size < 4:
        raise BadSize(f"frame size {size} is smaller than the 4-byte frame type", offset=0,
                      field="size")
    if n < 8:
        raise GrammarError("frame shorter than its 4-byte frame type", offset=n,
                           field="frame_type")
    (code,) = INT32.unpack_from(data, 4)
    if not 0 <= code <= 2:
        raise UnknownFrameType(f"unknown frame type {code}", offset=4, field="frame_type")
    if n < 4 + size:
        raise GrammarError(f"frame data is {n - 8} bytes, size says {size - 4}", offset=n,
                           field="data")
    if n > 4 + size:
        raise GrammarError(f"{n - 4 - size} bytes left over", offset=4 + size)
    ftype = data[4:8]
    if ftype == _RESPONSE:
        return Response(data[8:], raw)
    if ftype == _ERROR:
        return Error(data[8:], raw)
    short = "timestamp" if n < 16 else "attempts" if n < 18 else "id"
    raise GrammarError(f"message frame shorter than the 26-byte message header: {short} is cut"
                       " short", offset=n, field=short)


def decode_messages(
    buf: bytes, items: list[int | Garbage], i: int, pos: int, out: list[Message]
) -> tuple[int, int]:
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
        if ftype != 2 or size != end - pos - 4 or mid.translate(None, HEX_DIGITS):
            break
        append(Message(ts, attempts, mid, buf[pos + 34 : end]))
        pos = end
        i += 1
    return i, pos


def encode_frame(frame: ServerFrame) -> bytes:
    """Response, Error or Message -> the bytes nsqd sends."""
    if type(frame) is Message:
        return encode_messages((frame,))
    if type(frame) is Response:
        return _HEADER.pack(4 + len(frame.data), 0) + frame.data
    if type(frame) is Error:
        return _HEADER.pack(4 + len(frame.data), 1) + frame.data
    raise TypeError(f"not a frame: {frame!r}")


class MessageParts(Protocol):
    """What a message frame is made of: :class:`Message`, or a broker's own message
    object that has the same four fields (encoded without a Message made for it)."""

    @property
    def timestamp(self) -> int: ...

    @property
    def attempts(self) -> int: ...

    @property
    def id(self) -> bytes: ...

    @property
    def body(self) -> bytes: ...


def encode_messages(messages: Sequence[MessageParts]) -> bytes:
    """The message frames of ``messages``, one after the other, as one bytes object:
    a consumer's batch in a single write, each body copied once."""
    check_ids([m.id for m in messages])
    pack = _MESSAGE_FRAME_HEADER.pack
    parts: list[bytes] = []
    append = parts.append
    for m in messages:
        body = m.body
        append(pack(30 + len(body), 2, m.timestamp, m.attempts, m.id))
        append(body)
    return b"".join(parts)


# --------------------------------------------------------------------------- commands


def _name(token: bytes, offset: int, p: Param) -> str:
    name = token.decode("ascii", "replace")
    if not is_valid_topic_name(name):
        raise BadName(bad_name_reason(p.words, name),
                      offset=offset + first_bad_name_byte(token), field=p.field)
    return name


def _decimal(token: bytes, offset: int, p: Param) -> int:
    if not token.isdigit():
        raise BadNumber(f"{_OWNER[p]} {p.words} {token!r} is not a decimal integer",
                        offset=offset, field=p.field)
    return int(token)


def _id(token: bytes, offset: int, p: Param = MESSAGE_ID) -> bytes:
    if len(token) != 16 or token.translate(None, HEX_DIGITS):
        raise BadMessageID(f"message id {token!r} is not 16 hex digits", offset=offset,
                           field=p.field)
    return token


_OWNER = {p: spec.verb for spec in BY_VERB.values() for p in spec.params}
"""The verb of each parameter, which a number's error names (``RDY count``)."""

_CHECK: dict[ParamKind, Callable[[bytes, int, Param], object]] = {
    ParamKind.NAME: _name, ParamKind.DECIMAL: _decimal, ParamKind.ID: _id,
}
_CHECKS: dict[bytes, tuple[tuple[Param, Callable[[bytes, int, Param], object]], ...]] = {
    verb: tuple((p, _CHECK[p.kind]) for p in spec.params) for verb, spec in BY_VERB.items()}
"""Each verb's parameters with their checks, looked up once (an enum member as a key
costs a Python-level hash per parameter)."""

_LENIENT: dict[ParamKind, Callable[[bytes], object]] = {
    ParamKind.NAME: lambda t: t.decode("ascii", "replace"), ParamKind.ID: bytes,
}
"""The value a parameter nsqd refuses still has, where the event can hold it."""


def _sized(data: bytes, pos: int, what: str, field: str, base: int = 0,
           cut: str = "body", index: int | None = None) -> tuple[bytes, int]:
    """``[4-byte size][N bytes]`` at ``pos``; returns the bytes and the position after.

    ``base`` is where ``data`` itself starts in the command, for error offsets;
    ``index`` numbers one of MPUB's messages in the size error, as the grammar does.
    """
    start, end = _span(data, pos, what, field, base, cut, index)
    return data[start:end], end


def _span(data: bytes, pos: int, what: str, field: str, base: int = 0,
          cut: str = "body", index: int | None = None) -> tuple[int, int]:
    """:func:`_sized` without the copy: where the N bytes start and end in ``data``."""
    if len(data) - pos < 4:
        raise GrammarError(f"{field} is cut short", offset=base + len(data), field=cut)
    (size,) = INT32.unpack_from(data, pos)
    if size < 1:
        name = what if index is None else numbered(what, index)
        raise BadSize(f"invalid {name} size {size}", offset=base + pos, field=field)
    end = pos + 4 + size
    if end > len(data):
        raise GrammarError(f"{what} is cut short", offset=base + len(data), field=cut)
    return pos + 4, end


def _json_body(data: bytes, nl: int) -> tuple[dict[str, Any], int]:
    body, end = _sized(data, nl + 1, "IDENTIFY body", "body size")
    try:
        return read_object(body), end
    except BadJSON as exc:
        exc.offset, exc.field = nl + 5, "body"
        raise


def _secret_body(data: bytes, nl: int) -> tuple[bytes, int]:
    return _sized(data, nl + 1, "AUTH body", "body size", cut="secret")


def _message_body(data: bytes, nl: int) -> tuple[bytes, int]:
    return _sized(data, nl + 1, "message body", "message size")


_MPUB_COUNT = "num messages"
_NO_BODY = BodyKind.NONE  # read once a command (see nsqviz.stream.direction.C2S)
"""The grammar's name of MPUB's message count."""


def _messages_body(data: bytes, nl: int) -> tuple[tuple[bytes, ...], int]:
    base, end = _span(data, nl + 1, "MPUB body", "body size")  # base: the body's offset
    if end - base < 4:
        raise GrammarError("num messages is cut short", offset=end, field=_MPUB_COUNT)
    (count,) = INT32.unpack_from(data, base)
    if count < 1:
        raise BadSize(f"MPUB invalid message count {count}", offset=base, field=_MPUB_COUNT)
    # each message is sliced straight out of the command (the MPUB body is not copied
    # first); a size that does not fit goes to _sized, which names the fault
    pos = base + 4
    if (equal := _equal_bodies(data, pos, end, count)) is not None:
        return equal, end
    bodies: list[bytes] = []
    append = bodies.append
    unpack = INT32.unpack_from
    for i in range(count):
        if end - pos >= 4:
            (size,) = unpack(data, pos)
            stop = pos + 4 + size
            if size >= 1 and stop <= end:
                append(data[pos + 4 : stop])
                pos = stop
                continue
        msg, rel = _sized(data[base:end], pos - base, "message body", "message size", base,
                          "message size", i)
        append(msg)
        pos = base + rel
    if pos != end:
        raise BadSize(f"MPUB body has {end - pos} bytes after its last message", offset=pos,
                      field="body")
    return tuple(bodies), end


def _equal_bodies(data: bytes, pos: int, end: int, count: int) -> tuple[bytes, ...] | None:
    """MPUB's ``count`` messages from ``pos`` to ``end`` when they all have the first
    one's size (a producer's fixed-size records), cut by ``struct`` without a loop in
    Python -- every size field checked by strided slices, one per byte; None otherwise
    (the loop then reads them one by one, and names a fault if there is one)."""
    if end - pos < 4:
        return None
    size = INT32.unpack_from(data, pos)[0]
    stride = 4 + size
    if size < 1 or stride * count != end - pos:
        return None
    field = data[pos : pos + 4]
    for k in range(4):
        if data[pos + k : end : stride] != field[k : k + 1] * count:
            return None
    bodies: tuple[bytes, ...] = ()
    while count:
        n = min(count, _BODIES_AT_ONCE)
        bodies += _bodies_struct(size, n).unpack_from(data, pos)
        pos += stride * n
        count -= n
    return bodies


_BODIES_AT_ONCE = 256


@functools.lru_cache(maxsize=32)
def _bodies_struct(size: int, n: int) -> Struct:
    return Struct(f"4x{size}s" * n)


_BODY: dict[BodyKind, Callable[[bytes, int], tuple[object, int]]] = {
    BodyKind.JSON: _json_body,
    BodyKind.SECRET: _secret_body,
    BodyKind.MESSAGE: _message_body,
    BodyKind.MESSAGES: _messages_body,
}


def decode_command(data: bytes, raw: RawFrame | None = None) -> Command:
    """One command (line, plus body where the verb has one) -> its event."""
    return _decode(data, raw, None)


def decode_command_lenient(
    data: bytes, raw: RawFrame | None = None
) -> tuple[Command, GrammarError | None]:
    """Like :func:`decode_command`, but a well-framed command whose *values* the grammar
    refuses (a bad name, a bad message id, parameters past the last) still decodes, to
    the event holding what was sent, with the first refusal beside it -- also an MPUB
    whose whole body counts fewer than one message (an MPUB of none). What cannot be
    put in the event (no verb, a missing parameter, a number that is not one, a bad
    body) raises as :func:`decode_command` does."""
    found: list[GrammarError] = []
    cmd = _decode(data, raw, found)
    return cmd, found[0] if found else None


def _decode(data: bytes, raw: RawFrame | None, lenient: list[GrammarError] | None) -> Command:
    nl = data.find(b"\n")
    verb = verb_of(data, 0, nl if nl >= 0 else len(data))
    spec = BY_VERB.get(verb)
    if spec is None:
        raise UnknownCommand(f"invalid command {verb.decode('ascii', 'replace')!r}", offset=0,
                             field="verb")
    if nl < 0:
        raise GrammarError("command line has no newline", offset=len(data))
    end = line_end(data, 0, nl)
    pos = len(spec.wire)
    # positional (*line values, [body,] raw): the order tests/nsq/test_fastpath.py checks
    make: Callable[..., Command] = spec.event
    values: list[object] = []
    for p, check in _CHECKS[verb]:
        # each separator, then each token, is checked before the next is looked at, as
        # the grammar's Struct does, so both report the same error at the same offset
        if pos >= end or data[pos] != 0x20:
            missing = GrammarError(f"{spec.verb}: expected a space before {p.field}",
                                   offset=pos, field="line")
            if lenient is None or p.default is None or pos < end:
                raise missing
            lenient.append(missing)  # nsqd reads a missing RDY count as 1
            values.append(p.default)
            continue
        start = pos + 1
        pos = data.find(b" ", start, end)
        if pos < 0:
            pos = end
        token = data[start:pos]
        try:
            values.append(check(token, start, p))
        except GrammarError as exc:
            keep = _LENIENT.get(p.kind)
            if lenient is None:
                raise
            if keep is None:  # no event can hold it; nsqd answers the first fault
                raise lenient[0] if lenient else exc from None
            lenient.append(exc)
            values.append(keep(token))
    if pos != end:
        extra = GrammarError(f"{spec.verb}: expected the end of the line", offset=pos,
                             field="line")
        if lenient is None:
            raise extra
        lenient.append(extra)
    if spec.body is _NO_BODY:
        if nl + 1 != len(data):
            raise GrammarError(f"{len(data) - nl - 1} bytes left over", offset=nl + 1)
        return make(*values, raw)
    try:
        body, body_end = _BODY[spec.body](data, nl)
    except GrammarError as exc:
        refused = [e for e in lenient or () if e.field != "line"]
        if refused:  # nsqd refuses the line before it reads the body
            raise refused[0] from None
        if lenient is None or exc.field != _MPUB_COUNT or not isinstance(exc, BadSize):
            raise
        # An MPUB whose body is whole but counts no message: that MPUB, of no message,
        # with nsqd's answer to the count first (it reads the body before the count)
        lenient.insert(0, exc)
        body, body_end = (), _span(data, nl + 1, "MPUB body", "body size")[1]
    if body_end != len(data):
        raise GrammarError(f"{len(data) - body_end} bytes left over", offset=body_end)
    return make(*values, body, raw)


def _check_name(name: str, p: Param) -> bytes:
    if not is_valid_topic_name(name):
        raise BadName(bad_name_reason(p.words, name), field=p.field)
    return name.encode("ascii")


def _check_decimal(value: int, p: Param) -> bytes:
    if not isinstance(value, int) or value < 0:
        raise BadNumber(f"{_OWNER[p]} {p.words} must be a non-negative int, got {value!r}",
                        field=p.field)
    return b"%d" % value


def _check_id(mid: bytes, p: Param) -> bytes:
    return _id(mid, 0, p)


_ENCODE: dict[ParamKind, Callable[[Any, Param], bytes]] = {
    ParamKind.NAME: _check_name, ParamKind.DECIMAL: _check_decimal, ParamKind.ID: _check_id,
}


_SIZED: dict[BodyKind, tuple[str, str]] = {
    BodyKind.JSON: ("IDENTIFY body", "body size"),
    BodyKind.SECRET: ("AUTH body", "body size"),
    BodyKind.MESSAGE: ("message body", "message size"),
}
"""The bodies that are one ``[4-byte size][data]``: their name and their size field's."""


def _with_body(line: bytes, kind: BodyKind, value: Any) -> bytes:
    """A command's ``line`` followed by its body, joined once."""
    if kind is BodyKind.MESSAGES:
        return _with_messages(line, value)
    data = compactjson.encode(value) if kind is BodyKind.JSON else value
    if not data:
        what, field = _SIZED[kind]
        raise BadSize(f"invalid {what} size 0", field=field)
    return b"".join((line, INT32.pack(len(data)), data))


def _with_messages(line: bytes, bodies: tuple[bytes, ...]) -> bytes:
    """An MPUB: ``line``, ``[body size][num messages]``, then ``([message size][message])*``,
    each message copied once and no Python-level step per message (a publisher's hot
    loop). Messages of one size (a batch of fixed-size records) are joined with their
    one size field as the separator; otherwise the size fields are packed and put
    between the messages by slice assignment."""
    if not bodies:
        raise BadSize("MPUB invalid message count 0", field="num messages")
    sizes = list(map(len, bodies))
    n, first = len(sizes), sizes[0]
    if first and sizes.count(first) == n:  # one size: its size field separates them
        head = _HEADER.pack(4 + n * (4 + first), n)
        return INT32.pack(first).join([line + head, *bodies])
    if not all(sizes):
        raise BadSize("invalid message body size 0", field="message size")
    parts = [line] * (2 * n + 2)
    parts[1] = _HEADER.pack(4 + 4 * n + sum(sizes), n)
    parts[2::2] = map(INT32.pack, sizes)
    parts[3::2] = bodies
    return b"".join(parts)


_ENCODING: dict[type[Command], tuple[bytes, tuple[tuple[str, Callable[[Any, Param], bytes],
                                                        Param], ...], str | None, BodyKind]] = {
    spec.event: (spec.wire, tuple((p.field, _ENCODE[p.kind], p) for p in spec.params),
                 spec.event_body, spec.body)
    for spec in BY_EVENT.values()
}
"""Each command class's encoding, read once from the command table: its verb, each line
parameter's field and check, its body's field (``None``: no body) and kind."""


def encode_command(cmd: Command) -> bytes:
    """A command event -> its bytes on the wire, refusing what the grammar would refuse."""
    if type(cmd) is Fin:  # a consumer's most frequent command
        return b"FIN " + _id(cmd.id, 0) + b"\n"
    kind = type(cmd)
    if kind is Magic:
        return MAGIC_V2
    encoding = _ENCODING.get(kind)
    if encoding is None:
        raise TypeError(f"not a command: {cmd!r}")
    wire, params, body, body_kind = encoding
    line = [wire]
    for field, check, p in params:
        line.append(check(getattr(cmd, field), p))
    out = b" ".join(line) + b"\n"
    if body is None:
        return out
    return _with_body(out, body_kind, getattr(cmd, body))
