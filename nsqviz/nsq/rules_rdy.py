"""NSQ's doctor rules of flow control: RDY and the channels' queues.

A consumer gets messages only as far as its RDY allows (the protocol: "when the client
is ready to receive messages it sends RDY"), so what goes wrong shows in two tables
side by side (:mod:`nsqviz.nsq.analyses`): ``channel_depth``, the messages waiting in
each channel, and the ``consumer_flow`` step, each subscribed connection's RDY and
messages in flight against its channel's depth. A finding needs both: messages waited
*and* a connection that could have taken them did not.
"""

from __future__ import annotations

from nsqviz.doctor.rule import EVIDENCE_LIMIT, Rule, Severity, Threshold, evidence, figures
from nsqviz.nsq.analyses import STARVATION_RATIO
from nsqviz.nsq.rules_sql import CLS, FRAMES, PUBLISHES, RDY, REQ, SUB, seconds
from nsqviz.sql import CLOSED, FLOW_END, View

__all__ = [
    "BACKLOG_MESSAGES",
    "HOARD_S",
    "NEVER_READY_S",
    "RDY_RULES",
    "RDY_STUCK_S",
    "STARVED_S",
    "STARVED_SHARE",
]

NEVER_READY_S = Threshold(
    "NEVER_READY_S", 1.0, "s",
    "a client sends its first RDY right after SUB's OK (the client guide's order: magic, "
    "IDENTIFY, SUB, RDY 1); messages left waiting a second on a subscribed connection "
    "without RDY are no scheduling delay")
STARVED_RATIO = Threshold(
    "STARVATION_RATIO", STARVATION_RATIO, "of RDY",
    "the client guide's is_starved: a connection with in flight > 0 and at least 85 % of "
    "its last RDY in flight (the constant anticipates starvation rather than waits for it)")
STARVED_SHARE = Threshold(
    "STARVED_SHARE", 0.5, "of the time",
    "starved most of the time from its first delivery to its last answer, while messages "
    "waited: not a moment's burst but RDY setting the pace")
STARVED_S = Threshold(
    "STARVED_S", 1.0, "s",
    "a second of starvation with messages waiting at the least: shorter is a burst any "
    "consumer meets")
RDY_STUCK_S = Threshold(
    "RDY_STUCK_S", 2.0, "s",
    "go-nsq's and pynsq's backoff starts at 1 s (the backoff multiplier), after which the "
    "client guide has the client send RDY 1 to test the waters; twice that with messages "
    "waiting is a backoff that never ended")
BACKLOG_MESSAGES = Threshold(
    "BACKLOG_MESSAGES", 100, "messages",
    "more than a consumer's RDY usually keeps in transit: a queue, not the messages "
    "between publish and delivery")
HOARD_S = Threshold(
    "HOARD_S", 1.0, "s",
    "a connection left at RDY 0 with messages waiting for a second while another of the "
    "client's connections holds a RDY it could have shared")


def _end_rows(key: str, conns: str) -> str:
    """Evidence rows of how each connection of ``conns`` (a CTE with ``conn_id`` and the
    finding's key ``k``) ended: its CLS, and its first FIN or RST."""
    return f"""
  SELECT k.k AS {key}, f.ts, element_at(f.packets, 1) AS packet, f.conn_id,
         CAST(NULL AS STRING) AS msg_id, 'CLS' AS what
  FROM {FRAMES} AS f JOIN {conns} AS k ON k.conn_id = f.conn_id WHERE f.name = {CLS}
  UNION ALL
  SELECT k.k, min_by(f.ts, f.seq), min_by(element_at(f.packets, 1), f.seq), f.conn_id, NULL,
         'the connection ends (' || upper(min_by(f.reason, f.seq)) || ')'
  FROM {FRAMES} AS f JOIN {conns} AS k ON k.conn_id = f.conn_id
  WHERE {FLOW_END} AND {CLOSED} GROUP BY k.k, f.conn_id"""


