"""The frames table: what ``nsqviz decode --json`` says, plus where each row came from."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from nsqviz.capture.decode import decode_capture

from .conftest import table

pytestmark = [pytest.mark.spark]

_JSON_KEYS = ("ts", "flow", "dir", "kind", "name", "fields", "packets")


def _as_decode_json(df):
    rows = df[~df.kind.isin(["flow", "tcp"])]  # the pipeline's own rows
    return Counter(
        json.dumps(
            {"ts": r.ts, "flow": r.flow, "dir": r.dir, "kind": r.kind, "name": r.name,
             "fields": json.loads(r.fields), "packets": [int(p) for p in r.packets]},
            sort_keys=True,
        )
        for r in rows.itertuples()
    )


def test_frames_equal_nsqviz_decode_json(run_one, captures):
    """Same rows, same fields as the single-process decoder on the same file."""
    frames = table(run_one, "frames")
    expected = Counter(
        json.dumps(rec.as_json(), sort_keys=True) for rec in decode_capture(captures["one"])
    )
    assert sum(expected.values()) > 400
    assert _as_decode_json(frames) == expected


def test_rotated_frames_equal_nsqviz_decode_json_row_for_row(run_rotated, captures):
    """The rotated files are one capture set for both: same connections, same rows."""
    frames = table(run_rotated, "frames")
    expected = Counter(
        json.dumps(rec.as_json(), sort_keys=True)
        for rec in decode_capture(captures["rotated"])
    )
    assert sum(expected.values()) > 400
    assert _as_decode_json(frames) == expected


def test_frame_counts_match_the_simulation(run_one, captures):
    truth = captures["truth"]
    frames = table(run_one, "frames")
    fr = frames[frames.kind.isin(["command", "frame"])]
    got = Counter((f.split("@")[0], d) for f, d in zip(fr.conn_id, fr.dir, strict=True))
    want = Counter()
    for label, conn in truth.connections.items():
        for d, n in conn.frames.items():
            want[(label, d)] = n
    assert got == want
    assert not frames.kind.isin(["error", "gap"]).any()
    assert frames.conn_id.nunique() == len(truth.connections)


def test_rotated_files_reassemble_exactly_as_one_file(run_one, run_rotated, captures):
    one = table(run_one, "frames")
    rot = table(run_rotated, "frames")
    assert len(run_rotated.files) == len(captures["rotated"]) >= 4
    cols = [c for c in one.columns if c not in ("file", "packets", "packet_files")]

    def norm(df):
        # response_to is a packet number, of its own file like `packets`
        df = df.assign(fields=df.fields.map(lambda f: json.dumps(
            {k: v for k, v in json.loads(f).items() if k != "response_to"})))
        return sorted(
            tuple(json.dumps(v.tolist() if hasattr(v, "tolist") else v) for v in row)
            for row in df[cols].itertuples(index=False)
        )

    assert norm(one) == norm(rot)
    # Some frames really were cut by a file boundary, and say so.
    spanning = rot[rot.packet_files.map(lambda f: len(set(f)) > 1)]
    assert len(spanning) > 0
    # Packet numbers restart in each file, as in Wireshark.
    assert rot.packets.map(lambda p: 1 in set(p)).sum() >= len(captures["rotated"]) - 1


def test_gaps_and_damage_become_rows(spark, captures, tmp_path):
    """A lost segment is a gap row and decoding goes on; a torn file is an error row."""
    from nsqviz.capture.files import Record, read_capture
    from nsqviz.capture.layers import decode_record
    from nsqviz.capture.writer import PcapWriter
    from nsqviz.pipeline.frames import capture_frames

    src = captures["one"][0]
    records = [r for r in read_capture(src) if isinstance(r, Record)]
    big = [r for r in records if len(decode_record(r).payload) == 1460]
    lost = big[len(big) // 2]
    damaged = tmp_path / "damaged.pcap"
    with PcapWriter(damaged) as w:
        for r in records:
            if r.number != lost.number:
                w.write(r.ts, r.data)
    data = damaged.read_bytes()
    torn = tmp_path / "torn.pcap"
    torn.write_bytes(data[:-7])

    frames = capture_frames(spark, [str(torn)], str(tmp_path / "frames")).toPandas()
    gaps = frames[frames.name == "Gap"]
    assert len(gaps) == 1
    assert json.loads(gaps.iloc[0].fields)["size"] == 1460
    warnings = frames[frames.name == "CaptureWarning"]
    assert len(warnings) == 1 and "ends inside the record" in warnings.iloc[0].reason
    # Everything not cut by the hole is still decoded.
    full = table_counts(captures)
    units = frames[frames.kind.isin(["command", "frame"])]
    got = units.shape[0]
    # the unit the hole cut is shown as far as it was captured, not whole
    cut = units[units.fields.map(lambda f: "cut" in json.loads(f))].shape[0]
    assert full - 3 <= got <= full and got - cut < full


def table_counts(captures) -> int:
    return captures["truth"].frames


def test_each_file_keeps_copies_of_the_same_traffic_apart(spark, captures, tmp_path):
    """Two copies of one capture: --each-file keeps them apart, by file."""
    import shutil

    from nsqviz.pipeline.frames import capture_frames

    src = captures["one"][0]
    copies = [str(tmp_path / "a.pcap"), str(tmp_path / "b.pcap")]
    for c in copies:
        shutil.copyfile(src, c)
    separate = capture_frames(spark, copies, str(tmp_path / "separate"),
                              per_file=True).toPandas()
    truth = captures["truth"]
    assert separate.conn_id.nunique() == 2 * len(truth.connections)
    for name in ("a.pcap", "b.pcap"):
        mine = separate[separate.conn_id.str.endswith(f" in {name}")]
        assert set(mine.file) == {str(tmp_path / name)}
        assert mine.kind.isin(["command", "frame"]).sum() == truth.frames
    # As one capture set the copies are read in file order, as `nsqviz decode` reads
    # them: the second copy's handshakes reuse finished 4-tuples -- new connections.
    merged = capture_frames(spark, copies, str(tmp_path / "merged")).toPandas()
    decoded = [r for r in decode_capture(copies) if r.kind in ("command", "frame")]
    assert merged.kind.isin(["command", "frame"]).sum() == len(decoded) == 2 * truth.frames


@pytest.mark.parametrize(("name", "handed_on_as"), [
    ("snappy-pynsq.pcap", "packets"), ("deflate-pynsq.pcap", "packets"),
    ("tubemq/tubemq-consumer-rebalance-go.pcap", "state")])
def test_rotated_real_captures_equal_nsqviz_decode(spark, tmp_path, name, handed_on_as):
    """A real capture cut into three rotated files. A snappy or DEFLATE connection's
    decoder state does not pickle (the compressor's does not), so it crosses a cut as its
    packets: stage 2 decodes it from its first packet and writes only what stage 1 could
    not. TubeMQ's connections cross as their state. Either way: `nsqviz decode`'s rows."""
    from nsqviz.pipeline.decode import decode_file
    from nsqviz.pipeline.frames import write_frames

    files, _ = _cut_in_three(DATA / name, tmp_path)
    handoffs = []
    for _ in decode_file(files[0], 0, files, handoff=handoffs.append):
        pass
    open_at_cut = [k for k in handoffs[0].keys.values() if k.numbers]
    assert open_at_cut
    assert all(bool(k.states) == (handed_on_as == "state") for k in open_at_cut)
    out = str(tmp_path / "frames")
    assert write_frames(spark, files, out).payload > 0
    frames = spark.read.parquet(out).toPandas()
    expected = Counter(json.dumps(rec.as_json(), sort_keys=True)
                       for rec in decode_capture(files))
    assert _as_decode_json(frames) == expected


DATA = Path(__file__).resolve().parents[2] / "data"


def _cut_in_three(src: Path, folder: Path) -> tuple[list[str], list[int]]:
    """``src`` cut into three rotated files of one capture set, as ``tcpdump -C`` would:
    the files, and the number of packets before each."""
    from nsqviz.capture.files import Record, read_capture
    from nsqviz.capture.writer import PcapWriter

    records = [r for r in read_capture(src) if isinstance(r, Record)]
    files = [str(folder / f"cap.pcap{k or ''}") for k in range(3)]
    cuts = [0, len(records) // 3, 2 * len(records) // 3, len(records)]
    for path, lo, hi in zip(files, cuts, cuts[1:], strict=False):
        with PcapWriter(path) as w:
            for r in records[lo:hi]:
                w.write(r.ts, r.data, orig_len=r.orig_len)
    return files, cuts[:3]


@pytest.mark.parametrize("name", ["nsqd/tcp/zero-window.pcap", "nsqd/tcp/reset-too-big.pcap",
                                  "nsqd/snaplen/pubsub-s96.pcap",
                                  "tubemq/tubemq-large-message-go.pcap", "midstream-pynsq.pcap"])
def test_the_tcp_rows_of_rotated_files_on_spark_are_those_of_the_whole_file(spark, tmp_path,
                                                                             name):
    """What the TCP layer records (the ``tcp`` rows and how each flow started) is the same
    whether the capture is one file decoded in this process or rotated files decoded by
    Spark's tasks, each connection that crosses a file going on from the state the
    earlier file's task left it in -- packet for packet, counted across the files."""
    from nsqviz.analysis.capture import frames_of
    from nsqviz.pipeline.frames import write_frames
    from nsqviz.records import TCP_COLUMNS

    files, before = _cut_in_three(DATA / name, tmp_path)
    write_frames(spark, files, str(tmp_path / "frames"))
    rotated = spark.read.parquet(str(tmp_path / "frames")).toPandas()
    whole = frames_of([str(DATA / name)]).to_pandas()
    first = dict(zip(files, before, strict=True))
    columns = ["ts", "flow", "dir", "name", "reason", "offset", "size",
               *(n for n, _ in TCP_COLUMNS)]

    def rows(df, numbered):
        mine = df[(df.kind == "tcp") | (df.name == "FlowStart")]
        return sorted(json.dumps([numbered(r), *(_plain(r[c]) for c in columns)])
                      for _, r in mine.iterrows())

    got = rows(rotated, lambda r: [first[f] + int(n) for f, n in
                                   zip(r.packet_files, r.packets, strict=True)])
    want = rows(whole, lambda r: [int(n) for n in r.packets])
    assert got == want
    assert ((whole.kind == "tcp") | (whole.reason == "midstream")).any()  # what it is for


def _plain(value):
    """A cell as JSON: numpy numbers as Python's, NaN and None as null."""
    value = value.item() if hasattr(value, "item") else value
    return None if value is None or value != value else value
