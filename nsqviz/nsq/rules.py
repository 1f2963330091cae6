"""NSQ's doctor rules: what goes wrong between NSQ clients and nsqd, found in the analyses'
tables (:mod:`nsqviz.nsq.analyses`) and told in the protocol's words
(:mod:`nsqviz.doctor` says what a rule is). The rules of answers and connections are
here; those of messages in flight in :mod:`.rules_flight`, of RDY and the channels'
queues in :mod:`.rules_rdy`.

Every command, frame and error code comes from NSQ's tables (:mod:`nsqviz.nsq.commands`,
:class:`~nsqviz.nsq.errors.ErrorCode`); every threshold is a constant here or there with
the reason for its value, and the findings quote it.
"""

from __future__ import annotations

from nsqviz.doctor.rule import Rule, Severity, Threshold, evidence, figures
from nsqviz.nsq.rules_flight import LATE_ANSWER, MSG_TIMEOUT, POISON_MESSAGE, REDELIVERY_LATE
from nsqviz.nsq.rules_rdy import RDY_RULES
from nsqviz.nsq.rules_sql import (
    CHANGE,
    ERROR,
    FATAL,
    FRAMES,
    PUBLISHES,
    WHY,
    case,
    seconds,
    server_of,
)
from nsqviz.sql import C2S, CLOSED, FLOW_END, S2C, quoted

__all__ = [
    "CHURN_CONNECTIONS",
    "CHURN_WINDOW_S",
    "GUIDE_WARNINGS",
    "HEARTBEAT_MISSES",
    "RULES",
]

HEARTBEAT_MISSES = Threshold(
    "HEARTBEAT_MISSES", 2, "heartbeats in a row",
    "nsqd closes a client it has not heard from in two heartbeat intervals (the protocol: "
    "after 2 unanswered _heartbeat_ responses nsqd times out and closes the connection); "
    "fewer count when nsqd did close -- a silence that began at IDENTIFY shows one "
    "heartbeat before the close on nsqd v1.3.0, run to run")
CHURN_CONNECTIONS = Threshold(
    "CHURN_CONNECTIONS", 10, "connections",
    "a producer or consumer keeps one long-lived connection per nsqd; ten in a row, each "
    "opened after the one before closed, is no restart or failover")
CHURN_WINDOW_S = Threshold(
    "CHURN_WINDOW_S", 60.0, "s",
    "at the client guide's reconnect backoff (8 s, 16 s, 32 s ...) a failing client opens "
    "at most about five connections a minute; ten is faster than any backoff")
GUIDE_WARNINGS = ("in-flight",)
"""The client guide's rules whose breach is a warning: answers for messages a client does
not hold, whose harm no other rule reports. The others are info: a habit of the library
(the first RDY, no CLS before closing, no feature negotiation), or a breach whose harm
another rule reports at its own severity (nsq.fatal-error for a refused state or RDY
count, nsq.heartbeat-missed, nsq.late-answer)."""

GUIDE_CHANGES = {
    "handshake": "Open each connection in the guide's order: the magic, IDENTIFY (read its "
                 "answer), SUB, then RDY.",
    "feature-negotiation": "Send IDENTIFY with feature_negotiation: true and keep to what "
                           "nsqd answers (its max_rdy_count, msg_timeout ...).",
    "initial-rdy": "Start each connection at RDY 1 and raise it as messages flow: the "
                   "number of connections is not known at first, max_in_flight is shared "
                   "out later.",
    "max-rdy-count": "Never send RDY above the max_rdy_count nsqd announced in its IDENTIFY "
                     "answer (2500 without feature negotiation).",
    "rdy-update": "Send RDY again only when the count left is 0 or below 25 % of the last "
                  "one sent, not after every message.",
    "heartbeat": "Answer every _heartbeat_ with NOP (or any command) before the next one.",
    "in-flight": "FIN, REQ or TOUCH only a message delivered on that connection and still "
                 "in flight, and FIN or REQ it once.",
    "state": "Send each command only in a state nsqd allows it in (SUB once, after "
             "IDENTIFY; RDY after SUB; nothing but answers after CLS).",
    "backoff": "In backoff send RDY 0 to every connection; when it ends send RDY 1 on one "
               "to test the waters, then the full share.",
    "cls-before-close": "Close a subscribed connection with CLS, wait for CLOSE_WAIT and "
                        "answer what is in flight, then close the socket.",
    "rdy-sum": "Keep the sum of RDY over a consumer's connections within max_in_flight.",
    "lookupd-polling": "Poll every nsqlookupd periodically, with jitter, and take the "
                       "union of what they answer.",
}
"""What to change for each rule of the client guide a connection breaks."""


