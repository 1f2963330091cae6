"""TubeMQ's rebalance rule, ``tubemq.rebalance``: the Master's rebalance events a
consumer did not carry out as it said (:mod:`nsqviz.tubemq.rules` has the protocol's
other rules; :mod:`nsqviz.doctor` says how a rule is written).

How a rebalance runs, as the analyses read it (:mod:`nsqviz.tubemq.analyses`:
``tubemq_rebalances``, ``tubemq_partitions``): the Master puts an event in a consumer's
heartbeat answer (HeartResponseM2C ``event``: rebalanceId, opType, subscribeInfo). For
CONNECT or ONLY_CONNECT the consumer registers each partition with its Broker
(RegisterRequestC2B opType 31), for DISCONNECT or ONLY_DISCONNECT it unregisters them
(opType 32); then it reports the event back in its next heartbeat (HeartRequestC2M
``event``: the same rebalanceId and opType, status DONE, with its whole subscribeInfo).
The Master sends a consumer its next event only once it reported this one, and sends no
member of a group a connect event while a member still has a disconnect event to report
-- so a Broker never sees two members of a group on one partition. Two findings break
that:

* **an event never reported**: the consumer went on heartbeating
  :data:`UNREPORTED_HEARTBEATS` times or more without reporting it. The Master waits for
  it: the consumer gets no further event, and the group's other members meanwhile are
  named, with the heartbeats in which they got no partition;
* **a partition held by two consumers**: on a Broker, a member of the group holds a
  partition (registered, never unregistered) while another member's registration of it
  is answered 410 PARTITION_OCCUPIED -- the Master gave it to the second, the Broker
  still counts it the first's. With the first member's own report to the Master that
  it gave the partition up (a DISCONNECT or ONLY_DISCONNECT reported done before the
  refusals), the finding names that report; without it (the Master's connections not
  in the capture), the refusals must repeat (:data:`OCCUPIED_REFUSALS`): one 410 can be
  a hand-over the old owner finishes a moment later.

The Master's and the Brokers' connections are on different hosts in a real cluster, so
the second finding combines hosts (``across_servers``): each host's part is built with
its evidence where its frames are (``tubemq_rebalance_parts``,
``tubemq_partition_twice_parts``), and the rule joins them by the consumer's clientId,
group, topic and partition id (a Broker's partitions are named by topic and partition
id; the Master's by brokerId:topic:partitionId).
"""

from __future__ import annotations

from nsqviz.doctor.rule import EVIDENCE_LIMIT, Rule, Severity, Threshold, evidence, figures
from nsqviz.sql import View, frames_of, quoted
from nsqviz.tubemq.tables import (
    METHOD_GET_MESSAGE,
    METHODS,
    ErrorCode,
    EventType,
    Kind,
    Role,
    Service,
)

__all__ = ["OCCUPIED_REFUSALS", "REBALANCE", "UNREPORTED_HEARTBEATS"]

UNREPORTED_HEARTBEATS = Threshold(
    "UNREPORTED_HEARTBEATS", 3, "heartbeats",
    "the Java and Go consumers act on an event as soon as its heartbeat answer comes (a "
    "register or unregister call to a Broker per partition) and report it in their next "
    "heartbeat; still unreported three heartbeats later, it is not slow but not being done")
OCCUPIED_REFUSALS = Threshold(
    "OCCUPIED_REFUSALS", 2, "refusals",
    "a consumer refused 410 PARTITION_OCCUPIED is given the partition again in the "
    "Master's next round; refused again, the old owner kept it through a whole round: "
    "no hand-over race")

_FRAMES = frames_of("tubemq")
_MASTER_HEARTBEATS = quoted(m.name for m in METHODS.values()
                            if m.kind is Kind.HEARTBEAT and m.services == (Service.MASTER,))
