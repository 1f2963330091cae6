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

``output`` chooses what the source gives: ``"packets"`` (the default, above), or the two
stages of decoding inside the source (:mod:`nsqviz.pipeline.decode`): ``"frames"``, the
frames table's rows each file decodes to on its own, and ``"continued"``, the rows of
the connections that cross a file boundary, one partition per group of them (option
``plan``: the path of the pickled :func:`nsqviz.pipeline.handoff.plan` the driver made
from the ``"frames"`` tasks' handoffs; option ``handoff``: the directory those tasks
write them to). Both take the capture driver's options ``continuation``
(``"true"``/``"false"``), ``idle_split`` (seconds, empty: never) and ``ports`` (JSON:
protocol name -> extra server ports); :func:`reader_options` writes them.
``progress`` (a directory): each task keeps how far it is in a small file there
(:class:`~nsqviz.pipeline.decode.ProgressFile`) for the driver to show. ``sink`` (a
directory or URI): each task writes its rows there as a Parquet file itself
(:mod:`nsqviz.pipeline.sink`, which says why) and gives one summary row instead; with
``tally`` (``"true"``) that row carries the :class:`~nsqviz.pipeline.tally.Tally` of
the rows it wrote, what the analyses need to know before their tasks.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, cast

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from nsqviz.capture.driver import IDLE_SPLIT
from nsqviz.capture.paths import expand_paths
from nsqviz.pipeline.schemas import (
    FRAME_SCHEMA,
    PACKET_SCHEMA,
    SUMMARY_SCHEMA,
    source_summary_schema,
)
from nsqviz.records import PacketColumns

if TYPE_CHECKING:  # imported where a task needs them
    from nsqviz.pipeline.handoff import FileHandoff, Part

__all__ = ["OUTPUTS", "PcapDataSource", "iter_packet_batches", "reader_options"]

OUTPUTS = ("packets", "frames", "continued")

BATCH_ROWS = 8192
def iter_packet_batches(path: str, file_index: int = 0,
                        batch_rows: int = BATCH_ROWS) -> Iterator[Any]:
    """Stream one capture file as Arrow record batches of packets-table rows."""
    from nsqviz.capture.files import CaptureFormatError, CaptureWarning, read_capture
    from nsqviz.capture.layers import decode_record

    cols = PacketColumns(path, file_index)
    try:
        for rec in read_capture(path):
            if isinstance(rec, CaptureWarning):
                where = f" (file offset {rec.offset})" if rec.offset >= 0 else ""
                cols.add_warning(rec.number, f"packet {rec.number}{where}: {rec.reason}")
            else:
                seg = decode_record(rec)
                if seg is None:
                    continue
                if isinstance(seg, CaptureWarning):
                    cols.add_warning(seg.number, f"packet {seg.number}: {seg.reason}")
                else:
                    cols.add(seg.number, seg)
            if len(cols) >= batch_rows:
                yield cols.batch()
    except (CaptureFormatError, OSError) as exc:
        cols.add_warning(None, f"{path}: {exc}")
    if len(cols):
        yield cols.batch()


class _Partition(InputPartition):
    """A partition of this source; Spark hands it back to :meth:`PcapReader.read`."""

    index: int


class _FilePartition(_Partition):
    def __init__(self, path: str, index: int):
        super().__init__(path)
        self.path = path
        self.index = index


class _PlanPartition(_Partition):
    def __init__(self, index: int, part: Part):
        super().__init__(index)
        self.index = index
        self.part = part


