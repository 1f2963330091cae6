"""Live TubeMQ traffic from Python: calls over sockets with every byte kept
(:mod:`~nsqviz.clients.tubemq.rpc`) and an asyncio producer and consumer
(:mod:`~nsqviz.clients.tubemq.clients`) -- both on the codec's client role. The notebooks'
stepping session (:mod:`nsqviz.clients.session.tubemq`) makes its calls with the same
channels."""

from nsqviz.clients.tubemq.clients import Batch, ClientError, Consumer, Producer, Received
from nsqviz.clients.tubemq.rpc import AsyncChannel, Call, CallFailed, Channel

__all__ = ["AsyncChannel", "Batch", "Call", "CallFailed", "Channel", "ClientError",
           "Consumer", "Producer", "Received"]
