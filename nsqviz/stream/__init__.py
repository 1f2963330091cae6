"""Protocol-independent stream reassembly: chunks in, frames with provenance out."""

from nsqviz.stream import reassembly
from nsqviz.stream.direction import Direction
from nsqviz.stream.reassembly import *  # noqa: F403 -- as reassembly.__all__ names them

__all__ = ["Direction"]
__all__ += reassembly.__all__
