"""NSQ protocol V2: events, sans-IO connections, grammar errors -- from one place.

As with h11, a newcomer needs only this package::

    from nsqviz.nsq import ClientConnection, Magic, Sub

    conn = ClientConnection()
    wire = conn.send(Magic()) + conn.send(Sub("orders", "audit"))
    for event in conn.receive(bytes_from_nsqd):
        ...

The modules behind it: :mod:`~nsqviz.nsq.events` (what happens on a connection),
:mod:`~nsqviz.nsq.connection` (the connection objects), :mod:`~nsqviz.nsq.observer` (the
capture :class:`Observer`), :mod:`~nsqviz.nsq.compression` (snappy, DEFLATE),
:mod:`~nsqviz.nsq.grammar` (the ``construct`` definition of every byte),
:mod:`~nsqviz.nsq.fastpath` (its struct-based twin for hot loops),
:mod:`~nsqviz.nsq.framing` (where frames end), :mod:`~nsqviz.nsq.labels` (events as text),
and the tables every one of them reads: :mod:`~nsqviz.nsq.commands` (one entry per verb),
:mod:`~nsqviz.nsq.states` (the transition table), :mod:`~nsqviz.nsq.errors` (nsqd's codes).
"""

from nsqviz.nsq import events
from nsqviz.nsq.client_connection import ClientConnection
from nsqviz.nsq.commands import COMMANDS, CommandSpec
from nsqviz.nsq.errors import ErrorCode
from nsqviz.nsq.events import *  # noqa: F403 -- every event, as events.__all__ names them
from nsqviz.nsq.grammar_errors import GrammarError
from nsqviz.nsq.labels import command_label, event_label
from nsqviz.nsq.observer import Observer
from nsqviz.nsq.server_connection import ServerConfig, ServerConnection
from nsqviz.nsq.states import TRANSITIONS, Role, State
from nsqviz.sansio import LocalProtocolError, ProtocolError
from nsqviz.stream import Direction

__all__ = [
    # connections
    "ClientConnection",
    "ServerConnection",
    "ServerConfig",
    "Observer",
    "Direction",
    # tables
    "COMMANDS",
    "CommandSpec",
    "TRANSITIONS",
    "Role",
    "State",
    "ErrorCode",
    # errors
    "ProtocolError",
    "LocalProtocolError",
    "GrammarError",
    # text
    "command_label",
    "event_label",
]
__all__ += events.__all__
