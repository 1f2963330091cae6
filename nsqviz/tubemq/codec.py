"""Sans-IO TubeMQ connections, one object per role, in the style of h11.

A :class:`ClientConnection` (a producer or consumer talking to a Master or Broker) or a
:class:`ServerConnection` (the Master or Broker) owns no socket, no thread and no
clock: ``receive(data, now=...)`` returns the events the bytes completed, and
``send(event, now=...)`` returns the bytes to write. ``now`` is the caller's time in
seconds (any clock); it only serves to measure each request/response pair's latency.

In between, the object keeps what the protocol says about the connection:

* requests awaiting an answer, by serialNo: an answer is paired with its request (the
  :class:`~nsqviz.tubemq.events.Response` carries it and the latency); an answer
  nobody asked for, or a second request with a serialNo still awaiting its answer, is a
  :class:`~nsqviz.tubemq.events.Violation`;
* the session state (:class:`~nsqviz.tubemq.tables.State`), moved by the answers as
  :data:`~nsqviz.tubemq.tables.TRANSITIONS` says, and the states each method may be
  called in (:data:`~nsqviz.tubemq.tables.METHODS`).

Bytes go through the stream :class:`~nsqviz.stream.Reassembler` with TubeMQ's framing
rule, the fast splitter, then the protobuf messages. Misuse by *us* raises
:class:`LocalProtocolError` from ``send`` (unless ``check=False``, so that a notebook
can show what a server answers to it). Misbehaviour by the *peer* is data: a
``Violation`` with the stream offset, the field in the protocol's words and the reason.
After a framing error an active connection, like the Java decoder, reads nothing more
(the violation is ``fatal``); a passive one (:class:`Observer`, for captures) resyncs
on the next MsgToken.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from struct import Struct
from typing import Any

from google.protobuf.message import Message

from nsqviz.sansio import Connection as SansIOConnection
from nsqviz.sansio import LocalProtocolError
from nsqviz.sansio import Observer as SansIOObserver
from nsqviz.stream.reassembly import Garbage, RawFrame, Reassembler
from nsqviz.stream.sizes import INT32
from nsqviz.tubemq.events import (
    Answer,
    Event,
    ExceptionResponse,
    Request,
    Response,
    Violation,
)
from nsqviz.tubemq.framing import TubeFraming, split_frame
from nsqviz.tubemq.grammar import DEFAULT_LIMITS, GrammarError, Limits
from nsqviz.tubemq.messages import (
    decode_answer,
    decode_request,
    encode,
    make_exception,
    make_request,
    make_response,
)
from nsqviz.tubemq.tables import (
    BEGIN_TOKEN,
    HEADER_SIZE,
    METHODS,
    MSG_OPTYPE_UNREGISTER,
    ErrorCode,
    Kind,
    Outcome,
    State,
    ViolationCode,
    accepted,
    next_state,
)

__all__ = [
    "ClientConnection",
    "Observer",
    "ServerConnection",
    "outcome",
]

MAX_PENDING = 65536
"""Requests awaiting an answer that a connection remembers; the oldest is forgotten
beyond this (a Java server never answers a request whose timeout is 0)."""

def outcome(request: Request | None, answer: Answer) -> Outcome | None:
    """What ``answer`` does to the session (the input of the transition table)."""
    if request is None or type(answer) is not Response or answer.message is None:
        return None
    info = request.info
    if info is None:
        return None
    msg = answer.message
    has_success = "success" in msg.DESCRIPTOR.fields_by_name
    ok = msg.success if has_success else msg.errCode == ErrorCode.SUCCESS
    if info.kind is Kind.REGISTER and ok:
        if request.message is not None and getattr(request.message, "opType", 0) == (
            MSG_OPTYPE_UNREGISTER
        ):
            return None  # unregistering one partition ends no session
        return Outcome.REGISTERED
    if info.kind is Kind.CLOSE and ok:
        return Outcome.CLOSED
    if info.kind is Kind.HEARTBEAT and getattr(msg, "errCode", 0) == ErrorCode.HB_NO_NODE:
        return Outcome.NODE_UNKNOWN
    return None


_SERIAL_COUNT = Struct(">Ii")
_SERIAL_AT = len(BEGIN_TOKEN)
"""Where a frame's serialNo starts (after the MsgToken)."""

