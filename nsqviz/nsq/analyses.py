"""NSQ's analyses: SQL over NSQ's rows of the frames table (:func:`nsqviz.sql.frames_of`),
read by both engines, and NSQ's hooks into the shared ``connections`` and ``errors``
tables (:mod:`nsqviz.sql` says how analyses are defined and collected).

Every command and frame name comes from NSQ's tables (:mod:`nsqviz.nsq.commands`); no
definition types one. The rules an operator must trust:

* a message is known by its broker (the server end of its connections), topic, channel
  and id: nsqd copies a message to every channel of its topic under the same id, and
  ids are only unique per nsqd and topic;
* a delivery (``FrameTypeMessage``) ends with the first ``FIN``/``REQ`` for its id *on
  the same connection* before the id is delivered again on the same channel; without
  one it ``timeout``-ed if a later delivery exists -- its requeue was due at delivery
  time + the connection's ``msg_timeout`` (negotiated, else asked for, else nsqd's
  default) -- else it is still ``open`` when the capture ends. A REQ's requeue is due
  at the REQ + its delay; for both, ``requeue_due_ts`` says when it was due and
  ``next_delivery_ts`` when the redelivery was actually seen (nsqd scans its deferred
  and in-flight queues on an interval, so it comes some time after);
* a publish is linked to a message by broker, topic and body (sha1): the latest
  publish of that body at or before the first delivery -- nsqd assigns ids after the
  publish, so nothing else on the wire links them; a message with no such publish in
  the capture keeps its row, with no publish. Publishes are read from the shared
  ``published`` table (:class:`nsqviz.sql.Publishes`), NSQ's PUB/MPUB/DPUB among them,
  so a message published over another protocol links as well: a
  publish that names no broker (one made to another port of the host) links to a
  message of a broker on its host;
* an answer (``FrameTypeResponse``, ``FrameTypeError``) answers the command its decoder
  paired it with (:class:`nsqviz.nsq.observer.Observer`, by nsqd's own order): the
  shared ``answer_pairs`` (:mod:`nsqviz.capture.analyses`) is what ``publishes``,
  ``deliveries`` and the shared ``errors`` table (through :data:`ANALYSES`' error hook)
  read -- a FIN or REQ nsqd answered with an error (the message was no longer in flight)
  ends no delivery;
* in-flight counts deliveries minus ends of deliveries (FIN, REQ, timeout) -- not FIN
  commands, since a FIN for an id not in flight (``E_FIN_FAILED``) frees nothing; the
  starvation test is the client-library guide's ``in_flight > 0 and in_flight >=
  0.85 * last_rdy``;
* a heartbeat is answered by the first command the client sends after it and before the
  next one (nsqd resets its read deadline on any command); a connection is *closed for
  missed heartbeats* when its last heartbeats went unanswered and nsqd then closed it
  (its FIN or RST first). nsqd closes a client it read nothing from for two heartbeat
  intervals: a capture shows two unanswered heartbeats before that close -- or one,
  when the silence began with the IDENTIFY that restarted nsqd's heartbeat clock (its
  second tick and the read deadline then fall due together; nsqd v1.3.0 sends it or
  not, run to run).

Packet numbers are the first packet of a frame (:data:`nsqviz.sql.FIRST_PACKET`).
"""

from __future__ import annotations

from nsqviz.nsq import events as ev
from nsqviz.nsq.analyses_guide import GUIDE, GUIDE_FAILURES
from nsqviz.nsq.commands import BY_EVENT, COMMANDS, ENDS_FLIGHT, FRAME_NAMES, BodyKind
from nsqviz.nsq.wire import HEARTBEAT
from nsqviz.sql import (
    ANSWER_PAIRS,
    C2S,
    CLOSED,
    COMMAND,
    FIRST_PACKET,
    FLOW_END,
    PUBLISHED,
    S2C,
    UNITS,
    Analyses,
    ConnectionColumns,
    ErrorAnswers,
    Held,
    Publishes,
    View,
    frames_of,
    host,
    quoted,
    server,
)

__all__ = [
    "ANALYSES",
    "DEFAULT_MSG_TIMEOUT_MS",
    "MESSAGE_KEY",
    "STARVATION_RATIO",
]

