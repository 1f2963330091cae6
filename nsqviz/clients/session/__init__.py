"""Stepping through live NSQ sessions: one command at a time, every byte recorded."""

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
