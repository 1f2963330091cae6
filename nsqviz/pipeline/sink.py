"""Where the pipeline's tasks put their rows: Parquet files they write themselves --
the decoding tasks the frames table, the analyses' tasks (:mod:`nsqviz.pipeline.analyses`)
theirs.

Spark's own writer would take the Arrow batches a Python worker decodes, turn them back
into JVM rows and encode those as Parquet. Measured on one 40 MB capture file
(``local[1]``): that JVM side cost 1.2-1.9 s of CPU against the 2.4-2.7 s the Python
worker spent decoding -- on the same cores, so it halved what a second core could add --
while pyarrow writes the very same batches in 0.17 s. So each decoding task writes its
batches with pyarrow straight into the table's directory, and Spark only sees one
summary row per task (:func:`summary_schema`); the table is an ordinary Parquet
directory that ``spark.read.parquet`` (or pandas, or DuckDB) reads.

Each task writes one file per table, named after its stage and partition, under a temporary name
first and renamed into place: a retried task replaces what its failed attempt left, and
a reader never sees half a file. ``out`` is a local path or a URI pyarrow's file systems
know (``file://``, ``s3://``, ``hdfs://``); on a cluster it must be one every executor
reaches, as the captures must be.

The analyses' tasks read the frames table back the same way (:func:`files`,
:func:`read`): each task only the files that hold its connections, and of those only
its connections' rows, with pyarrow -- not through Spark (a shuffle of the whole table,
then every row turned into JVM rows and back into Arrow for the Python task).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from functools import cache
from typing import Any

__all__ = ["PartWriter", "clear", "done", "files", "read", "remove", "summary_schema"]

READ_ROWS = 65_536
"""Rows :func:`read` takes from a file at a time (before it keeps only those wanted)."""


@cache
def summary_schema() -> Any:
    """One row per task: the file it wrote and the rows in it."""
    import pyarrow as pa

    return pa.schema([("part", pa.string()), ("rows", pa.int64())])


def _fs(out: str) -> tuple[Any, str]:
    from pyarrow import fs

    filesystem_and_path: tuple[Any, str] = fs.FileSystem.from_uri(
        out if "://" in out else os.path.abspath(out))
    return filesystem_and_path


def clear(out: str) -> None:
    """Make ``out`` an empty directory (what Spark's ``mode("overwrite")`` does)."""
    remove(out)
    filesystem, path = _fs(out)
    filesystem.create_dir(path, recursive=True)


def remove(out: str) -> None:
    """Delete the directory ``out`` and what it holds, if it is there."""
    from pyarrow import fs

    filesystem, path = _fs(out)
    if filesystem.get_file_info(path).type != fs.FileType.NotFound:
        filesystem.delete_dir(path)


def done(out: str) -> None:
    """Mark ``out`` complete, as Spark's committer does (an empty ``_SUCCESS``)."""
    filesystem, path = _fs(out)
    with filesystem.open_output_stream(f"{path}/_SUCCESS"):
        pass


def files(out: str) -> list[str]:
    """The names of the Parquet files of the table ``out``, in name order."""
    from pyarrow import fs

    filesystem, path = _fs(out)
    return sorted(info.base_name for info in
                  filesystem.get_file_info(fs.FileSelector(path))
                  if info.base_name.endswith(".parquet") and not info.base_name.startswith("."))


def read(out: str, names: list[str], *, drop: tuple[str, ...] = (),
         keep: tuple[str, Any] | None = None) -> Iterator[Any]:
    """The rows of the files ``names`` of the table ``out`` as Arrow batches, without the
    columns ``drop``; with ``keep`` (a column and an Arrow array of values, a null among
    them matching nulls), only the rows whose value in that column is one of them."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    filesystem, path = _fs(out)
    for name in names:
        with filesystem.open_input_file(f"{path}/{name}") as f:
            table = pq.ParquetFile(f)
            columns = [c for c in table.schema_arrow.names if c not in drop]
            for batch in table.iter_batches(batch_size=READ_ROWS, columns=columns):
                if keep is not None:
                    batch = batch.filter(pc.is_in(batch[keep[0]], value_set=keep[1]))
                if batch.num_rows:
                    yield batch


class PartWriter:
    """Writes one task's batches of a table to ``out/<name>.parquet``."""

    def __init__(self, out: str, name: str, schema: Any):
        import pyarrow.parquet as pq

        self.filesystem, directory = _fs(out)
        self.final = f"{directory}/{name}.parquet"
        self.tmp = f"{directory}/.{name}.{uuid.uuid4().hex}.tmp"
        self.rows = 0
        self.writer = pq.ParquetWriter(self.tmp, schema, filesystem=self.filesystem,
                                       compression="snappy")

    def write(self, batch: Any) -> None:
        self.rows += batch.num_rows
        self.writer.write_batch(batch)

    def close(self) -> Any:
        """Finish the file, move it into place; its summary as an Arrow batch."""
        import pyarrow as pa

        self.writer.close()
        self.filesystem.move(self.tmp, self.final)
        return pa.RecordBatch.from_arrays(
            [pa.array([os.path.basename(self.final)]), pa.array([self.rows], pa.int64())],
            schema=summary_schema())

    def abort(self) -> None:
        self.writer.close()
        self.filesystem.delete_file(self.tmp)
