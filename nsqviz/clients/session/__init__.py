"""Stepping through live sessions in a notebook: one command at a time, every byte recorded.

NSQ's session (:mod:`~nsqviz.clients.session.nsq`, whose names this package exports) and
TubeMQ's (:mod:`~nsqviz.clients.session.tubemq`) sit side by side and tell a learner the
same things the same way (:mod:`~nsqviz.clients.session.outcomes`); an NSQ session's
record (:mod:`~nsqviz.clients.session.entries`) is saved as JSON or pcap by
:mod:`~nsqviz.clients.session.transcript`. :mod:`~nsqviz.clients.session.sticky` sends
frames through a real loopback connection to show how TCP cuts and glues them (粘包).
"""

from nsqviz.clients.session.nsq import (
    NSQD_CHOICE,
    Arrival,
    Connection,
    Session,
    Step,
    default_broker,
    nsqd_choice,
    start_server,
)
from nsqviz.clients.session.outcomes import SessionClosed

__all__ = [
    "NSQD_CHOICE", "Arrival", "Connection", "Session", "SessionClosed", "Step",
    "default_broker", "nsqd_choice", "start_server",
]
