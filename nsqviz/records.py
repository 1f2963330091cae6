"""Records: the serializer of decoded traffic, for every output of ``nsqviz decode``.

A :class:`DecodedRecord` is one row of ``nsqviz decode``: a command, a frame, an error, a
gap, a TLS note or (for the pipeline) a flow's start or end. This module is the only
place that turns events and records into text and data:

* :func:`event_fields` -- an event's fields as JSON-ready data (through its protocol, or
  :mod:`nsqviz.sansio` for the events every protocol shares);
* :func:`summary` -- the Info column of ``nsqviz decode``; :func:`details` -- every
  field of a record on lines of their own (``-V``); :func:`packet_list` and
  :func:`escaped` -- how packet numbers and bytes are written as text;
* :func:`label` -- the short label diagrams and transcripts show (:data:`SHARED_LABELS`
  for the events every protocol shares);
* :func:`fields_json`, :func:`json_line` -- the JSON encoders (compact:
  :mod:`nsqviz.compactjson`'s; ``json_line`` its fast :func:`~nsqviz.compactjson.line`);
* :func:`packet_schema`, :func:`frame_schema` and :class:`FrameColumns` -- the Arrow
  layout of the pipeline's packets and frames tables (with the TCP layer's columns,
  :data:`TCP_COLUMNS`).

Protocol knowledge comes from :mod:`nsqviz.protocols`; nothing here names a protocol.
"""

from __future__ import annotations

import json
import json.encoder
from functools import cache
from typing import TYPE_CHECKING, Any, NamedTuple

from nsqviz import compactjson, protocols
from nsqviz.compactjson import dumps as compact_dumps
from nsqviz.sansio import ConnectionClosed, Truncated, truncated_fields

if TYPE_CHECKING:
    from nsqviz.protocols.protocol import Protocol

__all__ = [
    "DecodedRecord",
    "FRAME_COLUMNS",
    "PACKET_COLUMNS",
    "PacketColumns",
    "SHARED_LABELS",
    "CAPTURE_BYTES_FIELDS",
    "ConnectionRows",
    "TCP_COLUMNS",
    "details",
    "escaped",
    "event_fields",
    "event_json",
    "fields_json",
    "FrameColumns",
    "frame_schema",
    "json_line",
    "label",
    "packet_list",
    "packet_schema",
    "summary",
]


class DecodedRecord(NamedTuple):
    """One row of ``nsqviz decode``: a command, a frame, an error, a gap, a TLS note or a
    TCP FIN/RST of a decoded connection.

    ``flow`` is the connection's ``client->server`` label; ``packets`` the 1-based packet
    numbers (each in its own file) that carried the bytes and ``files`` the index of the
    file of each; ``event`` the protocol event (or the TCP gap) it shows, for views that
    want the raw bytes and their provenance; ``offset``/``size`` where its bytes are in
    the direction's stream, when known; ``answers``, for a server's answer its decoder
    paired with a command, that command's number among the connection's commands (1:
    the client's first command record), which the frames table keeps and the analyses
    join on (the fields' ``response_to`` names its packet, as shown).
    """

    ts: float
    flow: str | None
    dir: str | None
    kind: str  # "command" | "frame" | "error" | "gap" | "tls" | "tcp" | "flow"
    name: str
    fields: dict[str, Any]
    packets: tuple[int, ...]
    flow_id: int | None = None
    event: Any = None
    protocol: str | None = None
    files: tuple[int, ...] = ()
    offset: int | None = None
    size: int | None = None
    answers: int | None = None

    def as_json(self) -> dict[str, Any]:
        return {
            "ts": self.ts,
            "flow": self.flow,
            "dir": self.dir,
            "kind": self.kind,
            "name": self.name,
            "fields": self.fields,
            "packets": list(self.packets),
        }


# --------------------------------------------------------------------------- text


def event_fields(event: Any) -> dict[str, Any]:
    """An event's fields as JSON-ready data, as its protocol shows them."""
    proto = protocols.of_event(event)
    if proto is not None:
        return proto.fields(event)
    if type(event) is Truncated:
        return truncated_fields(event)
    if type(event) is ConnectionClosed:
        return {}
    raise TypeError(f"no registered protocol defines {type(event).__qualname__}")