_JUDGED = frozenset({ViolationCode.RESPONSE_WITHOUT_REQUEST, ViolationCode.NOT_ALLOWED_IN_STATE})
"""What an observer that started mid-connection cannot judge: it saw neither the request
an answer answers nor the session's state."""


def _block_starts(buf: bytes, start: int, count: int) -> list[int]:
    """Where each block's data starts in ``buf``, for a frame at ``start`` the framing
    rule has measured (so its block lengths are within the limits)."""
    starts = []
    p = start + HEADER_SIZE
    for _ in range(count):
        starts.append(p + 4)
        p += 4 + INT32.unpack_from(buf, p)[0]
    return starts


def _content(buf: bytes, start: int, end: int) -> tuple[int, Any, Callable[[int], int]]:
    """``(serialNo, content, where)`` of the measured frame ``buf[start:end]``; ``where``
    maps a content offset to an offset in ``buf`` (past the block lengths)."""
    serial, count = _SERIAL_COUNT.unpack_from(buf, start + 4)
    content: bytes | memoryview
    if count == 1:
        content = memoryview(buf)[start + HEADER_SIZE + 4 : end]  # a view: no copy
    elif count == 0:
        content = b""
    else:
        view = memoryview(buf)
        starts = _block_starts(buf, start, count)
        ends = [s - 4 for s in starts[1:]]
        ends.append(end)
        content = b"".join([view[s:e] for s, e in zip(starts, ends, strict=True)])

    def where(offset: int) -> int:
        at = 0
        for s in _block_starts(buf, start, count):
            length = INT32.unpack_from(buf, s - 4)[0]
            if offset < at + length:
                return s + offset - at
            at += length
        return end

    return serial, content, where


class _Connection(SansIOConnection):
    """What both roles share beyond the sans-IO base (:class:`nsqviz.sansio.Connection`):
    the frame limits, the pending requests, the session state.

    A ``passive`` connection observes someone else's traffic: it never refuses, and it
    reads on after bytes that do not frame by resynchronising on the next MsgToken.
    """

    def __init__(
        self, *, limits: Limits = DEFAULT_LIMITS, provenance: bool = False, passive: bool = False
    ) -> None:
        self.limits = limits
        self.state = State.INIT
        self.pending: dict[int, tuple[Request, float | None]] = {}
        super().__init__(provenance=provenance, passive=passive)

    def _reassembler(self, *, after_gap: bool) -> Reassembler:
        return Reassembler(TubeFraming(self.limits), provenance=self.provenance,
                           resync=self.passive)

    def _receive(self, data: bytes, out: list[Any], segment: int | None,
                 now: float | None) -> None:
        reasm = self._reasm
        buf, base, items = reasm.cut(data, segment=segment)
        prov = self.provenance
        pos = 0
        for item in items:
            if type(item) is int:
                raw = reasm.frame(buf, base, pos, item) if prov else None
                self._on_frame(buf, pos, item, base, raw, now, out)
                pos = item
            else:
                assert isinstance(item, Garbage)
                self._on_garbage(item, out)
                pos = item.offset - base + len(item.data)

    def _on_garbage(self, garbage: Garbage, out: list[Event]) -> None:
        raw = RawFrame(garbage.data, garbage.offset, garbage.sources)
        try:
            split_frame(garbage.data, self.limits)
            error = None
        except GrammarError as exc:
            error = exc if exc.code == garbage.code else None
        field = error.field if error is not None else "MsgToken"
        at = garbage.offset + (error.offset or 0 if error is not None else 0)
        reason = error.reason if error is not None else garbage.reason
        if garbage.resynced:
            reason += ("; resynchronised (a guess) on the MsgToken at "
                       f"{garbage.offset + len(garbage.data)}")
        elif not self.passive:
            reason += "; nothing after it is read (the Java decoder closes the connection)"
        # the framing rule's code is the grammar error's ViolationCode
        out.append(Violation(garbage.code or ViolationCode.BAD_TOKEN, field, reason,
                             garbage.offset, True, garbage.resynced, raw, field_offset=at))

    def expect(self, request: Request, now: float | None) -> None:
        """Remember ``request`` as awaiting its answer (sent at ``now``): :meth:`send`
        does it, and an observer for a request it saw the client send."""
        pending = self.pending
        if len(pending) >= MAX_PENDING:
            del pending[next(iter(pending))]
        pending[request.serialNo] = (request, now)

    def answered(self, answer: Answer, now: float | None) -> Answer:
        """Pair ``answer`` with its request (forgetting it), move the state; the answer
        with its request and latency filled in. :meth:`send` and :meth:`receive` do it,
        and an observer for an answer it saw the server send."""
        entry = self.pending.pop(answer.serialNo, None)
        if entry is None:
            return answer
        request, sent_at = entry
        latency = None if now is None or sent_at is None else now - sent_at
        self.state = next_state(self.state, outcome(request, answer))
        return dataclasses.replace(answer, request=request, latency=latency)

    def _on_frame(self, buf: bytes, start: int, end: int, base: int, raw: RawFrame | None,
                  now: float | None, out: list[Event]) -> None:
        """Decode the measured frame ``buf[start:end]`` (stream offset ``base + start``)."""
        raise NotImplementedError  # pragma: no cover - each role decodes its direction