DEFAULT_MSG_TIMEOUT_MS = 60000
"""nsqd's --msg-timeout default: a delivery's timeout when IDENTIFY neither asked for
nor negotiated one."""
STARVATION_RATIO = 0.85
"""The client-library guide's rule: a connection with this share of its RDY in flight
is starved (it should have asked for more)."""
MESSAGE_KEY = ("server", "topic", "channel", "msg_id")
"""What identifies a message in the deliveries and messages tables."""

FRAMES = frames_of("nsq")
"""NSQ's rows of the frames table: the only rows NSQ's views read."""

_KEY = ", ".join(MESSAGE_KEY)
_KEY_OF_R = ", ".join(f"r.{k}" for k in MESSAGE_KEY)
_KEY_OF_D = ", ".join(f"d.{k}" for k in MESSAGE_KEY)
# the same message in two rows (a topic or channel may be null: a connection with no SUB)
_SAME_KEY = " AND ".join(f"d.{k} IS NOT DISTINCT FROM r.{k}" for k in MESSAGE_KEY)


def _verb(event: type[ev.Command]) -> str:
    return f"'{BY_EVENT[event].verb}'"


def _frame(event: type[ev.ServerFrame]) -> str:
    return f"'{FRAME_NAMES[event]}'"


SUB, IDENTIFY, RDY, FIN, REQ, TOUCH = (_verb(e) for e in (ev.Sub, ev.Identify, ev.Rdy,
                                                          ev.Fin, ev.Req, ev.Touch))
PUB, MPUB, DPUB = (_verb(e) for e in (ev.Pub, ev.Mpub, ev.Dpub))
MESSAGE, RESPONSE, ERROR = (_frame(e) for e in (ev.Message, ev.Response, ev.Error))
_HEARTBEAT = f"'{HEARTBEAT.decode()}'"
_PUBLISHES = quoted(v for v, c in COMMANDS.items()
                    if c.body in (BodyKind.MESSAGE, BodyKind.MESSAGES))
_ENDS = ", ".join(_verb(e) for e in ENDS_FLIGHT)
_ANSWERS = f"{FIN}, {REQ}, {TOUCH}"
_ANSWERS_AND_PUBLISHES = f"{_ANSWERS}, {_PUBLISHES}"
_JSON_RESPONSE = f"(name = {RESPONSE} AND data LIKE '{{%')"

_CONN_INFO = f"""
SELECT conn_id, topic, channel, sub_packet, identify, identify_seq, identify_packet,
       negotiated,
       negotiated_packet,
       CASE WHEN identify IS NOT NULL OR negotiated IS NOT NULL
       THEN coalesce(try_cast(get_json_object(negotiated, '$.msg_timeout') AS BIGINT),
                     try_cast(get_json_object(identify, '$.msg_timeout') AS BIGINT),
                     {DEFAULT_MSG_TIMEOUT_MS}) END AS msg_timeout_ms
FROM (
  SELECT conn_id,
         min_by(topic, seq) FILTER (WHERE name = {SUB}) AS topic,
         min_by(channel, seq) FILTER (WHERE name = {SUB}) AS channel,
         min_by({FIRST_PACKET}, seq) FILTER (WHERE name = {SUB}) AS sub_packet,
         min_by(data, seq) FILTER (WHERE name = {IDENTIFY}) AS identify,
         min(seq) FILTER (WHERE name = {IDENTIFY}) AS identify_seq,
         min_by({FIRST_PACKET}, seq) FILTER (WHERE name = {IDENTIFY}) AS identify_packet,
         min_by(data, seq) FILTER (WHERE {_JSON_RESPONSE}) AS negotiated,
         min_by({FIRST_PACKET}, seq) FILTER (WHERE {_JSON_RESPONSE}) AS negotiated_packet
  FROM {FRAMES}
  WHERE name IN ({SUB}, {IDENTIFY}) OR {_JSON_RESPONSE}
  GROUP BY conn_id
) AS c
"""

