"""NSQ's doctor rules of messages in flight: a delivery its client answered too late or
never (nsqd's msg_timeout), a message redelivered until the client should give it up,
a redelivery nsqd itself was late with -- found in the ``deliveries`` table
(:mod:`nsqviz.nsq.analyses`) beside the client's answers; :mod:`nsqviz.nsq.rules` lists
them with the others.
"""

from __future__ import annotations

from nsqviz.doctor.rule import Rule, Severity, Threshold, evidence, figures
from nsqviz.nsq.analyses import DEFAULT_MSG_TIMEOUT_MS
from nsqviz.nsq.rules_sql import FIN, FRAMES, NOT_IN_FLIGHT, REQ, seconds

__all__ = [
    "LATE_ANSWER",
    "MSG_TIMEOUT",
    "MSG_TIMEOUT_DEFAULT",
    "POISON_ATTEMPTS",
    "POISON_MESSAGE",
    "REDELIVERY_LATE",
    "REDELIVERY_LATE_S",
]

POISON_ATTEMPTS = Threshold(
    "POISON_ATTEMPTS", 5, "attempts",
    "go-nsq's MaxAttempts and pynsq's max_tries default to 5, after which the client "
    "guide has the library give a message up (FIN it, and call a give-up handler)")
REDELIVERY_LATE_S = Threshold(
    "REDELIVERY_LATE_S", 1.0, "s",
    "nsqd's queue scan looks for due messages every --queue-scan-interval (100 ms) on a "
    "random set of channels, so some hundred milliseconds late is its ordinary pace; a "
    "channel created since nsqd last read its channel list (every 5 s) waits up to 5 s")
MSG_TIMEOUT_DEFAULT = Threshold(
    "DEFAULT_MSG_TIMEOUT_MS", DEFAULT_MSG_TIMEOUT_MS, "ms",
    "nsqd's --msg-timeout default: the timeout of a delivery whose connection neither "
    "asked for nor negotiated one")

_MSG_TIMEOUT = f"""
WITH t AS (
  SELECT d.*, n.ts AS next_ts, n.packet AS next_packet, n.conn_id AS next_conn,
         n.attempts AS next_attempts,
         coalesce(c.ended_by IN ('fin', 'rst') AND c.end_ts < d.outcome_ts, false)
           AS after_close
  FROM deliveries AS d
  LEFT JOIN deliveries AS n ON n.server = d.server AND n.topic = d.topic
   AND n.channel = d.channel AND n.msg_id = d.msg_id AND n.delivery = d.delivery + 1
  LEFT JOIN connections AS c ON c.conn_id = d.conn_id
  WHERE d.outcome = 'timeout'
), ev_rows AS (
  SELECT server AS k_server, conn_id AS k_conn, ts, packet, conn_id, msg_id,
         'delivered (attempt ' || CAST(attempts AS STRING) ||
         '), not answered within msg_timeout' AS what
  FROM t
  UNION ALL
  SELECT server, conn_id, next_ts, next_packet, next_conn, msg_id,
         'delivered again (attempt ' || CAST(next_attempts AS STRING) || ')'
  FROM t WHERE next_ts IS NOT NULL
), evd AS ({evidence("ev_rows", ("k_server", "k_conn"))}
), per AS (
  SELECT server, conn_id, min(topic) AS topic, min(channel) AS channel,
         count(*) AS timeouts, count(DISTINCT msg_id) AS timed_out,
         CAST(sum(CASE WHEN next_ts IS NOT NULL THEN 1 ELSE 0 END) AS BIGINT) AS redelivered,
         coalesce(max(msg_timeout_ms), {DEFAULT_MSG_TIMEOUT_MS}) AS msg_timeout_ms,
         greatest(max(attempts), coalesce(max(next_attempts), 0)) AS max_attempts,
         CAST(sum(CASE WHEN after_close THEN 1 ELSE 0 END) AS BIGINT) AS after_close
  FROM t GROUP BY server, conn_id
), delivered AS (
  SELECT conn_id, count(DISTINCT msg_id) AS messages FROM deliveries GROUP BY conn_id
)
SELECT p.server, p.conn_id, e.first_ts AS ts, e.evidence,
       {figures("topic", "channel", "timeouts", "timed_out", "messages", "redelivered",
                "msg_timeout_ms", "max_attempts", "after_close")} AS figures
FROM per AS p JOIN delivered AS m ON m.conn_id = p.conn_id
JOIN evd AS e ON e.k_server = p.server AND e.k_conn = p.conn_id
"""

