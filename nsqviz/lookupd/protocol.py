"""nsqlookupd's ``"  V1"`` protocol as the protocol-free parts of nsqviz see it
(:class:`nsqviz.protocols.Protocol`).

Detection is the magic ``"  V1"`` nsqd sends first, or nsqlookupd's port 4160 (for a
capture that starts mid-connection, or a connection whose client sent something else:
nsqlookupd answers that with ``E_BAD_PROTOCOL``). Decoding is
:class:`~nsqviz.lookupd.observer.Observer`: nsqd's commands are ``command`` records
named by their verb (the magic ``MAGIC``), nsqlookupd's answers ``frame`` records --
:data:`RESPONSE` (``OK`` or the IDENTIFY JSON) or :data:`ERROR` (``E_*``). A command
nsqlookupd refuses carries the refusal as its ``violation``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

from nsqviz import compactjson
from nsqviz.lookupd import grammar
from nsqviz.lookupd.analyses import ANALYSES
from nsqviz.lookupd.dissector import DISSECTOR
from nsqviz.lookupd.events import (
    ERROR,
    MAGIC,
    NAMES,
    Answer,
    Command,
    Error,
    Identify,
    Register,
    Truncated,
    Unregister,
    Violation,
)
from nsqviz.lookupd.fields import FIELDS, PARAMS, PREFIX
from nsqviz.lookupd.framing import ANSWER_STARTS
from nsqviz.lookupd.observer import Observer
from nsqviz.lookupd.report import REPORT
from nsqviz.lookupd.rules import RULES
from nsqviz.nsq.framing import DEFAULT_MAX_BODY_SIZE
from nsqviz.protocols import (
    DetectionWords,
    Item,
    ItemKind,
    ObservedConnection,
    Protocol,
    RecordView,
    no_fields,
)
from nsqviz.records import escaped
from nsqviz.sansio import violation_fields
from nsqviz.stream.direction import Direction
from nsqviz.stream.reassembly import RawFrame

__all__ = ["LOOKUPD", "LookupdProtocol", "UNDECODABLE"]

UNDECODABLE = "Undecodable"
"""The name of an error record for bytes no error code is answered for."""

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
    if kind is Error:
        out = {"code": event.code, "text": event.text}
        if event.command is not None:
            out["answers"] = NAMES[type(event.command)]
        return out
    return {}


def _items(events: list[Any], fields_of: Callable[[Any], dict[str, Any]] = _fields,
           ) -> list[Item]:
    """The observer's events as items: commands (a refused one with its violation),
    answers, undecodable bytes, a unit the stream ended inside."""
    out: list[Item] = []
    for e in events:
        kind = type(e)
        raw = e.raw
        offset = None if raw is None else raw.offset
        if isinstance(e, Command):
            out.append(Item(ItemKind.COMMAND, NAMES[kind], fields_of(e), e, offset, raw))
        elif kind is Answer or kind is Error:
            out.append(Item(ItemKind.FRAME, NAMES[kind], fields_of(e), e, offset, raw))
        elif kind is Violation and e.command is not None:
            fields = fields_of(e.command)
            fields["violation"] = violation_fields(e)
            out.append(Item(ItemKind.COMMAND, NAMES[type(e.command)], fields, e, e.offset,
                            raw))
        elif kind is Violation:
            fields = violation_fields(e)
            if raw is not None:
                fields["data"] = raw.data.hex()
            out.append(Item(ItemKind.ERROR, e.code or UNDECODABLE, fields, e, e.offset, raw))
        elif kind is Truncated:
            out.append(Item(ItemKind.TRUNCATED, "Truncated", {
                "offset": e.offset, "expected": e.expected, "data": e.data.hex(),
                "reason": "the stream ended inside this unit"}, e, e.offset, raw))
        # ConnectionClosed is a TCP matter: the capture layer reports the flow's end.
    return out


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

    def observer(self, *, midstream: bool, fields: bool = True) -> ObservedConnection:
        items = _items if fields else partial(_items, fields_of=no_fields)
        return ObservedConnection(Observer(midstream=midstream), items)

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
            text = compactjson.dumps(fields["data"])[:120]
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
        if kind is Error:
            return f"{event.code} {event.text}".rstrip(), "error"
        if kind is Violation:
            if event.command is not None:
                return self.label(event.command)
            return f"{event.code} {event.text}".rstrip(), "error"
        return name, "command"

    def names(self) -> tuple[str, ...]:
        return tuple(NAMES.values())

    def record_names(self) -> frozenset[str]:
        return frozenset([*NAMES.values(), *grammar.ErrorCode, UNDECODABLE])

    def grammars(self) -> tuple[Any, ...]:
        return (*grammar.COMMANDS.values(), grammar.Response)

    def record_name(self, event: Any) -> str | None:
        return NAMES.get(type(event))

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

    analyses = ANALYSES
    report = REPORT
    dissector = DISSECTOR
    rules = RULES

    typed_schema = (
        ("topic", "string"),
        ("channel", "string"),
        ("data", "string"),  # an answer's text; IDENTIFY's JSON
    )

    def typed(self, event: Any) -> dict[str, Any]:
        if type(event) is Violation and event.command is not None:
            event = event.command
        kind = type(event)
        if kind is Register or kind is Unregister:
            out = {"topic": event.topic}
            if event.channel is not None:
                out["channel"] = event.channel
            return out
        if kind is Identify:
            return {"data": compactjson.dumps(event.info)}
        if kind is Answer:
            return {"data": _text(event.data)}
        if kind is Error:
            return {"data": _text(event.data)}
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