def event_json(event: Any) -> dict[str, Any]:
    """An event for a transcript: its type, its fields and, when it came off the wire,
    its bytes and the segments they came from."""
    out: dict[str, Any] = {"type": type(event).__name__, **event_fields(event)}
    raw = getattr(event, "raw", None)
    if raw is not None:
        out["frame"] = {"offset": raw.offset, "hex": raw.data.hex(),
                        "sources": [[s.segment, s.start, s.end] for s in raw.sources]}
    return out


SHARED_LABELS: dict[type, tuple[str, str]] = {
    ConnectionClosed: ("TCP close (end of stream)", "error"),
    Truncated: ("✗ stream ended inside a unit", "error"),
}
"""``(label, style)`` of the events every protocol shares (:mod:`nsqviz.sansio`)."""


def label(event: Any) -> tuple[str, str]:
    """``(label, style)`` of an event for diagrams, as its protocol words it."""
    proto = protocols.of_event(event)
    if proto is None:
        return SHARED_LABELS.get(type(event)) or (type(event).__name__, "note")
    return proto.label(event)


def packet_list(packets: tuple[int, ...] | list[int]) -> str:
    """The one way packet numbers are written: every one, in order, comma-separated
    (``6,8,10,12``) -- exact, as ``--json``'s ``packets`` and Wireshark's list of a
    reassembled PDU's segments name them; a range would hide which packets in between
    belong to another connection or direction."""
    return ",".join(map(str, packets))


_CONTROL = {c: f"\\x{c:02x}" for c in (*range(0x20), 0x7F)} | {
    0x09: "\\t", 0x0A: "\\n", 0x0D: "\\r"}


def escaped(data: bytes) -> str:
    """Bytes as text: UTF-8 as it is, every byte that is not (``\\xff``) and every
    control character (``\\x00``, ``\\n``) escaped -- never a replacement character."""
    return data.decode("utf-8", "backslashreplace").translate(_CONTROL)


def details(rec: DecodedRecord) -> list[str]:
    """Every field of a record on a line of its own, untruncated (``nsqviz decode -V``):
    its packets, bytes as text (:func:`escaped`) with their size, JSON objects decoded
    into indented lines."""
    proto = protocols.by_name(rec.protocol) if rec.protocol is not None else None
    as_bytes = CAPTURE_BYTES_FIELDS | (proto.bytes_fields if proto is not None else frozenset())
    lines = [f"packets: {packet_list(rec.packets)}"]
    for key, value in rec.fields.items():
        lines += _detail(str(key), value, key in as_bytes, "")
    return lines


CAPTURE_BYTES_FIELDS = frozenset({"lost_partial_frame"})
"""Fields of the capture layer's own records whose values are bytes written as hex."""


def _detail(key: str, value: Any, as_bytes: bool, indent: str) -> list[str]:
    if as_bytes and isinstance(value, str):
        raw = bytes.fromhex(value)
        return [f"{indent}{key} ({len(raw)} bytes): {escaped(raw)}"]
    if isinstance(value, dict):
        out = [f"{indent}{key}:"]
        for k, v in value.items():
            out += _detail(str(k), v, False, indent + "  ")
        return out
    if isinstance(value, list) and (as_bytes or any(isinstance(v, dict | list) for v in value)):
        out = [f"{indent}{key}: {len(value)} items"]
        for i, v in enumerate(value):
            out += _detail(f"[{i}]", v, as_bytes, indent + "  ")
        return out
    text = value if isinstance(value, str) else json.dumps(value)
    return [f"{indent}{key}: {text}"]


def _clip(value: Any, limit: int = 80) -> str:
    text = str(value)
    return text if len(text) <= limit else f"{text[:limit]}...({len(text)} chars)"


