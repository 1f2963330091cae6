"""The Python side of the frames stages, without Spark: 4-tuple reuse, idle split, and the
two stages together giving what ``nsqviz decode`` gives."""

from __future__ import annotations

import os

from nsqviz.pipeline.decode import continue_connections, decode_file, decode_set
from nsqviz.pipeline.synth import RotatingPcapWriter, simulate


def test_reused_four_tuples_are_separate_connections(tmp_path):
    """The same client ports an hour later (new SYN after FIN): new connections."""
    with RotatingPcapWriter(tmp_path / "cap.pcap", 50_000) as w:
        first = simulate(w, seed=1, n_messages=20, t0=1_700_000_000.0)
        second = simulate(w, seed=2, n_messages=20, t0=1_700_003_600.0)
    assert set(first.connections) == set(second.connections)
    rows = _rows(w.paths)
    conns = {r["conn_id"] for r in rows}
    assert len(conns) == 2 * len(first.connections)
    starts = [r for r in rows if r["name"] == "FlowStart"]
    assert len(starts) == len(conns)
    frames = [r for r in rows if r["kind"] in ("command", "frame")]
    assert len(frames) == first.frames + second.frames
    # Packet numbers are the files' own, and each names the file it is in.
    for r in frames:
        assert len(r["packets"]) == len(r["packet_files"]) >= 1
        assert all(f in w.paths for f in r["packet_files"])


def test_silence_longer_than_idle_split_starts_a_new_connection(tmp_path):
    """Without a SYN to go by, a long silence on a 4-tuple still separates connections."""
    from nsqviz.capture.files import Record, read_capture
    from nsqviz.capture.layers import SYN, decode_record
    from nsqviz.capture.writer import PcapWriter

    with RotatingPcapWriter(tmp_path / "sim.pcap", 10**9) as w:
        simulate(w, seed=1, n_messages=10, t0=1_700_000_000.0)
        simulate(w, seed=1, n_messages=10, t0=1_700_001_000.0)
    records = [r for r in read_capture(w.paths[0]) if isinstance(r, Record)]
    no_syn = [r for r in records if not decode_record(r).flags & SYN]
    assert len(no_syn) < len(records)
    files = [str(tmp_path / "cap.pcap"), str(tmp_path / "cap.pcap1")]
    half = len(no_syn) * 3 // 4  # the second session's connections cross into file 1
    for path, part in ((files[0], no_syn[:half]), (files[1], no_syn[half:])):
        with PcapWriter(path) as out:
            for r in part:
                out.write(r.ts, r.data)

    def conns(idle_split):
        return {r["conn_id"] for r in _rows(files, idle_split=idle_split)}

    assert len(conns(60.0)) == 10
    assert len(conns(1e9)) == 5  # the second session is taken as the first one going on
    for idle in (60.0, 1e9):
        assert _with_flows(_rows(files, idle_split=idle)) == _decoded_with_flows(
            files, idle_split=idle)


def test_fields_json_is_json_dumps():
    import json

    from nsqviz.records import fields_json

    samples = [
        {},
        {"id": "30303030", "body": "00ff", "topic": "a.b-c#ephemeral", "timestamp": 17, "n": -3},
        {"data": "6f6b", "code": "E_INVALID", "text": 'quote " and \\ and \n and é', "fatal": True},
        {"data": {"client_id": "x", "feature_negotiation": False, "sample_rate": 0}},
        {"bodies": ["00", "01"], "offset": None, "expected": 1.5},
    ]
    for fields in samples:
        assert json.loads(fields_json(fields)) == fields
        assert fields_json(fields) == json.dumps(fields, separators=(",", ":"))