class ClientConnection(_Connection):
    """The client's side: sends requests, receives their answers."""

    def __init__(self, *, limits: Limits = DEFAULT_LIMITS, provenance: bool = False,
                 passive: bool = False, first_serial: int = 1) -> None:
        super().__init__(limits=limits, provenance=provenance, passive=passive)
        self._next_serial = first_serial  # Java: a per-connection counter from 1

    def next_serial(self) -> int:
        """A serialNo no pending request uses (Java counts up from 1 per connection)."""
        serial = self._next_serial
        while serial in self.pending:
            serial = (serial + 1) & 0xFFFFFFFF
        self._next_serial = (serial + 1) & 0xFFFFFFFF
        return serial

    def request(
        self, method: int, message: Message | None = None, *, now: float | None = None,
        check: bool = True, **envelope: Any,
    ) -> tuple[Request, bytes]:
        """Build, check and encode a request with the next serialNo; ``envelope`` takes
        :func:`~nsqviz.tubemq.messages.make_request`'s keywords (service, timeout ...)."""
        req = make_request(self.next_serial(), method, message, **envelope)
        return req, self.send(req, now=now, check=check)

    def send(self, request: Request, *, now: float | None = None, check: bool = True) -> bytes:
        """The bytes of ``request``; refuses (``LocalProtocolError``) a serialNo still
        awaiting its answer, a method the service does not accept or the state forbids."""
        if check and not self.passive:
            self._check(request)
        self.expect(request, now)
        return encode(request)

    def _check(self, request: Request) -> None:
        if self.closed:
            raise LocalProtocolError("the connection is closed")
        if request.serialNo in self.pending:
            raise LocalProtocolError(f"serialNo {request.serialNo} still awaits its answer")
        info = METHODS.get(request.method)
        if info is None:
            raise LocalProtocolError(f"method id {request.method} is not defined")
        service = request.header.serviceType
        if not accepted(service, request.method):
            raise LocalProtocolError(f"{info.name} is not accepted under service {service}")
        if request.message is not None and not request.message.IsInitialized():
            missing = ", ".join(request.message.FindInitializationErrors())
            raise LocalProtocolError(f"{info.request} lacks required field(s) {missing}")
        if self.state not in info.states:
            allowed = ", ".join(sorted(s.value for s in info.states))
            raise LocalProtocolError(f"{info.name} in state {self.state.value} (allowed: "
                                     f"{allowed})")

    def _on_frame(self, buf: bytes, start: int, end: int, base: int, raw: RawFrame | None,
                  now: float | None, out: list[Event]) -> None:
        serial, content, at = _content(buf, start, end)
        entry = self.pending.get(serial)
        answer, violations = decode_answer(serial, content, raw, base + start,
                                           lambda c: base + at(c), entry[0] if entry else None)
        if answer is not None:
            if entry is None:
                violations.insert(0, Violation(
                    ViolationCode.RESPONSE_WITHOUT_REQUEST, "serialNo",
                    f"no request with serialNo {serial} awaits an answer", base + start,
                    raw=raw, field_offset=base + start + _SERIAL_AT))
            answer = self.answered(answer, now)
            out.append(answer)
            violations = [dataclasses.replace(v, event=answer) for v in violations]
        out.extend(violations)