# ------------------------------------------------------------------ the connection

_HEARTBEAT_MISSED = f"""
WITH h AS (
  SELECT b.*, c.ended_by, c.ended_from, c.end_packet, c.end_ts, c.heartbeat_interval,
         max(b.heartbeat) OVER (PARTITION BY b.conn_id) AS last_beat
  FROM heartbeats AS b JOIN connections AS c ON c.conn_id = b.conn_id
), proven AS (
  -- unanswered, and the client had its whole interval: a later heartbeat came, or the
  -- connection ended after it (the capture may stop before the last one's answer)
  SELECT *, NOT answered AND (heartbeat < last_beat OR ended_by IN ('fin', 'rst')) AS missed
  FROM h
), streaks AS (
  SELECT *, sum(CASE WHEN missed THEN 0 ELSE 1 END) OVER (
              PARTITION BY conn_id ORDER BY heartbeat
              ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS grp
  FROM proven
), runs AS (
  SELECT conn_id, grp, count(*) AS missed, min(ts) AS first_ts
  FROM streaks WHERE missed GROUP BY conn_id, grp
), server_end AS (
  SELECT conn_id, min_by(ts, seq) AS ts, min_by(element_at(packets, 1), seq) AS packet,
         min_by(reason, seq) AS how
  FROM {FRAMES} WHERE {FLOW_END} AND dir = '{S2C}' AND {CLOSED} GROUP BY conn_id
), client_end AS (
  SELECT conn_id, min(ts) AS ts
  FROM {FRAMES} WHERE {FLOW_END} AND dir = '{C2S}' AND {CLOSED} GROUP BY conn_id
), worst AS (
  -- {HEARTBEAT_MISSES.value} in a row; or fewer when nsqd closed the connection after them
  -- (before the client closed it): the silence began at the IDENTIFY that restarted its
  -- heartbeat clock, and the close took the place of the last heartbeat
  SELECT r.conn_id, max(r.missed) AS in_row, min(r.first_ts) AS first_miss
  FROM runs AS r
  LEFT JOIN server_end AS x ON x.conn_id = r.conn_id AND x.ts >= r.first_ts
  LEFT JOIN client_end AS y ON y.conn_id = r.conn_id
  WHERE r.missed >= {HEARTBEAT_MISSES.value}
     OR (x.ts IS NOT NULL AND (y.ts IS NULL OR x.ts <= y.ts))
  GROUP BY r.conn_id
), ev_rows AS (
  SELECT {server_of("s.conn_id")} AS k_server, s.conn_id AS k_conn, s.ts, s.packet, s.conn_id,
         CAST(NULL AS STRING) AS msg_id, '_heartbeat_ not answered' AS what
  FROM streaks AS s JOIN worst AS w ON w.conn_id = s.conn_id WHERE s.missed
  UNION ALL
  SELECT {server_of("x.conn_id")}, x.conn_id, x.ts, x.packet, x.conn_id, NULL,
         'nsqd closed the connection (' || upper(x.how) || ')'
  FROM server_end AS x JOIN worst AS w ON w.conn_id = x.conn_id AND x.ts >= w.first_miss
), evd AS ({evidence("ev_rows", ("k_server", "k_conn"))}
), per AS (
  SELECT w.conn_id, w.in_row, w.first_miss,
         CAST(sum(CASE WHEN s.missed THEN 1 ELSE 0 END) AS BIGINT) AS missed,
         count(*) AS heartbeats,
         coalesce(try_cast(max(s.heartbeat_interval) AS BIGINT),
                  CAST(round(1000 * percentile(s.interval_s, 0.5)) AS BIGINT))
           AS interval_ms
  FROM worst AS w JOIN streaks AS s ON s.conn_id = w.conn_id
  GROUP BY w.conn_id, w.in_row, w.first_miss
)
SELECT e.k_server AS server, p.conn_id, e.first_ts AS ts, e.evidence,
       {figures("p.in_row", "p.missed", "p.heartbeats", "p.interval_ms", "nsqd_closed",
                "close_after_s")} AS figures,
       nsqd_closed
FROM (SELECT p.*, x.ts IS NOT NULL AS nsqd_closed,
             {seconds("x.ts - p.first_miss")} AS close_after_s
      FROM per AS p LEFT JOIN server_end AS x ON x.conn_id = p.conn_id
       AND x.ts >= p.first_miss) AS p
JOIN evd AS e ON e.k_conn = p.conn_id
"""

