"""Bad bytes at the simulator: mutated frames, truncated frames, garbage, odd field
values. The servers answer as the Java server would or close the connection, and never
fail: no handler exception, and a good request still gets its answer afterwards."""

from __future__ import annotations

import logging
import random
import socket

import pytest

from nsqviz.clients.tubemq import Channel
from nsqviz.servers.tubemq import EmbeddedSim
from nsqviz.tubemq.codec import ClientConnection
from nsqviz.tubemq.protos import MESSAGES


@pytest.fixture(scope="module")
def sim():
    with EmbeddedSim(topics=("demo",)) as running:
        yield running


def _frames() -> list[bytes]:
    codec = ClientConnection()
    send = MESSAGES["SendMessageRequestP2B"](
        clientId="p", topicName="demo", partitionId=1, data=b"payload" * 30, flag=1,
        checkSum=-1, sentAddr=0)
    fetch = MESSAGES["GetMessageRequestC2B"](clientId="c", partitionId=0, groupName="g",
                                            topicName="demo")
    reg = MESSAGES["RegisterRequestP2M"](clientId="p", brokerCheckSum=-1, hostName="h")
    return [codec.request(13, send)[1], codec.request(17, fetch, check=False)[1],
            codec.request(1, reg)[1]]


def _blast(address: str, data: bytes) -> None:
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=2) as s:
        s.sendall(data)
        s.shutdown(socket.SHUT_WR)
        s.settimeout(2)
        try:
            while s.recv(65536):
                pass
        except (TimeoutError, ConnectionError):
            pass


def test_mutated_and_truncated_frames(sim, caplog):
    caplog.set_level(logging.INFO, logger="nsqviz.servers.tubemq.server")
    rnd = random.Random(16)
    frames = _frames()
    targets = [sim.master_address, *sim.broker_addresses]
    for i in range(150):
        data = bytearray(rnd.choice(frames))
        for _ in range(rnd.randint(1, 4)):
            data[rnd.randrange(len(data))] = rnd.randrange(256)
        if i % 5 == 0:
            data = data[: rnd.randrange(1, len(data))]
        if i % 7 == 0:
            data = bytes(rnd.randrange(256) for _ in range(rnd.randint(1, 64)))
        _blast(targets[i % len(targets)], bytes(data))
    failures = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert not failures, failures[0].getMessage()
    channel = Channel(sim.master_address)
    assert channel.call("producerRegisterP2M", {"clientId": "p", "brokerCheckSum": -1,
                                                "hostName": "h"}).ok
    channel.close()


def test_odd_values_are_refused_with_codes(sim):
    broker = Channel(sim.broker_addresses[0])
    odd = {"clientId": "p", "topicName": "demo", "data": b"x", "flag": 0, "checkSum": -1,
           "sentAddr": 0}
    assert broker.call("sendMessageP2B", {**odd, "partitionId": -5}).err_code == 403
    assert broker.call("sendMessageP2B", {**odd, "partitionId": 2**31 - 1}).err_code == 403
    blank = broker.call("sendMessageP2B", {**odd, "clientId": "  ", "partitionId": 0})
    assert blank.err_code == 400
    reg = {"opType": 31, "clientId": "c", "groupName": "g", "topicName": "demo",
           "readStatus": 0}
    assert broker.call("consumerRegisterC2B", {**reg, "partitionId": 99}).err_code == 403
    far = broker.call("consumerRegisterC2B", {**reg, "partitionId": 0, "currOffset": 10**12})
    assert far.ok and far.message.currOffset == far.message.maxOffset  # clamped into range
    broker.close()
