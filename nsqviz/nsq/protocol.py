"""NSQ V2 as the protocol-free parts of nsqviz see it (:class:`nsqviz.protocols.Protocol`).

Detection is the magic ``"  V2"`` a client sends first, nsqd's port 4150, or -- for a
capture that starts mid-connection -- bytes that frame as an NSQ command or frame.
Decoding is the codec's :class:`~nsqviz.nsq.observer.Observer`, its events turned into
:class:`~nsqviz.protocols.Item` s here. Record fields keep a message id as the 16 hex
digits it is on the wire (as nsqd, nsqadmin and client logs print it); other bytes are
hex.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable, Mapping
from typing import Any

from nsqviz.nsq import events as ev
from nsqviz.nsq import grammar
from nsqviz.nsq.commands import COMMAND_NAMES, FRAME_NAMES
from nsqviz.nsq.connection import _json_or_none
from nsqviz.nsq.cut import cut_unit
from nsqviz.nsq.framing import SIZE_PREFIX, FrameFraming
from nsqviz.nsq.labels import command_label, event_label
from nsqviz.nsq.observer import Observer
from nsqviz.protocols import Detection, Item, Lost, Protocol
from nsqviz.records import escaped
from nsqviz.stream.direction import Direction
from nsqviz.stream.reassembly import FramingError

__all__ = ["NSQ", "NsqProtocol"]


def _id_text(mid: bytes) -> str:
    """A message id as text: nsqd's ids are 16 ASCII hex digits, but a refused FIN/REQ/
    TOUCH keeps whatever bytes the client sent -- escaped (``\\xcf``), never dropped."""
    return mid.decode("ascii", "backslashreplace")


def _response(e: ev.Response) -> dict[str, Any]:
    """A response's bytes and, when they are a JSON object (IDENTIFY's and AUTH's
    answers), that object decoded under ``json``."""
    out: dict[str, Any] = {"data": e.data.hex()}
    if e.data[:1] == b"{":
        doc = _json_or_none(e.data)
        if doc is not None:
            out["json"] = doc
    return out


def _identify(e: ev.Identify) -> dict[str, Any]:
    """IDENTIFY's JSON decoded under ``data`` and, off the wire, its bytes under ``body``."""
    out: dict[str, Any] = {"data": e.data}
    if e.raw is not None:
        raw = e.raw.data
        out["body"] = raw[raw.index(b"\n") + 1 + SIZE_PREFIX:].hex()
    return out


_FIELD_MAKERS: dict[type, Callable[[Any], dict[str, Any]]] = {
    ev.Identify: _identify,
    ev.Pub: lambda e: {"topic": e.topic, "body": e.body.hex()},
    ev.Message: lambda e: {"timestamp": e.timestamp, "attempts": e.attempts,
                           "id": _id_text(e.id), "body": e.body.hex()},
    ev.Fin: lambda e: {"id": _id_text(e.id)},
    ev.Rdy: lambda e: {"count": e.count},
    ev.Response: _response,
    ev.Error: lambda e: {"data": e.data.hex(), "code": e.code, "text": e.text},
    ev.Mpub: lambda e: {"topic": e.topic, "bodies": [b.hex() for b in e.bodies]},
    ev.Req: lambda e: {"id": _id_text(e.id), "timeout": e.timeout},
    ev.Touch: lambda e: {"id": _id_text(e.id)},
}


def _plain(value: Any) -> Any:
    if isinstance(value, bytes | bytearray):
        return bytes(value).hex()
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    return value


def _fields(event: Any) -> dict[str, Any]:
    maker = _FIELD_MAKERS.get(type(event))
    if maker is not None:
        return maker(event)
    return {
        f.name: _plain(getattr(event, f.name))
        for f in dataclasses.fields(event)
        if f.name != "raw"
    }


class _Observer:
    """The codec's :class:`Observer` behind the :class:`~nsqviz.protocols.
    ConnectionObserver` interface."""

    __slots__ = ("codec",)

    def __init__(self, midstream: bool) -> None:
        self.codec = Observer(provenance=True, midstream=midstream)

    @property
    def encrypted(self) -> bool:
        return self.codec.encrypted

    def feed(self, direction: str, data: bytes, segment: int) -> list[Item]:
        codec = self.codec
        events = (codec.c2s if direction == Direction.C2S else codec.s2c)(data, segment=segment)
        return _items(events) if events else []

    def end(self, direction: str, segment: int) -> list[Item]:
        return self.feed(direction, b"", segment)

    def gap(self, direction: str) -> Lost:
        codec = self.codec
        conn = codec.server if direction == Direction.C2S else codec.client
        if conn.compression:
            return Lost(dead=f"a gap in a {conn.compression}-compressed stream: the rest of"
                             " this direction cannot be decompressed")
        raw, length = codec.gap(Direction(direction))
        cut = cut_unit(direction, raw.data, length) if raw.data else None
        if cut is None:
            codec.lost()
            return Lost(raw.data, length)
        name, fields = cut
        packet = raw.sources[-1].segment if raw.sources else None
        if length is None or packet is None:  # where the next unit starts is a guess
            codec.lost()
        else:
            asked = codec.recovered(Direction(direction), name, fields, packet)
            if asked is not None:
                fields["response_to"] = asked
        kind = "command" if direction == Direction.C2S else "frame"
        return Lost(raw.data, length, unit=Item(kind, name, fields, None, raw.offset, raw))