class ServerConnection(_Connection):
    """The server's side (a Master or Broker): receives requests, sends their answers."""

    def _on_frame(self, buf: bytes, start: int, end: int, base: int, raw: RawFrame | None,
                  now: float | None, out: list[Event]) -> None:
        serial, content, at = _content(buf, start, end)
        request, violations = decode_request(serial, content, raw, base + start,
                                             lambda c: base + at(c))
        if request is not None:
            if serial in self.pending:
                violations.insert(0, Violation(
                    ViolationCode.DUPLICATE_SERIAL, "serialNo",
                    f"serialNo {serial} is already awaiting an answer", base + start,
                    raw=raw, event=request, field_offset=base + start + _SERIAL_AT))
            else:
                self.expect(request, now)
            info = METHODS.get(request.body.method)
            if info is not None and self.state not in info.states:
                violations.append(Violation(
                    ViolationCode.NOT_ALLOWED_IN_STATE, "RequestBody.method",
                    f"{info.name} in state {self.state.value} on this connection",
                    base + start, raw=raw, event=request))
            out.append(request)
        out.extend(violations)

    def respond(self, request: Request, message: Message, *, now: float | None = None,
                **envelope: Any) -> tuple[Response, bytes]:
        """The SUCCESS answer to ``request`` and its bytes."""
        answer = make_response(request, message, **envelope)
        return answer, self.send(answer, now=now)

    def fail(self, request: Request, exception_name: str, stack_trace: str | None = None, *,
             now: float | None = None, **envelope: Any) -> tuple[ExceptionResponse, bytes]:
        """An ERROR (or, with ``status=2``, FATAL) answer to ``request`` and its bytes."""
        answer = make_exception(request, exception_name, stack_trace, **envelope)
        return answer, self.send(answer, now=now)

    def send(self, answer: Answer, *, now: float | None = None, check: bool = True) -> bytes:
        """The bytes of ``answer``; refuses an answer to a serialNo nobody is waiting on."""
        if check and not self.passive:
            if answer.serialNo not in self.pending:
                raise LocalProtocolError(f"no request with serialNo {answer.serialNo} to answer")
            message = answer.message if type(answer) is Response else answer.body
            if message is not None and not message.IsInitialized():
                missing = ", ".join(message.FindInitializationErrors())
                raise LocalProtocolError(f"{message.DESCRIPTOR.name} lacks required field(s) "
                                         f"{missing}")
        self.answered(answer, now)
        return encode(answer)


class Observer(SansIOObserver):
    """Watches both directions of someone else's TubeMQ connection (a capture).

    Requests go through a passive :class:`ServerConnection`, answers through a passive
    :class:`ClientConnection`; each request seen is handed to the client side so that
    its answer pairs with it. ``midstream``: the capture started after the connection
    did, so answers to unseen requests and the session state are not judged.
    """

    server: ServerConnection
    client: ClientConnection

    def __init__(self, *, limits: Limits = DEFAULT_LIMITS, provenance: bool = True,
                 midstream: bool = False) -> None:
        self.server = ServerConnection(limits=limits, provenance=provenance, passive=True)
        self.client = ClientConnection(limits=limits, provenance=provenance, passive=True)
        self.midstream = midstream
        if midstream:
            self.server.state = self.client.state = State.REGISTERED

    def _saw_c2s(self, events: list[Any], now: float | None) -> list[Any]:
        for ev in events:
            if type(ev) is Request:
                self.client.expect(ev, now)
        return self._judged(events)

    def _saw_s2c(self, events: list[Any], now: float | None) -> list[Any]:
        for ev in events:
            if type(ev) in (Response, ExceptionResponse):
                self.server.answered(ev, now)
        return self._judged(events)

    def _judged(self, events: list[Any]) -> list[Any]:
        if not self.midstream:
            return events
        return [e for e in events if type(e) is not Violation or e.code not in _JUDGED]
