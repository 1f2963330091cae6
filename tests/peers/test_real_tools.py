"""The NSQ project's own tools against ``nsqviz broker``: what goes in comes out.

``to_nsq`` and ``nsq_tail`` are go-nsq 1.1.0 programs (IDENTIFY, PUB, SUB, RDY, FIN as a
real client does them); ``bench_writer`` and ``bench_reader`` are the NSQ repository's
load tools (MPUB batches, a high RDY). They are found by :mod:`nsqviz.servers.peers`; a test
skips with the reason when one is missing.
"""

from __future__ import annotations

import json
import re
import subprocess
import urllib.request

import pytest

from nsqviz.servers.peers import NsqdProcess
from tests.conftest import peer


@pytest.fixture(scope="module")
def ours(tmp_path_factory):
    """``nsqviz broker`` as a process, as a user would run it."""
    with NsqdProcess.nsqviz(data_path=str(tmp_path_factory.mktemp("ours"))) as server:
        yield server


def _post(server, path: str) -> None:
    request = urllib.request.Request(f"http://{server.http_address}{path}", data=b"")
    urllib.request.urlopen(request, timeout=10).read()


def _channel(server, topic: str, channel: str) -> dict:
    url = f"http://{server.http_address}/stats?format=json&topic={topic}&channel={channel}"
    with urllib.request.urlopen(url, timeout=10) as response:
        (doc,) = json.loads(response.read())["topics"]
    return {"topic": doc, "channel": doc["channels"][0]}


def test_to_nsq_then_nsq_tail_byte_for_byte(ours):
    to_nsq, nsq_tail = peer("to_nsq"), peer("nsq_tail")
    lines = [b"plain", b"with spaces and\ttabs", "粘包 unicode".encode(), b"x" * 60000,
             b"\x00\x01binary\xff", *(b"msg-%d" % i for i in range(200))]
    subprocess.run([to_nsq, f"--nsqd-tcp-address={ours.tcp_address}", "--topic=tools"],
                   input=b"\n".join(lines) + b"\n", check=True, timeout=60,
                   capture_output=True)
    tail = subprocess.run(
        [nsq_tail, f"--nsqd-tcp-address={ours.tcp_address}", "--topic=tools",
         "--channel=tail", f"-n={len(lines)}"],
        check=True, timeout=60, capture_output=True,
    )
    assert tail.stdout == b"".join(line + b"\n" for line in lines)
    stats = _channel(ours, "tools", "tail")
    assert stats["topic"]["message_count"] == len(lines)
    # nsq_tail -n exits inside its handler for the last message, before FINing it (and
    # before FINing any other it had already printed but not yet finished)
    assert stats["channel"]["depth"] == 0 and stats["channel"]["in_flight_count"] >= 1


def _ops(output: str) -> float:
    match = re.search(r"([\d.]+) ?ops/s", output)
    assert match, output
    return float(match.group(1))


def test_bench_writer_then_bench_reader_count_for_count(ours):
    writer, reader, nsq_tail = peer("bench_writer"), peer("bench_reader"), peer("nsq_tail")
    topic = "bench"
    _post(ours, f"/topic/create?topic={topic}")
    for channel in ("ch", "tail"):  # both exist before the first message
        _post(ours, f"/channel/create?topic={topic}&channel={channel}")
    out = subprocess.run(
        [writer, f"--nsqd-tcp-address={ours.tcp_address}", f"--topic={topic}", "--size=200",
         "--batch-size=200", "--runfor=1s"],
        check=True, timeout=60, capture_output=True, text=True,
    )
    assert _ops(out.stdout + out.stderr) > 0
    written = _channel(ours, topic, "ch")["topic"]["message_count"]
    assert written > 0 and written % 200 == 0  # whole MPUB batches
    # bench_reader reads for --runfor and stops: run it until the channel is drained
    runs = 0
    for _ in range(8):
        runs += 1
        subprocess.run(
            [reader, f"--nsqd-tcp-address={ours.tcp_address}", f"--topic={topic}",
             "--channel=ch", "--size=200", "--rdy=2500", "--runfor=3s"],
            check=True, timeout=60, capture_output=True,
        )
        ch = _channel(ours, topic, "ch")["channel"]
        if ch["depth"] == 0:
            break
    # every message reached the channel once and went out: each bench_reader stops after
    # --runfor, leaving at most its RDY window in flight unFINed (as it would on nsqd),
    # there until msg_timeout -- a busy machine needs more than one run to drain
    assert ch["message_count"] == written
    assert ch["depth"] == 0 and ch["in_flight_count"] <= 2500 * runs
    assert (ch["requeue_count"], ch["timeout_count"]) == (0, 0)
    # the bodies themselves: bench_writer sends 200 zero bytes, the other channel has them
    tail = subprocess.run(
        [nsq_tail, f"--nsqd-tcp-address={ours.tcp_address}", f"--topic={topic}",
         "--channel=tail", "-n=3"],
        check=True, timeout=60, capture_output=True,
    )
    assert tail.stdout == (b"\0" * 200 + b"\n") * 3