def _items(events: list[ev.Event]) -> list[Item]:
    out: list[Item] = []
    for e in events:
        if isinstance(e, ev.Command):
            out.append(Item("command", COMMAND_NAMES[type(e)], _fields(e), e, _offset(e.raw),
                            e.raw))
        elif isinstance(e, ev.ServerFrame):
            out.append(Item("frame", FRAME_NAMES[type(e)], _fields(e), e, _offset(e.raw),
                            e.raw))
        elif isinstance(e, ev.Violation):
            out.append(_violation(e))
        elif type(e) is ev.Answered:
            out.append(Item("annotation", "Answered", {"response_to": e.packet}, e))
        elif type(e) is ev.Refused:
            out.append(Item("annotation", "Refused", {"refused": e.answer}, e))
        elif isinstance(e, ev.CompressionStarted):
            out.append(Item("annotation", "CompressionStarted",
                            {"compression_starts": {"kind": e.kind, "level": e.level}}, e))
        elif isinstance(e, ev.TLSUpgrade):
            out.append(Item("tls", "TLSUpgrade", {
                "pending": e.pending.hex(),
                "note": "the connection switches to TLS here; what follows is encrypted"}, e))
        elif isinstance(e, ev.Truncated):
            out.append(Item("truncated", "Truncated", {
                "offset": e.offset, "expected": e.expected, "data": e.data.hex(),
                "reason": "the stream ended inside this frame"}, e, e.offset))
        # ConnectionClosed is a TCP matter: the capture layer reports the flow's end.
    return out


def _violation(e: ev.Violation) -> Item:
    """A command nsqd refuses is that command with its violation attached; bytes that
    do not decode as a command are an error of their own."""
    if e.continued:
        return Item("skipped", "Skipped", {"offset": e.offset, "reason": e.text}, e, e.offset,
                    e.raw)
    problem = {"code": e.code, "text": e.text, "fatal": e.fatal}
    cmd = e.command
    if cmd is not None:
        fields = _fields(cmd)
        fields["violation"] = problem
        raw = cmd.raw if cmd.raw is not None else e.raw
        return Item("command", COMMAND_NAMES[type(cmd)], fields, e, _offset(raw), raw)
    fields = {**problem, "offset": e.offset}
    if e.raw is not None:
        fields["data"] = e.raw.data.hex()
    return Item("error", e.code or "Undecodable", fields, e, e.offset, e.raw)


def _offset(raw: Any) -> int | None:
    return None if raw is None else raw.offset


def _short(data_hex: str, limit: int = 24) -> str:
    """The first ``limit`` bytes as quoted text, escaped where not printable."""
    raw = bytes.fromhex(data_hex)
    return f"'{escaped(raw[:limit])}{'...' if len(raw) > limit else ''}'"


def _body(f: Mapping[str, Any]) -> str:
    """``body=<size>B 'start...'``: the whole size, also of a body the capture cut short."""
    if "body" not in f:
        return "body=?"
    return f"body={f.get('body_size', len(f['body']) // 2)}B {_short(f['body'])}"


def _sha1(body: bytes) -> str:
    return hashlib.sha1(body).hexdigest()


