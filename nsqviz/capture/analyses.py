"""The analyses that know no protocol: what the capture layer records of every connection
and packet, and the tables every protocol shares (:mod:`nsqviz.sql` says how analyses
are defined and collected).

* ``packet_frames``, ``sticky_counts``, ``sticky_packets`` -- the frames each packet
  carried: several frames glued in one packet, one frame over several (粘包);
* ``answer_pairs`` -- each server answer its decoder paired with a command (the frames
  table's ``answers``: the command's number among its connection's commands), with that
  command: the one pairing every view that pairs reads;
* ``errors`` -- one row per error answer a server sent (each protocol's
  :class:`~nsqviz.sql.ErrorAnswers`): its code and text, the command it answers (or,
  where it answers bytes that were no command, their packet), and whether the server
  *closed* after it: no server frame follows it and the server's side ended (FIN or
  RST) first;
* ``problems`` -- one row per thing the decoder found wrong (:data:`~nsqviz.sql.
  PROBLEMS`): a command the server refuses as sent (its violation), bytes no protocol
  could decode, a unit the stream ended inside, bytes the capture lost and how decoding
  found the next unit -- nsqviz's findings, apart from what the servers said;
* ``connections`` -- one row per connection: its protocol (``NULL``: none recognised
  it), the TCP-level facts (when, how long, how much on the wire and in frames -- their
  ratio is compression's --, the server's errors and the decoder's problems, TLS, how it
  ended: FIN/RST, which side first, packet), then each protocol's columns for its own
  connections (:class:`~nsqviz.sql.ConnectionColumns`);
* ``published`` -- one row per message body published, over whatever protocol: each
  protocol's publishes (:class:`~nsqviz.sql.Publishes`), which the message views read;
* ``held`` -- what each protocol's servers hold for a client over time
  (:class:`~nsqviz.sql.Held`), which the capture layer's rules read (what waited behind
  a zero window);
* what the TCP layer flags, from :mod:`nsqviz.capture.tcp_views`: ``zero_windows``,
  ``retransmissions``, ``resets``, ``truncated``, ``midstream``, ``gaps``.

:func:`views` builds them for the registered protocols: the shared tables take each
protocol's hooks, so they name no protocol here.
"""

from __future__ import annotations

from collections.abc import Sequence

from nsqviz.capture.tcp_views import TCP_VIEWS
from nsqviz.sql import (
    ANSWER_PAIRS,
    C2S,
    CLOSED,
    COMMAND,
    FIRST_PACKET,
    FLOW_END,
    HELD,
    PROBLEMS,
    PUBLISHED,
    PUBLISHED_COLUMNS,
    S2C,
    UNITS,
    Analyses,
    View,
    quoted,
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
    "end_packet", "last_frame", "last_frame_packet", "errors", "error_codes", "problems",
    "tls", "duration_s",
)
"""The columns of ``connections`` every connection has, whatever its protocol; the
protocols' columns follow them."""

_ANSWER_PAIRS = f"""
WITH commands AS (
  SELECT conn_id, seq, ts, name, packets,
         row_number() OVER (PARTITION BY conn_id ORDER BY seq) AS number
  FROM frames WHERE conn_id IS NOT NULL AND dir = '{C2S}' AND {COMMAND}
)
SELECT a.conn_id, a.seq, a.ts, element_at(a.packets, 1) AS packet, a.name, a.response_to,
       c.seq AS command_seq, c.name AS command, c.ts AS command_ts,
       element_at(c.packets, 1) AS command_packet
FROM frames AS a JOIN commands AS c ON c.conn_id = a.conn_id AND c.number = a.answers
WHERE a.answers IS NOT NULL
"""


def _error_answers(analyses: Sequence[tuple[str, Analyses]]) -> tuple[str, str, str]:
    """SQL over a frames row, from the protocols' error hooks: whether it is a server's
    error answer, its code and its text."""
    answers = [(f"protocol = '{name}' AND ({a.errors.answer})", a.errors)
               for name, a in analyses if a.errors is not None]
    if not answers:
        return "false", "NULL", "NULL"
    is_error = " OR ".join(f"({when})" for when, _ in answers)
    code = "".join(f" WHEN {when} THEN {e.code}" for when, e in answers)
    text = "".join(f" WHEN {when} THEN {e.text}" for when, e in answers)
    return f"({is_error})", f"CASE{code} END", f"CASE{text} END"


def _errors(is_error: str, code: str, text: str) -> str:
    return f"""
WITH answers AS (
  SELECT conn_id, seq, ts, {FIRST_PACKET} AS packet, dir, kind, name, response_to,
         {code} AS code, {text} AS text
  FROM frames WHERE conn_id IS NOT NULL AND dir = '{S2C}' AND {is_error}
), later AS (
  SELECT conn_id, max(CASE WHEN dir = '{S2C}' AND {UNITS} THEN seq END) AS last_s2c,
         min_by(dir, seq) FILTER (WHERE {FLOW_END} AND {CLOSED}) AS closed_from
  FROM frames WHERE conn_id IS NOT NULL GROUP BY conn_id
)
SELECT e.conn_id, e.ts, e.packet, e.seq, e.dir, e.kind, e.name, e.code, e.text,
       p.command, p.command_seq, coalesce(p.command_packet, e.response_to) AS command_packet,
       coalesce(e.seq >= w.last_s2c AND w.closed_from = '{S2C}', false) AS closed
FROM answers AS e
LEFT JOIN {ANSWER_PAIRS} AS p ON p.conn_id = e.conn_id AND p.seq = e.seq
LEFT JOIN later AS w ON w.conn_id = e.conn_id
"""


