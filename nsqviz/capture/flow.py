"""One TCP connection as the flow tracker knows it (:class:`Flow`): its endpoints, which
side is the client, whether its handshake was captured, its round-trip time. Every event
of the tracker (:mod:`nsqviz.capture.tcp`, :mod:`nsqviz.capture.tcp_analysis`) names its
flow."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["Endpoint", "Flow", "endpoint"]


Endpoint = tuple[str, int]


def endpoint(ip: str, port: int) -> str:
    """``ip:port``, with IPv6 addresses in brackets as in URLs."""
    return f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"


@dataclass(slots=True, eq=False)
class Flow:
    """One TCP connection. ``label`` is ``client->server`` (the c2s direction)."""

    id: int
    client: tuple[str, int]
    server: tuple[str, int]
    syn_seen: bool
    first_packet: int
    label: str = field(init=False)
    last_packet: int = field(init=False, default=0)
    """The latest packet of the flow (either direction, payload or not)."""
    syn_ts: float | None = field(init=False, default=None)
    """When the client's latest SYN came."""
    first_rtt: float = field(init=False, default=0.0)
    """The handshake's round-trip time: from the SYN to the first ACK that is no SYN
    (0: not known), as Wireshark measures it to tell out-of-order from retransmitted."""

    def __post_init__(self) -> None:
        self.label = f"{endpoint(*self.client)}->{endpoint(*self.server)}"

    @property
    def midstream(self) -> bool:
        """The capture started after the handshake: the first bytes may be mid-frame."""
        return not self.syn_seen