class NsqProtocol(Protocol):
    """NSQ V2: nsqd's TCP protocol."""

    name = "nsq"
    title = "NSQ"
    package = "nsqviz.nsq"
    server_ports = frozenset({4150})
    bytes_fields = frozenset({"body", "bodies", "data", "secret", "pending"})

    def client_hello(self, data: bytes) -> bool:
        return data.startswith(grammar.MAGIC_V2)

    def detect(self, direction: str, data: bytes, *, from_start: bool,
               server_port: bool) -> Detection:
        if from_start:
            if grammar.MAGIC_V2.startswith(data[:4]):  # also when the magic came split
                return Detection(3, "magic")
            if server_port:
                return Detection(2, "server port (no magic: nsqd will refuse it)")
            return Detection(0, "client did not send the NSQ magic")
        if server_port:
            return Detection(2, "server port")
        if _looks_like_nsq(direction, data):
            return Detection(1, "looks like NSQ")
        return Detection(0, "no magic, port not an NSQ port, not NSQ-like")

    def observer(self, *, midstream: bool) -> _Observer:
        return _Observer(midstream)

    def fields(self, event: Any) -> dict[str, Any]:
        return _fields(event)

    def summary(self, kind: str, name: str, fields: Mapping[str, Any]) -> str:
        f = fields  # a unit cut short by the capture has only the fields it captured
        if name in ("PUB", "DPUB"):
            extra = f" defer={f['defer_time']}ms" if "defer_time" in f else ""
            return f"topic={f.get('topic', '?')}{extra} {_body(f)}"
        if name == "MPUB":
            count = len(f["bodies"]) if "bodies" in f else f.get("messages", "?")
            return f"topic={f.get('topic', '?')} messages={count}"
        if name == "SUB":
            return f"topic={f['topic']} channel={f['channel']}"
        if name == "RDY":
            return f"count={f['count']}"
        if name in ("FIN", "TOUCH", "REQ"):
            return f"id={f['id']}" + (f" timeout={f['timeout']}ms" if name == "REQ" else "")
        if name == "IDENTIFY":
            if "data" in f:
                return json.dumps(f["data"], separators=(",", ":"))
            return _body(f)
        if name == "FrameTypeMessage":
            return f"id={f.get('id', '?')} attempts={f.get('attempts', '?')} {_body(f)}"
        if name in ("FrameTypeResponse", "FrameTypeError"):
            text = _short(f["data"], 60)
            if "compression_starts" in f:
                text += f"  [stream switches to {f['compression_starts']['kind']}]"
            return text
        return ""

    def label(self, event: Any) -> tuple[str, str]:
        if type(event) in COMMAND_NAMES:
            return command_label(event), "command"
        return event_label(event)

    def layout(self, kind: str, name: str) -> Any:
        if name == "MAGIC":
            return grammar.Magic
        if kind == "command":
            return grammar.Command
        if kind == "frame":
            return grammar.Frame
        return None

    typed_schema = (
        ("msg_id", "string"),
        ("topic", "string"),
        ("channel", "string"),
        ("count", "int64"),  # RDY count
        ("delay_ms", "int64"),  # REQ timeout, DPUB defer time
        ("attempts", "int32"),
        ("msg_ts", "float64"),  # nsqd's message timestamp, seconds
        ("bodies", "list<string>"),  # sha1 of each published/delivered body
        ("data", "string"),  # response/error text; IDENTIFY's JSON
    )

    def typed(self, event: Any) -> dict[str, Any]:
        if type(event) is ev.Violation and event.command is not None:
            event = event.command
        kind = type(event)
        if kind is ev.Message:
            return {"msg_id": _id_text(event.id), "attempts": event.attempts,
                    "msg_ts": event.timestamp / 1e9, "bodies": [_sha1(event.body)]}
        if kind is ev.Response or kind is ev.Error:
            return {"data": event.data.decode("utf-8", "replace")}
        if kind is ev.Identify:
            return {"data": json.dumps(event.data, separators=(",", ":"))}
        out: dict[str, Any] = {}
        mid = getattr(event, "id", None)
        if isinstance(mid, bytes):
            out["msg_id"] = _id_text(mid)
        topic = getattr(event, "topic", None)
        if topic is not None:
            out["topic"] = topic
            channel = getattr(event, "channel", None)
            if channel is not None:
                out["channel"] = channel
        if kind is ev.Rdy:
            out["count"] = event.count
        elif kind is ev.Req:
            out["delay_ms"] = event.timeout
        elif kind is ev.Pub:
            out["bodies"] = [_sha1(event.body)]
        elif kind is ev.Dpub:
            out["delay_ms"] = event.defer_time
            out["bodies"] = [_sha1(event.body)]
        elif kind is ev.Mpub:
            out["bodies"] = [_sha1(b) for b in event.bodies]
        return out


def _looks_like_nsq(direction: str, data: bytes) -> bool:
    """Mid-stream detection: does this chunk start like an NSQ command or frame?"""
    if direction == Direction.C2S:
        head = data[:16].split(b"\n", 1)[0].split(b" ", 1)[0]
        verb = head.decode("ascii", "replace")
        return data.startswith(grammar.MAGIC_V2) or verb in grammar.COMMANDS
    try:
        return len(data) >= 8 and FrameFraming().measure(data, 0) is not None
    except FramingError:
        return False


NSQ = NsqProtocol()
"""The NSQ protocol, as registered in :data:`nsqviz.protocols.BUILTIN`."""
