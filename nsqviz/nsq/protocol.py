"""NSQ V2 as the protocol-free parts of nsqviz see it (:class:`nsqviz.protocols.protocol.Protocol`).

Detection is nsqd's first answer on a connection (an NSQ response or error frame: also
how nsqd refuses another protocol's magic), the magic ``"  V2"`` a client sends first,
nsqd's port 4150, or -- for a capture that starts mid-connection -- bytes that frame as
an NSQ command or frame.
Decoding is the codec's :class:`~nsqviz.nsq.observer.Observer`, its events turned into
:class:`~nsqviz.protocols.items.Item` s here. Record fields keep a message id as the 16 hex
digits it is on the wire (as nsqd, nsqadmin and client logs print it); other bytes are
hex.

Decoding needs the tables, the events and the struct-based codec, imported with this
module; the construct grammar (a hex view's layout, a unit a gap cut), the filter fields,
the analyses, the report, the rules and the timers are imported where they are first
asked for, so ``nsqviz decode`` of an NSQ capture imports no construct.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from functools import partial
from typing import TYPE_CHECKING, Any, cast

from nsqviz import compactjson
from nsqviz.nsq import events as ev
from nsqviz.nsq.commands import (
    BY_EVENT,
    COMMAND_NAMES,
    COMMANDS,
    FRAME_NAMES,
    FRAMES,
    MAGIC_NAME,
    MESSAGE_ID,
    BodyKind,
    CommandSpec,
    ParamKind,
)
from nsqviz.nsq.connection import _json_or_none
from nsqviz.nsq.dissector import DISSECTOR
from nsqviz.nsq.errors import ErrorCode
from nsqviz.nsq.framing import DEFAULT_MAX_FRAME_SIZE, SIZE_PREFIX, FrameFraming
from nsqviz.nsq.labels import command_label, event_label
from nsqviz.nsq.observer import Observer
from nsqviz.nsq.wire import MAGIC_V2, MESSAGE_ID_SIZE
from nsqviz.protocols.detection import DetectionWords
from nsqviz.protocols.items import (
    ANSWERS,
    Item,
    ItemKind,
    Lost,
    ObservedConnection,
    no_fields,
    truncated_item,
)
from nsqviz.protocols.protocol import Part, Protocol, RecordView
from nsqviz.protocols.timers import TimerRow, TimerSpan
from nsqviz.records import escaped
from nsqviz.sansio import violation_fields
from nsqviz.stream.direction import Direction
from nsqviz.stream.reassembly import FramingError

if TYPE_CHECKING:
    from nsqviz.doctor.rule import Rule
    from nsqviz.fields import Field
    from nsqviz.nsq.columns import NsqColumns
    from nsqviz.report import Report
    from nsqviz.sql import Analyses

__all__ = ["NSQ", "NsqProtocol", "UNDECODABLE"]

UNDECODABLE = "Undecodable"
"""The name of an error record for bytes nsqd would refuse with no error code."""


def _id_text(mid: bytes) -> str:
    """A message id as text: nsqd's ids are 16 ASCII hex digits, but a refused FIN/REQ/
    TOUCH keeps whatever bytes the client sent -- escaped (``\\xcf``), never dropped."""
    return mid.decode("ascii", "backslashreplace")


_BYTES = (bytes, bytearray)
_SEQUENCES = (tuple, list)  # (tuples: isinstance builds a union anew at each call)


def _plain(name: str, value: Any) -> Any:
    """A field's value as a record holds it: the message id as its text, other bytes
    as hex, tuples as lists."""
    if name == MESSAGE_ID.field and isinstance(value, bytes):
        return _id_text(value)
    if isinstance(value, _BYTES):
        return bytes(value).hex()
    if isinstance(value, _SEQUENCES):
        return [_plain("", v) for v in value]
    return value


_NAMES: dict[type, tuple[str, ...]] = {}
"""Each event class's field names but ``raw``, in order, read once (``dataclasses.fields``
per event was a tenth of ``decode --json``'s field building)."""

