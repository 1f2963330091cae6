"""An nsqd v1.3.0-compatible broker (TCP protocol V2 + HTTP API) on asyncio.

Real NSQ clients (pynsq, gnsq, nsqjs ...) use it unchanged, so a workshop needs nothing
but ``pip install``. Every byte goes through the project's sans-IO codec
(:mod:`nsqviz.nsq.codec`), so what a notebook shows of its traffic is what the grammar
says. Three ways to run it:

* command line: ``nsqviz broker --tcp-address 127.0.0.1:4150 --data-path ./nsqd`` (nsqd's
  flag names and defaults; SIGTERM/SIGINT stop it gracefully);
* in-process: ``with EmbeddedBroker() as b: ... b.tcp_address`` (free loopback ports, a
  background event-loop thread);
* in tests: the ``broker`` pytest fixture in ``tests/conftest.py``.
"""

from nsqviz.broker.embedded import EmbeddedBroker
from nsqviz.broker.options import Options
from nsqviz.broker.server import Broker

__all__ = ["Broker", "EmbeddedBroker", "Options"]
