"""nsqlookupd's events as the capture layer's items, and their records' fields, lines,
filter values and columns.

What :class:`~nsqviz.lookupd.protocol.LookupdProtocol` hands the capture layer once a
flow is the lookup protocol's, kept apart from the protocol's instance so that choosing
a flow's protocol imports none of this (the grammar, the events, the observer): nsqd's
commands are ``command`` records named by their verb (the magic ``MAGIC``),
nsqlookupd's answers ``frame`` records -- ``RESPONSE`` (``OK`` or the IDENTIFY JSON) or
``ERROR`` (``E_*``). A command nsqlookupd refuses carries the refusal as its
``violation``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from nsqviz import compactjson
from nsqviz.lookupd import grammar
from nsqviz.lookupd.events import (
    ERROR,
    MAGIC,
    NAMES,
    Answer,
    Answered,
    Command,
    Error,
    Identify,
    Register,
    Truncated,
    Unregister,
    Violation,
)
from nsqviz.lookupd.fields import PARAMS, PREFIX
from nsqviz.protocols.items import ANSWERS, Item, ItemKind, truncated_item
from nsqviz.protocols.protocol import RecordView
from nsqviz.records import escaped
from nsqviz.sansio import violation_fields
from nsqviz.stream.reassembly import RawFrame

__all__ = ["UNDECODABLE", "event_fields", "filter_values", "items", "label", "names",
           "record_name", "record_names", "summary", "typed"]

UNDECODABLE = "Undecodable"
"""The name of an error record for bytes no error code is answered for."""

_MAGIC_SUMMARY = f'"{escaped(grammar.Magic.build(None))}"'
"""The magic record's one line: the bytes nsqd sent, as the grammar's magic field holds
them (``"  V1"``)."""


def _text(data: bytes) -> str:
    return data.decode("utf-8", "backslashreplace")


def event_fields(event: Any) -> dict[str, Any]:
    """An event's record fields."""
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


def items(events: list[Any], fields_of: Callable[[Any], dict[str, Any]] = event_fields,
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
        elif kind is Answered:
            out.append(Item(ItemKind.ANNOTATION, "Answered", {ANSWERS: e.command}, e))
        elif kind is Truncated:
            out.append(truncated_item(e, "unit"))
    return out


def summary(kind: str, name: str, fields: Mapping[str, Any]) -> str:
    """A command's or answer's Info column."""
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

def label(event: Any) -> tuple[str, str]:
    """``(label, style)`` of an event for diagrams."""
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
            return label(event.command)
        return f"{event.code} {event.text}".rstrip(), "error"
    return name, "command"


def names() -> tuple[str, ...]:
    """The names of its command and frame records, in the events' order."""
    return tuple(NAMES.values())


def record_names() -> frozenset[str]:
    """Every name its records can carry."""
    return frozenset([*NAMES.values(), *grammar.ErrorCode, UNDECODABLE])


def record_name(event: Any) -> str | None:
    """The name of a command's or answer's record; ``None`` for other events."""
    return NAMES.get(type(event))


def filter_values(record: RecordView) -> Mapping[str, list[Any]]:
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


def typed(event: Any) -> dict[str, Any]:
    """The typed columns of a command or answer."""
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
