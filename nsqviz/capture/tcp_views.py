"""The capture-level analyses: what the TCP layer knows of each connection, whatever its
protocol -- zero windows, retransmissions, resets, what the snaplen cut, connections
whose start was not captured, bytes never captured.

Each view is SQL over the frames table (:func:`nsqviz.records.frame_schema`), run by
both engines as every analysis is (:mod:`nsqviz.sql` says how; the capture layer's
:func:`nsqviz.capture.analyses.views` gives them with its others). They read the rows
the capture layer writes there (:mod:`nsqviz.capture.decode` with ``flow_records``): the
``tcp`` rows of Wireshark's TCP analysis (:mod:`nsqviz.capture.tcp_analysis`; their
columns :data:`nsqviz.records.TCP_COLUMNS`), the ``flow`` rows where connections start
and end, and the ``Gap`` rows. Each row is one connection's, so every view reads one
server's frames at a time (the pipeline analyses each broker apart).

A row's side is the side that sent its packets: ``client`` for ``c2s``, ``server`` for
``s2c``. Packet numbers are Wireshark's frame numbers, each in its own file (``files``
names the files when a capture set has several: the numbers restart in each).
"""

from __future__ import annotations

from nsqviz.sql import C2S, FIRST_PACKET, FLOW_END, UNITS, View

__all__ = ["TCP_VIEWS"]


def _side(column: str) -> str:
    """The side (``client``/``server``) that sent a direction's packets."""
    return f"CASE WHEN {column} = '{C2S}' THEN 'client' ELSE 'server' END"


def _other_side(column: str) -> str:
    return f"CASE WHEN {column} = '{C2S}' THEN 'server' ELSE 'client' END"


_ZERO_WINDOWS = f"""
WITH ev AS (
  SELECT conn_id, flow, dir, seq, ts, name, {FIRST_PACKET} AS packet,
         element_at(packet_files, 1) AS file, tcp_since, tcp_acked, tcp_in_flight,
         tcp_probes,
         coalesce(sum(CASE WHEN name = 'WindowOpen' THEN 1 ELSE 0 END) OVER (
           PARTITION BY conn_id, dir ORDER BY seq
           ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS period
  FROM frames WHERE kind = 'tcp' AND name IN ('ZeroWindow', 'WindowOpen')
), periods AS (
  SELECT conn_id, dir, period, min(flow) AS flow,
         min_by(packet, seq) FILTER (WHERE name = 'ZeroWindow') AS from_packet,
         min_by(file, seq) FILTER (WHERE name = 'ZeroWindow') AS from_file,
         min(ts) FILTER (WHERE name = 'ZeroWindow') AS from_ts,
         max_by(packet, seq) FILTER (WHERE name = 'WindowOpen') AS to_packet,
         max(ts) FILTER (WHERE name = 'WindowOpen') AS to_ts,
         CAST(count(*) FILTER (WHERE name = 'ZeroWindow') AS BIGINT) AS zero_window_packets,
         array_sort(collect_list(packet) FILTER (WHERE name = 'ZeroWindow')) AS packets,
         max(tcp_probes) AS probes,
         min_by(tcp_acked, seq) FILTER (WHERE name = 'ZeroWindow') AS acked,
         min_by(tcp_in_flight, seq) FILTER (WHERE name = 'ZeroWindow') AS bytes_in_flight
  FROM ev GROUP BY conn_id, dir, period
), ends AS (
  SELECT conn_id, min_by(reason, seq) AS ended_by, min(ts) AS end_ts
  FROM frames WHERE {FLOW_END} GROUP BY conn_id
), held AS (
  SELECT p.conn_id, p.dir, p.period, CAST(count(f.seq) AS BIGINT) AS frames_in_flight
  FROM periods AS p LEFT JOIN frames AS f
    ON f.conn_id = p.conn_id AND f.dir <> p.dir AND f.{UNITS}
       AND f.offset + f.size > p.acked AND f.offset < p.acked + p.bytes_in_flight
  GROUP BY p.conn_id, p.dir, p.period
)
SELECT p.conn_id, p.flow, p.dir, {_side('p.dir')} AS stopped_reading,
       {_other_side('p.dir')} AS waiting, p.from_packet, p.from_file, p.from_ts, p.to_packet,
       p.to_ts, CASE WHEN p.to_ts IS NOT NULL THEN 'reopened' ELSE e.ended_by END AS until,
       coalesce(p.to_ts, e.end_ts) - p.from_ts AS duration_s, p.zero_window_packets,
       p.packets, p.probes, p.acked, p.bytes_in_flight, h.frames_in_flight
FROM periods AS p
LEFT JOIN ends AS e ON e.conn_id = p.conn_id
LEFT JOIN held AS h ON h.conn_id = p.conn_id AND h.dir = p.dir AND h.period = p.period
WHERE p.from_packet IS NOT NULL
"""


