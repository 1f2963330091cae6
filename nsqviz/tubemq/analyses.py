"""TubeMQ's analyses: SQL over TubeMQ's rows of the frames table
(:func:`nsqviz.sql.frames_of`), read by both engines, and TubeMQ's hooks into the shared
``connections`` and ``errors`` tables (:mod:`nsqviz.sql` says how analyses are defined
and collected).

Every method, status, error code, event and role comes from TubeMQ's tables
(:mod:`nsqviz.tubemq.tables`, :class:`~nsqviz.tubemq.protos.RpcStatus`); the typed
columns the views read are :data:`nsqviz.tubemq.columns.SCHEMA`. The rules:

* an answer is paired with the earliest answer of the same ``serialNo`` on the same
  connection that follows the request (``rpc_pairs``); a request with no answer before
  the capture ends is ``unanswered``;
* an answer is an *error* when its status is not SUCCESS, or its ``errCode`` is not 200
  -- except a fetch's 404 NOT_FOUND, which only says the partition has nothing new (the
  clients wait ``minLimitTime`` and fetch again; an idle consumer gets one every few
  hundred ms): :data:`IS_ERROR`, the rule of ``rpc_latency``, ``tubemq_statuses`` and
  the shared ``errors`` table;
* a heartbeat is a call of a heartbeat method (to the Master or to a Broker); 411
  HB_NO_NODE is the server's registration timeout (it no longer knows the client), and
  the client's next register call on that connection is its registering again;
* a rebalance event is what the Master pushes in a consumer's heartbeat answer
  (``event``: rebalanceId, opType, partitions; the Master may push it again until it is
  reported); the consumer acknowledges it by reporting the same rebalanceId and opType
  back, with its status, in a later heartbeat on that connection;
* a consumer holds a partition on a Broker from a RegisterRequestC2B (opType 31)
  answered 200 until the next registration call for that topic and partition on the
  connection (opType 32 unregisters; its readStatus says whether the last batch was
  consumed), else to the end of the connection.

Messages (``tubemq_messages``, ``tubemq_fetches``). What the wire carries:

* a message is known by its Broker (the server end of the connections), topic,
  partition id (storeId * 10000 + index) and the message id the Broker assigned. The
  Broker answers a send (SendMessageResponseB2P) with that id -- in ``messageId``, and
  as the success answer's ``errMsg`` text, kept for older clients (read when
  ``messageId``, an optional field, is absent) -- and every fetch answer
  (GetMessageResponseB2C) carries each message's ``messageId``: the same id, so a send
  and the fetches of its message are linked exactly. The Broker numbers messages per
  topic store (``IdWorker``), so an id alone is not unique: only with its Broker, topic
  and partition;
* a fetch answer does not name its partition: its request does (pairing gives it);
* a fetched batch ends with the next call on the same connection, topic and partition
  that says whether it was consumed: CommitOffsetRequestC2B or GetMessageRequestC2B
  with ``lastPackConsumed`` true (the Broker commits the batch: ``committed``) or false
  (it keeps the group's offset, and the next fetch reads the batch again: ``not
  consumed``), an unregistration (opType 32) with readStatus 0 (consumed) or 1, or a
  new registration (which drops the pending batch: ``not consumed``); none before the
  connection or the capture ends: ``open``. A fetch with ``manualCommitOffset`` (which
  neither the Java nor the Go client sends) is read as the others.

What cannot be linked: a send whose answer the capture lacks (or that was refused)
has no id -- the producer sends none of its own -- so it is in ``tubemq_sends`` only,
not in ``tubemq_messages`` (no body hash is guessed with: the id links exactly where
the wire has it); a message fetched whose send was not captured keeps its row, with no
send. Offsets do not locate a message: the send answer's ``appendOffset`` is its index
offset, but a fetch answer gives one ``currOffset`` for the partition, none per
message; they are shown as the Broker gave them.

Packet numbers are the first packet of a frame (:data:`nsqviz.sql.FIRST_PACKET`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from nsqviz.sql import (
    COMMAND,
    FIRST_PACKET,
    UNITS,
    Analyses,
    ConnectionColumns,
    ErrorAnswers,
    View,
    frames_of,
    quoted,
    server,
)
from nsqviz.tubemq.protos import RpcStatus
from nsqviz.tubemq.tables import (
    METHOD_COMMIT_OFFSET,
    METHOD_GET_MESSAGE,
    METHOD_REGISTER_PARTITION,
    METHOD_SEND_MESSAGE,
    METHODS,
    MSG_OPTYPE_REGISTER,
    MSG_OPTYPE_UNREGISTER,
    ErrorCode,
    EventStatus,
    EventType,
    Kind,
    Role,
    UnregisterStatus,
)

__all__ = ["ANALYSES", "IS_ERROR"]

FRAMES = frames_of("tubemq")
"""TubeMQ's rows of the frames table: the only rows TubeMQ's views read."""

_OK = int(ErrorCode.SUCCESS)
_SUCCESS = f"'{RpcStatus.SUCCESS.name}'"
_SEND, _REGISTER, _FETCH, _COMMIT = (f"'{METHODS[m].name}'" for m in (
    METHOD_SEND_MESSAGE, METHOD_REGISTER_PARTITION, METHOD_GET_MESSAGE, METHOD_COMMIT_OFFSET))


def _of_kind(kind: Kind) -> str:
    return quoted(m.name for m in METHODS.values() if m.kind is kind)


_HEARTBEATS, _REGISTERS, _CLOSES = (_of_kind(k) for k in (Kind.HEARTBEAT, Kind.REGISTER,
                                                          Kind.CLOSE))


def _case(column: str, values: Mapping[str | int, str]) -> str:
    """``CASE column WHEN key THEN 'value' ... END``: a table's words in SQL (``NULL`` for
    a key the table lacks)."""
    whens = " ".join(f"WHEN {quoted([k]) if isinstance(k, str) else k} THEN {quoted([v])}"
                     for k, v in values.items())
    return f"CASE {column} {whens} ELSE NULL END"


def _names(column: str, members: Iterable[ErrorCode | EventType | EventStatus]) -> str:
    """The names of an enum's members for the numbers in ``column``."""
    return _case(column, {int(m): m.name for m in members})