MSG_TIMEOUT = Rule(
    "nsq.msg-timeout", "deliveries that timed out in flight and came back",
    Severity.WARNING, _MSG_TIMEOUT,
    summary="{timed_out} of {messages:/message/messages} of {topic}/{channel} timed out in "
            "flight ({timeouts:/timeout/timeouts}, msg_timeout {msg_timeout_ms} ms) and came "
            "back, attempts up to {max_attempts}",
    explanation="nsqd gives every message it delivers msg_timeout to be answered -- FIN "
                "(done), REQ (again later) or TOUCH (more time) -- and requeues one that "
                "is not: it times out in flight and is delivered again, to this consumer "
                "or another, with attempts one higher. Its work is done again; a handler "
                "that finishes after the timeout has done it twice.{?after_close} "
                "{after_close} of these timed out after the connection had closed with "
                "them in flight: nsqd keeps a closed connection's messages in flight "
                "until their timeout.{/}",
    change="Answer within msg_timeout: make the handler faster, TOUCH while it works "
           "(the client guide: a library must not TOUCH on its own), or ask for more "
           "time with IDENTIFY's msg_timeout (up to nsqd's --max-msg-timeout)."
           "{?after_close} Before closing, answer what is in flight (the guide: CLS, "
           "wait for CLOSE_WAIT, then FIN or REQ the rest).{/}",
    thresholds=(MSG_TIMEOUT_DEFAULT,),
)

_LATE_ANSWER = f"""
WITH late AS (
  SELECT r.conn_id, r.command, r.code, r.error_ts, r.error_packet, c.ts AS answer_ts,
         element_at(c.packets, 1) AS answer_packet, c.msg_id,
         d.server, d.topic, d.channel, d.ts AS delivered_ts, d.packet AS delivered_packet,
         d.msg_timeout_ms, n.ts AS next_ts, n.packet AS next_packet, n.conn_id AS next_conn,
         n.attempts AS next_attempts,
         row_number() OVER (PARTITION BY r.conn_id, r.seq ORDER BY d.delivery DESC) AS k
  FROM refusals AS r
  JOIN {FRAMES} AS c ON c.conn_id = r.conn_id AND c.seq = r.seq
  JOIN deliveries AS d ON d.conn_id = r.conn_id AND d.msg_id = c.msg_id AND d.ts < c.ts
  LEFT JOIN deliveries AS n ON n.server = d.server AND n.topic = d.topic
   AND n.channel = d.channel AND n.msg_id = d.msg_id AND n.delivery = d.delivery + 1
  WHERE r.code IN ({NOT_IN_FLIGHT}) AND d.outcome = 'timeout'
), answers AS (SELECT * FROM late WHERE k = 1
), ev_rows AS (
  SELECT server AS k_server, conn_id AS k_conn, delivered_ts AS ts,
         delivered_packet AS packet, conn_id, msg_id, 'delivered' AS what FROM answers
  UNION ALL
  SELECT server, conn_id, answer_ts, answer_packet, conn_id, msg_id,
         command || ' ' || CAST({seconds("answer_ts - delivered_ts")} AS STRING) ||
         ' s after delivery' FROM answers
  UNION ALL
  SELECT server, conn_id, error_ts, error_packet, conn_id, msg_id, code || ': refused'
  FROM answers
  UNION ALL
  SELECT server, conn_id, next_ts, next_packet, next_conn, msg_id,
         'delivered again (attempt ' || CAST(next_attempts AS STRING) || ')'
  FROM answers WHERE next_ts IS NOT NULL
), evd AS ({evidence("ev_rows", ("k_server", "k_conn"))}
), per AS (
  SELECT server, conn_id, count(*) AS answers,
         array_join(array_sort(collect_set(command)), '/') AS commands,
         array_join(array_sort(collect_set(code)), '/') AS codes,
         {seconds("max(answer_ts - delivered_ts)")} AS late_s,
         coalesce(max(msg_timeout_ms), {DEFAULT_MSG_TIMEOUT_MS}) AS msg_timeout_ms,
         CAST(sum(CASE WHEN next_ts IS NOT NULL THEN 1 ELSE 0 END) AS BIGINT) AS twice
  FROM answers GROUP BY server, conn_id
)
SELECT p.server, p.conn_id, e.first_ts AS ts, e.evidence,
       {figures("answers", "commands", "codes", "late_s", "msg_timeout_ms", "twice")}
         AS figures
FROM per AS p JOIN evd AS e ON e.k_server = p.server AND e.k_conn = p.conn_id
"""