HEARTBEAT_MISSED = Rule(
    "nsq.heartbeat-missed", "heartbeats unanswered, and whether nsqd closed",
    Severity.WARNING, _HEARTBEAT_MISSED,
    severity_sql="CASE WHEN nsqd_closed THEN 'error' ELSE 'warning' END",
    summary="{in_row:/heartbeat/heartbeats} in a row unanswered (of {heartbeats}, every "
            "{interval_ms} ms){?nsqd_closed}; nsqd closed the connection "
            "{close_after_s:.3f} s after the first{/}",
    explanation="nsqd sends _heartbeat_ every heartbeat_interval (IDENTIFY's, 30 s unless "
                "asked otherwise) and expects a command in return -- any command; NOP when "
                "the client has nothing to say. This client answered none of {in_row}: its "
                "I/O loop did not run (a handler blocking it, a stalled process) or it does "
                "not read what nsqd sends. After two intervals of silence nsqd gives up on "
                "it and closes the connection (one heartbeat or two go out before that); "
                "what it had in flight times out and goes to other consumers.",
    change="Answer every _heartbeat_ with NOP from the connection's I/O loop, never from "
           "the message handler (the client guide); run slow handlers off that loop. "
           "IDENTIFY's heartbeat_interval sets the period (1000 ms up to nsqd's "
           "--max-heartbeat-interval; -1 turns heartbeats off).",
    thresholds=(HEARTBEAT_MISSES,),
)

_FATAL_ERROR = f"""
WITH fatal AS (
  SELECT conn_id, seq, ts, packet, code, text, command, command_seq, command_packet,
         row_number() OVER (PARTITION BY conn_id ORDER BY seq) AS k
  FROM errors WHERE dir = '{S2C}' AND name = {ERROR} AND code IN ({FATAL})
), unit AS (
  -- what nsqd refused: the command the error answers (answer_pairs), else the last
  -- bytes the client sent in the packet it answers (no command could be read from them)
  SELECT f.conn_id, coalesce(max(f.command_seq), max(c.seq)) AS seq
  FROM fatal AS f LEFT JOIN {FRAMES} AS c ON c.conn_id = f.conn_id
   AND element_at(c.packets, 1) = f.command_packet AND c.dir = '{C2S}'
   AND c.kind IN ('command', 'error') AND c.seq < f.seq
  WHERE f.k = 1 GROUP BY f.conn_id
), server_end AS (
  SELECT conn_id, min_by(ts, seq) AS ts, min_by(element_at(packets, 1), seq) AS packet,
         min_by(reason, seq) AS how
  FROM {FRAMES} WHERE {FLOW_END} AND dir = '{S2C}' AND {CLOSED} GROUP BY conn_id
), x AS (
  SELECT f.conn_id, f.seq, f.ts, f.packet, f.code, f.text, f.command_packet, c.ts AS unit_ts,
         CASE WHEN c.kind = 'command' THEN c.name ELSE 'the client''s bytes' END AS command,
         s.ts AS close_ts, s.packet AS close_packet, s.how
  FROM fatal AS f LEFT JOIN unit AS u ON u.conn_id = f.conn_id
  LEFT JOIN {FRAMES} AS c ON c.conn_id = u.conn_id AND c.seq = u.seq
  LEFT JOIN server_end AS s ON s.conn_id = f.conn_id AND s.ts >= f.ts
  WHERE f.k = 1
), ev_rows AS (
  -- the error frame, every packet it came in (its text may be in the last)
  SELECT x.conn_id AS k_conn, x.ts, explode(a.packets) AS packet, x.conn_id,
         CAST(NULL AS STRING) AS msg_id, x.text AS what
  FROM x JOIN {FRAMES} AS a ON a.conn_id = x.conn_id AND a.seq = x.seq
  UNION ALL
  SELECT conn_id, unit_ts, command_packet, conn_id, NULL, command || ': refused'
  FROM x WHERE unit_ts IS NOT NULL
  UNION ALL
  SELECT conn_id, close_ts, close_packet, conn_id, NULL,
         'nsqd closed the connection (' || upper(how) || ')'
  FROM x WHERE close_ts IS NOT NULL
), evd AS ({evidence("ev_rows", ("k_conn",))}
)
SELECT {server_of("x.conn_id")} AS server, x.conn_id, e.first_ts AS ts, e.evidence,
       {figures("code", "detail", "command", "nsqd_closed", "why", "change")} AS figures
FROM (SELECT x.*, CASE WHEN text LIKE (code || ' %') THEN substr(text, length(code) + 2)
                       ELSE text END AS detail,
             close_ts IS NOT NULL AS nsqd_closed, {WHY} AS why, {CHANGE} AS change
      FROM x) AS x
JOIN evd AS e ON e.k_conn = x.conn_id
"""

