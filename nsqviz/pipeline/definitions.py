"""The analyses, each defined once as SQL over the frames table, for every engine.

The same text runs on DuckDB (:mod:`nsqviz.pipeline.on_duckdb`): in-process for the
captures one person debugs, and inside the pipeline's Spark tasks for captures that
outgrow one machine (:mod:`nsqviz.pipeline.analyses`), where Spark SQL runs the views
that combine brokers. Tests hold the pipeline's tables, and every view run on Spark SQL
alone, to the in-process ones, so a view can move from one engine to the other.
The SQL keeps to what both understand -- CTEs, window functions, ``FILTER`` clauses on
aggregates -- and writes functions the way Spark names them; the few DuckDB spells
differently are renamed in one place, :data:`nsqviz.pipeline.on_duckdb.DUCKDB_NAMES`.
Every ordering names enough columns to be total, so the tables do not depend on how an
engine partitions the frames.

The input is the view ``frames`` (:func:`nsqviz.records.frame_schema`); each
definition becomes a view of its name that later ones may read. Every view but those
that combine brokers (:data:`ACROSS_SERVERS`) reads one broker's frames at a time, so
Spark runs them on each broker's frames apart, in parallel. The rules are what an
operator must trust:

* a message is known by its broker (the server end of its connections), topic, channel
  and id: nsqd copies a message to every channel of its topic under the same id, and
  ids are only unique per nsqd and topic;
* a delivery (``FrameTypeMessage``) ends with the first ``FIN``/``REQ`` for its id *on
  the same connection* before the id is delivered again on the same channel; without
  one it ``timeout``-ed if a later delivery exists -- its requeue was due at delivery
  time + the connection's ``msg_timeout`` (negotiated, else asked for, else nsqd's
  default), and ``next_delivery_ts`` says when the redelivery was actually seen --
  else it is still ``open`` when the capture ends;
* a publish is linked to a message by broker, topic and body (sha1): the latest
  PUB/MPUB/DPUB of that body at or before the first delivery -- nsqd assigns ids after
  the publish, so nothing else on the wire links them; a message with no such publish
  in the capture keeps its row, with no publish;
* nsqd's error answers the last command before it on its connection that it names (its
  text's second word: ``E_FIN_FAILED FIN <id> ...``), else the last thing the client
  sent (a command, or input the decoder could not read); an error the decoder found in
  the client's bytes answers nothing; nsqd *closed* after an error when no server frame
  follows it and the server's side ended (FIN or RST) first;
* in-flight counts deliveries minus ends of deliveries (FIN, REQ, timeout) -- not FIN
  commands, since a FIN for an id not in flight (``E_FIN_FAILED``) frees nothing; the
  starvation test is the client-library guide's ``in_flight > 0 and in_flight >= 0.85 *
  last_rdy``;
* an RPC answer (TubeMQ) is paired with the earliest answer of the same ``rpc_serial``
  on the same connection that follows the request; a request with no answer before
  the capture ends is counted ``unanswered``;
* a heartbeat is answered by the first command the client sends after it and before the
  next one (nsqd resets its read deadline on any command); a connection is *closed for
  missed heartbeats* when its last two heartbeats went unanswered and it then ended
  with FIN or RST.

Packet numbers are the first packet of a frame (``element_at(packets, 1)``): Wireshark's
number in the frame's file (``packet_files`` names it; in rotated files numbers restart
with each file).
"""

from __future__ import annotations

import re

from nsqviz.capture.tcp_views import TCP_VIEWS
from nsqviz.nsq.commands import COMMANDS
from nsqviz.nsq.protocol import NSQ
from nsqviz.stream.direction import Direction
from nsqviz.tubemq.protos import RpcStatus
from nsqviz.tubemq.tables import ErrorCode

__all__ = [
    "ACROSS_SERVERS",
    "DEFAULT_MSG_TIMEOUT_MS",
    "MESSAGE_KEY",
    "SERVER",
    "STARVATION_RATIO",
    "STEPS",
    "TABLES",
    "VIEWS",
    "reads",
]

DEFAULT_MSG_TIMEOUT_MS = 60000  # nsqd's --msg-timeout default
STARVATION_RATIO = 0.85
MESSAGE_KEY = ("server", "topic", "channel", "msg_id")
"""What identifies a message in the deliveries and messages tables."""