_ROLE = _case("rpc_method", {m.name: m.caller.value for m in METHODS.values()})
_SERVER_ROLE = _case("rpc_method", {m.name: m.server.value for m in METHODS.values()})
_REQUEST_NAME = _case("rpc_method", {m.name: m.request or m.name for m in METHODS.values()})
_MASTER_HEARTBEATS = quoted(m.name for m in METHODS.values()
                            if m.kind is Kind.HEARTBEAT and m.server is Role.MASTER)
_CONNECTS = ", ".join(str(int(e)) for e in EventType if e.connects)

IS_ERROR = (f"(rpc_status <> {_SUCCESS} OR (coalesce(err_code, {_OK}) <> {_OK} "
            f"AND NOT (rpc_method = {_FETCH} AND err_code = {int(ErrorCode.NOT_FOUND)})))")
"""SQL, over an answer's row (or a ``rpc_pairs`` row, whose ``method`` is named
``rpc_method`` there): is it an error (see the module doc)?"""

_RPC_PAIRS = f"""
WITH rpc AS (SELECT * FROM {FRAMES} WHERE rpc_serial IS NOT NULL AND {UNITS}),
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
SELECT protocol, conn_id, rpc_serial, method, service, request_ts, request_seq,
       request_packet, answer_ts, answer_seq, answer_packet, status, err_code,
       (answer_ts - request_ts) * 1000 AS latency_ms
FROM joined WHERE r = 1
"""

_PAIR_IS_ERROR = IS_ERROR.replace("rpc_status", "status").replace("rpc_method", "method")

