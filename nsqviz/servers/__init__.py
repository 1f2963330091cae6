"""The servers, side by side, and what they share.

* :mod:`nsqviz.servers.nsqd` -- the nsqd-compatible broker (``nsqviz broker``);
* :mod:`nsqviz.servers.nsqlookupd` -- the nsqlookupd-compatible discovery service
  (``nsqviz lookupd``);
* :mod:`nsqviz.servers.tubemq` -- the simulated TubeMQ Master and Brokers
  (``nsqviz tubemq-sim``);
* :mod:`nsqviz.servers.authd` -- an nsqd auth service (``--auth-http-address``) and a
  throwaway TLS certificate, for the lessons on AUTH and TLS;
* their plumbing, written once: :mod:`~nsqviz.servers.listen` (bind address, backlog,
  closing with unread input), :mod:`~nsqviz.servers.httpd` (the HTTP/1.1 server of nsqd's
  and nsqlookupd's APIs), :mod:`~nsqviz.servers.goflags` (the NSQ release they report, Go
  durations), :mod:`~nsqviz.servers.embedded` (a server in-process on a loop of its own);
* :mod:`nsqviz.servers.peers` -- the real NSQ programs the servers are tested against,
  and ``nsqviz broker`` run as a process the same way.

Each server speaks through its protocol's sans-IO codec (:mod:`nsqviz.nsq`,
:mod:`nsqviz.lookupd`, :mod:`nsqviz.tubemq`) and makes no protocol decision of its own.
"""