_DELIVERIES = f"""
WITH ev AS (
  SELECT {server('f.')} AS server, f.msg_id, i.topic, i.channel, f.conn_id,
         f.ts, f.seq, element_at(f.packets, 1) AS packet,
         CASE WHEN f.name = {MESSAGE} THEN 'D' ELSE 'R' END AS t,
         CASE WHEN f.name = {MESSAGE} THEN NULL ELSE f.name END AS verb,
         f.attempts, f.msg_ts, f.delay_ms, i.msg_timeout_ms,
         CASE WHEN f.name = {MESSAGE} THEN element_at(f.bodies, 1) END AS body_sha1
  FROM {FRAMES} AS f LEFT JOIN conn_info AS i ON f.conn_id = i.conn_id
  LEFT JOIN {ANSWER_PAIRS} AS p ON p.conn_id = f.conn_id AND p.command_seq = f.seq
  WHERE f.name IN ({MESSAGE}, {FIN}, {REQ}, {TOUCH})
    -- a message frame the capture cut short of its id (snaplen) cannot be followed
    AND f.msg_id IS NOT NULL
    -- a FIN/REQ/TOUCH nsqd refused (E_FIN_FAILED ...: not in flight) does nothing
    AND coalesce(p.name, '') <> {ERROR}
), numbered AS (
  SELECT *, sum(CASE WHEN t = 'D' THEN 1 ELSE 0 END) OVER (
              PARTITION BY {_KEY} ORDER BY ts, t, conn_id, seq
              ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS n
  FROM ev
), ds AS (
  -- each delivery: its message frame (n counts them, so a (message, n) has one)
  SELECT {_KEY}, n, conn_id, ts, packet, attempts, msg_ts, body_sha1, msg_timeout_ms
  FROM numbered WHERE t = 'D'
), ends AS (
  -- what the delivery's own connection answered to it, up to the next delivery
  SELECT {_KEY_OF_R}, r.n,
         min_by(r.verb, r.seq) FILTER (WHERE r.verb IN ({_ENDS})) AS end_verb,
         min_by(r.ts, r.seq) FILTER (WHERE r.verb IN ({_ENDS})) AS end_ts,
         min_by(r.packet, r.seq) FILTER (WHERE r.verb IN ({_ENDS})) AS end_packet,
         min_by(r.delay_ms, r.seq) FILTER (WHERE r.verb IN ({_ENDS})) AS end_delay,
         CAST(sum(CASE WHEN r.verb = {TOUCH} THEN 1 ELSE 0 END) AS BIGINT) AS touches
  FROM numbered AS r JOIN ds AS d ON {_SAME_KEY} AND d.n = r.n AND d.conn_id = r.conn_id
  WHERE r.t = 'R'
  GROUP BY {_KEY_OF_R}, r.n
), per AS (
  SELECT {_KEY_OF_D}, d.n, d.conn_id, d.ts, d.packet, d.attempts, d.msg_ts, d.body_sha1,
         d.msg_timeout_ms, r.end_verb, r.end_ts, r.end_packet, r.end_delay,
         coalesce(r.touches, CAST(0 AS BIGINT)) AS touches
  FROM ds AS d LEFT JOIN ends AS r ON {_SAME_KEY} AND d.n = r.n
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
       CASE WHEN end_verb = {REQ} THEN end_delay END AS req_delay_ms,
       msg_timeout_ms, next_delivery_ts,
       CASE WHEN end_verb = {REQ} THEN end_ts + coalesce(end_delay, 0) / 1000.0
            WHEN end_verb IS NULL AND n < last_n
            THEN ts + coalesce(msg_timeout_ms, {DEFAULT_MSG_TIMEOUT_MS}) / 1000.0
       END AS requeue_due_ts
FROM ordered
"""