_FETCH = quoted([METHODS[METHOD_GET_MESSAGE].name])
_CONNECTS = ", ".join(str(int(e)) for e in EventType if e.connects)
_DISCONNECTS = ", ".join(str(int(e)) for e in EventType if e.disconnects)
_OCCUPIED = int(ErrorCode.PARTITION_OCCUPIED)
_OCCUPIED_WORDS = f"{_OCCUPIED} {ErrorCode.PARTITION_OCCUPIED.name}"


def _server(conn_id: str) -> str:
    return f"split_part(split_part({conn_id}, '->', 2), '@', 1)"


_UNREPORTED = f"""
WITH stuck AS (
  SELECT conn_id, client_id, group_name, rebalance_id, op_type, event,
         CAST(size(partitions) AS BIGINT) AS partitions, ts, packet,
         heartbeats_before_report AS heartbeats
  FROM tubemq_rebalances
  WHERE NOT reported AND heartbeats_before_report >= {UNREPORTED_HEARTBEATS.value}
), later AS (
  SELECT s.conn_id, s.rebalance_id, s.op_type, h.ts, h.packet
  FROM stuck AS s JOIN tubemq_heartbeats AS h ON h.conn_id = s.conn_id AND h.ts > s.ts
   AND h.method IN ({_MASTER_HEARTBEATS})
), given AS (
  -- consumers of the Master that were sent a connect event: when
  SELECT conn_id, ts FROM tubemq_rebalances WHERE op_type IN ({_CONNECTS})
), waiting AS (
  -- the group's other members on that Master, heartbeating after the event and sent
  -- no partition since
  SELECT s.conn_id AS k, s.rebalance_id, s.op_type, m.conn_id, m.client_id, h.ts, h.packet
  FROM stuck AS s
  JOIN tubemq_connections AS m ON m.group_name = s.group_name AND m.conn_id <> s.conn_id
   AND m.server_role = '{Role.MASTER.value}'
   AND {_server("m.conn_id")} = {_server("s.conn_id")}
  JOIN tubemq_heartbeats AS h ON h.conn_id = m.conn_id AND h.ts > s.ts
   AND h.method IN ({_MASTER_HEARTBEATS})
  LEFT JOIN given AS g ON g.conn_id = m.conn_id AND g.ts > s.ts
  WHERE g.conn_id IS NULL
), ev_rows AS (
  SELECT conn_id AS k, rebalance_id, op_type, ts, packet, conn_id,
         CAST(NULL AS STRING) AS msg_id,
         'rebalance ' || CAST(rebalance_id AS STRING) || ' ' || event || ': '
           || CAST(partitions AS STRING) || ' partition(s), in the heartbeat answer' AS what
  FROM stuck
  UNION ALL
  SELECT conn_id, rebalance_id, op_type, ts, packet, conn_id, NULL,
         'heartbeat, rebalance ' || CAST(rebalance_id AS STRING) || ' not reported'
  FROM later
  UNION ALL
  SELECT k, rebalance_id, op_type, ts, packet, conn_id, NULL,
         'heartbeat of ' || client_id || ', of the same group: no partition'
  FROM waiting
), evd AS ({evidence("ev_rows", ("k", "rebalance_id", "op_type"))}
), waited AS (
  SELECT k, rebalance_id, op_type, CAST(count(DISTINCT conn_id) AS BIGINT) AS waiting,
         CAST(count(*) AS BIGINT) AS waiting_heartbeats
  FROM waiting GROUP BY k, rebalance_id, op_type
)
SELECT {_server("s.conn_id")} AS server, s.conn_id, e.first_ts AS ts, e.evidence,
       s.client_id, s.group_name, s.rebalance_id, s.event, s.partitions, s.heartbeats,
       s.packet, coalesce(w.waiting, 0) AS waiting,
       coalesce(w.waiting_heartbeats, 0) AS waiting_heartbeats
FROM stuck AS s
JOIN evd AS e ON e.k = s.conn_id AND e.rebalance_id = s.rebalance_id
 AND e.op_type = s.op_type
LEFT JOIN waited AS w ON w.k = s.conn_id AND w.rebalance_id = s.rebalance_id
 AND w.op_type = s.op_type
"""

