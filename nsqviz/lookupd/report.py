"""The lookup protocol's part of ``nsqviz connections`` (:mod:`nsqviz.report` says how the
commands ask for it): an nsqd registering with nsqlookupd, named by its IDENTIFY (what
it announces -- addresses, ports, version -- and its packet, the hostname), from the
``connections`` table's lookup columns (:mod:`nsqviz.lookupd.analyses`). It has no
messages and no statistics of its own.
"""

from __future__ import annotations

import json

from nsqviz.report import ConnectionPart, Report, Tables, cell, packet

__all__ = ["REPORT", "LookupdReport"]

ROLE = "nsqd"
"""Who the client of the lookup protocol is: an nsqd, registering its topics."""


class LookupdReport(Report):
    """The lookup protocol's :class:`~nsqviz.report.Report`."""

    def connections(self, cap: Tables) -> dict[str, ConnectionPart]:
        conns = cap.table("connections")
        out = {}
        for c in conns[conns.protocol == "lookupd"].to_dict("records"):
            c = {k: cell(v) for k, v in c.items()}
            identify = json.loads(c["identify"]) if c["identify"] else None
            lines = [] if identify is None else [
                "  IDENTIFY   " + "  ".join(f"{key} {json.dumps(value)}"
                                            for key, value in sorted(identify.items()))
                + f"  (packet {packet(c['identify_packet'])})\n"]
            out[c["conn_id"]] = ConnectionPart(ROLE, {
                "hostname": c["hostname"], "identify": identify,
                "identify_packet": c["identify_packet"]}, lines, server="nsqlookupd")
        return out


REPORT = LookupdReport()
"""The lookup protocol's report, read through
:attr:`nsqviz.lookupd.protocol.LookupdProtocol.report`."""
