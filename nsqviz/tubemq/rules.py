"""TubeMQ's doctor rules: declarative definitions over its analyses' tables
(:mod:`nsqviz.tubemq.analyses`: ``rpc_pairs``, every request with its answer), kept with
the protocol and run by the same engines as its analyses
(:attr:`nsqviz.protocols.protocol.Protocol.rules`; :mod:`nsqviz.doctor` says how a rule is
written).

* ``tubemq.heartbeat-timeout`` -- a Master's heartbeat answered 411 HB_NO_NODE after the
  Master had accepted the client's registration on that connection (its registration
  timed out: the Master forgot the client), and whether the client registered again
  there;
* ``tubemq.rpc-error`` -- answers with a failure status (ERROR, FATAL) or an errCode
  other than 200, by method and code, over every broker and Master of the capture --
  except the answers a consumer's fetch gets when there is nothing for it
  (:data:`FETCH_IDLE`);
* ``tubemq.rebalance`` -- a rebalance event a consumer never reported done, and a
  partition held by two consumers of a group (:mod:`nsqviz.tubemq.rules_rebalance`).

Every method name, errCode and status comes from TubeMQ's tables
(:mod:`nsqviz.tubemq.tables`, :class:`~nsqviz.tubemq.protos.RpcStatus`).
"""

from __future__ import annotations

from nsqviz.doctor.rule import EVIDENCE_LIMIT, Rule, Severity, evidence, figures
from nsqviz.sql import View, quoted
from nsqviz.tubemq.protos import RpcStatus
from nsqviz.tubemq.rules_rebalance import REBALANCE
from nsqviz.tubemq.tables import METHOD_SEND_MESSAGE, METHODS, ErrorCode, Kind, Service

__all__ = ["FETCH_IDLE", "RULES"]

_OK = int(ErrorCode.SUCCESS)
_SUCCESS = RpcStatus.SUCCESS.name
_MASTER_HEARTBEATS = quoted(m.name for m in METHODS.values()
                            if m.kind is Kind.HEARTBEAT and m.services == (Service.MASTER,))
_MASTER_REGISTERS = quoted(m.name for m in METHODS.values()
                           if m.kind is Kind.REGISTER and m.services == (Service.MASTER,))
_FETCH = quoted(m.name for m in METHODS.values() if m.request == "GetMessageRequestC2B")

FETCH_IDLE = (ErrorCode.NOT_FOUND, ErrorCode.ALL_PARTITION_FROZEN,
              ErrorCode.NO_PARTITION_ASSIGNED, ErrorCode.ALL_PARTITION_WAITING,
              ErrorCode.ALL_PARTITION_INUSE)
"""A fetch's answers that say "nothing for you now" -- no new message at this offset, the
partitions frozen, waiting or in use: an idle consumer's ordinary answers, which the Java
client ignores (its IGNORE_ERROR_SET) and retries after a wait. Not errors."""


def _names(column: str) -> str:
    """SQL: the name of errCode ``column`` (``TOPIC_NOT_DEPLOYED``), from TubeMQ's table."""
    arms = " ".join(f"WHEN {int(c)} THEN '{c.name}'" for c in ErrorCode)
    return f"CASE {column} {arms} ELSE CAST({column} AS STRING) END"


def _meanings(column: str) -> str:
    """SQL: what errCode ``column`` means, from TubeMQ's table."""
    arms = " ".join("WHEN {} THEN '{}'".format(int(c), c.meaning.replace("'", "''"))
                    for c in ErrorCode)
    return f"CASE {column} {arms} ELSE 'an errCode TubeMQ does not define' END"


_HB_NO_NODE = int(ErrorCode.HB_NO_NODE)

_HEARTBEAT_TIMEOUT = f"""
WITH known AS (
  -- the Master accepted the client's registration on the connection: it knew it
  SELECT conn_id, min(answer_ts) AS ts FROM rpc_pairs
  WHERE method IN ({_MASTER_REGISTERS}) AND status = '{_SUCCESS}'
    AND coalesce(err_code, {_OK}) = {_OK}
  GROUP BY conn_id
), lost AS (
  SELECT h.conn_id, h.method, h.answer_ts, h.answer_packet
  FROM rpc_pairs AS h JOIN known AS k ON k.conn_id = h.conn_id AND h.request_ts > k.ts
  WHERE h.method IN ({_MASTER_HEARTBEATS}) AND h.err_code = {_HB_NO_NODE}
), per AS (
  SELECT conn_id, min(method) AS method, count(*) AS timeouts, min(answer_ts) AS first_ts
  FROM lost GROUP BY conn_id
), again AS (
  -- the client registered again on that connection after its first 411
  SELECT p.conn_id, min_by(r.request_ts, r.request_ts) AS ts,
         min_by(r.request_packet, r.request_ts) AS packet
  FROM per AS p JOIN rpc_pairs AS r ON r.conn_id = p.conn_id
   AND r.method IN ({_MASTER_REGISTERS}) AND r.request_ts > p.first_ts
  GROUP BY p.conn_id
), ev_rows AS (
  SELECT conn_id AS k, answer_ts AS ts, answer_packet AS packet, conn_id,
         CAST(NULL AS STRING) AS msg_id,
         method || ' answered {_HB_NO_NODE} HB_NO_NODE' AS what
  FROM lost
  UNION ALL
  SELECT conn_id, ts, packet, conn_id, NULL, 'registered again' FROM again
), evd AS ({evidence("ev_rows", ("k",))}
)
SELECT split_part(split_part(p.conn_id, '->', 2), '@', 1) AS server, p.conn_id,
       e.first_ts AS ts, e.evidence,
       {figures("method", "code", "timeouts", "reregistered", "reregistered_packet")}
         AS figures, p.reregistered
FROM (SELECT p.*, {_HB_NO_NODE} AS code, a.ts IS NOT NULL AS reregistered,
             a.packet AS reregistered_packet
      FROM per AS p LEFT JOIN again AS a ON a.conn_id = p.conn_id) AS p
JOIN evd AS e ON e.k = p.conn_id
"""