_C2S, _S2C = Direction.C2S.value, Direction.S2C.value
_KEY = ", ".join(MESSAGE_KEY)
_FRAMES = "kind IN ('command', 'frame')"
_ERROR = "(name = 'FrameTypeError' OR kind IN ('error', 'gap'))"


def _server(of: str = "") -> str:
    return f"split_part({of}flow, '->', 2)"


SERVER = _server()
"""A record's server (its flow's server end): the key that keeps every connection and
every message whole."""


def _code(of: str = "") -> str:
    """An error's code: nsqd's (the first word of a ``FrameTypeError``), else the
    decoder's record name -- so ``E_INVALID`` from either side is one code."""
    return (f"CASE WHEN {of}name = 'FrameTypeError' THEN split_part({of}data, ' ', 1) "
            f"ELSE {of}name END")



_CONN_INFO = f"""
SELECT conn_id, topic, channel, sub_packet, identify, identify_seq, identify_packet,
       negotiated,
       negotiated_packet,
       CASE WHEN protocol = '{NSQ.name}' AND (identify IS NOT NULL OR negotiated IS NOT NULL)
       THEN coalesce(try_cast(get_json_object(negotiated, '$.msg_timeout') AS BIGINT),
                     try_cast(get_json_object(identify, '$.msg_timeout') AS BIGINT),
                     {DEFAULT_MSG_TIMEOUT_MS}) END AS msg_timeout_ms
FROM (
  SELECT conn_id, min(protocol) AS protocol,
         min_by(topic, seq) FILTER (WHERE name = 'SUB') AS topic,
         min_by(channel, seq) FILTER (WHERE name = 'SUB') AS channel,
         min_by(element_at(packets, 1), seq) FILTER (WHERE name = 'SUB') AS sub_packet,
         min_by(data, seq) FILTER (WHERE name = 'IDENTIFY') AS identify,
         min(seq) FILTER (WHERE name = 'IDENTIFY') AS identify_seq,
         min_by(element_at(packets, 1), seq) FILTER (WHERE name = 'IDENTIFY')
           AS identify_packet,
         min_by(data, seq) FILTER (WHERE name = 'FrameTypeResponse' AND data LIKE '{{%')
           AS negotiated,
         min_by(element_at(packets, 1), seq)
           FILTER (WHERE name = 'FrameTypeResponse' AND data LIKE '{{%') AS negotiated_packet
  FROM frames
  WHERE name IN ('SUB', 'IDENTIFY') OR (name = 'FrameTypeResponse' AND data LIKE '{{%')
  GROUP BY conn_id
) AS c
"""
"""Per connection: its subscription (the first SUB), what IDENTIFY asked for and the
JSON answer negotiated (with their packets), and the message timeout in force (an NSQ
connection's only: nsqd's IDENTIFY to nsqlookupd negotiates none)."""

