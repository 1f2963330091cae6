"""Stepping through live NSQ sessions: one command at a time, every byte recorded."""

from nsqviz.session.client import (
    NSQD_CHOICE,
    Arrival,
    Connection,
    Session,
    Step,
    default_broker,
    nsqd_choice,
    start_server,
)

__all__ = [
    "NSQD_CHOICE", "Arrival", "Connection", "Session", "Step", "default_broker", "nsqd_choice",
    "start_server",
]