def _rdy_rows(key: str, conns: str, where: str = "") -> str:
    """Evidence rows of the RDY commands of each connection of ``conns``."""
    return f"""
  SELECT k.k AS {key}, f.ts, element_at(f.packets, 1) AS packet, f.conn_id,
         CAST(NULL AS STRING) AS msg_id, 'RDY ' || CAST(f.count AS STRING) AS what
  FROM {FRAMES} AS f JOIN {conns} AS k ON k.conn_id = f.conn_id
  WHERE f.name = {RDY} {where}"""


def _publish_rows(key: str, windows: str) -> str:
    """Evidence rows of the publishes to each window's topic on its server between its
    ``from_ts`` and ``until_ts`` (``windows``: a CTE with ``k``, ``server``, ``topic``)."""
    return f"""
  SELECT w.k AS {key}, f.ts, element_at(f.packets, 1) AS packet, f.conn_id,
         CAST(NULL AS STRING) AS msg_id,
         f.name || ' ' || f.topic || ' (' || CAST(size(f.bodies) AS STRING) || ' messages)'
           AS what
  FROM {FRAMES} AS f JOIN {windows} AS w
    ON split_part(split_part(f.conn_id, '->', 2), '@', 1) = w.server AND f.topic = w.topic
   AND f.ts >= w.from_ts AND f.ts <= w.until_ts
  WHERE f.name IN ({PUBLISHES}) AND f.bodies IS NOT NULL"""


_CLOSES = f"""
  SELECT conn_id, true AS closed FROM {FRAMES} WHERE {FLOW_END} AND {CLOSED}
  GROUP BY conn_id"""

_SUBS = f"""
  SELECT conn_id, min(ts) AS sub_ts, min_by(element_at(packets, 1), seq) AS sub_packet
  FROM {FRAMES} WHERE name = {SUB} AND violation IS NULL AND reason IS NULL
  GROUP BY conn_id"""

_NEVER_READY = f"""
WITH subs AS ({_SUBS}
), never AS (
  SELECT f.conn_id, f.server, f.topic, f.channel, s.sub_ts, s.sub_packet,
         max(f.until_ts) AS until_ts,
         sum(CASE WHEN f.depth > 0 AND f.until_ts > s.sub_ts
                  THEN f.until_ts - greatest(f.ts, s.sub_ts) ELSE 0 END) AS waited,
         max(CASE WHEN f.until_ts > s.sub_ts THEN f.depth ELSE 0 END) AS max_waiting
  FROM consumer_flow AS f JOIN subs AS s ON s.conn_id = f.conn_id
  GROUP BY f.conn_id, f.server, f.topic, f.channel, s.sub_ts, s.sub_packet
  HAVING max(f.rdy) = 0
), found AS (
  SELECT n.*, n.conn_id AS k, n.sub_ts AS from_ts, coalesce(r.rdys, 0) AS rdys,
         coalesce(c.closed, false) AS closed
  FROM never AS n
  LEFT JOIN (SELECT conn_id, count(*) AS rdys FROM {FRAMES} WHERE name = {RDY}
             GROUP BY conn_id) AS r ON r.conn_id = n.conn_id
  LEFT JOIN ({_CLOSES}) AS c ON c.conn_id = n.conn_id
  WHERE n.waited >= {NEVER_READY_S.value}
), ev_rows AS (
  SELECT k, sub_ts AS ts, sub_packet AS packet, conn_id, CAST(NULL AS STRING) AS msg_id,
         'SUB ' || topic || ' ' || channel AS what FROM found
  UNION ALL {_publish_rows("k", "found")}
  UNION ALL {_rdy_rows("k", "found")}
  UNION ALL {_end_rows("k", "found")}
), evd AS ({evidence("ev_rows", ("k",))}
)
SELECT n.server, n.conn_id, e.first_ts AS ts, e.evidence,
       {figures("n.topic", "n.channel", "waited_s", "n.max_waiting", "rdy", "closed")}
         AS figures
FROM (SELECT *, {seconds("waited")} AS waited_s,
             CASE WHEN rdys = 0 THEN 'never sent RDY' ELSE 'sent only RDY 0' END AS rdy
      FROM found) AS n
JOIN evd AS e ON e.k = n.conn_id
"""

