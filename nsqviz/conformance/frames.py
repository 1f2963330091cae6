"""The client guide's verdicts from the frames table, where the analyses run.

``nsqviz conformance`` checks connections it decoded itself (:mod:`.sources`); the
doctor's ``nsq.guide`` needs the same verdicts wherever the analyses run -- in-process and
in the pipeline's per-broker Spark tasks, which hold the frames table, not the events.
:func:`verdicts` is NSQ's ``guide`` view (:attr:`nsqviz.sql.View.python`): it rebuilds
each connection's commands and frames from its rows (the values the checks read are
columns of the table: a RDY's count, a message id, IDENTIFY's JSON, nsqd's answer to a
refused command) and runs the same checks on each: :func:`~nsqviz.conformance.rules.
check_connection`.

Only connections captured whole are judged -- from the magic on, no byte lost: what a
capture missed (its start, a gap, a snaplen's cut) is not a client breaking the guide.
The consumer-wide rules are not judged here: ``backoff`` and ``rdy-sum`` read one
consumer's connections to every nsqd together (a task holds one nsqd's; and
``max_in_flight`` is not on the wire), ``lookupd-polling`` nsqlookupd's HTTP requests,
which the frames table does not hold.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from nsqviz.conformance.rules import RULES, Connection, Seen, Verdict, check_connection
from nsqviz.nsq import events as ev
from nsqviz.nsq.commands import COMMAND_NAMES, FRAME_NAMES
from nsqviz.stream.direction import Direction

__all__ = ["COLUMNS", "INPUT", "schema", "verdicts"]

INPUT = ("server", "conn_id", "seq", "ts", "dir", "kind", "name", "packets",
         "packet_files", "violation", "reason", "msg_id", "count", "delay_ms",
         "attempts", "msg_ts", "data", "topic", "channel")
"""The columns :func:`verdicts` reads: a connection's NSQ rows (commands, frames, gaps,
flow ends) with its server."""

COLUMNS = ("server", "conn_id", "rule", "asks", "status", "detail", "packets",
           "packet_files", "packet_ts", "packet_conns")
"""A verdict: its server and connection, the guide's rule and what it asks,
``pass``/``fail``/``not exercised``, in words, and the packets that show it with each
one's file, time and connection."""

_BY_NAME: dict[str, type[ev.Event]] = {
    **{name: cls for cls, name in COMMAND_NAMES.items()},
    **{name: cls for cls, name in FRAME_NAMES.items()},
}
_SHIFT = 32  # a packet's key: its file's rank above its number (numbers restart per file)


def schema() -> Any:
    import pyarrow as pa

    s, ints, floats = pa.string(), pa.list_(pa.int64()), pa.list_(pa.float64())
    return pa.schema([("server", s), ("conn_id", s), ("rule", s), ("asks", s), ("status", s),
                      ("detail", s), ("packets", ints), ("packet_files", pa.list_(s)),
                      ("packet_ts", floats), ("packet_conns", pa.list_(s))])


def verdicts(rows: Any) -> Any:
    """Every verdict of the client guide on the connections in ``rows`` (an Arrow table
    of :data:`INPUT`), as an Arrow table of :data:`COLUMNS`."""
    import pyarrow as pa

    out: dict[str, list[Any]] = {name: [] for name in COLUMNS}
    for row in _verdict_rows(rows.to_pylist()):
        for name, column in out.items():
            column.append(row[name])
    return pa.Table.from_pydict(out, schema=schema())