_MESSAGES_VIEW = f"""
WITH per AS (
  SELECT {_KEY},
         min(msg_ts) AS created_ts, min(ts) AS first_delivery_ts,
         max(ts) AS last_delivery_ts, count(*) AS deliveries_count,
         max_by(outcome, delivery) AS outcome, max_by(outcome_ts, delivery) AS outcome_ts,
         CAST(sum(touches) AS BIGINT) AS touches,
         CAST(sum(CASE WHEN outcome = {REQ} THEN 1 ELSE 0 END) AS BIGINT) AS requeues,
         CAST(sum(CASE WHEN outcome = 'timeout' THEN 1 ELSE 0 END) AS BIGINT) AS timeouts,
         min(body_sha1) AS body_sha1,
         sort_array(collect_list(struct(delivery, ts, packet, conn_id, attempts, outcome,
                                        outcome_ts, outcome_packet, req_delay_ms, touches,
                                        msg_timeout_ms, next_delivery_ts, requeue_due_ts)))
           AS deliveries
  FROM deliveries GROUP BY {_KEY}
), linked AS (
  SELECT m.*, p.ts AS pub_ts, p.command AS publish_cmd, p.conn_id AS publisher,
         p.packet AS publish_packet,
         row_number() OVER (PARTITION BY m.server, m.topic, m.channel, m.msg_id
                            ORDER BY p.ts DESC, p.conn_id, p.seq) AS r
  FROM per AS m LEFT JOIN {PUBLISHED} AS p
    ON p.host = {host('m.server')} AND coalesce(p.broker = m.server, true)
       AND m.topic = p.topic AND m.body_sha1 = p.body_sha1 AND p.ts <= m.first_delivery_ts
)
SELECT {_KEY}, pub_ts AS publish_ts, publish_cmd, publisher, publish_packet, created_ts,
       first_delivery_ts, deliveries_count, deliveries, outcome, outcome_ts AS final_ts,
       touches, requeues, timeouts,
       first_delivery_ts - coalesce(pub_ts, created_ts) AS queue_latency_s,
       CASE WHEN outcome = {FIN} THEN outcome_ts - coalesce(pub_ts, created_ts) END
         AS end_to_end_latency_s,
       CASE WHEN outcome = {FIN} THEN outcome_ts - last_delivery_ts END
         AS processing_latency_s
FROM linked WHERE r = 1
"""

_MESSAGE_SOURCES = f"""
SELECT {server()} AS server,
       CAST(sum(CASE WHEN name = {MESSAGE} THEN 1 ELSE 0 END) AS BIGINT) AS message_frames,
       CAST(sum(CASE WHEN name = {MESSAGE} AND msg_id IS NULL THEN 1 ELSE 0 END) AS BIGINT)
         AS cut_ids,
       min({FIRST_PACKET}) FILTER (WHERE name = {MESSAGE} AND msg_id IS NULL)
         AS first_cut_packet,
       CAST(sum(CASE WHEN name IN ({_PUBLISHES}) THEN 1 ELSE 0 END) AS BIGINT) AS publishes,
       min({FIRST_PACKET}) FILTER (WHERE name IN ({_PUBLISHES})) AS first_publish_packet,
       CAST(sum(CASE WHEN name = {SUB} THEN 1 ELSE 0 END) AS BIGINT) AS subscriptions,
       min({FIRST_PACKET}) FILTER (WHERE name = {SUB}) AS first_sub_packet
FROM {FRAMES} WHERE {UNITS} GROUP BY {server()}
"""

_PUBLISHED = f"""
SELECT {host(server())} AS host, {server()} AS broker, topic, ts, name AS command, conn_id,
       {FIRST_PACKET} AS packet, seq, explode(bodies) AS body_sha1
FROM {FRAMES} WHERE name IN ({_PUBLISHES})
"""

_HEARTBEATS = f"""
WITH both_ AS (
  SELECT conn_id, ts, seq, {FIRST_PACKET} AS packet,
         CASE WHEN {COMMAND} THEN 'C' ELSE 'H' END AS t,
         CASE WHEN {COMMAND} THEN name END AS cmd
  FROM {FRAMES}
  WHERE ((name = {RESPONSE} AND data = {_HEARTBEAT})
         OR ({COMMAND} AND dir = '{C2S}'))
    -- a connection nsqd sent no heartbeat has no row (counting its commands costs)
    AND conn_id IN (SELECT conn_id FROM {FRAMES}
                    WHERE name = {RESPONSE} AND data = {_HEARTBEAT})
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
  -- nsqd closed it: its side ended (FIN or RST) before the client's did, if the client's did
  SELECT conn_id,
         coalesce(min(ts) FILTER (WHERE dir = '{S2C}' AND {CLOSED})
                    <= coalesce(min(ts) FILTER (WHERE dir = '{C2S}' AND {CLOSED}),
                                max(ts) FILTER (WHERE dir = '{S2C}' AND {CLOSED})),
                  false) AS server_closed
  FROM {FRAMES} WHERE {FLOW_END} GROUP BY conn_id
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
       CASE WHEN s.response = {_verb(ev.Nop)} THEN s.response_ts - s.ts END AS nop_response_s,
       CAST(s.missed_in_row AS BIGINT) AS missed_in_row,
       (s.k = s.last_k AND s.missed_in_row >= 1 AND coalesce(e.server_closed, false))
         AS closed_after
FROM streaks AS s LEFT JOIN ends AS e ON s.conn_id = e.conn_id
"""

