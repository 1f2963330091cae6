"""nsqlookupd's ``"  V1"`` protocol as the protocol-free parts of nsqviz see it
(:class:`nsqviz.protocols.Protocol`).

Detection is nsqlookupd's first answer (a size, then ``OK``, JSON or ``E_...``: also how
it refuses another protocol's magic, so an NSQ client's ``"  V2"`` sent to it stays
lookupd's), the magic ``"  V1"`` nsqd sends first, or nsqlookupd's port 4160 (for a
capture that starts mid-connection). Decoding is
:class:`~nsqviz.lookupd.observer.Observer`: nsqd's commands are ``command`` records
named by their verb (the magic ``MAGIC``), nsqlookupd's answers ``frame`` records --
:data:`RESPONSE` (``OK`` or the IDENTIFY JSON) or :data:`ERROR` (``E_*``). A command
nsqlookupd refuses carries the refusal as its ``violation``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from nsqviz.lookupd import grammar
from nsqviz.lookupd.codec import (
    COMMAND_EVENTS,
    DEFAULT_MAX_BODY_SIZE,
    Answer,
    Identify,
    LookupEvent,
    Magic,
    Refused,
    Register,
    Unregister,
)
from nsqviz.lookupd.fields import FIELDS, PARAMS, PREFIX
from nsqviz.lookupd.observer import ANSWER_STARTS, Observer, Seen
from nsqviz.protocols import DetectionWords, Item, Lost, Protocol, RecordView, no_fields
from nsqviz.records import escaped
from nsqviz.stream.direction import Direction
from nsqviz.stream.reassembly import Garbage, RawFrame, Truncated

__all__ = ["ERROR", "LOOKUPD", "LookupdProtocol", "MAGIC", "NAMES", "RESPONSE"]

MAGIC = "MAGIC"
"""How records name the magic (it has no verb)."""
RESPONSE = "Response"
"""How records name nsqlookupd's answer ``OK`` or its IDENTIFY JSON."""
ERROR = "Error"
"""How records name nsqlookupd's error answer ``E_CODE text``."""

NAMES: dict[type[LookupEvent], str] = {
    Magic: MAGIC,
    **{kind: verb for verb, kind in COMMAND_EVENTS.items()},
    Answer: RESPONSE,
    Refused: ERROR,
}
"""The record name of every command and answer event."""

PORT = 4160
"""nsqlookupd's TCP port (``--tcp-address`` default)."""

_MAGIC_SUMMARY = f'"{escaped(grammar.Magic.build(None))}"'
"""The magic record's one line: the bytes nsqd sent, as the grammar's magic field holds
them (``"  V1"``)."""


def _text(data: bytes) -> str:
    return data.decode("utf-8", "backslashreplace")


def _fields(event: Any) -> dict[str, Any]:
    kind = type(event)
    if kind is Identify:
        return {"data": event.info}
    if kind is Register or kind is Unregister:
        return {"topic": event.topic, "channel": event.channel}
    if kind is Answer:
        out: dict[str, Any] = {"data": _text(event.data)}
        if event.command is not None:
            out["answers"] = NAMES[type(event.command)]
        return out
    if kind is Refused:
        return {"code": event.code, "text": event.text}
    return {}


def _refusal(refused: Refused) -> dict[str, Any]:
    return {"code": refused.code, "text": refused.text, "fatal": True}


class _Adapter:
    """The :class:`Observer` behind the :class:`~nsqviz.protocols.ConnectionObserver`
    interface. The lookup protocol has no TLS switch."""

    __slots__ = ("codec", "fields_of")

    encrypted = False

    def __init__(self, midstream: bool, fields: bool = True) -> None:
        self.codec = Observer(midstream=midstream)
        self.fields_of = _fields if fields else no_fields

    def feed(self, direction: str, data: bytes, segment: int) -> list[Item]:
        c2s = direction == Direction.C2S
        seen = (self.codec.c2s if c2s else self.codec.s2c)(data, segment=segment)
        return [_item(s, c2s, self.fields_of) for s in seen]

    def end(self, direction: str, segment: int) -> list[Item]:
        return self.feed(direction, b"", segment)

    def gap(self, direction: str) -> Lost:
        partial, length = self.codec.gap(direction == Direction.C2S)
        return Lost(partial, length)


