"""Protocol-independent stream reassembly: chunks in, frames with provenance out."""

from nsqviz.stream.direction import Direction
from nsqviz.stream.reassembly import (
    Buffer,
    FramingError,
    FramingRule,
    Garbage,
    RawFrame,
    Reassembler,
    Source,
    StreamEvent,
    Truncated,
)

__all__ = [
    "Buffer",
    "Direction",
    "RawFrame",
    "FramingError",
    "FramingRule",
    "Garbage",
    "Reassembler",
    "Source",
    "StreamEvent",
    "Truncated",
]