NEVER_READY = Rule(
    "nsq.never-ready", "a subscribed connection without RDY while messages waited",
    Severity.WARNING, _NEVER_READY,
    summary="subscribed to {topic}/{channel} and {rdy}; up to "
            "{max_waiting:/message/messages} waited {waited_s:.3f} s{?closed} until it "
            "closed{/}",
    explanation="After SUB a connection's RDY is 0: nsqd sends it nothing until the client "
                "says how many messages it is ready for (the protocol: RDY n, and nsqd "
                "sends up to n). This one never did, while its channel had messages "
                "waiting -- on this nsqd they wait for another consumer of the channel, or "
                "for ever.",
    change="Send RDY after SUB -- the client guide: RDY 1 at once, then a share of "
           "max_in_flight -- and keep it above 0 except in backoff. A library that gives "
           "some connections RDY 0 (max_in_flight below the number of nsqds) must move "
           "RDY to them periodically.",
    thresholds=(NEVER_READY_S,),
)

_STARVED = f"""
WITH span AS (
  SELECT conn_id, min(ts) AS first_ts, max(coalesce(outcome_ts, ts)) AS last_ts,
         count(*) AS messages
  FROM deliveries GROUP BY conn_id
), per AS (
  SELECT f.conn_id, f.server, f.topic, f.channel, s.first_ts, s.last_ts, s.messages,
         sum(CASE WHEN f.starved AND f.depth > 0 AND f.until_ts > s.first_ts
                  AND f.ts < s.last_ts
                  THEN least(f.until_ts, s.last_ts) - greatest(f.ts, s.first_ts)
                  ELSE 0 END) AS starved,
         max(CASE WHEN f.starved THEN f.depth ELSE 0 END) AS max_waiting,
         max(CASE WHEN f.starved AND f.depth > 0 THEN f.rdy END) AS rdy
  FROM consumer_flow AS f JOIN span AS s ON s.conn_id = f.conn_id
  GROUP BY f.conn_id, f.server, f.topic, f.channel, s.first_ts, s.last_ts, s.messages
), found AS (
  SELECT *, conn_id AS k FROM per
  WHERE starved >= {STARVED_S.value} AND starved >= {STARVED_SHARE.value} * (last_ts - first_ts)
), ev_rows AS ({_rdy_rows("k", "found")}
  UNION ALL
  SELECT k.k, d.ts, d.packet, d.conn_id, d.msg_id,
         'delivered (attempt ' || CAST(d.attempts AS STRING) || ')' AS what
  FROM deliveries AS d JOIN found AS k ON k.conn_id = d.conn_id
), evd AS ({evidence("ev_rows", ("k",))}
)
SELECT p.server, p.conn_id, e.first_ts AS ts, e.evidence,
       {figures("p.topic", "p.channel", "p.rdy", "starved_s", "span_s", "p.max_waiting",
                "p.messages")} AS figures
FROM (SELECT *, {seconds("starved")} AS starved_s, {seconds("last_ts - first_ts")} AS span_s
      FROM found) AS p
JOIN evd AS e ON e.k = p.conn_id
"""

STARVED = Rule(
    "nsq.starved", "in flight pinned at RDY most of the time while messages waited",
    Severity.WARNING, _STARVED,
    summary="RDY {rdy}: in flight at RDY for {starved_s:.3f} s of the {span_s:.3f} s from "
            "first delivery to last answer, while up to {max_waiting:/message/messages} "
            "waited in {topic}/{channel}",
    explanation="nsqd sends a connection no more messages than its RDY. Here the consumer "
                "had as many in flight as RDY allowed -- the client guide's is_starved -- "
                "while its channel's messages waited: RDY, not nsqd or the network, set "
                "the pace, one batch of {rdy} per handling time.",
    change="Raise max_in_flight (the client guide shares it out as RDY over the "
           "connections, max_in_flight / connections each), handle messages concurrently "
           "or in batches (is_starved is the guide's signal to process a batch), or run "
           "more consumers on the channel.",
    thresholds=(STARVED_RATIO, STARVED_SHARE, STARVED_S),
)