def _item(seen: Seen, c2s: bool, fields_of: Callable[[Any], dict[str, Any]]) -> Item:
    event, raw = seen.event, seen.raw
    offset = None if raw is None else raw.offset
    if type(event) is Refused and (c2s or not isinstance(raw, RawFrame)):
        # no command or answer: bytes that do not frame or parse as one, or a unit the
        # stream ended inside
        if isinstance(raw, Garbage) and raw.continued:  # the rest of bytes already refused
            return Item("skipped", "Skipped", {"offset": event.offset, "reason": event.text},
                        event, offset, raw)
        fields: dict[str, Any] = {**_refusal(event), "offset": event.offset}
        if raw is not None:
            fields["data"] = raw.data.hex()
        if isinstance(raw, Truncated):
            return Item("truncated", "Truncated", fields, event, offset, raw)
        return Item("error", event.code or "Undecodable", fields, event, offset, raw)
    fields = fields_of(event)
    if seen.refused is not None:
        fields["violation"] = _refusal(seen.refused)
    if seen.asked is not None:
        fields["answers"] = NAMES[type(seen.asked)]
    if isinstance(raw, RawFrame):
        event = replace(event, raw=raw)
    return Item("command" if c2s else "frame", NAMES[type(event)], fields, event, offset, raw)


