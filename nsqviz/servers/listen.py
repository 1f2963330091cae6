"""How every server here listens: the one bind-address rule, the listen backlog, and
closing as a Go server closes with input it has not read.

**Bind address.** Every server the project starts -- ``nsqviz broker``, ``nsqviz
lookupd``, ``nsqviz tubemq-sim``, the embedded servers and the helper services the
notebooks and tests start -- listens on loopback (:data:`LOOPBACK`) unless told
otherwise. Its users run it on a laptop or on Binder, and the HTTP admin endpoints
(create, delete, pause and empty topics and channels) have no authentication, as in
nsqd and nsqlookupd. So binding every interface is an explicit choice:
``0.0.0.0:PORT`` (IPv4), ``[::]:PORT`` (IPv6) or, as Go reads it, an empty host
``:PORT``. (nsqlookupd itself defaults to ``0.0.0.0``; nsqd to ``0.0.0.0`` too.)

**Closing with unread input.** nsqd and nsqlookupd read the 4-byte magic alone; when
they close after a bad one, bytes the client sent after it are still in the kernel, which
then answers the close with an RST, not a FIN. Our servers have read those bytes, so
:func:`close_unread` tells the kernel to do the same (``SO_LINGER`` 0, once the error
has been written).

**Releasing a closed connection.** What a connection leaves behind must be freed when it
ends, by reference counting, not whenever the cyclic collector next walks the heap: the
broker runs with a lazy collector (``nsqviz.servers.nsqd.cli.GC_THRESHOLDS``), and a health
checker's connect/close churn otherwise piles closed sockets up by the hundred thousand.
Python 3.11's selector transport keeps a bound method of itself (``_read_ready_cb``, a
cycle CPython 3.12 breaks in ``close()``, python/cpython#100348), so :func:`release`
breaks it once the transport is closed.

**Backlog.** The kernel's queue of connections not yet accepted is the system's
maximum, as Go's ``net.Listen`` gives nsqd and nsqlookupd
(``/proc/sys/net/core/somaxconn``): asyncio's default of 100 made a burst of 500
connects wait about a second for SYN retransmits. But asyncio also accepts as many
connections in one turn of its loop as the backlog it is given, before serving any of
them; with the system's maximum, a server that fell behind a connect/close churn took in
thousands of already-closed connections at once (+50 MB of live objects at the peak of
300k cycles). So :func:`start_serving` gives asyncio :data:`ACCEPT_BATCH` and widens
the kernel's queue after: a burst waits in the kernel, and is taken in turns.
"""

from __future__ import annotations

import asyncio
import os
import socket
import struct
import sys
from collections.abc import Callable

__all__ = ["ACCEPT_BATCH", "LOOPBACK", "bind_help", "close_unread", "listen_backlog",
           "release", "split_address", "start_serving"]

ACCEPT_BATCH = 100
"""Connections one turn of the event loop accepts at most (see Backlog above)."""

LOOPBACK = "127.0.0.1"
"""Where every server listens by default."""

ADMIN = ("the HTTP admin endpoints (creating, deleting, pausing and emptying topics and "
         "channels) have no authentication")


def bind_help(everywhere: str = "--tcp-address/--http-address 0.0.0.0:PORT (every IPv4 "
                                 "interface) or [::]:PORT",
              unguarded: str = ADMIN) -> str:
    """The rule as a server command's ``--help`` says it: how to bind every interface
    with that command's options, and what is then open to anyone."""
    return (f"It listens on loopback ({LOOPBACK}) only, by default. To accept connections "
            f"from other machines give {everywhere}; {unguarded}, so do that only on a "
            "network you trust.")


def split_address(address: str) -> tuple[str, int]:
    """``host:port`` (``[v6]:port`` too) as a host and a port to bind; an empty host is
    every interface, as Go's ``net.Listen`` reads ``:4150``."""
    host, _, port = address.rpartition(":")
    return host.strip("[]") or "0.0.0.0", int(port)


def close_unread(transport: asyncio.Transport) -> None:
    """Close as a server that had not read all its input: an RST after what was
    written (unless some of that still waits in our buffer: then a plain close, so that
    it is not lost)."""
    sock = transport.get_extra_info("socket")
    if sock is not None and not transport.get_write_buffer_size():
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    transport.close()


def release(transport: asyncio.BaseTransport) -> None:
    """Break the reference cycle of a closed transport (Python 3.11's selector transport
    holds a bound method of itself until the cyclic collector finds it), so that it, its
    socket and its protocol are freed as soon as the last reference goes."""
    state = vars(transport)
    if sys.version_info < (3, 12) and "_read_ready_cb" in state and transport.is_closing():
        state["_read_ready_cb"] = None


async def start_serving(factory: Callable[[], asyncio.BaseProtocol], host: str,
                        port: int) -> asyncio.base_events.Server:
    """Listen on ``host:port`` for connections each served by a ``factory()``
    protocol: the kernel queues up to :func:`listen_backlog` of them, the loop takes
    :data:`ACCEPT_BATCH` a turn."""
    loop = asyncio.get_running_loop()
    server = await loop.create_server(factory, host, port, reuse_address=True,
                                      backlog=ACCEPT_BATCH)
    for listening in server.sockets:  # asyncio's wrappers have no listen(): a duplicate
        with socket.socket(fileno=os.dup(listening.fileno())) as same:
            same.listen(listen_backlog())
    return server


def listen_backlog() -> int:
    """``somaxconn`` as Go reads it (capped at 65535), else ``socket.SOMAXCONN``."""
    try:
        with open("/proc/sys/net/core/somaxconn") as f:
            n = int(f.read())
    except (OSError, ValueError):
        return socket.SOMAXCONN
    return min(n, 65535) if n > 0 else socket.SOMAXCONN