_RDY_STUCK = f"""
WITH last_rdy AS (
  SELECT conn_id, max_by(count, seq) AS rdy, max(seq) AS seq, max_by(ts, seq) AS ts,
         max_by(element_at(packets, 1), seq) AS packet
  FROM {FRAMES} WHERE name = {RDY} AND violation IS NULL AND reason IS NULL
  GROUP BY conn_id
), backoff AS (
  SELECT l.*, max(q.seq) AS req_seq
  FROM last_rdy AS l JOIN {FRAMES} AS q ON q.conn_id = l.conn_id AND q.name = {REQ}
   AND q.seq < l.seq
  WHERE l.rdy = 0 GROUP BY l.conn_id, l.rdy, l.seq, l.ts, l.packet
), per AS (
  SELECT b.conn_id, f.server, f.topic, f.channel, b.ts AS from_ts, b.req_seq,
         max(f.until_ts) AS until_ts,
         sum(CASE WHEN f.depth > 0 AND f.until_ts > b.ts
                  THEN f.until_ts - greatest(f.ts, b.ts) ELSE 0 END) AS waited,
         max(CASE WHEN f.until_ts > b.ts THEN f.depth ELSE 0 END) AS max_waiting
  FROM backoff AS b JOIN consumer_flow AS f ON f.conn_id = b.conn_id
  GROUP BY b.conn_id, f.server, f.topic, f.channel, b.ts, b.req_seq
), found AS (
  SELECT p.*, p.conn_id AS k, coalesce(c.closed, false) AS closed
  FROM per AS p LEFT JOIN ({_CLOSES}) AS c ON c.conn_id = p.conn_id
  WHERE p.waited >= {RDY_STUCK_S.value}
), ev_rows AS (
  SELECT k.k, q.ts, element_at(q.packets, 1) AS packet, q.conn_id, q.msg_id,
         'REQ (delay ' || CAST(q.delay_ms AS STRING) || ' ms): a failure' AS what
  FROM {FRAMES} AS q JOIN found AS k ON k.conn_id = q.conn_id AND q.seq = k.req_seq
  WHERE q.name = {REQ}
  UNION ALL {_rdy_rows("k", "found", "AND f.ts >= k.from_ts")}
  UNION ALL {_end_rows("k", "found")}
), evd AS ({evidence("ev_rows", ("k",))}
)
SELECT p.server, p.conn_id, e.first_ts AS ts, e.evidence,
       {figures("p.topic", "p.channel", "stuck_s", "waited_s", "p.max_waiting", "closed")}
         AS figures
FROM (SELECT *, {seconds("until_ts - from_ts")} AS stuck_s, {seconds("waited")} AS waited_s
      FROM found) AS p
JOIN evd AS e ON e.k = p.conn_id
"""

RDY_STUCK = Rule(
    "nsq.rdy-stuck", "RDY 0 after a failure (backoff), never raised again",
    Severity.WARNING, _RDY_STUCK,
    summary="RDY 0 after a REQ (backoff) and never raised again: up to "
            "{max_waiting:/message/messages} of {topic}/{channel} waited {waited_s:.3f} s"
            "{?closed} until it closed{/}",
    explanation="The client guide's backoff: after a failure (REQ) the client sends RDY 0 "
                "to slow down, and when the backoff time is over sends RDY 1 to test the "
                "waters, then its full share. This connection went to RDY 0 and stayed "
                "there {stuck_s:.3f} s while messages waited: the backoff never ended, and "
                "the consumer stopped taking messages from this nsqd.",
    change="End the backoff: after its timer, RDY 1 on one connection, then back to the "
           "full RDY as handling succeeds (go-nsq and pynsq do); a failure counts once "
           "per backoff period, not once per message.",
    thresholds=(RDY_STUCK_S,),
)

