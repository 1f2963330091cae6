"""The lookup protocol's doctor rules: declarative definitions over its rows of the
frames table (:mod:`nsqviz.lookupd.analyses`), kept with the protocol and run by the same
engines as its analyses (:attr:`nsqviz.protocols.protocol.Protocol.rules`; :mod:`nsqviz.doctor`
says how a rule is written).

``lookupd.registration`` -- what keeps an nsqd's topics and channels out of nsqlookupd:

* a command nsqlookupd refused (REGISTER or UNREGISTER of a bad name, without a topic,
  before IDENTIFY; an IDENTIFY it cannot read): every error of the protocol is fatal, so
  nsqlookupd closed the connection and the registration did not happen;
* a PING nsqlookupd did not answer before the nsqd gave up and closed the connection
  (nsqd's lookup peer waits one read timeout for the answer): until it reconnects and
  registers everything again, consumers asking that nsqlookupd do not find its topics;
* a topic an nsqd took publishes for and never registered (an nsqd started without
  ``--lookupd-tcp-address``): nsqlookupd answered a ``GET /lookup`` of the topic 404
  TOPIC_NOT_FOUND after the nsqd accepted a publish to it -- at least :data:`REGISTER_S`
  after, or at any time when the capture holds nsqds' registration connections to
  nsqlookupd and none ever REGISTERs the topic. That reads what the nsqd accepted (the
  shared ``published`` and ``errors`` tables) and nsqlookupd's HTTP answers (the HTTP
  protocol's ``http_exchanges``): nsqd and nsqlookupd are different hosts, so each
  host's part is built with its evidence where its frames are, and the rule joins them
  by topic (``across_servers``). A ``/lookup`` answered 200 whose producers leave the
  nsqd out is not judged: a producer is named by its broadcast address, which need not
  be the address the publisher connected to.

The verbs, record names and error codes come from the protocol's tables
(:mod:`nsqviz.lookupd.events`, :class:`~nsqviz.lookupd.grammar.Refusal`).
"""

from __future__ import annotations

from nsqviz.doctor.rule import EVIDENCE_LIMIT, Rule, Severity, Threshold, evidence, figures
from nsqviz.lookupd.events import COMMAND_EVENTS, ERROR, RESPONSE, Identify, Ping, Register
from nsqviz.lookupd.grammar import Refusal
from nsqviz.sql import C2S, CLOSED, FLOW_END, PUBLISHED, S2C, View, frames_of

__all__ = ["REGISTER_S", "RULES"]

REGISTER_S = Threshold(
    "REGISTER_S", 1.0, "s",
    "nsqd registers a topic with every nsqlookupd it is given the moment it creates the "
    "topic (its lookup loop sends REGISTER at once: a round trip); a lookup a second after "
    "a publish the nsqd accepted that still finds no producer is no race with that")

FRAMES = frames_of("lookupd")
_HTTP_FRAMES = frames_of("http")  # nsqlookupd's HTTP API: its /lookup answers
_PING, _IDENTIFY, _REGISTER = (next(f"'{verb}'" for verb, kind in COMMAND_EVENTS.items()
                                     if kind is event) for event in (Ping, Identify, Register))
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

_NOT_FOUND = f"""
WITH lookups AS (
  SELECT conn_id, server, seq, ts, packet, answer_packet, topic
  FROM http_exchanges
  WHERE method = 'GET' AND path = '/lookup' AND status = 404 AND topic IS NOT NULL
), ev_rows AS (
  SELECT conn_id AS k, seq, ts, packet, conn_id, CAST(NULL AS STRING) AS msg_id,
         'GET /lookup?topic=' || topic AS what
  FROM lookups
  UNION ALL
  SELECT l.conn_id, l.seq, a.ts, l.answer_packet, l.conn_id, NULL,
         '404 TOPIC_NOT_FOUND: no nsqd registered ' || l.topic
  FROM lookups AS l JOIN {_HTTP_FRAMES} AS a ON a.conn_id = l.conn_id
   AND element_at(a.packets, 1) = l.answer_packet AND a.dir = '{S2C}' AND a.kind = 'frame'
), evd AS ({evidence("ev_rows", ("k", "seq"))}
)
SELECT l.server, l.conn_id, l.ts, l.topic, e.evidence
FROM lookups AS l JOIN evd AS e ON e.k = l.conn_id AND e.seq = l.seq
"""

_TAKEN = f"""
WITH taken AS (
  -- publishes the nsqd accepted (no error answers them), numbered per broker and topic
  SELECT p.broker, p.topic, p.conn_id, p.ts, p.packet, p.command,
         row_number() OVER (PARTITION BY p.broker, p.topic
                            ORDER BY p.ts, p.conn_id, p.seq) AS n
  FROM (SELECT DISTINCT broker, topic, conn_id, ts, packet, seq, command
        FROM {PUBLISHED} WHERE broker IS NOT NULL AND topic IS NOT NULL) AS p
  LEFT JOIN errors AS e ON e.conn_id = p.conn_id AND e.command_seq = p.seq
  WHERE e.conn_id IS NULL
), ev_rows AS (
  SELECT broker, topic, ts, packet, conn_id, CAST(NULL AS STRING) AS msg_id,
         command || ' ' || topic || ', accepted' AS what
  FROM taken WHERE n <= {EVIDENCE_LIMIT}
), evd AS ({evidence("ev_rows", ("broker", "topic"))}
)
SELECT t.broker, t.topic, min_by(t.conn_id, t.n) AS conn_id, min(t.ts) AS first_ts,
       CAST(count(*) AS BIGINT) AS publishes, min(e.evidence) AS evidence
FROM taken AS t JOIN evd AS e ON e.broker = t.broker AND e.topic = t.topic
GROUP BY t.broker, t.topic
"""

