"""String-encoded metadata and message payloads (FACTS.md sections 6 and 7)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nsqviz.tubemq.metadata import (
    MetadataError,
    checksum,
    decode_payload,
    encode_payload,
    format_broker_info,
    format_partition,
    format_subscribe_info,
    format_topic_info,
    parse_broker_info,
    parse_failure_info,
    parse_partition,
    parse_partition_key,
    parse_required_partition,
    parse_subscribe_info,
    parse_topic_condition,
    parse_topic_info,
)
from tests.tubemq._vectors import PAYLOAD_CRC, PAYLOAD_HEX


def test_payload_worked_example():
    data, flag = encode_payload(b"hello", "k=v")
    assert (data.hex(), flag) == (PAYLOAD_HEX, 1)
    assert checksum(data) == PAYLOAD_CRC
    assert decode_payload(data, flag) == {"crc": PAYLOAD_CRC, "attrLen": 3, "attribute": "k=v",
                                          "properties": {"k": "v"}, "body": b"hello"}


def test_payload_quirks_and_refusals():
    assert encode_payload(b"x", "") == (b"x", 1)  # Java: flag 1, no prefix
    assert encode_payload(b"x") == (b"x", 0)
    assert decode_payload(b"body", 0)["body"] == b"body"
    with pytest.raises(MetadataError, match="only 2 bytes"):
        decode_payload(b"ab", 1)
    with pytest.raises(MetadataError, match="does not fit"):
        decode_payload(b"\x00\x00\x00\x09abc", 1)


def test_system_headers_in_the_attribute():
    data, flag = encode_payload(b"b", "$msgType$=t1,$msgTime$=202503041530,color=red")
    props = decode_payload(data, flag)["properties"]
    assert props == {"$msgType$": "t1", "$msgTime$": "202503041530", "color": "red"}


def test_broker_info_with_and_without_port():
    assert parse_broker_info("1:10.0.0.1: ") == {"brokerId": 1, "host": "10.0.0.1",
                                                 "port": 8123, "defaultPort": True}
    assert parse_broker_info("2:10.0.0.5:8200")["port"] == 8200
    with pytest.raises(MetadataError, match="brokerInfo needs 3 parts"):
        parse_broker_info("1:10.0.0.1")


def test_topic_info():
    info = parse_topic_info("orders#1:4:1,2:3:2#2097152")
    assert info["topic"] == "orders" and info["maxMsgSizeInBytes"] == 2097152
    assert info["brokers"][1]["partitionIds"] == [0, 1, 2, 10000, 10001, 10002]
    assert parse_topic_info("orders#1:1:1#")["maxMsgSizeInBytes"] is None
    with pytest.raises(MetadataError, match="partitionNum 'x'"):
        parse_topic_info("orders#1:x:1")


def test_subscribe_partition_failure_and_others():
    sub = parse_subscribe_info("grp_10.0.0.1-1@grp#1:10.0.0.1:8123#orders:0")
    assert sub["consumerId"] == "grp_10.0.0.1-1" and sub["group"] == "grp"
    assert sub["partitionKey"] == "1:orders:0"
    assert parse_failure_info("411:1:10.0.0.1:8123#orders:0")["errCode"] == 411
    assert parse_partition_key("1:orders:0") == {"brokerId": 1, "topic": "orders",
                                                 "partitionId": 0}
    assert parse_topic_condition("orders#typeA,typeB")["filters"] == ["typeA", "typeB"]
    assert parse_required_partition("1:orders:0=100")["partitions"][0]["offset"] == 100


@given(st.integers(1, 10**6), st.sampled_from(["10.0.0.1", "127.0.0.1", "broker-a"]),
       st.sampled_from([8123, 8124, 9000]), st.text("abc_xyz019", min_size=1, max_size=12),
       st.integers(0, 40_000), st.text("abcdefgh0123-._", min_size=1, max_size=20))
def test_formats_read_back(broker_id, host, port, topic, pid, consumer):
    info = parse_broker_info(format_broker_info(broker_id, host, port))
    assert (info["brokerId"], info["host"], info["port"]) == (broker_id, host, port)
    assert info["defaultPort"] == (port == 8123)
    part = format_partition(broker_id, host, port, topic, pid)
    assert parse_partition(part)["partitionKey"] == f"{broker_id}:{topic}:{pid}"
    sub = parse_subscribe_info(format_subscribe_info(consumer, "group1", part))
    assert (sub["consumerId"], sub["group"], sub["port"]) == (consumer, "group1", port)
    ti = parse_topic_info(format_topic_info(topic, [(broker_id, 2, 1), (broker_id + 1, 3, 2)],
                                            1048576))
    assert [b["partitionIds"] for b in ti["brokers"]] == [[0, 1], [0, 1, 2, 10000, 10001, 10002]]
    assert ti["maxMsgSizeInBytes"] == 1048576