_DELIVERIES = f"""
WITH ev AS (
  SELECT {_server('f.')} AS server, f.msg_id, i.topic, i.channel, f.conn_id,
         f.ts, f.seq, element_at(f.packets, 1) AS packet,
         CASE WHEN f.name = 'FrameTypeMessage' THEN 'D' ELSE 'R' END AS t,
         CASE WHEN f.name = 'FrameTypeMessage' THEN NULL ELSE f.name END AS verb,
         f.attempts, f.msg_ts, f.delay_ms, i.msg_timeout_ms,
         CASE WHEN f.name = 'FrameTypeMessage' THEN element_at(f.bodies, 1) END AS body_sha1
  FROM frames AS f LEFT JOIN conn_info AS i ON f.conn_id = i.conn_id
  WHERE f.name IN ('FrameTypeMessage', 'FIN', 'REQ', 'TOUCH')
    -- a message frame the capture cut short of its id (snaplen) cannot be followed
    AND f.msg_id IS NOT NULL
), numbered AS (
  SELECT *, sum(CASE WHEN t = 'D' THEN 1 ELSE 0 END) OVER (
              PARTITION BY {_KEY} ORDER BY ts, t, conn_id, seq
              ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS n
  FROM ev
), owned AS (
  SELECT *, max(CASE WHEN t = 'D' THEN conn_id END) OVER (PARTITION BY {_KEY}, n) AS d_conn
  FROM numbered WHERE n > 0
), per AS (
  SELECT {_KEY}, n,
         max(CASE WHEN t = 'D' THEN conn_id END) AS conn_id,
         max(CASE WHEN t = 'D' THEN ts END) AS ts,
         max(CASE WHEN t = 'D' THEN packet END) AS packet,
         max(CASE WHEN t = 'D' THEN attempts END) AS attempts,
         max(CASE WHEN t = 'D' THEN msg_ts END) AS msg_ts,
         max(CASE WHEN t = 'D' THEN body_sha1 END) AS body_sha1,
         max(CASE WHEN t = 'D' THEN msg_timeout_ms END) AS msg_timeout_ms,
         min_by(verb, seq) FILTER (WHERE t = 'R' AND conn_id = d_conn
                                   AND verb IN ('FIN', 'REQ')) AS end_verb,
         min_by(ts, seq) FILTER (WHERE t = 'R' AND conn_id = d_conn
                                 AND verb IN ('FIN', 'REQ')) AS end_ts,
         min_by(packet, seq) FILTER (WHERE t = 'R' AND conn_id = d_conn
                                     AND verb IN ('FIN', 'REQ')) AS end_packet,
         min_by(delay_ms, seq) FILTER (WHERE t = 'R' AND conn_id = d_conn
                                       AND verb IN ('FIN', 'REQ')) AS end_delay,
         CAST(sum(CASE WHEN t = 'R' AND conn_id = d_conn AND verb = 'TOUCH' THEN 1 ELSE 0 END)
              AS BIGINT) AS touches
  FROM owned GROUP BY {_KEY}, n
), ordered AS (
  SELECT *, max(n) OVER (PARTITION BY {_KEY}) AS last_n,
         lead(ts) OVER (PARTITION BY {_KEY} ORDER BY n) AS next_delivery_ts
  FROM per
)
SELECT {_KEY}, CAST(n AS BIGINT) AS delivery, conn_id, ts, packet, attempts, msg_ts,
       body_sha1, touches,
       CASE WHEN end_verb IS NOT NULL THEN end_verb
            WHEN n < last_n THEN 'timeout' ELSE 'open' END AS outcome,
       CASE WHEN end_verb IS NOT NULL THEN end_ts
            WHEN n < last_n THEN ts + coalesce(msg_timeout_ms, {DEFAULT_MSG_TIMEOUT_MS}) / 1000.0
       END AS outcome_ts,
       end_packet AS outcome_packet,
       CASE WHEN end_verb = 'REQ' THEN end_delay END AS req_delay_ms,
       msg_timeout_ms, next_delivery_ts
FROM ordered
"""
"""One row per delivery: message, connection, attempt, how and when it ended (packet
numbers of the delivery and of its FIN/REQ), and when the next delivery was seen."""

_MESSAGES = f"""
WITH per AS (
  SELECT {_KEY},
         min(msg_ts) AS created_ts, min(ts) AS first_delivery_ts,
         max(ts) AS last_delivery_ts, count(*) AS deliveries_count,
         max_by(outcome, delivery) AS outcome, max_by(outcome_ts, delivery) AS outcome_ts,
         CAST(sum(touches) AS BIGINT) AS touches,
         CAST(sum(CASE WHEN outcome = 'REQ' THEN 1 ELSE 0 END) AS BIGINT) AS requeues,
         CAST(sum(CASE WHEN outcome = 'timeout' THEN 1 ELSE 0 END) AS BIGINT) AS timeouts,
         min(body_sha1) AS body_sha1,
         sort_array(collect_list(struct(delivery, ts, packet, conn_id, attempts, outcome,
                                        outcome_ts, outcome_packet, req_delay_ms, touches,
                                        msg_timeout_ms, next_delivery_ts))) AS deliveries
  FROM deliveries GROUP BY {_KEY}
), pubs AS (
  SELECT {SERVER} AS server, topic, ts AS pub_ts, name AS publish_cmd,
         conn_id AS publisher, element_at(packets, 1) AS publish_packet, seq AS pub_seq,
         explode(bodies) AS body_sha1
  FROM frames WHERE name IN ('PUB', 'MPUB', 'DPUB')
), linked AS (
  SELECT m.*, p.pub_ts, p.publish_cmd, p.publisher, p.publish_packet,
         row_number() OVER (PARTITION BY m.server, m.topic, m.channel, m.msg_id
                            ORDER BY p.pub_ts DESC, p.publisher, p.pub_seq) AS r
  FROM per AS m LEFT JOIN pubs AS p
    ON m.server = p.server AND m.topic = p.topic AND m.body_sha1 = p.body_sha1
       AND p.pub_ts <= m.first_delivery_ts
)
SELECT {_KEY}, pub_ts AS publish_ts, publish_cmd, publisher, publish_packet, created_ts,
       first_delivery_ts, deliveries_count, deliveries, outcome, outcome_ts AS final_ts,
       touches, requeues, timeouts,
       first_delivery_ts - coalesce(pub_ts, created_ts) AS queue_latency_s,
       CASE WHEN outcome = 'FIN' THEN outcome_ts - coalesce(pub_ts, created_ts) END
         AS end_to_end_latency_s,
       CASE WHEN outcome = 'FIN' THEN outcome_ts - last_delivery_ts END
         AS processing_latency_s
FROM linked WHERE r = 1
"""
"""One row per message (:data:`MESSAGE_KEY`): publish, deliveries, outcome, latencies."""

