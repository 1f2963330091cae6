"""Each analysis against the ground truth of the simulated traffic it was run on."""

from __future__ import annotations

import math
from collections import Counter

import pytest

from .conftest import table

pytestmark = [pytest.mark.spark]

US = 2e-6  # pcap timestamps are microseconds


def _label(conn_id: str) -> str:
    return conn_id.split("@")[0]


def test_messages(run_one, captures):
    truth = captures["truth"]
    msgs = table(run_one, "messages")
    assert len(msgs) == len(truth.messages)
    outcomes = Counter()
    for r in msgs.itertuples():
        t = truth.messages[(r.msg_id, r.channel)]
        assert r.topic == t.topic
        assert r.publish_cmd == t.publish_cmd
        assert abs(r.publish_ts - t.publish_ts) < US
        assert abs(r.created_ts - t.created_ts) < US
        got = [
            (_label(d["conn_id"]), d["attempts"], d["outcome"], d["touches"],
             None if d["req_delay_ms"] is None or math.isnan(d["req_delay_ms"])
             else int(d["req_delay_ms"]))
            for d in r.deliveries
        ]
        want = [(d.conn, d.attempts, d.outcome, d.touches, d.req_delay_ms) for d in t.deliveries]
        assert got == want, (r.msg_id, r.channel)
        for d, w in zip(r.deliveries, t.deliveries, strict=True):
            assert abs(d["ts"] - w.ts) < US
            assert abs(d["outcome_ts"] - w.outcome_ts) < US
        last = t.deliveries[-1]
        assert r.outcome == last.outcome == "FIN"
        assert abs(r.end_to_end_latency_s - (last.outcome_ts - t.publish_ts)) < 2 * US
        assert abs(r.processing_latency_s - (last.outcome_ts - last.ts)) < 2 * US
        outcomes[tuple(w[2] for w in want)] += 1
    # The scenario really exercised every outcome.
    seen = {o for key in outcomes for o in key}
    assert {"FIN", "REQ", "timeout"} <= seen
    assert msgs.touches.sum() == sum(
        d.touches for m in truth.messages.values() for d in m.deliveries
    ) > 0
    assert set(msgs.publish_cmd) == {"PUB", "MPUB", "DPUB"}


def test_connections(run_one, captures):
    truth = captures["truth"]
    conns = table(run_one, "connections")
    assert len(conns) == len(truth.connections)
    for r in conns.itertuples():
        t = truth.connections[r.flow]
        assert r.client_id == t.identify["client_id"]
        assert r.hostname == t.identify["hostname"]
        assert r.user_agent == t.identify["user_agent"]
        assert r.role == t.role
        assert (r.topic, r.channel) == (t.topic, t.channel)
        assert (r.frames_c2s, r.frames_s2c) == (t.frames["c2s"], t.frames["s2c"])
        assert list(r.error_codes) == t.errors
        assert r.errors == len(t.errors)
        assert abs(r.start_ts - t.start_ts) < US
        assert abs(r.end_ts - t.end_ts) < US
        assert r.ended_by == "fin"
        assert r.bytes_c2s > 0 and r.bytes_s2c > 0
        if t.role == "consumer":
            assert r.negotiated.startswith('{"max_rdy_count"')
            assert r.last_rdy == t.rdy
        assert r.msg_timeout_ms == t.identify.get("msg_timeout", 60000)


def test_heartbeats(run_one, captures):
    truth = captures["truth"]
    conns = table(run_one, "connections").set_index("flow")
    beats = table(run_one, "heartbeats")
    for label, t in truth.connections.items():
        r = conns.loc[label]
        assert r.heartbeats == t.heartbeats, label
        assert r.missed_heartbeats == t.missed_heartbeats, label
        assert bool(r.closed_for_missed_heartbeats) == t.closed_for_missed_heartbeats, label
    answered = beats[beats.answered]
    assert len(answered) > 0
    assert ((answered.nop_response_s - 0.0007).abs() < US).all()
    assert ((beats.interval_s.dropna() - 1.0).abs() < US).all()
    assert beats.closed_after.sum() == 1


