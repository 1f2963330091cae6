"""Stepping through live NSQ sessions: one command at a time, every byte recorded."""

from nsqviz.session.client import Arrival, Connection, Session, Step, default_broker

__all__ = ["Arrival", "Connection", "Session", "Step", "default_broker"]