def summary(rec: DecodedRecord) -> str:
    """The Info column: the fields that identify this record at a glance."""
    if rec.kind in ("command", "frame") and rec.protocol is not None:
        text = protocols.by_name(rec.protocol).summary(rec.kind, rec.name, rec.fields)
        fields = rec.fields
        problem = fields.get("violation")
        if problem:
            text += f"  [refused: {problem['code'] or 'closes'} {problem['text']}]"
        if "cut" in fields:
            cut = fields["cut"]
            text += f"  [{cut['captured']} of {cut['length'] or '?'} bytes captured]"
        if "refused" in fields:
            text += f"  [refused: {fields['refused']}]"
        if "response_to" in fields:
            text += f"  [response to {fields['response_to']}]"
        return text
    if rec.kind in ("gap", "error", "tls", "flow", "tcp"):  # (a field with no value aside)
        return "  ".join(f"{k}={_clip(v)}" for k, v in rec.fields.items()
                         if k not in ("data", "pending") and v is not None)
    return ""


# --------------------------------------------------------------------------- JSON

_encode_str = json.encoder.encode_basestring_ascii
"""What ``json.dumps`` writes for a string: the encoder's own (C) escaper."""


def fields_json(fields: dict[str, Any]) -> str:
    """Exactly ``json.dumps(fields, separators=(",", ":"))`` (the frames table's
    ``fields`` column, which the in-process and the Spark pipeline write alike), written
    faster (see :func:`_fields_parts`)."""
    parts: list[str] = []
    if not _fields_parts(fields, parts):
        return compact_dumps(fields)
    return "".join(parts)


def _fields_parts(fields: dict[str, Any], parts: list[str]) -> bool:
    """Append the pieces of ``fields``' compact JSON to ``parts``, to be joined once (a
    body's hex is the bulk of a record: every concatenation would copy it again); False
    when ``fields`` has a key ``json.dumps`` would convert (then ``parts`` is of no use).

    Keys and strings go straight to the encoder's string escaper, ints are formatted
    directly, anything else goes through the encoder. A string of ASCII letters and
    digits (ids, and the hex of bodies: most of the bytes) needs no escaping and is
    copied as it is; ``bytes.isalnum`` (a table lookup per byte) tells so several times
    faster than the escaper or ``str.isalnum`` (a Unicode lookup per character)."""
    add = parts.append
    add("{")
    for i, (k, v) in enumerate(fields.items()):
        if type(k) is not str:
            return False  # json.dumps turns such keys into strings
        if i:
            add(",")
        add(_encode_str(k))
        add(":")
        t = type(v)
        if t is str:
            if v.isascii() and v.encode().isalnum():
                add('"')
                add(v)
                add('"')
            else:
                add(_encode_str(v))
        elif t is int:
            add(str(v))
        else:
            add(compact_dumps(v))
    add("}")
    return True


def json_line(rec: DecodedRecord) -> bytes:
    """``nsqviz decode --json``'s line for ``rec``, ended by its newline: ``rec.as_json()``
    as compact JSON in UTF-8, ``"ts":null`` when the time is not known -- what
    ``json.dumps(rec.as_json(), separators=(",", ":"), ensure_ascii=False)`` writes, by
    the fast encoder (:func:`nsqviz.compactjson.line`, which says what it hands to the
    standard library; a test holds the two equal on every record of every sample
    capture). The hot loop of ``decode --json``."""
    return compactjson.line(rec.as_json())


# ------------------------------------------------------------------------- tables


def _arrow_type(name: str) -> Any:
    import pyarrow as pa

    if name.startswith("list<") and name.endswith(">"):
        return pa.list_(_arrow_type(name[5:-1]))
    return {"string": pa.string(), "int64": pa.int64(), "int32": pa.int32(),
            "float64": pa.float64(), "binary": pa.binary(), "bool": pa.bool_()}[name]


PACKET_COLUMNS = (
    ("file", "string"),
    ("file_index", "int32"),  # rank in rotation order
    ("packet", "int64"),  # 1-based, Wireshark's frame number in its file
    ("ts", "float64"),
    ("src", "string"),
    ("sport", "int32"),
    ("dst", "string"),
    ("dport", "int32"),
    ("seq", "int64"),
    ("ack", "int64"),
    ("flags", "int32"),
    ("window", "int32"),  # as sent (not scaled)
    ("payload", "binary"),
    ("missing", "int32"),  # payload bytes cut by the snaplen
    ("warning", "string"),  # set on rows for damaged records
)
"""The packets table: one row per TCP packet (or damaged record) of a capture."""

