"""The analyses that know no protocol: what the capture layer records of every connection
and packet, and the tables every protocol shares (:mod:`nsqviz.sql` says how analyses
are defined and collected).

* ``packet_frames``, ``sticky_counts``, ``sticky_packets`` -- the frames each packet
  carried: several frames glued in one packet, one frame over several (粘包);
* ``errors`` -- one row per error: bytes a protocol's decoder could not read, bytes the
  capture lost, and each protocol's error answers (:class:`~nsqviz.sql.ErrorAnswers`).
  An error the server sent answers the last command before it on its connection that
  it names (its protocol says how an answer names one), else the last thing the client
  sent (a command, or input the decoder could not read); an error the decoder found in
  the client's bytes answers nothing; the server *closed* after an error when no server
  frame follows it and the server's side ended (FIN or RST) first;
* ``connections`` -- one row per connection: its protocol (``NULL``: none recognised
  it), the TCP-level facts (when, how long, how much on the wire and in frames -- their
  ratio is compression's --, errors, TLS, how it ended: FIN/RST, which side first,
  packet), then each protocol's columns for its own connections
  (:class:`~nsqviz.sql.ConnectionColumns`);
* ``published`` -- one row per message body published, over whatever protocol: each
  protocol's publishes (:class:`~nsqviz.sql.Publishes`), which the message views read;
* what the TCP layer flags, from :mod:`nsqviz.capture.tcp_views`: ``zero_windows``,
  ``retransmissions``, ``resets``, ``truncated``, ``midstream``, ``gaps``.

:func:`views` builds them for the registered protocols: the shared tables take each
protocol's hooks, so they name no protocol here.
"""

from __future__ import annotations

from collections.abc import Sequence

from nsqviz.capture.tcp_views import TCP_VIEWS
from nsqviz.sql import (
    C2S,
    CLOSED,
    COMMAND,
    FIRST_PACKET,
    FLOW_END,
    PROBLEMS,
    PUBLISHED,
    PUBLISHED_COLUMNS,
    S2C,
    UNITS,
    Analyses,
    View,
)

__all__ = ["BASE_CONNECTION_COLUMNS", "views"]

_PACKET_FRAMES = f"""
SELECT dir, conn_id, element_at(packet_files, i) AS file, element_at(packets, i) AS packet,
       CAST(count(*) AS INT) AS frames
FROM (SELECT dir, conn_id, packet_files, packets, explode(sequence(1, size(packets))) AS i
      FROM frames WHERE {UNITS} AND size(packets) > 0) AS x
GROUP BY dir, conn_id, element_at(packet_files, i), element_at(packets, i)
"""

_STICKY_COUNTS = f"""
SELECT dir, 'packets_per_frame' AS measure, CAST(size(packets) AS INT) AS n, count(*) AS count
FROM frames WHERE {UNITS} GROUP BY dir, size(packets)
UNION ALL
SELECT dir, 'frames_per_packet' AS measure, frames AS n, count(*) AS count
FROM packet_frames GROUP BY dir, frames
"""

_STICKY_PACKETS = """
SELECT dir, measure, n, CAST(sum(count) AS BIGINT) AS count
FROM sticky_counts GROUP BY dir, measure, n
"""

BASE_CONNECTION_COLUMNS = (
    "conn_id", "flow", "protocol", "start_ts", "end_ts", "frames_c2s", "frames_s2c",
    "bytes_c2s", "bytes_s2c", "frame_bytes_c2s", "frame_bytes_s2c", "ended_by", "ended_from",
    "end_packet", "last_frame", "last_frame_packet", "errors", "error_codes", "tls",
    "duration_s",
)
"""The columns of ``connections`` every connection has, whatever its protocol; the
protocols' columns follow them."""


def _error_marks(analyses: Sequence[tuple[str, Analyses]]) -> str:
    """Three columns for a frames row, from the protocols' error hooks: ``is_error``,
    ``error_code`` (the server's code, else the record's name) and ``error_names`` (the
    verb an error answer names)."""
    answers = [(f"protocol = '{name}' AND ({a.errors.answer})", a.errors)
               for name, a in analyses if a.errors is not None]
    is_error = " OR ".join([PROBLEMS, *(f"({when})" for when, _ in answers)])
    code = "".join(f" WHEN {when} THEN {e.code}" for when, e in answers)
    names = "".join(f" WHEN {when} THEN {e.names}" for when, e in answers)
    return (f"({is_error}) AS is_error,\n"
            f"         {f'CASE{code} ELSE name END' if code else 'name'} AS error_code,\n"
            f"         {f'CASE{names} END' if names else 'NULL'} AS error_names")