LATE_ANSWER = Rule(
    "nsq.late-answer", "FIN, REQ or TOUCH refused because the message had left flight",
    Severity.ERROR, _LATE_ANSWER,
    summary="{answers:/answer/answers} ({commands}) sent up to {late_s:.3f} s after "
            "delivery (msg_timeout {msg_timeout_ms} ms) refused with {codes}: the messages "
            "had timed out{?twice}; {twice:/message was/messages were} delivered again and "
            "processed twice{/}",
    explanation="An answer counts only while its message is in flight on the connection. "
                "These came after msg_timeout: nsqd had already timed the messages out "
                "and requeued them, so it answered {codes} (not fatal: the client guide "
                "calls these errors a matter of time) and the work the handler finished "
                "was not recorded -- the message is delivered again and handled again.",
    change="Answer within msg_timeout: TOUCH a message while a slow handler works on it, "
           "or ask for a longer timeout with IDENTIFY's msg_timeout (up to nsqd's "
           "--max-msg-timeout); make the handler idempotent, since NSQ delivers at least "
           "once.",
)

_POISON = f"""
WITH m AS (
  SELECT server, topic, channel, msg_id, max(attempts) AS max_attempts,
         min(attempts) AS first_attempts, count(*) AS deliveries,
         CAST(sum(CASE WHEN outcome = {REQ} THEN 1 ELSE 0 END) AS BIGINT) AS requeues,
         CAST(sum(CASE WHEN outcome = 'timeout' THEN 1 ELSE 0 END) AS BIGINT) AS timeouts,
         max_by(outcome, delivery) AS outcome, max_by(conn_id, delivery) AS last_conn
  FROM deliveries GROUP BY server, topic, channel, msg_id
), poison AS (
  SELECT * FROM m
  WHERE max_attempts >= {POISON_ATTEMPTS.value} AND outcome <> {FIN} AND requeues + timeouts >= 2
), ev_rows AS (
  SELECT d.server AS k_server, d.topic AS k_topic, d.channel AS k_channel,
         d.msg_id AS k_id, d.ts, d.packet, d.conn_id, d.msg_id,
         'delivered (attempt ' || CAST(d.attempts AS STRING) || ')' AS what
  FROM deliveries AS d JOIN poison AS p ON p.server = d.server AND p.topic = d.topic
   AND p.channel = d.channel AND p.msg_id = d.msg_id
  UNION ALL
  SELECT d.server, d.topic, d.channel, d.msg_id, d.outcome_ts, d.outcome_packet, d.conn_id,
         d.msg_id, CASE WHEN d.outcome = 'timeout' THEN 'timed out in flight'
                        ELSE d.outcome || ' (delay ' || CAST(d.req_delay_ms AS STRING) ||
                             ' ms)' END
  FROM deliveries AS d JOIN poison AS p ON p.server = d.server AND p.topic = d.topic
   AND p.channel = d.channel AND p.msg_id = d.msg_id
  WHERE d.outcome IN ({REQ}, 'timeout')
), evd AS ({evidence("ev_rows", ("k_server", "k_topic", "k_channel", "k_id"))}
)
SELECT p.server, CASE WHEN c.n = 1 THEN p.last_conn END AS conn_id, e.first_ts AS ts,
       e.evidence,
       {figures("p.msg_id", "p.topic", "p.channel", "p.deliveries", "p.requeues",
                "p.timeouts", "p.first_attempts", "p.max_attempts", "p.outcome")}
         AS figures
FROM poison AS p
JOIN evd AS e ON e.k_server = p.server AND e.k_topic = p.topic AND e.k_channel = p.channel
 AND e.k_id = p.msg_id
JOIN (SELECT server, topic, channel, msg_id, count(DISTINCT conn_id) AS n FROM deliveries
      GROUP BY server, topic, channel, msg_id) AS c
  ON c.server = p.server AND c.topic = p.topic AND c.channel = p.channel
 AND c.msg_id = p.msg_id
"""

