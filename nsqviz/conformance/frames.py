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
``max_in_flight`` is not on the wire), ``lookupd-polling`` a consumer's HTTP requests to
nsqlookupd: they are in the frames table (nsqlookupd's HTTP API is decoded), but nothing
in a ``/lookup`` request names the consumer whose NSQ connections it feeds.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from nsqviz.conformance.rules import (
    FAIL,
    MESSAGE_RULES,
    RULES,
    Connection,
    Seen,
    check_connection,
)
from nsqviz.nsq import events as ev
from nsqviz.nsq.commands import COMMAND_NAMES, FRAME_NAMES
from nsqviz.stream.direction import Direction

__all__ = ["COLUMNS", "INPUT", "failures", "schema", "verdicts"]

INPUT = ("server", "conn_id", "ts", "dir", "kind", "name", "packets", "file",
         "packet_files", "violation", "reason", "msg_id", "count", "delay_ms", "attempts",
         "msg_ts", "data", "topic", "channel")
"""The columns :func:`verdicts` reads, ordered by connection and ``seq``: a connection's
NSQ rows (commands, frames, gaps, flow ends) with its server."""

COLUMNS = ("server", "conn_id", "rule", "asks", "status", "detail", "packets",
           "packet_files")
"""A verdict: its server and connection, the guide's rule and what it asks,
``pass``/``fail``/``not exercised``, in words, and the packets that show it with each
one's file."""

_BY_NAME: dict[str, type[ev.Event]] = {
    **{name: cls for cls, name in COMMAND_NAMES.items()},
    **{name: cls for cls, name in FRAME_NAMES.items()},
}
_MAGIC = COMMAND_NAMES[ev.Magic]
_SHIFT = 32  # a packet's key: its file's rank above its number (numbers restart per file)
_LOW = (1 << _SHIFT) - 1


def schema() -> Any:
    import pyarrow as pa

    s = pa.string()
    return pa.schema([("server", s), ("conn_id", s), ("rule", s), ("asks", s), ("status", s),
                      ("detail", s), ("packets", pa.list_(pa.int64())),
                      ("packet_files", pa.list_(s))])


def verdicts(rows: Any) -> Any:
    """Every verdict of the client guide on the connections in ``rows`` (an Arrow table
    of :data:`INPUT`), as an Arrow table of :data:`COLUMNS`. The rows are read one
    connection at a time: what this holds in Python is one connection's."""
    return _table(_each(rows, lambda cols: None))


def failures(rows: Any) -> Any:
    """The failed verdicts of :func:`verdicts`, from fewer rows: ``rows`` has the
    columns of :data:`INPUT` and ``whole``. A connection whose rows are whole is judged
    on every rule; of one that is not, SQL found that no rule of :data:`~nsqviz.
    conformance.rules.MESSAGE_RULES` can fail on it and left out its messages and its
    answers nsqd took (its first and last events kept): it is judged on the other rules,
    which fail on what is left as on the whole connection (NSQ's ``guide_failures``
    view says when each of those can fail)."""
    every = None
    others = [r for r in RULES if r not in MESSAGE_RULES]
    return _table(row for row in _each(
        rows, lambda cols: every if cols["whole"][0] else others)
        if row["status"] == FAIL)


def _each(rows: Any, rules: Callable[[dict[str, list[Any]]], list[str] | None]
          ) -> Iterator[dict[str, Any]]:
    """The verdicts on each connection of ``rows``, on the ``rules`` chosen for it from
    its columns (``None``: all)."""
    import pyarrow.compute as pc

    files = _files(rows)
    if len(files) <= 1:  # one file: numbers are enough
        rows = rows.drop_columns(["packet_files"])
    start = 0
    ids = rows["conn_id"].combine_chunks()
    ends = pc.run_end_encode(ids).run_ends.to_pylist() if len(ids) else []
    for end in ends:
        connection = _Rows(rows.slice(start, end - start).to_pydict(), files)
        yield from _verdicts(connection, rules(connection.cols))
        start = end


def _table(rows: Iterable[dict[str, Any]]) -> Any:
    import pyarrow as pa

    out: dict[str, list[Any]] = {name: [] for name in COLUMNS}
    for row in rows:
        for name, column in out.items():
            column.append(row[name])
    return pa.Table.from_pydict(out, schema=schema())


def _files(rows: Any) -> list[str]:
    """The capture files of ``rows``' packets in the order their first packets were
    captured (a file's rank is its place here)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    listed = rows["packet_files"]
    flat = pc.list_flatten(listed)
    if not len(flat):
        return []
    when = pc.take(rows["ts"], pc.list_parent_indices(listed))
    first = pa.table({"file": flat, "ts": when}).group_by("file").aggregate([("ts", "min")])
    order = sorted(zip(first["file"].to_pylist(), first["ts_min"].to_pylist(), strict=True),
                   key=lambda ft: (ft[1], ft[0]))
    return [f for f, _ in order]


class _Rows:
    """One connection's rows (its columns), and packet keys that sort in capture order: a
    packet's file's rank above its number."""

    def __init__(self, cols: dict[str, list[Any]], files: list[str]) -> None:
        self.cols = cols
        self.files = files
        self.rank = {f: k for k, f in enumerate(files)}

    def keys(self, i: int) -> tuple[int, ...]:
        packets = self.cols["packets"][i] or ()
        if len(self.files) <= 1:  # one file: a packet's number is its key
            return tuple(packets)
        rank = self.rank
        return tuple((rank[f] << _SHIFT) | n
                     for n, f in zip(packets, self.cols["packet_files"][i], strict=True))

    def packets(self, keys: tuple[int, ...]) -> tuple[list[int], list[str]]:
        """Packet keys back as numbers, each with its file."""
        files = self.files or [""]
        return [k & _LOW for k in keys], [files[k >> _SHIFT] for k in keys]


def _verdicts(rows: _Rows, rules: list[str] | None) -> Iterator[dict[str, Any]]:
    """The verdicts on one connection (none when it was not captured whole), on
    ``rules`` (``None``: all)."""
    cols = rows.cols
    conn = _connection(rows, 0, len(cols["conn_id"]))
    if conn is None:
        return
    for v in check_connection(conn, rules):
        numbers, files = rows.packets(v.packets)
        yield {"server": cols["server"][0], "conn_id": cols["conn_id"][0], "rule": v.rule,
               "asks": RULES.get(v.rule, ""), "status": v.status, "detail": v.detail,
               "packets": numbers, "packet_files": files}


def _connection(rows: _Rows, start: int, end: int) -> Connection | None:
    """Rows ``start`` to ``end`` (one connection's) as the checks see them, or ``None``
    when it was not captured whole (no magic first, or bytes lost)."""
    cols = rows.cols
    kinds, names = cols["kind"][start:end], cols["name"][start:end]
    units = [k for k, kind in enumerate(kinds) if kind == "command" or kind == "frame"]
    if not units or names[units[0]] != _MAGIC or "gap" in kinds:
        return None
    conn = Connection(cols["conn_id"][start].rsplit("@", 1)[0])
    conn.seen = list(_seen(rows, start, end, units))
    reasons, dirs = cols["reason"][start:end], cols["dir"][start:end]
    for k, kind in enumerate(kinds):
        if kind == "flow" and reasons[k] in ("fin", "rst"):
            conn.ended_by = "client" if dirs[k] == Direction.C2S else "server"
            break
    return conn


def _seen(rows: _Rows, start: int, end: int, units: list[int]) -> Iterator[Seen]:
    """The units of rows ``start`` to ``end`` (at offsets ``units``) as the events the
    checks read, their values from the rows' columns (a body is not kept: no check reads
    one). The hot loop of the guide: each column sliced once."""
    cols = rows.cols
    names, msg_ids, data = (cols[c][start:end] for c in ("name", "msg_id", "data"))
    dirs, tss, codes, answers = (cols[c][start:end] for c in ("dir", "ts", "violation",
                                                                "reason"))
    msg_tss, attempts, counts, delays, topics, channels = (
        cols[c][start:end] for c in ("msg_ts", "attempts", "count", "delay_ms", "topic",
                                     "channel"))
    message, fin, seen, by_name = ev.Message, ev.Fin, Seen, _BY_NAME
    if len(rows.files) <= 1:  # one file: a packet's number is its key
        keys = [tuple(p or ()) for p in cols["packets"][start:end]]
    else:
        keys = [rows.keys(i) for i in range(start, end)]
    for k in units:
        cls = by_name[names[k]]
        event: ev.Event
        if cls is message:  # most of them, and their FINs: the hot path
            yield seen(tss[k], _S2C, message(round((msg_tss[k] or 0) * 1e9),
                                             attempts[k] or 0, msg_ids[k].encode(), b""),
                       keys[k])
            continue
        if cls is fin and codes[k] is None and answers[k] is None:
            yield seen(tss[k], _C2S, fin((msg_ids[k] or "").encode()), keys[k])
            continue
        if cls is ev.Fin or cls is ev.Touch:
            event = cls((msg_ids[k] or "").encode())
        elif cls is ev.Req:
            event = ev.Req((msg_ids[k] or "").encode(), delays[k] or 0)
        elif cls is ev.Rdy:
            event = ev.Rdy(counts[k] or 0)
        elif cls is ev.Response or cls is ev.Error:
            event = cls((data[k] or "").encode())
        elif cls is ev.Identify:
            event = ev.Identify(json.loads(data[k]) if data[k] else {})
        elif cls is ev.Sub:
            event = ev.Sub(topics[k] or "", channels[k] or "")
        elif cls is ev.Pub:
            event = ev.Pub(topics[k] or "", b"")
        elif cls is ev.Mpub:
            event = ev.Mpub(topics[k] or "", ())
        elif cls is ev.Dpub:
            event = ev.Dpub(topics[k] or "", delays[k] or 0, b"")
        elif cls is ev.Auth:
            event = ev.Auth(b"")
        else:  # MAGIC, NOP, CLS
            event = cls()
        direction = _C2S if dirs[k] == _C2S else _S2C
        code, answer = codes[k], answers[k]
        if code is not None and isinstance(event, ev.Command):
            words = answer or ""
            if code != "closes" and words.startswith(code + " "):
                words = words[len(code) + 1:]
            yield Seen(tss[k], direction, event, keys[k],
                       ev.Violation("" if code == "closes" else code, words, True,
                                    command=event))
        else:
            yield Seen(tss[k], direction, event, keys[k], refused=answer or "")


_C2S, _S2C = Direction.C2S, Direction.S2C
