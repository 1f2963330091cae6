"""Sans-IO NSQ connections, one object per role, in the style of h11.

A :class:`ClientConnection` or :class:`ServerConnection` owns no socket, no thread and
no clock. Bytes that arrived go into ``receive(data)``, which returns the events they
completed; an event you want to send goes into ``send(event)``, which returns the bytes
to write. In between, the object tracks what the protocol says about the connection --
magic sent, identified, authenticated, subscribed, RDY, messages in flight, closing,
compression -- and refuses or reports what breaks it.

Both directions use the same pipeline: optional decompression, the stream
:class:`~nsqviz.stream.Reassembler` with NSQ's framing rule, then the grammar's fast
path. That is what lets the broker, the notebook session, pcap replay and Spark show the
same events for the same bytes.

Misuse by *us* raises :class:`LocalProtocolError` from ``send`` (h11's rule: you cannot
send what the protocol forbids -- unless you ask with ``check=False``, which is how a
notebook shows what nsqd answers to a bad command). Misbehaviour by the *peer* is data:
``receive`` returns a :class:`~nsqviz.nsq.events.Violation` carrying the error nsqd
v1.3.0 would answer with, and after a fatal one the connection is ``CLOSED``.

The connection objects live in :mod:`nsqviz.nsq.connection` (what both roles share),
:mod:`nsqviz.nsq.client_connection` and :mod:`nsqviz.nsq.server_connection`; this module
gathers them under the name they have always been imported by.
"""

from __future__ import annotations

from nsqviz.nsq.client_connection import ClientConnection
from nsqviz.nsq.connection import DEFAULT_MAX_RDY_COUNT
from nsqviz.nsq.observer import Observer
from nsqviz.nsq.server_connection import ServerConfig, ServerConnection
from nsqviz.nsq.states import State
from nsqviz.sansio import LocalProtocolError, ProtocolError

__all__ = [
    "DEFAULT_MAX_RDY_COUNT",
    "ClientConnection",
    "LocalProtocolError",
    "Observer",
    "ProtocolError",
    "ServerConfig",
    "ServerConnection",
    "State",
]