_REGISTERED = f"""
SELECT DISTINCT coalesce(topic, '') AS topic
FROM {FRAMES} WHERE dir = '{C2S}' AND name IN ({_IDENTIFY}, {_REGISTER})
"""

_REGISTRATION_ALL = f"""
WITH seen AS (
  -- an nsqd's registration connection is in the capture (its IDENTIFY: topic '')
  SELECT count(*) AS registrations FROM lookupd_registered_parts WHERE topic = ''
), unregistered AS (
  SELECT t.broker, t.topic, t.conn_id, t.first_ts, t.publishes, min(t.evidence) AS evidence,
         CAST(count(*) AS BIGINT) AS lookups, min(l.server) AS lookupd,
         flatten(collect_list(l.evidence)) AS lookup_evidence
  FROM lookupd_publishes_parts AS t JOIN lookupd_not_found_parts AS l ON l.topic = t.topic
   AND l.ts > t.first_ts
  CROSS JOIN seen AS s
  LEFT JOIN (SELECT DISTINCT topic FROM lookupd_registered_parts) AS r ON r.topic = t.topic
  WHERE l.ts >= t.first_ts + {REGISTER_S.value} OR (s.registrations > 0 AND r.topic IS NULL)
  GROUP BY t.broker, t.topic, t.conn_id, t.first_ts, t.publishes
)
SELECT server, conn_id, ts, evidence, figures, ping FROM lookupd_registration_parts
UNION ALL
SELECT broker, conn_id, first_ts,
       slice(sort_array(flatten(array(evidence, lookup_evidence))), 1, {EVIDENCE_LIMIT}),
       {figures("topic", "broker", "publishes", "unregistered", "lookups", "lookupd")},
       false
FROM (SELECT *, true AS unregistered FROM unregistered) AS u
"""

REGISTRATION = Rule(
    "lookupd.registration",
    "an nsqd's registration with nsqlookupd refused, cut off or never made",
    Severity.ERROR, _REGISTRATION_ALL,
    summary="{?ping}PING unanswered: the nsqd closed its connection to nsqlookupd "
            "{waited_s:.3f} s later{/}{?late_packet}; nsqlookupd's answer came after the "
            "close (packet {late_packet}){/}{?why}nsqlookupd refused {command}: {text}{/}"
            "{?closed_by_lookupd}; nsqlookupd closed the connection{/}"
            "{?unregistered}topic {topic} published on {broker} ({publishes:/publish/"
            "publishes} accepted), which never registered it with nsqlookupd: "
            "GET /lookup?topic={topic} answered 404 TOPIC_NOT_FOUND by {lookupd} "
            "({lookups:/time/times}){/}",
    explanation="{?ping}nsqd PINGs each nsqlookupd every 15 s and waits one read timeout "
                "for OK; without it, it closes the connection and reconnects on its next "
                "lookup event, registering its topics and channels again. Meanwhile that "
                "nsqlookupd drops the nsqd's registrations once it stops hearing from it "
                "(its --inactive-producer-timeout), and consumers asking it do not find "
                "the nsqd's topics.{/}"
                "{?why}{code} means {why}. Every nsqlookupd error is fatal: it closes the "
                "connection after the answer, so nothing of this registration was "
                "recorded, and the producer it was for cannot be found through this "
                "nsqlookupd.{/}"
                "{?unregistered}An nsqd registers each topic it creates with every "
                "nsqlookupd it is given (--lookupd-tcp-address): REGISTER over its TCP "
                "connection to nsqlookupd, at once. nsqlookupd knew no nsqd with topic "
                "{topic} when asked, so the consumers that find nsqds through it "
                "(lookupd_http_addresses) never connect to {broker}: the messages it "
                "accepted for {topic} wait there, unconsumed.{/}",
    change="{?ping}Find why nsqlookupd did not answer within the read timeout (a stalled or "
           "overloaded nsqlookupd, a slow network): a lookupd that hangs loses every "
           "nsqd's registrations.{/}"
           "{?why}Send only what nsqlookupd accepts: IDENTIFY first with broadcast_address, "
           "tcp_port, http_port and version; REGISTER and UNREGISTER with a topic (and "
           "channel) of [.a-zA-Z0-9_-], 1 to 64 characters (an #ephemeral suffix "
           "allowed).{/}"
           "{?unregistered}Start {broker}'s nsqd with --lookupd-tcp-address naming every "
           "nsqlookupd its consumers ask (or point the consumers at it directly, "
           "nsqd_tcp_addresses).{/}",
    thresholds=(REGISTER_S,),
    across_servers=True,
    steps=(
        View("lookupd_registration_parts", _REGISTRATION, """Per nsqlookupd connection:
the commands it refused and the PINGs it left unanswered, with the evidence (built where
nsqlookupd's frames are).""", step=True),
        View("lookupd_not_found_parts", _NOT_FOUND, """Per GET /lookup nsqlookupd answered
404 TOPIC_NOT_FOUND: the topic, with the evidence (built where nsqlookupd's frames
are).""", step=True),
        View("lookupd_registered_parts", _REGISTERED, """The topics nsqds registered with
nsqlookupd (and '' where an nsqd's IDENTIFY shows its registration connection captured),
per nsqlookupd host.""", step=True),
        View("lookupd_publishes_parts", _TAKEN, """Per nsqd and topic: the publishes it
accepted, with the evidence of the first (built where the nsqd's frames are).""",
             step=True),
    ),
    severity_sql=f"CASE WHEN ping THEN '{Severity.WARNING.value}' "
                 f"ELSE '{Severity.ERROR.value}' END",
)

RULES: tuple[Rule, ...] = (REGISTRATION,)
"""Every rule of the protocol, in the order its findings are listed."""
