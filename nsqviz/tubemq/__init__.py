"""Apache InLong TubeMQ's RPC protocol: grammar, protobuf messages, tables and codec.

The parts, each defined once:

* :mod:`~nsqviz.tubemq.grammar` -- the frame (MsgToken, serialNo, listSize, blocks) and
  its content (three varint-delimited protobuf messages), parse and build;
* :mod:`~nsqviz.tubemq.protos` -- the messages, compiled at import from the ``.proto``
  sources in ``proto/``;
* :mod:`~nsqviz.tubemq.tables` -- services, methods, session states and transitions,
  error codes;
* :mod:`~nsqviz.tubemq.metadata` -- the string-encoded metadata and message payloads;
* :mod:`~nsqviz.tubemq.framing` -- the framing rule for the stream reassembler;
* :mod:`~nsqviz.tubemq.messages` and :mod:`~nsqviz.tubemq.codec` -- events in and out,
  a sans-IO connection per role and a passive :class:`Observer` for captures.

Typical use::

    client, server = ClientConnection(), ServerConnection()
    req, data = client.request(3, MESSAGES["CloseRequestP2M"](clientId="p1"), now=0.0)
    [request] = server.receive(data)
    _, answer = server.respond(request, MESSAGES["CloseResponseM2P"](
        success=True, errCode=200, errMsg="OK!"))
    [response] = client.receive(answer, now=0.004)   # response.latency == 0.004

Sources: the facts come from Apache InLong's TubeMQ (``github.com/apache/inlong``,
paths below ``inlong-tubemq/``; ``core`` is ``tubemq-core/src/main/java/org/apache/
inlong/tubemq``), where the module docstrings cite them by class:

* framing: ``core/corerpc/netty/NettyProtocolEncoder.java``, ``NettyProtocolDecoder.java``;
* envelope, services, method ids, versions: ``core/corerpc/RpcConstants.java``,
  ``core/corerpc/codec/PbEnDecoder.java``, ``core/corerpc/netty/NettyRpcServer.java``;
* messages: ``tubemq-core/src/main/proto/{RPC,MasterService,BrokerService}.proto``;
* error codes, separators, ports: ``core/corebase/TErrCodeConstants.java``,
  ``TokenConstants.java``, ``TBaseConstants.java``;
* metadata strings and payloads: ``core/corebase/cluster/*.java``,
  ``core/corebase/Message.java``, ``core/corebase/utils/DataConverterUtil.java``;
* server behaviour: ``tubemq-server/.../master/TMaster.java``,
  ``tubemq-server/.../broker/BrokerServiceServer.java``;
* client sequences: the Go client, ``tubemq-client-twins/tubemq-client-go``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    # the one error family of every protocol (nsqviz.sansio), importable from here too;
    # the site documents it once, with nsqviz.nsq
    from nsqviz.sansio import LocalProtocolError as LocalProtocolError
    from nsqviz.sansio import ProtocolError as ProtocolError
    from nsqviz.tubemq.codec import (
        ClientConnection,
        Observer,
        ServerConnection,
    )
    from nsqviz.tubemq.events import (
        Answer,
        ConnectionClosed,
        Event,
        ExceptionResponse,
        Observation,
        Request,
        Response,
        Truncated,
        Violation,
    )
    from nsqviz.tubemq.framing import TubeFraming, split_frame
    from nsqviz.tubemq.grammar import (
        CPP_READER,
        DEFAULT_LIMITS,
        JAVA_READER,
        RPC_MAX_BUFFER_SIZE,
        FrameParts,
        GrammarError,
        Limits,
        build_frame,
        frame_bytes,
        parse_frame,
    )
    from nsqviz.tubemq.messages import (
        decode_answer,
        decode_request,
        encode,
        make_exception,
        make_request,
        make_response,
    )
    from nsqviz.tubemq.protos import MESSAGES, message_class
    from nsqviz.tubemq.tables import (
        BEGIN_TOKEN,
        DEFAULT_BROKER_PORT,
        DEFAULT_MASTER_PORT,
        ERRORS,
        METHODS,
        METHODS_BY_NAME,
        SERVICES,
        TRANSITIONS,
        Method,
        State,
    )

__all__ = [
    "BEGIN_TOKEN",
    "CPP_READER",
    "DEFAULT_BROKER_PORT",
    "DEFAULT_LIMITS",
    "DEFAULT_MASTER_PORT",
    "ERRORS",
    "JAVA_READER",
    "MESSAGES",
    "METHODS",
    "METHODS_BY_NAME",
    "RPC_MAX_BUFFER_SIZE",
    "SERVICES",
    "TRANSITIONS",
    "Answer",
    "ClientConnection",
    "ConnectionClosed",
    "Event",
    "ExceptionResponse",
    "FrameParts",
    "GrammarError",
    "Limits",
    "Method",
    "Observation",
    "Observer",
    "Request",
    "Response",
    "ServerConnection",
    "State",
    "Truncated",
    "TubeFraming",
    "Violation",
    "build_frame",
    "decode_answer",
    "decode_request",
    "encode",
    "frame_bytes",
    "make_exception",
    "make_request",
    "make_response",
    "message_class",
    "parse_frame",
    "split_frame",
]


_WHERE = {
    "Answer": "nsqviz.tubemq.events",
    "BEGIN_TOKEN": "nsqviz.tubemq.tables",
    "CPP_READER": "nsqviz.tubemq.grammar",
    "ClientConnection": "nsqviz.tubemq.codec",
    "ConnectionClosed": "nsqviz.tubemq.events",
    "DEFAULT_BROKER_PORT": "nsqviz.tubemq.tables",
    "DEFAULT_LIMITS": "nsqviz.tubemq.grammar",
    "DEFAULT_MASTER_PORT": "nsqviz.tubemq.tables",
    "ERRORS": "nsqviz.tubemq.tables",
    "Event": "nsqviz.tubemq.events",
    "ExceptionResponse": "nsqviz.tubemq.events",
    "FrameParts": "nsqviz.tubemq.grammar",
    "GrammarError": "nsqviz.tubemq.grammar",
    "JAVA_READER": "nsqviz.tubemq.grammar",
    "Limits": "nsqviz.tubemq.grammar",
    "LocalProtocolError": "nsqviz.sansio",
    "MESSAGES": "nsqviz.tubemq.protos",
    "METHODS": "nsqviz.tubemq.tables",
    "METHODS_BY_NAME": "nsqviz.tubemq.tables",
    "Method": "nsqviz.tubemq.tables",
    "Observation": "nsqviz.tubemq.events",
    "Observer": "nsqviz.tubemq.codec",
    "ProtocolError": "nsqviz.sansio",
    "RPC_MAX_BUFFER_SIZE": "nsqviz.tubemq.grammar",
    "Request": "nsqviz.tubemq.events",
    "Response": "nsqviz.tubemq.events",
    "SERVICES": "nsqviz.tubemq.tables",
    "ServerConnection": "nsqviz.tubemq.codec",
    "State": "nsqviz.tubemq.tables",
    "TRANSITIONS": "nsqviz.tubemq.tables",
    "Truncated": "nsqviz.tubemq.events",
    "TubeFraming": "nsqviz.tubemq.framing",
    "Violation": "nsqviz.tubemq.events",
    "build_frame": "nsqviz.tubemq.grammar",
    "decode_answer": "nsqviz.tubemq.messages",
    "decode_request": "nsqviz.tubemq.messages",
    "encode": "nsqviz.tubemq.messages",
    "frame_bytes": "nsqviz.tubemq.grammar",
    "make_exception": "nsqviz.tubemq.messages",
    "make_request": "nsqviz.tubemq.messages",
    "make_response": "nsqviz.tubemq.messages",
    "message_class": "nsqviz.tubemq.protos",
    "parse_frame": "nsqviz.tubemq.grammar",
    "split_frame": "nsqviz.tubemq.framing",
}
"""Which module defines each name the package gives."""


def __getattr__(name: str) -> Any:
    """The package's names are imported on first use (PEP 562): importing the package --
    as the protocol registry does for detection, which reads :mod:`.tables` alone --
    compiles no protobuf and builds no grammar."""
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