_GAVE_UP = f"""
WITH reported AS (
  SELECT conn_id, client_id, group_name, rebalance_id, op_type, event, ts, packet,
         report_ts, report_packet, explode(partitions) AS partition_key
  FROM tubemq_rebalances WHERE reported AND op_type IN ({_DISCONNECTS})
), ev_rows AS (
  SELECT DISTINCT conn_id AS k, rebalance_id, op_type, ts, packet, conn_id,
         CAST(NULL AS STRING) AS msg_id,
         'rebalance ' || CAST(rebalance_id AS STRING) || ' ' || event
           || ': give partitions up' AS what
  FROM reported
  UNION ALL
  SELECT DISTINCT conn_id, rebalance_id, op_type, report_ts, report_packet, conn_id, NULL,
         'rebalance ' || CAST(rebalance_id AS STRING) || ' ' || event || ' reported done'
  FROM reported
), evd AS ({evidence("ev_rows", ("k", "rebalance_id", "op_type"))}
)
SELECT r.conn_id, r.client_id, r.group_name, r.rebalance_id, r.event, r.report_ts,
       r.report_packet, r.partition_key, split_part(r.partition_key, ':', 2) AS topic,
       CAST(split_part(r.partition_key, ':', 3) AS INT) AS partition_id, e.evidence
FROM reported AS r JOIN evd AS e ON e.k = r.conn_id AND e.rebalance_id = r.rebalance_id
 AND e.op_type = r.op_type
"""

_TWICE_PARTS = f"""
WITH refused AS (
  SELECT r.server, r.conn_id, r.client_id, r.group_name, r.topic, r.partition_id, r.ts,
         p.answer_ts, p.answer_packet
  FROM tubemq_partitions AS r
  JOIN rpc_pairs AS p ON p.conn_id = r.conn_id AND p.request_packet = r.packet
   AND p.request_ts = r.ts
  WHERE r.err_code = {_OCCUPIED}
), twice AS (
  -- a registration another member of the group held while this one was refused
  SELECT h.server, h.conn_id, h.client_id, h.group_name, h.topic, h.partition_id,
         h.ts AS held_ts, h.packet AS held_packet, r.conn_id AS refused_conn,
         r.client_id AS refused_client, r.answer_ts, r.answer_packet
  FROM refused AS r JOIN tubemq_partitions AS h ON h.server = r.server
   AND h.group_name = r.group_name AND h.topic = r.topic
   AND h.partition_id = r.partition_id AND h.conn_id <> r.conn_id AND h.held
   AND h.ts < r.ts AND (h.released_ts IS NULL OR h.released_ts > r.ts)
), held AS (
  SELECT server, conn_id, client_id, group_name, topic, partition_id,
         min(held_ts) AS held_ts, min(held_packet) AS held_packet,
         min(answer_ts) AS first_refused_ts, CAST(count(*) AS BIGINT) AS refusals,
         sort_array(collect_set(refused_client)) AS refused_clients
  FROM twice GROUP BY server, conn_id, client_id, group_name, topic, partition_id
), fetched AS (
  -- the holder's fetches of the partition from the first refusal on
  SELECT h.conn_id, h.topic, h.partition_id, CAST(count(*) AS BIGINT) AS fetches,
         min(f.ts) AS ts, min_by(element_at(f.packets, 1), f.ts) AS packet
  FROM held AS h JOIN {_FRAMES} AS f ON f.conn_id = h.conn_id AND f.kind = 'command'
   AND f.rpc_method IN ({_FETCH}) AND f.topic = h.topic AND f.partition_id = h.partition_id
   AND f.ts > h.first_refused_ts
  GROUP BY h.conn_id, h.topic, h.partition_id
), ev_rows AS (
  SELECT conn_id AS k, topic, partition_id, held_ts AS ts, held_packet AS packet, conn_id,
         CAST(NULL AS STRING) AS msg_id,
         client_id || ' registers ' || topic || ':' || CAST(partition_id AS STRING)
           || ' (held, never unregistered)' AS what
  FROM held
  UNION ALL
  SELECT conn_id, topic, partition_id, answer_ts, answer_packet, refused_conn, NULL,
         refused_client || ' refused ' || topic || ':' || CAST(partition_id AS STRING)
           || ': {_OCCUPIED} PARTITION_OCCUPIED'
  FROM twice
  UNION ALL
  SELECT conn_id, topic, partition_id, ts, packet, conn_id, NULL,
         'the holder fetches ' || topic || ':' || CAST(partition_id AS STRING) || ' still'
  FROM fetched
), evd AS ({evidence("ev_rows", ("k", "topic", "partition_id"))}
)
SELECT h.server, h.conn_id, h.client_id, h.group_name, h.topic, h.partition_id,
       h.first_refused_ts, h.refusals, h.refused_clients,
       coalesce(f.fetches, 0) AS fetches, e.evidence
FROM held AS h
JOIN evd AS e ON e.k = h.conn_id AND e.topic = h.topic AND e.partition_id = h.partition_id
LEFT JOIN fetched AS f ON f.conn_id = h.conn_id AND f.topic = h.topic
 AND f.partition_id = h.partition_id
"""