def _errors(marks: str) -> str:
    return f"""
WITH marked AS (
  SELECT conn_id, seq, ts, {FIRST_PACKET} AS packet, dir, kind, name, data, reason,
         {marks}
  FROM frames WHERE conn_id IS NOT NULL
), ev AS (
  SELECT *,
         CASE WHEN dir = '{S2C}' AND is_error THEN 'E' ELSE 'C' END AS t,
         CASE WHEN dir = '{S2C}' AND is_error THEN error_names ELSE name END AS verb
  FROM marked WHERE is_error OR {COMMAND}
), linked AS (
  SELECT *,
         max(CASE WHEN t = 'C' AND dir = '{C2S}' THEN seq END) OVER (
           PARTITION BY conn_id, verb ORDER BY seq
           ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS named_seq,
         max(CASE WHEN t = 'C' AND dir = '{C2S}' THEN seq END) OVER (
           PARTITION BY conn_id ORDER BY seq
           ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS last_seq
  FROM ev
), later AS (
  SELECT conn_id, max(CASE WHEN dir = '{S2C}' AND {UNITS} THEN seq END) AS last_s2c,
         min_by(dir, seq) FILTER (WHERE {FLOW_END} AND {CLOSED}) AS closed_from
  FROM frames WHERE conn_id IS NOT NULL GROUP BY conn_id
)
SELECT l.conn_id, l.ts, l.packet, l.seq, l.dir, l.kind, l.name, l.error_code AS code,
       coalesce(l.data, l.reason) AS text,
       c.name AS command, element_at(c.packets, 1) AS command_packet,
       coalesce(l.dir = '{S2C}' AND l.seq >= w.last_s2c AND w.closed_from = '{S2C}', false)
         AS closed
FROM linked AS l
LEFT JOIN frames AS c ON c.conn_id = l.conn_id AND l.t = 'E'
  AND c.seq = coalesce(l.named_seq, l.last_seq)
LEFT JOIN later AS w ON w.conn_id = l.conn_id
WHERE l.is_error
"""


