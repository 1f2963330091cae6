"""The packets and frames tables as Spark schemas, from :mod:`nsqviz.records`' Arrow ones
(declared once there; the pipeline only converts them)."""

from __future__ import annotations

from pyspark.sql.pandas.types import from_arrow_schema

from nsqviz.pipeline.sink import summary_schema
from nsqviz.records import frame_schema, packet_schema

__all__ = ["FRAME_SCHEMA", "PACKET_SCHEMA", "SUMMARY_SCHEMA"]

PACKET_SCHEMA = from_arrow_schema(packet_schema())
FRAME_SCHEMA = from_arrow_schema(frame_schema())
SUMMARY_SCHEMA = from_arrow_schema(summary_schema())
