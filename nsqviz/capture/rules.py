"""The doctor's rules about the TCP layer and the capture itself, whatever the protocol
(:mod:`nsqviz.doctor` says what a rule is and how to add one), over the capture layer's
TCP views (:mod:`nsqviz.capture.tcp_views`: ``resets``, ``retransmissions``,
``zero_windows``, ``truncated``, ``midstream``, ``gaps``) and the frames table's rows
they are built from -- the ``tcp`` rows of Wireshark's TCP analysis
(:mod:`nsqviz.capture.tcp_analysis`), each connection's start (``FlowStart``, its reason
``syn`` or ``midstream``) and the bytes reassembly could not give (``Gap``):

* ``capture.midstream`` -- connections whose start was not captured: no SYN, so the
  magic, IDENTIFY or registration that says what the connection is may be missing, and
  the first frames are found by resynchronising;
* ``capture.truncated`` -- packets the snaplen cut: the bytes past it were never in the
  capture file (``tcpdump -s``), so bodies, ids and JSON are partly unknown;
* ``capture.gap`` -- bytes the capture lost (the receiver acknowledged them, the
  connection ended past them) and not by the snaplen: the kernel or tcpdump dropped
  packets; whatever they carried is not in any table;
* ``tcp.reset`` -- a connection ended by a RST, and which side sent it;
* ``tcp.retransmission`` -- segments Wireshark calls retransmissions, at least
  :data:`RETRANSMISSIONS` on a connection;
* ``tcp.zero-window`` -- a side that stopped reading: its receive window stayed at 0 for
  at least :data:`ZERO_WINDOW_S`, the other side's bytes waiting behind it -- and, for a
  client, what its server held for it meanwhile, in its protocol's words (the shared
  ``held`` table, :class:`~nsqviz.sql.Held`: NSQ's messages in flight and RDY).
"""

from __future__ import annotations

from nsqviz.doctor.rule import FRAME_FILES, Rule, Severity, Threshold, evidence, figures
from nsqviz.sql import C2S, FLOW_END, HELD, S2C, UNITS

__all__ = ["RETRANSMISSIONS", "RULES", "ZERO_WINDOW_S"]

_LOST = "kind = 'gap' AND name = 'Gap' AND size > coalesce(tcp_cut_bytes, 0)"
"""SQL: a row of bytes missing from a connection's stream that the snaplen did not cut
(the ``gaps`` view's ``lost_bytes``)."""


def _server(conn_id: str) -> str:
    return f"split_part(split_part({conn_id}, '->', 2), '@', 1)"


_MIDSTREAM = f"""
WITH starts AS (
  SELECT conn_id, start_ts AS ts, first_packet AS packet, why FROM midstream
), firsts AS (
  -- the first frame each direction decoded: where reading could start
  SELECT s.conn_id, f.dir, min_by(f.ts, f.seq) AS ts,
         min_by(element_at(f.packets, 1), f.seq) AS packet, min_by(f.name, f.seq) AS name,
         min(f.protocol) AS protocol
  FROM starts AS s JOIN frames AS f ON f.conn_id = s.conn_id AND f.{UNITS}
  GROUP BY s.conn_id, f.dir
), ev_rows AS (
  SELECT conn_id AS k, ts, packet, conn_id, CAST(NULL AS STRING) AS msg_id,
         'the connection''s first packet in the capture: no SYN (' || why || ')' AS what
  FROM starts
  UNION ALL
  SELECT conn_id, ts, packet, conn_id, NULL,
         'the first ' || CASE WHEN dir = '{C2S}' THEN 'client' ELSE 'server' END
           || ' frame read: ' || name
  FROM firsts
), evd AS ({evidence("ev_rows", ("k",))}
)
SELECT {_server("s.conn_id")} AS server, s.conn_id, e.first_ts AS ts, e.evidence,
       {figures("packet", "protocol")} AS figures
FROM (SELECT s.*, p.protocol FROM starts AS s
      LEFT JOIN (SELECT conn_id, min(protocol) AS protocol FROM firsts GROUP BY conn_id)
        AS p ON p.conn_id = s.conn_id) AS s
JOIN evd AS e ON e.k = s.conn_id
"""