_HEARTBEATS = f"""
WITH both_ AS (
  SELECT conn_id, ts, seq, element_at(packets, 1) AS packet,
         CASE WHEN kind = 'command' THEN 'C' ELSE 'H' END AS t,
         CASE WHEN kind = 'command' THEN name END AS cmd
  FROM frames
  WHERE (name = 'FrameTypeResponse' AND data = '_heartbeat_')
     OR (kind = 'command' AND dir = '{_C2S}')
), counted AS (
  SELECT *, sum(CASE WHEN t = 'H' THEN 1 ELSE 0 END) OVER (
              PARTITION BY conn_id ORDER BY seq
              ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS k
  FROM both_
), per AS (
  SELECT conn_id, k,
         max(CASE WHEN t = 'H' THEN ts END) AS ts,
         max(CASE WHEN t = 'H' THEN packet END) AS packet,
         min_by(cmd, seq) FILTER (WHERE t = 'C') AS response,
         min_by(ts, seq) FILTER (WHERE t = 'C') AS response_ts,
         min_by(packet, seq) FILTER (WHERE t = 'C') AS response_packet
  FROM counted WHERE k > 0 GROUP BY conn_id, k
), ends AS (
  SELECT conn_id, bool_or(reason IN ('fin', 'rst')) AS closed
  FROM frames WHERE name = 'FlowEnd' GROUP BY conn_id
), marked AS (
  SELECT *, response IS NOT NULL AS answered,
         sum(CASE WHEN response IS NOT NULL THEN 1 ELSE 0 END) OVER (
           PARTITION BY conn_id ORDER BY k
           ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS grp,
         max(k) OVER (PARTITION BY conn_id) AS last_k,
         ts - lag(ts) OVER (PARTITION BY conn_id ORDER BY k) AS interval_s
  FROM per
), streaks AS (
  SELECT *, sum(CASE WHEN answered THEN 0 ELSE 1 END) OVER (
              PARTITION BY conn_id, grp ORDER BY k
              ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS missed_in_row
  FROM marked
)
SELECT s.conn_id, CAST(s.k AS BIGINT) AS heartbeat, s.ts, s.packet, s.interval_s, s.answered,
       s.response, s.response_packet, s.response_ts - s.ts AS response_s,
       CASE WHEN s.response = 'NOP' THEN s.response_ts - s.ts END AS nop_response_s,
       CAST(s.missed_in_row AS BIGINT) AS missed_in_row,
       (s.k = s.last_k AND s.missed_in_row >= 2 AND coalesce(e.closed, false)) AS closed_after
FROM streaks AS s LEFT JOIN ends AS e ON s.conn_id = e.conn_id
"""
"""One row per ``_heartbeat_``: interval, the client's answer, missed streaks."""

