"""The HTTP APIs' analyses: SQL over their rows of the frames table (:func:`nsqviz.sql.
frames_of`), read by both engines, and their hooks into the shared tables
(:mod:`nsqviz.sql` says how analyses are defined and collected). Paths and names come
from the API table (:mod:`nsqviz.http.api`).

* ``http_exchanges`` -- each request with its final answer: an answer is paired with
  the request the decoder paired it with (HTTP/1.1 answers in order; the frames table's
  ``http_request`` is a request's number on its connection, and an answer's the number
  of the request it answers);
* ``http_published`` -- the messages a ``POST /pub`` or ``/mpub`` carried into nsqd, for
  the shared ``published`` table (:class:`nsqviz.sql.Publishes`) NSQ's ``messages``
  links its deliveries to. nsqd takes them on its HTTP port and delivers them on its
  TCP port, and nothing in a publish names that port: the publish names the broker's
  host only (``broker`` null: a message of any nsqd on that host, of the same topic and
  body, first delivered after the publish, links to it) -- unless the capture holds
  that HTTP server's ``/info`` answer, whose ``tcp_port`` names the broker exactly. Two
  nsqd on one host taking the same body for the same topic over HTTP, with no ``/info``
  in the capture, cannot be told apart. A publish nsqd refused (an answer other than
  200) published nothing; one whose answer was not captured is counted;
* ``http_connections`` -- their columns of ``connections``: requests, messages
  published, lookups, and a role (``producer``: it published; ``lookup``: it asked
  nsqlookupd where a topic is; else ``http``).

nsqd's and nsqlookupd's error answers (a status of 400 or more, ``{"message": "CODE"}``)
are in the shared ``errors`` table, each with its code.
"""

from __future__ import annotations

from nsqviz.http.api import BY_ROUTE, ENDPOINTS, BodyKind
from nsqviz.sql import (
    COMMAND,
    FIRST_PACKET,
    Analyses,
    ConnectionColumns,
    ErrorAnswers,
    Publishes,
    View,
    frames_of,
    host,
    quoted,
    server,
)

__all__ = ["ANALYSES"]

FRAMES = frames_of("http")
"""The HTTP APIs' rows of the frames table: the only rows their views read."""

_INFO = f"'{BY_ROUTE[('GET', '/info')].path}'"  # its answer: nsqd's tcp_port (typed)
_LOOKUP = f"'{BY_ROUTE[('GET', '/lookup')].path}'"
_PUBLISHES = quoted(e.name for e in ENDPOINTS if e.body is not BodyKind.NONE)
_FINAL = "kind = 'frame' AND http_status >= 200"
_PUBLISHED = "coalesce(status, 200) = 200"
_MESSAGES = "CASE WHEN bodies IS NOT NULL THEN size(bodies) ELSE 0 END"

_EXCHANGES = f"""
WITH answers AS (
  SELECT conn_id, http_request, http_status, http_error, data, producers, ts, seq,
         {FIRST_PACKET} AS packet
  FROM {FRAMES} WHERE {_FINAL} AND http_request IS NOT NULL
)
SELECT q.conn_id, {server('q.')} AS server, q.seq, q.ts, element_at(q.packets, 1) AS packet,
       q.name AS request, q.http_method AS method, q.http_path AS path, q.topic, q.channel,
       q.bodies, q.delay_ms, q.violation,
       a.http_status AS status, a.http_error AS error,
       a.data AS answer, a.producers, a.packet AS answer_packet, a.ts - q.ts AS latency_s
FROM {FRAMES} AS q
LEFT JOIN answers AS a ON a.conn_id = q.conn_id AND a.http_request = q.http_request
WHERE q.{COMMAND}
"""

_HTTP_PUBLISHED = f"""
WITH info AS (
  SELECT {server()} AS server, max(http_tcp_port) AS tcp_port
  FROM {FRAMES} WHERE {_FINAL} AND http_path = {_INFO} AND http_tcp_port IS NOT NULL
  GROUP BY {server()}
)
SELECT {host('e.server')} AS host,
       CASE WHEN i.tcp_port IS NOT NULL
            THEN concat({host('e.server')}, ':', CAST(i.tcp_port AS STRING)) END AS broker,
       e.topic, e.ts,
       CASE WHEN e.delay_ms IS NOT NULL
            THEN concat(e.request, ' (defer ', CAST(e.delay_ms AS STRING), ' ms)')
            ELSE e.request END AS command,
       e.conn_id, e.packet, e.seq,
       explode(e.bodies) AS body_sha1
FROM http_exchanges AS e LEFT JOIN info AS i ON i.server = e.server
WHERE e.request IN ({_PUBLISHES}) AND e.bodies IS NOT NULL AND {_PUBLISHED}
"""

_CONNECTIONS = f"""
SELECT conn_id, CAST(count(*) AS BIGINT) AS http_requests,
       CAST(sum(CASE WHEN request IN ({_PUBLISHES}) AND {_PUBLISHED} THEN {_MESSAGES}
                ELSE 0 END) AS BIGINT) AS messages_published,
       CAST(sum(CASE WHEN path = {_LOOKUP} THEN 1 ELSE 0 END) AS BIGINT) AS http_lookups,
       CASE WHEN sum(CASE WHEN request IN ({_PUBLISHES}) THEN 1 ELSE 0 END) > 0
            THEN 'producer'
            WHEN sum(CASE WHEN path = {_LOOKUP} THEN 1 ELSE 0 END) > 0 THEN 'lookup'
            ELSE 'http' END AS role
FROM http_exchanges GROUP BY conn_id
"""

ANALYSES = Analyses(
    views=(
        View("http_exchanges", _EXCHANGES, """One row per request: its endpoint (the
record's name), method, path, topic and channel, the messages a publish carried (sha1),
and its final answer -- status, nsqd's error code, the body (nsqd's and nsqlookupd's
JSON), the nsqd a ``/lookup`` named, its packet -- and the latency."""),
        View("http_published", _HTTP_PUBLISHED, """The HTTP APIs' part of the shared
``published`` table: one row per message a ``POST /pub`` or ``/mpub`` carried into nsqd
(not refused), with the broker's host, and its address where the capture holds that
server's ``/info`` answer.""", step=True),
        View("http_connections", _CONNECTIONS, """The HTTP APIs' columns of the
``connections`` table, one row per HTTP connection: its requests, the messages it
published, its lookups, its role.""", step=True),
    ),
    connections=ConnectionColumns("http_connections", (
        ("http_requests", "0"), ("messages_published", "0"), ("http_lookups", "0"),
        ("role", "'other'"),
    )),
    errors=ErrorAnswers(
        answer="kind = 'frame' AND http_status >= 400",
        code="coalesce(http_error, CAST(http_status AS STRING))",
        names="concat(http_method, ' ', http_path)"),
    publishes=Publishes("http_published"),
)
"""The HTTP APIs' analyses, read through :attr:`nsqviz.http.protocol.HttpProtocol.
analyses`."""
