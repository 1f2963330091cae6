"""The doctor's rules about the TCP layer and the capture itself, whatever the protocol
(:mod:`nsqviz.doctor` says what a rule is and how to add one), over the rows the capture
layer writes into the frames table -- each connection's start (``FlowStart``, its reason
``midstream`` when its handshake was not captured), each direction's end (``FlowEnd``,
its reason ``fin`` or ``rst``; the side that sent a RST ends first) and the bytes
reassembly could not give (``Gap``, its reason saying why):

* ``capture.midstream`` -- connections whose start was not captured: no SYN, so the
  magic, IDENTIFY or registration that says what the connection is may be missing, and
  the first frames are found by resynchronising;
* ``capture.truncated`` -- packets the snaplen cut: the bytes past it were never in the
  capture file (``tcpdump -s``), so bodies, ids and JSON are partly unknown;
* ``capture.gap`` -- bytes the capture lost (the receiver acknowledged them, the
  connection ended past them): the kernel or tcpdump dropped packets; whatever they
  carried is not in any table;
* ``tcp.reset`` -- a connection ended by a RST, and which side sent it;
* ``tcp.retransmission`` -- segments that carried bytes the capture had already seen
  (``Retransmission`` rows), at least :data:`RETRANSMISSIONS` on a connection.

Zero windows are not here yet: the frames table does not record the TCP header's
window.
"""

from __future__ import annotations

from nsqviz.capture.tcp import SNAPLEN_CUT
from nsqviz.doctor.rule import Rule, Severity, Threshold, evidence, figures
from nsqviz.sql import C2S, FLOW_END, S2C, UNITS

__all__ = ["RETRANSMISSIONS", "RULES"]

_CUT = f"reason LIKE '%{SNAPLEN_CUT.replace(chr(39), chr(39) * 2)}'"
"""SQL: a gap row's bytes are the snaplen's cut."""
_GAP = "kind = 'gap' AND name = 'Gap'"
"""SQL: a row of bytes missing from a connection's stream."""
_START = "kind = 'flow' AND name = 'FlowStart'"


def _server(conn_id: str) -> str:
    return f"split_part(split_part({conn_id}, '->', 2), '@', 1)"