_AS_IS = frozenset({int, str, float, bool, type(None)})
"""The types of field values a record holds as they are (no hex, no list)."""


def _fields(event: Any) -> dict[str, Any]:
    """Every dataclass field but ``raw``, in the class's order; an error frame adds the
    code and text it carries in its data."""
    kind = type(event)
    names = _NAMES.get(kind)
    if names is None:
        names = _NAMES[kind] = tuple(f.name for f in dataclasses.fields(event)
                                     if f.name != "raw")
    out = {}
    for name in names:
        value = getattr(event, name)
        out[name] = value if type(value) in _AS_IS else _plain(name, value)
    if kind is ev.Error:
        out["code"], out["text"] = event.code, event.text
    elif kind is ev.Response and event.data[:1] == b"{":
        # IDENTIFY's and AUTH's answers: the JSON object decoded beside its bytes
        doc = _json_or_none(event.data)
        if doc is not None:
            out["json"] = doc
    elif kind is ev.Identify and event.raw is not None:
        # IDENTIFY's JSON decoded under ``data`` and, off the wire, its bytes under ``body``
        raw = event.raw.data
        out["body"] = raw[raw.index(b"\n") + 1 + SIZE_PREFIX:].hex()
    return out


def _command_summary(spec: CommandSpec, f: Mapping[str, Any]) -> str:
    """A command's one line, read from its table entry: each parameter as
    ``name=value[unit]``, then its body (JSON text; size and start of a message; the
    count of messages; an AUTH secret is not shown)."""
    # a unit cut short by the capture has only the fields it captured (``?`` for the
    # first parameter it lost, and what follows it)
    parts: list[str] = []
    for p in spec.params:
        if p.field not in f:
            if not parts:
                parts.append(f"{p.summary_name}=?")
            break
        parts.append(f"{p.summary_name}={f[p.field]}{p.unit}")
    if spec.body is BodyKind.MESSAGE:
        parts.append(_body(f))
    elif spec.body is BodyKind.MESSAGES:
        parts.append(f"messages={len(f['bodies']) if 'bodies' in f else f.get('messages', '?')}")
    elif spec.body is BodyKind.JSON:
        parts.append(compactjson.dumps(f["data"]) if "data" in f else _body(f))
    return " ".join(parts)


def _param_columns(spec: CommandSpec, values: Mapping[str, Any]) -> dict[str, Any]:
    """A command's parameters in their typed columns, read from its table entry
    (``values`` by field name; a message id as its text)."""
    out: dict[str, Any] = {}
    for p in spec.params:
        if p.column is not None and p.field in values:
            value = values[p.field]
            out[p.column] = _id_text(value) if p.kind is ParamKind.ID and isinstance(
                value, bytes) else value
    return out


def _command_typed(spec: CommandSpec, event: Any) -> dict[str, Any]:
    """A command's typed columns, read from its table entry (the parameters' columns,
    the sha1 of each body, IDENTIFY's JSON)."""
    out = _param_columns(spec, {p.field: getattr(event, p.field) for p in spec.params})
    if spec.body is BodyKind.MESSAGE:
        out["bodies"] = [_sha1(event.body)]
    elif spec.body is BodyKind.MESSAGES:
        out["bodies"] = [_sha1(b) for b in event.bodies]
    elif spec.body is BodyKind.JSON:
        out["data"] = compactjson.dumps(event.data)
    return out