_RPC_LATENCY = f"""
SELECT protocol, method, count(*) AS requests, count(answer_ts) AS answers,
       CAST(sum(CASE WHEN answer_ts IS NULL THEN 1 ELSE 0 END) AS BIGINT) AS unanswered,
       CAST(sum(CASE WHEN {_PAIR_IS_ERROR} THEN 1 ELSE 0 END) AS BIGINT) AS errors,
       min(latency_ms) AS min_ms, percentile(latency_ms, 0.5) AS p50_ms,
       percentile(latency_ms, 0.95) AS p95_ms, max(latency_ms) AS max_ms,
       avg(latency_ms) AS mean_ms
FROM rpc_pairs GROUP BY protocol, method
"""

_STATUSES = f"""
SELECT method, status, err_code, {_names("err_code", ErrorCode)} AS err_name,
       {_PAIR_IS_ERROR} AS error,
       count(*) AS answers, min(latency_ms) AS min_ms, max(latency_ms) AS max_ms
FROM rpc_pairs WHERE answer_ts IS NOT NULL GROUP BY method, status, err_code
"""

_SENDS = f"""
SELECT p.conn_id, {server('q.')} AS server, q.client_id, q.topic, q.partition_id, q.ts,
       q.seq, p.request_packet AS packet, p.answer_ts, p.answer_packet, p.status, p.err_code,
       element_at(a.msg_ids, 1) AS msg_id, a.append_offset, p.latency_ms
FROM rpc_pairs AS p
JOIN {FRAMES} AS q ON q.conn_id = p.conn_id AND q.seq = p.request_seq
LEFT JOIN {FRAMES} AS a ON a.conn_id = p.conn_id AND a.seq = p.answer_seq
WHERE p.method = {_SEND}
"""

_FETCHES = f"""
WITH fetched AS (
  SELECT p.conn_id, {server('q.')} AS server, q.client_id, q.group_name, q.topic,
         q.partition_id, p.request_packet, a.seq, a.ts, element_at(a.packets, 1) AS packet,
         a.msg_ids, a.curr_offset, a.max_offset
  FROM rpc_pairs AS p
  JOIN {FRAMES} AS q ON q.conn_id = p.conn_id AND q.seq = p.request_seq
  JOIN {FRAMES} AS a ON a.conn_id = p.conn_id AND a.seq = p.answer_seq
  WHERE p.method = {_FETCH} AND a.msg_ids IS NOT NULL
), ends AS (
  SELECT f.conn_id, f.topic, f.partition_id, f.seq, f.ts, element_at(f.packets, 1) AS packet,
         f.rpc_method AS method,
         CASE WHEN f.rpc_method = {_REGISTER}
              THEN coalesce(f.op_type = {MSG_OPTYPE_UNREGISTER}
                            AND f.read_status = {int(UnregisterStatus.CONSUMED)}, false)
              ELSE coalesce(f.last_pack_consumed, false) END AS consumed,
         p.err_code
  FROM {FRAMES} AS f LEFT JOIN rpc_pairs AS p ON p.conn_id = f.conn_id AND p.request_seq = f.seq
  WHERE f.kind = 'command' AND f.rpc_method IN ({_COMMIT}, {_FETCH}, {_REGISTER})
), marks AS (
  SELECT conn_id, topic, partition_id, seq, 0 AS is_end FROM fetched
  UNION ALL
  SELECT conn_id, topic, partition_id, seq, 1 AS is_end FROM ends
), nexted AS (
  SELECT conn_id, seq, is_end,
         min(CASE WHEN is_end = 1 THEN seq END) OVER (
           PARTITION BY conn_id, topic, partition_id ORDER BY seq
           ROWS BETWEEN 1 FOLLOWING AND UNBOUNDED FOLLOWING) AS end_seq
  FROM marks
)
SELECT f.server, f.topic, f.partition_id, explode(f.msg_ids) AS msg_id, f.conn_id,
       f.client_id, f.group_name, f.ts, f.packet, f.request_packet,
       CAST(size(f.msg_ids) AS INT) AS batch, f.curr_offset, f.max_offset,
       CASE WHEN e.seq IS NULL THEN 'open' WHEN e.consumed THEN 'committed'
            ELSE 'not consumed' END AS outcome,
       e.method AS outcome_method, e.ts AS outcome_ts, e.packet AS outcome_packet,
       e.err_code AS outcome_err_code
FROM fetched AS f JOIN nexted AS n ON n.conn_id = f.conn_id AND n.seq = f.seq AND n.is_end = 0
LEFT JOIN ends AS e ON e.conn_id = f.conn_id AND e.seq = n.end_seq
"""