_BACKLOG = f"""
WITH span AS (
  -- from the first publish to the last one the channel counted
  SELECT server, topic, channel, min(ts) AS t0, max(ts) AS t1,
         CAST(sum(published) AS BIGINT) AS published
  FROM channel_depth WHERE published > 0 GROUP BY server, topic, channel
), quarters AS (
  -- the depth a quarter, half and three quarters of the way, and when publishing ended
  SELECT d.server, d.topic, d.channel,
         max_by(d.depth, d.ts) FILTER (WHERE d.ts <= s.t0 + 0.25 * (s.t1 - s.t0)) AS q1,
         max_by(d.depth, d.ts) FILTER (WHERE d.ts <= s.t0 + 0.5 * (s.t1 - s.t0)) AS q2,
         max_by(d.depth, d.ts) FILTER (WHERE d.ts <= s.t0 + 0.75 * (s.t1 - s.t0)) AS q3,
         max_by(d.depth, d.ts) FILTER (WHERE d.ts <= s.t1) AS q4,
         max_by(d.delivered_so_far, d.ts) FILTER (WHERE d.ts <= s.t1) AS delivered
  FROM channel_depth AS d JOIN span AS s ON s.server = d.server AND s.topic = d.topic
   AND s.channel = d.channel
  GROUP BY d.server, d.topic, d.channel
), consumers AS (
  SELECT server, topic, channel, count(DISTINCT conn_id) AS n, min(conn_id) AS conn_id,
         max(rdy) AS rdy
  FROM consumer_flow GROUP BY server, topic, channel
), found AS (
  SELECT s.*, q.q1, q.q2, q.q3, q.q4, q.delivered, c.n AS consumers, c.rdy,
         CASE WHEN c.n = 1 THEN c.conn_id END AS conn_id,
         s.server || ' ' || s.topic || ' ' || s.channel AS k, s.t0 AS from_ts,
         s.t1 AS until_ts
  FROM span AS s JOIN quarters AS q ON q.server = s.server AND q.topic = s.topic
   AND q.channel = s.channel
  JOIN consumers AS c ON c.server = s.server AND c.topic = s.topic AND c.channel = s.channel
  WHERE q.q4 >= {BACKLOG_MESSAGES.value} AND q.delivered > 0
    AND q.q1 < q.q2 AND q.q2 < q.q3 AND q.q3 < q.q4
), pub_rows AS ({_publish_rows("k", "found")}
), deliveries_of AS (
  -- in time order, and by id within a packet (one packet may deliver several: nsqd's
  -- ids count up), so each engine picks the same first delivery
  SELECT k.k, k.t1, d.ts, d.packet, d.conn_id, d.msg_id,
         row_number() OVER (PARTITION BY k.k ORDER BY d.ts, d.msg_id) AS nth,
         row_number() OVER (PARTITION BY k.k, d.ts > k.t1 ORDER BY d.ts, d.msg_id)
           AS nth_after
  FROM deliveries AS d JOIN found AS k ON k.server = d.server AND k.topic = d.topic
   AND k.channel = d.channel
), ev_rows AS (
  SELECT k, min(ts) AS ts, min_by(packet, ts) AS packet, min_by(conn_id, ts) AS conn_id,
         CAST(NULL AS STRING) AS msg_id, 'the first publish: ' || min_by(what, ts) AS what
  FROM pub_rows GROUP BY k
  UNION ALL
  SELECT k, max(ts), max_by(packet, ts), max_by(conn_id, ts), NULL,
         'the last publish: ' || max_by(what, ts)
  FROM pub_rows GROUP BY k
  UNION ALL
  SELECT k, ts, packet, conn_id, msg_id, 'the first delivery'
  FROM deliveries_of WHERE nth = 1
  UNION ALL
  SELECT k, ts, packet, conn_id, msg_id, 'the first delivery after the last publish'
  FROM deliveries_of WHERE ts > t1 AND nth_after = 1
  UNION ALL {_rdy_rows("k", "(SELECT f.k, c.conn_id FROM found AS f JOIN consumer_flow AS c "
                            "ON c.server = f.server AND c.topic = f.topic "
                            "AND c.channel = f.channel GROUP BY f.k, c.conn_id)")}
), evd AS ({evidence("ev_rows", ("k",))}
)
SELECT f.server, f.conn_id, e.first_ts AS ts, e.evidence,
       {figures("f.topic", "f.channel", "f.published", "f.delivered", "queued", "half_way",
                "seconds", "f.consumers", "f.rdy")} AS figures
FROM (SELECT *, q4 AS queued, q2 AS half_way, {seconds("t1 - t0")} AS seconds
      FROM found) AS f
JOIN evd AS e ON e.k = f.k
"""