def test_two_stages_give_nsqviz_decode_row_for_row(tmp_path):
    """Stage 1 per file, stage 2 on what crosses: together, the rows of `nsqviz decode`
    on the same rotated files, each connection numbered 1..n -- with the decoder state
    of every connection open at a file's end handed on, not its packets."""
    import json
    from collections import Counter

    from nsqviz.capture.decode import decode_capture
    from nsqviz.pipeline.handoff import plan

    with RotatingPcapWriter(tmp_path / "cap.pcap", 28_000) as w:
        for k in range(5):  # deployments one after the other: some connections cross
            simulate(w, seed=k, n_messages=12, t0=1_700_000_000.0 + 100 * k,
                     port_base=41000 + 10 * k)
    files = w.paths
    assert len(files) >= 3
    handoffs = []
    rows = [r for i, f in enumerate(files) for b in decode_file(f, i, files,
                                                                 handoff=handoffs.append)
            for r in b.to_pylist()]
    states = [s for h in handoffs for k in h.keys.values() for s in k.states]
    assert states  # open connections were handed on as state
    parts = plan(handoffs, 3)
    assert 1 < len(parts) <= 3
    rows += [r for p in parts for b in continue_connections(p, files) for r in b.to_pylist()]

    def as_json(r):
        return json.dumps({k: r[k] for k in ("ts", "flow", "dir", "kind", "name", "packets")}
                          | {"fields": json.loads(r["fields"])}, sort_keys=True)

    want = Counter(json.dumps(rec.as_json(), sort_keys=True) for rec in decode_capture(files))
    assert Counter(as_json(r) for r in rows if r["kind"] != "flow") == want
    seqs: dict[str, list[int]] = {}
    for r in rows:
        seqs.setdefault(r["conn_id"], []).append(r["seq"])
    assert all(sorted(v) == list(range(1, len(v) + 1)) for v in seqs.values())


def test_a_state_that_does_not_pickle_is_handed_on_as_packets(tmp_path, monkeypatch):
    """Where a connection's decoder state cannot be handed on (a compressor's, say),
    its packets are, from its first: stage 2 decodes it again and writes only the
    rows stage 1 could not -- the same rows either way."""
    from nsqviz.pipeline import handoff as handoff_module

    with RotatingPcapWriter(tmp_path / "cap.pcap", 28_000) as w:
        for k in range(3):
            simulate(w, seed=k, n_messages=12, t0=1_700_000_000.0 + 100 * k,
                     port_base=41000 + 10 * k)
    want = _decoded_with_flows(w.paths)
    monkeypatch.setattr(handoff_module, "_pickled", lambda *a: None)
    assert _with_flows(_rows(w.paths)) == want


def _rows(files, **options):
    """Every row both stages give, as Spark runs them, without Spark."""
    return [r for b in decode_set(files, **options) for r in b.to_pylist()]


def _with_flows(rows):
    """Rows as ``nsqviz decode --json`` would print them, flow records included."""
    import json
    from collections import Counter

    return Counter(json.dumps({k: r[k] for k in ("ts", "flow", "dir", "kind", "name",
                                                  "packets")}
                              | {"fields": json.loads(r["fields"])}, sort_keys=True)
                   for r in rows)


def _decoded_with_flows(files, **options):
    import json
    from collections import Counter

    from nsqviz.capture.decode import CaptureDecoder

    return Counter(json.dumps(rec.as_json(), sort_keys=True)
                   for rec in CaptureDecoder(flow_records=True, **options).decode(files))


def _split(src, at: list[int], tmp_path):
    """The records of capture ``src`` as rotated files starting at record indexes ``at``."""
    from nsqviz.capture.files import Record, read_capture
    from nsqviz.capture.writer import PcapWriter

    records = [r for r in read_capture(src) if isinstance(r, Record)]
    cuts = [0, *at, len(records)]
    paths = []
    for k, (lo, hi) in enumerate(zip(cuts, cuts[1:], strict=False)):
        paths.append(str(tmp_path / (f"cap.pcap{k}" if k else "cap.pcap")))
        with PcapWriter(paths[-1]) as w:
            for r in records[lo:hi]:
                w.write(r.ts, r.data)
    return paths, records


def test_late_packets_of_a_connection_closed_in_an_earlier_file_start_nothing(tmp_path):
    """A connection's last ACK lands in the next file: it belongs to the closed
    connection (no new flow rows), as in ``nsqviz decode``."""
    from nsqviz.capture.layers import FIN, decode_record

    with RotatingPcapWriter(tmp_path / "one.pcap", 10**9) as w:
        simulate(w, seed=4, n_messages=20)
    records = _split(w.paths[0], [], tmp_path)[1]
    segs = [decode_record(r) for r in records]
    # cut right after the first FIN that closes a connection's second direction
    fins = [i for i, s in enumerate(segs) if s.flags & FIN]
    cut = fins[1] + 1
    assert not segs[cut].payload and not segs[cut].flags & FIN  # its last ACK
    files, _ = _split(w.paths[0], [cut], tmp_path)
    rows = _rows(files)
    assert _with_flows(rows) == _decoded_with_flows(files)
    starts = [r for r in rows if r["name"] == "FlowStart"]
    assert len(starts) == len({r["conn_id"] for r in rows if r["conn_id"]}) == 5


