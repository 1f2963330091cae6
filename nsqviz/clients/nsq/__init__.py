"""An asyncio NSQ client library on the project's sans-IO codec, following seed 002's guide.

* :class:`Consumer` -- discovery through nsqlookupd, RDY management, backoff, graceful
  close (see :mod:`nsqviz.clients.nsq.consumer` for the rules, one by one);
* :class:`Producer` -- PUB/MPUB/DPUB to a failover pool, size checks, MPUB splitting;
* :class:`SyncConsumer` / :class:`SyncProducer` -- blocking wrappers for notebooks;
* :class:`Config` -- the options (go-nsq/pynsq names); backoff strategies in
  :mod:`nsqviz.clients.nsq.backoff`.
"""

from nsqviz.clients.nsq.backoff import ExponentialBackoff, LinearBackoff
from nsqviz.clients.nsq.config import Config
from nsqviz.clients.nsq.conn import ConnectionFailed, NSQConnection, NSQError
from nsqviz.clients.nsq.consumer import Consumer
from nsqviz.clients.nsq.message import Message
from nsqviz.clients.nsq.producer import MessageTooBig, Producer, split_mpub
from nsqviz.clients.nsq.sync import SyncConsumer, SyncProducer

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