_RETRANSMISSIONS = f"""
SELECT conn_id, min(flow) AS flow, dir, {_side('dir')} AS sender,
       CAST(count(*) FILTER (WHERE reason <> 'out-of-order') AS BIGINT) AS retransmissions,
       CAST(count(*) FILTER (WHERE reason = 'fast retransmission') AS BIGINT) AS fast,
       CAST(count(*) FILTER (WHERE reason = 'spurious retransmission') AS BIGINT) AS spurious,
       CAST(count(*) FILTER (WHERE reason = 'out-of-order') AS BIGINT) AS out_of_order,
       CAST(coalesce(sum(size) FILTER (WHERE reason <> 'out-of-order'), 0) AS BIGINT)
         AS bytes,
       coalesce(array_sort(collect_list({FIRST_PACKET})
                           FILTER (WHERE reason <> 'out-of-order')), array()) AS packets,
       coalesce(array_sort(collect_list({FIRST_PACKET})
                           FILTER (WHERE reason = 'out-of-order')), array())
         AS out_of_order_packets,
       array_sort(collect_set(element_at(packet_files, 1))) AS files,
       min(ts) AS first_ts, max(ts) AS last_ts
FROM frames WHERE kind = 'tcp' AND name = 'Retransmission'
GROUP BY conn_id, dir
"""


_RESETS = f"""
WITH r AS (
  SELECT conn_id, flow, dir, seq, ts, {FIRST_PACKET} AS packet,
         element_at(packet_files, 1) AS file, reason, tcp_in_flight, tcp_unacked, tcp_since
  FROM frames WHERE kind = 'tcp' AND name = 'RST'
), last_frames AS (
  SELECT r.conn_id, r.seq, max_by(f.name, f.seq) AS after_frame,
         max_by(element_at(f.packets, 1), f.seq) AS after_frame_packet,
         max_by(f.dir, f.seq) AS after_frame_dir
  FROM r JOIN frames AS f ON f.conn_id = r.conn_id AND f.seq < r.seq AND f.{UNITS}
  GROUP BY r.conn_id, r.seq
)
SELECT r.conn_id, r.flow, r.packet, r.file, r.ts, r.dir, {_side('r.dir')} AS sender,
       r.reason AS at, b.after_frame, b.after_frame_packet,
       CASE WHEN b.after_frame_dir IS NOT NULL THEN {_side('b.after_frame_dir')} END
         AS after_frame_from,
       r.tcp_in_flight AS bytes_in_flight, r.tcp_unacked AS bytes_unacked,
       r.tcp_since AS stopped_reading_since
FROM r LEFT JOIN last_frames AS b ON b.conn_id = r.conn_id AND b.seq = r.seq
"""


_TRUNCATED = """
SELECT conn_id, min(flow) AS flow, CAST(sum(size(packets)) AS BIGINT) AS packets_cut,
       array_sort(flatten(collect_list(packets))) AS packets,
       array_sort(collect_set(element_at(packet_files, 1))) AS files,
       CAST(sum(size) AS BIGINT) AS bytes_sent,
       CAST(sum(tcp_cut_bytes) AS BIGINT) AS bytes_cut
FROM frames WHERE kind = 'tcp' AND name = 'Truncated'
GROUP BY conn_id
"""