class PcapReader(DataSourceReader):
    def __init__(self, paths: list[str], output: str, options: dict[str, Any]):
        self.paths = paths
        self.output = output
        self.options = options

    def partitions(self) -> list[_Partition]:
        if self.output == "continued":
            import pickle

            with open(self.options["plan"], "rb") as f:
                plan: list[Part] = pickle.load(f)
            return [_PlanPartition(i, p) for i, p in enumerate(plan)]
        return [_FilePartition(p, i) for i, p in enumerate(self.paths)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        out = self.options["sink"]
        if out is None or self.output == "packets":
            yield from self._rows(partition)
            return
        import pyarrow as pa

        from nsqviz.pipeline.sink import PartWriter
        from nsqviz.pipeline.tally import Tally
        from nsqviz.records import frame_schema

        stage = 1 if self.output == "frames" else 2
        index = cast(_Partition, partition).index
        writer = PartWriter(out, f"part-{stage}-{index:05d}", frame_schema())
        tally = Tally() if self.options["tally"] else None
        try:
            for batch in self._rows(partition):
                writer.write(batch)
                if tally is not None:
                    tally.add(batch)
        except BaseException:
            writer.abort()
            raise
        summary = writer.close()
        if tally is not None:
            tally.held_in(summary["part"][0].as_py())
        yield pa.RecordBatch.from_arrays(
            [*summary.columns, pa.array([tally.dumps() if tally else None], pa.binary())],
            schema=source_summary_schema())

    def _rows(self, partition: InputPartition) -> Iterator[Any]:
        """The rows of ``partition``, one of those :meth:`partitions` made."""
        from nsqviz.pipeline import decode

        opts = self.options
        directory = opts["progress"]
        if self.output == "frames":
            file = cast(_FilePartition, partition)
            progress = os.path.join(directory, str(file.index)) if directory else None
            handoff: Callable[[FileHandoff], None] | None = None
            if opts["handoff"]:
                from nsqviz.pipeline.handoff import save

                handoff = functools.partial(save, directory=opts["handoff"])
            yield from decode.decode_file(
                file.path, file.index, self.paths, progress=progress,
                handoff=handoff, continuation=opts["continuation"],
                idle_split=opts["idle_split"], ports=opts["ports"])
        elif self.output == "continued":
            # Progress makes the directory when the phase starts.
            planned = cast(_PlanPartition, partition)
            progress = (os.path.join(directory, "continuing", str(planned.index))
                        if directory else None)
            yield from decode.continue_connections(
                planned.part, self.paths, idle_split=opts["idle_split"],
                ports=opts["ports"], progress=progress)
        else:
            file = cast(_FilePartition, partition)
            yield from iter_packet_batches(file.path, file.index)


class PcapDataSource(DataSource):
    """``spark.read.format("pcap").load(path_or_paths)``; see the module docstring."""

    @classmethod
    def name(cls) -> str:
        return "pcap"

    def _output(self) -> str:
        output = self.options.get("output", "packets")
        if output not in OUTPUTS:
            raise ValueError(f"pcap source: output {output!r} is not one of {OUTPUTS}")
        return output

    def schema(self) -> StructType:
        if self._output() == "packets":
            return PACKET_SCHEMA
        return SUMMARY_SCHEMA if self.options.get("sink") else FRAME_SCHEMA

    def reader(self, schema: StructType) -> PcapReader:
        opts = self.options
        decoding = {
            "continuation": opts.get("continuation", "true") == "true",
            "idle_split": float(opts["idle_split"]) if opts.get("idle_split") else None,
            "ports": json.loads(opts.get("ports", "{}")),
            "progress": opts.get("progress") or None,
            "handoff": opts.get("handoff") or None,
            "plan": opts.get("plan") or None,
            "sink": opts.get("sink") or None,
            "tally": opts.get("tally", "false") == "true",
        }
        return PcapReader(expand_paths(_paths_option(opts)), self._output(), decoding)


def _paths_option(options: Mapping[str, str]) -> list[str]:
    paths: list[str]
    if "paths" in options:
        value = options["paths"]
        paths = json.loads(value) if value.startswith("[") else value.split(",")
    elif "path" in options:
        paths = [options["path"]]
    else:
        raise ValueError('the pcap source needs a path: spark.read.format("pcap").load(PATH)')
    return paths


def reader_options(*, continuation: bool = True, idle_split: float | None = IDLE_SPLIT,
                   ports: Mapping[str, Iterable[int]] | None = None) -> dict[str, str]:
    """The source's decoding options, as Spark wants them (strings)."""
    return {
        "continuation": "true" if continuation else "false",
        "idle_split": "" if idle_split is None else repr(float(idle_split)),
        "ports": json.dumps({k: sorted(v) for k, v in (ports or {}).items()}),
    }