FRAME_COLUMNS = (
    # what `nsqviz decode --json` prints
    ("ts", "float64"),
    ("flow", "string"),
    ("dir", "string"),
    ("kind", "string"),
    ("name", "string"),
    ("fields", "string"),  # JSON object, bytes as hex
    ("packets", "list<int64>"),
    # where it came from
    ("protocol", "string"),
    ("conn_id", "string"),
    ("file", "string"),  # file of the frame's first packet
    ("packet_files", "list<string>"),  # file of each entry of `packets`
    ("seq", "int64"),  # order within the connection
    ("offset", "int64"),  # stream offset in its direction
    ("size", "int64"),  # bytes of the frame (of the gap, for gaps)
    ("violation", "string"),  # the server's error code for a command it refuses as sent
    # why: errors, gaps; a refused command's answer from the server (its violation, its
    # state or a message id not in flight); how a flow started ("syn", "midstream") or
    # ended ("fin", "rst", "idle", "reused", "capture"); a retransmission's kind, a
    # reset's "mid-session" or "at close"
    ("reason", "string"),
    # a server's answer: the packet of the command it answers (as decode shows it) and
    # that command's number among its connection's commands (DecodedRecord.answers)
    ("response_to", "int64"),
    ("answers", "int64"),
)
"""The frames table's own columns; :func:`frame_schema` adds :data:`TCP_COLUMNS` and
each protocol's typed ones."""

TCP_COLUMNS = (
    ("tcp_since", "float64"),  # ZeroWindow, WindowOpen, RST: when the window closed
    ("tcp_acked", "int64"),  # ZeroWindow: the other direction's offset acknowledged
    ("tcp_in_flight", "int64"),  # ZeroWindow, RST: the other side's bytes beyond it
    ("tcp_unacked", "int64"),  # RST: the sender's own bytes not acknowledged
    ("tcp_probes", "int64"),  # ZeroWindow/WindowOpen: the other side's window probes
    ("tcp_cut_bytes", "int64"),  # Truncated, Gap: bytes the snaplen cut
)
"""The columns of the ``tcp`` rows (:mod:`nsqviz.capture.tcp_analysis`: one row per
zero-window packet, reopened window, retransmission and reset, one per direction the
snaplen cut), each from the record's field of the name after ``tcp_``; a ``Gap`` row's
``tcp_cut_bytes`` comes from its gap event.
Which side's packet a row is is its ``dir``; its ``reason``, ``offset`` and ``size`` say
the rest (:mod:`nsqviz.capture.tcp_views` reads them)."""

_TCP_FIELDS = tuple((name, name[4:]) for name, _ in TCP_COLUMNS)


@cache
def packet_schema() -> Any:
    """The packets table as an Arrow schema (pyarrow is imported only when asked)."""
    import pyarrow as pa

    return pa.schema([(n, _arrow_type(t)) for n, t in PACKET_COLUMNS])


@cache
def frame_schema() -> Any:
    """The frames table as an Arrow schema: :data:`FRAME_COLUMNS`, then the typed
    columns of every registered protocol."""
    import pyarrow as pa

    columns = [*FRAME_COLUMNS, *TCP_COLUMNS, *protocols.typed_columns()]
    return pa.schema([(n, _arrow_type(t)) for n, t in columns])


class PacketColumns:
    """Packets-table rows of one capture file, column by column (see :class:`FrameColumns`)."""

    def __init__(self, path: str, file_index: int):
        self.path = path
        self.file_index = file_index
        self.columns: list[list[Any]] = [[] for _ in range(len(PACKET_COLUMNS) - 2)]

    def __len__(self) -> int:
        return len(self.columns[0])

    def add(self, number: int, seg: Any) -> None:
        """One TCP segment (a :class:`~nsqviz.capture.layers.Segment`), packet ``number``."""
        (n, ts, src, sport, dst, dport, seq, ack, flags, window, payload, missing,
         warning) = self.columns
        n.append(number)
        ts.append(seg.ts)
        src.append(seg.src)
        sport.append(seg.sport)
        dst.append(seg.dst)
        dport.append(seg.dport)
        seq.append(seg.seq)
        ack.append(seg.ack)
        flags.append(seg.flags)
        window.append(seg.window)
        payload.append(seg.payload)
        missing.append(seg.missing)
        warning.append(None)

    def add_warning(self, number: int | None, reason: str) -> None:
        """A record that could not be read: a row whose ``warning`` says why."""
        for c in self.columns[:-1]:
            c.append(None)
        self.columns[0][-1] = number
        self.columns[-1].append(reason)

    def batch(self) -> Any:
        import pyarrow as pa

        from nsqviz.arrays import from_list

        schema = packet_schema()
        n = len(self)
        arrays = [from_list([self.path] * n, pa.string()),
                  from_list([self.file_index] * n, pa.int32())]
        arrays += [from_list(c, t) for c, t in zip(self.columns, schema.types[2:], strict=True)]
        for c in self.columns:
            c.clear()
        return pa.RecordBatch.from_arrays(arrays, schema=schema)


