"""The real Go TubeMQ producer and consumer (Apache InLong ``tubemq-client-go``) through
the simulator: every message acknowledged, consumed and committed, also by two
consumers of one group sharing the partitions, and a standby Master skipped.

The programs are found like the NSQ ones (``$TUBEMQ_PRODUCER``/``$TUBEMQ_CONSUMER``,
PATH, ``../shared/peers/``); the tests skip, saying why, when they are absent. The Go
producer builds ``sentAddr`` from a non-loopback IPv4 address of the machine, so its
tests also skip when there is none (the simulator itself stays on 127.0.0.1).
"""

from __future__ import annotations

import fcntl
import re
import socket
import struct
import subprocess
import time

import pytest

from nsqviz.servers.tubemq import EmbeddedSim
from tests.conftest import peer

pytestmark = pytest.mark.interop

FAST = "heartbeatInterval=1000"  # the clients' first heartbeat 0.5 s after register
MSG = re.compile(r"^msg topic=(\S+) partition=(\d+) key=(\S+) .* body=(\S*)$", re.M)
ACK = re.compile(r"^ack seq=(\d+) topic=\S+ ok=(\w+) code=(\d+)", re.M)
COMMIT = re.compile(r"^commit key=(\S+) count=(\d+) ok=(\w+)", re.M)


def non_loopback_ipv4() -> str | None:
    """An IPv4 address of an interface other than loopback (what the Go client needs)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for _, name in socket.if_nameindex():
            try:
                packed = fcntl.ioctl(s.fileno(), 0x8915,  # SIOCGIFADDR
                                     struct.pack("256s", name.encode()[:15]))
            except OSError:
                continue
            address = socket.inet_ntoa(packed[20:24])
            if not address.startswith("127."):
                return address
    return None


@pytest.fixture(scope="module")
def producer_bin():
    path = peer("tubemq-producer")
    if non_loopback_ipv4() is None:
        pytest.skip("the Go TubeMQ producer needs a non-loopback IPv4 interface "
                    "(it builds sentAddr from one); this machine has none")
    return path


@pytest.fixture(scope="module")
def consumer_bin():
    return peer("tubemq-consumer")


@pytest.fixture
def sim(tmp_path):
    with EmbeddedSim(topics=("demo",), data_path=tmp_path / "sim") as running:
        yield running


def produce(binary, master: str, n: int, size: int = 64, prefix: str = "msg") -> list[str]:
    out = subprocess.run([str(binary), "-master", master, "-topic", "demo", "-n", str(n),
                          "-size", str(size), "-prefix", prefix, "-opts", FAST],
                         capture_output=True, text=True, timeout=60)
    acks = ACK.findall(out.stdout)
    assert out.returncode == 0, out.stderr[-2000:]
    assert len(acks) == n and all(ok == "true" and code == "200" for _, ok, code in acks), \
        out.stdout[-2000:]
    return [f"{prefix}-{i:06d}-" for i in range(1, n + 1)]


def consume(binary, master: str, group: str, n: int, timeout: str = "30s", *extra: str):
    return subprocess.Popen([str(binary), "-master", master, "-topic", "demo", "-group", group,
                             "-n", str(n), "-timeout", timeout, "-opts", FAST, *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(proc) -> tuple[list[tuple[str, str]], list[tuple[str, str, str]], str]:
    out, err = proc.communicate(timeout=90)
    return ([(key, body) for _, _, key, body in MSG.findall(out)], COMMIT.findall(out), err)


def test_go_producer_then_consumer_nothing_lost(sim, producer_bin, consumer_bin):
    prefixes = produce(producer_bin, sim.master_address, 30)
    got, commits, err = finish(consume(consumer_bin, sim.master_address, "g1", 30))
    bodies = sorted(body[:11] for _, body in got)
    assert bodies == prefixes, err[-2000:]
    assert commits and all(ok == "true" for *_, ok in commits)
    assert sum(int(count) for _, count, _ in commits) == 30
    # the group's committed offsets account for every message (28-byte index units)
    committed = sim.call(lambda: sum(o.offset for b in sim.simulation.brokers
                                     for (g, _, _), o in b.store.offsets.items() if g == "g1"))
    assert committed == 30 * 28


def test_go_large_message_spans_blocks(sim, producer_bin, consumer_bin):
    produce(producer_bin, sim.master_address, 2, size=20000, prefix="big")
    got, _, err = finish(consume(consumer_bin, sim.master_address, "g1", 2))
    assert sorted(len(body) for _, body in got) == [20000, 20000], err[-2000:]


def _held(sim) -> dict[str, list[str]]:
    return sim.call(lambda: sim.simulation.master.assignment().get("g2", {}))


def test_two_go_consumers_share_the_partitions(sim, producer_bin, consumer_bin):
    a = consume(consumer_bin, sim.master_address, "g2", 1000, "12s")
    deadline = time.monotonic() + 15
    while sum(map(len, _held(sim).values())) < 4 and time.monotonic() < deadline:
        time.sleep(0.2)
    b = consume(consumer_bin, sim.master_address, "g2", 1000, "10s")
    while time.monotonic() < deadline:  # B joins: A gives up two partitions, B takes them
        held = _held(sim)
        if len(held) == 2 and all(len(v) == 2 for v in held.values()):
            break
        time.sleep(0.2)
    held = _held(sim)
    assert sorted(len(v) for v in held.values()) == [2, 2], held
    assert sorted(p for v in held.values() for p in v) == [
        "1:demo:0", "1:demo:1", "2:demo:0", "2:demo:1"]
    prefixes = produce(producer_bin, sim.master_address, 40)
    got_a, _, err_a = finish(a)
    got_b, _, err_b = finish(b)
    assert got_a and got_b, (err_a[-1500:], err_b[-1500:])
    assert sorted(body[:11] for _, body in got_a + got_b) == prefixes  # each once
    assert not {k for k, _ in got_a} & {k for k, _ in got_b}  # no partition read by both
    kinds = sim.call(lambda: [(type(e).__name__, getattr(e, "op_name", ""))
                              for e in sim.simulation.master.history
                              if type(e).__name__ == "RebalanceQueued"])
    assert [k for _, k in kinds[:3]] == ["ONLY_CONNECT", "ONLY_DISCONNECT", "ONLY_CONNECT"]


def test_go_producer_skips_a_standby_master(tmp_path, producer_bin):
    with EmbeddedSim(standby=True) as standby, EmbeddedSim(topics=("demo",)) as active:
        produce(producer_bin, f"{standby.master_address},{active.master_address}", 3)