BACKLOG = Rule(
    "nsq.backlog", "a channel taking messages slower than its topic gets them",
    Severity.WARNING, _BACKLOG,
    summary="{published} messages published to {topic} in {seconds:.3f} s, {delivered} "
            "delivered on {channel} meanwhile: its queue grew all along, {half_way} waiting "
            "half-way, {queued} when publishing stopped",
    explanation="Every channel of a topic gets a copy of each message, and its consumers "
                "({consumers} connection(s), RDY up to {rdy}) must take them as fast as they "
                "come. Here deliveries fell further behind the publishes across the "
                "capture: the queue grows, messages wait longer and longer, and nsqd keeps "
                "them in memory up to --mem-queue-size, then on disk.",
    change="Consume faster: raise max_in_flight (RDY) where the consumers are starved, "
           "handle messages concurrently, or add consumers to the channel; or publish "
           "less to this topic.",
    thresholds=(BACKLOG_MESSAGES,),
)

_RDY_ISLANDS = """
WITH states AS (
  SELECT *, CASE WHEN rdy = 0 AND depth > 0 THEN 'idle' WHEN rdy >= 2 THEN 'held' END
              AS state
  FROM consumer_flow WHERE client_id IS NOT NULL
), marked AS (
  SELECT *, sum(CASE WHEN prev IS NULL OR prev <> coalesce(state, '') THEN 1 ELSE 0 END)
              OVER (PARTITION BY conn_id ORDER BY ts
                    ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS island
  FROM (SELECT *, lag(coalesce(state, '')) OVER (PARTITION BY conn_id ORDER BY ts) AS prev
        FROM states) AS s
)
SELECT conn_id, server, topic, channel, client_id, coalesce(hostname, '') AS hostname, state,
       min(ts) AS from_ts, max(until_ts) AS until_ts, min(rdy) AS rdy,
       max(depth) AS max_waiting
FROM marked WHERE state IS NOT NULL
GROUP BY conn_id, server, topic, channel, client_id, hostname, state, island
"""

_RDY_EVIDENCE = f"""
WITH k AS (
  SELECT conn_id AS k, conn_id, min(server) AS server, min(topic) AS topic,
         min(client_id) AS client_id, min(coalesce(hostname, '')) AS hostname,
         min(channel) AS channel, min(ts) AS from_ts, max(until_ts) AS until_ts
  FROM consumer_flow WHERE client_id IS NOT NULL GROUP BY conn_id
), idle_rows AS ({_rdy_rows("k", "k", "AND f.count = 0")}
  UNION ALL {_publish_rows("k", "k")}
  UNION ALL {_end_rows("k", "k")}
), held_rows AS ({_rdy_rows("k", "k", "AND f.count > 0")}
), idle_ev AS ({evidence("idle_rows", ("k",))}
), held_ev AS ({evidence("held_rows", ("k",))}
)
SELECT k.conn_id, k.server, k.topic, k.channel, k.client_id, k.hostname,
       i.evidence AS idle_evidence, h.evidence AS held_evidence
FROM k LEFT JOIN idle_ev AS i ON i.k = k.k LEFT JOIN held_ev AS h ON h.k = k.k
"""