MIDSTREAM = Rule(
    "capture.midstream", "connections whose start was not captured",
    Severity.INFO, _MIDSTREAM,
    summary="the capture starts inside this connection (its first packet, {packet}, is "
            "no SYN)",
    explanation="The capture began after the connection was opened, so its handshake -- "
                "the magic, IDENTIFY and its answer (what was negotiated: heartbeats, "
                "msg_timeout, compression), a registration -- is not in it. nsqviz found "
                "the first whole frame of each direction by resynchronising; what the "
                "handshake would have said is unknown, and the tables count only what "
                "came after.",
    change="Start the capture before the clients connect (or restart them after it "
           "starts) to see the whole connection; tell decode the server's port "
           "(--port) when its side cannot be told without the SYN.",
)

_TRUNCATED = f"""
WITH per AS (
  SELECT {_server("conn_id")} AS server, CAST(sum(packets_cut) AS BIGINT) AS packets_cut,
         CAST(sum(bytes_cut) AS BIGINT) AS bytes_cut,
         CAST(count(DISTINCT conn_id) AS BIGINT) AS connections
  FROM truncated GROUP BY {_server("conn_id")}
), cut AS (
  SELECT conn_id, explode(packets) AS packet FROM frames
  WHERE kind = 'tcp' AND name = 'Truncated'
), ev_rows AS (
  -- each cut packet at the time of the first frame it carried
  SELECT {_server("c.conn_id")} AS k, min(f.ts) AS ts, c.packet, c.conn_id,
         CAST(NULL AS STRING) AS msg_id, 'cut short by the snaplen' AS what
  FROM cut AS c JOIN {FRAME_FILES} AS f ON f.conn_id = c.conn_id AND f.packet = c.packet
  GROUP BY c.conn_id, c.packet
), evd AS ({evidence("ev_rows", ("k",))}
)
SELECT p.server, CAST(NULL AS STRING) AS conn_id, e.first_ts AS ts, e.evidence,
       {figures("packets_cut", "bytes_cut", "connections")} AS figures
FROM per AS p JOIN evd AS e ON e.k = p.server
"""

TRUNCATED = Rule(
    "capture.truncated", "packets cut short by the capture's snaplen",
    Severity.WARNING, _TRUNCATED,
    summary="{packets_cut:/packet/packets} cut short by the capture's snaplen: "
            "{bytes_cut} bytes of {connections:/connection/connections} never captured",
    explanation="The capture kept only the first bytes of each packet (its snaplen), so "
                "frames longer than that are known by their start only: message bodies, "
                "IDENTIFY's JSON, the ids and sizes of what followed in the same packet. "
                "nsqviz decodes each cut frame as far as it was captured and finds the next "
                "one from the size prefix; figures that need the lost bytes (bodies, "
                "compression, the client guide's checks on cut frames) are not reliable.",
    change="Capture whole packets: tcpdump -s 0 (its default since 4.0 is 262144 bytes), "
           "or a snaplen above the largest frame you need to read.",
)

_GAP_SQL = f"""
WITH holes AS (
  SELECT conn_id, seq, dir, ts, element_at(packets, 1) AS packet,
         size - coalesce(tcp_cut_bytes, 0) AS size
  FROM frames WHERE {_LOST}
), after AS (
  -- the first frame captured after each hole, in its direction
  SELECT h.conn_id, h.seq, min_by(f.ts, f.seq) AS ts,
         min_by(element_at(f.packets, 1), f.seq) AS packet
  FROM holes AS h JOIN frames AS f ON f.conn_id = h.conn_id AND f.dir = h.dir
   AND f.seq > h.seq AND f.{UNITS} AND size(f.packets) > 0
  GROUP BY h.conn_id, h.seq
), per AS (
  SELECT conn_id, CAST(sum(size(lost_packets)) AS BIGINT) AS holes,
         CAST(sum(lost_bytes) AS BIGINT) AS bytes,
         CAST(sum(CASE WHEN dir = '{C2S}' THEN lost_bytes ELSE 0 END) AS BIGINT)
           AS client_bytes,
         CAST(sum(CASE WHEN dir = '{S2C}' THEN lost_bytes ELSE 0 END) AS BIGINT)
           AS server_bytes
  FROM gaps GROUP BY conn_id HAVING sum(lost_bytes) > 0
), ev_rows AS (
  SELECT conn_id AS k, ts, packet, conn_id, CAST(NULL AS STRING) AS msg_id,
         CAST(size AS STRING) || ' bytes the '
           || CASE WHEN dir = '{C2S}' THEN 'client' ELSE 'server' END
           || ' sent are not in the capture' AS what
  FROM holes
  UNION ALL
  SELECT conn_id, ts, packet, conn_id, NULL, 'the first frame captured after the hole'
  FROM after
), evd AS ({evidence("ev_rows", ("k",))}
)
SELECT {_server("p.conn_id")} AS server, p.conn_id, e.first_ts AS ts, e.evidence,
       {figures("holes", "bytes", "client_bytes", "server_bytes")} AS figures
FROM per AS p JOIN evd AS e ON e.k = p.conn_id
"""

