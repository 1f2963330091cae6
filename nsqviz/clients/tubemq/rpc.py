"""TubeMQ calls over a socket: one request out, its answer back, every byte kept.

A channel owns one TCP connection to a Master or a Broker and the codec's client role
(:class:`~nsqviz.tubemq.codec.ClientConnection`): the codec numbers each request
(serialNo), encodes it, refuses misuse, and pairs each answer with its request and
latency; the channel only moves bytes and keeps them in a :class:`Call`.

:class:`Channel` blocks (for notebooks, one call at a time or a batch glued into one
write); :class:`AsyncChannel` runs on asyncio and lets calls overlap, as the real clients
do on their one connection per address.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from dataclasses import dataclass, field
from typing import Any

from google.protobuf.message import Message

from nsqviz.tubemq.codec import ClientConnection
from nsqviz.tubemq.events import Answer, ExceptionResponse, Request, Response, Violation
from nsqviz.tubemq.protos import MESSAGES
from nsqviz.tubemq.tables import METHODS_BY_NAME, ErrorCode, Method

__all__ = ["AsyncChannel", "Call", "CallFailed", "Channel", "request_message"]


def request_message(method: str,
                    message: Message | dict[str, Any]) -> tuple[Method, Message | None]:
    """The method's table row and its request message (built from ``message`` when a
    dict; ``None`` for the ids that have no request message)."""
    info = METHODS_BY_NAME[method]
    if isinstance(message, dict):
        message = MESSAGES[info.request](**message) if info.request else None
    return info, message


@dataclass
class Call:
    """One request and what came back for it."""

    request: Request
    sent: bytes  # the request frame as written
    answer: Answer | None = None
    received: bytes = b""  # the answer frame's bytes
    violations: list[Violation] = field(default_factory=list)
    t: float = 0.0  # when the request was written (the channel's clock, seconds)

    @property
    def method(self) -> Method:
        info = self.request.info
        assert info is not None, "a call is made by method name"
        return info

    @property
    def latency(self) -> float | None:
        return None if self.answer is None else self.answer.latency

    @property
    def message(self) -> Message | None:
        """The inner response message (``None`` for an exception answer or none yet)."""
        return self.answer.message if isinstance(self.answer, Response) else None

    @property
    def err_code(self) -> int | None:
        msg = self.message
        return msg.errCode if msg is not None and msg.HasField("errCode") else None

    @property
    def ok(self) -> bool:
        return self.err_code == ErrorCode.SUCCESS

    def result(self) -> Message:
        """The inner response; :class:`CallFailed` for an ERROR/FATAL answer or none."""
        if isinstance(self.answer, Response) and self.answer.message is not None:
            return self.answer.message
        raise CallFailed(self)


class CallFailed(Exception):
    """A call got no usable answer: an exception answer (ERROR/FATAL), a broken frame,
    or nothing at all."""

    def __init__(self, call: Call):
        self.call = call
        answer = call.answer
        if isinstance(answer, ExceptionResponse):
            text = f"{answer.body.exceptionName}: {answer.body.stackTrace}"
        elif call.violations:
            text = "; ".join(v.reason for v in call.violations)
        else:
            text = "no answer"
        super().__init__(f"{call.method.name if call.method else call.request.method}: {text}")


def _split(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host or "127.0.0.1", int(port)


class Channel:
    """A blocking connection to one server. ``call`` sends one request and waits for its
    answer; ``call_many`` writes several requests in one ``send`` (they reach the server
    glued in one TCP segment) and waits for every answer."""

    def __init__(self, address: str, *, timeout: float = 10.0, **envelope: Any):
        self.address = address
        self.timeout = timeout
        self.envelope = envelope  # make_request keywords for every call (protocol_ver ...)
        self.codec = ClientConnection(provenance=True)  # each call keeps its bytes
        self.sock = socket.create_connection(_split(address), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.local = self.sock.getsockname()[:2]
        self._start = time.monotonic()

    def now(self) -> float:
        return time.monotonic() - self._start

    def call(self, method: str, message: Message | dict[str, Any], *, check: bool = True,
             **envelope: Any) -> Call:
        return self.call_many([(method, message)], check=check, **envelope)[0]

    def call_many(self, requests: list[tuple[str, Message | dict[str, Any]]], *,
                  check: bool = True, **envelope: Any) -> list[Call]:
        calls = []
        for method, message in requests:
            info, msg = request_message(method, message)
            now = self.now()
            request, data = self.codec.request(info.id, msg, now=now, check=check,
                                               **{**self.envelope, **envelope})
            calls.append(Call(request, data, t=now))
        self.sock.sendall(b"".join(c.sent for c in calls))
        self._collect(calls)
        return calls

    def send_raw(self, data: bytes) -> list[Any]:
        """Write bytes the codec did not build (a broken frame) and return what comes
        back (events) until the server answers, closes, or the timeout passes."""
        self.sock.sendall(data)
        events: list[Any] = []
        self.sock.settimeout(self.timeout)
        try:
            chunk = self.sock.recv(65536)
            events = self.codec.receive(chunk, now=self.now())
        except TimeoutError:
            pass
        return events

    def _collect(self, calls: list[Call]) -> None:
        waiting = {c.request.serialNo: c for c in calls}
        deadline = time.monotonic() + self.timeout
        while waiting:
            left = deadline - time.monotonic()
            if left <= 0:
                return
            self.sock.settimeout(left)
            try:
                chunk = self.sock.recv(65536)
            except TimeoutError:
                return
            for event in self.codec.receive(chunk, now=self.now()):
                self._route(event, waiting)
            if not chunk:
                return

    @staticmethod
    def _route(event: Any, waiting: dict[int, Call]) -> None:
        if isinstance(event, Response | ExceptionResponse):
            call = waiting.pop(event.serialNo, None)
            if call is not None:
                call.answer = event
                call.received = event.raw.data if event.raw is not None else b""
        elif isinstance(event, Violation):
            about = getattr(event.event, "serialNo", None)
            for call in waiting.values() if about is None else [waiting.get(about)]:
                if call is not None:
                    call.violations.append(event)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()


class AsyncChannel:
    """An asyncio connection to one server; concurrent calls are paired by serialNo."""

    def __init__(self, address: str, **envelope: Any):
        self.address = address
        self.envelope = envelope
        self.codec = ClientConnection(provenance=False)
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._waiting: dict[int, tuple[Call, asyncio.Future[Call]]] = {}
        self._task: asyncio.Task[None] | None = None
        self._connecting: asyncio.Lock | None = None

    async def connect(self) -> AsyncChannel:
        """Open the connection (once, however many calls ask for it at the same time)."""
        if self._connecting is None:
            self._connecting = asyncio.Lock()
        async with self._connecting:
            if self._writer is None:
                host, port = _split(self.address)
                self._reader, self._writer = await asyncio.open_connection(host, port)
                self._task = asyncio.get_running_loop().create_task(self._read())
        return self

    async def call(self, method: str, message: Message | dict[str, Any], *,
                   timeout: float = 15.0, **envelope: Any) -> Call:
        if self._writer is None:
            await self.connect()
        writer = self._writer
        assert writer is not None
        info, msg = request_message(method, message)
        loop = asyncio.get_running_loop()
        now = loop.time()
        request, data = self.codec.request(info.id, msg, now=now,
                                           **{**self.envelope, **envelope})
        call = Call(request, data, t=now)
        future: asyncio.Future[Call] = loop.create_future()
        self._waiting[request.serialNo] = (call, future)
        writer.write(data)
        try:
            await asyncio.wait_for(future, timeout)
        except TimeoutError:
            self._waiting.pop(request.serialNo, None)
        return call

    async def _read(self) -> None:
        loop = asyncio.get_running_loop()
        reader = self._reader
        assert reader is not None
        try:
            while data := await reader.read(65536):
                for event in self.codec.receive(data, now=loop.time()):
                    if isinstance(event, Response | ExceptionResponse):
                        waiting = self._waiting.pop(event.serialNo, None)
                        if waiting is not None:
                            call, future = waiting
                            call.answer = event
                            if not future.done():
                                future.set_result(call)
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            for call, future in self._waiting.values():
                if not future.done():
                    future.set_result(call)
            self._waiting.clear()

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
        if self._writer is not None:
            self._writer.close()
            with contextlib.suppress(ConnectionError, OSError):
                await self._writer.wait_closed()
        self._writer = None
