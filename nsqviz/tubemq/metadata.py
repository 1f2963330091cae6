"""TubeMQ's string-encoded metadata and message payloads, decoded into named fields.

The protobuf messages carry cluster metadata as text (``corebase/cluster``) and message
data as bytes with an optional attribute prefix (``corebase/Message``). The formats, with the
separators of ``TokenConstants`` (``#`` segment, ``,`` array, ``:`` attribute,
``@`` group, ``=`` key/value):

* brokerInfo ``brokerId:host:port`` -- or ``brokerId:host: `` (a space) for the default
  port 8123;
* topicInfo ``topic#brokerId:partitionNum:storeNum[,...]#maxMsgSizeInBytes`` (the last
  segment may be empty);
* subscribeInfo ``consumerId@group#brokerId:host:port#topic:partitionId``;
* partition full string ``brokerId:host:port#topic:partitionId``, partition key
  ``brokerId:topic:partitionId``, failureInfo ``errCode:`` + a partition full string;
* topicCondition ``topic#filter1,filter2``; requiredPartition
  ``partitionKey=offset[,...]``;
* payload: ``[int32 BE attrLen][attribute][body]`` when flag bit 0 is set, else the
  body; attribute ``k=v[,k=v...]``; checkSum = CRC-32/IEEE of the whole data & 0x7FFFFFFF.

Each ``parse_*`` returns a dict of named fields, or raises :class:`MetadataError`
naming the part that does not fit; each ``format_*`` writes the string as the servers
and clients do (what a ``parse_*`` reads back). :data:`STRING_FIELDS` says which
protobuf field holds which format.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from typing import Any

from nsqviz.tubemq.tables import DEFAULT_BROKER_PORT

__all__ = [
    "STRING_FIELDS",
    "MetadataError",
    "checksum",
    "decode_payload",
    "encode_payload",
    "format_broker_info",
    "format_partition",
    "format_partition_key",
    "format_subscribe_info",
    "format_topic_info",
    "parse_attribute",
    "parse_broker_info",
    "parse_failure_info",
    "parse_partition",
    "parse_partition_key",
    "parse_required_partition",
    "parse_subscribe_info",
    "parse_topic_condition",
    "parse_topic_info",
    "partition_ids",
]

STORE_BASE = 10000
"""``META_STORE_INS_BASE``: partition id = storeId * 10000 + partition index."""

FLAG_HAS_ATTRIBUTE = 0x1
"""Bit 0 of a message's flag: the payload starts with an attribute prefix."""


class MetadataError(ValueError):
    """A metadata string or payload that does not fit its format."""