_MIDSTREAM = f"""
WITH starts AS (
  SELECT conn_id, ts, element_at(packets, 1) AS packet FROM frames
  WHERE {_START} AND reason = 'midstream'
), firsts AS (
  -- the first frame each direction decoded: where reading could start
  SELECT s.conn_id, f.dir, min_by(f.ts, f.seq) AS ts,
         min_by(element_at(f.packets, 1), f.seq) AS packet, min_by(f.name, f.seq) AS name,
         min(f.protocol) AS protocol
  FROM starts AS s JOIN frames AS f ON f.conn_id = s.conn_id AND f.{UNITS}
  GROUP BY s.conn_id, f.dir
), ev_rows AS (
  SELECT conn_id AS k, ts, packet, conn_id, CAST(NULL AS STRING) AS msg_id,
         'the connection''s first packet in the capture: no SYN' AS what
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
WITH cut AS (
  SELECT conn_id, ts, element_at(packets, 1) AS packet, size FROM frames
  WHERE {_GAP} AND {_CUT}
), per AS (
  SELECT {_server("conn_id")} AS server, CAST(count(DISTINCT packet) AS BIGINT) AS packets_cut,
         CAST(sum(size) AS BIGINT) AS bytes_cut,
         CAST(count(DISTINCT conn_id) AS BIGINT) AS connections
  FROM cut GROUP BY {_server("conn_id")}
), ev_rows AS (
  SELECT {_server("conn_id")} AS k, ts, packet, conn_id, CAST(NULL AS STRING) AS msg_id,
         'cut by the snaplen: ' || CAST(size AS STRING) || ' bytes not captured' AS what
  FROM cut
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
  SELECT conn_id, seq, dir, ts, element_at(packets, 1) AS packet, size FROM frames
  WHERE {_GAP} AND NOT {_CUT}
), after AS (
  -- the first frame captured after each hole, in its direction
  SELECT h.conn_id, h.seq, min_by(f.ts, f.seq) AS ts,
         min_by(element_at(f.packets, 1), f.seq) AS packet
  FROM holes AS h JOIN frames AS f ON f.conn_id = h.conn_id AND f.dir = h.dir
   AND f.seq > h.seq AND f.{UNITS} AND size(f.packets) > 0
  GROUP BY h.conn_id, h.seq
), per AS (
  SELECT conn_id, CAST(count(*) AS BIGINT) AS holes, CAST(sum(size) AS BIGINT) AS bytes,
         CAST(sum(CASE WHEN dir = '{C2S}' THEN size ELSE 0 END) AS BIGINT) AS client_bytes,
         CAST(sum(CASE WHEN dir = '{S2C}' THEN size ELSE 0 END) AS BIGINT) AS server_bytes
  FROM holes GROUP BY conn_id
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
  SELECT conn_id, min(ts) AS ts, min_by(element_at(packets, 1), seq) AS packet,
         min_by(dir, seq) AS side
  FROM frames WHERE {FLOW_END} AND reason = 'rst' GROUP BY conn_id
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
WITH again AS (
  SELECT conn_id, ts, dir, element_at(packets, 1) AS packet, size FROM frames
  WHERE kind = 'flow' AND name = 'Retransmission'
), per AS (
  SELECT conn_id, CAST(count(DISTINCT packet) AS BIGINT) AS segments,
         CAST(sum(size) AS BIGINT) AS bytes,
         CAST(count(DISTINCT CASE WHEN dir = '{C2S}' THEN packet END) AS BIGINT) AS by_client,
         CAST(count(DISTINCT CASE WHEN dir = '{S2C}' THEN packet END) AS BIGINT) AS by_server,
         round(max(ts) - min(ts), 3) AS over_s
  FROM again GROUP BY conn_id
  HAVING count(DISTINCT packet) >= {RETRANSMISSIONS.value}
), ev_rows AS (
  SELECT a.conn_id AS k, a.ts, a.packet, a.conn_id, CAST(NULL AS STRING) AS msg_id,
         CAST(a.size AS STRING) || ' bytes the '
           || CASE WHEN a.dir = '{C2S}' THEN 'client' ELSE 'server' END
           || ' had sent before, sent again' AS what
  FROM again AS a JOIN per AS p ON p.conn_id = a.conn_id
), evd AS ({evidence("ev_rows", ("k",))}
)
SELECT {_server("p.conn_id")} AS server, p.conn_id, e.first_ts AS ts, e.evidence,
       {figures("segments", "bytes", "by_client", "by_server", "over_s")} AS figures
FROM per AS p JOIN evd AS e ON e.k = p.conn_id
"""

RETRANSMISSION = Rule(
    "tcp.retransmission", "segments sent again: a lossy path",
    Severity.WARNING, _RETRANSMISSION,
    summary="{segments:/segment/segments} retransmitted ({bytes} bytes: {by_client} by the "
            "client, {by_server} by the server) over {over_s:.3f} s",
    explanation="These packets carried bytes the capture had already seen on the "
                "connection: the sender did not get them acknowledged in time and sent "
                "them again. Each resend waits for a retransmission timeout or three "
                "duplicate ACKs, so messages, their FINs and heartbeats arrive late: a "
                "consumer's handling time grows towards msg_timeout, a heartbeat's answer "
                "towards nsqd's two-interval limit. (The capture only shows resends of "
                "bytes it saw go by: a segment lost before the capture point and resent "
                "fills a hole instead.)",
    change="Find where the path drops packets: full queues on a router or a virtual NIC "
           "(tc -s qdisc, ethtool -S, netstat -s), a congested link, a host short of CPU; "
           "lower the burst (smaller MPUB batches, a lower RDY) if the drops are queue "
           "overflows.",
    thresholds=(RETRANSMISSIONS,),
)

RULES: tuple[Rule, ...] = (GAP, TRUNCATED, MIDSTREAM, RESET, RETRANSMISSION)
"""The capture layer's rules, in the order their findings are listed."""
