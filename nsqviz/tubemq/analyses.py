"""TubeMQ's analyses: SQL over TubeMQ's rows of the frames table
(:func:`nsqviz.sql.frames_of`), read by both engines (:mod:`nsqviz.sql` says how
analyses are defined and collected).

An RPC answer is paired with the earliest answer of the same ``rpc_serial`` on the same
connection that follows the request; a request with no answer before the capture ends
is counted ``unanswered``. An answer is an error when its status is not SUCCESS or its
``errCode`` is not 200 (the names and codes come from TubeMQ's tables).
"""

from __future__ import annotations

from nsqviz.sql import UNITS, Analyses, View, frames_of
from nsqviz.tubemq.protos import RpcStatus
from nsqviz.tubemq.tables import ErrorCode

__all__ = ["ANALYSES"]

FRAMES = frames_of("tubemq")
"""TubeMQ's rows of the frames table: the only rows TubeMQ's views read."""

_OK = int(ErrorCode.SUCCESS)

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
SELECT protocol, conn_id, rpc_serial, method, service, request_ts, request_packet,
       answer_ts, answer_packet, status, err_code,
       (answer_ts - request_ts) * 1000 AS latency_ms
FROM joined WHERE r = 1
"""

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

ANALYSES = Analyses(views=(
    View("rpc_pairs", _RPC_PAIRS, """One row per RPC request: method, the answer's status
and errCode, latency in ms (null: unanswered), with both packets."""),
    View("rpc_latency", _RPC_LATENCY, """Per protocol and method: requests, answers,
unanswered, errors (an answer that is not SUCCESS or whose errCode is not 200), latency
in ms (exact percentiles) when answered.""", across_servers=True),
))
"""TubeMQ's analyses (:class:`nsqviz.sql.Analyses`), read through
:attr:`nsqviz.tubemq.protocol.TubeMQProtocol.analyses`."""
