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
"""

from __future__ import annotations

import os
import uuid
from functools import cache
from typing import Any

__all__ = ["PartWriter", "clear", "done", "remove", "summary_schema"]


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