_RDY_HOARDING = f"""
WITH conns AS (
  SELECT client_id, hostname, topic, channel, count(*) AS n
  FROM rdy_evidence GROUP BY client_id, hostname, topic, channel
), shared AS (
  -- a stretch at RDY 0 with messages waiting, while another of the client's connections
  -- held a RDY that could have been shared: at least one for each connection
  SELECT a.conn_id, a.server, a.topic, a.channel, a.client_id, a.hostname,
         b.conn_id AS held_conn, b.server AS held_server, b.rdy AS held_rdy, c.n,
         least(a.until_ts, b.until_ts) - greatest(a.from_ts, b.from_ts) AS overlap,
         greatest(a.from_ts, b.from_ts) AS from_ts, a.max_waiting
  FROM rdy_islands AS a
  JOIN rdy_islands AS b ON b.client_id = a.client_id AND b.hostname = a.hostname
   AND b.topic = a.topic AND b.channel = a.channel AND b.server <> a.server
  JOIN conns AS c ON c.client_id = a.client_id AND c.hostname = a.hostname
   AND c.topic = a.topic AND c.channel = a.channel
  WHERE a.state = 'idle' AND b.state = 'held' AND b.rdy >= c.n
    AND b.from_ts < a.until_ts AND b.until_ts > a.from_ts
), pairs AS (
  SELECT conn_id, server, topic, channel, client_id, hostname, held_conn, held_server,
         max(held_rdy) AS held_rdy, max(n) AS connections, sum(overlap) AS idle,
         min(from_ts) AS from_ts, max(max_waiting) AS max_waiting
  FROM shared
  GROUP BY conn_id, server, topic, channel, client_id, hostname, held_conn, held_server
), best AS (
  SELECT *, row_number() OVER (PARTITION BY conn_id ORDER BY idle DESC, held_conn) AS k
  FROM pairs WHERE idle >= {HOARD_S.value}
)
SELECT p.server, p.conn_id, p.from_ts AS ts,
       slice(sort_array(coalesce(a.idle_evidence, slice(b.held_evidence, 1, 0))
                        || coalesce(b.held_evidence, slice(a.idle_evidence, 1, 0))),
             1, {EVIDENCE_LIMIT}) AS evidence,
       {figures("client", "p.topic", "p.channel", "p.held_rdy", "p.held_server",
                "waiting_server", "p.max_waiting", "idle_s", "p.connections")} AS figures
FROM (SELECT *, client_id || CASE WHEN hostname = '' THEN '' ELSE ' on ' || hostname END
                  AS client,
             server AS waiting_server, {seconds("idle")} AS idle_s
      FROM best WHERE k = 1) AS p
LEFT JOIN rdy_evidence AS a ON a.conn_id = p.conn_id
LEFT JOIN rdy_evidence AS b ON b.conn_id = p.held_conn
"""

RDY_HOARDING = Rule(
    "nsq.rdy-hoarding", "one connection holds a consumer's RDY while its others sit at 0",
    Severity.WARNING, _RDY_HOARDING,
    summary="client {client}: RDY {held_rdy} on {held_server}, RDY 0 on {waiting_server} "
            "where up to {max_waiting:/message/messages} of {topic}/{channel} waited "
            "{idle_s:.3f} s",
    explanation="A consumer shares its max_in_flight out as RDY over its connections, one "
                "per nsqd (the client guide: max_in_flight / connections each, moved "
                "around when max_in_flight is smaller than the connections). This one gave "
                "RDY {held_rdy} -- enough for all its {connections} connections -- to one "
                "nsqd and none to another that had messages waiting: those wait for "
                "another consumer, or until the client closes.",
    change="Share RDY out over every connection (max_in_flight / connections, at least 1 "
           "each while max_in_flight allows), and when max_in_flight is smaller than the "
           "connections, move RDY to idle ones periodically (the client guide).",
    thresholds=(HOARD_S,),
    across_servers=True,
    steps=(
        View("rdy_islands", _RDY_ISLANDS, """Per subscribed connection of an identified
client (IDENTIFY's client_id): its stretches at RDY 0 while its channel had messages waiting
(``idle``), and at RDY 2 or more (``held``: enough to share with another connection).""",
             step=True),
        View("rdy_evidence", _RDY_EVIDENCE, """Per subscribed connection of an identified
client: the evidence of its idle stretches (its RDY 0, the publishes that waited, its end)
and of the RDY it held -- built where its broker's frames are.""", step=True),
    ),
)

RDY_RULES: tuple[Rule, ...] = (NEVER_READY, RDY_STUCK, STARVED, BACKLOG, RDY_HOARDING)
