"""Which field owns which byte of a TubeMQ frame, down to each protobuf field.

The frame-level fields (MsgToken, serialNo, listSize, each block's length and data)
come from :func:`nsqviz.layout.annotate` over the grammar's
:data:`~nsqviz.tubemq.grammar.FrameStruct`. Inside the blocks, the content is walked in
protobuf's wire format with the compiled descriptors: each varint length prefix, each
field (tag and value), nested messages, and the inner request or response that
``RequestBody.request`` / ``RspResponseBody.data`` carry for the method. A field that a
block boundary cuts becomes two leaves, the second named ``... (cont.)``, so that every
byte of the frame still belongs to exactly one leaf.

The result is a :class:`nsqviz.layout.Layout`, what :class:`~nsqviz.widgets.hexview.
HexView` draws.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from google.protobuf.descriptor import Descriptor, FieldDescriptor

from nsqviz.layout import Field, Layout, annotate
from nsqviz.tubemq.grammar import DEFAULT_LIMITS, FrameStruct, Limits, parse_context
from nsqviz.tubemq.protos import MESSAGES, RpcStatus
from nsqviz.tubemq.tables import METHODS, RPC_FLAG_MSG_TYPE_RESPONSE

__all__ = ["ContentField", "content_fields", "frame_layout"]


@dataclass(frozen=True, slots=True)
class ContentField:
    """A leaf of the content: ``path`` (``body.request.clientId``), content offsets
    ``[start, end)``, decoded ``value`` and ``kind`` (``varint``, ``string`` ...)."""

    path: str
    start: int
    end: int
    value: Any
    kind: str


class _WireError(ValueError):
    def __init__(self, reason: str, offset: int):
        super().__init__(reason)
        self.offset = offset


def _varint(data: bytes, pos: int, end: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= end or shift > 63:
            raise _WireError("varint runs past its message", pos)
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            return value, pos


_SIGNED = {FieldDescriptor.TYPE_INT32, FieldDescriptor.TYPE_INT64}


def _scalar(field: FieldDescriptor | None, raw: int | bytes) -> tuple[Any, str]:
    if field is None:
        return (raw.hex() if isinstance(raw, bytes) else raw), "unknown"
    t = field.type
    if isinstance(raw, bytes):
        if t == FieldDescriptor.TYPE_STRING:
            return raw.decode("utf-8", "replace"), "string"
        return raw.hex(), "bytes"
    if t == FieldDescriptor.TYPE_BOOL:
        return bool(raw), "bool"
    if t == FieldDescriptor.TYPE_ENUM:
        value = field.enum_type.values_by_number.get(raw)
        return (value.name if value is not None else raw), "enum"
    if t in _SIGNED and raw >= 1 << 63:
        raw -= 1 << 64
    return raw, "varint"


def _walk(data: bytes, start: int, end: int, desc: Descriptor, path: str,
          inner: Descriptor | None, out: list[ContentField]) -> None:
    """Append the leaves of the message ``desc`` serialized in ``data[start:end]``.
    ``inner`` is the message a bytes field named request/data carries."""
    pos = start
    counts: dict[int, int] = {}
    while pos < end:
        key_at = pos
        key, pos = _varint(data, pos, end)
        number, wire = key >> 3, key & 7
        field = desc.fields_by_number.get(number)
        name = field.name if field is not None else f"#{number}"
        if field is not None and field.is_repeated:
            index = counts.get(number, 0)
            counts[number] = index + 1
            name = f"{name}[{index}]"
        fpath = f"{path}.{name}" if path else name
        if wire == 0:
            raw, pos = _varint(data, pos, end)
            value, kind = _scalar(field, raw)
            out.append(ContentField(fpath, key_at, pos, value, kind))
        elif wire in (1, 5):
            width = 8 if wire == 1 else 4
            if pos + width > end:
                raise _WireError(f"{fpath}: fixed value runs past its message", pos)
            pos += width
            out.append(ContentField(fpath, key_at, pos, data[pos - width : pos].hex(), "fixed"))
        elif wire == 2:
            length, body = _varint(data, pos, end)
            pos = body + length
            if pos > end:
                raise _WireError(f"{fpath}: length {length} runs past its message", body)
            sub = None
            if field is not None and field.message_type is not None:
                sub = field.message_type
            elif field is not None and field.name in ("request", "data") and inner is not None:
                sub = inner
            if sub is None:
                value, kind = _scalar(field, data[body:pos])
                out.append(ContentField(fpath, key_at, pos, value, kind))
            else:
                out.append(ContentField(f"{fpath}.(key, length)", key_at, body, length, "key"))
                _walk(data, body, pos, sub, fpath, None, out)
        else:
            raise _WireError(f"{fpath}: wire type {wire} is not used by TubeMQ", key_at)


def content_fields(content: bytes, *, response: bool | None = None) -> list[ContentField]:
    """Every leaf of a frame's content, in byte order. ``response`` says which direction
    the content is (``None``: from ``RpcConnHeader.flag``, 1 = response). Raises
    ``ValueError`` with the offset in the message when the bytes do not walk."""
    out: list[ContentField] = []
    pos = 0
    names: list[str] = ["RpcConnHeader"]
    method = None
    for slot in ("connHeader", "header", "body"):
        length_at = pos
        length, pos = _varint(content, pos, len(content))
        end = pos + length
        if end > len(content):
            raise _WireError(f"{slot}: length {length} runs past the content", length_at)
        out.append(ContentField(f"{slot}.length", length_at, pos, length, "varint"))
        name = names[-1]
        inner = None
        if slot == "body" and method is not None:
            info = METHODS.get(method)
            inner_name = None if info is None else (info.response if response else info.request)
            inner = MESSAGES[inner_name].DESCRIPTOR if inner_name else None
        first = len(out)
        _walk(content, pos, end, MESSAGES[name].DESCRIPTOR, slot, inner, out)
        if slot == "connHeader":
            flag = next((f.value for f in out[first:] if f.path == "connHeader.flag"), 0)
            if response is None:
                response = flag == RPC_FLAG_MSG_TYPE_RESPONSE
            names.append("ResponseHeader" if response else "RequestHeader")
        elif slot == "header":
            status = next((f.value for f in out[first:] if f.path == "header.status"),
                          RpcStatus.SUCCESS.name)
            if not response:
                names.append("RequestBody")
            else:
                names.append("RspResponseBody" if status == RpcStatus.SUCCESS.name
                             else "RspExceptionBody")
            method = _peek_method(content, end)
        pos = end
    if pos != len(content):
        raise _WireError(f"{len(content) - pos} bytes after the body", pos)
    return out


def _peek_method(content: bytes, pos: int) -> int | None:
    """``method`` (field 1) of the body that starts with its length at ``pos``."""
    try:
        length, body = _varint(content, pos, len(content))
        key, value_at = _varint(content, body, body + length)
        if key != 0x08:
            return None
        return _varint(content, value_at, body + length)[0]
    except _WireError:
        return None


def frame_layout(data: bytes, *, response: bool | None = None,
                 limits: Limits = DEFAULT_LIMITS) -> Layout:
    """The field tree of one frame: frame fields from the grammar, content fields from
    the protobuf walk, each block's data split into the content leaves it holds."""
    lay = annotate(FrameStruct, data, **parse_context(limits))
    if lay.error is not None:
        return lay
    blocks = next((f for f in lay.root.children if f.name == "blocks"), None)
    datas = [] if blocks is None else [next(c for c in b.children if c.name == "data")
                                       for b in blocks.children]
    content = b"".join(d.raw for d in datas)
    try:
        leaves = content_fields(content, response=response)
    except _WireError as exc:
        error_at = _frame_offset(datas, exc.offset)
        return Layout(lay.data, lay.root, exc, error_at)
    at = 0
    for d in datas:
        lo, hi = at, at + d.width
        for leaf in leaves:
            if leaf.end <= lo or leaf.start >= hi or leaf.end == leaf.start:
                continue
            s, e = max(leaf.start, lo), min(leaf.end, hi)
            name = leaf.path if s == leaf.start else f"{leaf.path} (cont.)"
            start = d.start + s - lo
            d.children.append(Field(name, (*d.path, name), start, start + e - s, leaf.value,
                                    data[start : start + e - s], leaf.kind))
        at = hi
    return lay


def _frame_offset(datas: list[Field], content_offset: int) -> int | None:
    at = 0
    for d in datas:
        if content_offset < at + d.width:
            return d.start + content_offset - at
        at += d.width
    return datas[-1].end if datas else None