class _Observer(ObservedConnection):
    """NSQ's observer behind the :class:`~nsqviz.protocols.items.ConnectionObserver` interface:
    a gap in a compressed direction loses the rest of it."""

    __slots__ = ()
    codec: Observer

    def gap(self, direction: str) -> Lost:
        conn = self.codec.server if direction == Direction.C2S else self.codec.client
        if conn.compression:
            return Lost(dead=f"a gap in a {conn.compression}-compressed stream: the rest of"
                             " this direction cannot be decompressed")
        from nsqviz.nsq.cut import cut_unit  # the grammar, for a gap's cut unit alone

        codec = self.codec
        raw, length = codec.gap_unit(Direction(direction))
        cut = cut_unit(direction, raw.data, length) if raw.data else None
        if cut is None:
            codec.lost()
            return Lost(raw.data, length)
        name, fields = cut
        packet = raw.sources[-1].segment if raw.sources else None
        if length is None or packet is None:  # where the next unit starts is a guess
            codec.lost(cut_command=direction == Direction.C2S)
        else:
            asked = codec.recovered(Direction(direction), name, fields, packet)
            if asked is not None:
                fields.update(_answered(asked))
        kind = ItemKind.COMMAND if direction == Direction.C2S else ItemKind.FRAME
        return Lost(raw.data, length, unit=Item(kind, name, fields, None, raw.offset, raw))


_UNITS: dict[type, tuple[ItemKind, str]] = {
    **{cls: (ItemKind.COMMAND, name) for cls, name in COMMAND_NAMES.items()},
    **{cls: (ItemKind.FRAME, name) for cls, name in FRAME_NAMES.items()}}
"""The kind and name of the item of each command's and frame's event class."""

_new_item = tuple.__new__
"""``Item``'s own ``__new__`` is Python code; a unit's item is built in C (once a frame)."""


def _items(events: list[ev.Event], fields_of: Callable[[Any], dict[str, Any]] = _fields,
           ) -> list[Item]:
    out: list[Item] = []
    for e in events:
        unit = _UNITS.get(type(e))
        if unit is not None:  # a command or frame: the hot path
            raw = cast("ev.Command | ev.ServerFrame", e).raw
            out.append(_new_item(Item, (unit[0], unit[1], fields_of(e), e,
                                        None if raw is None else raw.offset, raw)))
        elif isinstance(e, ev.Violation):
            out.append(_violation(e))
        elif isinstance(e, ev.CompressionStarted):
            out.append(Item(ItemKind.ANNOTATION, "CompressionStarted",
                            {"compression_starts": {"kind": e.kind, "level": e.level}}, e))
        elif isinstance(e, ev.TLSUpgrade):
            out.append(Item(ItemKind.TLS, "TLSUpgrade", {
                "pending": e.pending.hex(),
                "note": "the connection switches to TLS here; what follows is encrypted"}, e))
        elif type(e) is ev.Answered:
            out.append(Item(ItemKind.ANNOTATION, "Answered", _answered(e), e))
        elif type(e) is ev.Refused:
            out.append(Item(ItemKind.ANNOTATION, "Refused", {"refused": e.answer}, e))
        elif isinstance(e, ev.Truncated):
            out.append(truncated_item(e, "frame"))
    return out


def _answered(e: ev.Answered) -> dict[str, Any]:
    """Which command an answer answers: its packet (``response_to``, as shown) and, for
    the frames table, its number among the client's commands (``answers``: see
    :class:`~nsqviz.protocols.items.Item`)."""
    if e.command is None:
        return {"response_to": e.packet}
    return {"response_to": e.packet, ANSWERS: e.command}


def _violation(e: ev.Violation) -> Item:
    """A command nsqd refuses is that command with its violation attached; bytes that
    do not decode as a command are an error of their own."""
    if e.continued:
        return Item(ItemKind.SKIPPED, "Skipped", {"offset": e.offset, "reason": e.text}, e,
                    e.offset, e.raw)
    problem = violation_fields(e)
    cmd = e.command
    if cmd is not None:
        fields = _fields(cmd)
        fields["violation"] = problem
        raw = cmd.raw if cmd.raw is not None else e.raw
        return Item(ItemKind.COMMAND, COMMAND_NAMES[type(cmd)], fields, e, _offset(raw), raw)
    fields = problem
    if e.raw is not None:
        fields["data"] = e.raw.data.hex()
    return Item(ItemKind.ERROR, e.code or UNDECODABLE, fields, e, e.offset, e.raw)


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
    import hashlib  # the frames table's, not decode's: OpenSSL's load is felt at start-up

    return hashlib.sha1(body).hexdigest()


