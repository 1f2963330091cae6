"""The simulator on asyncio: a Master listener and one listener per Broker, every byte
through the TubeMQ codec's server role.

The server makes no protocol decision of its own: the codec turns bytes into requests
(and violations into events); the method table names the handler and the response
message; the model (:mod:`~nsqviz.servers.tubemq.master`, :mod:`~nsqviz.servers.tubemq.broker`)
decides the answer; the codec turns it into bytes. Time is the wall clock (seconds
since the epoch, as the real servers stamp ``appendTime``), passed in.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine
from typing import Any

from nsqviz.servers.tubemq.broker import Broker
from nsqviz.servers.tubemq.cluster import SimConfig
from nsqviz.servers.tubemq.master import Master, RpcError
from nsqviz.servers.tubemq.state import Simulation
from nsqviz.tubemq.codec import ServerConnection
from nsqviz.tubemq.events import Answer, Request, Violation
from nsqviz.tubemq.messages import make_exception, make_response
from nsqviz.tubemq.protos import MESSAGES, RpcStatus
from nsqviz.tubemq.tables import BROKER_SERVICES, MASTER_SERVICES, ViolationCode

__all__ = ["SimServer", "answer", "exception_name"]

log = logging.getLogger(__name__)

EXPIRE_EVERY = 1.0  # seconds between two checks for silent clients
SERVER_VERSION = 3  # the Java server's RPC_PROTOCOL_VERSION, written in every answer
# the class-name prefix a Java server rewrites for older clients (RpcServiceInvoker)
_PREFIX = "org.apache.inlong.tubemq."
_CLIENT_PREFIX = {1: "com.tencent.tubemq.", 2: "com.apache.tubemq."}
# what the Java server answers FATAL (it cannot read the call) and ERROR (no such service)
_FATAL = frozenset({ViolationCode.NO_DECODER, ViolationCode.UNKNOWN_METHOD,
                    ViolationCode.PROTOBUF_ERROR})
_WRONG_SERVICE = frozenset({ViolationCode.UNKNOWN_SERVICE, ViolationCode.WRONG_SERVICE})


def exception_name(name: str, protocol_ver: int) -> str:
    """A Java exception class name as the server writes it for a client of
    ``protocol_ver``: ``org.apache.inlong.tubemq.`` becomes ``com.tencent.tubemq.`` (1) or
    ``com.apache.tubemq.`` (2, sic), and stays for 3 (``NettyRpcServer``)."""
    prefix = _CLIENT_PREFIX.get(protocol_ver)
    if prefix and name.startswith(_PREFIX):
        return prefix + name[len(_PREFIX):]
    return name


def answer(target: Master | Broker, request: Request, problems: list[Violation],
           now: float) -> Answer | None:
    """The answer the Java server gives ``request`` (``None``: it gives none).

    A request the envelope rules refuse gets ERROR (a service/method pair not allowed,
    or a service this server does not run) or FATAL (a method without a decoder, a
    request that does not decode); one without a timeout is never answered; otherwise
    the model's handler decides, and a handler that throws (a standby Master) gives
    ERROR with its exception.
    """
    version = request.header.protocolVer
    if not request.body.timeout:
        return None
    fatal = [v for v in problems if v.code in _FATAL]
    if fatal or request.message is None:
        text = "; ".join(v.reason for v in fatal) or "no request message"
        return make_exception(request, "java.io.IOException",
                              f"IPC server unable to read call parameters:{text}",
                              status=RpcStatus.FATAL)
    wrong = [v for v in problems if v.code in _WRONG_SERVICE]
    served = MASTER_SERVICES if isinstance(target, Master) else BROKER_SERVICES
    if wrong or request.header.serviceType not in served:
        text = wrong[0].reason if wrong else \
            f"No service {request.header.serviceType} found on the server"
        return make_exception(request, "java.lang.Exception", text, status=RpcStatus.ERROR,
                              protocol_ver=SERVER_VERSION)
    info = request.info
    # a request with a message has a method with a request (and response) message
    assert info is not None and info.response is not None
    try:
        fields = getattr(target, info.name)(request.message, now)
    except RpcError as exc:
        return make_exception(request, exception_name(exc.exception_name, version), exc.text,
                              status=RpcStatus.ERROR, protocol_ver=SERVER_VERSION)
    return make_response(request, MESSAGES[info.response](**fields),
                         protocol_ver=SERVER_VERSION)


class SimServer:
    """A simulated Master and Brokers on the running event loop."""

    def __init__(self, config: SimConfig):
        self.config = config
        self.sim: Simulation | None = None
        self._servers: list[asyncio.base_events.Server] = []
        self._writers: set[asyncio.StreamWriter] = set()
        self._expire_task: asyncio.Task[None] | None = None
        self.master_port = 0
        self.broker_ports: list[int] = []

    @property
    def master_address(self) -> str:
        return f"{self.config.host}:{self.master_port}"

    @property
    def broker_addresses(self) -> list[str]:
        return [f"{self.config.host}:{p}" for p in self.broker_ports]

    async def start(self) -> None:
        self.sim = Simulation(self.config)
        host = self.config.host
        brokers = []
        for broker, port in zip(self.sim.brokers, self.config.broker_ports, strict=True):
            server = await asyncio.start_server(self._handler(broker), host, port,
                                                reuse_address=True)
            brokers.append(server)
            self.broker_ports.append(server.sockets[0].getsockname()[1])
        self.sim.set_broker_ports(tuple(self.broker_ports))
        master = await asyncio.start_server(self._handler(self.sim.master), host,
                                            self.config.master_port, reuse_address=True)
        self.master_port = master.sockets[0].getsockname()[1]
        self.config.master_port = self.master_port
        self._servers = [master, *brokers]
        self._expire_task = asyncio.get_running_loop().create_task(self._expire_loop())
        log.info("tubemq simulator: Master %s, Brokers %s", self.master_address,
                 ", ".join(self.broker_addresses))

    async def stop(self) -> None:
        """Graceful stop: stop listening, drop the clients, write the state out."""
        for server in self._servers:
            server.close()
        if self._expire_task is not None:
            self._expire_task.cancel()
        for writer in list(self._writers):
            writer.close()
        await asyncio.sleep(0)
        if self.sim is not None:
            self.sim.save()

    async def _expire_loop(self) -> None:
        while True:
            await asyncio.sleep(EXPIRE_EVERY)
            if self.sim is not None:
                self.sim.expire(time.time())

    def _handler(self, target: Master | Broker) -> Callable[
            [asyncio.StreamReader, asyncio.StreamWriter], Coroutine[Any, Any, None]]:
        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            self._writers.add(writer)
            codec = ServerConnection()
            try:
                while data := await reader.read(65536):
                    now = time.time()
                    out, close = [], False
                    events = codec.receive(data, now=now)
                    for i, event in enumerate(events):
                        if isinstance(event, Request):
                            problems = [v for v in events[i + 1:] if isinstance(v, Violation)
                                        and v.event is event]
                            reply = answer(target, event, problems, now)
                            if reply is not None:
                                out.append(codec.send(reply, now=now))
                        elif isinstance(event, Violation) and event.event is None and event.fatal:
                            close = True  # the Java decoder closes on a bad frame
                            log.info("closing %s: %s", writer.get_extra_info("peername"),
                                     event.reason)
                    if out:
                        writer.write(b"".join(out))
                    if close:
                        break
                    await writer.drain()
            except (ConnectionError, asyncio.CancelledError):
                pass
            except Exception:  # a bug of ours: say so, drop only this connection
                log.exception("tubemq simulator: connection %s failed",
                              writer.get_extra_info("peername"))
            finally:
                self._writers.discard(writer)
                writer.close()
        return serve