_ERRORS = f"""
WITH ev AS (
  SELECT conn_id, seq, ts, element_at(packets, 1) AS packet, dir, kind, name, data, reason,
         CASE WHEN dir = '{_S2C}' AND {_ERROR} THEN 'E' ELSE 'C' END AS t,
         CASE WHEN dir = '{_S2C}' AND {_ERROR} THEN split_part(data, ' ', 2) ELSE name END
           AS verb
  FROM frames
  WHERE conn_id IS NOT NULL AND ({_ERROR} OR kind = 'command')
), linked AS (
  SELECT *,
         max(CASE WHEN t = 'C' AND dir = '{_C2S}' THEN seq END) OVER (
           PARTITION BY conn_id, verb ORDER BY seq
           ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS named_seq,
         max(CASE WHEN t = 'C' AND dir = '{_C2S}' THEN seq END) OVER (
           PARTITION BY conn_id ORDER BY seq
           ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS last_seq
  FROM ev
), later AS (
  SELECT conn_id, max(CASE WHEN dir = '{_S2C}' AND {_FRAMES} THEN seq END) AS last_s2c,
         min_by(dir, seq) FILTER (WHERE name = 'FlowEnd' AND reason IN ('fin', 'rst'))
           AS closed_from
  FROM frames WHERE conn_id IS NOT NULL GROUP BY conn_id
)
SELECT l.conn_id, l.ts, l.packet, l.seq, l.dir, l.kind, l.name,
       {_code('l.')} AS code,
       coalesce(l.data, l.reason) AS text,
       c.name AS command, element_at(c.packets, 1) AS command_packet,
       coalesce(l.dir = '{_S2C}' AND l.seq >= w.last_s2c AND w.closed_from = '{_S2C}', false)
         AS closed
FROM linked AS l
LEFT JOIN frames AS c ON c.conn_id = l.conn_id AND l.t = 'E'
  AND c.seq = coalesce(l.named_seq, l.last_seq)
LEFT JOIN later AS w ON w.conn_id = l.conn_id
WHERE {_ERROR.replace("name", "l.name").replace("kind", "l.kind")}
"""
"""One row per error (nsqd's ``FrameTypeError`` s, and what the decoder found wrong): its
code, the command it answers (with its packet), and whether nsqd closed after it."""

