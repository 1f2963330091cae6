"""The packets and frames tables as Spark schemas, from :mod:`nsqviz.records`' Arrow ones
(declared once there; the pipeline only converts them), and the row a decoding task
gives when it writes its own Parquet file (:func:`source_summary_schema`)."""

from __future__ import annotations

from functools import cache
from typing import Any

from pyspark.sql.pandas.types import from_arrow_schema

from nsqviz.pipeline.sink import summary_schema
from nsqviz.records import frame_schema, packet_schema

__all__ = ["FRAME_SCHEMA", "PACKET_SCHEMA", "SUMMARY_SCHEMA", "source_summary_schema"]


@cache
def source_summary_schema() -> Any:
    """A decoding task's row: the file it wrote, its rows, and its
    :class:`~nsqviz.pipeline.tally.Tally` (null unless asked for)."""
    import pyarrow as pa

    return summary_schema().append(pa.field("tally", pa.binary()))


PACKET_SCHEMA = from_arrow_schema(packet_schema())
FRAME_SCHEMA = from_arrow_schema(frame_schema())
SUMMARY_SCHEMA = from_arrow_schema(source_summary_schema())
