"""TubeMQ's tables: services, methods, session states and their transitions, error codes,
and the kinds of violation the codec reports.

Everything else -- the grammar's message choice, the codec's checks, record names, the
views, the simulator, the clients, the pipeline and the Lua generator -- reads these
tables (the RPC status is ``RPC.proto``'s enum, :class:`nsqviz.tubemq.protos.RpcStatus`).
Facts from Apache InLong TubeMQ's ``RpcConstants``, ``PbEnDecoder`` and
``TErrCodeConstants`` (see :mod:`nsqviz.tubemq`).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

__all__ = [
    "BEGIN_TOKEN",
    "DEFAULT_BROKER_PORT",
    "DEFAULT_MASTER_PORT",
    "ERRORS",
    "METHODS",
    "METHODS_BY_NAME",
    "SERVICES",
    "TRANSITIONS",
    "ErrorCode",
    "HEADER_SIZE",
    "Service",
    "ViolationCode",
    "EventStatus",
    "EventType",
    "META_VALUE_UNDEFINED",
    "Method",
    "Outcome",
    "ReadStatus",
    "Role",
    "State",
    "UnregisterStatus",
    "accepted",
    "next_state",
]

BEGIN_TOKEN = b"\xff\x7f\xf4\xfe"
"""``RPC_PROTOCOL_BEGIN_TOKEN`` = 0xFF7FF4FE (signed int32 -8391426) on the wire: the
first bytes of every frame, both ways (the grammar's ``MsgToken``)."""

HEADER_SIZE = 12
"""A frame's header: MsgToken, serialNo and listSize."""

DEFAULT_MASTER_PORT = 8715
"""The Master's RPC port (8716 with TLS)."""

DEFAULT_BROKER_PORT = 8123
"""A Broker's RPC port (8124 with TLS); ``brokerInfos`` leave it blank when it is this."""

RPC_FLAG_MSG_TYPE_REQUEST = 0
RPC_FLAG_MSG_TYPE_RESPONSE = 1

PROTOCOL_VERSIONS = {
    1: "com.tencent.tubemq (old clients)",
    2: "org.apache.tubemq (Go and C++ clients)",
    3: "org.apache.inlong (Java client and server)",
}

class Service(enum.IntEnum):
    """``RequestHeader.serviceType``: which server-side service a request is for, named as
    the Java sources name it (:attr:`title`). 4 and 5 are declared but have no methods."""

    title: str

    def __new__(cls, number: int, title: str) -> Service:
        member = int.__new__(cls, number)
        member._value_ = number
        member.title = title
        return member

    MASTER = 1, "MasterService"
    BROKER_READ = 2, "BrokerReadService"
    BROKER_WRITE = 3, "BrokerWriteService"
    BROKER_ADMIN = 4, "BrokerAdminService"
    MASTER_ADMIN = 5, "MasterAdminService"


SERVICES: dict[int, str] = {s.value: s.title for s in Service}
"""``RequestHeader.serviceType`` value -> its Java name (what records and the dissector
show)."""

MASTER_SERVICES = frozenset({Service.MASTER})
"""The services a Master serves."""
BROKER_SERVICES = frozenset({Service.BROKER_READ, Service.BROKER_WRITE})
"""The services a Broker serves."""


class ViolationCode(enum.StrEnum):
    """The kinds of :class:`~nsqviz.tubemq.events.Violation` the codec reports (its
    ``code``; TubeMQ's servers answer none of them with an error code of their own), and
    what each means. The framing ones are the names of the grammar's errors
    (:class:`nsqviz.tubemq.grammar.GrammarError` subclasses; a test holds the two
    together)."""

    meaning: str

    def __new__(cls, code: str, meaning: str) -> ViolationCode:
        member = str.__new__(cls, code)
        member._value_ = code
        member.meaning = meaning
        return member

    BAD_TOKEN = "BadToken", "a frame does not start with the MsgToken FF 7F F4 FE"
    BAD_LIST_SIZE = "BadListSize", "listSize outside the reader's limits"
    BAD_BLOCK_LENGTH = "BadBlockLength", "a block length outside the reader's limits"
    BAD_CONTENT = "BadContent", "the content's length varints are malformed"
    INCOMPLETE = "Incomplete", "the content ends inside one of its messages"
    TRAILING_BYTES = "TrailingBytes", "bytes after the content's three messages"
    PROTOBUF_ERROR = "ProtobufError", "a message does not parse or lacks a required field"
    UNKNOWN_SERVICE = "UnknownService", "a service type with no RPC methods"
    UNKNOWN_METHOD = "UnknownMethod", "a method id the protocol does not define"
    WRONG_SERVICE = "WrongService", "a method the service does not accept (ERROR answer)"
    NO_DECODER = "NoDecoder", "a method the server cannot decode (FATAL answer)"
    RESPONSE_WITHOUT_REQUEST = ("ResponseWithoutRequest",
                                "an answer whose serialNo no request awaits")
    DUPLICATE_SERIAL = "DuplicateSerial", "a request whose serialNo already awaits an answer"
    METHOD_MISMATCH = "MethodMismatch", "an answer names another method than its request"
    CRC_MISMATCH = "CrcMismatch", "a message's checkSum is not the CRC-32 of its data"
    NOT_ALLOWED_IN_STATE = ("NotAllowedInState",
                            "a method the session's state does not allow")


class State(enum.Enum):
    """Where a client's session with a Master or Broker stands, as both ends see it.

    ``INIT``: nothing registered on this connection yet. ``REGISTERED``: a register
    call (or a broker partition registration) succeeded. ``CLOSED``: a close call
    succeeded; registering again opens a new session.
    """

    INIT = "INIT"
    REGISTERED = "REGISTERED"
    CLOSED = "CLOSED"


class ErrorCode(enum.IntEnum):
    """``TErrCodeConstants``: the ``errCode`` of a response, its name and what it means."""

    meaning: str

    def __new__(cls, code: int, meaning: str) -> ErrorCode:
        member = int.__new__(cls, code)
        member._value_ = code
        member.meaning = meaning
        return member

    @property
    def code(self) -> int:
        return int(self)

    SUCCESS = 200, "OK"
    NOT_READY = 201, "service not ready yet"
    MOVED = 301, "requested offset is below the partition's minimum; reset it"
    BAD_REQUEST = 400, "malformed or missing parameter"
    UNAUTHORIZED = 401, "authentication failed"
    CONNECT_RETURN_NULL = 402, "connection returned nothing"
    FORBIDDEN = 403, "not allowed (e.g. checksum mismatch on send)"
    NOT_FOUND = 404, "nothing found, e.g. no new messages at this offset"
    ALL_PARTITION_FROZEN = 405, "all partitions frozen"
    NO_PARTITION_ASSIGNED = 406, "no partition assigned to this consumer yet"
    ALL_PARTITION_WAITING = 407, "all partitions are waiting"
    ALL_PARTITION_INUSE = 408, "every partition is currently in use"
    PARTITION_OCCUPIED = 410, "another consumer of the group holds this partition"
    HB_NO_NODE = 411, "heartbeat for a node the server does not know: register"
    DUPLICATE_PARTITION = 412, "the partition is consumed by another client"
    CERTIFICATE_FAILURE = 415, "certificate/authentication failure"
    SERVER_RECEIVE_OVERFLOW = 419, "broker could not accept the message"
    CLIENT_SHUTDOWN = 420, "client has been shut down"
    CLIENT_HIGH_FREQUENCY_REQUEST = 421, "client requests too often"
    PARTITION_UNSUBSCRIBABLE = 422, "partition does not accept subscription"
    PARTITION_UNPUBLISHABLE = 423, "partition does not accept publishing"
    CLIENT_INCONSISTENT_CONSUMETYPE = 424, "group members disagree on consume type"
    CLIENT_INCONSISTENT_TOPICSET = 425, "group members disagree on topic set"
    CLIENT_INCONSISTENT_FILTERSET = 426, "group members disagree on filters"
    CLIENT_INCONSISTENT_SESSIONKEY = 427, "bound session key differs"
    CLIENT_INCONSISTENT_SELECTBIG = 428, "bound selectBig differs"
    CLIENT_INCONSISTENT_SOURCECOUNT = 429, "bound source count differs"
    CLIENT_DUPLICATE_INDEXID = 430, "duplicate client index id"
    TOPIC_NOT_DEPLOYED = 431, "topic not deployed"
    PARAMETER_MSG_NULL = 440, "message is null"
    PARAMETER_MSG_TOPIC_BLANK = 441, "message topic blank"
    PARAMETER_MSG_BODY_EMPTY = 442, "message body empty"
    PARAMETER_MSG_TOPIC_UNPUBLISHED = 443, "topic not published by this producer"
    PARAMETER_MSG_TOPIC_NO_PARTITION = 444, "no partition for the topic"
    PARAMETER_MSG_OVER_MAX_LENGTH = 445, "message bigger than the allowed size"
    CONSUME_GROUP_FORBIDDEN = 450, "group forbidden to consume"
    SERVER_CONSUME_SPEED_LIMIT = 452, "consumption is being throttled (Go: 550)"
    CONSUME_CONTENT_FORBIDDEN = 455, "filter content forbidden"
    INTERNAL_SERVER_ERROR = 500, "server error"
    SERVICE_UNAVAILABLE = 503, "read or write service temporarily unavailable"
    INTERNAL_SERVER_ERROR_MSGSET_NULL = 510, "internal error: empty message set"
    UNSPECIFIED_ABNORMAL = 599, "unspecified"


class Outcome(enum.Enum):
    """What a method's answer does to the session, the input of :data:`TRANSITIONS`."""

    REGISTERED = "register succeeded"
    CLOSED = "close succeeded"
    NODE_UNKNOWN = (f"heartbeat answered {ErrorCode.HB_NO_NODE.name} "
                    f"({ErrorCode.HB_NO_NODE.code}): register again")


class Role(enum.StrEnum):
    """Who takes part in an RPC: the caller of a method (a producer, a consumer, a Broker
    reporting to the Master) and the server that answers it (the Master or a Broker).
    The analyses name each connection's ends with these words."""

    PRODUCER = "producer"
    CONSUMER = "consumer"
    BROKER = "broker"
    MASTER = "master"


class Kind(enum.Enum):
    """What a method does to the session (the codec's transitions read it)."""

    REGISTER = "register"
    HEARTBEAT = "heartbeat"
    CLOSE = "close"
    CALL = "call"


@dataclass(frozen=True, slots=True)
class Method:
    """One RPC method: ids, names, messages, and the states it may be called in.

    ``name`` is the Java method name (``PbEnDecoder``), ``const`` the ``RpcConstants``
    name; ``request``/``response`` are message names in the ``.proto`` sources (``None``
    for ids the server accepts but cannot decode: it answers FATAL); ``services`` are
    the service types the Java server accepts the id under; ``kind`` (:class:`Kind`)
    decides the method's effect on the session; ``caller`` (:class:`Role`) is who calls
    it (``RPC_MSG_<server>_<caller>_...``), :attr:`server` who answers.
    """

    id: int
    const: str
    name: str
    services: tuple[Service, ...]
    request: str | None
    response: str | None
    label: str
    kind: Kind
    states: frozenset[State]
    caller: Role

    @property
    def server(self) -> Role:
        """Who answers the method: the Master for the Master's service, else a Broker."""
        return Role.MASTER if Service.MASTER in self.services else Role.BROKER


_ALL = frozenset(State)
_LIVE = frozenset({State.REGISTERED})
# A producer's or consumer's close with the Master is answered 200 in any state: the
# Master releases the client and forgets its heartbeat node, registered or not (Go's
# consumer closes after a registration it never got: tubemq-rpc-error.pcap).
_M = (Service.MASTER,)
_R = (Service.BROKER_READ,)
_W = (Service.BROKER_WRITE,)
_RW = (Service.BROKER_READ, Service.BROKER_WRITE)
_P, _C, _B = Role.PRODUCER, Role.CONSUMER, Role.BROKER

METHODS: dict[int, Method] = {m.id: m for m in (
    # id, RpcConstants name, Java method name, services, request, response, label, kind,
    # states, caller
    Method(1, "RPC_MSG_MASTER_PRODUCER_REGISTER", "producerRegisterP2M", _M,
           "RegisterRequestP2M", "RegisterResponseM2P",
           "producer registers with the master", Kind.REGISTER, _ALL, _P),
    Method(2, "RPC_MSG_MASTER_PRODUCER_HEARTBEAT", "producerHeartbeatP2M", _M,
           "HeartRequestP2M", "HeartResponseM2P",
           "producer heartbeat to the master", Kind.HEARTBEAT, _LIVE, _P),
    Method(3, "RPC_MSG_MASTER_PRODUCER_CLOSECLIENT", "producerCloseClientP2M", _M,
           "CloseRequestP2M", "CloseResponseM2P",
           "producer closes with the master", Kind.CLOSE, _ALL, _P),
    Method(4, "RPC_MSG_MASTER_CONSUMER_REGISTER", "consumerRegisterC2M", _M,
           "RegisterRequestC2M", "RegisterResponseM2C",
           "consumer registers with the master", Kind.REGISTER, _ALL, _C),
    Method(5, "RPC_MSG_MASTER_CONSUMER_HEARTBEAT", "consumerHeartbeatC2M", _M,
           "HeartRequestC2M", "HeartResponseM2C",
           "consumer heartbeat to the master", Kind.HEARTBEAT, _LIVE, _C),
    Method(6, "RPC_MSG_MASTER_CONSUMER_CLOSECLIENT", "consumerCloseClientC2M", _M,
           "CloseRequestC2M", "CloseResponseM2C",
           "consumer closes with the master", Kind.CLOSE, _ALL, _C),
    Method(7, "RPC_MSG_MASTER_BROKER_REGISTER", "brokerRegisterB2M", _M,
           "RegisterRequestB2M", "RegisterResponseM2B",
           "broker registers with the master", Kind.REGISTER, _ALL, _B),
    Method(8, "RPC_MSG_MASTER_BROKER_HEARTBEAT", "brokerHeartbeatB2M", _M,
           "HeartRequestB2M", "HeartResponseM2B",
           "broker heartbeat to the master", Kind.HEARTBEAT, _LIVE, _B),
    Method(9, "RPC_MSG_MASTER_BROKER_CLOSECLIENT", "brokerCloseClientB2M", _M,
           "CloseRequestB2M", "CloseResponseM2B",
           "broker closes with the master", Kind.CLOSE, _LIVE, _B),
    Method(11, "RPC_MSG_BROKER_PRODUCER_REGISTER", "brokerProducerRegister", _RW,
           None, None,
           "producer registers with a broker (no decoder: FATAL)", Kind.CALL, _ALL, _P),
    Method(12, "RPC_MSG_BROKER_PRODUCER_HEARTBEAT", "brokerProducerHeartbeat", _RW,
           None, None,
           "producer heartbeat to a broker (no decoder: FATAL)", Kind.CALL, _ALL, _P),
    Method(13, "RPC_MSG_BROKER_PRODUCER_SENDMESSAGE", "sendMessageP2B", _RW,
           "SendMessageRequestP2B", "SendMessageResponseB2P",
           "producer sends a message", Kind.CALL, _ALL, _P),
    Method(14, "RPC_MSG_BROKER_PRODUCER_CLOSE", "brokerProducerClose", _W,
           None, None,
           "producer closes with a broker (no decoder: FATAL)", Kind.CALL, _ALL, _P),
    Method(15, "RPC_MSG_BROKER_CONSUMER_REGISTER", "consumerRegisterC2B", _R,
           "RegisterRequestC2B", "RegisterResponseB2C",
           "consumer (un)registers a partition", Kind.REGISTER, _ALL, _C),
    Method(16, "RPC_MSG_BROKER_CONSUMER_HEARTBEAT", "consumerHeartbeatC2B", _R,
           "HeartBeatRequestC2B", "HeartBeatResponseB2C",
           "consumer heartbeat to a broker", Kind.HEARTBEAT, _LIVE, _C),
    Method(17, "RPC_MSG_BROKER_CONSUMER_GETMESSAGE", "getMessagesC2B", _R,
           "GetMessageRequestC2B", "GetMessageResponseB2C",
           "consumer fetches messages", Kind.CALL, _LIVE, _C),
    Method(18, "RPC_MSG_BROKER_CONSUMER_COMMIT", "consumerCommitC2B", _R,
           "CommitOffsetRequestC2B", "CommitOffsetResponseB2C",
           "consumer commits its offset", Kind.CALL, _LIVE, _C),
    Method(19, "RPC_MSG_BROKER_CONSUMER_CLOSE", "brokerConsumerClose", _R,
           None, None,
           "consumer closes with a broker (no decoder: FATAL)", Kind.CALL, _ALL, _C),
    Method(20, "RPC_MSG_MASTER_CONSUMER_REGISTER_V2", "consumerRegisterC2MV2", _M,
           "RegisterRequestC2MV2", "RegisterResponseM2CV2",
           "client-balance consumer registers", Kind.REGISTER, _ALL, _C),
    Method(21, "RPC_MSG_MASTER_CONSUMER_HEARTBEAT_V2", "consumerHeartbeatC2MV2", _M,
           "HeartRequestC2MV2", "HeartResponseM2CV2",
           "client-balance consumer heartbeat", Kind.HEARTBEAT, _LIVE, _C),
    Method(22, "RPC_MSG_MASTER_CONSUMER_GET_PART_META", "consumerGetPartMetaInfoC2M", _M,
           "GetPartMetaRequestC2M", "GetPartMetaResponseM2C",
           "client-balance consumer asks for partition metadata", Kind.CALL, _LIVE, _C),
)}
"""Every method id of service types 1-3 (id 10 is unused)."""

METHODS_BY_NAME = {m.name: m for m in METHODS.values()}

TRANSITIONS: dict[tuple[State, Outcome], State] = {
    (State.INIT, Outcome.REGISTERED): State.REGISTERED,
    (State.REGISTERED, Outcome.REGISTERED): State.REGISTERED,
    (State.CLOSED, Outcome.REGISTERED): State.REGISTERED,
    (State.REGISTERED, Outcome.CLOSED): State.CLOSED,
    (State.REGISTERED, Outcome.NODE_UNKNOWN): State.INIT,
}
"""``(state, outcome) -> state``, the same for the client and the server role (both see
every answer). A pair not listed leaves the state as it is."""

METHOD_SEND_MESSAGE = 13
METHOD_REGISTER_PARTITION = 15
METHOD_GET_MESSAGE = 17
METHOD_COMMIT_OFFSET = 18
MSG_OPTYPE_REGISTER = 31
MSG_OPTYPE_UNREGISTER = 32


class ReadStatus(enum.IntEnum):
    """``readStatus`` of a consumer's partition registration (opType
    :data:`MSG_OPTYPE_REGISTER`) and of its broker heartbeat: where a group starts."""

    NORMAL = 0  # a group new to the partition starts at its first offset
    MAX_FIRST = 1  # a group new to the partition starts at its max offset
    MAX_ALWAYS = 2  # every registration jumps to the max offset


class UnregisterStatus(enum.IntEnum):
    """``readStatus`` of an unregistration (opType :data:`MSG_OPTYPE_UNREGISTER`)."""

    CONSUMED = 0  # the last batch was consumed: commit its offset
    NOT_CONSUMED = 1

META_VALUE_UNDEFINED = -2
"""The undefined marker (Go ``util.InvalidValue``): flow-control ids, qryPriorityId,
ssdStoreId, offsets not known yet."""


class EventType(enum.IntEnum):
    """``EventProto.opType``: what a rebalance event tells a consumer to do
    (``corebase.balance.EventType``). CONNECT/DISCONNECT go to a member that both gains
    and loses partitions in a balance round, the ONLY_ forms to one that only gains or
    only loses."""

    CONNECT = 1
    DISCONNECT = 2
    REPORT = 3
    REFRESH = 4
    STOPREBALANCE = 5
    ONLY_CONNECT = 10
    ONLY_DISCONNECT = 20
    UNKNOWN = -1

    @property
    def connects(self) -> bool:
        return self in (EventType.CONNECT, EventType.ONLY_CONNECT)

    @property
    def disconnects(self) -> bool:
        return self in (EventType.DISCONNECT, EventType.ONLY_DISCONNECT)


class EventStatus(enum.IntEnum):
    """``EventProto.status`` (``corebase.balance.EventStatus``): the Master marks an event
    PROCESSING internally (never on the wire); the consumer reports it DONE."""

    TODO = 0
    PROCESSING = 1
    DONE = 2
    UNKNOWN = -1
    FAILED = -2


def accepted(service: int, method: int) -> bool:
    """Whether the Java server accepts ``method`` under ``service`` (it answers ERROR
    otherwise): 1 takes 1-9 and 20-22, 2 takes 11-13 and 15-19, 3 takes 11-14 (the
    methods' rows say so)."""
    m = METHODS.get(method)
    return m is not None and service in m.services


def next_state(state: State, outcome: Outcome | None) -> State:
    """Apply :data:`TRANSITIONS`."""
    if outcome is None:
        return state
    return TRANSITIONS.get((state, outcome), state)


ERRORS: dict[int, ErrorCode] = {e.value: e for e in ErrorCode}
"""``errCode`` values of the responses (``TErrCodeConstants``)."""