class _Packets:
    """Packet keys that sort in capture order (a file's rank above the number in it), and
    for each key its packet, file, time and connection."""

    def __init__(self, rows: list[dict[str, Any]]) -> None:
        first: dict[str, float] = {}
        for r in rows:
            for f in r["packet_files"] or ():
                if r["ts"] == r["ts"]:  # not NaN
                    first[f] = min(first.get(f, r["ts"]), r["ts"])
        self.rank = {f: k for k, f in enumerate(sorted(first, key=lambda f: (first[f], f)))}
        self.where: dict[int, tuple[int, str, float, str]] = {}

    def keys(self, row: dict[str, Any]) -> tuple[int, ...]:
        out = []
        for number, file in zip(row["packets"] or (), row["packet_files"] or (), strict=True):
            key = (self.rank.get(file, 0) << _SHIFT) | number
            self.where.setdefault(key, (number, file, row["ts"], row["conn_id"]))
            out.append(key)
        return tuple(out)

    def row(self, server: str | None, conn_id: str | None, v: Verdict) -> dict[str, Any]:
        found = [self.where[k] for k in v.packets if k in self.where]
        return {"server": server, "conn_id": conn_id, "rule": v.rule,
                "asks": RULES.get(v.rule, ""), "status": v.status,
                "detail": v.detail, "packets": [w[0] for w in found],
                "packet_files": [w[1] for w in found], "packet_ts": [w[2] for w in found],
                "packet_conns": [w[3] for w in found]}


def _verdict_rows(rows: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    rows.sort(key=lambda r: (r["conn_id"], r["seq"]))
    packets = _Packets(rows)
    by_conn: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        by_conn.setdefault(r["conn_id"], []).append(r)
    for conn_id, mine in by_conn.items():
        conn = _connection(conn_id, mine, packets)
        if conn is not None:
            for v in check_connection(conn):
                yield packets.row(mine[0]["server"], conn_id, v)


def _connection(conn_id: str, rows: list[dict[str, Any]], packets: _Packets,
                ) -> Connection | None:
    """The connection as the checks see it, or ``None`` when it was not captured whole
    (no magic first, or bytes lost)."""
    units = [r for r in rows if r["kind"] in ("command", "frame")]
    if (not units or units[0]["name"] != COMMAND_NAMES[ev.Magic]
            or any(r["kind"] == "gap" for r in rows)):
        return None
    conn = Connection(conn_id.rsplit("@", 1)[0])
    for r in units:
        conn.seen.append(_seen(r, packets.keys(r)))
    ends = [r for r in rows if r["kind"] == "flow" and r["reason"] in ("fin", "rst")]
    if ends:
        conn.ended_by = "client" if ends[0]["dir"] == Direction.C2S else "server"
    return conn


def _seen(r: dict[str, Any], keys: tuple[int, ...]) -> Seen:
    """One row as the event the checks read: its values from the row's columns (a
    body is not kept: no check reads one)."""
    cls = _BY_NAME[r["name"]]
    mid = (r["msg_id"] or "").encode()
    text = r["data"] or ""
    event: ev.Event
    if cls is ev.Identify:
        event = ev.Identify(json.loads(text) if text else {})
    elif cls is ev.Sub:
        event = ev.Sub(r["topic"] or "", r["channel"] or "")
    elif cls is ev.Pub:
        event = ev.Pub(r["topic"] or "", b"")
    elif cls is ev.Mpub:
        event = ev.Mpub(r["topic"] or "", ())
    elif cls is ev.Dpub:
        event = ev.Dpub(r["topic"] or "", r["delay_ms"] or 0, b"")
    elif cls is ev.Auth:
        event = ev.Auth(b"")
    elif cls is ev.Rdy:
        event = ev.Rdy(r["count"] or 0)
    elif cls in (ev.Fin, ev.Touch):
        event = cls(mid)  # type: ignore[call-arg]
    elif cls is ev.Req:
        event = ev.Req(mid, r["delay_ms"] or 0)
    elif cls in (ev.Response, ev.Error):
        event = cls(text.encode())  # type: ignore[call-arg]
    elif cls is ev.Message:
        event = ev.Message(round((r["msg_ts"] or 0) * 1e9), r["attempts"] or 0, mid, b"")
    else:  # MAGIC, NOP, CLS
        event = cls()
    direction = Direction(r["dir"])
    code, answer = r["violation"], r["reason"]
    if code is not None and isinstance(event, ev.Command):
        text = answer or ""
        if code != "closes" and text.startswith(code + " "):
            text = text[len(code) + 1:]
        violation = ev.Violation("" if code == "closes" else code, text, True, command=event)
        return Seen(r["ts"], direction, event, keys, violation)
    return Seen(r["ts"], direction, event, keys, refused=answer or "")
