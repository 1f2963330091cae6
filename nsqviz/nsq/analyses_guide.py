"""NSQ's views of the client guide (:mod:`nsqviz.nsq.analyses` lists them): each NSQ
connection's rows as ``nsqviz conformance``'s checks read them, for the ``guide`` table
of every verdict, and for the doctor's ``guide_failures``, the failed ones only.

The checks are Python (:mod:`nsqviz.conformance.rules`: one definition, which ``nsqviz
conformance`` runs on the connections it decodes itself) folded over every message and
answer of a connection -- on a capture of a million messages, most of what the doctor
costs. A failure needs much less: of the rules that read every message
(:data:`~nsqviz.conformance.rules.MESSAGE_RULES`), ``in-flight`` fails only on an answer
nsqd refused or one for an id whose last delivery or answer before it on the connection
was not a delivery; ``rdy-update`` only on a RDY re-sent with the count of the RDY before
it (not 0) with at most three quarters of that count of messages between the two -- the
check gives the client the benefit of every message passed since the earlier RDY at
least; ``heartbeat`` only where nsqd sent a heartbeat. ``guide_failures`` finds in SQL
the connections where none of these can happen and hands the checks only their control
rows (and first and last events): the other rules fail on those as on the whole
connection.
"""

from __future__ import annotations

from nsqviz.nsq import events as ev
from nsqviz.nsq.commands import FRAME_NAMES
from nsqviz.nsq.rules_sql import ERROR, FIN, FRAMES, MESSAGE, RDY, REQ, TOUCH
from nsqviz.nsq.wire import HEARTBEAT
from nsqviz.sql import ANSWER_PAIRS, UNITS, server

__all__ = ["GUIDE", "GUIDE_FAILURES"]

_ANSWERS = f"{FIN}, {REQ}, {TOUCH}"
_RESPONSE = f"'{FRAME_NAMES[ev.Response]}'"
_HEARTBEAT = f"'{HEARTBEAT.decode()}'"


def _rows(extra: str = "") -> str:
    """SQL: a connection's rows as the checks read them (:data:`nsqviz.conformance.
    frames.INPUT`), with ``extra`` columns of ``f``."""
    return f"""
SELECT {server('f.')} AS server, f.conn_id, f.ts, f.dir, f.kind, f.name, f.packets, f.file,
       f.packet_files, f.violation,
       -- a FIN/REQ/TOUCH nsqd answered with an error (its id not in flight): the answer,
       -- as nsqviz conformance marks the command refused
       coalesce(f.reason, e.data) AS reason,
       f.msg_id, f.count, f.delay_ms, f.attempts, f.msg_ts, f.data, f.topic, f.channel{extra}
FROM {{rows}} AS f
LEFT JOIN {ANSWER_PAIRS} AS p ON p.conn_id = f.conn_id AND p.command_seq = f.seq
 AND p.name = {ERROR} AND f.name IN ({_ANSWERS}) AND f.violation IS NULL
LEFT JOIN {FRAMES} AS e ON e.conn_id = p.conn_id AND e.seq = p.seq"""


_JUDGED = "f.conn_id IS NOT NULL AND f.kind IN ('command', 'frame', 'gap', 'flow')"

GUIDE = _rows().format(rows=FRAMES) + f"""
WHERE {_JUDGED}
ORDER BY f.conn_id, f.seq
"""
"""The ``guide`` view's rows, each connection's in order (its checks run on them:
:func:`nsqviz.conformance.frames.verdicts`)."""

GUIDE_FAILURES = f"""
WITH units AS (
  SELECT conn_id, seq, name, coalesce(msg_id, '') AS id, count FROM {FRAMES}
  WHERE conn_id IS NOT NULL AND {UNITS}
), ids AS (
  SELECT conn_id, id,
         count(*) FILTER (WHERE name IN ({FIN}, {REQ})) AS ends,
         min(seq) FILTER (WHERE name = {MESSAGE}) AS first_message,
         min(seq) FILTER (WHERE name IN ({FIN}, {REQ})) AS first_end,
         min(seq) FILTER (WHERE name = {TOUCH}) AS first_touch,
         max(seq) FILTER (WHERE name = {TOUCH}) AS last_touch
  FROM units WHERE name IN ({MESSAGE}, {_ANSWERS}) GROUP BY conn_id, id
), unsure AS (
  -- every answer of the other ids follows its one delivery: a FIN or REQ after it, a
  -- TOUCH between the two
  SELECT conn_id, id FROM ids
  WHERE ends > 1 OR (ends = 1 AND coalesce(first_message > first_end, true))
     OR (first_touch IS NOT NULL
         AND (first_message IS NULL OR first_touch < first_message
              OR coalesce(last_touch > first_end, false)))
), flight AS (
  -- an answer is for a message in flight when what came before it of its id is a
  -- delivery, or a TOUCH of one
  SELECT u.conn_id, u.name, lag(u.name) OVER (PARTITION BY u.conn_id, u.id
                                              ORDER BY u.seq) AS before
  FROM units AS u JOIN unsure AS s ON s.conn_id = u.conn_id AND s.id = u.id
  WHERE u.name IN ({MESSAGE}, {_ANSWERS})
), passed AS (
  -- a RDY's place among the connection's RDYs and messages
  SELECT conn_id, seq, name, coalesce(count, 0) AS n,
         row_number() OVER (PARTITION BY conn_id ORDER BY seq) AS k
  FROM units WHERE name IN ({MESSAGE}, {RDY})
), resent AS (
  -- the messages passed on since the RDY before
  SELECT conn_id, n, lag(n) OVER w AS last_n, k - lag(k) OVER w - 1 AS between_
  FROM passed WHERE name = {RDY}
  WINDOW w AS (PARTITION BY conn_id ORDER BY seq)
), whole AS (
  -- where a rule that reads every message can fail: the checks read all the rows
  SELECT conn_id FROM flight
  WHERE name IN ({_ANSWERS}) AND (before IS NULL OR before IN ({FIN}, {REQ}))
  UNION SELECT p.conn_id FROM {ANSWER_PAIRS} AS p
  JOIN units AS c ON c.conn_id = p.conn_id AND c.seq = p.command_seq
  WHERE p.name = {ERROR} AND c.name IN ({_ANSWERS})
  UNION SELECT conn_id FROM resent WHERE n > 0 AND n = last_n AND 4 * between_ <= 3 * n
  UNION SELECT conn_id FROM {FRAMES} WHERE name = {_RESPONSE} AND data = {_HEARTBEAT}
), ends AS (
  SELECT conn_id, min(seq) AS first_seq, max(seq) AS last_seq FROM units GROUP BY conn_id
), kept AS (
  SELECT f.*, w.conn_id IS NOT NULL AS whole
  FROM {FRAMES} AS f
  LEFT JOIN whole AS w ON w.conn_id = f.conn_id
  LEFT JOIN ends AS x ON x.conn_id = f.conn_id
  WHERE w.conn_id IS NOT NULL
     OR NOT (f.name = {MESSAGE}
             OR (f.name IN ({_ANSWERS}) AND f.violation IS NULL AND f.reason IS NULL))
     OR f.seq = x.first_seq OR f.seq = x.last_seq
)""" + _rows(", f.whole").format(rows="kept") + f"""
WHERE {_JUDGED}
ORDER BY f.conn_id, f.seq
"""
"""The ``guide_failures`` view's rows (see the module doc), each connection's in order,
with ``whole``: its rows are all there (:func:`nsqviz.conformance.frames.failures`)."""