_PROBLEMS = f"""
SELECT conn_id, ts, {FIRST_PACKET} AS packet, seq, dir, kind, name,
       coalesce(violation, name) AS problem, reason
FROM frames WHERE {PROBLEMS}
"""


def _connections(is_error: str, code: str, analyses: Sequence[tuple[str, Analyses]]) -> str:
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
         coalesce(dir = '{S2C}' AND {is_error}, false) AS is_error, {code} AS error_code,
         {PROBLEMS} AS is_problem
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
         CAST(sum(CASE WHEN is_problem THEN 1 ELSE 0 END) AS BIGINT) AS problems,
         bool_or(kind = 'tls') AS tls
  FROM marked GROUP BY conn_id
)
SELECT b.conn_id, b.flow, b.protocol, b.start_ts, b.end_ts, b.frames_c2s, b.frames_s2c,
       b.bytes_c2s, b.bytes_s2c, b.frame_bytes_c2s, b.frame_bytes_s2c, b.ended_by, b.ended_from,
       b.end_packet, b.last_frame, b.last_frame_packet, b.errors, b.error_codes,
       b.problems, b.tls,
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


def _held(analyses: Sequence[tuple[str, Analyses]]) -> str:
    """What every protocol's servers hold for their clients over time (no row when no
    protocol says)."""
    parts = [f"SELECT conn_id, ts, CAST({h.held} AS BIGINT) AS held, "
             f"CAST({h.allowed} AS BIGINT) AS allowed, {quoted([h.held_words])} AS "
             f"held_words, {quoted([h.allowed_words])} AS allowed_words FROM {h.view}"
             for h in (a.held for _, a in analyses) if h is not None]
    return "\nUNION ALL\n".join(parts) or (
        "SELECT CAST(NULL AS STRING) AS conn_id, CAST(NULL AS DOUBLE) AS ts, "
        "CAST(NULL AS BIGINT) AS held, CAST(NULL AS BIGINT) AS allowed, "
        "CAST(NULL AS STRING) AS held_words, CAST(NULL AS STRING) AS allowed_words "
        "FROM (SELECT 1 AS x) AS none WHERE x = 0")


def views(analyses: Sequence[tuple[str, Analyses]]) -> tuple[View, ...]:
    """The capture layer's views for protocols with these analyses (``(protocol name,
    its analyses)``, in registration order)."""
    is_error, code, text = _error_answers(analyses)
    published = _published(analyses)
    return (*([] if published is None else [View(PUBLISHED, published, """One row per
message body published, whatever protocol carried the publish (its ``protocol``): the
broker's host and, where the publish names it, its address, the topic, when, what
published it, on which connection and packet, and the body's sha1.""", step=True)]),
        View(HELD, _held(analyses), """One row per change of what a server holds for its
client, whatever the protocol: the connection, when, how many units the server awaits an
answer for and how many the client allows, with their names in the protocol's words.""",
             step=True),
        View("packet_frames", _PACKET_FRAMES, """One row per packet that carried frame
bytes: how many frames it carried (more than one: frames glued in one packet, 粘包). A
packet number is its own file's, as in Wireshark, so a packet is its connection's file
and number.""", step=True),
        View("sticky_counts", _STICKY_COUNTS, """The sticky-packet counts of the frames read
(a packet is one connection's, so the counts of several brokers add up).""", step=True),
        View("sticky_packets", _STICKY_PACKETS, """Distributions, per direction, of frames
per packet and packets per frame (粘包).""", across_servers=True),
        View(ANSWER_PAIRS, _ANSWER_PAIRS, """One row per server answer its decoder paired
with a command (the frames table's ``answers``): the answer (``seq``, packet, name, the
``response_to`` packet it names) and the command (``command_seq``, name, time, first
packet). Every view that pairs an answer with its command reads this."""),
        View("errors", _errors(is_error, code, text), """One row per error answer a server
sent: its code and text, the command it answers (``command``, ``command_seq`` and its
first packet; for an answer to bytes that were no command, ``command`` is null and
``command_packet`` the packet they ended in), and whether the server closed after it.
What nsqviz itself found wrong is in ``problems``."""),
        View("problems", _PROBLEMS, """One row per thing nsqviz found wrong, apart from
what the servers said (those are in ``errors``): a command the server refuses as it was
sent (``problem`` is the error code the server answers it with, ``closes`` where it just
closes), bytes that could not be decoded, a unit the stream ended inside, bytes the
capture lost (``Gap``: the snaplen's cuts too) and how decoding found the next unit
(``Resync``, ``Skipped``); ``reason`` says why. Rows of no connection are the capture
files' own damage."""),
        View("connections", _connections(is_error, code, analyses), """One row per
connection: when, how long, how much (bytes on the wire, and of the frames they carried),
the server's error answers (``errors``, ``error_codes``) and nsqviz's ``problems``, TLS,
and how it ended (FIN/RST, which side first, packet); then each protocol's columns for
its own connections (who, what, negotiated, ...; :data:`BASE_CONNECTION_COLUMNS` are
every connection's)."""),
        *TCP_VIEWS,
    )
