"""Live TubeMQ traffic from Python: calls over sockets with every byte kept
(:mod:`~nsqviz.tubemq_client.rpc`), a stepping session for notebooks
(:mod:`~nsqviz.tubemq_client.session`), and an asyncio producer and consumer
(:mod:`~nsqviz.tubemq_client.clients`) -- all on the codec's client role."""

from nsqviz.tubemq_client.clients import Batch, ClientError, Consumer, Producer, Received
from nsqviz.tubemq_client.rpc import AsyncChannel, Call, CallFailed, Channel

__all__ = ["AsyncChannel", "Batch", "Call", "CallFailed", "Channel", "ClientError",
           "Consumer", "Producer", "Received"]