POISON_MESSAGE = Rule(
    "nsq.poison-message", "a message requeued or timed out again and again, never FINed",
    Severity.WARNING, _POISON,
    summary="message {msg_id} of {topic}/{channel} delivered {deliveries:/time/times} "
            "(attempts {first_attempts} to {max_attempts}): {requeues} REQ, "
            "{timeouts:/timeout/timeouts}, never FINed",
    explanation="Each delivery failed -- the handler REQ'd it or let it time out -- and "
                "nsqd delivered it again with attempts one higher, past {POISON_ATTEMPTS}. "
                "The client guide has a library compare attempts with a configured maximum "
                "and give up a message beyond it (FIN it, and hand it to a give-up "
                "handler that logs or stores it); without that, a message the handler "
                "cannot process comes back forever, each time taking a place in flight.",
    change="Set the consumer's max attempts (go-nsq MaxAttempts, pynsq max_tries) and a "
           "give-up handler that FINs and keeps the message; fix what the handler cannot "
           "take in this message.",
    thresholds=(POISON_ATTEMPTS,),
)

_REDELIVERY_LATE = f"""
WITH r AS (
  SELECT d.*, n.packet AS next_packet, n.conn_id AS next_conn, n.attempts AS next_attempts,
         CASE WHEN d.outcome = {REQ} THEN d.outcome_ts + coalesce(d.req_delay_ms, 0) / 1000.0
              ELSE d.outcome_ts END AS due_ts
  FROM deliveries AS d
  JOIN deliveries AS n ON n.server = d.server AND n.topic = d.topic
   AND n.channel = d.channel AND n.msg_id = d.msg_id AND n.delivery = d.delivery + 1
  WHERE d.outcome IN ({REQ}, 'timeout')
), late AS (
  SELECT * FROM r WHERE next_delivery_ts - due_ts >= {REDELIVERY_LATE_S.value}
), ev_rows AS (
  SELECT server AS k_server, conn_id AS k_conn,
         CASE WHEN outcome = {REQ} THEN outcome_ts ELSE ts END AS ts,
         CASE WHEN outcome = {REQ} THEN outcome_packet ELSE packet END AS packet,
         conn_id, msg_id,
         CASE WHEN outcome = {REQ}
              THEN 'REQ, delay ' || CAST(req_delay_ms AS STRING) || ' ms'
              ELSE 'delivered; timed out in flight after '
                   || CAST(msg_timeout_ms AS STRING) || ' ms' END AS what
  FROM late
  UNION ALL
  SELECT server, conn_id, next_delivery_ts, next_packet, next_conn, msg_id,
         'delivered again (attempt ' || CAST(next_attempts AS STRING) || '), '
         || CAST({seconds("next_delivery_ts - due_ts")} AS STRING) || ' s after it was due'
  FROM late
), evd AS ({evidence("ev_rows", ("k_server", "k_conn"))}
), per AS (
  SELECT server, conn_id, min(topic) AS topic, min(channel) AS channel, count(*) AS late,
         CAST(sum(CASE WHEN outcome = {REQ} THEN 1 ELSE 0 END) AS BIGINT) AS requeues,
         CAST(sum(CASE WHEN outcome = 'timeout' THEN 1 ELSE 0 END) AS BIGINT) AS timeouts,
         {seconds("min(next_delivery_ts - due_ts)")} AS least_s,
         {seconds("max(next_delivery_ts - due_ts)")} AS most_s
  FROM late GROUP BY server, conn_id
)
SELECT p.server, p.conn_id, e.first_ts AS ts, e.evidence,
       {figures("topic", "channel", "late", "requeues", "timeouts", "least_s", "most_s")}
         AS figures
FROM per AS p JOIN evd AS e ON e.k_server = p.server AND e.k_conn = p.conn_id
"""

REDELIVERY_LATE = Rule(
    "nsq.redelivery-late", "requeued messages redelivered long after they were due",
    Severity.INFO, _REDELIVERY_LATE,
    summary="{late:/requeued message/requeued messages} of {topic}/{channel} ({requeues} "
            "REQ, {timeouts:/timeout/timeouts}) redelivered up to {most_s:.3f} s after due "
            "(at least {least_s:.3f} s late)",
    explanation="A REQ'd message is due again after its delay, a timed-out one at once; "
                "nsqd moves it back to the queue when its queue scan finds it due. The scan "
                "runs every --queue-scan-interval on a random set of channels and reads "
                "nsqd's list of channels only every 5 seconds, so a channel created since "
                "its last read is not scanned yet. The delay is nsqd's timing, not the "
                "client's doing -- but a REQ delay or a backoff counts from the due time.",
    change="Nothing on the client. Where the delay matters: create channels before their "
           "consumers need them (nsqd's POST /channel/create), or give nsqd more "
           "--queue-scan-workers and a shorter --queue-scan-interval when it has many "
           "channels.",
    thresholds=(REDELIVERY_LATE_S,),
)
