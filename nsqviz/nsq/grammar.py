"""The NSQ V2 wire protocol as declarative ``construct`` grammars.

These definitions are the reference for NSQ's bytes, but not the only decoder: the
struct-based fast path in :mod:`nsqviz.nsq.fastpath` is a second definition, written for
hot loops and differentially tested against this one (same accept/reject, same error
class, field and offset). Everything that parses or builds NSQ traffic -- the codec, the
broker, pcap replay, the Spark pipeline, the widgets -- goes through one of the two.

The layouts follow NSQ's protocol spec (https://nsq.io/clients/tcp_protocol_spec.html):

* the magic ``"  V2"`` a client sends first;
* commands: a text line ``VERB[ param...]\\n``, some followed by a body prefixed with a
  4-byte big-endian size (IDENTIFY, AUTH, PUB, MPUB, DPUB);
* frames from nsqd: ``[size:int32][frame type:int32][data]`` where size counts the frame
  type and the data;
* messages (the data of a ``FrameTypeMessage``): ``[timestamp:int64 ns][attempts:uint16]
  [id:16 ASCII hex][body]``.

This module holds the magic and the commands; the frames and messages are in
:mod:`nsqviz.nsq.grammar_frames`, the errors (and how a failure is given its field and
offset) in :mod:`nsqviz.nsq.grammar_errors`, the IDENTIFY keys in
:mod:`nsqviz.nsq.identify_fields`, the constants and name rules the hot paths share in
:mod:`nsqviz.nsq.wire`. Five names are re-exported (``Frame``, ``Message``,
``parse_frame``, ``GrammarError``, ``MAGIC_V2``) so that a notebook reads the whole wire
format as ``grammar.<name>``; code imports them from where they are defined.

Every definition parses and builds, and ``build(parse(x)) == x`` for every valid ``x``
(JSON bodies keep their original bytes through :class:`construct.RawCopy`) -- except
that a line ended by ``\\r\\n``, which nsqd accepts by trimming the ``\\r``, is built
with ``\\n``. The commands are built from the command table
(:mod:`nsqviz.nsq.commands`): one entry per verb says its parameters and body.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from construct import (
    Const,
    ConstructError,
    GreedyBytes,
    Int32sb,
    Prefixed,
    PrefixedArray,
    RawCopy,
    Struct,
    Switch,
    this,
)
from construct.core import stream_read, stream_tell, stream_write

from nsqviz import compactjson
from nsqviz.nsq.commands import COMMANDS as TABLE
from nsqviz.nsq.commands import MAGIC_NAME, BodyKind, CommandSpec, Param, ParamKind
from nsqviz.nsq.grammar_base import (
    AdapterBase,
    ConstBase,
    ConstructBase,
    Grammar,
    _Located,
    parse_exactly,
)
from nsqviz.nsq.grammar_errors import (
    BadJSON,
    BadName,
    BadNumber,
    BadSize,
    GrammarError,
    UnknownCommand,
    numbered,
)
from nsqviz.nsq.grammar_frames import Frame, Message, hex_id, parse_frame
from nsqviz.nsq.json_object import read_object
from nsqviz.nsq.wire import (
    MAGIC_V2,
    bad_name_reason,
    first_bad_name_byte,
    is_valid_topic_name,
)

if TYPE_CHECKING:
    from construct.core import Context, PathType, StreamType

__all__ = [
    # the grammar's own definitions
    "AUTH",
    "CLS",
    "COMMANDS",
    "DPUB",
    "FIN",
    "IDENTIFY",
    "LF",
    "MPUB",
    "NOP",
    "PUB",
    "RDY",
    "REQ",
    "SP",
    "SUB",
    "TOUCH",
    "Command",
    "JSONObject",
    "Magic",
    "Spelled",
    "body",
    "name_field",
    "parse_command",
    # re-exported so that this module is the whole wire format in one namespace
    "Frame",
    "GrammarError",
    "MAGIC_V2",
    "Message",
    "parse_frame",
]

# ------------------------------------------------------------------- text primitives


class _Separator(ConstBase):
    """A space or newline of a command line; a wrong byte is reported where it *is*
    (construct's ConstError would only say where the stream stood after reading it)."""

    layout_name = "separator"  # the word byte views show for it (see nsqviz.layout)

    value: bytes

    def _parse(self, stream: StreamType, context: Context, path: PathType) -> bytes:
        start = stream_tell(stream, path)
        got = stream_read(stream, len(self.value), path)
        if got != self.value:
            raise GrammarError(f"expected {self.value!r}, got {got!r}", offset=start, path=path,
                               field="line")
        return got


class _LineEnd(_Separator):
    """The ``\n`` that ends a command line; nsqd trims one ``\r`` before it, so
    ``\r\n`` ends a line too (it is built as ``\n``)."""

    layout_name = "newline"

    def __init__(self) -> None:
        super().__init__(b"\n")

    def _parse(self, stream: StreamType, context: Context, path: PathType) -> bytes:
        start = stream_tell(stream, path)
        got = stream_read(stream, 1, path)
        if got == b"\r":
            got = stream_read(stream, 1, path)
            if got == b"\n":
                return b"\r\n"
        if got != b"\n":
            raise GrammarError(f"expected the end of the line, got {got!r}", offset=start,
                               path=path, field="line")
        return got


SP = _Separator(b" ")
LF = _LineEnd()

class Token(ConstructBase):
    """The bytes of one command parameter: everything up to the next space or newline.

    The separator itself is left in the stream for the enclosing ``SP``/``LF`` to match,
    so every byte of a command line belongs to exactly one named field.
    """

    def _parse(self, stream: StreamType, context: Context, path: PathType) -> bytes:
        out = bytearray()
        while True:
            b = stream_read(stream, 1, path)
            if b in (b" ", b"\n"):
                stream.seek(-1, 1)
                return bytes(out)
            if b == b"\r":  # nsqd trims a \r before the \n: it belongs to the line end
                after = stream.read(1)
                stream.seek(-len(after), 1)
                if after == b"\n":
                    stream.seek(-1, 1)
                    return bytes(out)
            out += b

    def _build(self, obj: object, stream: StreamType, context: Context, path: PathType) -> Any:
        if not isinstance(obj, bytes | bytearray):
            raise GrammarError(f"token must be bytes, got {type(obj).__name__}", path=path)
        if b" " in obj or b"\n" in obj:
            raise GrammarError(f"token {bytes(obj)!r} contains a separator", path=path)
        stream_write(stream, bytes(obj), len(obj), path)
        return obj

    def _sizeof(self, context: Context, path: PathType) -> int:
        raise ConstructError("a token has no fixed size", path)


class _NameAdapter(AdapterBase):
    """A topic or channel name, validated with nsqd's rule."""

    def __init__(self, kind: str):
        super().__init__(Token())
        self.kind = kind

    def _parse(self, stream: StreamType, context: Context, path: PathType) -> str:
        start = stream_tell(stream, path)
        obj = self.subcon._parsereport(stream, context, path)
        try:
            return self._decode(obj, context, path)
        except BadName as exc:  # point at the offending byte, not the name's first
            if exc.offset is None:
                exc.offset = start + first_bad_name_byte(obj)
            raise

    def _decode(self, obj: bytes, context: Context, path: PathType) -> str:
        name = obj.decode("ascii", "replace")
        if not is_valid_topic_name(name):
            raise BadName(bad_name_reason(self.kind, name), path=path)
        return name

    def _encode(self, obj: str, context: Context, path: PathType) -> bytes:
        if not is_valid_topic_name(obj):
            raise BadName(bad_name_reason(self.kind, obj), path=path)
        return obj.encode("ascii")


class Spelled(int):
    """An int that remembers how it was written (``007``), so that building what was
    parsed gives back the same bytes: nsqd reads ``RDY 007`` as 7, and so do we."""

    spelling: bytes

    def __new__(cls, spelling: bytes) -> Spelled:
        self = super().__new__(cls, spelling)
        self.spelling = spelling
        return self


class _DecimalAdapter(AdapterBase):
    """An integer parameter written in ASCII decimal, as nsqd's ByteToBase10 reads it."""

    def __init__(self, what: str):
        super().__init__(Token())
        self.what = what

    def _decode(self, obj: bytes, context: Context, path: PathType) -> int:
        if not obj or not obj.isdigit():
            raise BadNumber(f"{self.what} {obj!r} is not a decimal integer", path=path)
        return Spelled(obj) if obj[0] == 0x30 and len(obj) > 1 else int(obj)

    def _encode(self, obj: int, context: Context, path: PathType) -> bytes:
        if not isinstance(obj, int) or obj < 0:
            raise BadNumber(f"{self.what} must be a non-negative int, got {obj!r}", path=path)
        if isinstance(obj, Spelled):
            return obj.spelling
        return str(obj).encode("ascii")


def _Name(kind: str) -> Grammar:
    return _Located(_NameAdapter(kind), kind)


def _Decimal(what: str, field: str) -> Grammar:
    return _Located(_DecimalAdapter(what), field)


MessageIDParam = hex_id(Token())
"""In a FIN/REQ/TOUCH line: a token that must be 16 hex digits."""


class _JSONObject(AdapterBase):
    """A JSON object (IDENTIFY body, IDENTIFY/AUTH responses), compact like Go's encoder."""

    def _decode(self, obj: bytes, context: Context, path: PathType) -> dict[str, Any]:
        try:
            return read_object(obj)
        except BadJSON as exc:
            exc.path = path
            raise

    def _encode(self, obj: dict[str, Any], context: Context, path: PathType) -> bytes:
        return compactjson.encode(obj)


JSONObject = _Located(_JSONObject(GreedyBytes), "body")


def _body(subcon: Grammar, *, what: str, size_field: str = "body size") -> Grammar:
    """``[ 4-byte size ][ N-byte data ]``; nsqd refuses a size below 1, and so does
    building (an empty body is not a body). Inside an array (MPUB's messages) ``what``
    gets the element's index, as nsqd's ``MPUB invalid message(1) body size 0``."""

    class _CheckedSize(AdapterBase):
        def _decode(self, obj: int, context: Context, path: PathType) -> int:
            if obj < 1:
                index = context.get("_index")
                name = what if index is None else numbered(what, index)
                raise BadSize(f"invalid {name} size {obj}", path=path)
            return obj

        def _encode(self, obj: int, context: Context, path: PathType) -> int:
            return self._decode(obj, context, path)

    return Prefixed(_Located(_CheckedSize(Int32sb), size_field), subcon)


class _MessageCountAdapter(AdapterBase):
    """MPUB's ``[ 4-byte num messages ]``: nsqd answers E_BAD_BODY to a count <= 0."""

    def _decode(self, obj: int, context: Context, path: PathType) -> int:
        if obj < 1:
            raise BadSize(f"MPUB invalid message count {obj}", path=path)
        return obj

    def _encode(self, obj: int, context: Context, path: PathType) -> int:
        return self._decode(obj, context, path)


_MessageCount = _Located(_MessageCountAdapter(Int32sb), "num messages")


class _NothingLeft(ConstructBase):
    """The end of a sized body: bytes after its last field are named, never dropped."""

    def __init__(self, what: str):
        super().__init__()
        self.what = what
        self.flagbuildnone = True

    def _parse(self, stream: StreamType, context: Context, path: PathType) -> None:
        start = stream_tell(stream, path)
        rest = stream.read()
        if rest:
            raise BadSize(
                f"{self.what} has {len(rest)} bytes after its last message",
                offset=start, path=path, field="body",
            )
        return None

    def _build(self, obj: None, stream: StreamType, context: Context, path: PathType) -> Any:
        return None

    def _sizeof(self, context: Context, path: PathType) -> int:
        return 0


# ------------------------------------------------------------------------- commands

Magic = MAGIC_NAME / Const(MAGIC_V2)  # named: its hex view's legend and tree row say "magic"

_BODIES: dict[BodyKind, Callable[[], Grammar]] = {
    BodyKind.JSON: lambda: _body(RawCopy(JSONObject), what="IDENTIFY body",
                                 size_field="body size"),
    BodyKind.SECRET: lambda: _body(GreedyBytes, what="AUTH body", size_field="body size"),
    BodyKind.MESSAGE: lambda: _body(GreedyBytes, what="message body",
                                    size_field="message size"),
    BodyKind.MESSAGES: lambda: _body(
        Struct(
            "messages" / PrefixedArray(
                _MessageCount,
                _body(GreedyBytes, what="message body", size_field="message size"),
            ),
            _NothingLeft("MPUB body"),
        ),
        what="MPUB body",
        size_field="body size",
    ),
}


def _param(spec: CommandSpec, p: Param) -> Grammar:
    if p.kind is ParamKind.NAME:
        return _Name(p.words)
    if p.kind is ParamKind.DECIMAL:
        return _Decimal(f"{spec.verb} {p.words}", p.field)
    return MessageIDParam


def _command(spec: CommandSpec) -> Struct:
    """``VERB[ param]...\\n[ body]`` for one entry of the command table."""
    fields: list[Grammar] = ["verb" / Const(spec.wire)]
    for p in spec.params:
        fields += [SP, p.field / _param(spec, p)]
    fields.append(LF)
    if spec.body is not BodyKind.NONE:
        fields.append(spec.grammar_body / _BODIES[spec.body]())
    return Struct(*fields)


COMMANDS: dict[str, Struct] = {verb: _command(spec) for verb, spec in TABLE.items()}
"""Every command of protocol V2, by verb, built from :data:`nsqviz.nsq.commands.COMMANDS`."""

IDENTIFY, AUTH, SUB, PUB, MPUB, DPUB, RDY, FIN, REQ, TOUCH, NOP, CLS = COMMANDS.values()


class _PeekVerb(ConstructBase):
    """Looks at the verb without consuming it, so the command's own struct owns its bytes."""

    def _parse(self, stream: StreamType, context: Context, path: PathType) -> str:
        start = stream_tell(stream, path)
        verb: bytes = Token()._parsereport(stream, context, path)
        stream.seek(start)
        name = verb.decode("ascii", "replace")
        if name not in COMMANDS:
            raise UnknownCommand(f"invalid command {name!r}", offset=start, path=path,
                                 field="verb")
        return name

    def _build(self, obj: str, stream: StreamType, context: Context, path: PathType) -> Any:
        if obj not in COMMANDS:
            raise UnknownCommand(f"invalid command {obj!r}", path=path)
        return obj

    def _sizeof(self, context: Context, path: PathType) -> int:
        return 0


_BY_VERB: dict[str, Grammar] = dict(COMMANDS)

Command = Struct(
    "verb" / _PeekVerb(),
    "command" / Switch(this.verb, _BY_VERB),
)
"""Any command: dispatches on the verb. Build with ``{"verb": ..., "command": {...}}``."""

# -------------------------------------------------------------------------- helpers


def parse_command(data: bytes) -> Any:
    """Parse exactly one command; raises a :class:`GrammarError` naming offset and reason."""
    return parse_exactly(Command, data)


# Building blocks the other line protocol of NSQ (nsqlookupd's "  V1") is made of.
name_field = _Name
body = _body