GAP = Rule(
    "capture.gap", "bytes of a connection never captured",
    Severity.WARNING, _GAP_SQL,
    summary="{bytes} bytes in {holes:/hole/holes} never captured (client {client_bytes}, "
            "server {server_bytes})",
    explanation="The connection carried bytes the capture does not have: the receiver "
                "acknowledged them, or the connection ended past them, yet no packet of "
                "them was recorded -- the kernel dropped them when the capture tool fell "
                "behind (its buffer full), or the capture point did not see them. Every "
                "frame in a hole is missing from every table: messages, answers, RDY "
                "changes; nsqviz resynchronises after each hole and counts only what it "
                "could read.",
    change="Give the capture a bigger buffer (tcpdump -B, in KiB), write to a fast disk, "
           "filter to the ports you need, and capture on the host itself rather than a "
           "mirror port that drops under load.",
)

_RESET = f"""
WITH rst AS (
  -- the first RST of each connection (a RST ends it: a second is a late packet)
  SELECT conn_id, min(ts) AS ts, min_by(packet, ts) AS packet, min_by(dir, ts) AS side
  FROM resets GROUP BY conn_id
), fins AS (
  -- a FIN before the RST, either side's: the first
  SELECT r.conn_id, min(f.ts) AS ts, min_by(element_at(f.packets, 1), f.seq) AS packet,
         min_by(f.dir, f.seq) AS dir
  FROM rst AS r JOIN frames AS f ON f.conn_id = r.conn_id AND f.{FLOW_END}
   AND f.reason = 'fin'
  GROUP BY r.conn_id
), last_frame AS (
  SELECT r.conn_id, max_by(f.ts, f.seq) AS ts, max_by(element_at(f.packets, 1), f.seq) AS packet,
         max_by(f.name, f.seq) AS name, max_by(f.dir, f.seq) AS dir
  FROM rst AS r JOIN frames AS f ON f.conn_id = r.conn_id AND f.{UNITS}
   AND size(f.packets) > 0
  GROUP BY r.conn_id
), ev_rows AS (
  SELECT conn_id AS k, ts, packet, conn_id, CAST(NULL AS STRING) AS msg_id,
         'RST from the ' || CASE WHEN side = '{C2S}' THEN 'client' ELSE 'server' END AS what
  FROM rst
  UNION ALL
  SELECT conn_id, ts, packet, conn_id, NULL,
         CASE WHEN dir = '{C2S}' THEN 'the client''s FIN' ELSE 'the server''s FIN' END
  FROM fins
  UNION ALL
  SELECT conn_id, ts, packet, conn_id, NULL, 'the last frame: ' || name FROM last_frame
), evd AS ({evidence("ev_rows", ("k",))}
)
SELECT {_server("r.conn_id")} AS server, r.conn_id, e.first_ts AS ts, e.evidence,
       {figures("sent_by", "rst_packet", "fin_from", "fin_packet", "last_frame",
                "last_from")} AS figures
FROM (SELECT r.*, r.packet AS rst_packet,
             CASE WHEN r.side = '{C2S}' THEN 'client' ELSE 'server' END AS sent_by,
             CASE WHEN f.dir = '{C2S}' THEN 'client' WHEN f.dir = '{S2C}' THEN 'server' END
               AS fin_from, f.packet AS fin_packet, l.name AS last_frame,
             CASE WHEN l.dir = '{C2S}' THEN 'client' WHEN l.dir = '{S2C}' THEN 'server' END
               AS last_from
      FROM rst AS r LEFT JOIN fins AS f ON f.conn_id = r.conn_id
      LEFT JOIN last_frame AS l ON l.conn_id = r.conn_id) AS r
JOIN evd AS e ON e.k = r.conn_id
"""

