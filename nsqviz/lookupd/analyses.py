"""The lookup protocol's analyses: its hooks into the shared tables (:mod:`nsqviz.sql`
says how analyses are defined and collected), over its rows of the frames table only.

An nsqd's connection to nsqlookupd gives the ``connections`` table what its IDENTIFY
says (the JSON, its packet, the nsqd's hostname); nsqlookupd's error answers
(``E_CODE text``) are rows of the ``errors`` table, each with the command its observer
paired it with (the command it refuses also carries the refusal, as its ``violation``:
one of nsqviz's ``problems``).
"""

from __future__ import annotations

from nsqviz.lookupd.events import COMMAND_EVENTS, ERROR, Identify
from nsqviz.sql import FIRST_PACKET, Analyses, ConnectionColumns, ErrorAnswers, View, frames_of

__all__ = ["ANALYSES"]

FRAMES = frames_of("lookupd")
"""The lookup protocol's rows of the frames table: the only rows its views read."""

_IDENTIFY = next(f"'{verb}'" for verb, kind in COMMAND_EVENTS.items() if kind is Identify)

_CONNECTIONS = f"""
SELECT conn_id, identify, identify_packet,
       get_json_object(identify, '$.hostname') AS hostname
FROM (
  SELECT conn_id, min_by(data, seq) AS identify,
         min_by({FIRST_PACKET}, seq) AS identify_packet
  FROM {FRAMES} WHERE name = {_IDENTIFY} GROUP BY conn_id
) AS c
"""

ANALYSES = Analyses(
    views=(View("lookupd_connections", _CONNECTIONS, """The lookup protocol's columns of
the ``connections`` table, one row per connection that sent IDENTIFY: the nsqd's JSON,
its packet and hostname.""", step=True),),
    connections=ConnectionColumns("lookupd_connections", (
        ("identify", None), ("identify_packet", None), ("hostname", None))),
    errors=ErrorAnswers(answer=f"name = '{ERROR}'", code="split_part(data, ' ', 1)",
                        text="data"),
)
"""The lookup protocol's analyses, read through
:attr:`nsqviz.lookupd.protocol.LookupdProtocol.analyses`."""
