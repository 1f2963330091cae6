"""``spark.read.format("pcap")``: capture files as a DataFrame of TCP packets.

A PySpark 4 Python data source (:mod:`pyspark.sql.datasource`) rather than
``binaryFile`` + a UDF: ``binaryFile`` hands each file to Python as one value, so a
multi-gigabyte capture would have to fit in memory, while a data source reader is a
generator that streams the file (through the project's own reader,
:func:`nsqviz.capture.files.read_capture`, and link/IP/TCP decoder,
:func:`nsqviz.capture.layers.decode_record`) and yields Arrow record batches of a few
thousand packets. One input partition per file: pcap has no sync markers, so a file can
only be read from its start, and rotated captures (``tcpdump -C``/``-G``) already come
as many files of bounded size.

One row per TCP packet. Packets that are not TCP are skipped (they are not part of any
conversation); every damaged record becomes a row whose ``warning`` says what was
wrong and where, so nothing disappears silently.

Options: ``path`` (or ``load([...])`` paths), each a file, a directory (its ``*.pcap``,
``*.pcapng``, ``*.cap`` and rotated ``*.pcap[0-9]*`` files) or a glob. Paths are
resolved on the driver; executors open them by the same path, so on a cluster they must
be on a shared file system.
"""

from __future__ import annotations

import glob
import json
import os
import re
from collections.abc import Iterator

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from nsqviz.pipeline.schemas import PACKET_SCHEMA
from nsqviz.records import packet_schema

__all__ = ["PcapDataSource", "expand_paths", "iter_packet_batches"]

BATCH_ROWS = 8192
_CAPTURE_SUFFIXES = (".pcap", ".pcapng", ".cap")


def expand_paths(paths: str | os.PathLike[str] | list) -> list[str]:
    """Files named by ``paths`` (files, directories, globs), absolute, sorted, no repeats.

    Sorted by name, so ``capture.pcap``, ``capture.pcap1`` ... of ``tcpdump -C`` come in
    rotation order. A name that matches nothing is an error, not an empty result.
    """
    if isinstance(paths, str | os.PathLike):
        paths = [paths]
    out: list[str] = []
    for p in map(os.fspath, paths):
        if os.path.isdir(p):
            found = [
                os.path.join(p, n)
                for n in os.listdir(p)
                if _looks_like_capture(n) and os.path.isfile(os.path.join(p, n))
            ]
        elif os.path.exists(p):
            found = [p]
        else:
            found = [f for f in glob.glob(p) if os.path.isfile(f)]
            if not found:
                raise FileNotFoundError(f"no capture file matches {p!r}")
        out.extend(os.path.abspath(f) for f in sorted(found, key=_natural))
    return list(dict.fromkeys(out))


def _natural(name: str) -> list:
    """``cap.pcap9`` before ``cap.pcap10``: tcpdump -C numbers files without padding."""
    return [(0, int(t), "") if t.isdigit() else (1, 0, t) for t in re.split(r"(\d+)", name)]


def _looks_like_capture(name: str) -> bool:
    stem, _, tail = name.rpartition(".")
    rotated = bool(stem) and tail.startswith("pcap") and tail[4:].isdigit()  # tcpdump -C
    return name.endswith(_CAPTURE_SUFFIXES) or rotated


def iter_packet_batches(path: str, file_index: int = 0, batch_rows: int = BATCH_ROWS) -> Iterator:
    """Stream one capture file as Arrow record batches of packets-table rows."""
    import pyarrow as pa

    from nsqviz.capture.files import CaptureFormatError, CaptureWarning, read_capture
    from nsqviz.capture.layers import decode_record

    arrow_schema = packet_schema()
    cols: tuple[list, ...] = tuple([] for _ in range(12))
    (number, ts, src, sport, dst, dport, seq, ack, flags, payload, missing, warning) = cols

    def flush():
        n = len(number)
        batch = pa.RecordBatch.from_arrays(
            [pa.array([path] * n, pa.string()), pa.array([file_index] * n, pa.int32())]
            + [pa.array(c, t) for c, t in zip(cols, arrow_schema.types[2:], strict=True)],
            schema=arrow_schema,
        )
        for c in cols:
            c.clear()
        return batch

    def add_warning(num, reason):
        number.append(num)
        warning.append(reason)
        for c in (ts, src, sport, dst, dport, seq, ack, flags, payload, missing):
            c.append(None)

    try:
        records = read_capture(path)
        for rec in records:
            if isinstance(rec, CaptureWarning):
                where = f" (file offset {rec.offset})" if rec.offset >= 0 else ""
                add_warning(rec.number, f"packet {rec.number}{where}: {rec.reason}")
            else:
                seg = decode_record(rec)
                if seg is None:
                    continue
                if isinstance(seg, CaptureWarning):
                    add_warning(seg.number, f"packet {seg.number}: {seg.reason}")
                else:
                    number.append(seg.number)
                    ts.append(seg.ts)
                    src.append(seg.src)
                    sport.append(seg.sport)
                    dst.append(seg.dst)
                    dport.append(seg.dport)
                    seq.append(seg.seq)
                    ack.append(seg.ack)
                    flags.append(seg.flags)
                    payload.append(seg.payload)
                    missing.append(seg.missing)
                    warning.append(None)
            if len(number) >= batch_rows:
                yield flush()
    except (CaptureFormatError, OSError) as exc:
        add_warning(None, f"{path}: {exc}")
    if number:
        yield flush()


class _FilePartition(InputPartition):
    def __init__(self, path: str, index: int):
        super().__init__(path)
        self.path = path
        self.index = index


class PcapReader(DataSourceReader):
    def __init__(self, paths: list[str]):
        self.paths = paths

    def partitions(self):
        return [_FilePartition(p, i) for i, p in enumerate(self.paths)]

    def read(self, partition):
        yield from iter_packet_batches(partition.path, partition.index)


class PcapDataSource(DataSource):
    """``spark.read.format("pcap").load(path_or_paths)``; see the module docstring."""

    @classmethod
    def name(cls) -> str:
        return "pcap"

    def schema(self):
        return PACKET_SCHEMA

    def reader(self, schema):
        return PcapReader(expand_paths(_paths_option(self.options)))


def _paths_option(options) -> list[str]:
    if "paths" in options:
        value = options["paths"]
        paths = json.loads(value) if value.startswith("[") else value.split(",")
    elif "path" in options:
        paths = [options["path"]]
    else:
        raise ValueError('the pcap source needs a path: spark.read.format("pcap").load(PATH)')
    return paths