_MESSAGE_KEY = "server, topic, partition_id, msg_id"

_MESSAGES = f"""
WITH sent AS (
  SELECT {_MESSAGE_KEY}, conn_id, client_id, ts, packet, answer_ts, answer_packet,
         append_offset,
         row_number() OVER (PARTITION BY {_MESSAGE_KEY} ORDER BY ts, conn_id, seq) AS r
  FROM tubemq_sends WHERE msg_id IS NOT NULL
), got AS (
  SELECT {_MESSAGE_KEY}, count(*) AS fetches_count, min(ts) AS first_fetch_ts,
         sort_array(collect_set(group_name) FILTER (WHERE outcome = 'committed'))
           AS committed_by,
         sort_array(collect_list(struct(ts, packet, conn_id, client_id, group_name, batch,
                                        outcome, outcome_method, outcome_ts, outcome_packet,
                                        outcome_err_code))) AS fetches
  FROM tubemq_fetches GROUP BY {_MESSAGE_KEY}
), keys AS (
  SELECT {_MESSAGE_KEY} FROM sent WHERE r = 1
  UNION
  SELECT {_MESSAGE_KEY} FROM got
)
SELECT k.server, k.topic, k.partition_id, k.msg_id, s.conn_id AS producer,
       s.client_id AS producer_id, s.ts AS send_ts, s.packet AS send_packet,
       s.answer_ts AS send_answer_ts, s.answer_packet AS send_answer_packet,
       s.append_offset, coalesce(g.fetches_count, 0) AS fetches_count, g.fetches,
       g.committed_by, g.first_fetch_ts - s.ts AS send_to_fetch_s
FROM keys AS k
LEFT JOIN sent AS s ON s.r = 1 AND s.server = k.server AND s.topic = k.topic
  AND s.partition_id = k.partition_id AND s.msg_id = k.msg_id
LEFT JOIN got AS g ON g.server = k.server AND g.topic = k.topic
  AND g.partition_id = k.partition_id AND g.msg_id = k.msg_id
"""

_HEARTBEATS_VIEW = f"""
WITH beats AS (
  SELECT p.conn_id, p.method, p.request_ts AS ts, p.request_seq AS seq,
         p.request_packet AS packet, p.answer_ts, p.answer_seq, p.answer_packet, p.status,
         p.err_code, p.latency_ms, q.partitions, a.partitions AS failed_partitions
  FROM rpc_pairs AS p
  JOIN {FRAMES} AS q ON q.conn_id = p.conn_id AND q.seq = p.request_seq
  LEFT JOIN {FRAMES} AS a ON a.conn_id = p.conn_id AND a.seq = p.answer_seq
  WHERE p.method IN ({_HEARTBEATS})
), registers AS (
  SELECT conn_id, seq, {FIRST_PACKET} AS packet
  FROM {FRAMES} WHERE {COMMAND} AND rpc_method IN ({_REGISTERS})
), marks AS (
  SELECT conn_id, coalesce(answer_seq, seq) AS seq, 0 AS is_register FROM beats
  UNION ALL
  SELECT conn_id, seq, 1 AS is_register FROM registers
), nexted AS (
  SELECT conn_id, seq, is_register,
         min(CASE WHEN is_register = 1 THEN seq END) OVER (
           PARTITION BY conn_id ORDER BY seq
           ROWS BETWEEN 1 FOLLOWING AND UNBOUNDED FOLLOWING) AS register_seq
  FROM marks
), numbered AS (
  SELECT b.*, coalesce(b.err_code = {int(ErrorCode.HB_NO_NODE)}, false) AS hb_no_node,
         row_number() OVER (PARTITION BY b.conn_id ORDER BY b.seq) AS heartbeat,
         b.ts - lag(b.ts) OVER (PARTITION BY b.conn_id ORDER BY b.seq) AS interval_s,
         r.packet AS register_packet
  FROM beats AS b
  JOIN nexted AS n ON n.conn_id = b.conn_id AND n.seq = coalesce(b.answer_seq, b.seq)
    AND n.is_register = 0
  LEFT JOIN registers AS r ON r.conn_id = n.conn_id AND r.seq = n.register_seq
), streaks AS (
  SELECT *, sum(CASE WHEN hb_no_node THEN 0 ELSE 1 END) OVER (
              PARTITION BY conn_id ORDER BY heartbeat
              ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS grp
  FROM numbered
)
SELECT conn_id, method, CAST(heartbeat AS BIGINT) AS heartbeat, ts, packet, interval_s,
       answer_ts IS NOT NULL AS answered, answer_packet, latency_ms, status, err_code,
       hb_no_node,
       CAST(CASE WHEN hb_no_node THEN sum(CASE WHEN hb_no_node THEN 1 ELSE 0 END) OVER (
              PARTITION BY conn_id, grp ORDER BY heartbeat
              ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) ELSE 0 END AS BIGINT)
         AS hb_no_node_in_row,
       CASE WHEN hb_no_node THEN register_packet END AS registered_again_packet,
       partitions, failed_partitions
FROM streaks
"""

