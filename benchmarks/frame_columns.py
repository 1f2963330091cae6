"""Rows/s of :class:`nsqviz.records.FrameColumns`, the frames-table builder of the
pipeline's decoding tasks, beside the plain way of building the same batches.

The records of a capture -- by default four simulated NSQ deployments
(:func:`nsqviz.pipeline.synth.simulate`, 1,000-byte bodies: the traffic of the Spark
benchmark's capture sets), or the capture files named -- are decoded once and kept;
``gc.freeze`` takes them out of the collector's way, so what is timed is the builder.
Then, in the same process, each builder gets every record with its connection id and
order, and is flushed every 8,192 rows, as in a decoding task:

* ``FrameColumns``;
* the baseline: a list per column, every column appended on every row (the typed ones
  too), the protocol found by name and the fields encoded by ``json.dumps`` each row.

Rates are by process CPU time, best of ``--repeat`` after a first round that checks
the batches equal.
Run: ``.venv/bin/python -m benchmarks.frame_columns [CAPTURE ...] [--repeat 5]``.
"""

from __future__ import annotations

import argparse
import gc
import os
import tempfile
import time
from typing import Any

from nsqviz import protocols
from nsqviz.capture.decode import CaptureDecoder
from nsqviz.compactjson import dumps as compact_json
from nsqviz.records import FRAME_COLUMNS, FrameColumns, frame_schema

BATCH_ROWS = 8192


class Baseline:
    """The frames table built the plain way (what FrameColumns must equal)."""

    def __init__(self, files: list[str]):
        self.files = files
        self.columns: list[list[Any]] = [[] for _ in frame_schema().names]

    def __len__(self) -> int:
        return len(self.columns[0])

    def add(self, rec: Any, conn_id: str | None, seq: int | None) -> None:
        where = [self.files[i] for i in rec.files]
        violation = reason = None
        typed: dict[str, Any] = {}
        if rec.kind in ("command", "frame"):
            problem = rec.fields.get("violation")
            if problem:
                violation = problem["code"] or "closes"
            if rec.protocol is not None and rec.event is not None:
                typed = protocols.by_name(rec.protocol).typed(rec.event)
        elif rec.kind == "flow":
            reason = rec.fields.get("how")
        else:
            text = rec.fields.get("reason") or rec.fields.get("text") or rec.fields.get("note")
            reason = f"{rec.name}: {text}" if text else rec.name
        row = [rec.ts, rec.flow, rec.dir, rec.kind, rec.name, compact_json(rec.fields),
               rec.packets, rec.protocol, conn_id, where[0] if where else None, where, seq,
               rec.offset, rec.size, violation, reason]
        row += [typed.get(name) for name in frame_schema().names[len(FRAME_COLUMNS):]]
        for column, value in zip(self.columns, row, strict=True):
            column.append(value)

    def batch(self) -> Any:
        import pyarrow as pa

        schema = frame_schema()
        arrays = [pa.array(c, type=t) for c, t in zip(self.columns, schema.types, strict=True)]
        self.columns = [[] for _ in schema.names]
        return pa.RecordBatch.from_arrays(arrays, schema=schema)


def records(paths: list[str]) -> list[tuple[Any, str | None, int | None]]:
    """Every record of the capture set with its connection id and order in it."""
    conns: dict[int, list[Any]] = {}
    out = []
    for rec in CaptureDecoder(flow_records=True).decode(paths):
        if rec.flow_id is None:
            out.append((rec, None, None))
            continue
        c = conns.setdefault(rec.flow_id, [f"{rec.flow}@{rec.ts:.6f}", 0])
        c[1] += 1
        out.append((rec, c[0], c[1]))
    return out


def build(builder: Any, rows: list[tuple[Any, str | None, int | None]]) -> tuple[float, list]:
    """CPU seconds to feed ``rows`` to ``builder``, and its batches."""
    batches = []
    t0 = time.process_time()
    for rec, conn_id, seq in rows:
        builder.add(rec, conn_id, seq)
        if len(builder) >= BATCH_ROWS:
            batches.append(builder.batch())
    if len(builder):
        batches.append(builder.batch())
    return time.process_time() - t0, batches


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("captures", nargs="*", help="capture files, read as one set")
    ap.add_argument("--repeat", type=int, default=5, help="runs of each (default 5)")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        paths = args.captures or [_simulated(os.path.join(tmp, "sim.pcap"))]
        rows = records(paths)
    gc.collect()
    gc.freeze()
    # A first, untimed round warms pyarrow up (its first conversion imports more) and
    # checks that both builders make the same batches.
    ours, theirs = build(FrameColumns(paths), rows)[1], build(Baseline(paths), rows)[1]
    if len(ours) != len(theirs) or not all(map(_same, ours, theirs)):
        raise SystemExit("FrameColumns and the baseline made different batches")
    best = {"FrameColumns": float("inf"), "baseline": float("inf")}
    for _ in range(args.repeat):
        for name, make in (("FrameColumns", FrameColumns), ("baseline", Baseline)):
            best[name] = min(best[name], build(make(paths), rows)[0])
    gc.unfreeze()
    for name, seconds in best.items():
        print(f"{name:>12}: {len(rows) / seconds:9,.0f} rows/s (CPU {seconds:.3f} s)")
    print(f"{len(rows)} rows; FrameColumns / baseline: "
          f"{best['baseline'] / best['FrameColumns']:.2f}x")


def _same(a: Any, b: Any) -> bool:
    """Equal batches (float columns compared by bits: Arrow's NaN, a warning's ts, is
    never equal to NaN)."""
    import pyarrow as pa

    def bits(c: Any) -> Any:
        return c.view(pa.int64()) if pa.types.is_float64(c.type) else c

    return a.schema == b.schema and all(
        bits(x).equals(bits(y)) for x, y in zip(a.columns, b.columns, strict=True))


def _simulated(path: str) -> str:
    from nsqviz.capture.writer import PcapWriter
    from nsqviz.pipeline.synth import simulate

    with PcapWriter(path) as w:
        for k in range(4):
            simulate(w, seed=100 + k, n_messages=800, body_size=1000,
                     t0=1_700_000_000.0 + 30.0 * k, port_base=20000 + 10 * k, worker=k)
    return path


if __name__ == "__main__":
    main()