_CONNECTIONS = f"""
WITH base AS (
  SELECT conn_id, min(flow) AS flow, min(ts) AS start_ts, max(ts) AS end_ts,
         CAST(sum(CASE WHEN {_FRAMES} AND dir = '{_C2S}' THEN 1 ELSE 0 END) AS BIGINT)
           AS frames_c2s,
         CAST(sum(CASE WHEN {_FRAMES} AND dir = '{_S2C}' THEN 1 ELSE 0 END) AS BIGINT)
           AS frames_s2c,
         CAST(sum(CASE WHEN {_FRAMES} AND dir = '{_C2S}' THEN size ELSE 0 END) AS BIGINT)
           AS frame_bytes_c2s,
         CAST(sum(CASE WHEN {_FRAMES} AND dir = '{_S2C}' THEN size ELSE 0 END) AS BIGINT)
           AS frame_bytes_s2c,
         max(size) FILTER (WHERE name = 'FlowEnd' AND dir = '{_C2S}') AS bytes_c2s,
         max(size) FILTER (WHERE name = 'FlowEnd' AND dir = '{_S2C}') AS bytes_s2c,
         min_by(reason, seq) FILTER (WHERE name = 'FlowEnd') AS ended_by,
         min_by(dir, seq) FILTER (WHERE name = 'FlowEnd') AS ended_from,
         min_by(element_at(packets, 1), seq) FILTER (WHERE name = 'FlowEnd') AS end_packet,
         max_by(name, seq) FILTER (WHERE {_FRAMES}) AS last_frame,
         max_by(element_at(packets, 1), seq) FILTER (WHERE {_FRAMES}) AS last_frame_packet,
         CAST(sum(CASE WHEN name = 'FrameTypeMessage' THEN 1 ELSE 0 END) AS BIGINT)
           AS messages_in,
         CAST(sum(CASE WHEN name = 'PUB' THEN 1
                       WHEN name IN ('MPUB', 'DPUB') THEN size(bodies) ELSE 0 END) AS BIGINT)
           AS messages_published,
         CAST(sum(CASE WHEN {_ERROR} THEN 1 ELSE 0 END) AS BIGINT) AS errors,
         coalesce(array_sort(collect_set({_code()}) FILTER (WHERE {_ERROR})), array())
           AS error_codes,
         bool_or(kind = 'tls') AS tls,
         max_by(count, seq) FILTER (WHERE name = 'RDY') AS last_rdy,
         max(count) FILTER (WHERE name = 'RDY') AS max_rdy,
         CAST(sum(CASE WHEN name = 'RDY' THEN 1 ELSE 0 END) AS BIGINT) AS rdy_changes
  FROM frames WHERE conn_id IS NOT NULL GROUP BY conn_id
), beats AS (
  SELECT conn_id, count(*) AS heartbeats,
         CAST(sum(CASE WHEN answered THEN 0 ELSE 1 END) AS BIGINT) AS missed_heartbeats,
         avg(nop_response_s) AS mean_nop_response_s,
         bool_or(closed_after) AS closed_for_missed_heartbeats
  FROM heartbeats GROUP BY conn_id
)
SELECT b.conn_id, b.flow, b.start_ts, b.end_ts, b.frames_c2s, b.frames_s2c, b.bytes_c2s,
       b.bytes_s2c, b.frame_bytes_c2s, b.frame_bytes_s2c, b.ended_by, b.ended_from,
       b.end_packet, b.last_frame,
       b.last_frame_packet, b.messages_in, b.messages_published, b.errors, b.error_codes,
       b.tls,
       get_json_object(i.identify, '$.client_id') AS client_id,
       get_json_object(i.identify, '$.hostname') AS hostname,
       get_json_object(i.identify, '$.user_agent') AS user_agent,
       get_json_object(i.identify, '$.feature_negotiation') AS feature_negotiation,
       get_json_object(i.identify, '$.heartbeat_interval') AS heartbeat_interval,
       i.identify, i.identify_packet, i.negotiated, i.negotiated_packet, i.msg_timeout_ms,
       i.topic, i.channel, i.sub_packet, b.last_rdy, b.max_rdy, b.rdy_changes,
       b.end_ts - b.start_ts AS duration_s,
       CASE WHEN get_json_object(i.negotiated, '$.snappy') = 'true' THEN 'snappy'
            WHEN get_json_object(i.negotiated, '$.deflate') = 'true' THEN 'deflate'
       END AS compression,
       CASE WHEN i.channel IS NOT NULL THEN 'consumer'
            WHEN b.messages_published > 0 THEN 'producer' ELSE 'other' END AS role,
       coalesce(h.heartbeats, 0) AS heartbeats,
       coalesce(h.missed_heartbeats, 0) AS missed_heartbeats, h.mean_nop_response_s,
       coalesce(h.closed_for_missed_heartbeats, false) AS closed_for_missed_heartbeats
FROM base AS b LEFT JOIN conn_info AS i ON b.conn_id = i.conn_id
LEFT JOIN beats AS h ON b.conn_id = h.conn_id
"""
"""One row per connection: who (IDENTIFY), what (SUB/PUB), negotiated, how long, how
much (bytes on the wire, and of the frames they carried: their ratio is compression's),
errors, RDY, heartbeats, and how it ended (FIN/RST, which side first, packet)."""

_ANSWERED = ", ".join(f"'{v}'" for v, spec in COMMANDS.items() if spec.answered)
_SILENT = ", ".join(f"'{v}'" for v, spec in COMMANDS.items() if not spec.answered)

