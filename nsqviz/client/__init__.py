"""An asyncio NSQ client library on the project's sans-IO codec, following seed 002's guide.

* :class:`Consumer` -- discovery through nsqlookupd, RDY management, backoff, graceful
  close (see :mod:`nsqviz.client.consumer` for the rules, one by one);
* :class:`Producer` -- PUB/MPUB/DPUB to a failover pool, size checks, MPUB splitting;
* :class:`SyncConsumer` / :class:`SyncProducer` -- blocking wrappers for notebooks;
* :class:`Config` -- the options (go-nsq/pynsq names); backoff strategies in
  :mod:`nsqviz.client.backoff`.
"""

from nsqviz.client.backoff import ExponentialBackoff, LinearBackoff
from nsqviz.client.config import Config
from nsqviz.client.conn import ConnectionFailed, NSQConnection, NSQError
from nsqviz.client.consumer import Consumer
from nsqviz.client.message import Message
from nsqviz.client.producer import MessageTooBig, Producer, split_mpub
from nsqviz.client.sync import SyncConsumer, SyncProducer

__all__ = [
    "Config",
    "ConnectionFailed",
    "Consumer",
    "ExponentialBackoff",
    "LinearBackoff",
    "Message",
    "MessageTooBig",
    "NSQConnection",
    "NSQError",
    "Producer",
    "SyncConsumer",
    "SyncProducer",
    "split_mpub",
]
