"""Running every rule over some traffic, and the report as text or JSON."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from nsqviz.conformance.rules import (
    RULES,
    Verdict,
    check_backoff,
    check_connection,
    check_consumer,
    check_polls,
)
from nsqviz.conformance.sources import Traffic
from nsqviz.records import packet_list

__all__ = ["Report", "check"]


@dataclass
class Report:
    """Verdicts per client connection, plus the consumer-wide and discovery rules."""

    connections: dict[str, list[Verdict]] = field(default_factory=dict)
    overall: list[Verdict] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {"connections": {k: [v.as_json() for v in vs]
                                for k, vs in self.connections.items()},
                "overall": [v.as_json() for v in self.overall]}

    def summary(self) -> dict[str, str]:
        """Rule -> worst status over all connections (fail > pass > not exercised)."""
        rank = {"fail": 2, "pass": 1, "not exercised": 0}
        out: dict[str, str] = {}
        for v in [v for vs in self.connections.values() for v in vs] + self.overall:
            if rank[v.status] > rank.get(out.get(v.rule, "not exercised"), -1):
                out[v.rule] = v.status
            out.setdefault(v.rule, v.status)
        return {rule: out.get(rule, "not exercised") for rule in RULES}

    def text(self) -> str:
        lines = []
        for label, verdicts in self.connections.items():
            lines.append(f"connection {label}")
            lines += [_line(v) for v in verdicts]
        lines.append("consumer / discovery")
        lines += [_line(v) for v in self.overall]
        return "\n".join(lines)


def _line(v: Verdict) -> str:
    packets = f"  [packets {packet_list(v.packets)}]" if v.packets else ""
    return f"  {v.status:<14} {v.rule:<20} {v.detail}{packets}"


def check(traffic: Traffic, *, max_in_flight: int | None = None) -> Report:
    report = Report()
    for label, conn in traffic.connections.items():
        report.connections[label] = check_connection(conn)
    consumers = [c for c in traffic.connections.values() if c.subscribed is not None]
    report.overall = [check_consumer(consumers, max_in_flight), check_backoff(consumers),
                      check_polls(traffic.polls)]
    return report
