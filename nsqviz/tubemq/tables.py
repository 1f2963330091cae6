"""TubeMQ's tables: services, methods, session states and their transitions, error codes.

Everything else -- the grammar's message choice, the codec's checks, record names, the
views -- reads these tables; nothing re-types them. Facts from FACTS.md sections 2-5
(Apache InLong TubeMQ ``RpcConstants``, ``PbEnDecoder``, ``TErrCodeConstants``).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

__all__ = [
    "DEFAULT_BROKER_PORT",
    "DEFAULT_MASTER_PORT",
    "ERRORS",
    "METHODS",
    "METHODS_BY_NAME",
    "SERVICES",
    "TRANSITIONS",
    "ErrorCode",
    "EventStatus",
    "EventType",
    "META_VALUE_UNDEFINED",
    "Method",
    "Outcome",
    "State",
    "accepted",
    "method_for",
    "next_state",
]

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

SERVICES = {
    1: "MasterService",
    2: "BrokerReadService",
    3: "BrokerWriteService",
    4: "BrokerAdminService",
    5: "MasterAdminService",
}
"""``RequestHeader.serviceType`` values; 4 and 5 are declared but have no methods."""


class State(enum.Enum):
    """Where a client's session with a Master or Broker stands, as both ends see it.

    ``INIT``: nothing registered on this connection yet. ``REGISTERED``: a register
    call (or a broker partition registration) succeeded. ``CLOSED``: a close call
    succeeded; registering again opens a new session.
    """

    INIT = "INIT"
    REGISTERED = "REGISTERED"
    CLOSED = "CLOSED"


class Outcome(enum.Enum):
    """What a method's answer does to the session, the input of :data:`TRANSITIONS`."""

    REGISTERED = "register succeeded"
    CLOSED = "close succeeded"
    NODE_UNKNOWN = "heartbeat answered HB_NO_NODE (411): register again"


@dataclass(frozen=True, slots=True)
class Method:
    """One RPC method: ids, names, messages, and the states it may be called in.

    ``name`` is the Java method name (``PbEnDecoder``), ``const`` the ``RpcConstants``
    name; ``request``/``response`` are message names in the ``.proto`` sources (``None``
    for ids the server accepts but cannot decode: it answers FATAL); ``services`` are
    the service types the Java server accepts the id under; ``kind`` is ``register``,
    ``heartbeat``, ``close`` or ``call`` and decides the method's effect on the session.
    """

    id: int
    const: str
    name: str
    services: tuple[int, ...]
    request: str | None
    response: str | None
    label: str
    kind: str
    states: frozenset[State]


_ALL = frozenset(State)
_LIVE = frozenset({State.REGISTERED})

