"""An in-memory wire between a ClientConnection and a ServerConnection (no sockets).

Each hop hands the bytes one side's ``send`` produced to the other side's ``receive``
and records them, so a test can replay the same bytes with other chunkings.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from nsqviz.nsq import events as ev
from nsqviz.nsq.client_connection import ClientConnection
from nsqviz.nsq.server_connection import ServerConfig, ServerConnection


@dataclass
class Wire:
    client: ClientConnection = field(default_factory=ClientConnection)
    server: ServerConnection = field(default_factory=ServerConnection)
    # ("c2s" | "s2c", bytes) in the order they were sent
    log: list[tuple[str, bytes]] = field(default_factory=list)

    @classmethod
    def with_config(cls, **config) -> Wire:
        return cls(server=ServerConnection(ServerConfig(**config)))

    def c2s(self, cmd, **kw) -> list:
        data = self.client.send(cmd, **kw)
        self.log.append(("c2s", data))
        return self.server.receive(data)

    def s2c(self, *frames) -> list:
        data = b"".join(self.server.send(f) for f in frames)
        self.log.append(("s2c", data))
        return self.client.receive(data)

    def raw_c2s(self, data: bytes) -> list:
        self.log.append(("c2s", data))
        return self.server.receive(data)

    def raw_s2c(self, data: bytes) -> list:
        self.log.append(("s2c", data))
        return self.client.receive(data)


def features(**kw) -> ev.Response:
    """An IDENTIFY response with feature negotiation, in nsqd's key order."""
    base = {
        "max_rdy_count": 2500,
        "version": "1.3.0",
        "max_msg_timeout": 900000,
        "msg_timeout": 60000,
        "tls_v1": False,
        "deflate": False,
        "deflate_level": 0,
        "max_deflate_level": 6,
        "snappy": False,
        "sample_rate": 0,
        "auth_required": False,
        "output_buffer_size": 16384,
        "output_buffer_timeout": 250,
    }
    base.update(kw)
    return ev.Response(json.dumps(base, separators=(",", ":")).encode())


def mid(i: int) -> bytes:
    return b"%016x" % i


def message(i: int, body: bytes = b"hello", attempts: int = 1) -> ev.Message:
    return ev.Message(1_700_000_000_000_000_000 + i, attempts, mid(i), body)


def subscribed(**config) -> Wire:
    """A wire whose client sent the magic, IDENTIFY, SUB and RDY 10, all answered."""
    w = Wire.with_config(**config)
    w.c2s(ev.Magic())
    w.c2s(ev.Identify({"client_id": "t", "feature_negotiation": True}))
    w.s2c(features())
    w.c2s(ev.Sub("topic", "chan"))
    w.s2c(ev.Response(b"OK"))
    w.c2s(ev.Rdy(10))
    return w


def kinds(events: list) -> list[str]:
    return [type(e).__name__ for e in events]