FATAL_ERROR = Rule(
    "nsq.fatal-error", "nsqd closed the connection on a client's error",
    Severity.ERROR, _FATAL_ERROR,
    summary="nsqd refused {command} with {code} ({detail}){?nsqd_closed} and closed the "
            "connection{/}",
    explanation="{code} is one of nsqd's fatal errors -- {why}. The client guide: nsqd "
                "fails fast, protecting itself from a client in a state it does not "
                "expect; after a fatal error it closes the connection, and what the client "
                "had in flight times out and is delivered elsewhere. Only E_FIN_FAILED, "
                "E_REQ_FAILED and E_TOUCH_FAILED leave a connection open.",
    change="Fix what the client sends: {change}.",
)

_PUBLISH_REFUSED = f"""
WITH refused AS (
  -- the refused unit: the publish, or the bytes of one nsqd could not read (errors
  -- names the unit it answers)
  SELECT e.conn_id, e.seq, e.ts, e.packet, e.code, e.text, e.command_packet,
         split_part(e.text, ' ', 2) AS command, max_by(c.topic, c.seq) AS topic,
         max_by(c.ts, c.seq) AS command_ts, max(c.seq) AS command_seq,
         -- (an MPUB of no message has no first body: Spark's element_at refuses that)
         max_by(CASE WHEN size(c.bodies) > 0 THEN element_at(c.bodies, 1) END, c.seq) AS body
  FROM errors AS e
  LEFT JOIN {FRAMES} AS c ON c.conn_id = e.conn_id
   AND element_at(c.packets, 1) = e.command_packet AND c.name = e.command AND c.seq < e.seq
  WHERE e.dir = '{S2C}' AND e.name = {ERROR} AND split_part(e.text, ' ', 2) IN ({PUBLISHES})
  GROUP BY e.conn_id, e.seq, e.ts, e.packet, e.code, e.text, e.command_packet
), pubs AS (
  SELECT {server_of("conn_id")} AS server, conn_id, seq, ts, topic,
         element_at(packets, 1) AS packet, explode(bodies) AS body
  FROM {FRAMES} WHERE name IN ({PUBLISHES}) AND dir = '{C2S}'
), again AS (
  -- the same body published to the same nsqd and topic: before the refusal (this is a
  -- retry) or after it (it was retried)
  SELECT r.conn_id, r.seq, p.ts, p.packet, p.conn_id AS pub_conn, p.ts > r.ts AS later
  FROM refused AS r JOIN pubs AS p ON p.server = {server_of("r.conn_id")}
   AND p.topic = r.topic AND p.body = r.body
   AND NOT (p.conn_id = r.conn_id AND p.seq = r.command_seq)
), ev_rows AS (
  SELECT conn_id AS k_conn, code AS k_code, command_ts AS ts, command_packet AS packet,
         conn_id, CAST(NULL AS STRING) AS msg_id,
         command || coalesce(' ' || topic, '') || ': the publish refused' AS what
  FROM refused WHERE command_ts IS NOT NULL
  UNION ALL
  SELECT conn_id, code, ts, packet, conn_id, NULL, text FROM refused
  UNION ALL
  SELECT r.conn_id, r.code, a.ts, a.packet, a.pub_conn, NULL,
         CASE WHEN a.later THEN 'the same message published again'
              ELSE 'the same message published before' END
  FROM again AS a JOIN refused AS r ON r.conn_id = a.conn_id AND r.seq = a.seq
), evd AS ({evidence("ev_rows", ("k_conn", "k_code"))}
), per AS (
  SELECT r.conn_id, r.code, count(*) AS refused, min(r.command) AS command,
         min(r.topic) AS topic, min_by(r.text, r.seq) AS text,
         CAST(coalesce(sum(a.later_n), 0) AS BIGINT) AS retried,
         CAST(coalesce(sum(a.earlier_n), 0) AS BIGINT) AS repeats
  FROM refused AS r LEFT JOIN (
    SELECT conn_id, seq, sum(CASE WHEN later THEN 1 ELSE 0 END) AS later_n,
           sum(CASE WHEN later THEN 0 ELSE 1 END) AS earlier_n
    FROM again GROUP BY conn_id, seq) AS a ON a.conn_id = r.conn_id AND a.seq = r.seq
  GROUP BY r.conn_id, r.code
)
SELECT {server_of("p.conn_id")} AS server, p.conn_id, e.first_ts AS ts, e.evidence,
       {figures("code", "refused", "command", "topic", "detail", "retried", "repeats",
                "why", "change")} AS figures
FROM (SELECT p.*, CASE WHEN text LIKE (code || ' %') THEN substr(text, length(code) + 2)
                       ELSE text END AS detail, {WHY} AS why, {CHANGE} AS change
      FROM per AS p) AS p
JOIN evd AS e ON e.k_conn = p.conn_id AND e.k_code = p.code
"""

