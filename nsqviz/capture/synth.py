"""Synthetic NSQ conversations written as captures, with known ground truth.

Both ends are the project's own codec (a :class:`~nsqviz.nsq.client_connection.ClientConnection`
and a :class:`~nsqviz.nsq.server_connection.ServerConnection` talking to each other), so the bytes
are exactly what the grammar builds -- compression included -- and a
:class:`~nsqviz.capture.writer.TcpConversation` turns each side's writes into TCP
segments. Tests use this to know what a decoder must find; the benchmark uses it to
write a large capture quickly.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from nsqviz import compactjson, tubemq
from nsqviz.capture.writer import TcpConversation
from nsqviz.nsq import events as ev
from nsqviz.nsq.client_connection import ClientConnection
from nsqviz.nsq.server_connection import ServerConnection
from nsqviz.stream.direction import Direction
from nsqviz.tubemq.tables import ErrorCode

__all__ = ["NsqTalk", "Written", "pubsub_session", "tubemq_producer"]


@dataclass
class Written:
    """What a script wrote: the wire bytes per direction and the events, in order.

    ``writes`` lists each write as ``(direction, stream offset, bytes)`` in the order the
    peers made them, which is the causal order a capture must keep between directions.
    """

    c2s: bytearray = field(default_factory=bytearray)
    s2c: bytearray = field(default_factory=bytearray)
    writes: list[tuple[str, int, bytes]] = field(default_factory=list)
    commands: list[ev.Command] = field(default_factory=list)
    frames: list[ev.ServerFrame] = field(default_factory=list)


class NsqTalk:
    """Drives a client and a server codec against each other and records the wire.

    ``say(cmd)`` has the client send a command; ``answer(frame)`` has the server send a
    frame; each side receives what the other sent, so negotiated compression switches
    on exactly as it would between real peers. With ``conversation=None`` nothing is
    written, only :attr:`written` is kept (for tests that cut the stream themselves).
    """

    def __init__(self, conversation: TcpConversation | None, *, ts: float = 1_700_000_000.0,
                 step: float = 0.001):
        self.conv = conversation
        self.client = ClientConnection()
        self.server = ServerConnection()
        self.ts = ts
        self.step = step
        self.written = Written()

    def _emit(self, direction: Direction, data: bytes) -> None:
        self.ts += self.step
        stream = getattr(self.written, direction)
        self.written.writes.append((direction, len(stream), data))
        stream.extend(data)
        if self.conv is not None and data:
            self.conv.send(direction, data, self.ts)

    def say(self, *commands: ev.Command) -> None:
        """The client sends these commands in one write (one or more segments)."""
        data = b"".join(self.client.send(c, check=False) for c in commands)
        self.written.commands.extend(commands)
        self.server.receive(data)
        self._emit(Direction.C2S, data)

    def answer(self, *frames: ev.ServerFrame, compress_after: tuple[str, int | None] | None = None
               ) -> None:
        """The server sends these frames in one write; ``compress_after`` switches the
        server to that compression after them (nsqd does so after the IDENTIFY response)."""
        data = b"".join(self.server.send(f, check=False) for f in frames)
        self.written.frames.extend(frames)
        self.client.receive(data)
        self._emit(Direction.S2C, data)
        if compress_after is not None:
            self.server.start_compression(*compress_after)


def pubsub_session(
    talk: NsqTalk,
    *,
    messages: int = 20,
    body_sizes: tuple[int, ...] = (200,),
    batch: int = 5,
    compression: str | None = None,
    seed: int = 1,
) -> None:
    """A publisher-and-consumer conversation on one connection.

    IDENTIFY (with feature negotiation, optionally snappy/deflate), PUB and MPUB, SUB,
    RDY, messages delivered ``batch`` at a time (several frames per write: sticky
    packets), FIN for most, REQ for every 7th and TOUCH then FIN for every 5th -- every common
    command and frame.
    """
    rng = random.Random(seed)
    identify = {"client_id": "synth", "hostname": "synth.local", "feature_negotiation": True,
                "user_agent": "nsqviz-synth/0.1"}
    if compression:
        identify[compression] = True
    talk.say(ev.Magic(), ev.Identify(identify))
    features = {"max_rdy_count": 2500, "version": "1.3.0", "max_msg_timeout": 900000,
                "msg_timeout": 60000, "tls_v1": False, "deflate": compression == "deflate",
                "deflate_level": 6, "max_deflate_level": 6, "snappy": compression == "snappy",
                "sample_rate": 0, "auth_required": False, "output_buffer_size": 16384,
                "output_buffer_timeout": 250}
    response = ev.Response(compactjson.encode(features))
    if compression:
        talk.answer(response, compress_after=(compression, 6 if compression == "deflate"
                                              else None))
        talk.answer(ev.Response(b"OK"))
    else:
        talk.answer(response)

    def body() -> bytes:
        size = rng.choice(body_sizes)
        return (f"msg-{rng.randrange(10**6):06d}-".encode() * (size // 11 + 1))[:size]

    talk.say(ev.Pub("events", body()))
    talk.answer(ev.Response(b"OK"))
    talk.say(ev.Mpub("events", tuple(body() for _ in range(3))))
    talk.answer(ev.Response(b"OK"))
    talk.say(ev.Sub("events", "archive"), ev.Rdy(batch))
    talk.answer(ev.Response(b"OK"))
    ts_ns = int(talk.ts * 1e9)
    sent = 0
    while sent < messages:
        n = min(batch, messages - sent)
        batch_msgs = [
            ev.Message(ts_ns + i, 1, f"{sent + i:016x}".encode(), body()) for i in range(n)
        ]
        talk.answer(*batch_msgs)
        acks: list[ev.Command] = []
        for m in batch_msgs:
            number = int(m.id, 16)
            if number % 7 == 3:
                acks.append(ev.Req(m.id, 0))
            elif number % 5 == 2:
                acks += [ev.Touch(m.id), ev.Fin(m.id)]
            else:
                acks.append(ev.Fin(m.id))
        acks.append(ev.Rdy(batch))
        talk.say(*acks)
        sent += n


def tubemq_producer(master: TcpConversation | None, broker: TcpConversation | None, *,
                    ts: float = 1_700_000_000.0, step: float = 0.001, messages: int = 5,
                    large: int = 20_000) -> list[Any]:
    """A Java-style TubeMQ producer, both ends the TubeMQ codec: register and heartbeat
    with the Master on ``master``, then ``messages`` SendMessageRequestP2B to the Broker
    on ``broker`` (the last one ``large`` bytes: a frame of several 8192-byte blocks, so
    several segments), then close with the Master. Returns the events sent, in order."""
    M = tubemq.MESSAGES
    sent: list[Any] = []
    clock = [ts]

    def call(conv: TcpConversation | None, client: Any, server: Any, method: int,
             message: Any, answer: Any) -> None:
        clock[0] += step
        req, data = client.request(method, message)
        [got] = [e for e in server.receive(data) if isinstance(e, tubemq.Request)]
        if conv is not None:
            conv.send(Direction.C2S, data, clock[0])
        clock[0] += step
        rsp, back = server.respond(got, answer)
        client.receive(back)
        if conv is not None:
            conv.send(Direction.S2C, back, clock[0])
        sent.extend([req, rsp])

    cid = "10.0.0.1-4242-1700000000000-1-nsqviz"
    ok = ErrorCode.SUCCESS
    mc, ms = tubemq.ClientConnection(), tubemq.ServerConnection()
    call(master, mc, ms, 1, M["RegisterRequestP2M"](
        clientId=cid, topicList=["demo"], brokerCheckSum=-1, hostName="10.0.0.1"),
        M["RegisterResponseM2P"](success=True, errCode=ok, errMsg="OK!", brokerCheckSum=1,
                                 brokerInfos=["1:10.0.0.2: "]))
    call(master, mc, ms, 2, M["HeartRequestP2M"](
        clientId=cid, brokerCheckSum=1, hostName="10.0.0.1", topicList=["demo"]),
        M["HeartResponseM2P"](success=True, errCode=ok, errMsg="OK!", brokerCheckSum=1,
                              topicInfos=["demo#1:2:1#1048576"]))
    bc, bs = tubemq.ClientConnection(), tubemq.ServerConnection()
    for i in range(messages):
        body = (b"tubemq-%04d-" % i) * ((large if i == messages - 1 else 64) // 12 + 1)
        body = body[: large if i == messages - 1 else 64]
        call(broker, bc, bs, 13, M["SendMessageRequestP2B"](
            clientId=cid, topicName="demo", partitionId=i % 2, data=body, flag=0,
            checkSum=-1, sentAddr=167772161),
            M["SendMessageResponseB2P"](success=True, errCode=ok, errMsg=str(i + 1),
                                        messageId=i + 1, appendTime=1_700_000_000_000,
                                        appendOffset=i * 28))
    call(master, mc, ms, 3, M["CloseRequestP2M"](clientId=cid),
         M["CloseResponseM2P"](success=True, errCode=ok, errMsg="OK!"))
    return sent