_REBALANCES = f"""
WITH pushed AS (
  SELECT a.conn_id, a.rebalance_id, a.op_type, a.seq, a.ts, element_at(a.packets, 1) AS packet,
         a.event_partitions, q.client_id, q.group_name
  FROM {FRAMES} AS a
  JOIN rpc_pairs AS p ON p.conn_id = a.conn_id AND p.answer_seq = a.seq
  JOIN {FRAMES} AS q ON q.conn_id = p.conn_id AND q.seq = p.request_seq
  WHERE a.kind = 'frame' AND a.rebalance_id IS NOT NULL
), events AS (
  SELECT conn_id, rebalance_id, op_type, min(seq) AS seq, min(ts) AS ts,
         min_by(packet, seq) AS packet, min_by(event_partitions, seq) AS partitions,
         count(*) AS pushes, min_by(client_id, seq) AS client_id,
         min_by(group_name, seq) AS group_name
  FROM pushed GROUP BY conn_id, rebalance_id, op_type
), reported AS (
  SELECT e.conn_id, e.rebalance_id, e.op_type, min(r.seq) AS report_seq
  FROM events AS e JOIN {FRAMES} AS r
    ON r.conn_id = e.conn_id AND r.rebalance_id = e.rebalance_id AND r.op_type = e.op_type
       AND r.seq > e.seq AND r.kind = 'command'
  GROUP BY e.conn_id, e.rebalance_id, e.op_type
), beats AS (
  SELECT e.conn_id, e.rebalance_id, e.op_type, count(h.conn_id) AS beats
  FROM events AS e
  LEFT JOIN reported AS d ON d.conn_id = e.conn_id AND d.rebalance_id = e.rebalance_id
    AND d.op_type = e.op_type
  LEFT JOIN {FRAMES} AS h ON h.conn_id = e.conn_id AND h.kind = 'command'
    AND h.rpc_method IN ({_HEARTBEATS}) AND h.seq > e.seq
    AND h.seq < coalesce(d.report_seq, h.seq + 1)
  GROUP BY e.conn_id, e.rebalance_id, e.op_type
)
SELECT e.conn_id, e.client_id, e.group_name, e.rebalance_id, e.op_type,
       {_names("e.op_type", EventType)} AS event, e.partitions, e.ts, e.packet,
       CAST(e.pushes AS BIGINT) AS pushes, r.seq IS NOT NULL AS reported,
       r.event_status AS report_status,
       {_names("r.event_status", EventStatus)} AS report_status_name,
       r.ts AS report_ts, element_at(r.packets, 1) AS report_packet,
       r.ts - e.ts AS report_s, CAST(b.beats AS BIGINT) AS heartbeats_before_report
FROM events AS e
LEFT JOIN reported AS d ON d.conn_id = e.conn_id AND d.rebalance_id = e.rebalance_id
  AND d.op_type = e.op_type
LEFT JOIN {FRAMES} AS r ON r.conn_id = d.conn_id AND r.seq = d.report_seq
JOIN beats AS b ON b.conn_id = e.conn_id AND b.rebalance_id = e.rebalance_id
  AND b.op_type = e.op_type
"""