PUBLISH_REFUSED = Rule(
    "nsq.publish-refused", "PUB, MPUB or DPUB refused: the messages were not queued",
    Severity.ERROR, _PUBLISH_REFUSED,
    summary="{refused:/publish/publishes} ({command}{?topic} to {topic}{/}) refused with "
            "{code} ({detail})"
            "{?repeats}; the same message was refused before{/}{?retried}; the same "
            "message was published again afterwards ({retried}){/}",
    explanation="nsqd answered the publish with {code} -- {why} -- so its messages were "
                "not queued: unless the producer reads the answer and acts on it, they are "
                "lost. Each of these errors is fatal: nsqd closed the connection too. "
                "{?repeats}The same message was refused before: retrying what nsqd "
                "refuses for its content (a bad topic, a message too big) fails the same "
                "way.{/}",
    change="Read every publish's answer (OK or an error) and {change}.",
)

_RECONNECT_CHURN = f"""
WITH conns AS (
  SELECT conn_id, {server_of("conn_id")} AS server, start_ts, end_ts,
         coalesce(client_id || '@' || coalesce(hostname, ''),
                  split_part(flow, ':', 1)) AS who,
         client_id, hostname, split_part(flow, ':', 1) AS address,
         messages_published, messages_in, ended_by
  FROM connections
  WHERE conn_id IN (SELECT conn_id FROM {FRAMES} WHERE kind = 'command')
), seq AS (
  SELECT *, lag(end_ts) OVER (PARTITION BY server, who ORDER BY start_ts, conn_id) AS prev_end
  FROM conns
), sequential AS (
  -- opened after the client's previous connection to this nsqd had ended: a reconnection
  SELECT *, count(*) OVER (PARTITION BY server, who ORDER BY start_ts
                           RANGE BETWEEN {CHURN_WINDOW_S.value} PRECEDING AND CURRENT ROW)
              AS in_window
  FROM seq WHERE prev_end IS NULL OR start_ts >= prev_end
), churn AS (
  SELECT server, who FROM sequential GROUP BY server, who
  HAVING max(in_window) >= {CHURN_CONNECTIONS.value}
), ev_rows AS (
  SELECT s.server AS k_server, s.who AS k_who, f.ts, element_at(f.packets, 1) AS packet,
         s.conn_id, CAST(NULL AS STRING) AS msg_id, 'connection opened' AS what
  FROM sequential AS s JOIN churn AS c ON c.server = s.server AND c.who = s.who
  JOIN frames AS f ON f.conn_id = s.conn_id AND f.seq = 1  -- its start: the SYN
), evd AS ({evidence("ev_rows", ("k_server", "k_who"))}
), per AS (
  SELECT s.server, s.who, min(s.client_id) AS client_id, min(s.hostname) AS hostname,
         min(s.address) AS address, count(*) AS connections,
         {seconds("max(s.start_ts) - min(s.start_ts)")} AS seconds,
         {seconds("avg(s.end_ts - s.start_ts)")} AS lasted_s,
         CAST(sum(s.messages_published) AS BIGINT) AS published,
         CAST(sum(s.messages_in) AS BIGINT) AS received
  FROM sequential AS s JOIN churn AS c ON c.server = s.server AND c.who = s.who
  GROUP BY s.server, s.who
)
SELECT p.server, CAST(NULL AS STRING) AS conn_id, e.first_ts AS ts, e.evidence,
       {figures("client", "connections", "seconds", "lasted_s", "published", "received")}
         AS figures
FROM (SELECT *, CASE WHEN client_id IS NOT NULL
                     THEN 'client_id ' || client_id || coalesce(' on ' || hostname, '')
                     ELSE 'the client at ' || address || ' (no IDENTIFY)' END AS client
      FROM per) AS p
JOIN evd AS e ON e.k_server = p.server AND e.k_who = p.who
"""

