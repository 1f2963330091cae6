"""Live TubeMQ traffic from Python: calls over sockets with every byte kept
(:mod:`~nsqviz.tubemq.live.rpc`), a stepping session for notebooks
(:mod:`~nsqviz.tubemq.live.session`), and an asyncio producer and consumer
(:mod:`~nsqviz.tubemq.live.clients`) -- all on the codec's client role."""

from nsqviz.tubemq.live.clients import Batch, ClientError, Consumer, Producer, Received
from nsqviz.tubemq.live.rpc import AsyncChannel, Call, CallFailed, Channel

__all__ = ["AsyncChannel", "Batch", "Call", "CallFailed", "Channel", "ClientError",
           "Consumer", "Producer", "Received"]