RESET = Rule(
    "tcp.reset", "a connection ended by a RST",
    Severity.WARNING, _RESET,
    summary="the {sent_by} reset the connection (RST, packet {rst_packet}){?fin_from} "
            "after the {fin_from}'s FIN (packet {fin_packet}){/}{?last_frame}; the last "
            "frame was the {last_from}'s {last_frame}{/}",
    explanation="A RST ends both directions at once: whatever either side had sent and the "
                "other had not read yet is thrown away. A kernel sends it when a program "
                "closes a socket with unread input (nsqd closing after a fatal error with "
                "the rest of a body unread), closes with SO_LINGER 0, or exits; or when a "
                "packet comes for a connection it no longer has. Messages in flight on a "
                "consumer's connection go back to the queue when their msg_timeout runs "
                "out; a publish without its answer may or may not have been queued.",
    change="Close connections cleanly: a consumer sends CLS and waits for CLOSE_WAIT, "
           "answers what it holds, then closes; a producer reads every answer before "
           "closing. When the server sent the RST, look at the error it answered just "
           "before.",
)

RETRANSMISSIONS = Threshold(
    "RETRANSMISSIONS", 3, "segments",
    "one lost segment resent is TCP doing its job on any real network; three or more on one "
    "connection is a path that keeps losing them, each resend costing at least a "
    "round trip (a retransmission timeout: 200 ms or more on Linux)")

_RETRANSMISSION = f"""
WITH per AS (
  SELECT conn_id, CAST(sum(retransmissions) AS BIGINT) AS segments,
         CAST(sum(fast) AS BIGINT) AS fast, CAST(sum(bytes) AS BIGINT) AS bytes,
         CAST(sum(CASE WHEN dir = '{C2S}' THEN retransmissions ELSE 0 END) AS BIGINT)
           AS by_client,
         CAST(sum(CASE WHEN dir = '{S2C}' THEN retransmissions ELSE 0 END) AS BIGINT)
           AS by_server,
         round(max(last_ts) - min(first_ts), 3) AS over_s
  FROM retransmissions GROUP BY conn_id
  HAVING sum(retransmissions) >= {RETRANSMISSIONS.value}
), again AS (
  SELECT conn_id, ts, dir, element_at(packets, 1) AS packet, size, reason FROM frames
  WHERE kind = 'tcp' AND name = 'Retransmission' AND reason <> 'out-of-order'
), ev_rows AS (
  SELECT a.conn_id AS k, a.ts, a.packet, a.conn_id, CAST(NULL AS STRING) AS msg_id,
         CAST(a.size AS STRING) || ' bytes the '
           || CASE WHEN a.dir = '{C2S}' THEN 'client' ELSE 'server' END
           || ' sent again (' || a.reason || ')' AS what
  FROM again AS a JOIN per AS p ON p.conn_id = a.conn_id
), evd AS ({evidence("ev_rows", ("k",))}
)
SELECT {_server("p.conn_id")} AS server, p.conn_id, e.first_ts AS ts, e.evidence,
       {figures("segments", "fast", "bytes", "by_client", "by_server", "over_s")}
         AS figures
FROM per AS p JOIN evd AS e ON e.k = p.conn_id
"""

RETRANSMISSION = Rule(
    "tcp.retransmission", "segments sent again: a lossy path",
    Severity.WARNING, _RETRANSMISSION,
    summary="{segments:/segment/segments} retransmitted ({bytes} bytes: {by_client} by the "
            "client, {by_server} by the server{?fast}; {fast} fast{/}) over {over_s:.3f} s",
    explanation="These packets carried bytes their sender had sent before (what Wireshark "
                "calls tcp.analysis.retransmission, its fast and spurious ones among "
                "them): the sender did not get them acknowledged in time and sent them "
                "again. Each resend waits for a retransmission timeout or three "
                "duplicate ACKs, so messages, their FINs and heartbeats arrive late: a "
                "consumer's handling time grows towards msg_timeout, a heartbeat's answer "
                "towards nsqd's two-interval limit.",
    change="Find where the path drops packets: full queues on a router or a virtual NIC "
           "(tc -s qdisc, ethtool -S, netstat -s), a congested link, a host short of CPU; "
           "lower the burst (smaller MPUB batches, a lower RDY) if the drops are queue "
           "overflows.",
    thresholds=(RETRANSMISSIONS,),
)