_PUBLISHES_VIEW = f"""
SELECT q.conn_id, q.seq, q.ts, element_at(q.packets, 1) AS packet,
       q.name AS command, a.name AS answer,
       CASE WHEN a.name = {ERROR} THEN split_part(a.data, ' ', 1) ELSE a.data END
         AS answer_text,
       p.packet AS answer_packet, a.ts - q.ts AS latency_s
FROM {FRAMES} AS q
LEFT JOIN {ANSWER_PAIRS} AS p ON p.conn_id = q.conn_id AND p.command_seq = q.seq
LEFT JOIN {FRAMES} AS a ON a.conn_id = p.conn_id AND a.seq = p.seq
WHERE q.dir = '{C2S}' AND q.name IN ({_PUBLISHES})
"""

_FLOW_CONTROL = f"""
WITH ev AS (
  SELECT conn_id, ts, 1 AS prio, seq, {RDY} AS event, count AS rdy, 0 AS delta,
         CAST(NULL AS STRING) AS msg_id
  FROM {FRAMES} WHERE name = {RDY}
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

_CONNECTIONS = f"""
WITH base AS (
  SELECT conn_id,
         CAST(sum(CASE WHEN name = {MESSAGE} THEN 1 ELSE 0 END) AS BIGINT) AS messages_in,
         CAST(sum(CASE WHEN name = {PUB} THEN 1
                       WHEN name IN ({MPUB}, {DPUB}) THEN size(bodies) ELSE 0 END) AS BIGINT)
           AS messages_published,
         max_by(count, seq) FILTER (WHERE name = {RDY}) AS last_rdy,
         max(count) FILTER (WHERE name = {RDY}) AS max_rdy,
         CAST(sum(CASE WHEN name = {RDY} THEN 1 ELSE 0 END) AS BIGINT) AS rdy_changes
  FROM {FRAMES} WHERE conn_id IS NOT NULL AND {UNITS} GROUP BY conn_id
), beats AS (
  SELECT conn_id, count(*) AS heartbeats,
         CAST(sum(CASE WHEN answered THEN 0 ELSE 1 END) AS BIGINT) AS missed_heartbeats,
         avg(nop_response_s) AS mean_nop_response_s,
         bool_or(closed_after) AS closed_for_missed_heartbeats
  FROM heartbeats GROUP BY conn_id
)
SELECT b.conn_id, b.messages_in, b.messages_published,
       get_json_object(i.identify, '$.client_id') AS client_id,
       get_json_object(i.identify, '$.hostname') AS hostname,
       get_json_object(i.identify, '$.user_agent') AS user_agent,
       get_json_object(i.identify, '$.feature_negotiation') AS feature_negotiation,
       get_json_object(i.identify, '$.heartbeat_interval') AS heartbeat_interval,
       i.identify, i.identify_packet, i.negotiated, i.negotiated_packet, i.msg_timeout_ms,
       i.topic, i.channel, i.sub_packet, b.last_rdy, b.max_rdy, b.rdy_changes,
       CASE WHEN get_json_object(i.negotiated, '$.snappy') = 'true' THEN 'snappy'
            WHEN get_json_object(i.negotiated, '$.deflate') = 'true' THEN 'deflate'
       END AS compression,
       CASE WHEN i.channel IS NOT NULL THEN 'consumer'
            WHEN b.messages_published > 0 THEN 'producer' ELSE 'other' END AS role,
       h.heartbeats, h.missed_heartbeats, h.mean_nop_response_s,
       h.closed_for_missed_heartbeats
