"""FrameColumns against the plain row-by-row way of building the frames table, on every
sample capture: the same Arrow batches (schema, values, nulls, order) whatever the batch
size. No Spark."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest

from nsqviz import protocols
from nsqviz.capture.decode import CaptureDecoder
from nsqviz.records import FRAME_COLUMNS, TCP_COLUMNS, DecodedRecord, FrameColumns, frame_schema

DATA = Path(__file__).resolve().parents[1] / "data"
CAPTURES = sorted(p for p in DATA.rglob("*") if p.suffix in (".pcap", ".pcapng"))
TYPED = [name for name, _ in protocols.typed_columns()]
TCP = [name for name, _ in TCP_COLUMNS]
WARNING = DecodedRecord(float("nan"), None, None, "error", "CaptureWarning",
                        {"reason": "x.pcap: truncated record"}, (), files=())


def reference_row(rec: DecodedRecord, conn_id: str | None, seq: int | None,
                  files: list[str]) -> dict:
    """One frames-table row, written out plainly."""
    paths = [files[i] for i in rec.files]
    row = {
        "ts": rec.ts, "flow": rec.flow, "dir": rec.dir, "kind": rec.kind, "name": rec.name,
        "fields": json.dumps(rec.fields, separators=(",", ":")),
        "packets": list(rec.packets), "protocol": rec.protocol, "conn_id": conn_id,
        "file": paths[0] if paths else None, "packet_files": paths, "seq": seq,
        "offset": rec.offset, "size": rec.size, "violation": None, "reason": None,
        "response_to": None, "answers": None,
    }
    typed = {}
    if rec.kind in ("command", "frame"):
        problem = rec.fields.get("violation")
        if problem:  # the server's code, and its answer (the codec's words without one)
            row["violation"] = problem["code"] or "closes"
            row["reason"] = (f"{problem['code']} {problem['text']}" if problem["code"]
                             else problem["text"])
        elif "refused" in rec.fields:  # refused where it was sent: the server's answer
            row["reason"] = rec.fields["refused"]
        row["response_to"], row["answers"] = rec.fields.get("response_to"), rec.answers
        if rec.protocol is not None:
            proto = protocols.by_name(rec.protocol)
            typed = proto.typed(rec.event) if rec.event is not None else \
                proto.typed_unit(rec.kind, rec.name, rec.fields)  # cut short by the capture
    elif rec.kind == "flow":
        row["reason"] = rec.fields.get("how")
    elif rec.kind == "tcp":
        row["reason"] = rec.fields.get("kind") or rec.fields.get("when")
        typed = {name: rec.fields.get(name[len("tcp_"):]) for name in TCP}
    else:
        text = rec.fields.get("text") or rec.fields.get("reason") or rec.fields.get("note")
        row["reason"] = f"{rec.name}: {text}" if text else rec.name
        if rec.name == "Gap" and rec.event.cut:
            typed = {"tcp_cut_bytes": rec.event.cut}
    for name in [*TCP, *TYPED]:
        row[name] = typed.get(name)
    return row


def numbered(records):
    """``(record, conn_id, seq)`` as the pipeline numbers them: a connection id per flow
    and the record's place in it; capture warnings belong to no connection."""
    conns: dict[int, list] = {}
    for rec in records:
        if rec.flow_id is None:
            yield rec, None, None
            continue
        c = conns.setdefault(rec.flow_id, [f"{rec.flow}@{rec.ts:.6f}", 0])
        c[1] += 1
        yield rec, c[0], c[1]


def as_bits(batch: pa.RecordBatch) -> pa.RecordBatch:
    """Float columns as their bits: Arrow's ``equals`` never takes NaN (a warning's ts)
    for equal to NaN."""
    return pa.RecordBatch.from_arrays(
        [c.view(pa.int64()) if pa.types.is_float64(c.type) else c for c in batch.columns],
        names=batch.schema.names)