_PUBLISHES = f"""
WITH commands AS (
  SELECT conn_id, seq, 0 AS extra, ts, packets, name
  FROM frames WHERE dir = '{_C2S}' AND kind = 'command' AND name IN ({_ANSWERED})
  UNION ALL
  SELECT f.conn_id, f.seq, 1 AS extra, f.ts, f.packets, 'upgrade' AS name
  FROM frames AS f JOIN conn_info AS i ON f.conn_id = i.conn_id
  WHERE f.name = 'IDENTIFY' AND f.seq = i.identify_seq AND (
    get_json_object(i.negotiated, '$.snappy') = 'true'
    OR get_json_object(i.negotiated, '$.deflate') = 'true'
    OR get_json_object(i.negotiated, '$.tls_v1') = 'true')
), asked AS (
  SELECT *, row_number() OVER (PARTITION BY conn_id ORDER BY seq, extra) AS k FROM commands
), answers AS (
  SELECT conn_id, ts, packets, name, data,
         row_number() OVER (PARTITION BY conn_id ORDER BY seq) AS k
  FROM frames
  WHERE dir = '{_S2C}' AND ((name = 'FrameTypeResponse' AND data <> '_heartbeat_')
     OR (name = 'FrameTypeError' AND split_part(data, ' ', 2) NOT IN ({_SILENT})))
)
SELECT q.conn_id, q.ts, element_at(q.packets, 1) AS packet, q.name AS command,
       a.name AS answer,
       CASE WHEN a.name = 'FrameTypeError' THEN split_part(a.data, ' ', 1) ELSE a.data END
         AS answer_text,
       element_at(a.packets, 1) AS answer_packet, a.ts - q.ts AS latency_s
FROM asked AS q LEFT JOIN answers AS a ON a.conn_id = q.conn_id AND a.k = q.k
WHERE q.name IN ('PUB', 'MPUB', 'DPUB')
"""
"""One row per PUB/MPUB/DPUB: nsqd's answer (OK or its error) and the latency. nsqd
answers the commands it answers (:data:`nsqviz.nsq.commands.COMMANDS`) one at a time,
in order, and once more (OK) after an IDENTIFY that negotiated snappy, DEFLATE or TLS,
when the connection is upgraded; so the k-th answer on a connection (heartbeats and
the errors that answer FIN/REQ/TOUCH/RDY/NOP left out) is the k-th such command's."""

_FLOW_CONTROL = f"""
WITH ev AS (
  SELECT conn_id, ts, 1 AS prio, seq, 'RDY' AS event, count AS rdy, 0 AS delta,
         CAST(NULL AS STRING) AS msg_id
  FROM frames WHERE name = 'RDY'
  UNION ALL
  SELECT conn_id, ts, 1 AS prio, CAST(NULL AS BIGINT) AS seq, 'MSG' AS event,
         CAST(NULL AS BIGINT) AS rdy, 1 AS delta, msg_id
  FROM deliveries
  UNION ALL
  SELECT conn_id, outcome_ts AS ts, CASE WHEN outcome = 'timeout' THEN 0 ELSE 1 END AS prio,
         CAST(NULL AS BIGINT) AS seq, outcome AS event, CAST(NULL AS BIGINT) AS rdy,
         -1 AS delta, msg_id
  FROM deliveries WHERE outcome_ts IS NOT NULL
), run AS (
  SELECT conn_id, ts, event, msg_id,
         max_by(rdy, CASE WHEN rdy IS NOT NULL THEN r END) OVER w AS rdy,
         CAST(sum(delta) OVER w AS BIGINT) AS in_flight
  FROM (SELECT *, row_number() OVER (PARTITION BY conn_id ORDER BY ts, prio, event, seq,
                                     msg_id) AS r FROM ev) AS e
  WINDOW w AS (PARTITION BY conn_id ORDER BY r ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
)
SELECT *, (in_flight > 0 AND in_flight >= coalesce(rdy, 0) * {STARVATION_RATIO}) AS starved
FROM run
"""
"""RDY and in-flight per connection over time, with the starvation test at each step."""

_PACKET_FRAMES = f"""
SELECT dir, conn_id, element_at(packet_files, i) AS file, element_at(packets, i) AS packet,
       CAST(count(*) AS INT) AS frames
FROM (SELECT dir, conn_id, packet_files, packets, explode(sequence(1, size(packets))) AS i
      FROM frames WHERE {_FRAMES} AND size(packets) > 0) AS x
GROUP BY dir, conn_id, element_at(packet_files, i), element_at(packets, i)
"""
"""One row per packet that carried frame bytes: how many frames it carried (more than
one: frames glued in one packet, 粘包). A packet number is its own file's, as in
Wireshark, so a packet is its connection's file and number."""

_STICKY_COUNTS = f"""
SELECT dir, 'packets_per_frame' AS measure, CAST(size(packets) AS INT) AS n, count(*) AS count
FROM frames WHERE {_FRAMES} GROUP BY dir, size(packets)
UNION ALL
SELECT dir, 'frames_per_packet' AS measure, frames AS n, count(*) AS count
FROM packet_frames GROUP BY dir, frames
"""
"""The sticky-packet counts of the frames read (a packet is one connection's, so the
counts of several brokers add up)."""

