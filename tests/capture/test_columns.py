"""The columnar path (:mod:`nsqviz.capture.columns`) gives the frames table the object
path gives (the pipeline's decoding tasks, :func:`nsqviz.pipeline.decode.decode_set`),
connection by connection: on every sample capture, on generated traffic cut, reordered,
repeated and damaged at random, and on a rotated capture set."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nsqviz.capture.columns import ColumnarDecoder, frames_table
from nsqviz.capture.synth import NsqTalk, pubsub_session
from nsqviz.capture.writer import PcapWriter, TcpConversation
from nsqviz.pipeline.decode import decode_set
from nsqviz.pipeline.synth import write_capture_set
from nsqviz.stream.direction import Direction

DATA = Path(__file__).resolve().parents[2] / "data"
SAMPLES = sorted(str(p.relative_to(DATA)) for p in DATA.rglob("*.pcap*"))
_ORDER = [(k, "ascending") for k in ("conn_id", "seq", "kind", "name", "ts")]


def _object_path(files: list[str]) -> pa.Table:
    return pa.Table.from_batches(list(decode_set(files, fields=False)))


def _same_tables(files: list[str]) -> pa.Table:
    """Both paths' tables of ``files``, held equal row by row (in connection order);
    returns the columnar one."""
    want = _object_path(files).sort_by(_ORDER)
    got = frames_table(files).sort_by(_ORDER)
    assert got.schema == want.schema
    assert got.num_rows == want.num_rows
    for name in want.schema.names:
        w, g = want[name].to_pylist(), got[name].to_pylist()
        bad = [i for i, (a, b) in enumerate(zip(w, g, strict=True))
               if a != b and not (a != a and b != b)]  # NaN times of capture warnings
        assert not bad, (name, bad[:3], [w[i] for i in bad[:3]], [g[i] for i in bad[:3]],
                         [want["conn_id"][i].as_py() for i in bad[:3]])
    return got


@pytest.mark.parametrize("name", SAMPLES)
def test_every_sample_capture_gives_the_same_frames_table(name):
    _same_tables([str(DATA / name)])


def test_a_healthy_capture_goes_all_the_way_through_the_columnar_path(monkeypatch):
    """Else every connection handed back would make the equality above trivial."""
    def refuse(self, lane):
        raise AssertionError(f"{lane.state.flow.label} handed back")

    monkeypatch.setattr(ColumnarDecoder, "hand_back", refuse)
    for name in ("guide-pynsq.pcap", "small-messages-pynsq.pcap", "doctor/nsq-backlog.pcap",
                 "deflate-pynsq.pcap", "snappy-pynsq.pcap"):  # (compressed after IDENTIFY)
        table = frames_table([str(DATA / name)])
        assert table.num_rows and "FrameTypeMessage" in table["name"].to_pylist()


def test_a_rotated_capture_set_gives_the_same_frames_table(tmp_path):
    truth = write_capture_set(tmp_path, max_bytes=6000, n_messages=40, seed=3)
    assert len(truth.paths) > 2
    _same_tables(truth.paths)


def _session(compression: str | None, messages: int, batch: int, seed: int) -> NsqTalk:
    talk = NsqTalk(None)
    pubsub_session(talk, messages=messages, body_sizes=(1, 40, 900), batch=batch,
                   compression=compression, seed=seed)
    return talk


@st.composite
def conversations(draw):
    """A generated conversation's writes, cut into segments at random, some pieces
    reordered or sent twice, one piece perhaps lost (a gap) or one command changed (a
    FIN of an id not in flight, a RDY above nsqd's limit, a verb nsqd does not know)."""
    compression = draw(st.sampled_from([None] * 8 + ["snappy", "deflate"]))
    talk = _session(compression, draw(st.integers(0, 30)), draw(st.integers(1, 9)),
                    draw(st.integers(0, 99)))
    writes = list(talk.written.writes)
    damage = draw(st.sampled_from(["none"] * 6 + ["gap", "fin", "rdy", "verb", "cut"]))
    if damage in ("fin", "rdy", "verb"):
        bad = {"fin": b"FIN 00000000deadbeef\n", "rdy": b"RDY 99999\n", "verb": b"NOP2\n"}
        at = draw(st.integers(0, len(writes)))
        writes.insert(at, (Direction.C2S, -1, bad[damage]))
    plan = []
    sent = {Direction.C2S: 0, Direction.S2C: 0}
    for direction, _offset, data in writes:
        start = sent[direction]
        sent[direction] += len(data)
        n = len(data)
        cuts = sorted(draw(st.sets(st.integers(1, max(1, n - 1)), max_size=min(4, n - 1))))
        bounds = [0, *cuts, n]
        pieces = [(start + a, data[a:b]) for a, b in zip(bounds, bounds[1:], strict=False)
                  if b > a]
        if draw(st.integers(0, 9)) == 0:
            pieces = [pieces[i] for i in draw(st.permutations(range(len(pieces))))]
        if draw(st.integers(0, 9)) == 0:
            pieces.append(draw(st.sampled_from(pieces)))  # a retransmission
        plan.append((direction, pieces))
    if damage == "gap" and plan:
        direction, pieces = plan[draw(st.integers(0, len(plan) - 1))]
        del pieces[draw(st.integers(0, len(pieces) - 1))]
    if damage == "cut":  # the capture stops inside the last write
        direction, pieces = plan[-1]
        pieces[-1] = (pieces[-1][0], pieces[-1][1][:-1])
    return plan, damage != "cut"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(conversations(), st.integers(1, 3))
def test_generated_traffic_gives_the_same_frames_table(tmp_path_factory, case, copies):
    plan, closed = case
    path = tmp_path_factory.mktemp("columns") / "generated.pcap"
    with PcapWriter(path) as w:
        ts = 1_700_000_000.0
        for k in range(copies):
            conv = TcpConversation(w, ("10.1.1.1", 33000 + k), ("10.1.1.2", 4150))
            conv.open(ts)
            for direction, pieces in plan:
                for off, chunk in pieces:
                    ts += 0.0001
                    conv.segment(direction, off, chunk, ts)
                conv.sent[direction] = max(conv.sent[direction],
                                           max((o + len(c) for o, c in pieces), default=0))
            if closed:
                conv.close(ts)
    _same_tables([str(path)])
