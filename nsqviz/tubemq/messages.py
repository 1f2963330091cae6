"""RawFrame content <-> events: the three protobuf messages and the inner request/response.

Building: :func:`make_request`, :func:`make_response` and :func:`make_exception` fill
the envelope as the Java client and server do (flag, serviceType, protocolVer 3,
timeout 10000 ms, the method echoed) and :func:`encode` turns an event into the bytes
of its frame. Decoding: :func:`decode_request` and :func:`decode_answer` turn a frame's
content into an event plus the :class:`~nsqviz.tubemq.events.Violation` s found on the
way (a message that does not parse or lacks a required field, an unknown method, a
CRC that does not match). Which message a method id carries is read from
:data:`~nsqviz.tubemq.tables.METHODS`; every message class comes from the ``.proto``
sources (:mod:`nsqviz.tubemq.protos`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from google.protobuf.message import DecodeError, Message

from nsqviz.stream.reassembly import RawFrame
from nsqviz.tubemq.events import Event, ExceptionResponse, Request, Response, Violation
from nsqviz.tubemq.framing import join_content, join_frame, split_content
from nsqviz.tubemq.grammar import Content, GrammarError
from nsqviz.tubemq.metadata import checksum
from nsqviz.tubemq.protos import MESSAGES, RpcStatus
from nsqviz.tubemq.tables import (
    METHOD_SEND_MESSAGE,
    METHODS,
    RPC_FLAG_MSG_TYPE_REQUEST,
    RPC_FLAG_MSG_TYPE_RESPONSE,
    SERVICES,
    ViolationCode,
    accepted,
)

__all__ = [
    "DEFAULT_PROTOCOL_VERSION",
    "DEFAULT_TIMEOUT_MS",
    "decode_answer",
    "decode_request",
    "encode",
    "make_exception",
    "make_request",
    "make_response",
    "parse_message",
]

DEFAULT_PROTOCOL_VERSION = 3
"""What the Java client and server send (org.apache.inlong); Go and C++ send 2."""

DEFAULT_TIMEOUT_MS = 10000
"""The Java client's rpc.request.timeout default."""

RpcConnHeader = MESSAGES["RpcConnHeader"]
RequestHeader = MESSAGES["RequestHeader"]
RequestBody = MESSAGES["RequestBody"]
ResponseHeader = MESSAGES["ResponseHeader"]
RspResponseBody = MESSAGES["RspResponseBody"]
RspExceptionBody = MESSAGES["RspExceptionBody"]

# ---------------------------------------------------------------------------- building


def make_request(
    serialNo: int,
    method: int,
    message: Message | None = None,
    *,
    service: int | None = None,
    timeout: int | None = DEFAULT_TIMEOUT_MS,
    protocol_ver: int | None = DEFAULT_PROTOCOL_VERSION,
    flag: int = RPC_FLAG_MSG_TYPE_REQUEST,
) -> Request:
    """A request as the Java client fills it. ``service`` defaults to the last service
    that accepts the method (3 for sendMessageP2B, as Java; Go uses 2)."""
    if service is None:
        info = METHODS.get(method)
        service = info.services[-1] if info is not None else 1
    header = RequestHeader(serviceType=service)
    if protocol_ver is not None:
        header.protocolVer = protocol_ver
    body = RequestBody(method=method)
    if timeout is not None:
        body.timeout = timeout
    if message is not None:
        body.request = message.SerializePartialToString()
    return Request(serialNo, RpcConnHeader(flag=flag), header, body, message)


def make_response(
    request: Request, message: Message, *, protocol_ver: int = DEFAULT_PROTOCOL_VERSION
) -> Response:
    """The SUCCESS answer to ``request`` carrying ``message``, as the Java server writes it."""
    header = ResponseHeader(status=RpcStatus.SUCCESS, protocolVer=protocol_ver)
    body = RspResponseBody(method=request.method, data=message.SerializePartialToString())
    conn = RpcConnHeader(flag=RPC_FLAG_MSG_TYPE_RESPONSE)
    return Response(request.serialNo, conn, header, body, message, request=request)


def make_exception(
    request: Request,
    exception_name: str,
    stack_trace: str | None = None,
    *,
    status: int = RpcStatus.ERROR,
    protocol_ver: int | None = DEFAULT_PROTOCOL_VERSION,
) -> ExceptionResponse:
    """An ERROR (or FATAL: no protocolVer, as the Java server) answer to ``request``."""
    header = ResponseHeader(status=status)
    if protocol_ver is not None and status != RpcStatus.FATAL:
        header.protocolVer = protocol_ver
    body = RspExceptionBody(exceptionName=exception_name)
    if stack_trace is not None:
        body.stackTrace = stack_trace
    conn = RpcConnHeader(flag=RPC_FLAG_MSG_TYPE_RESPONSE)
    return ExceptionResponse(request.serialNo, conn, header, body, request=request)


def encode(event: Request | Response | ExceptionResponse) -> bytes:
    """The frame that carries ``event``, its content cut into 8192-byte blocks."""
    content = join_content(Content(
        event.connHeader.SerializePartialToString(),
        event.header.SerializePartialToString(),
        event.body.SerializePartialToString(),
    ))
    return join_frame(event.serialNo, content)