_REBALANCE = f"""
WITH matched AS (
  -- each partition held twice, with the holder's last report to the Master, before the
  -- refusals, that it gave the partition up
  SELECT b.*, d.conn_id AS master_conn, d.event, d.report_packet,
         d.evidence AS master_evidence,
         row_number() OVER (PARTITION BY b.conn_id, b.topic, b.partition_id
                            ORDER BY d.report_ts DESC) AS r
  FROM tubemq_partition_twice_parts AS b
  LEFT JOIN tubemq_rebalance_parts AS d ON d.client_id = b.client_id
   AND d.group_name = b.group_name AND d.topic = b.topic AND d.partition_id = b.partition_id
   AND d.report_ts < b.first_refused_ts
), twice AS (
  SELECT coalesce(master_conn, conn_id) AS conn_id, client_id, group_name,
         CAST(count(*) AS BIGINT) AS partitions,
         array_join(sort_array(collect_list(topic || ':' || CAST(partition_id AS STRING)
                                            || ' on ' || server)), ', ') AS partition_names,
         CAST(sum(refusals) AS BIGINT) AS refusals,
         array_join(sort_array(array_distinct(flatten(collect_list(refused_clients)))), ', ')
           AS refused_clients,
         CAST(sum(fetches) AS BIGINT) AS fetches, min(event) AS event,
         min(report_packet) AS report_packet,
         slice(sort_array(array_distinct(flatten(collect_list(
           CASE WHEN master_evidence IS NULL THEN evidence
                ELSE flatten(array(evidence, master_evidence)) END)))), 1, {EVIDENCE_LIMIT})
           AS evidence
  FROM matched
  WHERE r = 1 AND (master_conn IS NOT NULL OR refusals >= {OCCUPIED_REFUSALS.value})
  GROUP BY coalesce(master_conn, conn_id), client_id, group_name
)
SELECT server, conn_id, ts, evidence,
       {figures("unreported", "client_id", "group_name", "rebalance_id", "event",
                "partitions", "heartbeats", "waiting", "waiting_heartbeats")} AS figures
FROM (SELECT *, true AS unreported FROM tubemq_rebalance_unreported) AS u
UNION ALL
SELECT {_server("conn_id")}, conn_id, element_at(evidence, 1).ts, evidence,
       {figures("twice", "client_id", "group_name", "event", "report_packet", "partitions",
                "partition_names", "refusals", "refused_clients", "fetches")}
FROM (SELECT *, true AS twice FROM twice) AS t
"""

