"""A simulated Apache InLong TubeMQ Master and Brokers, for real TubeMQ clients.

No runnable TubeMQ server can be had on a workshop machine, so the project brings one
faithful enough that a learner sees the real sequences byte for byte and a real client
(Apache InLong's Go client) works against it unchanged: producers register, heartbeat
and send; consumers register, are given partitions by the Master's rebalance events,
register to Broker partitions, fetch, commit and close; errors carry the real codes.
Three ways to run it:

* command line: ``nsqviz tubemq-sim --topic demo --data-path ./tubemq`` (Master on 8715,
  Brokers from 8123; SIGTERM/SIGINT stop it gracefully);
* in-process: ``with EmbeddedSim(topics=("demo",)) as sim: ... sim.master_address``;
* without sockets: :class:`Simulation`, the model the servers run.
"""

from nsqviz.servers.tubemq.cluster import SimConfig
from nsqviz.servers.tubemq.embedded import EmbeddedSim
from nsqviz.servers.tubemq.server import SimServer
from nsqviz.servers.tubemq.state import Simulation

__all__ = ["EmbeddedSim", "SimConfig", "SimServer", "Simulation"]
