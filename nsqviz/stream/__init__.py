"""Protocol-independent stream reassembly: chunks in, frames with provenance out."""

from nsqviz.stream.reassembly import (
    Frame,
    FramingError,
    FramingRule,
    Garbage,
    Reassembler,
    Source,
    StreamEvent,
    Truncated,
)

__all__ = [
    "Frame",
    "FramingError",
    "FramingRule",
    "Garbage",
    "Reassembler",
    "Source",
    "StreamEvent",
    "Truncated",
]