METHODS: dict[int, Method] = {m.id: m for m in (
    # id, RpcConstants name, Java method name, services, request, response, label, kind, states
    Method(1, "RPC_MSG_MASTER_PRODUCER_REGISTER", "producerRegisterP2M", (1,),
           "RegisterRequestP2M", "RegisterResponseM2P",
           "producer registers with the master", "register", _ALL),
    Method(2, "RPC_MSG_MASTER_PRODUCER_HEARTBEAT", "producerHeartbeatP2M", (1,),
           "HeartRequestP2M", "HeartResponseM2P",
           "producer heartbeat to the master", "heartbeat", _LIVE),
    Method(3, "RPC_MSG_MASTER_PRODUCER_CLOSECLIENT", "producerCloseClientP2M", (1,),
           "CloseRequestP2M", "CloseResponseM2P",
           "producer closes with the master", "close", _LIVE),
    Method(4, "RPC_MSG_MASTER_CONSUMER_REGISTER", "consumerRegisterC2M", (1,),
           "RegisterRequestC2M", "RegisterResponseM2C",
           "consumer registers with the master", "register", _ALL),
    Method(5, "RPC_MSG_MASTER_CONSUMER_HEARTBEAT", "consumerHeartbeatC2M", (1,),
           "HeartRequestC2M", "HeartResponseM2C",
           "consumer heartbeat to the master", "heartbeat", _LIVE),
    Method(6, "RPC_MSG_MASTER_CONSUMER_CLOSECLIENT", "consumerCloseClientC2M", (1,),
           "CloseRequestC2M", "CloseResponseM2C",
           "consumer closes with the master", "close", _LIVE),
    Method(7, "RPC_MSG_MASTER_BROKER_REGISTER", "brokerRegisterB2M", (1,),
           "RegisterRequestB2M", "RegisterResponseM2B",
           "broker registers with the master", "register", _ALL),
    Method(8, "RPC_MSG_MASTER_BROKER_HEARTBEAT", "brokerHeartbeatB2M", (1,),
           "HeartRequestB2M", "HeartResponseM2B",
           "broker heartbeat to the master", "heartbeat", _LIVE),
    Method(9, "RPC_MSG_MASTER_BROKER_CLOSECLIENT", "brokerCloseClientB2M", (1,),
           "CloseRequestB2M", "CloseResponseM2B",
           "broker closes with the master", "close", _LIVE),
    Method(11, "RPC_MSG_BROKER_PRODUCER_REGISTER", "brokerProducerRegister", (2, 3),
           None, None,
           "producer registers with a broker (no decoder: FATAL)", "call", _ALL),
    Method(12, "RPC_MSG_BROKER_PRODUCER_HEARTBEAT", "brokerProducerHeartbeat", (2, 3),
           None, None,
           "producer heartbeat to a broker (no decoder: FATAL)", "call", _ALL),
    Method(13, "RPC_MSG_BROKER_PRODUCER_SENDMESSAGE", "sendMessageP2B", (2, 3),
           "SendMessageRequestP2B", "SendMessageResponseB2P",
           "producer sends a message", "call", _ALL),
    Method(14, "RPC_MSG_BROKER_PRODUCER_CLOSE", "brokerProducerClose", (3,),
           None, None,
           "producer closes with a broker (no decoder: FATAL)", "call", _ALL),
    Method(15, "RPC_MSG_BROKER_CONSUMER_REGISTER", "consumerRegisterC2B", (2,),
           "RegisterRequestC2B", "RegisterResponseB2C",
           "consumer (un)registers a partition", "register", _ALL),
    Method(16, "RPC_MSG_BROKER_CONSUMER_HEARTBEAT", "consumerHeartbeatC2B", (2,),
           "HeartBeatRequestC2B", "HeartBeatResponseB2C",
           "consumer heartbeat to a broker", "heartbeat", _LIVE),
    Method(17, "RPC_MSG_BROKER_CONSUMER_GETMESSAGE", "getMessagesC2B", (2,),
           "GetMessageRequestC2B", "GetMessageResponseB2C",
           "consumer fetches messages", "call", _LIVE),
    Method(18, "RPC_MSG_BROKER_CONSUMER_COMMIT", "consumerCommitC2B", (2,),
           "CommitOffsetRequestC2B", "CommitOffsetResponseB2C",
           "consumer commits its offset", "call", _LIVE),
    Method(19, "RPC_MSG_BROKER_CONSUMER_CLOSE", "brokerConsumerClose", (2,),
           None, None,
           "consumer closes with a broker (no decoder: FATAL)", "call", _ALL),
    Method(20, "RPC_MSG_MASTER_CONSUMER_REGISTER_V2", "consumerRegisterC2MV2", (1,),
           "RegisterRequestC2MV2", "RegisterResponseM2CV2",
           "client-balance consumer registers", "register", _ALL),
    Method(21, "RPC_MSG_MASTER_CONSUMER_HEARTBEAT_V2", "consumerHeartbeatC2MV2", (1,),
           "HeartRequestC2MV2", "HeartResponseM2CV2",
           "client-balance consumer heartbeat", "heartbeat", _LIVE),
    Method(22, "RPC_MSG_MASTER_CONSUMER_GET_PART_META", "consumerGetPartMetaInfoC2M", (1,),
           "GetPartMetaRequestC2M", "GetPartMetaResponseM2C",
           "client-balance consumer asks for partition metadata", "call", _LIVE),
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
MSG_OPTYPE_REGISTER = 31
MSG_OPTYPE_UNREGISTER = 32

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
    otherwise): 1 takes 1-9 and 20-22, 2 takes 11-13 and 15-19, 3 takes 11-14."""
    m = METHODS.get(method)
    return m is not None and service in m.services


def method_for(method: int) -> Method | None:
    """The method with this id, ``None`` for an id TubeMQ does not define."""
    return METHODS.get(method)


def next_state(state: State, outcome: Outcome | None) -> State:
    """Apply :data:`TRANSITIONS`."""
    if outcome is None:
        return state
    return TRANSITIONS.get((state, outcome), state)


@dataclass(frozen=True, slots=True)
class ErrorCode:
    """One ``TErrCodeConstants`` code: number, name and what it means."""

    code: int
    name: str
    meaning: str


ERRORS: dict[int, ErrorCode] = {e.code: e for e in (
    ErrorCode(200, "SUCCESS", "OK"),
    ErrorCode(201, "NOT_READY", "service not ready yet"),
    ErrorCode(301, "MOVED", "requested offset is below the partition's minimum; reset it"),
    ErrorCode(400, "BAD_REQUEST", "malformed or missing parameter"),
    ErrorCode(401, "UNAUTHORIZED", "authentication failed"),
    ErrorCode(402, "CONNECT_RETURN_NULL", "connection returned nothing"),
    ErrorCode(403, "FORBIDDEN", "not allowed (e.g. checksum mismatch on send)"),
    ErrorCode(404, "NOT_FOUND", "nothing found, e.g. no new messages at this offset"),
    ErrorCode(405, "ALL_PARTITION_FROZEN", "all partitions frozen"),
    ErrorCode(406, "NO_PARTITION_ASSIGNED", "no partition assigned to this consumer yet"),
    ErrorCode(407, "ALL_PARTITION_WAITING", "all partitions are waiting"),
    ErrorCode(408, "ALL_PARTITION_INUSE", "every partition is currently in use"),
    ErrorCode(410, "PARTITION_OCCUPIED", "another consumer of the group holds this partition"),
    ErrorCode(411, "HB_NO_NODE", "heartbeat for a node the server does not know: register"),
    ErrorCode(412, "DUPLICATE_PARTITION", "the partition is consumed by another client"),
    ErrorCode(415, "CERTIFICATE_FAILURE", "certificate/authentication failure"),
    ErrorCode(419, "SERVER_RECEIVE_OVERFLOW", "broker could not accept the message"),
    ErrorCode(420, "CLIENT_SHUTDOWN", "client has been shut down"),
    ErrorCode(421, "CLIENT_HIGH_FREQUENCY_REQUEST", "client requests too often"),
    ErrorCode(422, "PARTITION_UNSUBSCRIBABLE", "partition does not accept subscription"),
    ErrorCode(423, "PARTITION_UNPUBLISHABLE", "partition does not accept publishing"),
    ErrorCode(424, "CLIENT_INCONSISTENT_CONSUMETYPE", "group members disagree on consume type"),
    ErrorCode(425, "CLIENT_INCONSISTENT_TOPICSET", "group members disagree on topic set"),
    ErrorCode(426, "CLIENT_INCONSISTENT_FILTERSET", "group members disagree on filters"),
    ErrorCode(427, "CLIENT_INCONSISTENT_SESSIONKEY", "bound session key differs"),
    ErrorCode(428, "CLIENT_INCONSISTENT_SELECTBIG", "bound selectBig differs"),
    ErrorCode(429, "CLIENT_INCONSISTENT_SOURCECOUNT", "bound source count differs"),
    ErrorCode(430, "CLIENT_DUPLICATE_INDEXID", "duplicate client index id"),
    ErrorCode(431, "TOPIC_NOT_DEPLOYED", "topic not deployed"),
    ErrorCode(440, "PARAMETER_MSG_NULL", "message is null"),
    ErrorCode(441, "PARAMETER_MSG_TOPIC_BLANK", "message topic blank"),
    ErrorCode(442, "PARAMETER_MSG_BODY_EMPTY", "message body empty"),
    ErrorCode(443, "PARAMETER_MSG_TOPIC_UNPUBLISHED", "topic not published by this producer"),
    ErrorCode(444, "PARAMETER_MSG_TOPIC_NO_PARTITION", "no partition for the topic"),
    ErrorCode(445, "PARAMETER_MSG_OVER_MAX_LENGTH", "message bigger than the allowed size"),
    ErrorCode(450, "CONSUME_GROUP_FORBIDDEN", "group forbidden to consume"),
    ErrorCode(452, "SERVER_CONSUME_SPEED_LIMIT", "consumption is being throttled (Go: 550)"),
    ErrorCode(455, "CONSUME_CONTENT_FORBIDDEN", "filter content forbidden"),
    ErrorCode(500, "INTERNAL_SERVER_ERROR", "server error"),
    ErrorCode(503, "SERVICE_UNAVAILABLE", "read or write service temporarily unavailable"),
    ErrorCode(510, "INTERNAL_SERVER_ERROR_MSGSET_NULL", "internal error: empty message set"),
    ErrorCode(599, "UNSPECIFIED_ABNORMAL", "unspecified"),
)}
"""``errCode`` values of the responses (``TErrCodeConstants``)."""