_PARTITIONS = f"""
WITH regs AS (
  SELECT q.conn_id, {server('q.')} AS server, q.client_id, q.group_name, q.topic,
         q.partition_id, q.seq, q.ts, element_at(q.packets, 1) AS packet,
         q.op_type, q.read_status, p.answer_packet, p.status, p.err_code
  FROM {FRAMES} AS q LEFT JOIN rpc_pairs AS p ON p.conn_id = q.conn_id AND p.request_seq = q.seq
  WHERE q.kind = 'command' AND q.rpc_method = {_REGISTER}
), fetches AS (
  SELECT q.conn_id, q.topic, q.partition_id, q.seq, size(a.msg_ids) AS messages
  FROM {FRAMES} AS q
  LEFT JOIN rpc_pairs AS p ON p.conn_id = q.conn_id AND p.request_seq = q.seq
  LEFT JOIN {FRAMES} AS a ON a.conn_id = p.conn_id AND a.seq = p.answer_seq
  WHERE q.kind = 'command' AND q.rpc_method = {_FETCH}
), stream AS (
  SELECT conn_id, topic, partition_id, seq, 1 AS is_register, 0 AS messages FROM regs
  UNION ALL
  SELECT conn_id, topic, partition_id, seq, 0 AS is_register,
         coalesce(messages, 0) AS messages FROM fetches
), grouped AS (
  SELECT *, sum(is_register) OVER (
              PARTITION BY conn_id, topic, partition_id ORDER BY seq
              ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS g
  FROM stream
), counted AS (
  SELECT conn_id, topic, partition_id, min(seq) AS seq,
         CAST(sum(1 - is_register) AS BIGINT) AS fetches,
         CAST(sum(messages) AS BIGINT) AS messages
  FROM grouped WHERE g > 0 GROUP BY conn_id, topic, partition_id, g
), ordered AS (
  SELECT *, lead(op_type) OVER w AS next_op_type, lead(ts) OVER w AS next_ts,
         lead(packet) OVER w AS next_packet, lead(read_status) OVER w AS next_read_status
  FROM regs WINDOW w AS (PARTITION BY conn_id, topic, partition_id ORDER BY seq)
)
SELECT o.conn_id, o.server, o.client_id, o.group_name, o.topic, o.partition_id, o.ts,
       o.packet, o.read_status, o.answer_packet, o.status, o.err_code,
       {_names("o.err_code", ErrorCode)} AS err_name,
       coalesce(o.status = {_SUCCESS} AND o.err_code = {_OK}, false) AS held,
       CASE WHEN o.next_op_type = {MSG_OPTYPE_UNREGISTER} THEN 'unregistered'
            WHEN o.next_op_type IS NOT NULL THEN 'registered again'
            ELSE 'to the end' END AS released,
       o.next_ts AS released_ts, o.next_packet AS released_packet,
       CASE WHEN o.next_op_type = {MSG_OPTYPE_UNREGISTER} THEN o.next_read_status END
         AS released_read_status,
       coalesce(c.fetches, 0) AS fetches, coalesce(c.messages, 0) AS messages
FROM ordered AS o LEFT JOIN counted AS c ON c.conn_id = o.conn_id AND c.seq = o.seq
WHERE o.op_type = {MSG_OPTYPE_REGISTER}
"""