def test_flow_control_and_starvation(run_one, captures):
    truth = captures["truth"]
    fc = table(run_one, "flow_control")
    msgs = fc[fc.event == "MSG"]
    starved = Counter(_label(c) for c in msgs[msgs.starved].conn_id)
    want = Counter({k: v.starved_deliveries for k, v in truth.connections.items()
                    if v.starved_deliveries})
    assert starved == want
    assert sum(want.values()) > 0
    # In-flight never goes negative and never above the RDY the client set.
    assert (fc.in_flight >= 0).all()
    assert (fc.in_flight <= fc.rdy.fillna(0)).all()
    # Every delivery was ended: each connection is back to zero in flight.
    last = fc.sort_values("ts").groupby("conn_id").in_flight.last()
    assert (last == 0).all()


def _expected_sticky(truth):
    ppf, fpp = Counter(), Counter()
    for _label, direction, lengths, mss in truth.sends:
        total = sum(lengths)
        n_packets = -(-total // mss)
        starts = [sum(lengths[:i]) for i in range(len(lengths))]
        per_packet = [0] * n_packets
        for s, n in zip(starts, lengths, strict=True):
            first, last = s // mss, (s + n - 1) // mss
            ppf[(direction, last - first + 1)] += 1
            for p in range(first, last + 1):
                per_packet[p] += 1
        for k in per_packet:
            fpp[(direction, k)] += 1
    return ppf, fpp


def test_sticky_packets(run_one, captures):
    sticky = table(run_one, "sticky_packets")
    ppf, fpp = _expected_sticky(captures["truth"])
    got_ppf = {(r.dir, r.n): r["count"] for _, r in
               sticky[sticky.measure == "packets_per_frame"].iterrows()}
    got_fpp = {(r.dir, r.n): r["count"] for _, r in
               sticky[sticky.measure == "frames_per_packet"].iterrows()}
    assert got_ppf == dict(ppf)
    assert got_fpp == dict(fpp)
    # Both sticky cases are present: several frames in a packet, a frame over packets.
    assert any(n > 1 for (_d, n) in fpp) and any(n > 1 for (_d, n) in ppf)


def test_rotated_analyses_equal_single_file(run_one, run_rotated):
    for name in ("messages", "connections", "heartbeats", "flow_control", "sticky_packets"):
        a, b = table(run_one, name), table(run_rotated, name)
        # Packet numbers name the file past the first (packet_id): not comparable.
        key = [c for c in a.columns if "packet" not in c
               and a[c].map(lambda v: isinstance(v, str | int | float)).all()]
        a = a.sort_values(key).reset_index(drop=True)[key]
        b = b.sort_values(key).reset_index(drop=True)[key]
        assert a.equals(b), name


def test_real_captures_of_compressed_connections(spark, tmp_path):
    """tcpdump captures of pynsq with snappy and deflate: decoded through the switch."""
    import pathlib

    from nsqviz.pipeline.job import run

    data = pathlib.Path(__file__).resolve().parents[2] / "data"
    files = [data / "snappy-pynsq.pcap", data / "deflate-pynsq.pcap"]
    if not all(f.exists() for f in files):
        pytest.skip("the sample captures are not in data/")
    result = run(spark, [str(f) for f in files], str(tmp_path / "out"))
    conns = table(result, "connections")
    consumers = conns[conns.role == "consumer"].sort_values("compression")
    assert list(consumers.compression) == ["deflate", "snappy"]
    assert (conns.user_agent.str.startswith("pynsq/")).all()
    frames = table(result, "frames")
    # After the switch, compressed frames still decode to messages and FINs.
    assert (frames.name == "FrameTypeMessage").sum() > 0
    assert (frames.name == "FIN").sum() > 0
