"""The lookup protocol's doctor rules: declarative definitions over its rows of the
frames table (:mod:`nsqviz.lookupd.analyses`), kept with the protocol and run by the same
engines as its analyses (:attr:`nsqviz.protocols.Protocol.rules`; :mod:`nsqviz.doctor`
says how a rule is written).

``lookupd.registration`` -- what keeps an nsqd's topics and channels out of nsqlookupd:

* a command nsqlookupd refused (REGISTER or UNREGISTER of a bad name, without a topic,
  before IDENTIFY; an IDENTIFY it cannot read): every error of the protocol is fatal, so
  nsqlookupd closed the connection and the registration did not happen;
* a PING nsqlookupd did not answer before the nsqd gave up and closed the connection
  (nsqd's lookup peer waits one read timeout for the answer): until it reconnects and
  registers everything again, consumers asking that nsqlookupd do not find its topics.

A topic an nsqd takes publishes for and never registers (an nsqd started without
``--lookupd-tcp-address``) is not found yet: it needs the nsqd's own connections and
nsqlookupd's HTTP answers, which the frames table does not carry.

The verbs, record names and error codes come from the protocol's tables
(:mod:`nsqviz.lookupd.events`, :class:`~nsqviz.lookupd.grammar.Refusal`).
"""

from __future__ import annotations

from nsqviz.doctor.rule import Rule, Severity, evidence, figures
from nsqviz.lookupd.events import COMMAND_EVENTS, ERROR, RESPONSE, Ping
from nsqviz.lookupd.grammar import Refusal
from nsqviz.sql import C2S, CLOSED, FLOW_END, S2C, frames_of

__all__ = ["RULES"]

FRAMES = frames_of("lookupd")
_PING = next(f"'{verb}'" for verb, kind in COMMAND_EVENTS.items() if kind is Ping)
_CODES = sorted({r.code.value for r in Refusal})
_WHY = "CASE code " + " ".join(
    "WHEN '{}' THEN '{}'".format(code, "; or ".join(
        r.why.replace("'", "''") for r in Refusal if r.code.value == code))
    for code in _CODES) + " ELSE 'a command nsqlookupd does not accept' END"
"""SQL: why nsqlookupd sends error ``code`` (every :class:`Refusal` with that code)."""


def _server(conn_id: str) -> str:
    return f"split_part(split_part({conn_id}, '->', 2), '@', 1)"