_CONNECTIONS = f"""
WITH units AS (
  SELECT * FROM {FRAMES} WHERE conn_id IS NOT NULL AND {UNITS}
), base AS (
  SELECT conn_id,
         min_by({_ROLE}, seq) FILTER (WHERE {COMMAND} AND rpc_method IS NOT NULL) AS role,
         min_by({_SERVER_ROLE}, seq) FILTER (WHERE {COMMAND} AND rpc_method IS NOT NULL)
           AS server_role,
         min_by(client_id, seq) FILTER (WHERE client_id IS NOT NULL) AS client_id,
         min_by(group_name, seq) FILTER (WHERE group_name IS NOT NULL) AS group_name,
         CAST(sum(CASE WHEN {COMMAND} AND rpc_method IN ({_HEARTBEATS}) THEN 1 ELSE 0 END)
              AS BIGINT) AS heartbeats,
         CAST(sum(CASE WHEN kind = 'frame' AND rpc_method IN ({_HEARTBEATS})
                        AND err_code = {int(ErrorCode.HB_NO_NODE)} THEN 1 ELSE 0 END)
              AS BIGINT) AS hb_no_node,
         CAST(sum(CASE WHEN kind = 'frame' AND rpc_method = {_SEND} AND msg_ids IS NOT NULL
                       THEN 1 ELSE 0 END) AS BIGINT) AS messages_published,
         CAST(sum(CASE WHEN kind = 'frame' AND rpc_method = {_FETCH} AND msg_ids IS NOT NULL
                       THEN size(msg_ids) ELSE 0 END) AS BIGINT) AS messages_in
  FROM units GROUP BY conn_id
), topics AS (
  SELECT conn_id, array_sort(collect_set(t)) AS topics
  FROM (SELECT conn_id, topic AS t FROM units WHERE topic IS NOT NULL
        UNION ALL
        SELECT conn_id, explode(topics) AS t FROM units WHERE topics IS NOT NULL) AS x
  GROUP BY conn_id
), parts AS (
  SELECT conn_id, array_sort(collect_set(p)) AS partitions
  FROM (SELECT conn_id, concat(topic, ':', CAST(partition_id AS STRING)) AS p
        FROM units WHERE {COMMAND} AND partition_id IS NOT NULL AND topic IS NOT NULL
        UNION ALL
        SELECT conn_id, explode(event_partitions) AS p FROM units
        WHERE kind = 'frame' AND event_partitions IS NOT NULL AND op_type IN ({_CONNECTS})
        UNION ALL
        SELECT conn_id, explode(partitions) AS p FROM units
        WHERE kind = 'frame' AND partitions IS NOT NULL
          AND rpc_method IN ({_MASTER_HEARTBEATS})
       ) AS x
  GROUP BY conn_id
), calls AS (
  SELECT conn_id,
         min_by(request_packet, request_seq) FILTER (
           WHERE method IN ({_REGISTERS}) AND status = {_SUCCESS} AND err_code = {_OK})
           AS registered_packet,
         min_by(method, request_seq) FILTER (WHERE method IN ({_CLOSES})) AS closed_with,
         min_by(request_packet, request_seq) FILTER (WHERE method IN ({_CLOSES}))
           AS close_packet,
         min_by(err_code, request_seq) FILTER (WHERE method IN ({_CLOSES})) AS close_err_code
  FROM rpc_pairs GROUP BY conn_id
), events AS (
  SELECT conn_id, count(*) AS rebalances,
         CAST(sum(CASE WHEN reported THEN 0 ELSE 1 END) AS BIGINT) AS rebalances_unreported
  FROM tubemq_rebalances GROUP BY conn_id
)
SELECT b.conn_id, b.role, b.server_role, b.client_id, b.group_name, t.topics, s.partitions,
       b.heartbeats, b.hb_no_node, coalesce(e.rebalances, 0) AS rebalances,
       coalesce(e.rebalances_unreported, 0) AS rebalances_unreported,
       b.messages_published, b.messages_in,
       c.registered_packet, c.closed_with, c.close_packet, c.close_err_code
FROM base AS b
LEFT JOIN topics AS t ON t.conn_id = b.conn_id
LEFT JOIN parts AS s ON s.conn_id = b.conn_id
LEFT JOIN calls AS c ON c.conn_id = b.conn_id
LEFT JOIN events AS e ON e.conn_id = b.conn_id
"""

