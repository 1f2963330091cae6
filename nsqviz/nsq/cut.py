"""What a unit cut short by the capture still shows, decoded as far as it was captured.

A capture taken with a snaplen (``tcpdump -s 96``, common where only headers may be
kept) stores each packet's first bytes only: a PUB's command line, body size and the
start of its body; a message frame's size, type and the start of its header. Wireshark
shows such a PDU with what it has and marks the rest as cut short; so does nsqviz:
:func:`cut_unit` reads the captured part with the same tables (the verb's parameters
and body kind, :mod:`nsqviz.nsq.commands`) and grammar (the frame header and message
header fields, :mod:`nsqviz.nsq.grammar`) as a whole unit, field by field, stopping at
the first field not wholly captured. Only the bytes that were never captured are a gap.

The fields are the whole unit's, plus ``body_size`` where the body was not wholly
captured (its size prefix was) and ``cut``: ``{"captured": N, "length": M}`` (``M``
``None`` when the unit's size prefix is itself cut off).
"""

from __future__ import annotations

from typing import Any

from construct import ConstructError

from nsqviz.nsq import grammar
from nsqviz.nsq.commands import BY_VERB, BodyKind, ParamKind
from nsqviz.nsq.framing import SIZE_PREFIX
from nsqviz.nsq.grammar import GrammarError
from nsqviz.nsq.lexer import split_line
from nsqviz.stream.direction import Direction

__all__ = ["cut_unit"]

_HEADER = grammar.Frame.subcons[:2]  # size, frame type
_MESSAGE = grammar.Message.subcons[:-1]  # timestamp, attempts, id: before the body


def cut_unit(direction: str, data: bytes, length: int | None
             ) -> tuple[str, dict[str, Any]] | None:
    """``(name, fields)`` of the unit whose first bytes ``data`` are (``length``: its
    whole size, when known), or ``None`` when too little of it was captured to name it
    (a command line without its end, a frame without its type)."""
    unit = (_command if direction == Direction.C2S else _frame)(data)
    if unit is None:
        return None
    name, fields = unit
    fields["cut"] = {"captured": len(data), "length": length}
    return name, fields


def _text(raw: bytes) -> str:
    return raw.decode("ascii", "backslashreplace")


def _int(raw: bytes) -> int:
    return int.from_bytes(raw, "big", signed=True)


def _command(data: bytes) -> tuple[str, dict[str, Any]] | None:
    nl = data.find(b"\n")
    if nl < 0:
        return None
    tokens = [t for t, _ in split_line(data, 0, nl)]
    spec = BY_VERB.get(tokens[0])
    if spec is None or spec.body is BodyKind.NONE:
        return None  # a line-only command is whole once its line is
    fields: dict[str, Any] = {}
    for param, token in zip(spec.params, tokens[1:], strict=False):
        fields[param.field] = (int(token) if param.kind is ParamKind.DECIMAL and token.isdigit()
                               else _text(token))
    start = nl + 1 + SIZE_PREFIX
    if len(data) < start:
        return spec.verb, fields
    size = _int(data[nl + 1:start])
    body = data[start:start + size]
    fields["body_size"] = size
    if spec.body is BodyKind.MESSAGES and len(body) >= SIZE_PREFIX:
        fields["messages"] = _int(body[:SIZE_PREFIX])
    fields["body"] = body.hex()
    return spec.verb, fields


def _frame(data: bytes) -> tuple[str, dict[str, Any]] | None:
    header = _fixed(_HEADER, data, 0)
    if "frame_type" not in header:
        return None
    name = header["frame_type"]
    pos = sum(s.sizeof() for s in _HEADER)
    fields: dict[str, Any] = {}
    if name == "FrameTypeMessage":
        fields = _fixed(_MESSAGE, data, pos)
        if isinstance(fields.get("id"), bytes):
            fields["id"] = _text(fields["id"])
        pos += sum(s.sizeof() for s in _MESSAGE)
        fields["body_size"] = header["size"] - (pos - SIZE_PREFIX)
        fields["body"] = data[pos:].hex()
    else:
        fields["data"] = data[pos:].hex()
    return name, fields


def _fixed(subcons: Any, data: bytes, pos: int) -> dict[str, Any]:
    """The fixed-size fields ``subcons`` read from ``data[pos:]``, in order, up to the
    first one not wholly captured (of which the captured bytes are kept, as text, when
    it is the message id) or not valid."""
    out: dict[str, Any] = {}
    for sub in subcons:
        size = sub.sizeof()
        raw = data[pos:pos + size]
        if len(raw) < size:
            if raw and sub.name == "id":
                out["id"] = _text(raw)
            break
        try:
            out[sub.name] = sub.parse(raw)
        except (GrammarError, ConstructError):
            break
        pos += size
    return out