_REGISTRATION = f"""
WITH refused AS (
  -- an error answer, and the client's unit it refuses: the last one before it that the
  -- protocol's rules fault (a command with a violation, or bytes no command could be)
  SELECT e.conn_id, e.seq, e.ts, e.packets, split_part(e.data, ' ', 1) AS code, e.data AS text,
         max(c.seq) AS unit_seq
  FROM {FRAMES} AS e
  LEFT JOIN {FRAMES} AS c ON c.conn_id = e.conn_id AND c.dir = '{C2S}' AND c.seq < e.seq
   AND (c.violation IS NOT NULL OR c.kind = 'error')
  WHERE e.dir = '{S2C}' AND e.name = '{ERROR}'
  GROUP BY e.conn_id, e.seq, e.ts, e.packets, e.data
), closes AS (
  SELECT conn_id, min_by(ts, seq) AS ts, min_by(element_at(packets, 1), seq) AS packet,
         min_by(dir, seq) AS side, min_by(reason, seq) AS how
  FROM {FRAMES} WHERE {FLOW_END} AND {CLOSED} GROUP BY conn_id
), refusals AS (
  SELECT r.conn_id, r.ts, r.packets, r.code, r.text,
         CASE WHEN u.kind = 'command' THEN u.name ELSE 'the client''s command' END AS command,
         u.ts AS unit_ts, element_at(u.packets, 1) AS unit_packet,
         s.ts AS close_ts, s.packet AS close_packet, s.how AS close_how, s.side AS close_side
  FROM refused AS r
  LEFT JOIN {FRAMES} AS u ON u.conn_id = r.conn_id AND u.seq = r.unit_seq
  LEFT JOIN closes AS s ON s.conn_id = r.conn_id AND s.ts >= r.ts
), pings AS (
  -- a PING with no answer before the connection closed
  SELECT p.conn_id, p.ts, element_at(p.packets, 1) AS packet, s.ts AS close_ts,
         s.packet AS close_packet, s.how AS close_how, s.side AS close_side
  FROM {FRAMES} AS p JOIN closes AS s ON s.conn_id = p.conn_id AND s.ts >= p.ts
  LEFT JOIN {FRAMES} AS a ON a.conn_id = p.conn_id AND a.dir = '{S2C}'
   AND a.name IN ('{RESPONSE}', '{ERROR}') AND a.seq > p.seq AND a.ts <= s.ts
  WHERE p.name = {_PING} AND p.dir = '{C2S}'
  GROUP BY p.conn_id, p.seq, p.ts, p.packets, s.ts, s.packet, s.how, s.side
  HAVING count(a.seq) = 0
), late AS (
  -- what nsqlookupd sent after the nsqd had closed: the answer, too late
  SELECT p.conn_id, min(a.ts) AS ts, min_by(element_at(a.packets, 1), a.ts) AS packet
  FROM pings AS p JOIN {FRAMES} AS a ON a.conn_id = p.conn_id AND a.dir = '{S2C}'
   AND a.ts > p.close_ts AND a.name IN ('{RESPONSE}', '{ERROR}')
  GROUP BY p.conn_id
), found AS (
  SELECT conn_id, ts, code, text, command, close_ts IS NOT NULL AS closed,
         close_side = '{S2C}' AS closed_by_lookupd,
         CAST(NULL AS DOUBLE) AS waited_s, CAST(NULL AS BIGINT) AS late_packet
  FROM refusals
  UNION ALL
  SELECT p.conn_id, p.ts, 'PING', 'no answer', 'PING', true, false,
         round(p.close_ts - p.ts, 3), l.packet
  FROM pings AS p LEFT JOIN late AS l ON l.conn_id = p.conn_id
), ev_rows AS (
  SELECT conn_id AS k, ts, explode(packets) AS packet, conn_id, CAST(NULL AS STRING) AS msg_id,
         text AS what FROM refusals
  UNION ALL
  SELECT conn_id, unit_ts, unit_packet, conn_id, NULL, command || ': refused'
  FROM refusals WHERE unit_ts IS NOT NULL
  UNION ALL
  SELECT conn_id, close_ts, close_packet, conn_id, NULL,
         CASE WHEN close_side = '{S2C}' THEN 'nsqlookupd closed the connection ('
              ELSE 'the client closed the connection (' END || upper(close_how) || ')'
  FROM refusals WHERE close_ts IS NOT NULL
  UNION ALL
  SELECT conn_id, ts, packet, conn_id, NULL, 'PING: no answer' FROM pings
  UNION ALL
  SELECT conn_id, close_ts, close_packet, conn_id, NULL,
         'the nsqd gave up on the PING and closed (' || upper(close_how) || ')' FROM pings
  UNION ALL
  SELECT conn_id, ts, packet, conn_id, NULL, 'nsqlookupd''s answer, after the close'
  FROM late
), evd AS ({evidence("ev_rows", ("k",))}
)
SELECT {_server("f.conn_id")} AS server, f.conn_id, e.first_ts AS ts, e.evidence,
       {figures("code", "text", "command", "closed", "closed_by_lookupd", "waited_s",
                "late_packet", "ping", "why")} AS figures, f.ping
FROM (SELECT *, code = 'PING' AS ping,
             CASE WHEN code <> 'PING' THEN {_WHY} END AS why FROM found) AS f
JOIN evd AS e ON e.k = f.conn_id
"""

REGISTRATION = Rule(
    "lookupd.registration", "an nsqd's registration with nsqlookupd refused or cut off",
    Severity.ERROR, _REGISTRATION,
    summary="{?ping}PING unanswered: the nsqd closed its connection to nsqlookupd "
            "{waited_s:.3f} s later{/}{?late_packet}; nsqlookupd's answer came after the "
            "close (packet {late_packet}){/}{?why}nsqlookupd refused {command}: {text}{/}"
            "{?closed_by_lookupd}; nsqlookupd closed the connection{/}",
    explanation="{?ping}nsqd PINGs each nsqlookupd every 15 s and waits one read timeout "
                "for OK; without it, it closes the connection and reconnects on its next "
                "lookup event, registering its topics and channels again. Meanwhile that "
                "nsqlookupd drops the nsqd's registrations once it stops hearing from it "
                "(its --inactive-producer-timeout), and consumers asking it do not find "
                "the nsqd's topics.{/}"
                "{?why}{code} means {why}. Every nsqlookupd error is fatal: it closes the "
                "connection after the answer, so nothing of this registration was "
                "recorded, and the producer it was for cannot be found through this "
                "nsqlookupd.{/}",
    change="{?ping}Find why nsqlookupd did not answer within the read timeout (a stalled or "
           "overloaded nsqlookupd, a slow network): a lookupd that hangs loses every "
           "nsqd's registrations.{/}"
           "{?why}Send only what nsqlookupd accepts: IDENTIFY first with broadcast_address, "
           "tcp_port, http_port and version; REGISTER and UNREGISTER with a topic (and "
           "channel) of [.a-zA-Z0-9_-], 1 to 64 characters (an #ephemeral suffix "
           "allowed).{/}",
    severity_sql=f"CASE WHEN ping THEN '{Severity.WARNING.value}' "
                 f"ELSE '{Severity.ERROR.value}' END",
)

RULES: tuple[Rule, ...] = (REGISTRATION,)
"""Every rule of the protocol, in the order its findings are listed."""