class LookupdProtocol(Protocol):
    """The ``"  V1"`` protocol nsqd speaks to nsqlookupd."""

    name = "lookupd"
    title = "nsqlookupd V1"
    package = "nsqviz.lookupd"
    server_ports = frozenset({PORT})

    def client_hello(self, data: bytes) -> bool:
        return data.startswith(grammar.MAGIC_V1)

    detection_words = DetectionWords(
        "magic", "no magic: nsqlookupd will refuse it", "client did not send the lookup magic",
        "looks like nsqd talking to nsqlookupd",
        "no magic, port not a lookup port, not lookup-like")

    def server_hello(self, data: bytes) -> bool | None:
        """nsqlookupd's first answer: a size, then ``OK``, IDENTIFY's JSON or ``E_...``
        (its refusal of another protocol's magic too)."""
        if len(data) < 4:
            return None
        if not 2 <= int.from_bytes(data[:4], "big", signed=True) <= DEFAULT_MAX_BODY_SIZE:
            return False
        head = data[4:6]
        if any(head.startswith(start) for start in ANSWER_STARTS):
            return True
        return None if any(start.startswith(head) for start in ANSWER_STARTS) else False

    def looks_like(self, direction: str, data: bytes) -> bool:
        return _looks_like_lookup(direction, data)

    def observer(self, *, midstream: bool, fields: bool = True) -> _Adapter:
        return _Adapter(midstream, fields)

    def fields(self, event: Any) -> dict[str, Any]:
        return _fields(event)

    def summary(self, kind: str, name: str, fields: Mapping[str, Any]) -> str:
        if name == MAGIC:
            return _MAGIC_SUMMARY
        if "topic" in fields:
            channel = fields.get("channel")
            text = f"topic={fields['topic']}" + (f" channel={channel}" if channel else "")
        elif name == ERROR:
            text = f"{fields['code']} {fields['text']}".rstrip()
        elif isinstance(fields.get("data"), dict):
            text = json.dumps(fields["data"], separators=(",", ":"))[:120]
        else:
            text = str(fields.get("data", ""))[:120]
            if "answers" in fields:
                text = f"{text} (to {fields['answers']})"
        return text

    def label(self, event: Any) -> tuple[str, str]:
        kind = type(event)
        name = NAMES.get(kind, kind.__name__)
        if kind is Register or kind is Unregister:
            return " ".join(filter(None, (name, event.topic, event.channel))), "command"
        if kind is Answer:
            return _text(event.data)[:40], "response"
        if kind is Refused:
            return f"{event.code} {event.text}".rstrip(), "error"
        return name, "command"

    def names(self) -> tuple[str, ...]:
        return tuple(NAMES.values())

    def record_names(self) -> frozenset[str]:
        return frozenset([*NAMES.values(), *grammar.ERRORS])

    def layout(self, kind: str, name: str) -> Any:
        if name == MAGIC:
            return grammar.Magic
        if kind == "command":
            return grammar.COMMANDS.get(name)
        if kind == "frame":
            return grammar.Response
        return None

    filter_fields = FIELDS

    def filter_values(self, record: RecordView) -> Mapping[str, list[Any]]:
        """As ``lookupd.lua`` shows the unit: the IDENTIFY body and the answer as the bytes
        on the wire say them; ``lookupd.response_to`` is not known from a record alone."""
        out: dict[str, list[Any]] = {}
        if record.dir is not None:
            out[f"{PREFIX}.dir"] = [str(record.dir)]
        fields, name, kind = record.fields, record.name, record.kind
        raw = getattr(record.event, "raw", None)
        data = raw.data if isinstance(raw, RawFrame) else b""
        problem = fields.get("violation") or (fields if kind == "error" else None)
        if problem:
            out[f"{PREFIX}.violation"] = [problem["code"]]
            out[f"{PREFIX}.violation.text"] = [problem["text"]]
        if kind == "command" and name == MAGIC:
            out[f"{PREFIX}.magic"] = [_text(data)]
        elif kind == "command":
            out[f"{PREFIX}.command"] = [name]
            for param in PARAMS:
                if fields.get(param) is not None:
                    out[f"{PREFIX}.{param}"] = [fields[param]]
            nl = data.find(b"\n")
            if nl >= 0 and data[nl + 1:]:  # IDENTIFY's body
                out[f"{PREFIX}.body_size"] = [int.from_bytes(data[nl + 1:nl + 5], "big",
                                                             signed=True)]
                out[f"{PREFIX}.body"] = [_text(data[nl + 5:])]
        elif kind == "frame":
            out[f"{PREFIX}.size"] = [len(data) - 4] if data else []
            if name == ERROR:
                out[f"{PREFIX}.error.code"] = [fields["code"]]
                if fields["text"]:
                    out[f"{PREFIX}.error.text"] = [fields["text"]]
            else:
                out[f"{PREFIX}.response"] = [fields["data"]]
            if "answers" in fields:
                out[f"{PREFIX}.answers"] = [fields["answers"]]
        return {k: v for k, v in out.items() if v}

    typed_schema = (
        ("topic", "string"),
        ("channel", "string"),
        ("data", "string"),  # an answer's text; IDENTIFY's JSON
    )

    def typed(self, event: Any) -> dict[str, Any]:
        kind = type(event)
        if kind is Register or kind is Unregister:
            out = {"topic": event.topic}
            if event.channel is not None:
                out["channel"] = event.channel
            return out
        if kind is Identify:
            return {"data": json.dumps(event.info, separators=(",", ":"))}
        if kind is Answer:
            return {"data": _text(event.data)}
        if kind is Refused:
            return {"data": f"{event.code} {event.text}".rstrip()}
        return {}


def _looks_like_lookup(direction: str, data: bytes) -> bool:
    """Mid-stream detection: does this chunk start like a lookup command (nsqd's side)?
    Its answers (a size and ``OK``) look like too many things to claim a flow by; a verb
    another protocol shares (IDENTIFY) ties, and the first registered protocol wins."""
    if direction != Direction.C2S:
        return False
    verb = data[:16].split(b"\n", 1)[0].split(b" ", 1)[0].decode("ascii", "replace")
    return data.startswith(grammar.MAGIC_V1) or verb in grammar.COMMANDS


LOOKUPD = LookupdProtocol()
"""The lookup protocol, as registered in :data:`nsqviz.protocols.BUILTIN`."""