RECONNECT_CHURN = Rule(
    "nsq.reconnect-churn", "a client connecting to one nsqd again and again",
    Severity.WARNING, _RECONNECT_CHURN,
    summary="{client} opened {connections} connections to this nsqd one after another in "
            "{seconds:.3f} s, each lasting {lasted_s:.3f} s on average "
            "({published:/message/messages} published, {received} received in all)",
    explanation="Each connection costs a TCP handshake, the magic, IDENTIFY (and any TLS "
                "or compression it negotiates) and nsqd's state for a new client, and a "
                "consumer's connection starts again from RDY 0. Clients keep one "
                "long-lived connection per nsqd; one that keeps reconnecting either opens "
                "a connection for each message or keeps failing and starting over -- see "
                "how each ended.",
    change="Keep the connection open and publish on it (go-nsq's Producer and pynsq's "
           "Writer do); if each connection ends in an error, fix that error; reconnect "
           "with the client guide's backoff (8 s, 16 s, 32 s ...), not at once.",
    thresholds=(CHURN_CONNECTIONS, CHURN_WINDOW_S),
)

_GUIDE = f"""
WITH failed AS (
  SELECT * FROM guide_failures
), ev_rows AS (
  -- each packet the verdict names, with the units that begin in it
  SELECT x.server AS k_server, x.conn_id AS k_conn, x.rule AS k_rule, min(f.ts) AS ts,
         element_at(x.packets, x.i) AS packet, x.conn_id, CAST(NULL AS STRING) AS msg_id,
         x.rule || ': ' || array_join(array_sort(collect_set(f.name)), ', ') AS what
  FROM (SELECT *, explode(sequence(1, size(packets))) AS i FROM failed
        WHERE size(packets) > 0) AS x
  JOIN {FRAMES} AS f ON f.conn_id = x.conn_id
   AND element_at(f.packets, 1) = element_at(x.packets, x.i)
   AND f.file = element_at(x.packet_files, x.i) AND f.kind IN ('command', 'frame')
  GROUP BY x.server, x.conn_id, x.rule, x.i, x.packets
), evd AS ({evidence("ev_rows", ("k_server", "k_conn", "k_rule"))}
)
SELECT f.server, f.conn_id, e.first_ts AS ts, e.evidence,
       {figures("rule", "detail", "asks", "change")} AS figures, rule AS guide_rule
FROM (SELECT *, {case("rule", GUIDE_CHANGES)} AS change FROM failed) AS f
JOIN evd AS e ON e.k_server = f.server AND e.k_conn = f.conn_id AND e.k_rule = f.rule
"""

GUIDE = Rule(
    "nsq.guide", "each rule of the client guide a connection breaks (nsqviz conformance)",
    Severity.INFO, _GUIDE,
    severity_sql=f"CASE WHEN guide_rule IN ({quoted(GUIDE_WARNINGS)}) THEN 'warning' "
                 "ELSE 'info' END",
    summary="{rule}: {detail}",
    explanation="The client guide (what every NSQ client library should do) asks: {asks}. "
                "nsqviz conformance judged this traffic against it (only connections "
                "captured whole, from the magic on, are judged).",
    change="{change}",
)

RULES: tuple[Rule, ...] = (
    FATAL_ERROR, PUBLISH_REFUSED, LATE_ANSWER, HEARTBEAT_MISSED, MSG_TIMEOUT,
    POISON_MESSAGE, *RDY_RULES, RECONNECT_CHURN, REDELIVERY_LATE, GUIDE,
)
"""Every NSQ rule, in the order their findings are listed (within a severity)."""