_STICKY_PACKETS = """
SELECT dir, measure, n, CAST(sum(count) AS BIGINT) AS count
FROM sticky_counts GROUP BY dir, measure, n
"""
"""Distributions, per direction, of frames per packet and packets per frame (粘包)."""

_RPC_PAIRS = f"""
WITH rpc AS (SELECT * FROM frames WHERE rpc_serial IS NOT NULL AND {_FRAMES}),
joined AS (
  SELECT q.protocol, q.conn_id, q.rpc_serial, q.rpc_method AS method,
         q.rpc_service AS service, q.ts AS request_ts, q.seq AS request_seq,
         element_at(q.packets, 1) AS request_packet, a.ts AS answer_ts, a.seq AS answer_seq,
         element_at(a.packets, 1) AS answer_packet, a.rpc_status AS status, a.err_code,
         row_number() OVER (PARTITION BY q.conn_id, q.rpc_serial, q.seq
                            ORDER BY a.seq NULLS LAST) AS r
  FROM rpc AS q LEFT JOIN rpc AS a
    ON a.kind = 'frame' AND a.conn_id = q.conn_id AND a.rpc_serial = q.rpc_serial
       AND a.seq > q.seq
  WHERE q.kind = 'command'
)
SELECT protocol, conn_id, rpc_serial, method, service, request_ts, request_packet,
       answer_ts, answer_packet, status, err_code,
       (answer_ts - request_ts) * 1000 AS latency_ms
FROM joined WHERE r = 1
"""
"""One row per RPC request (TubeMQ): method, the answer's status and errCode, latency
in ms (null: unanswered), with both packets."""

_OK = int(ErrorCode.SUCCESS)
_RPC_LATENCY = f"""
SELECT protocol, method, count(*) AS requests, count(answer_ts) AS answers,
       CAST(sum(CASE WHEN answer_ts IS NULL THEN 1 ELSE 0 END) AS BIGINT) AS unanswered,
       CAST(sum(CASE WHEN status <> '{RpcStatus.SUCCESS.name}' OR coalesce(err_code, {_OK})
                          <> {_OK} THEN 1 ELSE 0 END) AS BIGINT) AS errors,
       min(latency_ms) AS min_ms, percentile(latency_ms, 0.5) AS p50_ms,
       percentile(latency_ms, 0.95) AS p95_ms, max(latency_ms) AS max_ms,
       avg(latency_ms) AS mean_ms
FROM rpc_pairs GROUP BY protocol, method
"""
"""Per protocol and method: requests, answers, unanswered, errors (an answer that is not
SUCCESS or whose errCode is not 200), latency in ms (exact percentiles) when answered."""

VIEWS: dict[str, str] = {
    "conn_info": _CONN_INFO,
    "deliveries": _DELIVERIES,
    "messages": _MESSAGES,
    "heartbeats": _HEARTBEATS,
    "errors": _ERRORS,
    "connections": _CONNECTIONS,
    "publishes": _PUBLISHES,
    "flow_control": _FLOW_CONTROL,
    "packet_frames": _PACKET_FRAMES,
    "sticky_counts": _STICKY_COUNTS,
    "sticky_packets": _STICKY_PACKETS,
    "rpc_pairs": _RPC_PAIRS,
    "rpc_latency": _RPC_LATENCY,
    **TCP_VIEWS,
}
"""Every definition by view name, each after the views it reads (the capture layer's
TCP views, :mod:`nsqviz.capture.tcp_views`, last)."""

ACROSS_SERVERS = ("sticky_packets", "rpc_latency")
"""The views that combine brokers: they read the other views, never ``frames``. Every
other view reads one broker's frames at a time -- each row is about one connection or
one message, and both belong to one server (:data:`SERVER`) -- so it gives the same
rows whether it reads all frames at once (in-process) or each broker's apart (the
pipeline's Spark tasks), and these views then combine the brokers' rows."""

STEPS = ("conn_info", "packet_frames", "sticky_counts")
"""Views that are steps of others, not tables of their own."""

TABLES = tuple(name for name in VIEWS if name not in STEPS)
"""The analyses' tables."""


def reads(name: str) -> set[str]:
    """What view ``name`` reads: ``frames`` and the other views it names after FROM or
    JOIN."""
    return {other for other in ("frames", *VIEWS) if other != name
            and re.search(rf"\b(FROM|JOIN) {other}\b", VIEWS[name])}
