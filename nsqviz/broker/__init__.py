"""An nsqd-compatible broker (protocol V2 + HTTP API) on asyncio and the shared codec."""

from nsqviz.broker.embedded import EmbeddedBroker
from nsqviz.broker.options import Options
from nsqviz.broker.server import Broker

__all__ = ["Broker", "EmbeddedBroker", "Options"]