def test_a_syn_reusing_a_four_tuple_left_open_in_an_earlier_file(tmp_path):
    """File 0: five connections whose FINs were not captured; file 1: new connections on
    the same 4-tuples (SYNs with other sequence numbers). Both stages together give what
    ``nsqviz decode`` gives: the old connections end at the new SYNs (``reused``)."""
    from nsqviz.capture.files import Record, read_capture
    from nsqviz.capture.layers import ACK, FIN, decode_record
    from nsqviz.capture.writer import PcapWriter

    def records(seed, t0):
        with RotatingPcapWriter(tmp_path / f"sim{seed}.pcap", 10**9) as w:
            simulate(w, seed=seed, n_messages=15, t0=t0)
        return [r for r in read_capture(w.paths[0]) if isinstance(r, Record)]

    files = [str(tmp_path / "cap.pcap"), str(tmp_path / "cap.pcap1")]
    with PcapWriter(files[0]) as w:
        for r in records(1, 1_700_000_000.0):
            if not decode_record(r).flags & FIN:
                w.write(r.ts, r.data)
    with PcapWriter(files[1]) as w:
        for r in records(2, 1_700_000_100.0):
            seg, data = decode_record(r), bytearray(r.data)
            at = 38 if seg.dport == 4150 else 42  # the client's seq, the server's ack
            if at == 38 or seg.flags & ACK:
                value = (int.from_bytes(data[at:at + 4], "big") + 7_777_777) & 0xFFFFFFFF
                data[at:at + 4] = value.to_bytes(4, "big")
            w.write(r.ts, bytes(data))
    want = _decoded_with_flows(files)
    assert sum('"how": "reused"' in k for k in want) == 10  # both directions of five
    rows = _rows(files)
    assert _with_flows(rows) == want
    assert len({r["conn_id"] for r in rows if r["conn_id"]}) == 10


def test_a_decoding_task_reports_bytes_and_frames_as_it_goes(tmp_path):
    """Each task keeps (bytes read, frames decoded) in a file the driver's progress reads
    while the task runs: at every batch, and exactly at the end."""
    from nsqviz.capture.decode import decode_capture
    from nsqviz.pipeline.decode import read_progress

    with RotatingPcapWriter(tmp_path / "cap.pcap", 10**9) as w:
        simulate(w, seed=1, n_messages=60)
    reports = tmp_path / "progress"
    reports.mkdir()
    path = w.paths[0]
    seen = []
    for _ in decode_file(path, 0, w.paths, batch_rows=50, progress=str(reports / "0")):
        seen.append(read_progress(str(reports)))
    frames = sum(1 for r in decode_capture(w.paths) if r.kind in ("command", "frame"))
    assert read_progress(str(reports)) == (os.path.getsize(path), frames, 1)
    assert len(seen) > 3 and seen[0][1] > 0  # reported while decoding, not only at the end
    assert seen[0][2] == 0
    assert [b for b, _, _ in seen] == sorted(b for b, _, _ in seen)


def test_rotated_pcapng_files_cross_as_rotated_pcap_files_do(tmp_path):
    """Stage 2 walks a pcapng for the packets it wants (its interfaces are declared along
    the way) where it seeks in a classic pcap: the same rows either way."""
    from nsqviz.capture.files import Record, read_capture
    from nsqviz.capture.writer import PcapngWriter

    with RotatingPcapWriter(tmp_path / "sim.pcap", 10**9) as w:
        for k in range(3):
            simulate(w, seed=k, n_messages=12, t0=1_700_000_000.0 + 5 * k,
                     port_base=41000 + 10 * k)
    records = [r for r in read_capture(w.paths[0]) if isinstance(r, Record)]
    files = [str(tmp_path / f"cap{k}.pcapng") for k in range(3)]
    third = len(records) // 3
    for k, path in enumerate(files):
        with PcapngWriter(path) as out:
            out.add_interface()
            for r in records[k * third:(k + 1) * third if k < 2 else None]:
                out.write(r.ts, r.data)
    handoffs = []
    for i, f in enumerate(files):
        for _ in decode_file(f, i, files, handoff=handoffs.append):
            pass
    assert any(k.states for h in handoffs for k in h.keys.values())
    assert _with_flows(_rows(files)) == _decoded_with_flows(files)