class NsqProtocol(Protocol):
    """NSQ V2: nsqd's TCP protocol."""

    name = "nsq"
    title = "NSQ"
    package = "nsqviz.nsq"
    server_ports = frozenset({4150})
    bytes_fields = frozenset({"body", "bodies", "data", "secret", "pending"})

    filter_fields: Part[tuple[Field, ...]] = Part("nsqviz.nsq.fields:FIELDS")

    def columnar(self) -> NsqColumns:
        """NSQ's columnar framer (:mod:`nsqviz.nsq.columns`: numpy and pyarrow are
        imported when it is first asked for, not by ``nsqviz decode``)."""
        from nsqviz.nsq import columns

        return columns.NsqColumns(self.typed)

    def record_names(self) -> frozenset[str]:
        return frozenset([*COMMAND_NAMES.values(), *FRAME_NAMES.values(), *ErrorCode,
                          UNDECODABLE])

    def filter_values(self, record: RecordView) -> dict[str, list[Any]]:
        from nsqviz.nsq.fields import record_values
        return record_values(record.kind, record.name, record.fields, record.dir,
                             record.event)

    def client_hello(self, data: bytes) -> bool:
        return data.startswith(MAGIC_V2)

    detection_words = DetectionWords(
        "magic", "no magic: nsqd will refuse it", "client did not send the NSQ magic",
        "looks like NSQ", "no magic, port not an NSQ port, not NSQ-like")

    def starts_hello(self, data: bytes) -> bool:
        return MAGIC_V2.startswith(data[:4])  # also when the magic came split

    def server_hello(self, data: bytes) -> bool | None:
        return _first_answer(data)

    def looks_like(self, direction: str, data: bytes) -> bool:
        return _looks_like_nsq(direction, data)

    def observer(self, *, midstream: bool, fields: bool = True) -> _Observer:
        items = _items if fields else partial(_items, fields_of=no_fields)
        return _Observer(Observer(provenance=True, midstream=midstream), items)

    def fields(self, event: Any) -> dict[str, Any]:
        return _fields(event)

    def summary(self, kind: str, name: str, fields: Mapping[str, Any]) -> str:
        f = fields
        if name == COMMAND_NAMES[ev.Magic]:
            return _MAGIC_SUMMARY
        spec = COMMANDS.get(name) if kind == "command" else None
        if spec is not None:
            return _command_summary(spec, f)
        if name == FRAME_NAMES[ev.Message]:
            return f"id={f.get('id', '?')} attempts={f.get('attempts', '?')} {_body(f)}"
        if name in (FRAME_NAMES[ev.Response], FRAME_NAMES[ev.Error]):
            text = _short(f["data"], 60)
            if "compression_starts" in f:
                text += f"  [stream switches to {f['compression_starts']['kind']}]"
            return text
        return ""

    def label(self, event: Any) -> tuple[str, str]:
        if type(event) in COMMAND_NAMES:
            return command_label(event), "command"
        return event_label(event)

    def names(self) -> tuple[str, ...]:
        return (*COMMAND_NAMES.values(), *FRAME_NAMES.values())

    def aliases(self) -> Mapping[str, str]:
        return {MAGIC_NAME: COMMAND_NAMES[ev.Magic]}

    def grammars(self) -> tuple[Any, ...]:
        from nsqviz.nsq import grammar
        return (grammar.Command, grammar.Frame)

    def record_name(self, event: Any) -> str | None:
        kind = type(event)
        return COMMAND_NAMES.get(kind) or FRAME_NAMES.get(kind)

    def layout(self, kind: str, name: str) -> Any:
        from nsqviz.nsq import grammar
        if name == COMMAND_NAMES[ev.Magic]:
            return grammar.Magic
        if kind == "command":
            return grammar.Command
        if kind == "frame":
            return grammar.Frame
        return None

    analyses: Part[Analyses] = Part("nsqviz.nsq.analyses:ANALYSES")
    report: Part[Report] = Part("nsqviz.nsq.report:REPORT")
    dissector = DISSECTOR
    rules: Part[tuple[Rule, ...]] = Part("nsqviz.nsq.rules:RULES")

    def timers(self, rows: list[TimerRow]) -> list[TimerSpan]:
        """nsqd's timers (:mod:`nsqviz.nsq.timers`), their lengths from the IDENTIFY
        exchange alone."""
        from nsqviz.nsq.timers import timer_spans
        return timer_spans(rows, None)

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
        spec = BY_EVENT.get(kind)
        if spec is not None:
            return _command_typed(spec, event)
        if kind is ev.Message:
            return {"msg_id": _id_text(event.id), "attempts": event.attempts,
                    "msg_ts": event.timestamp / 1e9, "bodies": [_sha1(event.body)]}
        if kind is ev.Response or kind is ev.Error:
            return {"data": event.data.decode("utf-8", "replace")}
        return {}

    def typed_unit(self, kind: str, name: str, fields: Mapping[str, Any]) -> dict[str, Any]:
        """A unit the capture cut short: a command's parameters (its line was captured
        whole, :mod:`nsqviz.nsq.cut`), a message's attempts, timestamp and id when all its
        digits were captured -- not a body's sha1 or an answer's text."""
        spec = COMMANDS.get(name) if kind == "command" else None
        if spec is not None:
            return _param_columns(spec, fields)
        if name != FRAME_NAMES[ev.Message]:
            return {}
        out: dict[str, Any] = {}
        if "attempts" in fields:
            out["attempts"] = fields["attempts"]
        if "timestamp" in fields:
            out["msg_ts"] = fields["timestamp"] / 1e9
        if len(fields.get("id", "")) == MESSAGE_ID_SIZE:
            out["msg_id"] = fields["id"]
        return out