ZERO_WINDOW_S = Threshold(
    "ZERO_WINDOW_S", 0.5, "s",
    "a window closed for a moment is flow control doing its job (the reader catching up "
    "after a burst); closed for half a second or more, the reading program has stalled "
    "-- a blocked handler, a long pause -- and everything sent to it waits")

_ZERO_WINDOW = f"""
WITH periods AS (
  SELECT *, conn_id || '/' || dir || '/' || CAST(from_packet AS STRING) AS k,
         round(duration_s, 3) AS seconds
  FROM zero_windows WHERE duration_s >= {ZERO_WINDOW_S.value}
), ev_rows AS (
  SELECT p.k, f.ts, element_at(f.packets, 1) AS packet, f.conn_id,
         CAST(NULL AS STRING) AS msg_id,
         CASE WHEN f.name = 'WindowOpen'
              THEN 'the ' || p.stopped_reading || '''s window open again'
              ELSE 'a window of 0 from the ' || p.stopped_reading END AS what
  FROM periods AS p JOIN frames AS f ON f.conn_id = p.conn_id AND f.kind = 'tcp'
   AND f.name IN ('ZeroWindow', 'WindowOpen') AND f.dir = p.dir
   AND f.ts >= p.from_ts AND f.ts <= coalesce(p.to_ts, f.ts)
), evd AS ({evidence("ev_rows", ("k",))}
), since AS (
  -- what the server held for the client when its window closed: its last change then
  SELECT p.k, max(h.ts) AS ts
  FROM periods AS p JOIN {HELD} AS h ON h.conn_id = p.conn_id AND h.ts <= p.from_ts
  WHERE p.dir = '{C2S}'
  GROUP BY p.k
), waited AS (
  -- ... and the most it held while the window stayed closed (a protocol's words)
  SELECT s.k, max(h.held) AS held, max_by(h.allowed, h.held) AS allowed,
         min(h.held_words) AS held_words, min(h.allowed_words) AS allowed_words
  FROM since AS s JOIN periods AS p ON p.k = s.k
  JOIN {HELD} AS h ON h.conn_id = p.conn_id AND h.ts >= s.ts
   AND h.ts <= coalesce(p.to_ts, h.ts)
  GROUP BY s.k
)
SELECT {_server("p.conn_id")} AS server, p.conn_id, e.first_ts AS ts, e.evidence,
       {figures("stopped_reading", "waiting", "seconds", "zero_window_packets", "probes",
                "until", "bytes_in_flight", "frames_in_flight", "held", "allowed",
                "held_words", "allowed_words")} AS figures
FROM (SELECT p.*, w.held, w.allowed, w.held_words, w.allowed_words
      FROM periods AS p LEFT JOIN waited AS w ON w.k = p.k AND w.held > 0) AS p
JOIN evd AS e ON e.k = p.k
"""

ZERO_WINDOW = Rule(
    "tcp.zero-window", "a side that stopped reading: a zero window",
    Severity.WARNING, _ZERO_WINDOW,
    summary="the {stopped_reading} stopped reading: its window stayed at 0 for "
            "{seconds:.3f} s ({zero_window_packets:/zero-window packet/zero-window "
            "packets}; {probes:/window probe/window probes} from the {waiting}; then "
            "{until}){?bytes_in_flight}, with {bytes_in_flight} bytes of the {waiting}'s "
            "waiting{/}{?held}; {held} {held_words} meanwhile ({allowed_words} {allowed}){/}",
    explanation="A receiver announces a window of 0 when its socket's receive buffer is "
                "full: the program on that side is not reading. The other side may send "
                "nothing more until the window opens again (it only probes it), so "
                "everything behind it waits: messages nsqd has in flight to a consumer "
                "keep their msg_timeout running and time out, a producer's publishes and "
                "a heartbeat's answer wait in its buffers, and nsqd may close the "
                "connection for a missed heartbeat.",
    change="Find why the reading side stalled: a message handler that blocks the loop "
           "that reads the socket, a long pause, a consumer's RDY above what it can hold "
           "in memory (lower RDY, or handle messages off the reading loop); a receive "
           "buffer set too small (SO_RCVBUF) makes it close sooner.",
    thresholds=(ZERO_WINDOW_S,),
)

RULES: tuple[Rule, ...] = (GAP, TRUNCATED, MIDSTREAM, RESET, RETRANSMISSION, ZERO_WINDOW)
"""The capture layer's rules, in the order their findings are listed."""