FROM base AS b LEFT JOIN conn_info AS i ON b.conn_id = i.conn_id
LEFT JOIN beats AS h ON b.conn_id = h.conn_id
"""

_REFUSALS = f"""
SELECT p.conn_id, p.command_seq AS seq, p.command, split_part(e.data, ' ', 1) AS code,
       e.data AS text, p.seq AS error_seq, p.ts AS error_ts, p.packet AS error_packet
FROM {ANSWER_PAIRS} AS p JOIN {FRAMES} AS e ON e.conn_id = p.conn_id AND e.seq = p.seq
WHERE p.name = {ERROR} AND p.command IN ({_ANSWERS_AND_PUBLISHES})
"""

_CHANNEL_DEPTH = f"""
WITH channels AS (
  SELECT server, topic, channel, min(ts) AS first_seen
  FROM (SELECT {server()} AS server, topic, channel, ts FROM {FRAMES}
        WHERE name = {SUB} AND violation IS NULL AND reason IS NULL
        UNION ALL
        SELECT server, topic, channel, ts FROM deliveries) AS c
  WHERE topic IS NOT NULL AND channel IS NOT NULL
  GROUP BY server, topic, channel
), firsts AS (
  SELECT *, row_number() OVER (PARTITION BY server, topic ORDER BY first_seen, channel) = 1
              AS first_channel
  FROM channels
), pubs AS (
  SELECT {server('f.')} AS server, f.topic,
         f.ts + CASE WHEN f.name = {DPUB} THEN coalesce(f.delay_ms, 0) / 1000.0 ELSE 0 END
           AS ts,
         size(f.bodies) AS n
  FROM {FRAMES} AS f LEFT JOIN refusals AS r ON r.conn_id = f.conn_id AND r.seq = f.seq
  WHERE f.name IN ({_PUBLISHES}) AND f.violation IS NULL AND r.seq IS NULL
    AND f.bodies IS NOT NULL
), ev AS (
  SELECT c.server, c.topic, c.channel, p.ts, p.n AS published, 0 AS delivered, p.n AS delta
  FROM pubs AS p JOIN firsts AS c ON p.server = c.server AND p.topic = c.topic
   AND (c.first_channel OR p.ts >= c.first_seen)
  UNION ALL
  SELECT server, topic, channel,
         CASE WHEN outcome = {REQ} THEN outcome_ts + coalesce(req_delay_ms, 0) / 1000.0
              ELSE outcome_ts END AS ts,
         0 AS published, 0 AS delivered, 1 AS delta
  FROM deliveries WHERE outcome IN ({REQ}, 'timeout')
  UNION ALL
  SELECT server, topic, channel, ts, 0 AS published,
         CASE WHEN delivery = 1 THEN 1 ELSE 0 END AS delivered, -1 AS delta
  FROM deliveries
), steps AS (
  -- what happens at one instant counts as one change (ties in time have no order)
  SELECT server, topic, channel, ts, CAST(sum(published) AS BIGINT) AS published,
         CAST(sum(delivered) AS BIGINT) AS delivered, sum(delta) AS delta
  FROM ev GROUP BY server, topic, channel, ts
), run AS (
  SELECT *, sum(delta) OVER w AS net,
         CAST(sum(published) OVER w AS BIGINT) AS published_so_far,
         CAST(sum(delivered) OVER w AS BIGINT) AS delivered_so_far
  FROM steps
  WINDOW w AS (PARTITION BY server, topic, channel ORDER BY ts
               ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
)
SELECT r.server, r.topic, r.channel, r.ts, r.published, r.delivered, r.published_so_far,
       r.delivered_so_far,
       CAST(r.net + greatest(0, -min(r.net) OVER (PARTITION BY r.server, r.topic, r.channel))
            AS BIGINT) AS depth,
       coalesce(lead(r.ts) OVER (PARTITION BY r.server, r.topic, r.channel ORDER BY r.ts),
                greatest(e.last_ts, r.ts)) AS until_ts
FROM run AS r JOIN server_ends AS e ON e.server = r.server
"""

_SERVER_ENDS = f"""
SELECT {server()} AS server, max(ts) AS last_ts FROM {FRAMES} GROUP BY {server()}
"""

_CONSUMER_FLOW = f"""
WITH cons AS (
  SELECT i.conn_id, {server('c.')} AS server, i.topic, i.channel, c.start_ts, c.end_ts,
         get_json_object(i.identify, '$.client_id') AS client_id,
         get_json_object(i.identify, '$.hostname') AS hostname
  FROM conn_info AS i JOIN (SELECT conn_id, min(flow) AS flow, min(ts) AS start_ts,
                                   max(ts) AS end_ts
                            FROM {FRAMES} GROUP BY conn_id) AS c ON c.conn_id = i.conn_id
  WHERE i.channel IS NOT NULL
), ev AS (
  SELECT conn_id, ts, count AS rdy, seq, 0 AS d, CAST(NULL AS BIGINT) AS depth
  FROM {FRAMES} WHERE name = {RDY} AND violation IS NULL AND reason IS NULL
  UNION ALL
  SELECT conn_id, ts, NULL, NULL, 1, NULL FROM deliveries
  UNION ALL
  SELECT conn_id, outcome_ts, NULL, NULL, -1, NULL FROM deliveries
  WHERE outcome_ts IS NOT NULL
  UNION ALL
  SELECT c.conn_id, d.ts, NULL, NULL, 0, d.depth
  FROM channel_depth AS d JOIN cons AS c ON c.server = d.server AND c.topic = d.topic
   AND c.channel = d.channel
  UNION ALL
  SELECT conn_id, start_ts, NULL, NULL, 0, NULL FROM cons
), instants AS (
  -- what happens at one instant counts as one change: RDY as the last one sent then
  SELECT conn_id, ts, max_by(rdy, seq) AS rdy, sum(d) AS d, max(depth) AS depth
  FROM ev GROUP BY conn_id, ts
), run AS (
  SELECT a.conn_id, a.ts,
         max_by(a.rdy, CASE WHEN a.rdy IS NOT NULL THEN a.ts END) OVER w AS rdy,
         CAST(sum(a.d) OVER w AS BIGINT) AS in_flight,
         max_by(a.depth, CASE WHEN a.depth IS NOT NULL THEN a.ts END) OVER w AS depth,
         lead(a.ts) OVER (PARTITION BY a.conn_id ORDER BY a.ts) AS next_ts
  FROM instants AS a
  WINDOW w AS (PARTITION BY a.conn_id ORDER BY a.ts
               ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
)
SELECT c.conn_id, c.server, c.topic, c.channel, c.client_id, c.hostname, r.ts,
       least(coalesce(r.next_ts, c.end_ts), c.end_ts) AS until_ts,
       CAST(coalesce(r.rdy, 0) AS BIGINT) AS rdy, r.in_flight,
       CAST(coalesce(r.depth, 0) AS BIGINT) AS depth,
       (r.in_flight > 0 AND r.in_flight >= coalesce(r.rdy, 0) * {STARVATION_RATIO}) AS starved
FROM run AS r JOIN cons AS c ON c.conn_id = r.conn_id
WHERE r.ts >= c.start_ts AND r.ts < c.end_ts
"""

ANALYSES = Analyses(
    views=(
        View("conn_info", _CONN_INFO, """Per NSQ connection: its subscription (the first
SUB), what IDENTIFY asked for and the JSON answer negotiated (with their packets), and
the message timeout in force.""", step=True),
        View("deliveries", _DELIVERIES, """One row per delivery: message, connection,
attempt, how and when it ended (packet numbers of the delivery and of its FIN/REQ), when
its requeue was due (after a REQ or a timeout) and when the next delivery was seen."""),
        View("nsq_published", _PUBLISHED, """NSQ's part of the shared ``published`` table:
one row per message body a PUB, MPUB or DPUB carried, to the broker it was sent to.""",
             step=True),
        View("messages", _MESSAGES_VIEW, """One row per message (:data:`MESSAGE_KEY`):
publish (over whatever protocol), deliveries, outcome, latencies."""),
        View("message_sources", _MESSAGE_SOURCES, """Per broker, where the messages
table's rows come from and why it may have none: message frames (a message is known by
the id its deliveries carry), those the capture cut short of their id (its snaplen),
publishes and subscriptions (SUB: a consumer), each with its first packet."""),
        View("heartbeats", _HEARTBEATS, """One row per ``_heartbeat_``: interval, the
client's answer, missed streaks."""),
        View("publishes", _PUBLISHES_VIEW, """One row per PUB/MPUB/DPUB (``seq``: its order in
the connection -- two PUBs of one packet share their time): nsqd's answer (OK
or its error code), its packet and the latency -- the answer the decoder paired with it
(``answer_pairs``; null: none was seen)."""),
        View("flow_control", _FLOW_CONTROL, """RDY and in-flight per connection over time,
with the starvation test at each step."""),
        View("nsq_connections", _CONNECTIONS, """NSQ's columns of the ``connections``
table, one row per NSQ connection: who (IDENTIFY), what (SUB, messages in and
published), negotiated, RDY, heartbeats.""", step=True),
        View("refusals", _REFUSALS, """One row per answer, FIN, REQ, TOUCH or
publish nsqd refused: the error frame (its code, text, packet) and the refused command
(``seq`` in its connection), as ``answer_pairs`` pairs them.""", step=True),
        View("server_ends", _SERVER_ENDS, """Per broker, the time of its last record in
the capture (one row each: what the pipeline computes over a whole broker before its
tasks analyse parts of it).""", step=True),
        View("channel_depth", _CHANNEL_DEPTH, """One row per change of each channel's
queue: messages published to its topic (each channel takes a copy; before a topic's
first channel exists nsqd keeps them for it), delivered, requeued (REQ, at its delay)
and timed out, and the ``depth`` -- messages ready and not in flight, as far as the
capture shows (at least: a channel that delivers more than the capture saw published
had that many waiting before), until ``until_ts`` (the next change, or the broker's last
record in the capture)."""),
        View("consumer_flow", _CONSUMER_FLOW, """Per subscribed connection, its state
from one change to the next (``ts`` to ``until_ts``): the RDY it gave, the messages it
had in flight, the depth of its channel's queue (:data:`channel_depth`), and the client
guide's starvation test.""", step=True),
        View("guide", GUIDE, """One row per verdict of the client guide (``nsqviz
conformance``'s rules of one connection) on each NSQ connection captured whole: pass,
fail or not exercised, in words, with the packets that show it
(:mod:`nsqviz.conformance.frames`).""",
             python="nsqviz.conformance.frames:verdicts"),
        View("guide_failures", GUIDE_FAILURES, """The failed verdicts of ``guide``, for
the doctor: the checks run on each connection's control rows only where no rule that reads
every message can fail (:mod:`nsqviz.nsq.analyses_guide`).""", step=True,
             python="nsqviz.conformance.frames:failures"),
    ),
    connections=ConnectionColumns("nsq_connections", (
        ("messages_in", "0"), ("messages_published", "0"),
        ("client_id", None), ("hostname", None), ("user_agent", None),
        ("feature_negotiation", None), ("heartbeat_interval", None),
        ("identify", None), ("identify_packet", None), ("negotiated", None),
        ("negotiated_packet", None), ("msg_timeout_ms", None),
        ("topic", None), ("channel", None), ("sub_packet", None),
        ("last_rdy", None), ("max_rdy", None), ("rdy_changes", "0"),
        ("compression", None), ("role", "'other'"),
        ("heartbeats", "0"), ("missed_heartbeats", "0"), ("mean_nop_response_s", None),
        ("closed_for_missed_heartbeats", "false"),
    )),
    errors=ErrorAnswers(answer=f"name = {ERROR}", code="split_part(data, ' ', 1)",
                        text="data"),
    publishes=Publishes("nsq_published"),
    held=Held("flow_control", "in_flight", "rdy", "messages nsqd sent it stayed in flight",
              "RDY"),
)
"""NSQ's analyses (:class:`nsqviz.sql.Analyses`), read through
:attr:`nsqviz.nsq.protocol.NsqProtocol.analyses`."""