class FrameColumns:
    """Frames-table rows built column by column, flushed as Arrow record batches.

    ``files`` are the capture files by index (a record's ``files`` name its packets').
    Without ``fields`` the ``fields`` column is left null: what costs most to build and
    to convert, and nothing the analyses read.
    :meth:`add` runs once per decoded record on the pipeline's hot path, so it appends
    only what the record gives: the encoded fields, the protocol's typed values (not the
    event: it holds the frame's bytes) and the other values as they are, the packets'
    ``files`` tuple standing for ``file`` and ``packet_files``. :meth:`batch` derives
    the rest: the file names once per distinct ``files`` tuple, and the columns most
    rows leave empty (the typed ones, ``violation``, ``reason``) set only on the rows
    that have a value. (A tuple per row instead of a list per column is cheaper to
    build but costs more than that in garbage collections.)
    """

    def __init__(self, files: list[str], *, fields: bool = True):
        self.files = files
        self.fields = fields  # False: the `fields` column stays null (nsqviz messages &c.)
        self._protocols: dict[str, Protocol] = {}
        self._where: dict[tuple[int, ...], tuple[str | None, list[str]]] = {}
        self._clear()

    def _clear(self) -> None:
        # ts, flow, dir, kind, name, fields, packets, protocol, conn_id, files, seq,
        # offset, size: FRAME_COLUMNS up to size, with `files` for `file` and `packet_files`
        self.columns: list[list[Any]] = [[] for _ in range(13)]
        self.typed_rows: list[int] = []  # the rows that have typed values
        self.typed: list[dict[str, Any]] = []  # and those values
        self.notes: list[tuple[int, str | None, str | None]] = []  # (row, violation, reason)
        self.answers: list[tuple[int, int | None, int | None]] = []  # (row, packet, number)

    def __len__(self) -> int:
        return len(self.columns[0])

    def add(self, rec: DecodedRecord, conn_id: str | None, seq: int | None) -> None:
        """Append one record as a row of connection ``conn_id``, ``seq``-th in it."""
        (tss, flows, dirs, kinds, names, fieldss, packetss, protos, conn_ids, filess, seqs,
         offsets, sizes) = self.columns
        row = len(tss)
        kind, fields = rec.kind, rec.fields
        if kind == "command" or kind == "frame":
            if rec.protocol is not None:
                proto = self._protocols.get(rec.protocol)
                if proto is None:  # by_name walks the registered protocols: once a name
                    proto = self._protocols[rec.protocol] = protocols.by_name(rec.protocol)
                # a unit the capture cut short has no event: what its head decoded
                typed = proto.typed(rec.event) if rec.event is not None else \
                    proto.typed_unit(kind, rec.name, fields)
                if typed:
                    self.typed_rows.append(row)
                    self.typed.append(typed)
            problem = fields.get("violation")
            if problem:  # the server's error code, and its answer as words
                code = problem["code"]
                self.notes.append((row, code or "closes",
                                   f"{code} {problem['text']}" if code else problem["text"]))
            elif "refused" in fields:  # refused where it was sent: the server's answer
                self.notes.append((row, None, fields["refused"]))
            asked = fields.get("response_to")
            if asked is not None or rec.answers is not None:
                self.answers.append((row, asked, rec.answers))
        elif kind == "flow":
            self.notes.append((row, None, fields.get("how")))
        elif kind == "tcp":
            self.notes.append((row, None, fields.get("kind") or fields.get("when")))
            self._tcp_typed(row, fields)
        else:
            cut = getattr(rec.event, "cut", 0) if rec.name == "Gap" else 0
            if cut:  # bytes of the gap the snaplen cut (its reason names the packet)
                self.typed_rows.append(row)
                self.typed.append({"tcp_cut_bytes": cut})
            # a violation's words: the server's text where it has one, else the reason
            text = fields.get("text") or fields.get("reason") or fields.get("note")
            self.notes.append((row, None, f"{rec.name}: {text}" if text else rec.name))
        tss.append(rec.ts)
        flows.append(rec.flow)
        dirs.append(rec.dir)
        kinds.append(kind)
        names.append(rec.name)
        fieldss.append(fields_json(fields) if self.fields else None)
        packetss.append(rec.packets)
        protos.append(rec.protocol)
        conn_ids.append(conn_id)
        filess.append(rec.files)
        seqs.append(seq)
        offsets.append(rec.offset)
        sizes.append(rec.size)

    def _tcp_typed(self, row: int, fields: dict[str, Any]) -> None:
        values = {column: fields[key] for column, key in _TCP_FIELDS if key in fields}
        if values:
            self.typed_rows.append(row)
            self.typed.append(values)

    def batch(self) -> Any:
        """The rows so far as one Arrow record batch; the builder starts empty again."""
        import pyarrow as pa

        from nsqviz.arrays import from_list

        schema = frame_schema()
        n = len(self)
        (tss, flows, dirs, kinds, names, fieldss, packetss, protos, conn_ids, filess, seqs,
         offsets, sizes) = self.columns
        where = self._where
        for key in set(filess) - where.keys():
            paths = [self.files[i] for i in key]
            where[key] = (paths[0] if paths else None, paths)
        violations: list[str | None] = [None] * n
        reasons: list[str | None] = [None] * n
        for row, violation, reason in self.notes:
            violations[row], reasons[row] = violation, reason
        asked: list[int | None] = [None] * n
        numbers: list[int | None] = [None] * n
        for row, packet, number in self.answers:
            asked[row], numbers[row] = packet, number
        # a typed column no row of the batch has a value in is made as nulls at once
        typed: dict[str, list[Any] | None] = dict.fromkeys(schema.names[len(FRAME_COLUMNS):])
        for row, values in zip(self.typed_rows, self.typed, strict=True):
            for name, value in values.items():
                if name not in typed:  # a value outside the typed columns: not shown
                    continue
                column = typed[name]
                if column is None:
                    column = typed[name] = [None] * n
                column[row] = value
        columns = [tss, flows, dirs, kinds, names, fieldss, packetss, protos, conn_ids,
                   [where[f][0] for f in filess], [where[f][1] for f in filess], seqs,
                   offsets, sizes, violations, reasons, asked, numbers, *typed.values()]
        arrays = [pa.nulls(n, t) if c is None else from_list(c, t)
                  for c, t in zip(columns, schema.types, strict=True)]
        self._clear()
        return pa.RecordBatch.from_arrays(arrays, schema=schema)


class ConnectionRows:
    """Frames-table rows of one decoder's records: each record's connection id (the flow's
    label and start time, plus ``scope``) and its order in the connection."""

    def __init__(self, files: list[str], scope: str = "", *, fields: bool = True):
        self.columns = FrameColumns(files, fields=fields)
        self.scope = scope
        self.conns: dict[int, list[Any]] = {}  # flow id -> [conn_id, rows so far]

    def add(self, rec: DecodedRecord, *, write: bool = True) -> None:
        """Number ``rec`` in its connection; append it unless ``write`` is false (a row
        another stage wrote: it still takes its place in the order)."""
        fid = rec.flow_id
        if fid is None:  # a capture warning: part of no connection
            self.columns.add(rec, None, None)
            return
        c = self.conns.get(fid)
        if c is None:
            c = self.conns[fid] = [f"{rec.flow}@{rec.ts:.6f}{self.scope}", 0]
        c[1] += 1
        if write:
            self.columns.add(rec, c[0], c[1])
