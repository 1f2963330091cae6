"""A record's display-filter values, and records grouped into the packets tshark filters.

Wireshark filters **packets**: a unit that spans several segments belongs to the packet
that completed it, and every unit completed in one packet adds its fields to that
packet's tree -- so ``nsq.command == "PUB" and nsq.topic == "t"`` holds for a packet with
a PUB to ``u`` and a SUB to ``t``, as it does in tshark. :func:`packets` groups a stream
of records that way (the capture decoder gives a packet's units together, when it reads
the packet); :func:`record_values` gives one record's values: the capture layer's fields
(:data:`nsqviz.fields.CAPTURE_FIELDS`), its protocol's
(:meth:`~nsqviz.protocols.protocol.Protocol.filter_values`) and the names of the protocols
present (``nsq``, ``tcp``, ``ip``), whose presence is a test of its own;
:func:`packet_values` joins a packet's.
"""

from __future__ import annotations

import ipaddress
import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from nsqviz import protocols
from nsqviz.records import DecodedRecord
from nsqviz.stream.direction import Direction

__all__ = ["ALL", "LAYERS", "Needs", "merge", "packet_key", "packet_values", "packets",
           "record_values"]

LAYERS = ("frame", "tcp", "ip", "ipv6")
"""The capture layers whose presence can be tested, beside the protocols' names."""

_TCP_RECORD = "tcp"  # the kind of the TCP layer's records (FIN, RST, its analysis)
_FLAGS = {"FIN": "tcp.flags.fin", "RST": "tcp.flags.reset"}
_ANALYSIS = {
    "ZeroWindow": ("tcp.analysis.zero_window",),
    "retransmission": ("tcp.analysis.retransmission",),
    "fast retransmission": ("tcp.analysis.fast_retransmission",
                            "tcp.analysis.retransmission"),
    "spurious retransmission": ("tcp.analysis.spurious_retransmission",
                                "tcp.analysis.retransmission"),
    "out-of-order": ("tcp.analysis.out_of_order",),
}
"""The ``tcp.analysis`` flags a ``tcp`` record sets, by its name or its ``kind``
(Wireshark flags a fast or spurious retransmission a retransmission too)."""


@lru_cache(maxsize=4096)
def _endpoints(flow: str) -> tuple[tuple[Any, int], tuple[Any, int]]:
    """``(client, server)`` of a ``client->server`` label as (address, port)."""
    def one(end: str) -> tuple[Any, int]:
        host, _, port = end.rpartition(":")
        return ipaddress.ip_address(host.strip("[]")), int(port)

    client, _, server = flow.partition("->")
    return one(client), one(server)


def _flow_values(out: dict[str, list[Any]], rec: DecodedRecord) -> None:
    (caddr, cport), (saddr, sport) = _endpoints(rec.flow or "")
    if rec.dir == Direction.S2C:
        (src, sp), (dst, dp) = (saddr, sport), (caddr, cport)
    else:
        (src, sp), (dst, dp) = (caddr, cport), (saddr, sport)
    ip = "ip" if src.version == 4 else "ipv6"
    out["tcp"] = [True]
    out[ip] = [True]
    out[f"{ip}.src"] = [src]
    out[f"{ip}.dst"] = [dst]
    out[f"{ip}.addr"] = [src, dst]
    out["tcp.srcport"] = [sp]
    out["tcp.dstport"] = [dp]
    out["tcp.port"] = [sp, dp]
    if rec.flow_id is not None:
        out["tcp.stream"] = [rec.flow_id]
    if rec.kind == _TCP_RECORD:
        flag = _FLAGS.get(rec.name)
        if flag is not None:
            out[flag] = [True]
        for name in _ANALYSIS.get(rec.fields.get("kind") or rec.name, ()):
            out[name] = [True]


@dataclass(frozen=True, slots=True)
class Needs:
    """Which groups of values a filter reads (the rest is not computed): the frame's,
    the connection's (TCP, IP), and those of the protocols named."""

    frame: bool = True
    flow: bool = True
    protocols: frozenset[str] | None = None  # None: every protocol's

    @classmethod
    def of(cls, names: Iterable[str]) -> Needs:
        layers = {n.partition(".")[0] for n in names}
        return cls("frame" in layers, bool(layers & {"tcp", "ip", "ipv6"}),
                   frozenset(n.partition(".")[0] for n in names if "." in n) - set(LAYERS))


ALL = Needs()


def record_values(rec: DecodedRecord, first_ts: float | None,
                  needs: Needs = ALL) -> dict[str, list[Any]]:
    """The field values of one record (``first_ts``: the capture's first packet time,
    for ``frame.time_relative``); only the groups ``needs`` names."""
    out: dict[str, list[Any]] = {}
    if rec.packets and needs.frame:
        out["frame"] = [True]
        out["frame.number"] = [rec.packets[-1]]
        if first_ts is not None and not math.isnan(rec.ts):
            out["frame.time_relative"] = [rec.ts - first_ts]
    if rec.flow is not None and needs.flow:
        _flow_values(out, rec)
    proto = rec.protocol
    if proto:
        out[proto] = [True]
        if needs.protocols is None or proto in needs.protocols:
            out.update(protocols.by_name(proto).filter_values(rec))
    return out


def merge(values: Sequence[dict[str, list[Any]]]) -> dict[str, list[Any]]:
    """The values of several records as one packet's (lists joined, in order)."""
    if len(values) == 1:
        return values[0]
    out: dict[str, list[Any]] = {}
    for v in values:
        for name, items in v.items():
            seen = out.get(name)
            if seen is None:
                out[name] = list(items)
            else:
                seen.extend(items)
    return out


def packet_values(group: Sequence[DecodedRecord], first_ts: float | None,
                  needs: Needs = ALL) -> dict[str, list[Any]]:
    """One packet's values: its records' joined, and the TCP flags no record set (a
    FIN or RST is a record of its own, kind ``tcp``) as clear -- every TCP packet has
    them, as in Wireshark."""
    values = merge([record_values(r, first_ts, needs) for r in group])
    if needs.flow and "tcp" in values:
        for name in _FLAGS.values():
            values.setdefault(name, [False])
    return values


def packet_key(rec: DecodedRecord) -> tuple[int, int] | None:
    """The packet a record is shown in (its file's index, its number): where its last
    bytes arrived; ``None`` for a record of no packet."""
    if not rec.packets:
        return None
    return (rec.files[-1] if rec.files else 0, rec.packets[-1])


def packets(records: Iterable[DecodedRecord]) -> Iterator[list[DecodedRecord]]:
    """Consecutive records of one packet, as lists (a record of no packet alone)."""
    group: list[DecodedRecord] = []
    key: tuple[int, int] | None = None
    for rec in records:
        k = packet_key(rec)
        if group and (k is None or k != key):
            yield group
            group = []
        group.append(rec)
        key = k
    if group:
        yield group