_MIDSTREAM = f"""
WITH starts AS (
  SELECT conn_id, flow, ts, {FIRST_PACKET} AS first_packet,
         element_at(packet_files, 1) AS file
  FROM frames WHERE kind = 'flow' AND name = 'FlowStart' AND reason = 'midstream'
), idle AS (
  SELECT flow, max(ts) AS ts FROM frames
  WHERE kind = 'flow' AND name = 'FlowEnd' AND reason = 'idle' GROUP BY flow
), protos AS (
  SELECT conn_id, min(protocol) AS protocol FROM frames GROUP BY conn_id
)
SELECT s.conn_id, s.flow, p.protocol, s.ts AS start_ts, s.first_packet, s.file,
       CASE WHEN i.ts IS NOT NULL AND i.ts <= s.ts THEN 'idle split'
            ELSE 'capture started after it' END AS why
FROM starts AS s
LEFT JOIN idle AS i ON i.flow = s.flow
LEFT JOIN protos AS p ON p.conn_id = s.conn_id
"""


_GAPS = f"""
SELECT conn_id, min(flow) AS flow, dir, {_side('dir')} AS sender,
       CAST(count(*) AS BIGINT) AS holes, CAST(sum(size) AS BIGINT) AS bytes,
       CAST(sum(coalesce(tcp_cut_bytes, 0)) AS BIGINT) AS snaplen_bytes,
       CAST(sum(size - coalesce(tcp_cut_bytes, 0)) AS BIGINT) AS lost_bytes,
       array_sort(collect_list({FIRST_PACKET})) AS packets,
       coalesce(array_sort(collect_list({FIRST_PACKET})
                           FILTER (WHERE size > coalesce(tcp_cut_bytes, 0))), array())
         AS lost_packets,
       array_sort(collect_set(element_at(packet_files, 1))) AS files,
       min(ts) AS first_ts, max(ts) AS last_ts
FROM frames WHERE kind = 'gap' AND name = 'Gap'
GROUP BY conn_id, dir
"""


TCP_VIEWS = (
    View("zero_windows", _ZERO_WINDOWS, """One row per zero-window period: a side stopped
reading (its packets announced a window of 0, Wireshark's ``tcp.analysis.zero_window``)
from packet ``from_packet`` until ``to_packet`` announced a window again -- or ``until``
the connection ended so (``fin``, ``rst``, ``idle``, ``capture`` ...) -- over
``duration_s``; the ``zero_window_packets`` (``packets``), the other side's window
``probes``, and what waited when the window closed: the other direction's stream offset
``acked``, the ``bytes_in_flight`` sent beyond it, and the ``frames_in_flight`` -- the
other side's frames the window caught midway: begun (a byte of them sent) but not all
acknowledged."""),
    View("retransmissions", _RETRANSMISSIONS, """One row per connection and direction with
segments Wireshark calls retransmissions (``tcp.analysis.retransmission``: the plain,
``fast`` and ``spurious`` ones, with the payload ``bytes`` they carried and their
``packets``) or out-of-order (``tcp.analysis.out_of_order``), sent by ``sender``."""),
    View("resets", _RESETS, """One row per RST: its packet, the side that sent it (its
packet's direction), ``at`` (``mid-session``, or ``at close`` when a FIN came first), the
last frame before it (``after_frame``, its packet and sender), the other side's
``bytes_in_flight`` that the sender never acknowledged (lost with the connection), the
sender's own ``bytes_unacked``, and ``stopped_reading_since``: when the sender's window
closed, when it reset with its receive buffer full of bytes it never read."""),
    View("truncated", _TRUNCATED, """One row per connection with packets the snaplen cut:
how many (``packets``), the payload bytes they carried on the wire (``bytes_sent``) and
how many of those the capture did not keep (``bytes_cut``)."""),
    View("midstream", _MIDSTREAM, """One row per connection whose start the capture does
not show (no SYN): it had begun before the capture did, or it went on after a silence
longer than the idle split, which ended the connection before it on its 4-tuple
(``why``)."""),
    View("gaps", _GAPS, """One row per connection and direction with bytes missing from
the capture: the ``holes``, their ``bytes``, how many of those the snaplen cut
(``snaplen_bytes``, the ``truncated`` view's) and how many were never captured at all
(``lost_bytes``: dropped by the capturing kernel, or sent before the capture began);
``packets`` are those past each hole, else where it became certain (``lost_packets``: of
the holes with lost bytes)."""),
)
"""The capture layer's TCP views (each reads ``frames`` only)."""