def both(records, files: list[str], every: int):
    """The batches of FrameColumns and of the reference, flushed every ``every`` rows."""
    columns, rows, got, want = FrameColumns(files), [], [], []
    for rec, conn_id, seq in numbered(records):
        columns.add(rec, conn_id, seq)
        rows.append(reference_row(rec, conn_id, seq, files))
        if len(columns) >= every:
            got.append(columns.batch())
            want.append(pa.RecordBatch.from_pylist(rows, schema=frame_schema()))
            rows = []
    assert len(columns) == len(rows)
    if rows:
        got.append(columns.batch())
        want.append(pa.RecordBatch.from_pylist(rows, schema=frame_schema()))
    return got, want


def decoded(paths) -> list[DecodedRecord]:
    decoder = CaptureDecoder(ports={"nsq": {45425}}, flow_records=True)
    return [*decoder.decode(paths), WARNING]


def assert_same(got, want) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g.schema == frame_schema()
        assert as_bits(g).equals(as_bits(w)), (g.to_pylist(), w.to_pylist())


@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: str(p.relative_to(DATA)))
@pytest.mark.parametrize("every", [1, 7, 8192])
def test_every_capture_gives_the_reference_batches(path, every):
    records = decoded([path])
    assert_same(*both(records, [str(path)], every))


def test_a_capture_set_names_each_packets_file():
    """All samples read as one set: rows from many files, a files list to look them up."""
    files = [str(p) for p in CAPTURES]
    records = decoded(files)
    assert len({rec.files for rec in records}) > len(files)
    assert_same(*both(records, files, 7))


def test_frames_across_rotated_files(tmp_path):
    """A rotated capture set (tcpdump -C) where frames start in one file and end in the
    next: ``file`` is the first packet's file, ``packet_files`` each packet's."""
    from nsqviz.pipeline.synth import RotatingPcapWriter, simulate

    with RotatingPcapWriter(tmp_path / "cap.pcap", 20_000) as w:
        simulate(w, seed=3, n_messages=40, big_body=6000)
    records = decoded(w.paths)
    assert any(len(set(rec.files)) > 1 for rec in records)
    for every in (7, 8192):
        assert_same(*both(records, w.paths, every))


def test_the_samples_fill_every_kind_of_column():
    """Not vacuous: the samples reach the typed columns of both protocols, violations,
    reasons, warnings and frames spanning several packets."""
    files = [str(p) for p in CAPTURES]
    [batch], _ = both(decoded(files), files, 10**9)
    filled = {name for name in batch.schema.names if batch.column(name).null_count < len(batch)}
    assert {"violation", "reason", "msg_id", "bodies", "count", "rpc_serial", "rpc_method",
            "err_code", *TCP} <= filled
    assert set(batch.column("kind").to_pylist()) >= {"command", "frame", "error", "flow", "tcp"}
    assert max(len(p) for p in batch.column("packets").to_pylist()) > 1
    assert len(FRAME_COLUMNS) + len(TCP) + len(TYPED) == batch.num_columns


def test_fields_json_is_json_dumps_on_awkward_values():
    """The fast path copies ASCII letters and digits as they are; everything else must
    still come out as json.dumps writes it."""
    import enum

    from nsqviz.records import fields_json

    class Word(enum.StrEnum):
        A = "a\"b"

    class Number(enum.IntEnum):
        ONE = 1

    samples = [
        {"body": "00ff" * 500, "id": "0123456789abcdef", "empty": "", "n": -3, "big": 2**70},
        {"é": "é", "data": "caf\u00e9", "cjk": "\u4e2d", "surrogate": "\ud800", "nul": "\x00"},
        {"ctl": "a\nb\tc\x1f", "quote": 'q"', "slash": "a\\b", "space": "a b"},
        {"word": Word.A, "number": Number.ONE, "yes": True, "no": False, "none": None},
        {"nan": float("nan"), "inf": float("inf"), "half": 0.5, "list": ["x", 1, None]},
        {"nested": {"k": "v", "n": [1, {"é": 2}]}},
        {1: "int key", "s": "x"},
        {None: 1, 2.5: "float key", True: "bool key"},
    ]
    for fields in samples:
        assert fields_json(fields) == json.dumps(fields, separators=(",", ":"))
