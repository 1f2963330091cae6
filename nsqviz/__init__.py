"""nsqviz: see the NSQ V2 wire protocol, byte by byte, live, in captures and on Spark."""

__version__ = "0.1.0"