# ---------------------------------------------------------------------------- decoding


def parse_message(name: str, data: bytes) -> tuple[Message | None, str]:
    """``(message, problem)``: the message parsed from ``data``; ``problem`` is empty, or
    says why it does not parse (message ``None``) or which required fields it lacks."""
    msg = MESSAGES[name]()
    try:
        msg.ParseFromString(data)
    except DecodeError as exc:
        return None, f"{name} does not parse: {exc}"
    if not msg.IsInitialized():
        missing = ", ".join(msg.FindInitializationErrors())
        return msg, f"{name} lacks required field(s) {missing}"
    return msg, ""


class _Decoding:
    """The violations found while decoding one frame, located in the stream: the frame
    starts at ``start``; ``where`` maps a content offset to its stream offset."""

    __slots__ = ("raw", "start", "where", "violations")

    def __init__(self, raw: RawFrame | None, start: int, where: Callable[[int], int]):
        self.raw = raw
        self.start = start
        self.where = where
        self.violations: list[Violation] = []

    def add(self, code: ViolationCode, field: str, reason: str, content_offset: int | None,
            *, fatal: bool = False) -> None:
        at = None if content_offset is None else self.where(content_offset)
        self.violations.append(Violation(code, field, reason, self.start, fatal, raw=self.raw,
                                         field_offset=at))

    def message(self, name: str, data: bytes, field: str, at: int) -> Message | None:
        msg, problem = parse_message(name, data)
        if problem:
            self.add(ViolationCode.PROTOBUF_ERROR, field, problem, at)
        return msg

    def content(self, content: bytes) -> tuple[Content | None, list[int]]:
        """The three serialized messages and where each starts in the content."""
        try:
            parts = split_content(content)
        except GrammarError as exc:
            self.add(exc.code, exc.field or "content", exc.reason,
                     exc.offset, fatal=True)
            return None, []
        starts = []
        pos = 0
        for data in (parts.connHeader, parts.header, parts.body):
            pos += _varint_size(len(data))
            starts.append(pos)
            pos += len(data)
        return parts, starts


    def headers(self, content: bytes, header: str
                ) -> tuple[Content, list[int], Message | None, Message | None] | None:
        """The content's parts, where each starts, its RpcConnHeader and its header
        (message ``header``), each ``None`` when it cannot be read (the violation said);
        ``None`` when the content cannot be split."""
        parts, starts = self.content(content)
        if parts is None:
            return None
        conn = self.message("RpcConnHeader", parts.connHeader, "RpcConnHeader", starts[0])
        head = self.message(header, parts.header, header, starts[1])
        return parts, starts, conn, head


def _varint_size(n: int) -> int:
    size = 1
    while n >= 0x80:
        n >>= 7
        size += 1
    return size


def _fast_request(serialNo: int, content: bytes, raw: RawFrame | None) -> Request | None:
    """The request when nothing in it needs a word (the hot path); ``None`` sends the
    frame down the detailed path, which finds and words every problem."""
    try:
        # The envelope's first two messages are short (one-byte lengths) and the body's
        # length takes at most 3 bytes: read them in place, else split the long way.
        a = content[0]
        b_at = 1 + a
        b = content[b_at]
        c_at = b_at + 1 + b
        c = content[c_at]
        if c < 0x80:
            body_at = c_at + 1
        elif content[c_at + 1] < 0x80 and content[c_at + 1]:
            c = (c & 0x7F) | content[c_at + 1] << 7
            body_at = c_at + 2
        elif content[c_at + 2] < 0x80 and content[c_at + 2] and content[c_at + 1] >= 0x80:
            c = (c & 0x7F) | (content[c_at + 1] & 0x7F) << 7 | content[c_at + 2] << 14
            body_at = c_at + 3
        else:
            body_at = -1
        if a < 0x80 and b < 0x80 and body_at + c == len(content) and body_at > 0:
            view = memoryview(content)  # no copies of a large body
            conn = RpcConnHeader.FromString(view[1:b_at])
            header = RequestHeader.FromString(view[b_at + 1 : c_at])
            body = RequestBody.FromString(view[body_at:])
        else:
            parts = split_content(content)
            conn = RpcConnHeader.FromString(parts.connHeader)
            header = RequestHeader.FromString(parts.header)
            body = RequestBody.FromString(parts.body)
    except (IndexError, GrammarError, DecodeError):
        return None
    info = METHODS.get(body.method)
    if (info is None or info.request is None or header.serviceType not in info.services
            or not (conn.IsInitialized() and body.IsInitialized()) or not body.request):
        return None
    try:
        message = MESSAGES[info.request].FromString(body.request)
    except DecodeError:
        return None
    if not message.IsInitialized() or (
        info.id == METHOD_SEND_MESSAGE and message.checkSum != -1
    ):
        return None
    return Request(serialNo, conn, header, body, message, raw)