_FIRST_ANSWERS = {FRAMES[ev.Response][1]: b"O{_C", FRAMES[ev.Error][1]: b"E"}
"""What nsqd's first frame on a connection can be, by frame type: a response (``OK``,
IDENTIFY's or AUTH's JSON, ``_heartbeat_``, ``CLOSE_WAIT``) or an error (``E_...``,
its refusal of another protocol's magic too) -- the first byte of its data."""


def _first_answer(data: bytes) -> bool | None:
    """Are a server's first bytes an NSQ frame nsqd can send first? ``None``: fewer than
    its size, frame type and first data byte, and the size does not already say no."""
    if len(data) < 4:
        return None
    size = int.from_bytes(data[:4], "big", signed=True)
    if not 5 <= size <= DEFAULT_MAX_FRAME_SIZE:
        return False
    if len(data) < 9:
        return None
    return data[8] in _FIRST_ANSWERS.get(int.from_bytes(data[4:8], "big"), b"")


_MAGIC_SUMMARY = f'"{escaped(MAGIC_V2)}"'
"""The magic record's one line: the bytes the client sent (``"  V2"``)."""


def _looks_like_nsq(direction: str, data: bytes) -> bool:
    """Mid-stream detection: does this chunk start like an NSQ command or frame?"""
    if direction == Direction.C2S:
        head = data[:16].split(b"\n", 1)[0].split(b" ", 1)[0]
        verb = head.decode("ascii", "replace")
        return data.startswith(MAGIC_V2) or verb in COMMANDS
    try:
        return len(data) >= 8 and FrameFraming().measure(data, 0) is not None
    except FramingError:
        return False


NSQ = NsqProtocol()
"""The NSQ protocol, as registered in :data:`nsqviz.protocols.BUILTIN`."""