def _int(text: str, what: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise MetadataError(f"{what} {text!r} is not a number") from None


def _split(text: str, sep: str, count: int, what: str) -> list[str]:
    parts = text.split(sep)
    if len(parts) != count:
        raise MetadataError(f"{what} needs {count} parts separated by {sep!r}, got {text!r}")
    return parts


def parse_broker_info(text: str) -> dict[str, Any]:
    """``brokerId:host:port``; a blank port (``"1:10.0.0.1: "``) is the default 8123."""
    broker_id, host, port = _split(text, ":", 3, "brokerInfo")
    blank = not port.strip()
    return {
        "brokerId": _int(broker_id, "brokerId"),
        "host": host,
        "port": DEFAULT_BROKER_PORT if blank else _int(port, "port"),
        "defaultPort": blank,
    }


def partition_ids(partition_num: int, store_num: int) -> list[int]:
    """The partition ids a topicInfo entry stands for: storeId * 10000 + index."""
    return [s * STORE_BASE + i for s in range(store_num) for i in range(partition_num)]


def parse_topic_info(text: str) -> dict[str, Any]:
    """``topic#brokerId:partitionNum:storeNum[,...]#maxMsgSizeInBytes``."""
    segments = text.strip().split("#")
    if len(segments) not in (2, 3):
        raise MetadataError(f"topicInfo needs 2 or 3 segments separated by '#', got {text!r}")
    brokers = []
    for entry in segments[1].split(","):
        broker_id, part_num, store_num = _split(entry, ":", 3, "topicInfo broker entry")
        parts, stores = _int(part_num, "partitionNum"), _int(store_num, "storeNum")
        brokers.append({
            "brokerId": _int(broker_id, "brokerId"),
            "partitionNum": parts,
            "storeNum": stores,
            "partitionIds": partition_ids(parts, stores),
        })
    max_size = segments[2] if len(segments) == 3 else ""
    return {
        "topic": segments[0],
        "brokers": brokers,
        "maxMsgSizeInBytes": _int(max_size, "maxMsgSizeInBytes") if max_size else None,
    }


def parse_partition(text: str) -> dict[str, Any]:
    """A partition's full string ``brokerId:host:port#topic:partitionId``."""
    broker, topic_part = _split(text, "#", 2, "partition")
    topic, pid = topic_part.rsplit(":", 1) if ":" in topic_part else (topic_part, "")
    info = parse_broker_info(broker)
    pid_n = _int(pid, "partitionId")
    return {
        "brokerId": info["brokerId"],
        "host": info["host"],
        "port": info["port"],
        "topic": topic,
        "partitionId": pid_n,
        "partitionKey": format_partition_key(info["brokerId"], topic, pid_n),
    }


def parse_partition_key(text: str) -> dict[str, Any]:
    """``brokerId:topic:partitionId``."""
    broker_id, topic, pid = _split(text, ":", 3, "partition key")
    return {"brokerId": _int(broker_id, "brokerId"), "topic": topic,
            "partitionId": _int(pid, "partitionId")}


def parse_subscribe_info(text: str) -> dict[str, Any]:
    """``consumerId@group#brokerId:host:port#topic:partitionId``."""
    consumer, _, rest = text.partition("#")
    if "@" not in consumer or not rest:
        raise MetadataError(f"subscribeInfo needs consumerId@group#partition, got {text!r}")
    consumer_id, group = consumer.rsplit("@", 1)
    return {"consumerId": consumer_id, "group": group, **parse_partition(rest)}


def parse_failure_info(text: str) -> dict[str, Any]:
    """``errCode:brokerId:host:port#topic:partitionId``."""
    code, _, rest = text.partition(":")
    return {"errCode": _int(code, "errCode"), **parse_partition(rest)}


def parse_topic_condition(text: str) -> dict[str, Any]:
    """``topic#filter1,filter2``."""
    topic, filters = _split(text, "#", 2, "topicCondition")
    return {"topic": topic, "filters": [f for f in filters.split(",") if f]}


def parse_required_partition(text: str) -> dict[str, Any]:
    """``partitionKey=offset[,partitionKey=offset...]``."""
    out = []
    for entry in text.split(","):
        key, offset = _split(entry, "=", 2, "requiredPartition entry")
        out.append({**parse_partition_key(key), "offset": _int(offset, "offset")})
    return {"partitions": out}


def parse_attribute(text: str) -> dict[str, str]:
    """``k=v[,k=v...]``; the system headers ``$msgType$`` and ``$msgTime$`` come first."""
    out: dict[str, str] = {}
    for pair in text.split(","):
        if not pair:
            continue
        key, sep, value = pair.partition("=")
        if not sep:
            raise MetadataError(f"attribute pair {pair!r} has no '='")
        out[key] = value
    return out


def format_broker_info(broker_id: int, host: str, port: int) -> str:
    """``brokerId:host:port`` as the Master writes brokerInfos: a single space for the
    default port (``BrokerConfEntity.getSimpleBrokerInfo``)."""
    return f"{broker_id}:{host}:{' ' if port == DEFAULT_BROKER_PORT else port}"


def format_topic_info(topic: str, brokers: list[tuple[int, int, int]],
                      max_msg_size: int | None) -> str:
    """``topic#brokerId:partitionNum:storeNum[,...]#maxMsgSizeInBytes`` from
    ``(brokerId, partitionNum, storeNum)`` entries (``BrokerTopicInfoView``)."""
    entries = ",".join(f"{b}:{p}:{s}" for b, p, s in brokers)
    return f"{topic}#{entries}#{'' if max_msg_size is None else max_msg_size}"


def format_partition(broker_id: int, host: str, port: int, topic: str,
                     partition_id: int) -> str:
    """A partition's full string ``brokerId:host:port#topic:partitionId``
    (``Partition.toString``: the port always written)."""
    return f"{broker_id}:{host}:{port}#{topic}:{partition_id}"


def format_partition_key(broker_id: int, topic: str, partition_id: int) -> str:
    """A partition's key ``brokerId:topic:partitionId`` (``Partition.getPartitionKey``)."""
    return f"{broker_id}:{topic}:{partition_id}"


def format_subscribe_info(consumer_id: str, group: str, partition: str) -> str:
    """``consumerId@group#`` + a partition's full string."""
    return f"{consumer_id}@{group}#{partition}"


def checksum(data: bytes) -> int:
    """CRC-32/IEEE (``java.util.zip.CRC32``) of ``data`` masked with 0x7FFFFFFF."""
    return zlib.crc32(data) & 0x7FFFFFFF


def encode_payload(body: bytes, attribute: str | None = None) -> tuple[bytes, int]:
    """``(data, flag)`` as the Java producer sends them: an attribute prefix when the
    attribute is not blank; flag bit 0 whenever the attribute is not ``None`` (so ``""``
    gives flag 1 and no prefix -- the Java quirk)."""
    flag = 0 if attribute is None else FLAG_HAS_ATTRIBUTE
    if not attribute or not attribute.strip():
        return body, flag
    attr = attribute.encode("utf-8")
    return len(attr).to_bytes(4, "big") + attr + body, flag


def decode_payload(data: bytes, flag: int) -> dict[str, Any]:
    """A message's data as the consumer decodes it: attribute (and its pairs) when flag
    bit 0 is set and a prefix fits, then the body; plus the CRC."""
    out: dict[str, Any] = {"crc": checksum(data)}
    if flag & FLAG_HAS_ATTRIBUTE:
        if len(data) < 4:
            raise MetadataError(f"flag bit 0 is set but the data has only {len(data)} bytes")
        attr_len = int.from_bytes(data[:4], "big", signed=True)
        if not 0 <= attr_len <= len(data) - 4:
            raise MetadataError(f"attribute length {attr_len} does not fit the "
                                f"{len(data) - 4} bytes after it")
        try:
            attribute = data[4 : 4 + attr_len].decode("utf-8")
        except UnicodeDecodeError as exc:
            raise MetadataError(f"attribute is not UTF-8: {exc.reason}") from None
        out["attrLen"] = attr_len
        out["attribute"] = attribute
        out["properties"] = parse_attribute(attribute)
        data = data[4 + attr_len :]
    out["body"] = data
    return out


STRING_FIELDS: dict[str, Callable[[str], dict[str, Any]]] = {
    "brokerInfos": parse_broker_info,
    "brokerConfigList": parse_broker_info,
    "topicInfos": parse_topic_info,
    "subscribeInfo": parse_subscribe_info,
    "partitionInfo": parse_partition,
    "failureInfo": parse_failure_info,
    "topicCondition": parse_topic_condition,
    "requiredPartition": parse_required_partition,
}
"""Protobuf string fields (by name, the same in every message) and their format."""
