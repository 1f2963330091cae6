"""The Spark pipeline with TubeMQ beside NSQ: TubeMQ rows in the frames table, and the
per-method latency table from request/answer pairs (each answer in the synthetic
capture follows its request by exactly 1 ms)."""

from __future__ import annotations

import pytest

from nsqviz.capture.synth import NsqTalk, pubsub_session, tubemq_producer
from nsqviz.capture.writer import PcapWriter, TcpConversation
from tests.pipeline.conftest import table

pytestmark = pytest.mark.spark

T0 = 1_700_000_000.0


@pytest.fixture(scope="module")
def run_mixed(spark, tmp_path_factory):
    from nsqviz.pipeline.job import run

    root = tmp_path_factory.mktemp("mixed")
    path = root / "mixed.pcap"
    with PcapWriter(str(path)) as w:
        nsq = TcpConversation(w, ("10.0.0.1", 40000), ("10.0.0.9", 4150), mss=1448)
        master = TcpConversation(w, ("10.0.0.1", 40001), ("10.0.0.2", 8715), mss=1448)
        broker = TcpConversation(w, ("10.0.0.1", 40002), ("10.0.0.3", 8123), mss=1448)
        for c in (nsq, master, broker):
            c.open(T0 - 1)
        pubsub_session(NsqTalk(nsq), messages=5)
        tubemq_producer(master, broker, ts=T0 + 10, messages=5)
        for c in (nsq, master, broker):
            c.close(T0 + 20)
    return run(spark, [str(path)], str(root / "out"))


def test_frames_table_holds_tubemq_rows(run_mixed):
    frames = table(run_mixed, "frames")
    tube = frames[(frames.protocol == "tubemq") & frames.kind.isin(["command", "frame"])]
    assert len(tube) == 2 * (3 + 5)
    assert set(tube.rpc_method) == {"producerRegisterP2M", "producerHeartbeatP2M",
                                    "sendMessageP2B", "producerCloseClientP2M"}
    assert (frames[frames.protocol == "nsq"].kind == "command").any()


def test_latency_table_per_method(run_mixed):
    lat = table(run_mixed, "rpc_latency").set_index("method")
    assert lat.loc["sendMessageP2B", "requests"] == 5
    assert lat.loc["sendMessageP2B", "answers"] == 5
    assert (lat.unanswered == 0).all() and (lat.errors == 0).all()
    assert lat.p50_ms.round(3).eq(1.0).all()
    pairs = table(run_mixed, "rpc_pairs")
    assert len(pairs) == 8 and pairs.latency_ms.notna().all()
