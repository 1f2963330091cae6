"""What nsqd sends, as ``construct`` grammars: the frame and the message it carries
(re-exported by :mod:`nsqviz.nsq.grammar`).

* a frame: ``[size:int32][frame type:int32][data]``, where size counts the frame type
  and the data;
* a message (the data of a ``FrameTypeMessage``): ``[timestamp:int64 ns][attempts:uint16]
  [id:16 ASCII hex][body]``.

The message id's definition is here too: FIN, REQ and TOUCH carry it as a parameter.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from construct import (
    Bytes,
    FixedSized,
    GreedyBytes,
    Int16ub,
    Int32sb,
    Int64sb,
    Rebuild,
    Struct,
    Switch,
    this,
)

from nsqviz.nsq.commands import FRAMES
from nsqviz.nsq.grammar_base import AdapterBase, Grammar, _Located, parse_exactly
from nsqviz.nsq.grammar_errors import BadMessageID, BadSize, UnknownFrameType
from nsqviz.nsq.wire import MESSAGE_ID_SIZE

if TYPE_CHECKING:
    from construct.core import Context, PathType

__all__ = ["FRAME_TYPES", "Frame", "Message", "MessageID", "hex_id", "parse_frame"]

_HEX = frozenset(b"0123456789abcdefABCDEF")


class _HexIDAdapter(AdapterBase):
    """A 16-byte message id, hex encoded in ASCII (nsqd's ``MessageID``)."""

    def _decode(self, obj: bytes, context: Context, path: PathType) -> bytes:
        if len(obj) != 16 or not _HEX.issuperset(obj):
            raise BadMessageID(f"message id {bytes(obj)!r} is not 16 hex digits", path=path)
        return bytes(obj)

    def _encode(self, obj: bytes, context: Context, path: PathType) -> bytes:
        return self._decode(obj, context, path)


def hex_id(subcon: Grammar) -> Grammar:
    """A message id read by ``subcon`` (16 bytes in a frame, a token in a command)."""
    return _Located(_HexIDAdapter(subcon), "id")


MessageID = hex_id(Bytes(MESSAGE_ID_SIZE))
"""In a message frame: exactly 16 bytes."""

FRAME_TYPES = dict(FRAMES.values())
"""The spec's frame type names and their numbers on the wire."""

Message = Struct(
    "timestamp" / Int64sb,  # nanoseconds since the epoch, when nsqd created the message
    "attempts" / Int16ub,
    "id" / MessageID,
    "body" / GreedyBytes,
)


class _FrameType(AdapterBase):
    def _decode(self, obj: int, context: Context, path: PathType) -> str:
        for name, value in FRAME_TYPES.items():
            if obj == value:
                return name
        raise UnknownFrameType(f"unknown frame type {obj}", path=path)

    def _encode(self, obj: str, context: Context, path: PathType) -> int:
        try:
            return FRAME_TYPES[obj]
        except KeyError:
            raise UnknownFrameType(f"unknown frame type {obj!r}", path=path) from None


class _FrameSize(AdapterBase):
    def _decode(self, obj: int, context: Context, path: PathType) -> int:
        if obj < 4:
            raise BadSize(f"frame size {obj} is smaller than the 4-byte frame type", path=path)
        return obj

    def _encode(self, obj: int, context: Context, path: PathType) -> int:
        return obj


class _FrameSizeOf:
    """The value of ``size`` when building: 4 (the frame type) + the data's length.

    A callable for construct's interpreter; its ``repr`` is the same computation as an
    expression over ``this``, which is what construct's compiler pastes into the code
    it generates -- so ``Frame.compile()`` works too."""

    def __call__(self, ctx: Context) -> int:
        data = ctx["data"]
        if ctx["frame_type"] == "FrameTypeMessage":
            return 4 + 8 + 2 + 16 + len(data["body"])
        return 4 + len(data)

    def __repr__(self) -> str:
        return (
            "(4 + 26 + len(this['data']['body']) if this['frame_type'] == 'FrameTypeMessage'"
            " else 4 + len(this['data']))"
        )


Frame = Struct(
    "size" / Rebuild(_Located(_FrameSize(Int32sb), "size"), _FrameSizeOf()),
    "frame_type" / _Located(_FrameType(Int32sb), "frame_type"),
    "data"
    / FixedSized(
        this.size - 4,
        Switch(
            this.frame_type,
            {
                "FrameTypeResponse": GreedyBytes,
                "FrameTypeError": GreedyBytes,
                "FrameTypeMessage": Message,
            },
        ),
    ),
)
"""A frame from nsqd: ``[size][frame type][data]``; size counts frame type + data."""


def parse_frame(data: bytes) -> Any:
    """Parse exactly one frame; raises a :class:`GrammarError` naming offset and reason."""
    return parse_exactly(Frame, data)