ANALYSES = Analyses(
    views=(
        View("rpc_pairs", _RPC_PAIRS, """One row per RPC request: method, the answer's status
and errCode, latency in ms (null: unanswered), with both packets (and both rows' place
in the connection, ``request_seq``/``answer_seq``)."""),
        View("rpc_latency", _RPC_LATENCY, """Per protocol and method: requests, answers,
unanswered, errors (:data:`IS_ERROR`), latency in ms (exact percentiles) when answered.""",
             across_servers=True),
        View("tubemq_statuses", _STATUSES, """Per method, status and errCode: how many
answers (with the errCode's name, whether it is an error by :data:`IS_ERROR`, the fastest
and slowest in ms).""", across_servers=True),
        View("tubemq_sends", _SENDS, """One row per SendMessageRequestP2B: producer,
topic, partition, the Broker's answer (status, errCode, the message id and its
appendOffset) and the latency in ms."""),
        View("tubemq_fetches", _FETCHES, """One row per message a fetch brought
(GetMessageResponseB2C): message, consumer (connection, clientId, group), the batch it
came in, and how the batch ended -- committed, not consumed or open -- by which call, when
and in which packet."""),
        View("tubemq_messages", _MESSAGES, """One row per message (Broker, topic, partition,
message id): its send and the Broker's answer, every fetch of it with its outcome, the
groups that committed it, and the time from send to first fetch. Linked by the id the
Broker assigned, which its send answer and every fetch answer carry; a send the Broker
did not answer with an id (refused, or its answer not captured) cannot be linked and is
not here (``tubemq_sends`` has it), a message whose send was not captured has no send;
offsets locate no message (a fetch answer has one offset for its partition, none per
message). The module doc says why."""),
        View("tubemq_heartbeats", _HEARTBEATS_VIEW, """One row per heartbeat call, to the
Master or a Broker: interval, answer, latency, 411 HB_NO_NODE (the server's registration
timeout) and how many in a row, the packet of the register call that followed one, and
the partitions the heartbeat names (held; failed, in a Broker's answer)."""),
        View("tubemq_rebalances", _REBALANCES, """One row per rebalance event the Master
sent a consumer (rebalanceId, opType, partitions, packet, how often pushed): whether and
when the consumer reported it back, with which status, after how many heartbeats."""),
        View("tubemq_partitions", _PARTITIONS, """One row per partition registration of a
consumer on a Broker (RegisterRequestC2B opType 31): the answer (held, or refused: 410
PARTITION_OCCUPIED ...), how it was released (unregistered with its readStatus,
registered again, or held to the end), and the fetches and messages in between."""),
        View("tubemq_connections", _CONNECTIONS, """TubeMQ's columns of the ``connections``
table, one row per TubeMQ connection: role (producer, consumer, broker) and server role
(master, broker), clientId, group, topics, partitions, heartbeats and 411s, rebalance
events, messages sent and fetched, the register and close calls.""", step=True),
    ),
    connections=ConnectionColumns("tubemq_connections", (
        ("role", "'other'"), ("server_role", None), ("client_id", None),
        ("group_name", None), ("topics", None), ("partitions", None),
        ("heartbeats", "0"), ("hb_no_node", "0"), ("rebalances", "0"),
        ("rebalances_unreported", "0"), ("messages_published", "0"), ("messages_in", "0"),
        ("registered_packet", None), ("closed_with", None), ("close_packet", None),
        ("close_err_code", None),
    )),
    errors=ErrorAnswers(
        answer=f"kind = 'frame' AND {IS_ERROR}",
        code=f"CASE WHEN rpc_status <> {_SUCCESS} THEN rpc_status "
             f"ELSE concat_ws(' ', CAST(err_code AS STRING), {_names('err_code', ErrorCode)}) END",
        names=_REQUEST_NAME),
)
"""TubeMQ's analyses (:class:`nsqviz.sql.Analyses`), read through
:attr:`nsqviz.tubemq.protocol.TubeMQProtocol.analyses`."""