REBALANCE = Rule(
    "tubemq.rebalance",
    "a rebalance event never reported done, or a partition held by two consumers",
    Severity.WARNING, _REBALANCE,
    summary="{?unreported}rebalance {rebalance_id} ({event}, {partitions:/partition/"
            "partitions}) sent to {client_id} never reported done in its {heartbeats} "
            "later heartbeats{/}{?waiting}; {waiting:/other member/other members} of group "
            "{group_name} got no partition in {waiting_heartbeats} heartbeats{/}"
            "{?twice}{partitions:/partition/partitions} of group {group_name} held by two "
            "consumers ({partition_names}): {client_id} never unregistered{/}"
            "{?report_packet} after reporting {event} done (packet {report_packet}){/}"
            "{?twice} and kept fetching ({fetches:/fetch/fetches}) while {refused_clients} "
            "was refused " + _OCCUPIED_WORDS + " {refusals:/time/times}{/}",
    explanation="The Master rebalances a group with events in its consumers' heartbeat "
                "answers: CONNECT or ONLY_CONNECT to register partitions with their "
                "Brokers (RegisterRequestC2B opType 31), DISCONNECT or ONLY_DISCONNECT to "
                "unregister them (opType 32). The consumer reports the event back, status "
                "DONE, in its next heartbeat; the Master sends it its next event only "
                "then, and sends no member a connect event while another still has a "
                "disconnect event to report, so that a Broker never sees two members of "
                "a group on one partition."
                "{?unreported} {client_id} went on heartbeating and never reported "
                "rebalance {rebalance_id}: the Master waits for it, and the group's "
                "partitions stay where this event left them{/}{?waiting} -- its "
                "{waiting:/other member/other members} got none{/}{?unreported}.{/}"
                "{?twice} Here the Broker still counts the partitions as {client_id}'s "
                "while the Master gave them to {refused_clients}, whose registrations the "
                "Broker refuses " + _OCCUPIED_WORDS + " round after round: the new owner "
                "reads nothing from them, and the old one goes on reading partitions the "
                "Master no longer counts as its own.{/}",
    change="{?unreported}Have the consumer act on every event of a heartbeat answer and "
           "report it in its next heartbeat (HeartRequestC2M event: the same rebalanceId "
           "and opType, status DONE, with reportSubscribeInfo and its whole "
           "subscribeInfo), as the Java and Go clients do; a consumer that cannot should "
           "close (CloseRequestC2M) so that the Master gives its partitions to the "
           "others.{/}"
           "{?twice}On DISCONNECT or ONLY_DISCONNECT, unregister each partition from its "
           "Broker (RegisterRequestC2B opType 32, readStatus saying whether the last batch "
           "was consumed) and stop fetching it before reporting the event done; report "
           "in subscribeInfo only what is still registered.{/}",
    thresholds=(UNREPORTED_HEARTBEATS, OCCUPIED_REFUSALS),
    across_servers=True,
    steps=(
        View("tubemq_rebalance_unreported", _UNREPORTED, """Per rebalance event the
Master sent and the consumer did not report in UNREPORTED_HEARTBEATS or more later
heartbeats: the consumer, the event, the group's other members on that Master given no
partition since, with the evidence (built where the Master's frames are).""", step=True),
        View("tubemq_rebalance_parts", _GAVE_UP, """Per partition of a DISCONNECT or
ONLY_DISCONNECT event a consumer reported done to the Master: the consumer, the event,
its report and the partition's topic and id, with the evidence (built where the
Master's frames are).""", step=True),
        View("tubemq_partition_twice_parts", _TWICE_PARTS, """Per partition a consumer
held on a Broker while another member of its group was refused it 410
PARTITION_OCCUPIED: the holder, the refusals, the holder's fetches from the first
refusal on, with the evidence (built where the Broker's frames are).""", step=True),
    ),
)
"""The rule (see the module doc)."""
