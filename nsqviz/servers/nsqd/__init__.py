"""An nsqd v1.3.0-compatible broker (TCP protocol V2 + HTTP API) on asyncio.

Real NSQ clients (pynsq, gnsq, nsqjs ...) use it unchanged, so a workshop needs nothing
but ``pip install``. Every byte goes through the project's sans-IO codec
(:mod:`nsqviz.nsq.connection`), so what a notebook shows of its traffic is what the grammar
says. Three ways to run it:

* command line: ``nsqviz broker --tcp-address 127.0.0.1:4150 --data-path ./nsqd`` (nsqd's
  flag names and defaults; SIGTERM/SIGINT stop it gracefully);
* in-process: ``with EmbeddedBroker() as b: ... b.tcp_address`` (free loopback ports, a
  background event-loop thread);
* in tests: the ``broker`` pytest fixture in ``tests/conftest.py``.

Durability is nsqd's, without its weakest moment. With ``--data-path``, a topic or
channel keeps up to ``--mem-queue-size`` messages in memory and writes the rest to its
disk queue (:mod:`nsqviz.servers.nsqd.diskqueue`) *before* the publish's ``OK`` is sent, so
every acknowledged message past the memory queue survives the broker process being
killed (SIGKILL, the OOM killer) at any moment; a power cut spares what was fsynced
(``--sync-every`` messages, ``--sync-timeout``). What is only in memory -- the memory
queues, in-flight and deferred messages -- is lost on SIGKILL, as it is with nsqd; a
graceful stop (SIGTERM/SIGINT) writes it all to disk first. ``--mem-queue-size 0`` sends
every message to disk. nsqd itself, killed right after an ``OK``, can also lose what
its disk queue had not yet synced and deliver some messages twice after the restart
(``tests/servers/nsqd/test_crash.py`` runs both and prints the counts). The disk queue
files are nsqd's own, byte for byte; a damaged record in one -- a flipped byte in a size
or an id -- is set aside when it is read back (logged with its offset, kept in a
``.bad`` file beside the queue) and every intact record after it delivered, where nsqd
gives up on the rest of the file (``tests/servers/nsqd/test_corrupt_queue.py``).
"""

from nsqviz.servers.nsqd.embedded import EmbeddedBroker
from nsqviz.servers.nsqd.options import Options
from nsqviz.servers.nsqd.server import Broker

__all__ = ["Broker", "EmbeddedBroker", "Options"]