HEARTBEAT_TIMEOUT = Rule(
    "tubemq.heartbeat-timeout", "the Master forgot a client: heartbeats answered 411",
    Severity.WARNING, _HEARTBEAT_TIMEOUT,
    summary="{timeouts:/heartbeat/heartbeats} ({method}) answered {code} HB_NO_NODE by the "
            "Master{?reregistered}; the client registered again (packet "
            "{reregistered_packet}){/}",
    explanation="The Master answers a heartbeat {code} HB_NO_NODE when it no longer knows "
                "the client: it heard nothing from it for longer than its registration "
                "timeout (30 s by default) and removed it -- its partitions went to the "
                "group's other consumers, its topics' publish rights lapsed. Until the "
                "client registers again, every heartbeat gets the same answer. A client "
                "that does not register again keeps heartbeating for nothing: a consumer "
                "is given no partition, a producer no updated topic and broker list.",
    change="Register again (RegisterRequestC2M / RegisterRequestP2M) on a {code} "
           "heartbeat answer, as the Java client does; and find what kept the client "
           "silent past the Master's timeout (a long GC pause, a stalled VM, a blocked "
           "heartbeat thread).",
    severity_sql=f"CASE WHEN reregistered THEN '{Severity.WARNING.value}' "
                 f"ELSE '{Severity.ERROR.value}' END",
)

_RPC_ERROR_PARTS = f"""
WITH bad AS (
  SELECT split_part(split_part(conn_id, '->', 2), '@', 1) AS server, conn_id, method,
         answer_ts, answer_packet,
         CASE WHEN status <> '{_SUCCESS}' THEN ''
              ELSE {_names("err_code")} END AS code_name,
         CASE WHEN status <> '{_SUCCESS}' THEN status
              ELSE CAST(err_code AS STRING) END AS code,
         CASE WHEN status <> '{_SUCCESS}' THEN 'an exception: the server failed the call'
              ELSE {_meanings("err_code")} END AS meaning
  FROM rpc_pairs
  WHERE answer_ts IS NOT NULL AND (status <> '{_SUCCESS}' OR coalesce(err_code, {_OK}) <> {_OK})
    AND NOT (method IN ({_FETCH}) AND err_code IN ({", ".join(str(int(c)) for c in FETCH_IDLE)}))
), ev_rows AS (
  SELECT server, method, code, answer_ts AS ts, answer_packet AS packet, conn_id,
         CAST(NULL AS STRING) AS msg_id,
         method || ' answered ' || code || ' ' || code_name AS what
  FROM bad
), evd AS ({evidence("ev_rows", ("server", "method", "code"))}
)
SELECT b.server, b.method, b.code, min(b.code_name) AS code_name, min(b.meaning) AS meaning,
       count(*) AS answers, count(DISTINCT b.conn_id) AS connections,
       min(e.first_ts) AS first_ts, min(e.evidence) AS evidence
FROM bad AS b JOIN evd AS e ON e.server = b.server AND e.method = b.method
  AND e.code = b.code
GROUP BY b.server, b.method, b.code
"""

_RPC_ERROR = f"""
SELECT CAST(NULL AS STRING) AS server, CAST(NULL AS STRING) AS conn_id, p.ts, p.evidence,
       {figures("method", "code", "code_name", "meaning", "count", "connections",
                "servers")} AS figures, p.method, p.code
FROM (SELECT method, code, min(code_name) AS code_name, min(meaning) AS meaning,
             CAST(sum(answers) AS BIGINT) AS count,
             CAST(sum(connections) AS BIGINT) AS connections,
             CAST(count(*) AS BIGINT) AS servers, min(first_ts) AS ts,
             slice(sort_array(flatten(collect_list(evidence))), 1, {EVIDENCE_LIMIT})
               AS evidence
      FROM rpc_error_parts GROUP BY method, code) AS p
"""

RPC_ERROR = Rule(
    "tubemq.rpc-error", "RPC answers with a failure status or errCode, by method",
    Severity.WARNING, _RPC_ERROR,
    summary="{method} answered {code}{?code_name} {code_name}{/} {count:/time/times}",
    explanation="{count:/answer/answers} of {method} on {connections:/connection/"
                "connections} said {code}{?code_name} {code_name}{/}: {meaning}. The call "
                "did not do what the client asked; what follows depends on the client -- a refused "
                "send loses the message unless the producer retries it, a refused "
                "registration leaves the client without its topic or partition.",
    change="Read the answer's errCode and errMsg: fix the request (topic deployed on the "
           "Master, message within the topic's maximum size, partitions released before "
           "another consumer takes them), or the server's configuration it names.",
    severity_sql=f"CASE WHEN code IN ('{RpcStatus.ERROR.name}', '{RpcStatus.FATAL.name}') "
                 f"OR method = '{METHODS[METHOD_SEND_MESSAGE].name}' "
                 f"THEN '{Severity.ERROR.value}' ELSE '{Severity.WARNING.value}' END",
    across_servers=True,
    steps=(View("rpc_error_parts", _RPC_ERROR_PARTS, """Per broker or Master, method and
code: the failed RPC answers, with their evidence (built where the server's frames are).""",
                step=True),),
)

RULES: tuple[Rule, ...] = (HEARTBEAT_TIMEOUT, REBALANCE, RPC_ERROR)
"""Every rule of the protocol, in the order its findings are listed."""