def decode_request(
    serialNo: int, content: bytes, raw: RawFrame | None, start: int,
    where: Callable[[int], int],
) -> tuple[Request | None, list[Violation]]:
    """A request frame's content as a :class:`Request` and the violations it carries.
    ``start`` is the frame's stream offset, ``where`` maps a content offset to a stream
    offset (past the block lengths)."""
    fast = _fast_request(serialNo, content, raw)
    if fast is not None:
        return fast, []
    return _detailed_request(serialNo, content, raw, where, start)


def _detailed_request(
    serialNo: int, content: bytes, raw: RawFrame | None, where: Callable[[int], int],
    start: int = 0,
) -> tuple[Request | None, list[Violation]]:
    """Every step of :func:`decode_request`, each problem worded."""
    d = _Decoding(raw, start, where)
    read = d.headers(content, "RequestHeader")
    if read is None:
        return None, d.violations
    parts, starts, conn, header = read
    body = d.message("RequestBody", parts.body, "RequestBody", starts[2])
    if conn is None or header is None or body is None:
        return None, d.violations
    message = None
    service, method = header.serviceType, body.method
    info = METHODS.get(method)
    if not any(service in m.services for m in METHODS.values()):
        d.add(ViolationCode.UNKNOWN_SERVICE, "RequestHeader.serviceType",
              f"service type {service} has no RPC methods", starts[1])
    elif info is None:
        d.add(ViolationCode.UNKNOWN_METHOD, "RequestBody.method",
              f"method id {method} is not defined", starts[2])
    elif not accepted(service, method):
        d.add(ViolationCode.WRONG_SERVICE, "RequestBody.method",
              f"{info.name} ({method}) is not accepted under {SERVICES[service]} "
              f"({service}): the Java server answers {RpcStatus.ERROR.name}", starts[2])
    if info is not None:
        if info.request is None:
            d.add(ViolationCode.NO_DECODER, "RequestBody.method",
                  f"{info.name} ({method}) has no request message: the Java server answers "
                  f"{RpcStatus.FATAL.name}", starts[2])
        elif body.HasField("request"):
            message = d.message(info.request, body.request, f"RequestBody.request ({info.request})",
                                starts[2])
        else:
            d.add(ViolationCode.PROTOBUF_ERROR, "RequestBody.request",
                  f"no {info.request} in the request body", starts[2])
    event = Request(serialNo, conn, header, body, message, raw)
    if message is not None and info is not None and info.request == "SendMessageRequestP2B":
        sent = message.checkSum
        if sent != -1 and sent != checksum(message.data):
            d.add(ViolationCode.CRC_MISMATCH, "SendMessageRequestP2B.checkSum",
                  f"checkSum {sent} but CRC-32 of data & 0x7FFFFFFF is {checksum(message.data)}"
                  " (the broker answers 403)", starts[2])
    return event, _about(d.violations, event)


def decode_answer(
    serialNo: int,
    content: bytes,
    raw: RawFrame | None,
    start: int,
    where: Callable[[int], int],
    request: Request | None,
) -> tuple[Response | ExceptionResponse | None, list[Violation]]:
    """A response frame's content as a :class:`Response` or :class:`ExceptionResponse`
    and the violations it carries; ``request`` is the request of the same serialNo
    (``start`` and ``where`` as for :func:`decode_request`)."""
    d = _Decoding(raw, start, where)
    read = d.headers(content, "ResponseHeader")
    if read is None:
        return None, d.violations
    parts, starts, conn, header = read
    if conn is None or header is None:
        return None, d.violations
    if header.status != RpcStatus.SUCCESS:
        body = d.message("RspExceptionBody", parts.body, "RspExceptionBody", starts[2])
        if body is None:
            return None, d.violations
        failed = ExceptionResponse(serialNo, conn, header, body, raw, request)
        return failed, _about(d.violations, failed)
    body = d.message("RspResponseBody", parts.body, "RspResponseBody", starts[2])
    if body is None:
        return None, d.violations
    method = body.method
    if request is not None and request.method != method:
        d.add(ViolationCode.METHOD_MISMATCH, "RspResponseBody.method",
              f"answers method {method}, but request {serialNo} called {request.method}",
              starts[2])
    info = METHODS.get(method)
    message = None
    if info is None or info.response is None:
        d.add(ViolationCode.UNKNOWN_METHOD, "RspResponseBody.method",
              f"method id {method} has no response message", starts[2])
    else:
        message = d.message(info.response, body.data, f"RspResponseBody.data ({info.response})",
                            starts[2])
    event = Response(serialNo, conn, header, body, message, raw, request)
    if message is not None and info is not None and info.response == "GetMessageResponseB2C":
        for i, m in enumerate(message.messages):
            if m.checkSum != checksum(m.payLoadData):
                d.add(ViolationCode.CRC_MISMATCH, f"GetMessageResponseB2C.messages[{i}].checkSum",
                      f"checkSum {m.checkSum} but CRC-32 of payLoadData & 0x7FFFFFFF is "
                      f"{checksum(m.payLoadData)} (the consumer drops the message)", starts[2])
    return event, _about(d.violations, event)


def _about(violations: list[Violation], event: Event) -> list[Violation]:
    """The violations, each pointing at the event it is about."""
    return [dataclasses.replace(v, event=event) for v in violations]