def _connections(marks: str, analyses: Sequence[tuple[str, Analyses]]) -> str:
    joins = []
    given: dict[str, list[str]] = {}
    defaults: dict[str, str | None] = {}
    for k, (name, a) in enumerate(analyses):
        if a.connections is None:
            continue
        alias = f"p{k}"
        joins.append(f"LEFT JOIN {a.connections.view} AS {alias} "
                     f"ON b.conn_id = {alias}.conn_id")
        for column, default in a.connections.columns:
            if column in BASE_CONNECTION_COLUMNS:
                raise ValueError(f"{name}: {column!r} is a column every connection has")
            if defaults.setdefault(column, default) != default:
                raise ValueError(f"{name}: column {column!r} has another default in a "
                                 "protocol registered before")
            given.setdefault(column, []).append(f"{alias}.{column}")
    protocol_columns = "".join(
        f",\n       {_first(values, defaults[c])} AS {c}" for c, values in given.items())
    return f"""
WITH marked AS (
  SELECT conn_id, flow, protocol, ts, seq, dir, kind, name, size, reason, packets,
         {marks}
  FROM frames WHERE conn_id IS NOT NULL
), base AS (
  SELECT conn_id, min(flow) AS flow, max(protocol) AS protocol, min(ts) AS start_ts,
         max(ts) AS end_ts,
         CAST(sum(CASE WHEN {UNITS} AND dir = '{C2S}' THEN 1 ELSE 0 END) AS BIGINT)
           AS frames_c2s,
         CAST(sum(CASE WHEN {UNITS} AND dir = '{S2C}' THEN 1 ELSE 0 END) AS BIGINT)
           AS frames_s2c,
         CAST(sum(CASE WHEN {UNITS} AND dir = '{C2S}' THEN size ELSE 0 END) AS BIGINT)
           AS frame_bytes_c2s,
         CAST(sum(CASE WHEN {UNITS} AND dir = '{S2C}' THEN size ELSE 0 END) AS BIGINT)
           AS frame_bytes_s2c,
         max(size) FILTER (WHERE {FLOW_END} AND dir = '{C2S}') AS bytes_c2s,
         max(size) FILTER (WHERE {FLOW_END} AND dir = '{S2C}') AS bytes_s2c,
         min_by(reason, seq) FILTER (WHERE {FLOW_END}) AS ended_by,
         min_by(dir, seq) FILTER (WHERE {FLOW_END}) AS ended_from,
         min_by({FIRST_PACKET}, seq) FILTER (WHERE {FLOW_END}) AS end_packet,
         max_by(name, seq) FILTER (WHERE {UNITS}) AS last_frame,
         max_by({FIRST_PACKET}, seq) FILTER (WHERE {UNITS}) AS last_frame_packet,
         CAST(sum(CASE WHEN is_error THEN 1 ELSE 0 END) AS BIGINT) AS errors,
         coalesce(array_sort(collect_set(error_code) FILTER (WHERE is_error)), array())
           AS error_codes,
         bool_or(kind = 'tls') AS tls
  FROM marked GROUP BY conn_id
)
SELECT b.conn_id, b.flow, b.protocol, b.start_ts, b.end_ts, b.frames_c2s, b.frames_s2c,
       b.bytes_c2s, b.bytes_s2c, b.frame_bytes_c2s, b.frame_bytes_s2c, b.ended_by, b.ended_from,
       b.end_packet, b.last_frame, b.last_frame_packet, b.errors, b.error_codes, b.tls,
       b.end_ts - b.start_ts AS duration_s{protocol_columns}
FROM base AS b
{chr(10).join(joins)}
"""


def _first(values: list[str], default: str | None) -> str:
    """The value of the protocols that give a column (one of them has the connection),
    else the default."""
    parts = [*values, default] if default is not None else values
    return parts[0] if len(parts) == 1 else f"coalesce({', '.join(parts)})"


def _published(analyses: Sequence[tuple[str, Analyses]]) -> str | None:
    """Every protocol's publishes, with the protocol's name (``None``: no protocol
    publishes)."""
    columns = ", ".join(PUBLISHED_COLUMNS)
    parts = [f"SELECT '{name}' AS protocol, {columns} FROM {a.publishes.view}"
             for name, a in analyses if a.publishes is not None]
    return "\nUNION ALL\n".join(parts) if parts else None


def views(analyses: Sequence[tuple[str, Analyses]]) -> tuple[View, ...]:
    """The capture layer's views for protocols with these analyses (``(protocol name,
    its analyses)``, in registration order)."""
    marks = _error_marks(analyses)
    published = _published(analyses)
    return (*([] if published is None else [View(PUBLISHED, published, """One row per
message body published, whatever protocol carried the publish (its ``protocol``): the
broker's host and, where the publish names it, its address, the topic, when, what
published it, on which connection and packet, and the body's sha1.""", step=True)]),
        View("packet_frames", _PACKET_FRAMES, """One row per packet that carried frame
bytes: how many frames it carried (more than one: frames glued in one packet, 粘包). A
packet number is its own file's, as in Wireshark, so a packet is its connection's file
and number.""", step=True),
        View("sticky_counts", _STICKY_COUNTS, """The sticky-packet counts of the frames read
(a packet is one connection's, so the counts of several brokers add up).""", step=True),
        View("sticky_packets", _STICKY_PACKETS, """Distributions, per direction, of frames
per packet and packets per frame (粘包).""", across_servers=True),
        View("errors", _errors(marks), """One row per error (the servers' error answers,
and what the decoders found wrong or the capture lost): its code, the command it answers
(with its packet), and whether the server closed after it."""),
        View("connections", _connections(marks, analyses), """One row per connection: when,
how long, how much (bytes on the wire, and of the frames they carried), errors, TLS, and
how it ended (FIN/RST, which side first, packet); then each protocol's columns for its
own connections (who, what, negotiated, ...; :data:`BASE_CONNECTION_COLUMNS` are every
connection's)."""),
        *TCP_VIEWS,
    )
